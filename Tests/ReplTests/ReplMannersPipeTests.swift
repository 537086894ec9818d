// The shell's manners, through the real binary: statements that end in `;`, help on every word a user types,
// messages that name the shell's own options, and files that cannot be reached said to be so.

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplMannersPipeTests {
    @Test func aStatementMayEndInASemicolon() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let script = """
            people.include(age >= 18).count();
            begin;
            people.insert({"id": 4, "name": "Di", "age": 30});
            commit;
            people.count() ;

            """
        let result = try sandbox.run([sandbox.storePath], input: script)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.containsInOrder(["1\n", "4\n"]), "\(result)")
    }

    @Test func helpOnTheTransactionWordsDescribesTransactions() throws {
        let sandbox = try ShellSandbox()
        for word in ["begin", "commit", "rollback", "transaction"] {
            let result = try sandbox.run([sandbox.storePath, ".help \(word)"])
            #expect(result.status == 0, "\(word): \(result)")
            #expect(result.stdout.hasPrefix("begin / commit / rollback"), "\(word): \(result)")
            #expect(result.stdout.contains("Example: begin"), "\(word): \(result)")
        }
        let close = try sandbox.run([sandbox.storePath, ".help rollbak"])
        #expect(close.stderr.contains("did you mean .help rollback?"), "\(close)")
        let help = try sandbox.run(["--help"])
        #expect(help.stdout.contains("--check ") && help.stdout.contains("--no-check"), "\(help)")
    }

    /// An index on a collection that does not exist is refused, naming it (and the closest one); on a field no
    /// document has, it is made with a warning; `.verify` of a collection that does not exist is an error.
    @Test func createIndexAndVerifyNameAMissingCollection() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople + ["people.include(age >= 0).delete()",
                                                        #"pets.insert({"id": 1, "name": "Rex"})"#])
        let script = """
            .createIndex by_date nosuch date
            .createIndex by_name peple name
            .createIndex by_city people city
            .createIndex by_kind pets kind
            .verify nosuch
            .verify pet
            .indexes

            """
        let result = try sandbox.run(["--yes", sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.containsInOrder([
            "no collection is named 'nosuch'",
            "no collection is named 'peple' (did you mean 'people'?)",
            "warning: no document of 'people' has a field 'city' (it has no documents yet)",
            "warning: no document of 'pets' has a field 'kind'",
            "no collection is named 'nosuch'",
            "no collection is named 'pet' (did you mean 'pets'?)",
        ]), "\(result)")
        #expect(result.stdout.contains("people.by_city") && result.stdout.contains("pets.by_kind"), "\(result)")
        let collections = try sandbox.run([sandbox.storePath, ".collections"])
        #expect(!collections.stdout.contains("nosuch") && !collections.stdout.contains("peple"), "\(collections)")
    }

    /// A store this user may not write is refused naming `--readonly`, the shell's option, not the library's.
    @Test func aStoreThatCannotBeWrittenPointsToReadonly() throws {
        guard ShellUser.canDropPrivileges else { return }
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let locked = sandbox.path("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: false)
        try FileManager.default.moveItem(atPath: sandbox.storePath, toPath: locked + "/people.db")
        try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: locked)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: locked) }
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: locked + "/people.db")

        let refused = try sandbox.run([locked + "/people.db", "people.count()"], as: .unprivileged)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("(docstore --readonly)"), "\(refused)")
        #expect(!refused.stderr.contains("DocStore.Options"), "\(refused)")
        let read = try sandbox.run(["--readonly", locked + "/people.db", "people.count()"], as: .unprivileged)
        #expect(read.stdout == "3\n", "\(read)")
    }

    /// A file in a folder this user may not search is "permission denied", naming the folder, for every command
    /// that reads a file; a missing one is still "no such file".
    @Test func aFileThatCannotBeReachedIsPermissionDeniedNotMissing() throws {
        guard ShellUser.canDropPrivileges else { return }
        let sandbox = try ShellSandbox()
        let secret = sandbox.path("secret")
        try FileManager.default.createDirectory(atPath: secret, withIntermediateDirectories: false)
        try sandbox.write("people.count()\n", to: "secret/script.txt")
        try sandbox.write(#"[{"id": 1}]"#, to: "secret/people.json")
        try sandbox.write("{}\n", to: "secret/dump.ndjson")
        try sandbox.write("", to: "secret/inner.db")
        // The shell's own store, in a folder it may write.
        let mine = sandbox.path("mine")
        try FileManager.default.createDirectory(atPath: mine, withIntermediateDirectories: false)
        if getuid() == 0 {
            try FileManager.default.setAttributes([.ownerAccountID: Int(ShellUser.unprivilegedID)], ofItemAtPath: mine)
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: secret)
        if getuid() != 0 { try FileManager.default.setAttributes([.posixPermissions: 0o000], ofItemAtPath: secret) }
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: secret) }

        let script = """
            .read secret/script.txt
            .import secret/people.json people
            .restore secret/dump.ndjson
            .open secret/inner.db
            .read missing.txt

            """
        let result = try sandbox.run([mine + "/n.db"], input: script, as: .unprivileged)
        #expect(result.status == 1, "\(result)")
        let denied = "permission denied (the folder secret cannot be searched by this user)"
        #expect(result.stderr.containsInOrder([
            "cannot read secret/script.txt: \(denied)",
            "cannot read secret/people.json: \(denied)",
            "cannot read secret/dump.ndjson: \(denied)",
            "cannot open secret/inner.db: \(denied)",
            "cannot read missing.txt: no such file",
        ]), "\(result)")
    }
}
}
