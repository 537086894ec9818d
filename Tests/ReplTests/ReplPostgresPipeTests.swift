import Foundation
import Testing
import TestSupport
@testable import repl

/// What tells a store kept in PostgreSQL from a file, and the history that keeps no password: no server needed.
@Suite struct PostgresLocationTests {
    @Test func aPostgresURLIsToldFromAPathAndItsPasswordIsLeftOutOfTheHistory() {
        for url in ["postgres://u@h/db", "postgresql://u:p@h:5433/db?schema=s", "POSTGRES://h/db"] {
            #expect(Shell.isServerURL(url), "\(url)")
        }
        for path in ["people.db", "postgres:/x.db", "./postgres://x", "/tmp/postgres.db", "postgresx://h/db"] {
            #expect(!Shell.isServerURL(path), "\(path)")
        }
        #expect(LineReader.withoutPasswords(".open postgres://ann:s3cr%2Ft@db:5432/app?schema=x")
                == ".open postgres://ann@db:5432/app?schema=x")
        #expect(LineReader.withoutPasswords(".open postgresql://ann@db/app") == ".open postgresql://ann@db/app")
        #expect(LineReader.withoutPasswords(#"people.include(email == "a:b@c")"#) == #"people.include(email == "a:b@c")"#)
    }
}

