// A change asked about at a terminal, whose subject another process changes while the person answers: the shell
// says so and asks again, with what is there now.

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplAskingAgainTerminalTests {
    @Test func dropIndexAsksAgainWhenTheIndexWasRemadeMeanwhile() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople + [".createIndex by_age people age"])
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter(".dropIndex by_age people", expecting: "Drop index by_age of people (")
        try shell.expect("? [y/N] ", timeout: TerminalSession.shellPatience)
        try sandbox.prepare([".dropIndex by_age people", ".createIndex by_age people name"])
        try shell.sendLine("y")
        try shell.expect("Index by_age of people changed while you answered; asking again.",
                         timeout: TerminalSession.shellPatience)
        let question = try shell.expect("? [y/N] ", timeout: TerminalSession.shellPatience)
        #expect(question.contains("Drop index by_age of people ("), "\(question)")
        #expect(question.contains("name"), "the question is not about the index as it is now: \(question)")
        try shell.sendLine("y")
        try shell.expect("Dropped index by_age of people.", timeout: TerminalSession.shellPatience)
        try shell.enter(".exit")
        _ = try shell.waitForExit(timeout: TerminalSession.shellPatience)
        let indexes = try sandbox.run([sandbox.storePath, ".indexes people"])
        #expect(!indexes.stdout.contains("by_age"), "\(indexes)")
    }

    @Test func deleteAsksAgainWithTheNewCount() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter("people.include(age < 18).delete()", expecting: "Delete 2 documents from people? [y/N] ")
        try sandbox.prepare([#"people.insert({"id": 4, "name": "Di", "age": 5})"#])
        try shell.sendLine("y")
        try shell.expect("The matching documents changed while you answered (", timeout: TerminalSession.shellPatience)
        try shell.expect("); asking again.", timeout: TerminalSession.shellPatience)
        try shell.expect("Delete 3 documents from people? [y/N] ", timeout: TerminalSession.shellPatience)
        try shell.sendLine("y")
        try shell.expect("Deleted 3 documents.", timeout: TerminalSession.shellPatience)
        try shell.enter(".exit")
        _ = try shell.waitForExit(timeout: TerminalSession.shellPatience)
        #expect(try sandbox.count("people.count()") == 1)
    }
}
}
