import CReadline
import Foundation
import Synchronization

/// What reading a line gave.
enum LineInput: Equatable, Sendable {
    case line(String)
    /// Ctrl-C: with whether the line had text when it was pressed.
    case interrupted(hadText: Bool)
    /// Ctrl-D on an empty line, or the end of stdin.
    case endOfInput
}

/// Reads lines at a terminal with GNU readline: editing, history kept in a file, and tab completion; and reads
/// plain lines from a pipe.
///
/// Readline is driven through its callback interface on one serial queue, so the shell's tasks never block on it
/// and Ctrl-C can end a read: the signal wakes the read through a pipe, and the line is dropped.
final class LineReader: Sendable {
    private let queue = DispatchQueue(label: "docstore.readline")
    private let wake: (read: Int32, write: Int32)
    private let interruptRequested = Atomic<Bool>(false)
    private let reading = Atomic<Bool>(false)
    let historyPath: String?
    static let historyLimit: Int32 = 1000

    /// The words tab completion offers, set by the shell after each statement.
    static let completions = Mutex<[String]>([])

    init(historyPath: String?) {
        var fds: [Int32] = [0, 0]
        if pipe(&fds) != 0 { fds = [-1, -1] }
        wake = (fds[0], fds[1])
        self.historyPath = historyPath
        queue.sync {
            docstore_rl_configure(completeLine, " \t\n\"'`@><=;|&{([,.!")
            using_history()
            stifle_history(LineReader.historyLimit)
            if let historyPath {
                // append_history needs the file to exist.
                if !FileManager.default.fileExists(atPath: historyPath) {
                    _ = FileManager.default.createFile(atPath: historyPath, contents: nil,
                                                   attributes: [.posixPermissions: 0o600])
                }
                _ = history_truncate_file(historyPath, LineReader.historyLimit)
                _ = read_history(historyPath)
            }
        }
    }

    /// Where history is kept: `$DOCSTORE_HISTORY`, else `$XDG_STATE_HOME/docstore_history`, else `~/.docstore_history`.
    static func defaultHistoryPath() -> String? {
        let env = ProcessInfo.processInfo.environment
        if let p = env["DOCSTORE_HISTORY"], !p.isEmpty { return p }
        if let state = env["XDG_STATE_HOME"], !state.isEmpty { return state + "/docstore_history" }
        if let home = env["HOME"], !home.isEmpty { return home + "/.docstore_history" }
        return nil
    }

    /// Reads one line with `prompt`, adding it to the history (and its file) when it is not empty.
    func readLine(prompt: String, addToHistory: Bool = true) async -> LineInput {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: self.blockingRead(prompt: prompt, addToHistory: addToHistory)) }
        }
    }

    /// Whether a read is in progress: Ctrl-C then ends the read rather than the running statement.
    var isReading: Bool { reading.load(ordering: .sequentiallyConsistent) }

    /// Ends the read in progress, if any, as if Ctrl-C had been typed (called from the signal handler).
    func interrupt() {
        interruptRequested.store(true, ordering: .sequentiallyConsistent)
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write, &byte, 1)
    }

    // MARK: On the readline queue

    nonisolated(unsafe) private static var received: String?
    nonisolated(unsafe) private static var done = false

    private func blockingRead(prompt: String, addToHistory: Bool) -> LineInput {
        drainWake()
        interruptRequested.store(false, ordering: .sequentiallyConsistent)
        reading.store(true, ordering: .sequentiallyConsistent)
        defer { reading.store(false, ordering: .sequentiallyConsistent) }
        LineReader.received = nil
        LineReader.done = false
        rl_callback_handler_install(prompt) { line in
            LineReader.received = line.map { String(cString: $0) }
            LineReader.done = true
            free(line)
            rl_callback_handler_remove()
        }
        var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        while !LineReader.done {
            fds[0].revents = 0
            fds[1].revents = 0
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue } else { break } }
            if fds[1].revents != 0 {
                drainWake()
                if interruptRequested.exchange(false, ordering: .sequentiallyConsistent) {
                    let hadText = docstore_rl_end() > 0
                    rl_replace_line("", 0)
                    rl_callback_sigcleanup()
                    rl_callback_handler_remove()
                    Console.write(1, "\n")
                    return .interrupted(hadText: hadText)
                }
            }
            if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { rl_callback_read_char() }
        }
        guard let line = LineReader.received else { Console.write(1, "\n"); return .endOfInput }
        if addToHistory && !line.trimmingCharacters(in: .whitespaces).isEmpty {
            add_history(LineReader.withoutPasswords(line))
            if let historyPath {
                _ = append_history(1, historyPath)
                _ = history_truncate_file(historyPath, LineReader.historyLimit)
            }
        }
        return .line(line)
    }

    /// `line` with the password of each PostgreSQL URL in it left out (`.open postgres://ann:secret@db/app` is kept
    /// as `.open postgres://ann@db/app`): the history file keeps no password.
    static func withoutPasswords(_ line: String) -> String {
        line.replacingOccurrences(of: #"(postgres(ql)?://[^:/@\s]*):[^@/\s]*@"#, with: "$1@",
                                  options: [.regularExpression, .caseInsensitive])
    }

    private func drainWake() {
        var flags = fcntl(wake.read, F_GETFL)
        if flags & O_NONBLOCK == 0 { flags |= O_NONBLOCK; _ = fcntl(wake.read, F_SETFL, flags) }
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wake.read, &buffer, 64) > 0 {}
    }

    nonisolated(unsafe) static var candidates: [String] = []
    nonisolated(unsafe) static var matches: [String] = []
    nonisolated(unsafe) static var nextMatch = 0
}

