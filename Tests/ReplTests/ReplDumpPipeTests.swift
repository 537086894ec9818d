import DocStore
import Foundation
import TestSupport
import Testing

extension ShellSessions {
@Suite struct ReplDumpPipeTests {
    /// `docstore FILE .dump > dump` then `docstore NEW < dump`: an equal store, its indexes, saved filters and
    /// migration records included; `.restore FILE` does the same from inside the shell.
    @Test func aDumpPipedIntoANewStoreRestoresIt() async throws {
        let sandbox = try ShellSandbox()
        let script = """
            people.insert([{"id": 1, "name": "Ann", "age": 41, "born": date("1983-05-01")}, {"id": 2, "name": "Bo", "age": 17.5}])
            .createIndex age people age
            .save adults people.include(age >= 18)
            .migrate first addField people country NO ; createIndex country people country

            """
        let setup = try sandbox.run([sandbox.storePath, "--yes"], input: script)
        #expect(setup.status == 0, "\(setup)")

        let dumped = try sandbox.run([sandbox.storePath, ".dump"])
        #expect(dumped.status == 0, "\(dumped)")
        #expect(dumped.stdout.hasPrefix("{\"docstore\":\"dump\""), "\(dumped.stdout)")
        let restored = try sandbox.run([sandbox.path("new.db")], input: dumped.stdout)
        #expect(restored.status == 0, "\(restored)")
        #expect(restored.stdout.contains("Restored 1 collection, 2 documents, 2 indexes, 1 saved filter, 1 migration"),
                "\(restored.stdout)")

        try sandbox.write(dumped.stdout, to: "people.ndjson")
        let fromShell = try sandbox.run([sandbox.path("other.db"), ".restore people.ndjson"])
        #expect(fromShell.status == 0, "\(fromShell)")
        let refused = try sandbox.run([sandbox.storePath, ".restore people.ndjson"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("not empty"), "\(refused.stderr)")

        let source = try await DocStore(path: sandbox.storePath)
        for path in [sandbox.path("new.db"), sandbox.path("other.db")] {
            let copy = try await DocStore(path: path)
            #expect(try await Query<DocumentValue>("people").results(in: copy)
                    == Query<DocumentValue>("people").results(in: source))
            #expect(try await copy.collections() == source.collections())
            #expect(try await copy.read { try $0.savedFilters() } == source.read { try $0.savedFilters() })
            #expect(try await copy.appliedMigrations() == source.appliedMigrations())
            #expect(try await copy.verify().isClean)
            await copy.close()
        }
        // A dump cut short restores nothing, and says so.
        let cut = dumped.stdout.split(separator: "\n").dropLast().joined(separator: "\n") + "\n"
        let failed = try sandbox.run([sandbox.path("cut.db")], input: cut)
        #expect(failed.status != 0)
        #expect(failed.stderr.contains("cut short"), "\(failed.stderr)")
        let empty = try await DocStore(path: sandbox.path("cut.db"))
        #expect(try await empty.collections().isEmpty)
    }

