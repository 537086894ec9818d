// The shell never loses or changes data: ids chosen inside the write transaction while other processes write,
// files that come back from an export as they went in, saved filters on saved filters, writes that ignore a filter,
// replacements that ask, names that need backticks.

import DocStore
import Foundation
import TestSupport
import Testing

extension ShellSessions {
@Suite struct ShellDataSafetyTests {
    /// A CSV of `rows` airports without ids, some of whose codes look like numbers.
    private static func airports(_ rows: Int) -> String {
        var text = "name,iata,zip,latitude,state\n"
        for i in 0..<rows {
            let iata = ["0E0", "0E8", "ABC", "1e5"][i % 4]
            text += "Airport \(i),\(iata),\(String(format: "%05d", i % 1000)),\(Double(i % 90) + 0.5),"
                + "\(["CA", "NM", "TX"][i % 3])\n"
        }
        return text
    }

    @Test func anImportAndAnotherProcessesInsertsNeverTakeTheSameIDs() throws {
        let sandbox = try ShellSandbox()
        var rows = "name,kind\n"
        for i in 0..<20_000 { rows += "Airport \(i),small\n" }
        try sandbox.write(rows, to: "airports.csv")
        let store = sandbox.storePath
        for round in 0..<2 {
            let collection = "cc\(round)"
            try sandbox.prepare([#"\#(collection).insert({"seed": true})"#])
            // Inserts, one commit each, for as long as the import runs and longer.
            let markers = 250
            let inserts = (0..<markers).map { #"\#(collection).insert({"marker": \#($0)})"# }.joined(separator: "\n")
            let inserting = Background { try sandbox.run([store], input: inserts + "\n", timeout: 120) }
            let importing = Background {
                try sandbox.run(["--yes", store, ".import airports.csv \(collection)"], timeout: 120)
            }
            let imported = try importing.wait()
            let inserted = try inserting.wait()
            #expect(imported.status == 0, "\(imported)")
            #expect(inserted.status == 0, "\(inserted)")
            // Every insert was acknowledged, and every acknowledged insert is there with every imported row.
            #expect(inserted.stdout.components(separatedBy: "Inserted 1 document").count - 1 == markers, "\(inserted)")
            #expect(try sandbox.count("\(collection).include(marker != nil).count()") == markers)
            #expect(try sandbox.count("\(collection).include(kind == \"small\").count()") == 20_000)
            #expect(try sandbox.count("\(collection).count()") == 20_001 + markers)
        }
    }

    /// In a script, a statement that fails inside a transaction makes its commit refuse: no one saw the failure to
    /// decide, and applying the others alone would leave a change half made (the first half of a transfer, say).
    /// And a script that ends with changes still pending ends with status 1.
    @Test func aScriptWhoseTransactionHadAFailureCommitsNothing() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"accounts.insert({"id": 1, "balance": 100})"#, #"accounts.insert({"id": 2, "balance": 0})"#])
        let script = """
            begin
            accounts.include(id == 1).update(inc: {"balance": -100})
            accounts.include(id == 2).updat(inc: {"balance": 100})
            commit
            rollback
            accounts.sortBy(id).select(balance)

            """
        let result = try sandbox.run(["--yes", sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("commit refused: a statement of this transaction failed"), "\(result.stderr)")
        #expect(!result.stdout.contains("Committed"), "\(result)")
        #expect(result.stdout.contains("100"), "\(result)")
        let ended = try sandbox.run([sandbox.storePath], input: "begin\n" + #"accounts.insert({"id": 3})"# + "\n")
        #expect(ended.status == 1, "\(ended)")
        #expect(ended.stderr.contains("not committed"), "\(ended)")
        let after = try sandbox.run([sandbox.storePath], input: "accounts.count()\n")
        #expect(after.stdout == "2\n", "\(after)")
    }

    @Test func twoShellsInTransactionsBothCommitTheirInserts() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        // Each shell begins, inserts without an id, and waits until both have done so before committing.
        let ready = sandbox.path("ready")
        try FileManager.default.createDirectory(atPath: ready, withIntermediateDirectories: true)
        func script(_ name: String) -> String {
            """
            begin
            people.insert({"name": "\(name)"})
            .status
            """
        }
        let a = try PipedShell(sandbox, [sandbox.storePath])
        let b = try PipedShell(sandbox, [sandbox.storePath])
        try a.send(script("FromA") + "\n")
        try b.send(script("FromB") + "\n")
        try a.waitFor("insert 1 document into people")
        try b.waitFor("insert 1 document into people")
        try a.send("commit\npeople.count()\n")
        try a.waitFor("Committed 1 change")
        try b.send("commit\npeople.count()\n")
        let outA = try a.finish()
        let outB = try b.finish()
        #expect(outA.status == 0 && outB.status == 0, "\(outA)\n\(outB)")
        #expect(outA.stdout.contains("Pending: insert 1 document; ids for those without one are chosen at commit."),
                "\(outA)")
        #expect(outB.stdout.contains("Committed 1 change:\n  insert 1 document into people: id 5"), "\(outB)")
        #expect(try sandbox.count(#"people.include(name == "FromA" || name == "FromB").count()"#) == 2)
        #expect(try sandbox.count("people.count()") == 5)
    }

    @Test func aSavedFilterOnASavedFilterAnswersLikeTheWholeQuery() throws {
        let sandbox = try ShellSandbox()
        try sandbox.write(Self.airports(300), to: "airports.csv")
        try sandbox.prepare([".import airports.csv airports"])
        let whole = try #require(try sandbox.count(#"airports.include(state == "CA").include(latitude > 40).count()"#))
        #expect(whole > 0)
        let saved = try sandbox.run([sandbox.storePath, #".save ca airports.include(state == "CA")"#,
                                     ".save north ca.include(latitude > 40)", "north.count()", "north.explain()",
                                     ".unsave ca", "north.count()"])
        #expect(saved.status == 0, "\(saved)")
        #expect(saved.stdout.containsInOrder([
            #"Saved north = airports.include(state == "CA").include(latitude > 40) (the steps of ca written out)"#,
            "\n\(whole)\n", "airports", "Forgot the saved filter ca.", "\n\(whole)\n"]), "\(saved)")
        #expect(!saved.stdout.contains("no such collection"), "\(saved)")
    }

