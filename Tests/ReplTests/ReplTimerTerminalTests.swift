// `.timer` at a terminal: the time it reports leaves out the time spent answering a question.

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplTimerTerminalTests {
    @Test func timerLeavesOutTheTimeSpentAnsweringAQuestion() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter(".timer on")
        try shell.enter("people.include(age < 18).delete()", expecting: "Delete 2 documents from people? [y/N] ")
        // The person thinks for a second and a half before answering.
        usleep(1_500_000)
        try shell.sendLine("y")
        try shell.expect("Deleted 2 documents.", timeout: TerminalSession.shellPatience)
        try shell.expect("Run Time: ", timeout: TerminalSession.shellPatience)
        let line = try shell.expect("\n", timeout: TerminalSession.shellPatience)
        let waiting = try #require(line.range(of: " (not counting "), "\(line)")
        let runTime = try #require(Self.seconds(String(line[..<waiting.lowerBound])), "\(line)")
        let answering = try #require(Self.seconds(String(line[waiting.upperBound...])), "\(line)")
        #expect(answering >= 1.5, "\(line)")
        #expect(runTime < answering, "the time answering was counted: \(line)")
        #expect(try shell.leave() == 0)
    }

    /// "12.34 ms" or "1.52 s" at the start of `text`, in seconds.
    private static func seconds(_ text: String) -> Double? {
        let words = text.split(separator: " ")
        guard words.count >= 2, let value = Double(words[0]) else { return nil }
        if words[1].hasPrefix("ms") { return value / 1000 }
        return words[1].hasPrefix("s") ? value : nil
    }
}
}
