import Foundation

/// Where the shell writes: results to the output (the terminal, or a file after `.output FILE`), messages to the
/// terminal, errors to stderr.
@MainActor
final class Console {
    /// Whether a person is at a terminal: confirmations can be asked, progress can be drawn.
    let interactive: Bool
    /// Whether stderr is a terminal (progress bars are drawn there).
    let stderrIsTerminal: Bool
    private var outputFile: FileHandle?
    private(set) var outputPath: String?

    init(interactive: Bool) {
        self.interactive = interactive
        self.stderrIsTerminal = isatty(2) == 1
    }

    /// Results: documents, counts, plans.
    func result(_ text: String) {
        if let outputFile { outputFile.write(Data(text.utf8)) } else { Console.write(1, text) }
    }

    /// Messages about what happened ("Deleted 3 documents.").
    func note(_ text: String) { Console.write(1, text.hasSuffix("\n") ? text : text + "\n") }

    /// Errors and warnings.
    func error(_ text: String) { Console.write(2, text.hasSuffix("\n") ? text : text + "\n") }

    /// Sends results to `path` (appending nothing: the file is replaced), or back to stdout with `nil`.
    func redirect(to path: String?) throws {
        try outputFile?.close()
        outputFile = nil
        outputPath = nil
        guard let path else { return }
        guard FileManager.default.createFile(atPath: path, contents: nil),
              let handle = FileHandle(forWritingAtPath: path) else {
            throw ShellError("cannot write to \(path)")
        }
        outputFile = handle
        outputPath = path
    }

    nonisolated static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue } else { return } }
            bytes = bytes.dropFirst(n)
        }
    }
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
