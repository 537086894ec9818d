import DocStore
import Foundation

/// The file formats of `.import` and `.export`, chosen by the file's extension.
enum TransferFormat: String {
    case json, ndjson, csv

    init(path: String) throws {
        switch (path as NSString).pathExtension.lowercased() {
        case "json": self = .json
        case "ndjson", "jsonl": self = .ndjson
        case "csv": self = .csv
        default:
            throw ShellError("cannot tell the format of \(path) from its extension: use .json (an array of "
                + "documents), .ndjson or .jsonl (one per line), or .csv")
        }
    }
}

/// Writes a file through a POSIX descriptor, buffered, from inside a store transaction.
// `@unchecked Sendable`: the shell hands it to one transaction closure at a time, which runs on one thread.
final class FileWriter: @unchecked Sendable {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var closed = false
    let path: String

    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw ShellError("cannot write to \(path): \(String(cString: strerror(errno)))") }
        self.path = path
    }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { try flush() }
    }

    func flush() throws {
        var offset = 0
        while offset < buffer.count {
            let n = buffer[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ShellError("cannot write to \(path): \(String(cString: strerror(errno)))")
            }
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Writes what is buffered and closes the file; a second call does nothing.
    func close() throws {
        guard !closed else { return }
        closed = true
        defer { Glibc.close(fd) }
        try flush()
    }
}

extension Shell {
    // MARK: Import

    /// `.import FILE COLLECTION [--null MARKER] [--dates FIELD,...] [--date-format FORMAT] [--number COLUMN,...]
    /// [--text COLUMN,...]`.
    func importFile(_ arguments: [String]) async throws {
        let usage = ".import FILE COLLECTION [--null MARKER] [--dates FIELD,...] [--date-format FORMAT] "
            + "[--number COLUMN,...] [--text COLUMN,...]"
        guard arguments.count >= 2 else { throw ShellError("usage: \(usage)") }
        let (path, collection) = (arguments[0], Shell.name(arguments[1]))
        var reading = CSV.Reading()
        var options = arguments.dropFirst(2)
        func fields(_ value: String, of option: String) throws -> [FieldPath] {
            do { return try Parser.fieldPaths(value) } catch {
                throw ShellError("\(option) takes field names separated by commas (`in backticks` when a name has "
                    + "spaces or punctuation): \(error.message)")
            }
        }
        while let option = options.popFirst() {
            guard let value = options.popFirst() else { throw ShellError("\(option) needs a value; usage: \(usage)") }
            switch option {
            case "--null": reading.nullMarker = value
            case "--dates": reading.dates.formUnion(try fields(value, of: option))
            case "--date-format":
                do { reading.dateFormat = try DateTextFormat(value) } catch { throw ShellError("--date-format: \(error)") }
            case "--number": reading.numbers.formUnion(try fields(value, of: option))
            case "--text": reading.texts.formUnion(try fields(value, of: option))
            default: throw ShellError("unknown option '\(option)'; usage: \(usage)")
            }
        }
        let format = try TransferFormat(path: path)
        if format != .csv, let option = [("--number", reading.numbers), ("--text", reading.texts)].first(where: { !$0.1.isEmpty }) {
            throw ShellError("\(option.0) types the columns of a CSV file; \(path) is JSON, whose values have their types")
        }
        if reading.dateFormat != nil && reading.dates.isEmpty {
            throw ShellError("--date-format says how the fields of --dates are written; name them with --dates")
        }
        try Shell.checkReadable(path)
        // The file is read twice (to type its columns and check its rows, then to write them): a pipe cannot be.
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw ShellError("cannot import \(path): it is not a regular file, and an import reads its file twice (to "
                + "type the columns and check the rows, then to write them); copy it to a file first")
        }
        let idPath = try await idPath(of: collection)
        let batch: DocumentBatch
        switch format {
        case .csv:
            let (plan, documents) = try CSV.streamed(path: path, reading: reading, idPath: idPath,
                                                     inMemory: pending.isOpen)
            batch = documents
            if batch.count > 0 {
                try await writeDocuments(batch, into: collection, idPath: idPath, replacing: true, from: path)
            }
            if !plan.keptText.isEmpty {
                let kept = plan.keptText.map { "\($0.column) (row \($0.row): \($0.text.debugDescription))" }
                console.note("Kept as text, for a cell that is not a number: \(kept.joined(separator: ", ")); "
                    + "--number reads such a column as numbers, --text keeps any column as text.")
            }
        case .json, .ndjson:
            batch = try Shell.jsonDocuments(path: path, format: format, reading: reading, idPath: idPath,
                                            inMemory: pending.isOpen)
            if batch.count > 0 {
                try await writeDocuments(batch, into: collection, idPath: idPath, replacing: true, from: path)
            }
        }
        if batch.count == 0 { console.note("\(path) holds no documents; nothing was imported.") }
    }

    /// A JSON document as stored: the strings at the paths of `--dates` become dates (one that is not a date is an
    /// error); with `--null`, strings equal to the marker become nil.
    nonisolated static func readingExtendedJSON(_ document: DocumentValue, reading: CSV.Reading, origin: String) throws -> DocumentValue {
        var out = reading.nullMarker.map { nulling(document, marker: $0) } ?? document
        for path in reading.dates.sorted(by: { $0.description < $1.description }) {
            switch out[path: path] {
            case .string(let text)?:
                guard let date = reading.date(text) else {
                    throw ShellError("\(origin): '\(path)' is \(text.debugDescription), not \(reading.dateWording)")
                }
                out = out.setting(.date(date), at: path)
            case nil, .null?, .date?: break
            case let other?:
                throw ShellError("\(origin): '\(path)' is \(other.json()), not \(reading.dateWording)")
            }
        }
        return out
    }

    /// A value with the strings equal to `marker` as nil.
    nonisolated static func nulling(_ value: DocumentValue, marker: String) -> DocumentValue {
        switch value {
        case .object(let fields): return .object(fields.map { .init($0.name, nulling($0.value, marker: marker)) })
        case .array(let elements): return .array(elements.map { nulling($0, marker: marker) })
        case .string(let s) where s == marker: return .null
        default: return value
        }
    }

    /// The value JSON `text` holds (as ``DocumentValue/init(json:)`` reads it), or an error showing where it is not
    /// JSON.
    nonisolated static func json(_ text: String, origin: String, firstLine: Int = 1) throws -> DocumentValue {
        do { return try DocumentValue(json: text) } catch {
            let before = String(decoding: text.utf8.prefix(error.offset), as: UTF8.self).unicodeScalars
            let line = before.split(separator: "\n", omittingEmptySubsequences: false)
            let spot = SourceLocation(offset: before.count, line: line.count, column: (line.last?.count ?? 0) + 1)
            throw ShellError(ParseError(message: error.reason, location: spot)
                .rendered(source: text, origin: origin, firstLine: firstLine))
        }
    }

    nonisolated static func parseJSONDocuments(_ text: String, origin: String) throws -> [DocumentValue] {
        let value = try json(text, origin: origin)
        switch value {
        case .array(let list): return list
        case .object: return [value]
        default: throw ShellError("\(origin) holds \(value.literalText.prefix(40)), not a document or a list of them")
        }
    }

    /// The documents of a JSON or NDJSON file, with `reading`'s dates and null marker, to write. NDJSON is read a
    /// line at a time, once to check every line and take the ids, and again as the documents are written (held in
    /// memory instead with `inMemory`, for a transaction that applies its changes at commit); a JSON array is read
    /// whole.
    nonisolated static func jsonDocuments(path: String, format: TransferFormat, reading: CSV.Reading,
                                          idPath: FieldPath, inMemory: Bool) throws -> DocumentBatch {
        func id(_ d: DocumentValue) -> DocumentValue? { d[path: idPath].flatMap { $0 == .null ? nil : $0 } }
        guard format == .ndjson else {
            let data = try Shell.contents(ofFile: path)
            guard let text = String(data: data, encoding: .utf8) else { throw ShellError("\(path) is not UTF-8 text") }
            let documents = try parseJSONDocuments(text, origin: path).enumerated().map { (i, d) in
                try readingExtendedJSON(d, reading: reading, origin: "\(path), document \(i + 1)")
            }
            return DocumentBatch(count: documents.count, ids: documents.compactMap(id)) { body in
                for d in documents { try body(d) }
            }
        }
        var ids: [DocumentValue] = [], count = 0, held: [DocumentValue] = []
        try forEachNDJSON(path: path, reading: reading) { d in
            count += 1
            if let id = id(d) { ids.append(id) }
            if inMemory { held.append(d) }
        }
        if inMemory {
            return DocumentBatch(count: count, ids: ids) { [held] body in for d in held { try body(d) } }
        }
        return DocumentBatch(count: count, ids: ids) { body in try forEachNDJSON(path: path, reading: reading, body) }
    }

    /// Each document of an NDJSON file, one a line (blank lines skipped), read in blocks.
    nonisolated static func forEachNDJSON(path: String, reading: CSV.Reading,
                                          _ body: (DocumentValue) throws -> Void) throws {
        var lines = FileLines(try CSVFileBytes(path: path), origin: path)
        var number = 0
        while let line = try lines.next() {
            number += 1
            if number % 1000 == 0 { try Task.checkCancellation() }
            guard !line.allSatisfy(\.isWhitespace) else { continue }
            let value = try json(String(line), origin: path, firstLine: number)
            guard case .object = value else {
                throw ShellError(ParseError(message: "each line holds one document ({...})",
                                            location: SourceLocation(offset: 0, line: 1, column: 1))
                    .rendered(source: String(line), origin: path, firstLine: number))
            }
            try body(try readingExtendedJSON(value, reading: reading, origin: "\(path), line \(number)"))
        }
    }

    // MARK: Export

    /// `.export COLLECTION|QUERY FILE`: the rows the query prints (its documents, or the groups, values or fields it
    /// computes from them) written to FILE in the format its extension names.
    func export(_ source: String, to path: String) async throws {
        let format = try TransferFormat(path: path)
        guard case .query(let expression) = try Parser.statement(source) else {
            throw ShellError("usage: .export COLLECTION|QUERY FILE, such as .export people.include(age >= 18) "
                + "adults.json")
        }
        let resolved = try await resolve(expression)
        let compute: (@Sendable (ReadContext) throws -> Computed)?
        do { compute = try Shell.computation(of: resolved) } catch {
            throw ShellError("cannot export \(expression.text): \(error); .export writes the rows a query prints")
        }
        warn(resolved.warnings, in: source)
        guard try await mayWrite("an export", to: path) else { return }
        let q = resolved.query
        // What is written, read in one transaction: the documents one at a time, or the rows computed.
        let rows: @Sendable (ReadContext, (DocumentValue) throws -> Void) throws -> Void
        let noun: String
        if let compute {
            let computed = try await reading(compute)
            rows = { _, body in for row in computed.rows { try body(row) } }
            noun = computed.noun
        } else {
            rows = { ctx, body in
                let documents = try q.cursor(in: ctx)
                while let d = try documents.next() { try body(d) }
            }
            noun = "document"
        }
        let total = compute == nil ? try await reading { try q.count(in: $0) } : 0
        // Written beside the file and renamed over it at the end: a failed or cancelled export leaves it as it was.
        let temporary = path + ".docstore-partial"
        let writer = try FileWriter(path: temporary)
        var finished = false
        defer {
            try? writer.close()
            if !finished { unlink(temporary) }
        }
        let showProgress = console.stderrIsTerminal && total >= 5_000
        let written = try await reading { ctx -> Int in
            var n = 0
            func tick() {
                n += 1
                if showProgress && n % 1000 == 0 { Progress.draw(label: "exporting", done: n, total: total) }
            }
            switch format {
            case .json:
                try writer.write("[")
                try rows(ctx) { d in
                    try writer.write((n == 0 ? "\n" : ",\n") + d.json())
                    tick()
                }
                try writer.write(n == 0 ? "]\n" : "\n]\n")
            case .ndjson:
                try rows(ctx) { d in try writer.write(d.json() + "\n"); tick() }
            case .csv:
                var columns = CSV.Columns()
                try rows(ctx) { columns.add($0) }
                try writer.write(columns.header)
                try rows(ctx) { d in
                    try writer.write(columns.row(d))
                    tick()
                }
            }
            if showProgress { Progress.draw(label: "exporting", done: n, total: total) }
            return n
        }
        try writer.close()
        guard rename(temporary, path) == 0 else {
            throw ShellError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        finished = true
        console.note("Exported \(written) \(noun)\(written == 1 ? "" : "s") to \(path).")
    }

    // MARK: Scripts

    /// Whether `text` is the start of a statement that goes on on the next line (an open bracket or string).
    static func needsMore(_ text: String) -> Bool {
        if text.trimmingCharacters(in: .whitespaces).hasPrefix(".") { return false }
        do {
            _ = try Parser.statement(text)
            return false
        } catch {
            return error.isIncomplete
        }
    }

    /// Runs the statements of a file, one per line (or several lines while brackets are open).
    func readFile(_ path: String) async throws {
        guard readDepth < 16 else {
            throw ShellError(".read is nested more than 16 deep (does \(path) read itself?)")
        }
        readDepth += 1
        defer { readDepth -= 1 }
        guard let text = String(data: try Shell.contents(ofFile: path), encoding: .utf8) else {
            throw ShellError("cannot read \(path): it is not UTF-8 text")
        }
        var failures = 0
        var statement = ""
        var firstLine = 1
        let lines = text.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false)
        for (i, line) in lines.enumerated() {
            if statement.isEmpty { firstLine = i + 1 }
            statement += (statement.isEmpty ? "" : "\n") + line
            if Shell.needsMore(statement) { continue }
            try Task.checkCancellation()   // Ctrl-C stops the script between statements
            let ok = await execute(statement, origin: path, firstLine: firstLine)
            statement = ""
            if !ok {
                failures += 1
                if bail { break }
            }
            if exitCode != nil { break }
        }
        if !statement.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            if !(await execute(statement, origin: path, firstLine: firstLine)) { failures += 1 }
        }
        if failures > 0 { throw ShellError("\(failures) statement\(failures == 1 ? "" : "s") of \(path) failed") }
    }
}

