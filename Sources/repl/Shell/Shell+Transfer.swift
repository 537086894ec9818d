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

    func close() throws {
        try flush()
        Glibc.close(fd)
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
        let showProgress = console.stderrIsTerminal && batch.count >= 5_000
        while true {
            let replacing = try await reading { ctx in
                try ids.reduce(0) { n, id in n + (try ctx.document(id: id, in: collection) == nil ? 0 : 1) }
            }
            let what = "\(batch.count) document\(batch.count == 1 ? "" : "s") into \(collection)"
            if replacing > 0 {
                guard try await confirm("Import \(what), replacing \(replacing) existing one\(replacing == 1 ? "" : "s")?",
                                        refusing: "replace \(replacing) documents of \(collection)") else {
                    console.note("Nothing was imported.")
                    return
                }
            }
            let label = "importing"
            let written: Int? = try await change("import \(what) from \(path)") { ctx in
                let now = try ids.reduce(0) { n, id in n + (try ctx.document(id: id, in: collection) == nil ? 0 : 1) }
                guard now == replacing else { return nil }
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
                console.note("\(verb) \(what)" + (replacing > 0 ? ", replacing \(replacing)." : "."))
                return
            }
            console.note("The documents of \(collection) changed while you answered; asking again.")
        }
    }

    static func parseJSONDocuments(_ text: String, origin: String) throws -> [DocumentValue] {
        var parser = try Parser(text)
        let value: Literal
        do { value = try parser.parseLiteral() } catch { throw ShellError(error.rendered(source: text, origin: origin)) }
        switch value.value {
        case .array(let list): return list
        case .object: return [value.value]
        default: throw ShellError("\(origin) holds \(value.value.literalText.prefix(40)), not a document or a list of them")
        }
    }

    static func parseNDJSON(_ text: String, origin: String) throws -> [DocumentValue] {
        var out: [DocumentValue] = []
        let lines = text.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false)
        for (i, line) in lines.enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            do {
                var parser = try Parser(trimmed)
                let value = try parser.parseLiteral()
                guard case .object = value.value else {
                    throw ParseError(message: "each line holds one document ({...})", location: value.location)
                }
                out.append(value.value)
            } catch let error as ParseError {
                var e = error
                e.location.line = i + 1
                throw ShellError(e.rendered(source: text, origin: origin))
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
        let writer = try FileWriter(path: path)
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
                try writer.write(columns.map(CSV.quote).joined(separator: ",") + "\r\n")
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
    static func quote(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) || s.hasPrefix(" ")
                || s.hasSuffix(" ") else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// A value as a cell: nothing for a missing field or nil, text as it is, dates in ISO 8601, the rest as JSON.
    static func cell(_ value: DocumentValue?) -> String {
        switch value {
        case nil, .null?: return ""
        case .string(let s)?: return quote(s)
        case .date(let d)?: return quote(DocumentValue.date(d).json().trimmingCharacters(in: ["\""]))
        case let v?: return quote(v.json())
        }
    }

    /// The rows of a CSV text, each a list of cells.
    static func rows(_ text: String, origin: String) throws -> [[String]] {
        var rows: [[String]] = []
        var row: [String] = []
        var cell = ""
        var quoted = false
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
                atCellStart = false
            case ",":
                row.append(cell); cell = ""; atCellStart = true
            case "\n", "\r\n", "\r":
                row.append(cell); cell = ""; atCellStart = true
                if !(row.count == 1 && row[0].isEmpty) { rows.append(row) }
                row = []
                line += 1
            default:
                cell.append(c)
                atCellStart = false
            }
        }
        if quoted { throw ShellError("\(origin): a quoted cell opened before line \(line) never closes") }
        if !cell.isEmpty || !row.isEmpty { row.append(cell); rows.append(row) }
        return rows
    }

    /// Documents from CSV: the header names each column's field (dots nest), each cell is read as a number,
    /// `true`/`false`, a JSON list or object when it parses as one, else as text; an empty cell leaves the field out.
    static func documents(_ text: String, origin: String) throws -> [DocumentValue] {
        let rows = try rows(text, origin: origin)
        guard let header = rows.first else { return [] }
        let paths = header.map { FieldPath($0.trimmingCharacters(in: .whitespaces)) }
        if let empty = header.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) {
            throw ShellError("\(origin): column \(empty + 1) of the header has no name")
        }
        var out: [DocumentValue] = []
        for (r, row) in rows.dropFirst().enumerated() {
            guard row.count <= header.count else {
                throw ShellError("\(origin): row \(r + 2) has \(row.count) cells, the header \(header.count)")
            }
            var document = DocumentValue.object([DocumentValue.Field]())
            for (path, text) in zip(paths, row) where !text.isEmpty {
                document = set(value(text), at: path.components[...], in: document)
            }
            out.append(document)
        }
        return out
    }

    static func value(_ text: String) -> DocumentValue {
        if let i = Int64(text) { return .int(i) }
        if let d = Double(text), text.contains(where: { $0.isNumber }), !text.hasPrefix("+") { return .double(d) }
        if text == "true" { return .bool(true) }
        if text == "false" { return .bool(false) }
        if text.hasPrefix("[") || text.hasPrefix("{"), var p = try? Parser(text), let v = try? p.parseLiteral(),
           v.length == text.count { return v.value }
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