    /// Filters an older build kept as the shell's text: listed as written, used by name (on another such filter
    /// too), still reading their collection after it is renamed, and a base for a filter kept as a request.
    @Test func filtersKeptAsTextByAnOlderBuildStillWork() async throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let store = try await DocStore(path: sandbox.storePath)
        try await store.write { ctx in
            for (name, text) in [("adults", "people.include(age >= 18)"), ("active", "adults.include(active)")] {
                var filter = SavedFilter(name: name, query: Query("people"))
                filter.legacyText = text
                try ctx.saveFilter(filter)
            }
        }
        await store.close()
        let out = try sandbox.run(["--yes", sandbox.storePath, ".filters", "adults.count()", "active.count()",
                                   ".migrate v2 renameCollection people folk", "adults.count()",
                                   ".save young active.include(age < 50)", "young.count()", ".filters"])
        #expect(out.status == 0, "\(out)")
        #expect(out.stdout.containsInOrder([
            "active = people.include(age >= 18).include(active == true)\nadults = people.include(age >= 18)\n",
            "1\n1\n", "1\n",
            "Saved young = folk.include(age >= 18).include(active == true).include(age < 50) (the steps of active "
                + "written out)", "1\n", "adults = folk.include(age >= 18)\n",
            "young = folk.include(age >= 18).include(active == true).include(age < 50)\n"]), "\(out)")
    }

    @Test func aSavedFilterOnAQueryOfASavedFilterComposesToo() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let saved = try sandbox.run([sandbox.storePath, ".save grown people.include(age >= 10)",
                                     ".save grownActive grown.query().include(active)", "grownActive.count()"])
        #expect(saved.status == 0, "\(saved)")
        #expect(saved.stdout.contains("Saved grownActive = people.include(age >= 10).include(active == true) (the steps of grown written out)"), "\(saved)")
        #expect(saved.stdout.hasSuffix("\n1\n"), "\(saved)")
    }

    @Test func aPendingSaveWhoseDocumentsChangedSaysOnlyRollbackHelps() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try PipedShell(sandbox, [sandbox.storePath])
        // A save of a new document: confirmed as replacing nothing.
        try shell.send("begin\n" + #"people.save({"id": 9, "name": "Mine"})"# + "\n")
        try shell.waitFor("Pending: save 1 document (id 9).")
        // Another process makes a document 9: the save would now replace it without having asked.
        try sandbox.prepare([#"people.insert({"id": 9, "name": "Theirs"})"#])
        try shell.send("commit\n.status\nrollback\n" + #"people.include(id == 9)"# + "\n")
        let out = try shell.finish()
        #expect(out.stderr.contains("the pending save 1 document into people was confirmed for documents that another "
            + "writer has changed since (1 document of 'people' changed since they were read (none was there then): id 9 matches now). The 1 "
            + "change is still pending: rollback to drop it"), "\(out)")
        #expect(out.stdout.containsInOrder(["save 1 document into people", "Rolled back 1 pending change.", "Theirs"]),
                "\(out)")
    }

    @Test func aPendingUpdateAndDeleteOverAnotherProcessesCommitFailTheCommitNamingTheDocuments() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"c.insert([{"id": 1, "name": "Titanic"}, {"id": 2, "name": "Avatar", "dir": "C"}, "#
            + #"{"id": 3, "name": "Alien"}])"#])
        let shell = try PipedShell(sandbox, ["--yes", sandbox.storePath])
        try shell.send("begin\n" + #"c.include(name == "Titanic").update(set: {"dir": "A"})"# + "\n"
            + #"c.include(name == "Avatar").delete()"# + "\n" + #"c.include(name == "Alien").delete()"# + "\n")
        try shell.waitFor("Pending: delete 1 document from c.\nDelete 1 document from c? [y/N] y (--yes)\n"
            + "Pending: delete 1 document from c.")
        // Another process renames Titanic (so it no longer matches the update's filter) and changes Avatar.
        try sandbox.prepare([#"c.save({"id": 1, "name": "Titanic II"})"#,
                             #"c.include(name == "Avatar").update(set: {"dir": "B"})"#])
        try shell.send("commit\n.status\nrollback\n")
        let out = try shell.finish()
        #expect(out.stderr.contains("commit failed, so nothing was applied: the pending update 1 document of c"), "\(out)")
        #expect(out.stderr.contains("id 1 no longer matches"), "\(out)")
        #expect(out.stderr.contains("The 3 changes are still pending: rollback to drop them"), "\(out)")
        #expect(out.stdout.containsInOrder(["A transaction is open, with 3 pending changes", "Rolled back 3 pending changes."]),
                "\(out)")
        // The other process's commit stands, and none of the pending changes was applied.
        let left = try sandbox.documents("c.sortBy(id)")
        #expect(left.count == 3)
        #expect(left.first?["name"] as? String == "Titanic II" && left.first?["dir"] == nil, "\(left)")
        #expect(left.dropFirst().first?["dir"] as? String == "B", "\(left)")
    }

    @Test func aPendingDeleteOfDocumentsChangedElsewhereSaysWhichChanged() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"c.insert([{"id": 1, "name": "Avatar"}, {"id": 2, "name": "Avatar"}])"#])
        let shell = try PipedShell(sandbox, ["--yes", sandbox.storePath])
        try shell.send("begin\n" + #"c.include(name == "Avatar").delete()"# + "\n")
        try shell.waitFor("Pending: delete 2 documents from c.")
        try sandbox.prepare([#"c.include(id == 2).update(set: {"dir": "B"})"#, #"c.insert({"id": 3, "name": "Avatar"})"#])
        try shell.send("commit\n")
        let out = try shell.finish()
        #expect(out.stderr.contains("2 documents of 'c' changed since the 2 were read: id 2 was changed, 3 matches now"),
                "\(out)")
        #expect(try sandbox.count("c.count()") == 3)
    }

    @Test func aMigrationInThisShellOrAnotherProcessIsSeenByTheNextQuerysFieldKinds() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"c.insert([{"id": 1, "zip": "0150"}, {"id": 2, "zip": "2000"}, {"id": 3, "zip": "90"}])"#])
        // In this shell: the field's kinds are those after the migration.
        let here = try sandbox.run(["--yes", sandbox.storePath, #"c.include(zip == "90").count()"#,
                                    ".migrate v2 convertField c zip int", "c.include(zip > 100).count()"])
        #expect(here.status == 0, "\(here)")
        #expect(here.stdout.hasSuffix("\n2\n"), "\(here)")
        #expect(!here.stderr.contains("holds strings"), "\(here)")

        // In another process: a rename there, and this shell's next query knows the new name and not the old.
        let shell = try PipedShell(sandbox, [sandbox.storePath])
        try shell.send("c.include(zip > 100).count()\n")
        try shell.waitFor("2\n")
        try shell.send(".save big c.include(zip > 100)\n")
        try shell.waitFor("Saved big")
        try sandbox.prepare([".migrate v3 renameField c zip code"])
        try shell.send("c.groupBy(code).count()\nbig.count()\n")
        let out = try shell.finish()
        #expect(out.status == 0, "\(out)")
        #expect(!out.stderr.contains("no document of 'c' has a field 'code'"), "\(out)")
        // The saved filter still reads zip, which no document has now: said, of the filter.
        #expect(out.stderr.contains("in the saved filter 'big': no document of 'c' has a field 'zip'"), "\(out)")
    }

    @Test func textIsComparedIgnoringCaseAsSwiftWritesIt() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"c.insert([{"id": 1, "name": "Ann"}, {"id": 2, "name": "ANNA"}, {"id": 3, "name": "Bob"}, "#
            + #"{"id": 4, "name": 7}])"#])
        #expect(try sandbox.count(#"c.include(name.lowercased() == "ann").count()"#) == 1)
        #expect(try sandbox.count(#"c.include(name.lowercased() != "ann").count()"#) == 3)
        #expect(try sandbox.count(#"c.include(name.lowercased().hasPrefix("an")).count()"#) == 2)
        #expect(try sandbox.count(#"c.include(name.lowercased().contains("nn")).count()"#) == 2)
        #expect(try sandbox.count(#"c.include(name.localizedCaseInsensitiveContains("NN")).count()"#) == 2)
        #expect(try sandbox.count(#"c.include(name?.localizedStandardContains("o") == true).count()"#) == 1)
        let capitals = try sandbox.run([sandbox.storePath, #"c.include(name.lowercased() == "Ann").count()"#])
        #expect(capitals.stdout == "0\n", "\(capitals)")
        #expect(capitals.stderr.contains("has capitals, which lowercased() never has"), "\(capitals)")
        let number = try sandbox.run([sandbox.storePath, #"c.include(id.lowercased() == "1").count()"#])
        #expect(number.status != 0 && number.stderr.contains("not strings"), "\(number)")
    }

    @Test func anOptionalMethodsResultIsReadAsSwiftReadsIt() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"c.insert([{"id": 1, "t": "N512"}, {"id": 2, "t": "X1"}, {"id": 3}])"#])
        func ids(_ condition: String) throws -> [Int] {
            try sandbox.documents("c.include(\(condition)).sortBy(id)").compactMap { $0["id"] as? Int }
        }
        // As Swift evaluates `t?.hasPrefix("N5")` (nil where t is missing) against each test.
        #expect(try ids(#"t?.hasPrefix("N5") == true"#) == [1])
        #expect(try ids(#"t?.hasPrefix("N5") ?? false"#) == [1])
        #expect(try ids(#"t?.hasPrefix("N5") != true"#) == [2, 3])
        #expect(try ids(#"t?.hasPrefix("N5") == false"#) == [2])
        #expect(try ids(#"t?.hasPrefix("N5") != false"#) == [1, 3])
        #expect(try ids(#"t?.hasPrefix("N5") ?? true"#) == [1, 3])
    }

    @Test func verifyReadsTheFileAndSaysPendingChangesAreNotInIt() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let out = try sandbox.run([sandbox.storePath, "begin", #"fresh.insert({"a": 1})"#, ".verify fresh", ".verify people"])
        #expect(out.stderr.contains("'fresh' is made by a pending change: commit it to verify it"), "\(out)")
        #expect(out.stdout.contains("The pending changes are not in the file, and are not verified."), "\(out)")
        #expect(out.stdout.contains("collection 'people': 3 documents"), "\(out)")
    }

    @Test func findOrCreateWithoutAFilterIsRefused() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let out = try sandbox.run([sandbox.storePath, #"people.findOrCreate({"name": "New"})"#])
        #expect(out.status != 0)
        #expect(out.stderr.contains("findOrCreate finds a document that its filter matches, and without one any document "
            + "matches"), "\(out)")
        #expect(try sandbox.count("people.count()") == 3)
    }

    @Test func aCollectionWhoseNameIsNotAWordIsWrittenInBackticks() throws {
        let sandbox = try ShellSandbox()
        try sandbox.write(#"[{"id": 1, "species": "setosa"}, {"id": 2, "species": "virginica"}]"#, to: "iris.json")
        let run = try sandbox.run(["--yes", sandbox.storePath, ".import iris.json `iris data`",
                                   ".createIndex `by species` `iris data` species", ".indexes `iris data`",
                                   #"`iris data`.include(species == "setosa").count()"#, ".fields `iris data`",
                                   ".dropIndex `by species` `iris data`", ".drop `iris data`", ".collections"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.containsInOrder(["Imported 2 documents into iris data.", "iris data.by species: index on species",
                                             "\n1\n", "species", "Dropped index by species of iris data.",
                                             "Dropped collection iris data"]), "\(run)")
    }

    @Test func aCollectionAndASavedFilterCannotShareAName() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople + [".save ca people.include(age >= 18)"])
        try sandbox.write(#"[{"id": 1, "x": 1}]"#, to: "ca.json")
        let imported = try sandbox.run(["--yes", sandbox.storePath, ".import ca.json ca"])
        #expect(imported.status == 1, "\(imported)")
        #expect(imported.stderr.contains("a saved filter has that name"), "\(imported)")
        let inserted = try sandbox.run(["--yes", sandbox.storePath, #"ca.insert({"x": 1})"#])
        #expect(inserted.status == 1, "\(inserted)")
        #expect(inserted.stderr.contains("'ca' is a saved filter"), "\(inserted)")
        let saved = try sandbox.run([sandbox.storePath, ".save people people.include(age < 18)"])
        #expect(saved.status == 1, "\(saved)")
        #expect(saved.stderr.contains("collection's name"), "\(saved)")
        #expect(try sandbox.count("ca.count()") == 1)
    }

    @Test func aWriteAfterAFilterIsRefusedAndAReplacingSaveAsks() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let filtered = try sandbox.run([sandbox.storePath,
                                        #"people.include(city == "NOPE").save({"id": 1, "name": "overwritten"})"#])
        #expect(filtered.status == 1, "\(filtered)")
        #expect(filtered.stderr.contains("save does not use the steps before it"), "\(filtered)")
        let inserted = try sandbox.run([sandbox.storePath, #"people.sortBy(age).insert({"name": "X"})"#])
        #expect(inserted.status == 1, "\(inserted)")
        // Through a pipe, without --yes, a save that replaces is refused as a delete is.
        let replacing = try sandbox.run([sandbox.storePath, #"people.save({"id": 1, "name": "overwritten"})"#])
        #expect(replacing.status == 1, "\(replacing)")
        #expect(replacing.stderr.contains("refusing to replace 1 document of people"), "\(replacing)")
        #expect(try sandbox.count(#"people.include(id == 1 && name == "Ann" && age == 41).count()"#) == 1)
        // A save of a new document asks nothing; with --yes a replacement goes through, and says so.
        let new = try sandbox.run([sandbox.storePath, #"people.save({"id": 9, "name": "New"})"#])
        #expect(new.status == 0 && new.stdout.contains("Saved 1 document (id 9)."), "\(new)")
        let confirmed = try sandbox.run(["--yes", sandbox.storePath, #"people.save({"id": 1, "name": "Ann B"})"#])
        #expect(confirmed.status == 0, "\(confirmed)")
        #expect(confirmed.stdout.contains("Replace 1 existing document of people (id 1)? [y/N] y (--yes)"), "\(confirmed)")
        #expect(confirmed.stdout.contains("Saved 1 document (id 1), replacing 1."), "\(confirmed)")
        #expect(try sandbox.count("people.count()") == 4)
    }

    @Test func exportThenImportGivesBackTheSameDocumentsInEveryFormat() throws {
        let sandbox = try ShellSandbox()
        // Penguins-like data: names with spaces, NA for a missing number, dates, codes that look like numbers.
        let csv = """
            studyName,Sample Number,Individual ID,Date Egg,Body Mass (g),Sex,Comments,code
            PAL0708,1,N1A1,2007-11-11,3750,MALE,,007
            PAL0708,2,N1A2,2007-11-11,NA,FEMALE,"Not enough blood, for isotopes",0E0
            PAL0809,3,N2A1,2008-11-16,3250.5,NA,,1e5

            """
        try sandbox.write(csv, to: "penguins.csv")
        let store = sandbox.storePath
        let first = try sandbox.run(["--yes", store, ".import penguins.csv p --null NA --dates `Date Egg`"])
        #expect(first.status == 0, "\(first)")
        var statements: [String] = []
        for format in ["csv", "json", "ndjson"] {
            statements += [".export p out.\(format)", ".import out.\(format) p_\(format)",
                           ".export p_\(format) back_\(format).json"]
        }
        statements.append(".export p original.json")
        let run = try sandbox.run(["--yes", store] + statements)
        #expect(run.status == 0, "\(run)")
        let original = try sandbox.read("original.json")
        #expect(original.contains(#""Date Egg":{"$date":"2007-11-11T00:00:00.000Z"}"#), "\(original)")
        #expect(original.contains(#""Body Mass (g)":null"#), "\(original)")
        #expect(original.contains(#""code":"007""#) && original.contains(#""code":"0E0""#), "\(original)")
        for format in ["csv", "json", "ndjson"] {
            #expect(try sandbox.read("back_\(format).json") == original, "through \(format)")
        }
        // The dates compare as dates, and names with spaces are written in backticks.
        let query = try sandbox.run([store, #"p.include(`Date Egg` > date("2008-01-01")).count()"#,
                                     ".createIndex mass p `Body Mass (g)`", "p.include(`Body Mass (g)` > 3500).count()",
                                     ".fields p", "p.query().sortBy(`Sample Number`, .reverse).first"])
        #expect(query.status == 0, "\(query)")
        #expect(query.stdout.containsInOrder(["1\n", "Created index mass on p (index on `Body Mass (g)`)", "\n1\n",
                                              "`Body Mass (g)`", "N2A1"]), "\(query)")
    }
}
}

/// A value computed on another thread, waited for.
final class Background<T: Sendable>: @unchecked Sendable {
    // `@unchecked Sendable`: `result` is written once on the worker before `done` is signalled, and read after.
    private var result: Result<T, any Error>?
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> T) {
        DispatchQueue.global().async {
            self.result = Result(catching: body)
            self.done.signal()
        }
    }

    func wait() throws -> T {
        done.wait()
        return try result!.get()
    }
}

/// The shell on pipes, written to while it runs, so that two shells can be interleaved.
final class PipedShell {
    private let process = ChildProcess()
    private let input = Pipe()
    private let output = Collected()
    private let errors = Collected()
    private let reading = DispatchGroup()

    init(_ sandbox: ShellSandbox, _ arguments: [String]) throws {
        try DocStoreBinary.require()
        let stdout = Pipe(), stderr = Pipe()
        process.executableURL = URL(fileURLWithPath: DocStoreBinary.path)
        process.arguments = arguments
        process.environment = sandbox.environment
        process.currentDirectoryURL = URL(fileURLWithPath: sandbox.directory)
        process.standardInput = input
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        for (pipe, into) in [(stdout, output), (stderr, errors)] {
            let handle = pipe.fileHandleForReading
            DispatchQueue.global().async(group: reading) {
                while case let chunk = handle.availableData, !chunk.isEmpty { into.append(chunk) }
            }
        }
    }

    func send(_ text: String) throws { try input.fileHandleForWriting.write(contentsOf: Data(text.utf8)) }

    /// Waits until the output holds `text`, for at most 30 seconds.
    func waitFor(_ text: String) throws {
        for _ in 0..<3_000 {
            if String(decoding: output.load(), as: UTF8.self).contains(text) { return }
            usleep(10_000)
        }
        throw ShellTestError("'\(text)' did not appear; output so far:\n" + String(decoding: output.load(), as: UTF8.self)
            + "\nerrors:\n" + String(decoding: errors.load(), as: UTF8.self))
    }

    /// Closes the input and waits for the shell to end.
    func finish() throws -> ShellRun {
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        reading.wait()
        return ShellRun(status: process.terminationStatus, stdout: String(decoding: output.load(), as: UTF8.self),
                        stderr: String(decoding: errors.load(), as: UTF8.self))
    }
}
