// End-to-end tests of the `docstore` shell without a terminal: the real binary, started through `ChildProcess`
// (posix_spawn), its standard input, output and error all pipes. This file also holds the helpers the terminal tests
// share: where the binary is, and a temporary directory per test for the store, the history file and any files a test
// writes.

import Foundation
import Synchronization
import Testing
import TestSupport

// MARK: - Helpers shared with ReplTerminalTests

/// The `docstore` executable, built beside this test bundle (the package's executable product).
enum DocStoreBinary {
    static var path: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("docstore").path
    }

    /// Fails the test with a clear message when the binary is missing.
    static func require(sourceLocation: Testing.SourceLocation = #_sourceLocation) throws {
        try #require(FileManager.default.isExecutableFile(atPath: path),
                     "the docstore binary is missing at \(path): build the package's products with the tests",
                     sourceLocation: sourceLocation)
    }
}

/// How a run of the shell through pipes ended.
struct ShellRun: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String

    var description: String {
        "exit status \(status)\n--- stdout ---\n\(stdout)--- stderr ---\n\(stderr)--- end ---"
    }
}

/// A fresh temporary directory for one test: the store, the history file, and the files a test reads or writes.
/// Removed when the test is done.
final class ShellSandbox: Sendable {
    let directory: String

    init() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("docstore-shell-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // An empty readline init file, so that neither ~/.inputrc nor /etc/inputrc changes the keys the tests type.
        try Data().write(to: URL(fileURLWithPath: directory + "/inputrc"))
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The store most tests use.
    var storePath: String { path("people.db") }
    /// The history file; always set, so that no test touches the real one.
    var historyPath: String { path("history") }
    var inputrcPath: String { path("inputrc") }

    func path(_ name: String) -> String { directory + "/" + name }

    /// The environment the shell runs with: a history file, a home and a temporary directory of this sandbox.
    var environment: [String: String] {
        [
            "DOCSTORE_HISTORY": historyPath,
            "HOME": directory,
            "TMPDIR": directory,
            "INPUTRC": inputrcPath,
            "LANG": "C.UTF-8",
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
    }

    func write(_ text: String, to name: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path(name)))
    }

    func read(_ name: String) throws -> String {
        try String(decoding: Data(contentsOf: URL(fileURLWithPath: path(name))), as: UTF8.self)
    }

    /// Runs the shell with `arguments`, `input` on its standard input (a pipe, closed after the text), and
    /// standard output and error read from pipes. The shell is killed if it runs longer than `timeout` seconds.
    func run(_ arguments: [String], input: String = "", timeout: Double = 30, as user: ShellUser = .current) throws
        -> ShellRun {
        try DocStoreBinary.require()
        let bytes = Data(input.utf8)
        // The whole script goes into the pipe before the shell starts, so writing never waits for the shell
        // (and never meets a closed pipe when the shell exits without reading it); it must fit in the pipe.
        guard bytes.count < 60_000 else { throw ShellTestError("the script is too long for a pipe's buffer") }
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        try stdin.fileHandleForWriting.write(contentsOf: bytes)
        try stdin.fileHandleForWriting.close()

        let process = ChildProcess()
        let launcher = user.launcher
        process.executableURL = URL(fileURLWithPath: launcher.first ?? DocStoreBinary.path)
        process.arguments = launcher.isEmpty ? arguments : Array(launcher.dropFirst()) + [DocStoreBinary.path] + arguments
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()

        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let errors = Collected()
        let reading = DispatchGroup()
        let errorHandle = stderr.fileHandleForReading
        DispatchQueue.global().async(group: reading) { errors.store(errorHandle.readDataToEndOfFile()) }
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        reading.wait()
        process.waitUntilExit()
        watchdog.cancel()

        var status = process.terminationStatus
        if process.terminationReason == .uncaughtSignal { status += 128 }
        return ShellRun(status: status, stdout: String(decoding: output, as: UTF8.self),
                        stderr: String(decoding: errors.load(), as: UTF8.self))
    }

