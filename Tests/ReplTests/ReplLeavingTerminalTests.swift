// Leaving the shell at a terminal with Ctrl-D: changes pending in a transaction are dropped only once agreed to.

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplLeavingTerminalTests {
    @Test func controlDWithPendingChangesAsksBeforeDroppingThem() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter("begin", expecting: "Transaction started")
        try shell.enter(#"people.insert({"id": 10, "name": "Pending"})"#, at: "docstore (tx)> ",
                        expecting: "Pending: insert 1 document")
        try shell.expect("docstore (tx, 1 pending)> ", timeout: TerminalSession.shellPatience)
        try shell.sendControlD()
        try shell.expect("Leave and drop 1 pending change? [y/N] ", timeout: TerminalSession.shellPatience)
        try shell.sendLine("n")
        try shell.expect("Still in the transaction", timeout: TerminalSession.shellPatience)
        try shell.enter("people.count()", at: "docstore (tx, 1 pending)> ", expecting: "\n4\n")

        try shell.expect("docstore (tx, 1 pending)> ", timeout: TerminalSession.shellPatience)
        try shell.sendControlD()
        try shell.expect("Leave and drop 1 pending change? [y/N] ", timeout: TerminalSession.shellPatience)
        try shell.sendLine("y")
        try shell.expect("Dropped 1 pending change (not committed).", timeout: TerminalSession.shellPatience)
        #expect(try shell.waitForExit(timeout: TerminalSession.shellPatience) == 0)
        #expect(try sandbox.count("people.count()") == 3)
    }

    @Test func exitWithPendingChangesAsksBeforeDroppingThem() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter("begin", expecting: "Transaction started")
        try shell.enter(#"people.insert({"id": 10, "name": "Pending"})"#, at: "docstore (tx)> ",
                        expecting: "Pending: insert 1 document")
        try shell.enter(".exit", at: "docstore (tx, 1 pending)> ", expecting: "Leave and drop 1 pending change? [y/N] ")
        try shell.sendLine("n")
        try shell.expect("Still in the transaction", timeout: TerminalSession.shellPatience)
        try shell.enter(".exit 3", at: "docstore (tx, 1 pending)> ", expecting: "Leave and drop 1 pending change? [y/N] ")
        try shell.sendLine("y")
        try shell.expect("Dropped 1 pending change (not committed).", timeout: TerminalSession.shellPatience)
        #expect(try shell.waitForExit(timeout: TerminalSession.shellPatience) == 3)
        #expect(try sandbox.count("people.count()") == 3)
    }

    @Test func controlDAgainAtTheQuestionLeaves() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter("begin", expecting: "Transaction started")
        try shell.enter("people.include(age < 18).delete()", at: "docstore (tx)> ",
                        expecting: "Delete 2 documents from people? [y/N] ")
        try shell.sendLine("y")
        try shell.expect("docstore (tx, 1 pending)> ", timeout: TerminalSession.shellPatience)
        try shell.sendControlD()
        try shell.expect("Leave and drop 1 pending change? [y/N] ", timeout: TerminalSession.shellPatience)
        try shell.sendControlD()
        try shell.expect("Dropped 1 pending change (not committed).", timeout: TerminalSession.shellPatience)
        #expect(try shell.waitForExit(timeout: TerminalSession.shellPatience) == 0)
        #expect(try sandbox.count("people.count()") == 3)
    }

    @Test func controlDWithoutPendingChangesLeavesAtOnce() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter("begin", expecting: "Transaction started")
        try shell.expect("docstore (tx)> ", timeout: TerminalSession.shellPatience)
        try shell.sendControlD()
        #expect(try shell.waitForExit(timeout: TerminalSession.shellPatience) == 0)
        #expect(!shell.transcript.contains("Leave and drop"))
    }
}
}

extension ShellSessions {
@Suite struct ImportRereadTerminalTests {
    /// An import reads its file twice: one rewritten while the question about replacing waits is refused at the
    /// first id that is not the one counted, and nothing is written.
    @Test func aFileRewrittenWhileTheImportAsksWritesNothing() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"c.insert([{"id": 1, "name": "Old1"}, {"id": 2, "name": "Old2"}])"#])
        try sandbox.write("id,name\n1,Ann\n", to: "a.csv")
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter(".import a.csv c", expecting: "replacing 1 existing one (id 1)? [y/N] ")
        try sandbox.write("id,name\n2,Bob\n", to: "a.csv")
        try shell.sendLine("y")
        try shell.expect("changed while it was written", timeout: TerminalSession.shellPatience)
        try shell.enter(".exit")
        _ = try shell.waitForExit(timeout: TerminalSession.shellPatience)
        #expect(try sandbox.count(#"c.include(name == "Old1" || name == "Old2").count()"#) == 2)
    }
}
}
