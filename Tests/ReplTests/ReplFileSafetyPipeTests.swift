// The commands that write files (.dump, .output, .export, .backup) never write over the open store's file or its
// lock file, whatever path names them, and write over another store's file only when confirmed.

import DocStore
import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplFileSafetyPipeTests {
    /// The documents of the store at `path`, by id, and whether it verifies clean; the store is closed after.
    private static func contents(of path: String) async throws -> (ids: [Int], clean: Bool) {
        let store = try await DocStore(path: path)
        let documents = try await Query<DocumentValue>("people").results(in: store)
        let clean = try await store.verify().isClean
        await store.close()
        let ids = documents.compactMap { d -> Int? in
            if case .int(let id)? = d[path: FieldPath("id")] { return Int(id) }
            return nil
        }
        return (ids.sorted(), clean)
    }

    /// `.dump`, `.output`, `.export` and `.backup` onto the open store, by its name, `./` and `../` paths and links,
    /// and onto its lock file through a link, are refused and say why; the store is as it was, and the insert after
    /// them is kept.
    @Test func theOpenStoreAndItsLockFileAreNeverWrittenOver() async throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        try FileManager.default.createSymbolicLink(atPath: sandbox.path("link.json"), withDestinationPath: "people.db")
        try FileManager.default.createSymbolicLink(atPath: sandbox.path("lock.ndjson"),
                                                   withDestinationPath: sandbox.path("people.db-lock"))
        let folder = URL(fileURLWithPath: sandbox.directory).lastPathComponent
        let script = """
            .dump people.db
            .dump ./people.db
            .output ../\(folder)/people.db
            .export people link.json
            .export people lock.ndjson
            .output lock.ndjson
            .dump lock.ndjson
            .backup link.json
            people.insert({"id": 4, "name": "Di"})
            .verify

            """
        let result = try sandbox.run(["--yes", sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")   // the refusals are errors; the process ends normally
        #expect(result.stderr.components(separatedBy: "it is the file of the open store").count - 1 == 5,
                "\(result.stderr)")
        #expect(result.stderr.components(separatedBy: "it is the lock file of the open store").count - 1 == 3,
                "\(result.stderr)")
        #expect(result.stderr.contains("cannot write a dump to people.db: it is the file of the open store"),
                "\(result.stderr)")
        #expect(result.stdout.contains("no problems"), "\(result)")
        let after = try await Self.contents(of: sandbox.storePath)
        #expect(after.ids == [1, 2, 3, 4])
        #expect(after.clean)
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("link.json.docstore-partial")))
    }

    /// The open store's lock file is not even opened to be read (`.read`, `.import`, `.restore`, `.open`): closing
    /// it would let go of the store's locks, by which other processes know which of its reads are alive. And a store
    /// whose lock file the results are being written to is not opened.
    @Test func theOpenStoresLockFileIsNotReadAndNoResultsGoIntoALockFile() async throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        try FileManager.default.createSymbolicLink(atPath: sandbox.path("lock.csv"),
                                                   withDestinationPath: sandbox.path("people.db-lock"))
        let script = """
            .read people.db-lock
            .import lock.csv others
            .restore people.db-lock
            .open people.db-lock
            .output other.db-lock
            .open other.db
            .output
            people.count()

            """
        let result = try sandbox.run([sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.components(separatedBy: "it is the lock file of the open store").count - 1 == 4,
                "\(result.stderr)")
        #expect(result.stderr.contains("cannot open other.db: the results are being written to its lock file"),
                "\(result.stderr)")
        #expect(result.stdout == "3\n", "\(result)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("other.db")))
    }

    /// An import's ids are told apart as the store keys them: `1` and `1.0` are one id, so a file that holds both is
    /// refused, where the second row silently replaced the first. A CSV header whose columns nest (`address` and
    /// `address.city`) is refused, where one of the two cells was silently dropped.
    @Test func anImportThatWouldLoseARowIsRefused() async throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        try sandbox.write("{\"id\": 10, \"n\": \"a\"}\n{\"id\": 10.0, \"n\": \"b\"}\n", to: "same.ndjson")
        try sandbox.write("id,n\n20,a\n20.0,b\n", to: "same.csv")
        try sandbox.write("id,address,address.city\n1,Oslo,Bergen\n", to: "nested.csv")
        let script = """
            .import same.ndjson people
            .import same.csv people
            .import nested.csv places
            people.count()

            """
        let result = try sandbox.run(["--yes", sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.components(separatedBy: "two documents with the same id").count - 1 == 2,
                "\(result.stderr)")
        #expect(result.stderr.contains("row 2 has values in both 'address' and 'address.city'"), "\(result.stderr)")
        #expect(result.stdout == "3\n", "\(result)")
    }

    /// The file results are written to (`.output`) is not opened as a store while they are.
    @Test func theOutputFileIsNotOpenedAsAStore() async throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let script = """
            .output results.db
            .open ./results.db
            people.count()
            .output
            people.count()

            """
        let result = try sandbox.run([sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("cannot open ./results.db: the results are being written to it"), "\(result)")
        #expect(result.stdout == "3\n", "\(result)")
        #expect(try sandbox.read("results.db") == "3\n")
    }

    /// Another store's file (or its lock file) is written over only when confirmed: without a terminal the
    /// command is refused and the store is unchanged; with --yes the question is answered and the file written.
    @Test func anotherStoreIsWrittenOverOnlyWhenConfirmed() async throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let other = sandbox.path("other.db")
        let made = try sandbox.run(["--yes", other, #"people.insert([{"id": 7}, {"id": 8}])"#])
        try #require(made.status == 0, "\(made)")
        try FileManager.default.createSymbolicLink(atPath: sandbox.path("other.json"), withDestinationPath: other)
        try FileManager.default.createSymbolicLink(atPath: sandbox.path("other-lock.ndjson"),
                                                   withDestinationPath: other + "-lock")
        let script = """
            .dump other.db
            .output other.db
            .export people other.json
            .export people other-lock.ndjson
            .backup other.db

            """
        let refused = try sandbox.run([sandbox.storePath], input: script)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.components(separatedBy: "refusing to overwrite").count - 1 == 5, "\(refused.stderr)")
        let untouched = try await Self.contents(of: other)
        #expect(untouched.ids == [7, 8])
        #expect(untouched.clean)

        let confirmed = try sandbox.run(["--yes", sandbox.storePath, ".backup other.db"])
        #expect(confirmed.status == 0, "\(confirmed)")
        #expect(confirmed.stdout.contains("other.db is a DocStore store (") && confirmed.stdout.contains(" UTC); overwrite it? [y/N] y (--yes)"),
                "\(confirmed.stdout)")
        let replaced = try await Self.contents(of: other)
        #expect(replaced.ids == [1, 2, 3])
        let mine = try await Self.contents(of: sandbox.storePath)
        #expect(mine.ids == [1, 2, 3])
        #expect(mine.clean)
    }
}
}