    /// Runs statements given as arguments against the sandbox's store, confirming with --yes, and requires success.
    @discardableResult
    func prepare(_ statements: [String], sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> ShellRun {
        let result = try run(["--yes", storePath] + statements)
        try #require(result.status == 0, "preparing the store failed: \(result)", sourceLocation: sourceLocation)
        return result
    }

    /// A count printed by the shell for `query` (a `.count()` statement), read by a separate process.
    func count(_ query: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> Int? {
        let result = try run([storePath, query])
        #expect(result.status == 0, "\(query): \(result)", sourceLocation: sourceLocation)
        return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The documents a query returns, as the shell prints them in `.mode json`, parsed.
    func documents(_ query: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> [NSDictionary] {
        let result = try run([storePath, ".mode json", query])
        try #require(result.status == 0, "\(query): \(result)", sourceLocation: sourceLocation)
        let parsed = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        return try #require(parsed as? [NSDictionary], "not a list of documents: \(result.stdout)",
                            sourceLocation: sourceLocation)
    }

    /// Three people: two of them under 18.
    static let threePeople = [
        #"people.insert({"id": 1, "name": "Ann", "age": 41, "city": "Oslo", "active": true})"#,
        #"people.insert({"id": 2, "name": "Bo", "age": 17, "city": "Bergen", "active": false})"#,
        #"people.insert({"id": 3, "name": "Cy", "age": 9, "city": "Tromsø", "active": true})"#,
    ]
}

/// Who the shell runs as: this process's user, or one without privileges, for whom permissions hold (root passes
/// them all).
enum ShellUser {
    case current
    /// Root runs the shell as `nobody` through `setpriv`; any other user is without privileges already.
    case unprivileged

    /// The user id the shell runs as when unprivileged.
    static let unprivilegedID: uid_t = 65534

    /// Whether the shell can run as a user for whom permissions hold.
    static var canDropPrivileges: Bool {
        getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    }

    /// The command and arguments the shell's binary and arguments follow; empty to run it directly.
    var launcher: [String] {
        guard case .unprivileged = self, getuid() == 0 else { return [] }
        return ["/usr/bin/setpriv", "--reuid=\(ShellUser.unprivilegedID)", "--regid=\(ShellUser.unprivilegedID)",
                "--clear-groups", "--"]
    }
}

struct ShellTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Bytes read on another thread.
final class Collected: Sendable {
    private let data = Mutex(Data())
    func store(_ bytes: Data) { data.withLock { $0 = bytes } }
    func append(_ bytes: Data) { data.withLock { $0.append(bytes) } }
    func load() -> Data { data.withLock { $0 } }
}

extension String {
    /// Whether `parts` occur in this text in the given order, none overlapping.
    func containsInOrder(_ parts: [String]) -> Bool {
        var rest = self[...]
        for part in parts {
            guard let range = rest.range(of: part) else { return false }
            rest = rest[range.upperBound...]
        }
        return true
    }
}

// MARK: - Tests

/// The shell reading a script from a pipe, with arguments and files: no terminal, so no line editing and no questions.
/// The tests that run the shell as a child process. They wait for it synchronously (a pipe, a pseudo-terminal), which
/// holds a thread of the shared pool: one at a time, so that the rest of the tests always has a thread.
@Suite(.serialized, .ownThreads) enum ShellSessions {}

extension ShellSessions {
@Suite struct ReplPipeTests {
    @Test func scriptOnStdinRunsItsStatementsInOrderAndPrintsResultsOnStdout() throws {
        let sandbox = try ShellSandbox()
        let script = """
            people.insert({"name": "Ann", "age": 41, "city": "Oslo"})
            people.insert({"name": "Bo", "age": 17, "city": "Bergen"})
            people.count()
            .mode json
            people.sortBy(age)
            people.include(city == "Oslo").count()

            """
        let result = try sandbox.run([sandbox.storePath], input: script)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        #expect(result.stdout.containsInOrder([
            "Inserted 1 document (id 1).\n",
            "Inserted 1 document (id 2).\n",
            "2\n",
            #"{"id":2,"name":"Bo","age":17,"city":"Bergen"}"#,
            #"{"id":1,"name":"Ann","age":41,"city":"Oslo"}"#,
            "]\n1\n",
        ]), "\(result)")
    }

    @Test func errorInAScriptNamesItsLineAndTheRestStillRuns() throws {
        let sandbox = try ShellSandbox()
        let script = """
            people.insert({"name": "Ann", "age": 41, "active": true})
            people.insert({
              "name": "Bo",
              "age": 17, "active": false
            })
            people.sortby(age)
            people.insert({"name": "Cy", "age": 30, "active": true})
            people.include(
              active < true)
            people.count()

            """
        let result = try sandbox.run([sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        // The misspelt step is on line 6, after a statement over four lines; the bad comparison on line 9, the
        // second line of its statement.
        #expect(result.stderr.contains("error at line 6, column 8: unknown step 'sortby'"), "\(result)")
        #expect(result.stderr.contains("did you mean 'sortBy'?"), "\(result)")
        #expect(result.stderr.contains("error at line 9, column 3: 'active' holds true/false values"), "\(result)")
        #expect(result.stdout.containsInOrder(["(id 1)", "(id 2)", "Inserted 1 document (id 3).\n", "3\n"]),
                "\(result)")
        #expect(!result.stdout.contains("error"), "errors belong on stderr: \(result)")
        #expect(try sandbox.count("people.count()") == 3)
    }

    @Test func bailStopsAScriptAtItsFirstError() throws {
        let sandbox = try ShellSandbox()
        let script = """
            people.insert({"name": "Ann", "age": 41})
            people.sortby(age)
            people.insert({"name": "Bo", "age": 17})
            people.count()

            """
        let result = try sandbox.run(["--bail", sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("line 2, column 8"), "\(result)")
        #expect(result.stdout.contains("Inserted 1 document (id 1)."), "\(result)")
        #expect(!result.stdout.contains("(id 2)"), "a statement after the error ran: \(result)")
        #expect(try sandbox.count("people.count()") == 1)
    }

    @Test func deleteWithoutATerminalIsRefusedUnlessConfirmedWithYes() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)

        let refused = try sandbox.run([sandbox.storePath], input: "people.include(age < 18).delete()\n")
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("refusing to delete 2 documents from people"), "\(refused)")
        #expect(refused.stderr.contains("stdin is not a terminal"), "\(refused)")
        #expect(!refused.stdout.contains("Deleted"), "\(refused)")
        #expect(try sandbox.count("people.count()") == 3, "a refused delete deleted documents")

        let confirmed = try sandbox.run(["--yes", sandbox.storePath], input: "people.include(age < 18).delete()\n")
        #expect(confirmed.status == 0, "\(confirmed)")
        #expect(confirmed.stdout.contains("Deleted 2 documents."), "\(confirmed)")
        #expect(try sandbox.count("people.count()") == 1)
        #expect(try sandbox.count(#"people.include(name == "Ann").count()"#) == 1)
    }