extension Shell {
    /// `.dump [FILE]`: the whole store as NDJSON, to FILE or to the output (`.output`), as of one commit.
    func dump(_ args: [String]) async throws {
        let store = try requireStore()
        if let file = args.first, !(try await mayWrite("a dump", to: file)) { return }
        if pending.isOpen && !pending.isEmpty {
            console.note("The pending changes are not in the file, and are not in the dump.")
        }
        if let file = args.first {
            let summary = try await store.dump(to: file)
            console.note("Dumped \(summary) to \(file).")
        } else {
            try await store.dump(toDescriptor: console.outputFD ?? 1)
        }
    }

    /// `.restore FILE`, or a dump given as the shell's input (its first line read already): builds the open store,
    /// which must be empty, from it.
    func restore(_ file: String?, firstLine: String? = nil) async throws {
        let store = try requireStore()
        guard !pending.isOpen else { throw ShellError("a restore applies at once: commit or rollback first") }
        let summary: DumpSummary
        if let file {
            try Shell.checkReadable(file)
            summary = try await store.restore(from: file)
        } else {
            // The first line was read from standard input, which the library reads on from.
            summary = try await store.restore(fromDescriptor: 0, origin: "the input", alreadyRead: (firstLine ?? "") + "\n")
        }
        console.note("Restored \(summary) into \(store.path).")
    }

    /// Restores the dump the shell's input is, whose first line was read; false, with the error shown, when it
    /// fails (and nothing was restored).
    func restoreInput(firstLine: String) async -> Bool {
        do {
            try await restore(nil, firstLine: firstLine)
            return true
        } catch {
            console.error("error: \(error)")
            hadError = true
            return false
        }
    }

    /// The first line of standard input, read a byte at a time (so nothing after it is taken from the descriptor),
    /// without its newline; `nil` at the end of the input.
    nonisolated static func rawFirstLine() -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(0, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == 0x0A {
                if line.last == 0x0D { line.removeLast() }   // as Swift.readLine strips a CRLF
                return String(decoding: line, as: UTF8.self)
            }
            line.append(byte)
        }
    }

    /// Whether a line is the first of a dump: what `docstore NEW < dump` restores.
    nonisolated static func isDumpHeader(_ line: String) -> Bool { line.hasPrefix("{\"docstore\":\"dump\"") }
}