// MARK: Completion (C callbacks, on the readline queue)

/// Offers dot-commands at the start of a line, file names after the commands that take one, and otherwise the
/// language's words with the store's collections, saved filters, indexes and fields.
private func completeLine(_ text: UnsafePointer<CChar>?, _ start: Int32, _ end: Int32)
    -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
    let line = docstore_rl_line_buffer().map { String(cString: $0) } ?? ""
    let before = String(decoding: line.utf8.prefix(Int(start)), as: UTF8.self)
    let trimmed = before.trimmingCharacters(in: .whitespaces)
    let firstWord = trimmed.split(separator: " ").first.map(String.init) ?? ""
    let takesFile = [".import", ".read", ".open", ".output", ".export"].contains(firstWord) && trimmed.contains(" ")
    if takesFile { return nil }   // readline's own file name completion
    docstore_rl_set_completion_over(1)
    let known = LineReader.completions.withLock { $0 }
    if trimmed == "." {
        LineReader.candidates = Shell.commands.map(\.name) + ["quit"]
        return rl_completion_matches(text, nextCompletion)
    }
    // A name in a statement goes on with `.`, `(` or an operator: nothing is added after it (a command's name gets
    // readline's space, before its arguments).
    docstore_rl_set_completion_append(0)
    if before.hasSuffix(".") {
        LineReader.candidates = Parser.stepWords + known
    } else {
        LineReader.candidates = known + Parser.statementWords + Parser.stepWords + ["true", "false", "nil", "date", "in"]
    }
    if before.hasSuffix("`") {
        // Inside a name in backticks: the names that need them, without the backtick already typed.
        LineReader.candidates = LineReader.candidates.filter { $0.hasPrefix("`") }.map { String($0.dropFirst()) }
    }
    return rl_completion_matches(text, nextCompletion)
}

/// Readline's generator: called with state 0 for the first match, then until it returns nil.
private func nextCompletion(_ text: UnsafePointer<CChar>?, _ state: Int32) -> UnsafeMutablePointer<CChar>? {
    if state == 0 {
        let prefix = text.map { String(cString: $0) } ?? ""
        var seen: Set<String> = []
        // A name in backticks (`Body Mass (g)`) is offered for the text typed without them (Bo).
        LineReader.matches = LineReader.candidates.filter {
            ($0.hasPrefix(prefix) || ($0.hasPrefix("`") && $0.dropFirst().hasPrefix(prefix))) && seen.insert($0).inserted
        }.sorted()
        LineReader.nextMatch = 0
    }
    guard LineReader.nextMatch < LineReader.matches.count else { return nil }
    defer { LineReader.nextMatch += 1 }
    return strdup(LineReader.matches[LineReader.nextMatch])
}
