// An update at a terminal: counted and asked as a delete is, applied on y and not on n; and Tab completes the new
// words of a query.

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplUpdateTerminalTests {
    @Test func updateIsCountedConfirmedWithYAndAppliedOrDeclinedWithNAndNotApplied() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }

        try shell.enter(#"people.include(age < 18).update(set: {"city": "Moved"}, inc: {"age": 100})"#,
                        expecting: #"Update 2 documents of people (set city = "Moved", increment age by 100)? [y/N] "#)
        try shell.sendLine("y")
        try shell.expect("Updated 2 documents.", timeout: TerminalSession.shellPatience)
        try shell.enter(#"people.include(city == "Moved").sum(age)"#, expecting: "| 226      |")

        try shell.enter(#"people.include(city == "Moved").update(unset: ["city"])"#,
                        expecting: "Update 2 documents of people (unset city)? [y/N] ")
        try shell.sendLine("n")
        try shell.expect("Nothing was updated.", timeout: TerminalSession.shellPatience)
        #expect(try shell.leave() == 0)

        #expect(try sandbox.count(#"people.include(city == "Moved").count()"#) == 2)
        #expect(try sandbox.count(#"people.include(city == "Moved" && age > 100).count()"#) == 2)
        #expect(try sandbox.count(#"people.include(name == "Ann" && city == "Oslo" && age == 41).count()"#) == 1)
    }

    @Test func tabCompletesTheNewStepsAfterADot() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.expect(TerminalSession.shellPrompt, timeout: TerminalSession.shellPatience)
        try shell.send("people.grou")
        try shell.sendTab()
        try shell.expect("people.groupBy", timeout: TerminalSession.shellPatience)
        try shell.send("(city).cou")
        try shell.sendTab()
        try shell.expect("(city).count", timeout: TerminalSession.shellPatience)
        try shell.sendLine("()")
        try shell.expect("3 groups", timeout: TerminalSession.shellPatience)
        try shell.expect(TerminalSession.shellPrompt, timeout: TerminalSession.shellPatience)
        try shell.send("people.disti")
        try shell.sendTab()
        try shell.expect("people.distinct", timeout: TerminalSession.shellPatience)
        try shell.sendLine("(city)")
        try shell.expect("3 values", timeout: TerminalSession.shellPatience)
        #expect(try shell.leave() == 0)
    }
}
}
