import DocStore
import Foundation

/// Where the shell writes: results to the output (the terminal, or a file after `.output FILE`), messages to the
/// terminal, errors to stderr.
@MainActor
final class Console {
    /// Whether a person is at a terminal: confirmations can be asked, progress can be drawn.
    let interactive: Bool
    /// Whether stderr is a terminal (progress bars are drawn there).
    let stderrIsTerminal: Bool
    private(set) var outputFD: Int32?
    private(set) var outputPath: String?
    /// Long results a page at a time (`.pager on|off`), and the rest of the last one, for `it`.
    var pager = Pager()

    init(interactive: Bool) {
        self.interactive = interactive
        self.stderrIsTerminal = isatty(2) == 1
    }

    /// Results: documents, counts, plans. A failed write to an `.output` file is reported and sends results back
    /// to the terminal.
    func result(_ text: String) {
        guard let fd = outputFD else { Console.write(1, text); return }
        if let failure = Console.write(fd, text) {
            let path = outputPath ?? "?"
            try? redirect(to: nil)
            error("error: cannot write to \(path): \(failure); results go to the terminal again")
            Console.write(1, text)
        }
    }

    /// The terminal results are shown on, with its size; nil when they go to a file (`.output`) or a pipe.
    ///
    /// The size is the terminal's (`TIOCGWINSZ` on stdout), else `$COLUMNS` and `$LINES`, else 80 by 24.
    var resultScreen: (columns: Int, rows: Int)? {
        guard outputFD == nil, isatty(1) == 1 else { return nil }
        var size = winsize()
        var columns = 0, rows = 0
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0 {
            columns = Int(size.ws_col)
            rows = Int(size.ws_row)
        }
        let environment = ProcessInfo.processInfo.environment
        if columns <= 0 { columns = environment["COLUMNS"].flatMap { Int($0) } ?? 80 }
        if rows <= 0 { rows = environment["LINES"].flatMap { Int($0) } ?? 24 }
        return (max(columns, 10), max(rows, 5))
    }

    /// Messages about what happened ("Deleted 3 documents.").
    func note(_ text: String) { Console.write(1, text.hasSuffix("\n") ? text : text + "\n") }

    /// Errors and warnings.
    func error(_ text: String) { Console.write(2, text.hasSuffix("\n") ? text : text + "\n") }

    /// Sends results to `path` (created, or emptied), or back to stdout with `nil`.
    func redirect(to path: String?) throws {
        if let fd = outputFD { close(fd) }
        outputFD = nil
        outputPath = nil
        guard let path else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ShellError("cannot write to \(path): \(String(cString: strerror(errno)))") }
        outputFD = fd
        outputPath = path
    }

    /// Writes all of `text`; returns why not, when it could not.
    @discardableResult
    nonisolated static func write(_ fd: Int32, _ text: String) -> String? {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return String(cString: strerror(errno))
            }
            bytes = bytes.dropFirst(n)
        }
        return nil
    }
}

/// Long results shown a page at a time at a terminal: the first page, then `it` for each next one.
struct Pager {
    /// Whether long results stop after a page (`.pager on|off`); only ever at a terminal.
    var isOn = true
    /// The documents (or other rows, counted as `noun`s) of the last result not shown yet, with how many came
    /// before them and how many there are.
    var rest: (documents: ArraySlice<DocumentValue>, shown: Int, total: Int, noun: String)?
}

/// A shell error: a message for the person at the terminal.
struct ShellError: Error, CustomStringConvertible {
    var description: String
    init(_ message: String) { description = message }
}

/// A progress bar on stderr, for long imports and exports at a terminal.
enum Progress {
    /// Draws `label [#########-----]  45%  4500/10000` over the previous one. Safe to call from any thread.
    static func draw(label: String, done: Int, total: Int) {
        guard total > 0 else { return }
        let fraction = min(1, Double(done) / Double(total))
        let filled = Int(fraction * 30)
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: 30 - filled)
        Console.write(2, "\r\(label) [\(bar)] \(Int(fraction * 100))%  \(done)/\(total)")
        if done >= total { Console.write(2, "\n") }
    }
}