    /// A store opened read-only explains, exports and dumps; `.migrate`, `.restore` and `.compact` are refused as
    /// read-only before anything is asked or done, and the file is left as it was.
    @Test func aReadOnlyStoreExplainsExportsAndDumpsAndRefusesTheRest() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople + [".createIndex by_age people age"])
        let dumped = try sandbox.run([sandbox.storePath, ".dump people.ndjson"])
        #expect(dumped.status == 0, "\(dumped)")
        let before = try Data(contentsOf: URL(fileURLWithPath: sandbox.storePath))
        let script = """
            people.include(age >= 18).explain()
            .export people out.json
            .dump again.ndjson
            .migrate v2 removeField people city
            .restore people.ndjson
            .compact
            .migrations

            """
        let result = try sandbox.run(["--readonly", sandbox.storePath], input: script)
        let refusal = "the store at \(sandbox.storePath) was opened read-only"
        #expect(result.stdout.contains("by_age"), "\(result)")
        #expect(FileManager.default.fileExists(atPath: sandbox.path("out.json")))
        #expect(try sandbox.read("again.ndjson").split(separator: "\n").dropFirst()
                == sandbox.read("people.ndjson").split(separator: "\n").dropFirst())
        #expect(result.stderr.containsInOrder([
            "cannot apply the migration 'v2': \(refusal)",
            "cannot restore 'people.ndjson': \(refusal)",
            "cannot compact the store: \(refusal)",
        ]), "\(result)")
        #expect(result.stdout.contains("No migrations") || result.stderr.contains("No migrations"), "\(result)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: sandbox.storePath)) == before, "the store's file changed")
    }

    /// `.migrate ... convertField C FIELD date FORMAT` reads text written in the format as dates.
    @Test func migrateConvertsTextToDatesInAFormat() throws {
        let sandbox = try ShellSandbox()
        let script = """
            flights.insert([{"id": 1, "day": "2013/01/05"}, {"id": 2, "day": "2013/12/31"}])
            .migrate dates convertField flights day date "yyyy/MM/dd"
            .mode json
            flights.sortBy(id)
            .migrate bad convertField flights day int "yyyy"

            """
        let result = try sandbox.run([sandbox.storePath, "--yes"], input: script)
        #expect(result.stdout.contains(#""day":{"$date":"2013-01-05T00:00:00.000Z"}"#), "\(result.stdout)")
        #expect(result.stdout.contains(#""day":{"$date":"2013-12-31T00:00:00.000Z"}"#), "\(result.stdout)")
        #expect(result.stderr.contains("usage: convertField COLLECTION FIELD"), "\(result.stderr)")
        let migrations = try sandbox.run([sandbox.storePath, ".migrations"])
        #expect(migrations.stdout.contains("convert field flights.day to date written as yyyy/MM/dd"), "\(migrations)")
    }

    /// `.migrate` applies steps once, recorded; `.migrations` lists them; a failing step changes nothing.
    @Test func migrationsFromTheShell() throws {
        let sandbox = try ShellSandbox()
        let script = """
            people.insert([{"id": 1, "name": "Ann", "zip": "0150"}, {"id": 2, "name": "Bo", "zip": "5003"}])
            .migrate v2 renameField people name fullName ; convertField people zip int
            .migrations
            people.sortBy(id)
            .migrate v2 removeField people zip
            .migrate bad convertField people fullName int
            people.count()

            """
        let result = try sandbox.run([sandbox.storePath, "--yes"], input: script)
        #expect(result.stdout.contains("applied 1. v2"), "\(result.stdout)")
        #expect(result.stdout.contains("rename field people.name to fullName"), "\(result.stdout)")
        #expect(result.stdout.contains("convert field people.zip to int"), "\(result.stdout)")
        #expect(result.stdout.contains("150"), "\(result.stdout)")
        #expect(result.stderr.contains("has applied a migration named 'v2' already"), "\(result.stderr)")
        #expect(result.stderr.contains("\"Ann\" has no int form"), "\(result.stderr)")
        // Values and names as written: quotes keep text, JSON values keep their spaces, backticks a name's.
        let quoted = try sandbox.run([sandbox.storePath, "--yes"], input: #"""
            .migrate v3 addField people code "0150" ; addField people meta {"a": "b c", "n": [1, 2]} ; renameField people fullName `full name`
            people.sortBy(id).first

            """#)
        #expect(quoted.status == 0, "\(quoted)")
        #expect(quoted.stdout.contains(#""code":"0150""#) || quoted.stdout.contains("0150"), "\(quoted.stdout)")
        let store = try sandbox.run([sandbox.storePath, "--yes", ".mode json", "people.sortBy(id).first"])
        #expect(store.stdout.contains(#""code":"0150""#) || store.stdout.contains(#""code": "0150""#), "\(store.stdout)")
        #expect(store.stdout.contains(#""b c""#), "\(store.stdout)")
        #expect(store.stdout.contains(#""full name""#), "\(store.stdout)")
        let without = try sandbox.run([sandbox.storePath, ".migrate x"])
        #expect(without.status != 0)
        #expect(without.stderr.contains("usage: .migrate NAME STEP"), "\(without.stderr)")
        let unconfirmed = try sandbox.run([sandbox.storePath, ".migrate x removeField people zip"])
        #expect(unconfirmed.status != 0)
        #expect(unconfirmed.stderr.contains("confirmation"), "\(unconfirmed.stderr)")
    }
}
}

/// Whether this machine lets a test mount a folder read-only in a mount namespace of its own (`unshare -rm`).
enum ReadOnlyMount {
    static let isAvailable: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
        let probe = ChildProcess()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["-rm", "/bin/sh", "-c", "mount --bind /tmp /tmp && mount -o remount,ro,bind /tmp"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    /// Runs the shell with `arguments` where `folder` is mounted read-only (`FOLDER` in an argument stands for it).
    static func run(folder: String, _ arguments: [String]) throws -> ShellRun {
        let script = #"d="$1"; shift; mount --bind "$d" "$d" && mount -o remount,ro,bind "$d" && exec "$@""#
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = ["-rm", "/bin/sh", "-c", script, "sh", folder, DocStoreBinary.path]
            + arguments.map { $0.replacingOccurrences(of: "FOLDER", with: folder) }
        let stdout = Pipe(), stderr = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let errors = stderr.fileHandleForReading
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        let error = errors.readDataToEndOfFile()
        process.waitUntilExit()
        return ShellRun(status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self),
                        stderr: String(decoding: error, as: UTF8.self))
    }
}

extension ShellSessions {
@Suite struct ReadOnlyMountTests {
    /// A store on a read-only bind mount opens with --readonly, answers queries and dumps; every change is refused
    /// as read-only, and opening it for writing says how to read it.
    @Test(.enabled(if: ReadOnlyMount.isAvailable, "this machine cannot mount a folder read-only for a test"))
    func aStoreOnAReadOnlyMountAnswersQueries() throws {
        let sandbox = try ShellSandbox()
        let folder = sandbox.path("mounted")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let setup = try sandbox.run([folder + "/people.db", "--yes",
                                     #"people.insert([{"id": 1, "age": 30}, {"id": 2, "age": 12}])"#,
                                     ".createIndex age people age"])
        #expect(setup.status == 0, "\(setup)")
        let read = try ReadOnlyMount.run(folder: folder, ["--readonly", "FOLDER/people.db",
                                                          "people.include(age >= 18).count()", ".dump"])
        #expect(read.status == 0, "\(read)")
        #expect(read.stdout.hasPrefix("1\n"), "\(read.stdout)")
        #expect(read.stdout.contains("{\"end\":\"dump\",\"documents\":2}"), "\(read.stdout)")
        let write = try ReadOnlyMount.run(folder: folder, ["--readonly", "FOLDER/people.db",
                                                           #"people.insert({"id": 3})"#])
        #expect(write.status != 0)
        #expect(write.stderr.contains("read-only"), "\(write.stderr)")
        let writable = try ReadOnlyMount.run(folder: folder, ["FOLDER/people.db", "people.count()"])
        #expect(writable.status != 0)
        #expect(writable.stderr.contains("read-only"), "\(writable.stderr)")
    }
}
}