extension ShellSessions {
/// The shell on a store kept in PostgreSQL, on the tests' own cluster: opened by its URL, moved from a file and back
/// with one dump, and refusing what only a store kept in a file has, naming the server's tool for it.
@Suite(.enabled(if: PostgresCluster.isAvailable, Comment(rawValue: PostgresCluster.skipReason)))
struct ReplPostgresPipeTests {
    /// `docstore URL` opens the shell on the store kept there, created when missing; another process sees what one
    /// wrote; `postgresql://` is the same URL, `.open URL` opens it from another store, and the store is named
    /// without its password.
    @Test func aPostgresURLOpensTheShellOnThatStore() throws {
        let sandbox = try ShellSandbox()
        let cluster = try PostgresCluster.shared()
        let url = cluster.freshURL()
        let script = (ShellSandbox.threePeople + [
            ".createIndex by_age people age",
            "people.include(age >= 18).sortBy(name)",
            "people.include(age < 18).delete()",
            "people.count()",
            ".stats",
        ]).joined(separator: "\n") + "\n"
        let made = try sandbox.run([url, "--yes"], input: script)
        #expect(made.status == 0, "\(made)")
        #expect(made.stdout.containsInOrder(["Ann", "Deleted 2 documents", "1", "store:  \(url)\n",
                                             "file:   none, the store is kept in PostgreSQL",
                                             "people: 1 documents, 1 indexes"]), "\(made)")

        let other = try sandbox.run([url.replacingOccurrences(of: "postgres://", with: "postgresql://"),
                                     "people.include(age >= 18).count()"])
        #expect(other.status == 0 && other.stdout == "1\n", "\(other)")

        let schema = try #require(url.components(separatedBy: "schema=").last)
        let withPassword = cluster.url(schema: schema, password: "hunter2zz")
        let opened = try sandbox.run([sandbox.storePath, ".open \(withPassword)", "people.count()"])
        #expect(opened.status == 0, "\(opened)")
        #expect(opened.stdout == "Opened \(url).\n1\n", "\(opened)")

        let readOnly = try sandbox.run(["--readonly", url, "people.count()", #"people.insert({"id": 9})"#])
        #expect(readOnly.status == 1 && readOnly.stdout == "1\n", "\(readOnly)")
        #expect(readOnly.stderr.contains("read-only"), "\(readOnly)")

        let unreachable = try sandbox.run(["postgres://nobody:hunter2zz@127.0.0.1:1/none", "people.count()"])
        #expect(unreachable.status == 1 && unreachable.stderr.contains("cannot open"), "\(unreachable)")
        for run in [opened, unreachable] {
            #expect(!(run.stdout + run.stderr).contains("hunter2zz"), "the password is shown: \(run)")
        }
    }

    /// One dump moves a store from a file to PostgreSQL (`docstore URL < dump`) and back (`.dump FILE`, then
    /// `.restore FILE`, or through a pipe), and the same queries answer the same on each; `.restore` in the shell
    /// fills a store kept in PostgreSQL too.
    @Test func oneDumpMovesAStoreFromAFileToPostgresAndBack() throws {
        let sandbox = try ShellSandbox()
        let cluster = try PostgresCluster.shared()
        let setup = """
            people.insert([{"id": 1, "name": "Ann", "age": 41, "city": "Oslo", "born": date("1983-05-01"), "tags": ["swift", "go"]}, {"id": 2, "name": "Bo", "age": 17.5, "city": "Bergen", "address": {"city": "Bergen", "zip": "5003"}}, {"id": 3, "name": "Cy", "age": 9, "city": "Tromsø", "nick": nil, "tags": ["swift"]}])
            notes.insert({"text": "first"})
            .createIndex by_age people age
            .createIndex tags people tags multi
            .save adults people.include(age >= 18)
            .migrate first addField people country NO ; createIndex country people country

            """
        let made = try sandbox.run([sandbox.storePath, "--yes"], input: setup)
        #expect(made.status == 0, "\(made)")
        let dump = try sandbox.run([sandbox.storePath, ".dump"])
        #expect(dump.status == 0, "\(dump)")

        let url = cluster.freshURL()
        let restored = try sandbox.run([url], input: dump.stdout)
        #expect(restored.status == 0, "\(restored)")
        #expect(restored.stdout.contains("Restored 2 collections, 4 documents, 3 indexes, 1 saved filter, "
            + "1 migration record into \(url)."), "\(restored)")
        let dumpedAgain = try sandbox.run([url, ".dump back.ndjson"])
        #expect(dumpedAgain.status == 0, "\(dumpedAgain)")
        let back = try sandbox.run([sandbox.path("back.db"), ".restore back.ndjson"])
        #expect(back.status == 0, "\(back)")
        let fromShell = cluster.freshURL()
        let restoredInShell = try sandbox.run([fromShell, ".restore back.ndjson"])
        #expect(restoredInShell.status == 0, "\(restoredInShell)")
        let piped = try sandbox.run([url, ".dump"])
        let backThroughAPipe = try sandbox.run([sandbox.path("piped.db")], input: piped.stdout)
        #expect(piped.status == 0 && backThroughAPipe.status == 0, "\(piped)\n\(backThroughAPipe)")

        // The dump of the store kept in PostgreSQL holds what the file's did, after the header that names and dates it.
        let original = dump.stdout.split(separator: "\n").dropFirst()
        #expect(try sandbox.read("back.ndjson").split(separator: "\n").dropFirst() == original)

        let queries = """
            .mode json
            people.sortBy(id)
            adults.sortBy(name)
            people.include(tags.contains("swift")).count()
            people.include(age >= 9 && age < 18).select(name, age)
            people.groupBy(city).count()
            people.include(born > date("1980-01-01")).select(name, born)
            people.max(age)
            notes.count()
            .collections
            .indexes
            .filters
            .migrations

            """
        let stores = [sandbox.storePath, url, sandbox.path("back.db"), fromShell, sandbox.path("piped.db")]
        let answers = try stores.map { location in
            let run = try sandbox.run([location], input: queries)
            #expect(run.status == 0 && run.stderr.isEmpty, "\(location): \(run)")
            return run.stdout
        }
        #expect(answers[0].contains(#""name":"Cy""#) && answers[0].contains("country"), "\(answers[0])")
        for (store, answer) in zip(stores, answers).dropFirst() {
            #expect(answer == answers[0], "\(store) answers otherwise:\n\(answer)\nthan the file:\n\(answers[0])")
        }
    }

    /// What only a store kept in a file has is refused on one kept in PostgreSQL, saying so and naming the server's
    /// tool that does it; what writes files goes on as on any store.
    @Test func fileOnlyCommandsOnPostgresNameTheServersTools() throws {
        let sandbox = try ShellSandbox()
        let url = try PostgresCluster.shared().freshURL()
        let result = try sandbox.run([url, "--yes", ShellSandbox.threePeople[0], ".backup b.db", ".compact",
                                      ".recover new.db", ".verify", ".output out.txt", "people.count()", ".output",
                                      ".dump d.ndjson", ".help backup"])
        #expect(result.status == 1, "\(result)")
        let needs = "needs a store kept in a file, and this one is kept in PostgreSQL: "
        #expect(result.stderr.containsInOrder([".backup " + needs, "pg_dump", "pg_basebackup",
                                               ".compact " + needs, "VACUUM FULL",
                                               ".recover " + needs, "point-in-time recovery"]), "\(result)")
        #expect(result.stdout.containsInOrder(["pg_amcheck", "Dumped", "On a store kept in PostgreSQL: pg_dump"]),
                "\(result)")
        #expect(try sandbox.read("out.txt") == "1\n")
        for file in ["b.db", "new.db"] { #expect(!FileManager.default.fileExists(atPath: sandbox.path(file))) }

        // A refusal comes before the read-only one, and `.recover` first opens the store as any statement does.
        let readOnly = try sandbox.run(["--readonly", url, ".compact"])
        #expect(readOnly.stderr.contains(".compact " + needs), "\(readOnly)")
        let recoverFirst = try sandbox.run([url, ".recover new.db", "people.count()"])
        #expect(recoverFirst.stderr.contains(".recover " + needs) && recoverFirst.stdout == "1\n", "\(recoverFirst)")
        let check = try sandbox.run(["--check", url, "people.count()"])
        #expect(check.status == 1 && check.stderr.contains("--check " + needs + "pg_amcheck"), "\(check)")
    }
}
}
