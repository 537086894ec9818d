// The `docstore` shell on a pseudo-terminal, for the tests of its output, its questions and its timer.

import Foundation
import Testing

extension TerminalSession {
    /// How long to wait for any one piece of output.
    static let shellPatience: Double = 20
    /// The prompt outside a transaction.
    static let shellPrompt = "docstore> "

    /// Starts the shell on a new terminal, in the sandbox's directory and environment.
    static func docstore(_ sandbox: ShellSandbox, _ arguments: [String]) throws -> TerminalSession {
        try DocStoreBinary.require()
        return try TerminalSession(executable: DocStoreBinary.path, arguments: arguments,
                                   environment: sandbox.environment, directory: sandbox.directory)
    }

    /// Waits for `shownPrompt`, types `statement` and Return, and waits for its echo and then for `reply` (if any);
    /// returns what came between the echo and the end of the reply.
    @discardableResult
    func enter(_ statement: String, at shownPrompt: String = shellPrompt, expecting reply: String? = nil) throws
        -> String {
        try expect(shownPrompt, timeout: Self.shellPatience)
        try sendLine(statement)
        try expect(statement, timeout: Self.shellPatience)
        guard let reply else { return "" }
        return try expect(reply, timeout: Self.shellPatience)
    }

    /// Waits for the prompt, types Ctrl-D, and returns the exit status.
    func leave(at shownPrompt: String = shellPrompt) throws -> Int32 {
        try expect(shownPrompt, timeout: Self.shellPatience)
        try sendControlD()
        return try waitForExit(timeout: Self.shellPatience)
    }
}