    @Test func dropOfACollectionWithoutATerminalIsRefused() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let refused = try sandbox.run([sandbox.storePath, ".drop people"])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("refusing to drop collection people"), "\(refused)")
        #expect(try sandbox.count("people.count()") == 3)
    }

    @Test func cmdStatementsRunBeforeTheScriptOnStdin() throws {
        let sandbox = try ShellSandbox()
        let result = try sandbox.run(
            ["--cmd", #"people.insert({"name": "First"})"#, "--cmd", ".mode json", sandbox.storePath],
            input: "people.insert({\"name\": \"Second\"})\npeople\n")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.containsInOrder([
            "Inserted 1 document (id 1).", "Inserted 1 document (id 2).",
            #"{"id":1,"name":"First"}"#, #"{"id":2,"name":"Second"}"#,
        ]), "\(result)")
    }

    @Test func statementsGivenAsArgumentsRunAndTheShellExitsWithoutReadingStdin() throws {
        let sandbox = try ShellSandbox()
        let result = try sandbox.run(
            [sandbox.storePath, #"people.insert({"name": "Ann"})"#, "people.count()"],
            input: "people.insert({\"name\": \"From stdin\"})\n")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.containsInOrder(["Inserted 1 document (id 1).\n", "1\n"]), "\(result)")
        #expect(!result.stdout.contains("(id 2)"), "stdin was read: \(result)")
        #expect(try sandbox.count("people.count()") == 1)
    }

    @Test func exitCommandSetsTheExitStatus() throws {
        let sandbox = try ShellSandbox()
        let asArgument = try sandbox.run([sandbox.storePath, ".exit 3"])
        #expect(asArgument.status == 3, "\(asArgument)")

        let inScript = try sandbox.run([sandbox.storePath],
                                       input: "people.insert({\"name\": \"Ann\"})\n.exit 3\npeople.insert({\"name\": \"Bo\"})\n")
        #expect(inScript.status == 3, "\(inScript)")
        #expect(!inScript.stdout.contains("(id 2)"), "a statement after .exit ran: \(inScript)")

        let plain = try sandbox.run([sandbox.storePath], input: ".exit\n")
        #expect(plain.status == 0, "\(plain)")
    }

    @Test func unknownOptionIsRefusedWithAMessage() throws {
        let sandbox = try ShellSandbox()
        let result = try sandbox.run(["--frobnicate", sandbox.storePath])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("unknown option --frobnicate"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.storePath), "the store was created anyway")
    }

    @Test func readRunsTheStatementsOfAFile() throws {
        let sandbox = try ShellSandbox()
        try sandbox.write("""
            people.insert([
              {"name": "Ann", "age": 41},
              {"name": "Bo", "age": 17}
            ])
            people.include(age >= 18).count()

            """, to: "setup.txt")
        let result = try sandbox.run([sandbox.storePath], input: ".read \(sandbox.path("setup.txt"))\npeople.count()\n")
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.containsInOrder(["Inserted 2 documents (ids 1, 2).\n", "1\n", "2\n"]), "\(result)")
    }

    @Test func errorInAReadFileNamesTheFileAndLine() throws {
        let sandbox = try ShellSandbox()
        let file = sandbox.path("broken.txt")
        try sandbox.write("people.insert({\"name\": \"Ann\"})\n\npeople.sortby(name)\npeople.count()\n", to: "broken.txt")
        let result = try sandbox.run([sandbox.storePath, ".read \(file)"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("error in \(file) at line 3, column 8"), "\(result)")
        #expect(result.stderr.contains("1 statement of \(file) failed"), "\(result)")
        #expect(result.stdout.containsInOrder(["Inserted 1 document (id 1).\n", "1\n"]), "\(result)")
    }

    @Test func outputSendsResultsToAFileUntilTurnedOff() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let file = sandbox.path("results.txt")
        let result = try sandbox.run([sandbox.storePath], input: """
            .output \(file)
            people.count()
            .mode json
            people.include(name == "Bo")
            .output
            people.include(age < 18).count()

            """)
        #expect(result.status == 0, "\(result)")
        let written = try sandbox.read("results.txt")
        #expect(written.containsInOrder(["3\n", #"{"id":2,"name":"Bo","age":17,"city":"Bergen","active":false}"#]),
                "file: \(written)")
        #expect(!written.split(separator: "\n").contains("2"), "a result after .output went to the file: \(written)")
        #expect(result.stdout == "2\n", "\(result)")
    }

    /// Documents with the kinds of values the shell stores: text needing quotes, numbers, true/false, lists,
    /// nested objects, a missing field.
    static let mixedPeople = #"""
        people.insert([
          {"id": 1, "name": "Ann, \"the first\"", "age": 41, "score": 2.5, "active": true,
           "tags": ["swift", "lmdb"], "address": {"city": "Oslo", "street": "Storgata 1"}},
          {"id": 2, "name": "Bo", "age": 17, "score": -0.75, "active": false, "tags": [],
           "address": {"city": "Bergen", "street": "Line one\nline two"}},
          {"id": 3, "name": " Cy ", "age": 9, "active": true, "tags": ["chess"], "address": {"city": "Tromsø"}}
        ])
        """#

    @Test(arguments: ["json", "ndjson"])
    func exportThenImportKeepsEveryDocument(format: String) throws {
        let sandbox = try ShellSandbox()
        let prepared = try sandbox.run(["--yes", sandbox.storePath], input: Self.mixedPeople + "\n"
            + #"people.insert({"id": 4, "name": "Dee", "email": null, "joined": date("2024-05-01")})"# + "\n")
        try #require(prepared.status == 0, "\(prepared)")
        let file = sandbox.path("people.\(format)")

        let result = try sandbox.run([sandbox.storePath, ".export people \(file)", ".import \(file) copy"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.containsInOrder(["Exported 4 documents to \(file).", "Imported 4 documents into copy."]),
                "\(result)")
        // The same documents, field for field, in the same order.
        let original = try sandbox.run([sandbox.storePath, ".mode json", "people"])
        let copy = try sandbox.run([sandbox.storePath, ".mode json", "copy"])
        #expect(original.status == 0 && copy.status == 0)
        #expect(copy.stdout == original.stdout, "original:\n\(original.stdout)\ncopy:\n\(copy.stdout)")
        #expect(original.stdout.contains(#""name":"Ann, \"the first\"""#), "\(original)")
    }

    @Test func exportThenImportThroughCSVKeepsWhatCSVCanHold() throws {
        let sandbox = try ShellSandbox()
        let prepared = try sandbox.run([sandbox.storePath], input: Self.mixedPeople + "\n")
        try #require(prepared.status == 0, "\(prepared)")
        let file = sandbox.path("people.csv")

        let result = try sandbox.run([sandbox.storePath, ".export people \(file)", ".import \(file) copy"])
        #expect(result.status == 0, "\(result)")
        let csv = try sandbox.read("people.csv")
        #expect(csv.hasPrefix("id,name,age,score,active,tags,address.city,address.street\r\n"), "csv:\n\(csv)")
        // Nested fields come back nested, lists as lists, numbers as numbers; the field order may differ.
        let original = try sandbox.documents("people")
        let copy = try sandbox.documents("copy")
        #expect(original.count == 3 && copy.count == 3)
        #expect(Array(copy.prefix(2)) == Array(original.prefix(2)), "original: \(original)\ncopy: \(copy)")
        // An empty cell is nil: a field the third person lacks comes back as nil, which CSV cannot tell apart.
        let third = try #require(copy.last?.mutableCopy() as? NSMutableDictionary)
        #expect(third["score"] is NSNull, "\(third)")
        #expect((third["address"] as? NSDictionary)?["street"] is NSNull, "\(third)")
        third.removeObject(forKey: "score")
        let address = try #require((third["address"] as? NSDictionary)?.mutableCopy() as? NSMutableDictionary)
        address.removeObject(forKey: "street")
        third["address"] = address
        #expect(third == original.last, "original: \(original)\ncopy: \(copy)")
        // Kinds NSDictionary equality would blur: true is not 1, 2.5 is not text.
        let copied = try sandbox.run([sandbox.storePath, ".mode json", "copy.include(id == 1)"])
        #expect(copied.stdout.contains(#""active":true"#), "\(copied)")
        #expect(copied.stdout.contains(#""score":2.5"#), "\(copied)")
        #expect(copied.stdout.contains(#""tags":["swift","lmdb"]"#), "\(copied)")
        #expect(copied.stdout.contains(#""address":{"city":"Oslo","street":"Storgata 1"}"#), "\(copied)")
    }

    /// Random documents with infinities, NaN, nil and the text "null" go out through `.export` and back in through
    /// `.import`, in each format, and come back as they were (through CSV, a missing field comes back as nil): the
    /// copy, printed in `.mode json`, is compared with the documents as the test made them.
    @Test(arguments: ["json", "ndjson", "csv"])
    func nonFiniteNumbersNilAndNullTextSurviveAnExportAndImport(format: String) throws {
        var rng = ParserFuzzRandom(seed: 0x1F4 &+ UInt64(format.count))
        // Each value as the query language writes it, and as `.mode json` prints it.
        let numbers: [(String, Any?)] = [("inf", ["$double": "inf"]), ("-inf", ["$double": "-inf"]),
                                         ("nan", ["$double": "nan"]), ("nil", NSNull()), ("1.25", 1.25),
                                         ("-0.5", -0.5), ("2.5e-7", 2.5e-7), ("", nil)]
        let texts: [(String, Any?)] = [(#""null""#, "null"), (#""inf""#, "inf"), (#""nan""#, "nan"), (#""""#, ""),
                                       ("nil", NSNull()), (#""Oslo""#, "Oslo"), ("", nil)]
        var literals: [String] = [], expected: [[String: Any]] = []
        for id in 1...40 {
            var fields = [#""id": \#(id)"#]
            var document: [String: Any] = ["id": id]
            for (name, pool) in [("x", numbers), ("s", texts)] {
                let (literal, printed) = pool.randomElement(using: &rng)!
                if literal.isEmpty {
                    if format == "csv" { document[name] = NSNull() }   // CSV cannot tell missing from nil
                    continue
                }
                fields.append(#""\#(name)": \#(literal)"#)
                document[name] = printed
            }
            literals.append("{" + fields.joined(separator: ", ") + "}")
            expected.append(document)
        }
        let sandbox = try ShellSandbox()
        try sandbox.prepare(["people.insert([" + literals.joined(separator: ", ") + "])"])
        let file = sandbox.path("people.\(format)")
        let result = try sandbox.run([sandbox.storePath, ".export people \(file)", ".import \(file) copy"])
        try #require(result.status == 0, "\(result)")
        let copy = try sandbox.documents("copy.sortBy(id)")
        let written = try sandbox.read("people.\(format)")
        try #require(copy.count == expected.count, "\(copy)")
        for (got, want) in zip(copy, expected) {
            #expect(got == want as NSDictionary, "\(format): got \(got), want \(want)\n\(written)")
        }
    }

    /// A CSV import types its columns from every cell, names those kept as text and the cell that decided it, and
    /// takes --number, --text and --date-format; a cell --number cannot read imports nothing.
    @Test func csvImportTypesColumnsSaysWhichStayedTextAndTakesOverrides() throws {
        let sandbox = try ShellSandbox()
        try sandbox.write("""
            id,faa,lat,pressure,zip,day
            1,04G,41.1304722,1013.3,0150,Jan 5 2013
            2,06A,32.4605722,1e3,12345,Feb 1 2013
            3,1000,48.053808600000004,998,+3,Dec 31 2013

            """, to: "airports.csv")
        let file = sandbox.path("airports.csv")
        let result = try sandbox.run([sandbox.storePath, ".import \(file) airports --dates day --date-format \"MMM d yyyy\"",
                                      "airports.include(lat > 40).count()", "airports.max(pressure)"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("Imported 3 documents into airports."), "\(result)")
        #expect(result.stdout.contains(#"Kept as text, for a cell that is not a number: faa (row 2: "04G"), zip (row 2: "0150")"#),
                "\(result)")
        #expect(result.stdout.contains("\n2\n"), "\(result)")
        #expect(result.stdout.contains("1013.3"), "\(result)")
        let docs = try sandbox.documents("airports.sortBy(id)")
        #expect(docs.map { ($0["day"] as? NSDictionary)?["$date"] as? String } == ["2013-01-05T00:00:00.000Z", "2013-02-01T00:00:00.000Z",
                                                      "2013-12-31T00:00:00.000Z"])
        #expect(docs.map { $0["pressure"] as? Double } == [1013.3, 1000, 998])

        // --number reads 0150 and +3; --text keeps lat as written; the import replaces the three, asking first.
        let again = try sandbox.run(["--yes", sandbox.storePath, ".import \(file) airports --number zip --text lat",
                                     "airports.sortBy(id)"])
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout.contains("replacing 3"), "\(again)")
        let typed = try sandbox.documents("airports.sortBy(id)")
        #expect(typed.map { $0["zip"] as? Int } == [150, 12345, 3])
        #expect(typed.map { $0["lat"] as? String } == ["41.1304722", "32.4605722", "48.053808600000004"])

        // A cell --number cannot read, or a date in another format: an error naming it, and nothing imported.
        let refused = try sandbox.run([sandbox.storePath, ".import \(file) other --number faa"])
        #expect(refused.status == 1 && refused.stderr.contains(#"row 2, column 'faa': "04G" is not a number"#), "\(refused)")
        let badDate = try sandbox.run([sandbox.storePath, ".import \(file) other --dates day --date-format yyyy/MM/dd"])
        #expect(badDate.status == 1 && badDate.stderr.contains("'Jan 5 2013' is not a date written as yyyy/MM/dd"),
                "\(badDate)")
        #expect(!(try sandbox.run([sandbox.storePath, ".collections"]).stdout.contains("other")))
    }

    /// Inside a transaction, an import is held until commit, and a rollback drops it.
    @Test func csvAndNDJSONImportsInATransactionApplyAtCommit() throws {
        let sandbox = try ShellSandbox()
        try sandbox.write("id,n\n1,10\n2,20\n", to: "a.csv")
        try sandbox.write("{\"id\": 3, \"n\": 30}\n\n{\"id\": 4, \"n\": 40}\n", to: "b.ndjson")
        let result = try sandbox.run([sandbox.storePath], input: """
            begin
            .import \(sandbox.path("a.csv")) t
            .import \(sandbox.path("b.ndjson")) t
            t.count()
            commit
            begin
            .import \(sandbox.path("b.ndjson")) dropped
            rollback

            """)
        #expect(result.status == 0, "\(result)")
        #expect(try sandbox.count("t.count()") == 4)
        #expect(!(try sandbox.run([sandbox.storePath, ".collections"]).stdout.contains("dropped")))
        #expect(try sandbox.documents("t.sortBy(id)").map { $0["n"] as? Int } == [10, 20, 30, 40])
    }

    @Test func savedFilterIsKeptInTheStoreForTheNextProcess() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)

        let saved = try sandbox.run([sandbox.storePath, ".save adults people.include(age >= 18)"])
        #expect(saved.status == 0, "\(saved)")
        #expect(saved.stdout.contains("Saved adults = people.include(age >= 18)"), "\(saved)")

        let used = try sandbox.run([sandbox.storePath, "adults.count()", ".mode json", "adults.sortBy(name)", ".filters"])
        #expect(used.status == 0, "\(used)")
        #expect(used.stdout.containsInOrder(["1\n", #""name":"Ann""#, "adults = people.include(age >= 18)\n"]),
                "\(used)")

        let duplicate = try sandbox.run([sandbox.storePath, ".save adults people.include(age >= 30)"])
        #expect(duplicate.status == 1, "\(duplicate)")
        #expect(duplicate.stderr.contains("a saved filter named 'adults' already exists"), "\(duplicate)")
        let listed = try sandbox.run([sandbox.storePath, ".filters"])
        #expect(listed.stdout == "adults = people.include(age >= 18)\n", "the first filter changed: \(listed)")
    }

    @Test func orderComparisonOnATrueFalseFieldIsAnErrorNeverQuietlyChanged() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)

        let query = try sandbox.run([sandbox.storePath, "people.include(active < true).count()"])
        #expect(query.status == 1, "\(query)")
        #expect(query.stderr.contains("'active' holds true/false values, which have no order"), "\(query)")
        #expect(query.stderr.contains("line 1, column 16"), "\(query)")
        #expect(query.stdout.isEmpty, "a result was printed: \(query)")

        let save = try sandbox.run([sandbox.storePath, ".save inactive people.include(active < true)"])
        #expect(save.status == 1, "\(save)")
        #expect(save.stderr.contains("have no order"), "\(save)")
        let listed = try sandbox.run([sandbox.storePath, ".filters"])
        #expect(!listed.stdout.contains("inactive"), "the refused filter was kept: \(listed)")
    }

    @Test func openingAFileThatIsNotAStoreFailsAndLeavesItAlone() throws {
        let sandbox = try ShellSandbox()
        try FileManager.default.createDirectory(atPath: sandbox.path("notes"), withIntermediateDirectories: false)
        let text = "These are notes, not a store.\n"
        try sandbox.write(text, to: "notes/notes.txt")
        let file = sandbox.path("notes/notes.txt")

        let result = try sandbox.run([file, "people.count()"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("notes.txt is not a DocStore store"), "\(result)")
        #expect(result.stdout.isEmpty, "\(result)")
        #expect(try sandbox.read("notes/notes.txt") == text, "the file was changed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.path("notes")) == ["notes.txt"],
                "files were added beside it")

        let withScript = try sandbox.run([file], input: "people.insert({\"name\": \"Ann\"})\n")
        #expect(withScript.status == 1, "\(withScript)")
        #expect(try sandbox.read("notes/notes.txt") == text, "the file was changed")
    }

    @Test func readonlyOpensTheStoreForQueriesAndRefusesEveryChangeBeforeAnythingElse() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople + [".createIndex by_age people age",
                                                        ".save adults people.include(age >= 18)"])
        let before = try Data(contentsOf: URL(fileURLWithPath: sandbox.storePath))
        let refusal = "the store at \(sandbox.storePath) was opened read-only"
        let script = """
            people.count()
            people.include(age >= 18).count()
            adults.count()
            people.insert({"name": "Di", "age": 30})
            people.include(age < 18).delete()
            .drop people
            .dropIndex by_age people
            .createIndex by_city people city
            .unsave adults
            people.include(age > 100).count()

            """
        // Without --yes and without a terminal: a change that asks first would otherwise be refused for that.
        let result = try sandbox.run(["--readonly", sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout == "3\n1\n1\n0\n", "\(result)")
        #expect(result.stderr.containsInOrder([
            "cannot insert into 'people': \(refusal)",
            "cannot delete documents from 'people': \(refusal)",
            "cannot drop collection 'people': \(refusal)",
            "cannot drop index 'by_age' of 'people': \(refusal)",
            "cannot create index 'by_city' on 'people': \(refusal)",
            "cannot delete the saved filter 'adults': \(refusal)",
        ]), "\(result)")
        #expect(!result.stderr.contains("refusing to"), "a change got as far as asking: \(result)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: sandbox.storePath)) == before, "the store's file changed")
        #expect(try sandbox.count("people.count()") == 3)

        let missing = try sandbox.run(["--readonly", sandbox.path("missing.db"), "people.count()"])
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.stderr.contains("read-only"), "\(missing)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("missing.db")), "a store was created")

        let help = try sandbox.run(["--help"])
        #expect(help.stdout.contains("--readonly"), "\(help)")
    }

    /// `--exclusive` keeps the store to one shell: a second shell is refused while the first has it open, and an
    /// exclusive shell is refused while another has it open; each says why, and nothing is changed.
    @Test func exclusiveKeepsTheStoreToOneShell() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        for holderIsExclusive in [true, false] {
            // The first shell holds the store open while it waits for more input, once it has answered.
            let holder = ChildProcess()
            let input = Pipe(), output = Pipe()
            holder.executableURL = URL(fileURLWithPath: DocStoreBinary.path)
            holder.arguments = (holderIsExclusive ? ["--exclusive"] : []) + ["--batch", sandbox.storePath]
            holder.environment = sandbox.environment
            holder.standardInput = input
            holder.standardOutput = output
            holder.standardError = FileHandle.nullDevice
            try holder.run()
            try input.fileHandleForWriting.write(contentsOf: Data("people.count()\n".utf8))
            var seen = ""
            while !seen.contains("\n") {
                let data = output.fileHandleForReading.availableData   // blocks until the shell answers, or ends
                if data.isEmpty { break }
                seen += String(decoding: data, as: UTF8.self)
            }
            #expect(seen == "3\n", "the first shell did not answer: \(seen)")
            let second = try sandbox.run((holderIsExclusive ? [] : ["--exclusive"]) + [sandbox.storePath, "people.count()"])
            #expect(second.status == 1, "\(second)")
            #expect(second.stderr.contains(holderIsExclusive ? "open exclusively" : "another process has it open"),
                    "\(second)")
            try input.fileHandleForWriting.close()
            holder.waitUntilExit()
            #expect(holder.terminationStatus == 0)
        }
        #expect(try sandbox.count("people.count()") == 3)
        let help = try sandbox.run(["--help"])
        #expect(help.stdout.contains("--exclusive"), "\(help)")
    }

    /// The shell checks an existing file's structure before opening it: a damaged one is refused with the page,
    /// and the process ends normally; `--no-check` is listed in the help.
    @Test func aDamagedFileIsRefusedBeforeItIsRead() throws {
        let sandbox = try ShellSandbox()
        let made = try sandbox.run([sandbox.storePath, #"people.insert([{"name": "Ann"}, {"name": "Bo"}, {"name": "Cy"}])"#])
        #expect(made.status == 0, "\(made)")
        #expect(try sandbox.count("people.count()") == 3)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: sandbox.storePath))
        // Every page after the two meta pages: their headers say they are other pages.
        let pageSize = 4096
        for page in 2..<(bytes.count / pageSize) { bytes[page * pageSize] ^= 0x55 }
        try bytes.write(to: URL(fileURLWithPath: sandbox.storePath))
        let result = try sandbox.run([sandbox.storePath, "people.count()"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("is damaged: page"), "\(result)")
        #expect(try sandbox.run(["--help"]).stdout.contains("--no-check"))
    }

    /// Zeroes the leaf pages (4 KiB) of the file at `path` that hold `text` and not `other`; returns how many.
    private static func zeroLeaves(of path: String, holding text: String, unless other: String? = nil) throws -> Int {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        var zeroed = 0
        for page in 2..<(bytes.count / pageSize) where bytes[page * pageSize + 10] == 0x02 {
            let range = (page * pageSize)..<((page + 1) * pageSize)
            if bytes.range(of: Data(text.utf8), in: range) != nil,
               other.map({ bytes.range(of: Data($0.utf8), in: range) == nil }) ?? true {
                bytes.replaceSubrange(range, with: Data(count: pageSize))
                zeroed += 1
            }
        }
        try bytes.write(to: URL(fileURLWithPath: path))
        return zeroed
    }

    /// `docstore FILE .recover NEW` reads a file the shell refuses to open, and copies what can be read.
    @Test func aDamagedFileIsRecoveredIntoANewStore() throws {
        let sandbox = try ShellSandbox()
        let people = (0..<300).map { #"{"name": "Person-\#($0)", "age": \#($0 % 50)}"# }.joined(separator: ", ")
        let made = try sandbox.run([sandbox.storePath, "people.insert([\(people)])", ".createIndex age people age",
                                    ".save old people.include(age > 40)"])
        #expect(made.status == 0, "\(made)")
        // The leaf pages that hold Person-150's document, zeroed (not the catalog's, whose page may hold old bytes
        // of a page of documents it reused: the catalog lost is another test's).
        #expect(try Self.zeroLeaves(of: sandbox.storePath, holding: "Person-150", unless: "collection\u{1F}people") >= 1)
        let refused = try sandbox.run([sandbox.storePath, "people.count()"])
        #expect(refused.status == 1 && refused.stderr.contains(".recover NEW"), "\(refused)")

        let newPath = sandbox.path("recovered.db")
        let result = try sandbox.run([sandbox.storePath, ".recover \(newPath)"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("collection 'people':") && result.stdout.contains("on unreadable pages and lost")
                && result.stdout.contains("indexes rebuilt: age") && result.stdout.contains("verifies clean"), "\(result)")
        let counted = try sandbox.run([newPath, "people.count()"])
        let count = try #require(Int(counted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(counted)")
        #expect(count > 0 && count < 300, "\(count)")
        let verified = try sandbox.run([newPath, ".verify", "old.count()"])
        #expect(verified.status == 0 && verified.stdout.contains("no problems"), "\(verified)")
        // Into a file that exists: refused, and nothing changed.
        let again = try sandbox.run([sandbox.storePath, ".recover \(newPath)"])
        #expect(again.status == 1 && again.stderr.contains("exists"), "\(again)")
    }

    /// The catalog's page lost: documents of format 3 keep their values but not their field names, which the
    /// catalog kept (their shape). `.recover`, in a process that never read the store, says they were lost and
    /// why, and never that nothing was.
    @Test func documentsWhoseShapeWasLostWithTheCatalogAreReportedLost() throws {
        let sandbox = try Self.fortyPeople()
        #expect(try Self.zeroLeaves(of: sandbox.storePath, holding: "shape\u{1F}") >= 1)
        let newPath = sandbox.path("recovered.db")
        let result = try sandbox.run([sandbox.storePath, ".recover \(newPath)"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("40 damaged and lost") && result.stdout.contains("their shape) were lost with the catalog")
                && !result.stdout.contains("nothing was lost"), "\(result)")
    }

    /// The record of the store's salt lost, its shapes' records kept: `.recover`, in a process that never read the
    /// store, reads every document by the shapes' records, whose checksums vouch for them.
    @Test func documentsAreRecoveredWhenOnlyTheSaltOfTheirShapesIsLost() throws {
        let sandbox = try Self.fortyPeople()
        #expect(try Self.loseSaltRecord(of: sandbox.storePath) >= 1)
        let newPath = sandbox.path("recovered.db")
        let result = try sandbox.run([sandbox.storePath, ".recover \(newPath)"])
        #expect(result.status == 0 && !result.stdout.contains("lost with the catalog"), "\(result)")
        let counted = try sandbox.run([newPath, #"people.include(name == "Person-7").count()"#])
        #expect(counted.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(counted)")
    }

    /// A sandbox whose store holds 40 people, `age` 0 to 39, in format 3.
    private static func fortyPeople() throws -> ShellSandbox {
        let sandbox = try ShellSandbox()
        let people = (0..<40).map { #"{"name": "Person-\#($0)", "age": \#($0)}"# }.joined(separator: ", ")
        let made = try sandbox.run([sandbox.storePath, "people.insert([\(people)])"])
        try #require(made.status == 0, "\(made)")
        return sandbox
    }

    /// Renames the record of the store's salt on every page that holds it (a record the catalog does not know);
    /// returns on how many.
    private static func loseSaltRecord(of path: String) throws -> Int {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        var renamed = 0
        while let found = bytes.range(of: Data("shape-salt".utf8)) {
            bytes.replaceSubrange(found, with: Data("shape-salz".utf8))
            renamed += 1
        }
        try bytes.write(to: URL(fileURLWithPath: path))
        return renamed
    }

    /// The record of the store's salt lost: opening the store for writing, in a process that never read it, makes
    /// no new salt (which would refuse every recorded shape). Its documents read, and a new one is written.
    @Test func aStoreWhoseSaltRecordIsLostStillReadsAndWrites() throws {
        let sandbox = try Self.fortyPeople()
        #expect(try Self.loseSaltRecord(of: sandbox.storePath) >= 1)
        let written = try sandbox.run([sandbox.storePath, #"people.insert({"name": "New", "age": 1, "city": "Oslo"})"#])
        #expect(written.status == 0, "\(written)")
        let read = try sandbox.run([sandbox.storePath, #"people.include(age == 1).count()"#, ".verify"])
        #expect(read.status == 0 && read.stdout.hasPrefix("2") && read.stdout.contains("no problems"), "\(read)")
    }

    /// A file cut short to its size before its last commit, which created `planes`: `.recover` says what was lost,
    /// or that it cannot be known, and never that nothing was. `people` is written in `commits` commits; `planes`
    /// in one more, which LMDB writes partly on pages the earlier commits freed (the more of them, the more pages).
    private func recoverCutShort(peopleIn commits: Int) throws -> (result: ShellRun, planes: Int?) {
        let sandbox = try ShellSandbox()
        for commit in 0..<commits {
            let people = (0..<2_000 / commits).map { i in
                #"{"name": "Person-\#(commit)-\#(i)", "age": \#(i % 50)}"#
            }
            let made = try sandbox.run([sandbox.storePath, "people.insert([\(people.joined(separator: ", "))])"])
            #expect(made.status == 0, "\(made)")
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: sandbox.storePath)).count
        let planes = (0..<1_500).map { #"{"model": "M-\#($0)", "seats": \#($0 % 300)}"# }.joined(separator: ", ")
        let added = try sandbox.run([sandbox.storePath, "planes.insert([\(planes)])"])
        #expect(added.status == 0, "\(added)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: sandbox.storePath))
        try bytes.prefix(before).write(to: URL(fileURLWithPath: sandbox.storePath))

        let newPath = sandbox.path("recovered.db")
        let result = try sandbox.run([sandbox.storePath, ".recover \(newPath)"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("collection 'people': 2000 documents recovered") && result.stdout.contains("cut short")
                && result.stdout.contains("verifies clean"), "\(result)")
        #expect(!result.stdout.contains("nothing was lost") && result.stdout.contains("Recovered what could be read"),
                "\(result)")
        let counted = try sandbox.run([newPath, "planes.count()"])
        return (result, Int(counted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    /// The newest commit's catalog is in the file (on a page an earlier commit freed), `planes`' pages mostly not:
    /// the collection is named, with its documents recovered and lost.
    @Test func aFileCutShortIsRecoveredWithItsLossesSaid() throws {
        let (result, planes) = try recoverCutShort(peopleIn: 4)
        let count = try #require(planes, "\(result)")
        #expect(result.stdout.contains("collection 'planes': \(count) documents recovered, \(1_500 - count) on "
                                       + "unreadable pages and lost"), "\(result)")
        #expect(result.stdout.contains("\(2_000 + count) documents recovered, \(1_500 - count) lost"), "\(result)")
    }

    /// Nothing of the newest commit is left in the file: recovery reads the commit before, and says that what was
    /// lost cannot be known, and why.
    @Test func aFileCutShortOfItsNewestCommitSaysTheLossCannotBeKnown() throws {
        let (result, _) = try recoverCutShort(peopleIn: 1)
        #expect(result.stdout.contains("2000 documents recovered; how many were lost cannot be known because the "
                                       + "newest commit (transaction 3) could not be read"), "\(result)")
    }

    @Test func objectLiteralOverSeveralLinesIsOneStatement() throws {
        let sandbox = try ShellSandbox()
        let result = try sandbox.run([sandbox.storePath], input: """
            people.insert({
              "name": "Ann",
              "tags": ["swift",
                       "lmdb"],
              "address": {
                "city": "Oslo"
              }
            })
            people.count()
            .mode json
            people

            """)
        #expect(result.status == 0, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        #expect(result.stdout.containsInOrder([
            "Inserted 1 document (id 1).\n", "1\n",
            #"{"id":1,"name":"Ann","tags":["swift","lmdb"],"address":{"city":"Oslo"}}"#,
        ]), "\(result)")
    }
}
}
