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

    func importFile(_ path: String, into collection: String) async throws {
        let format = try TransferFormat(path: path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ShellError("cannot read \(path): no such file, or not readable")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw ShellError("\(path) is not UTF-8 text") }
        var documents: [DocumentValue]
        switch format {
        case .json: documents = try Shell.parseJSONDocuments(text, origin: path)
        case .ndjson: documents = try Shell.parseNDJSON(text, origin: path)
        case .csv: documents = try CSV.documents(text, origin: path)
        }
        if documents.isEmpty { console.note("\(path) holds no documents; nothing was imported."); return }
        documents = try await assignIDs(documents, in: collection)
        let idPath = try await reading { ctx in try ctx.collections().first { $0.name == collection }?.idPath }
            ?? FieldPath("id")
        let batch = documents
        let ids = batch.compactMap { $0[path: idPath] }
        if Set(ids).count != ids.count { throw ShellError("\(path) holds two documents with the same id") }
        let showProgress = console.stderrIsTerminal && batch.count >= 5_000 && !pending.isOpen
        /// The ids of the file that the collection already has: the documents the import would replace.
        @Sendable func existing(_ ctx: ReadContext) throws -> [DocumentValue] {
            try ids.filter { try ctx.document(id: $0, in: collection) != nil }
        }
        while true {
            let replacing = try await reading { try existing($0) }
            let what = "\(batch.count) document\(batch.count == 1 ? "" : "s") into \(collection)"
            if !replacing.isEmpty {
                let n = replacing.count
                guard try await confirm("Import \(what), replacing \(n) existing one\(n == 1 ? "" : "s")?",
                                        refusing: "replace \(n) documents of \(collection)") else {
                    console.note("Nothing was imported.")
                    return
                }
            }
            let label = "importing"
            let written: Int? = try await change("import \(what) from \(path)", applies: { $0 != nil }) { ctx in
                // Exactly the documents counted are replaced: if others now share ids with the file, ask again.
                guard try existing(ctx) == replacing else { return nil }
                for (i, d) in batch.enumerated() {
                    if i % 1000 == 999 { try Task.checkCancellation() }   // Ctrl-C: the whole import is rolled back
                    try ctx.save(d, into: collection)
                    if showProgress && (i + 1) % 1000 == 0 { Progress.draw(label: label, done: i + 1, total: batch.count) }
                }
                if showProgress { Progress.draw(label: label, done: batch.count, total: batch.count) }
                return batch.count
            }
            if written != nil {
                let verb = pending.isOpen ? "Pending: import" : "Imported"
                console.note("\(verb) \(what)" + (replacing.isEmpty ? "." : ", replacing \(replacing.count)."))
                return
            }
            console.note("The documents of \(collection) changed while you answered; asking again.")
        }
    }

    static func parseJSONDocuments(_ text: String, origin: String) throws -> [DocumentValue] {
        let value: DocumentValue
        do { value = try Parser.wholeLiteral(text) } catch { throw ShellError(error.rendered(source: text, origin: origin)) }
        switch value {
        case .array(let list): return list
        case .object: return [value]
        default: throw ShellError("\(origin) holds \(value.literalText.prefix(40)), not a document or a list of them")
        }
    }

    static func parseNDJSON(_ text: String, origin: String) throws -> [DocumentValue] {
        var out: [DocumentValue] = []
        let lines = text.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false)
        for (i, line) in lines.enumerated() where !line.allSatisfy(\.isWhitespace) {
            do throws(ParseError) {
                let value = try Parser.wholeLiteral(String(line))
                guard case .object = value else {
                    throw ParseError(message: "each line holds one document ({...})",
                                     location: SourceLocation(offset: 0, line: 1, column: 1))
                }
                out.append(value)
            } catch {
                var e = error
                e.location.line = i + 1
                throw ShellError(e.rendered(source: lines.joined(separator: "\n"), origin: origin))
            }
        }
        return out
    }

    // MARK: Export

    func export(_ source: String, to path: String) async throws {
        let format = try TransferFormat(path: path)
        let expression = try Parser.savedQuery(source)
        let resolved = try await resolve(expression)
        let q = resolved.query
        let total = try await reading { try q.count(in: $0) }
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
                try q.forEach(in: ctx) { d in
                    try writer.write((n == 0 ? "\n" : ",\n") + d.json())
                    tick()
                    return true
                }
                try writer.write(n == 0 ? "]\n" : "\n]\n")
            case .ndjson:
                try q.forEach(in: ctx) { d in try writer.write(d.json() + "\n"); tick(); return true }
            case .csv:
                var columns: [String] = []
                var seen: Set<String> = []
                try q.forEach(in: ctx) { d in
                    for (name, _) in Renderer.flatten(d) where seen.insert(name).inserted { columns.append(name) }
                    return true
                }
                try writer.write(columns.map { CSV.quote($0) }.joined(separator: ",") + "\r\n")
                try q.forEach(in: ctx) { d in
                    let cells = Dictionary(Renderer.flatten(d), uniquingKeysWith: { a, _ in a })
                    try writer.write(columns.map { CSV.cell(cells[$0]) }.joined(separator: ",") + "\r\n")
                    tick()
                    return true
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
        console.note("Exported \(written) document\(written == 1 ? "" : "s") to \(path).")
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
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ShellError("cannot read \(path)")
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

/// Comma-separated values (RFC 4180): a header of field paths, then one document per row.
enum CSV {
    static func quote(_ s: String, always: Bool = false) -> String {
        guard always || s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) || s.hasPrefix(" ")
                || s.hasSuffix(" ") || s.isEmpty else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// A value as a cell: nothing for a missing field or nil, text as it is, dates in ISO 8601, the rest as JSON.
    static func cell(_ value: DocumentValue?) -> String {
        switch value {
        case nil, .null?: return ""
        // Text that would read back as something else ("0150", "true", "[1]") is quoted: quoted cells are text.
        case .string(let s)?: return quote(s, always: CSV.value(s) != .string(s))
        case .date(let d)?: return quote(DocumentValue.date(d).json().trimmingCharacters(in: ["\""]))
        case let v?: return quote(v.json())
        }
    }

    /// The rows of a CSV text, each a list of cells.
    static func rows(_ text: String, origin: String) throws -> [[Cell]] {
        var rows: [[Cell]] = []
        var row: [Cell] = []
        var cell = ""
        var quoted = false
        var wasQuoted = false
        var atCellStart = true
        var line = 1
        var chars = text.makeIterator()
        var pending: Character? = nil
        func nextChar() -> Character? {
            if let p = pending { pending = nil; return p }
            return chars.next()
        }
        while let c = nextChar() {
            if quoted {
                if c == "\"" {
                    if let n = nextChar() {
                        if n == "\"" { cell.append("\"") } else { quoted = false; pending = n }
                    } else { quoted = false }
                } else {
                    if c == "\n" || c == "\r\n" { line += 1 }
                    cell.append(c)
                }
                continue
            }
            switch c {
            case "\"" where atCellStart:
                quoted = true
                wasQuoted = true
                atCellStart = false
            case ",":
                row.append(Cell(text: cell, quoted: wasQuoted)); cell = ""; atCellStart = true; wasQuoted = false
            case "\n", "\r\n", "\r":
                row.append(Cell(text: cell, quoted: wasQuoted)); cell = ""; atCellStart = true; wasQuoted = false
                if !(row.count == 1 && row[0].text.isEmpty && !row[0].quoted) { rows.append(row) }
                row = []
                line += 1
            default:
                cell.append(c)
                atCellStart = false
            }
        }
        if quoted { throw ShellError("\(origin): a quoted cell opened before line \(line) never closes") }
        if !cell.isEmpty || !row.isEmpty || wasQuoted { row.append(Cell(text: cell, quoted: wasQuoted)); rows.append(row) }
        return rows
    }

    /// A cell's text, and whether it was in quotes (then it is text, whatever it looks like).
    struct Cell: Equatable {
        var text: String
        var quoted: Bool
    }

    /// Documents from CSV: the header names each column's field (dots nest). A cell is read as a JSON list or
    /// object when it parses as one; otherwise a quoted cell is text, and an unquoted one a number or `true`/`false`
    /// when it reads as one, else text; an empty unquoted cell leaves the field out.
    static func documents(_ text: String, origin: String) throws -> [DocumentValue] {
        let rows = try rows(text, origin: origin)
        guard let header = rows.first else { return [] }
        let paths = header.map { FieldPath($0.text.trimmingCharacters(in: .whitespaces)) }
        if let empty = header.firstIndex(where: { $0.text.trimmingCharacters(in: .whitespaces).isEmpty }) {
            throw ShellError("\(origin): column \(empty + 1) of the header has no name")
        }
        var out: [DocumentValue] = []
        for (r, row) in rows.dropFirst().enumerated() {
            guard row.count <= header.count else {
                throw ShellError("\(origin): row \(r + 2) has \(row.count) cells, the header \(header.count)")
            }
            var document = DocumentValue.object([DocumentValue.Field]())
            for (path, cell) in zip(paths, row) where !cell.text.isEmpty || cell.quoted {
                document = set(value(cell), at: path.components[...], in: document)
            }
            out.append(document)
        }
        return out
    }

    /// A quoted cell is text, unless it holds a JSON list or object (which CSV must quote for their commas).
    static func value(_ cell: Cell) -> DocumentValue {
        guard cell.quoted else { return value(cell.text) }
        if cell.text.hasPrefix("[") || cell.text.hasPrefix("{"), let v = try? Parser.wholeLiteral(cell.text) { return v }
        return .string(cell.text)
    }

    static func value(_ text: String) -> DocumentValue {
        if let i = Int64(text) { return .int(i) }
        if let d = Double(text), text.contains(where: { $0.isNumber }), !text.hasPrefix("+") { return .double(d) }
        if text == "true" { return .bool(true) }
        if text == "false" { return .bool(false) }
        if text.hasPrefix("[") || text.hasPrefix("{"), let v = try? Parser.wholeLiteral(text) { return v }
        return .string(text)
    }

    private static func set(_ value: DocumentValue, at path: ArraySlice<String>, in object: DocumentValue) -> DocumentValue {
        guard let name = path.first, case .object(var fields) = object else { return object }
        let rest = path.dropFirst()
        if let i = fields.firstIndex(where: { $0.name == name }) {
            fields[i].value = rest.isEmpty ? value : set(value, at: rest, in: fields[i].value)
        } else {
            fields.append(.init(name, rest.isEmpty ? value : set(value, at: rest, in: .object([DocumentValue.Field]()))))
        }
        return .object(fields)
    }
}
