import Foundation
import Testing
import TestSupport

extension ShellSessions {
/// The shell on a `postgres://` URL, against the tests' own PostgreSQL cluster: the same answers as on a file that
/// holds the same data, a store carried from a file to PostgreSQL and back with one dump, and the commands only a
/// file has refused with the server's own tool named.
@Suite(.enabled(if: PostgresCluster.isAvailable, Comment(rawValue: PostgresCluster.skipReason)))
struct ReplPostgresPipeTests {
    /// Statements whose answers must be the same on both stores.
    static let queries = """
        people.sortBy(name)
        people.include(age >= 18).sortBy(age, .reverse)
        people.include(city == "Oslo" || tags.contains("b")).count()
        people.groupBy(city).count()
        people.include(age > 10).sortBy(name)[1..<3]
        people.include(name.hasPrefix("C")).explain()
        adults.count()
        .filters
        """

    @Test func aStoreMovesFromAFileToPostgreSQLAndBackWithOneDump() throws {
        let sandbox = try ShellSandbox()
        let url = try PostgresCluster.shared().freshURL()
        let setup = """
            people.insert([{"id": 1, "name": "Ann", "age": 41, "city": "Oslo", "tags": ["a", "b"]}, {"id": 2, "name": "Bo", "age": 17.5, "city": "Bergen", "tags": []}, {"id": 3, "name": "Cy", "age": 30, "city": "Oslo", "tags": ["b"]}, {"id": 4, "name": "Di", "age": 12, "city": "Tromsø"}])
            .createIndex by_age people age
            .createIndex by_city people city
            .save adults people.include(age >= 18)

            """
        let made = try sandbox.run([sandbox.storePath, "--yes"], input: setup)
        #expect(made.status == 0, "\(made)")
        let onFile = try sandbox.run([sandbox.storePath], input: Self.queries)
        #expect(onFile.status == 0, "\(onFile)")

        // File → PostgreSQL.
        let dumped = try sandbox.run([sandbox.storePath, ".dump"])
        let restored = try sandbox.run([url], input: dumped.stdout)
        #expect(restored.status == 0, "\(restored)")
        #expect(restored.stdout.contains("Restored 1 collection, 4 documents, 2 indexes, 1 saved filter"),
                "\(restored.stdout)")
        let onServer = try sandbox.run([url], input: Self.queries)
        #expect(onServer.status == 0, "\(onServer)")
        #expect(onServer.stdout == onFile.stdout)

        // A change made on the server, then PostgreSQL → a new file.
        let changed = try sandbox.run([url, "--yes"], input: "people.include(id == 2).delete()\n")
        #expect(changed.status == 0, "\(changed)")
        let dumpedBack = try sandbox.run([url, ".dump"])
        #expect(dumpedBack.status == 0, "\(dumpedBack)")
        let back = try sandbox.run([sandbox.path("back.db")], input: dumpedBack.stdout)
        #expect(back.status == 0, "\(back)")
        let onBack = try sandbox.run([sandbox.path("back.db")], input: Self.queries)
        let onServerAgain = try sandbox.run([url], input: Self.queries)
        #expect(onBack.stdout == onServerAgain.stdout)
        #expect(!onBack.stdout.contains("\"Bo\""), "\(onBack.stdout)")
        let verified = try sandbox.run([url, ".verify"])
        #expect(verified.status == 0 && verified.stdout.contains("no problems"), "\(verified)")
    }

    @Test func commandsOnlyAFileHasNameTheServersOwnTool() throws {
        let sandbox = try ShellSandbox()
        let url = try PostgresCluster.shared().freshURL()
        let cases = [(".backup copy.db", "pg_dump"), (".compact", "VACUUM FULL"), (".recover new.db", "point-in-time")]
        for (command, tool) in cases {
            let run = try sandbox.run([url, command])
            #expect(run.status != 0, "\(command): \(run)")
            #expect(run.stderr.contains("kept in PostgreSQL") && run.stderr.contains(tool), "\(command): \(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("copy.db")))
        let stats = try sandbox.run([url, ".stats"])
        #expect(stats.status == 0 && stats.stdout.contains("store:  postgres://"), "\(stats)")
    }
}
}
