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

    /// `.import FILE COLLECTION [--null MARKER] [--dates FIELD,...]`.
    func importFile(_ arguments: [String]) async throws {
        let usage = ".import FILE COLLECTION [--null MARKER] [--dates FIELD,FIELD...]"
        guard arguments.count >= 2 else { throw ShellError("usage: \(usage)") }
        let (path, collection) = (arguments[0], arguments[1])
        var reading = CSV.Reading()
        var options = arguments.dropFirst(2)
        while let option = options.popFirst() {
            guard let value = options.popFirst() else { throw ShellError("\(option) needs a value; usage: \(usage)") }
            switch option {
            case "--null": reading.nullMarker = value
            case "--dates":
                do { reading.dates.formUnion(try Parser.fieldPaths(value)) } catch {
                    throw ShellError("--dates takes field names separated by commas (`in backticks` when a name has "
                        + "spaces or punctuation): \(error.message)")
                }
            default: throw ShellError("unknown option '\(option)'; usage: \(usage)")
            }
        }
        let format = try TransferFormat(path: path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ShellError("cannot read \(path): no such file, or not readable")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw ShellError("\(path) is not UTF-8 text") }
        var documents: [DocumentValue]
        switch format {
        case .json: documents = try Shell.parseJSONDocuments(text, origin: path)
        case .ndjson: documents = try Shell.parseNDJSON(text, origin: path)
        case .csv: documents = try CSV.documents(text, origin: path, reading: reading)
        }
        if format != .csv {
            documents = try documents.enumerated().map { (i, d) in
                try Shell.readingExtendedJSON(d, reading: reading, origin: "\(path), document \(i + 1)")
            }
        }
        if documents.isEmpty { console.note("\(path) holds no documents; nothing was imported."); return }
        try await writeDocuments(documents, into: collection, replacing: true, from: path)
    }

    /// A JSON document as stored: `{"$date": "..."}` becomes a date, and so do the strings at the paths of
    /// `--dates` (one that is not a date is an error); with `--null`, strings equal to the marker become nil.
    nonisolated static func readingExtendedJSON(_ document: DocumentValue, reading: CSV.Reading, origin: String) throws -> DocumentValue {
        func convert(_ value: DocumentValue) -> DocumentValue {
            switch value {
            case .object(let fields):
                if let date = CSV.extendedDate(value) { return .date(date) }
                return .object(fields.map { DocumentValue.Field($0.name, convert($0.value)) })
            case .array(let elements): return .array(elements.map(convert))
            case .string(let s) where s == reading.nullMarker: return .null
            default: return value
            }
        }
        var out = convert(document)
        for path in reading.dates.sorted(by: { $0.description < $1.description }) {
            switch out[path: path] {
            case .string(let text)?:
                guard let date = Parser.date(text) else {
                    throw ShellError("\(origin): '\(path)' is \(text.debugDescription), not a date in ISO 8601 "
                        + "(such as 2024-05-01 or 2024-05-01T10:30:00Z)")
                }
                out = out.setting(.date(date), at: path)
            case nil, .null?, .date?: break
            case let other?:
                throw ShellError("\(origin): '\(path)' is \(other.json()), not a date in ISO 8601")
            }
        }
        return out
    }

    /// A value as JSON for `.export`: dates written as extended JSON's `{"$date": "2024-05-01T00:00:00.000Z"}`, so
    /// that `.import` reads them back as dates; the rest as ``DocumentValue/json(pretty:)`` writes it.
    nonisolated static func exportedJSON(_ value: DocumentValue) -> String {
        func convert(_ value: DocumentValue) -> DocumentValue {
            switch value {
            case .date(let d): return .object([("$date", .string(CSV.printed(d)))])
            case .object(let fields): return .object(fields.map { DocumentValue.Field($0.name, convert($0.value)) })
            case .array(let elements): return .array(elements.map(convert))
            default: return value
            }
        }
        return convert(value).json()
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
                    try writer.write((n == 0 ? "\n" : ",\n") + Shell.exportedJSON(d))
                    tick()
                    return true
                }
                try writer.write(n == 0 ? "]\n" : "\n]\n")
            case .ndjson:
                try q.forEach(in: ctx) { d in try writer.write(Shell.exportedJSON(d) + "\n"); tick(); return true }
            case .csv:
                var columns: [String] = []
                var seen: Set<String> = []
                // Text in a column that also holds other values is quoted, so that the column reads back as written.
                var mixed: Set<String> = []
                try q.forEach(in: ctx) { d in
                    for (name, value) in Renderer.flatten(d) {
                        if seen.insert(name).inserted { columns.append(name) }
                        switch value {
                        case .string, .null: break
                        default: mixed.insert(name)
                        }
                    }
                    return true
                }
                try writer.write(columns.map { CSV.quote($0) }.joined(separator: ",") + "\r\n")
                try q.forEach(in: ctx) { d in
                    let cells = Dictionary(Renderer.flatten(d), uniquingKeysWith: { a, _ in a })
                    try writer.write(columns.map { CSV.cell(cells[$0], quoteText: mixed.contains($0)) }
                        .joined(separator: ",") + "\r\n")
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

    /// A value as a cell: nothing for a missing field or nil, dates as DocStore prints them (ISO 8601 in UTC with
    /// milliseconds), numbers in positional notation, lists and objects as JSON. Text is quoted when it would read
    /// back as something else ("0150", "true", "[1]"), or when its column holds values that are not text: a quoted
    /// cell is always text.
    static func cell(_ value: DocumentValue?, quoteText: Bool = false) -> String {
        switch value {
        case nil, .null?: return ""
        case .string(let s)?:
            return quote(s, always: quoteText || Kind.of(s) != .text)
        case .date(let d)?: return printed(d)
        case .double(let d)? where d.isFinite: return plain(d)
        case let v?: return quote(v.json())
        }
    }

    /// A date as DocStore prints it: `2024-05-01T00:00:00.000Z`.
    static func printed(_ date: Date) -> String {
        DocumentValue.date(date).json().trimmingCharacters(in: ["\""])
    }

    /// A finite Double in positional notation, never an exponent: a fraction with its shortest digits (`0.00001`),
    /// an integral value with all its digits (`1e21` as `1000000000000000000000.0`). Read back as a number, it is
    /// the same Double.
    static func plain(_ d: Double) -> String {
        // Integral values every digit exactly (beyond 2^53 the shortest digits would read back as another text).
        if d == d.rounded() { return String(format: "%.1f", d) }
        let shortest = "\(d)"
        guard let e = shortest.firstIndex(where: { $0 == "e" || $0 == "E" }), let exponent = Int(shortest[shortest.index(after: e)...])
        else { return shortest }
        var mantissa = String(shortest[..<e])
        let negative = mantissa.hasPrefix("-")
        if negative { mantissa.removeFirst() }
        let point = mantissa.firstIndex(of: ".").map { mantissa.distance(from: mantissa.startIndex, to: $0) } ?? mantissa.count
        let digits = Array(mantissa.filter { $0 != "." })
        let at = point + exponent   // where the point goes among the digits
        var whole: String, fraction: String
        if at <= 0 {
            whole = "0"; fraction = String(repeating: "0", count: -at) + String(digits)
        } else if at >= digits.count {
            whole = String(digits) + String(repeating: "0", count: at - digits.count); fraction = ""
        } else {
            whole = String(digits[..<at]); fraction = String(digits[at...])
        }
        while fraction.hasSuffix("0") { fraction.removeLast() }
        whole = String(whole.drop { $0 == "0" })
        if whole.isEmpty { whole = "0" }
        return (negative ? "-" : "") + whole + "." + (fraction.isEmpty ? "0" : fraction)
    }

    /// What an unquoted cell reads as, when its column allows it.
    enum Kind: Equatable {
        /// A number written as the number prints: an optional minus, no leading zero, no `+`, no exponent, and
        /// no more fraction digits than a Double holds.
        case number(DocumentValue)
        case bool(Bool)
        /// A date written as DocStore prints it.
        case date(Date)
        /// A JSON list or object.
        case structure(DocumentValue)
        case text

        static func of(_ text: String) -> Kind {
            if let n = number(text) { return .number(n) }
            if text == "true" || text == "false" { return .bool(text == "true") }
            if text.hasPrefix("[") || text.hasPrefix("{"), let v = try? Parser.wholeLiteral(text) {
                if case .object = v, let d = CSV.extendedDate(v) { return .date(d) }
                return .structure(v)
            }
            if text.count == 24, text.hasSuffix("Z"), let d = Parser.date(text), CSV.printed(d) == text { return .date(d) }
            return .text
        }

        private static func number(_ text: String) -> DocumentValue? {
            var scalars = Substring(text).unicodeScalars[...]
            if scalars.first == "-" { scalars = scalars.dropFirst() }
            let whole = scalars.prefix { $0.properties.numericType != nil && $0.isASCII }
            guard !whole.isEmpty, whole.first != "0" || whole.count == 1 else { return nil }
            let rest = scalars.dropFirst(whole.count)
            if rest.isEmpty {
                if let i = Int64(text), String(i) == text { return .int(i) }
                if let u = UInt64(text), String(u) == text { return .uint(u) }
                return nil
            }
            guard rest.first == ".", rest.count >= 2, rest.count <= 1_100,
                  rest.dropFirst().allSatisfy({ $0.isASCII && $0.properties.numericType != nil }),
                  let d = Double(text), d.isFinite else { return nil }
            // Every digit written is kept: printed again with as many fraction digits, it is the same text.
            guard String(format: "%.\(rest.count - 1)f", d) == text else { return nil }
            return .double(d)
        }
    }

    /// `{"$date": "2024-05-01T00:00:00.000Z"}`, extended JSON's date, as a date.
    static func extendedDate(_ value: DocumentValue) -> Date? {
        guard case .object(let fields) = value, fields.count == 1, fields[0].name == "$date",
              case .string(let text) = fields[0].value else { return nil }
        return Parser.date(text)
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

    /// How cells that are not quoted become values.
    struct Reading {
        /// Unquoted cells that mean nil, besides the empty cell: `NA`.
        var nullMarker: String?
        /// Columns whose cells are dates in ISO 8601 (`2024-05-01`, `2024-05-01T10:00:00Z`, ...).
        var dates: Set<FieldPath> = []
    }

    /// Documents from CSV: the header names each column's field (dots nest, backticks quote a name).
    ///
    /// A quoted cell is text, unless it holds a JSON list or object. An empty unquoted cell, or one equal to the
    /// null marker, is nil. The other unquoted cells of a column are numbers, true/false, dates (as DocStore
    /// prints them) or JSON lists and objects only when every one of them reads as such a value written as it
    /// prints; when any does not (`00501`, `0E0`, `1e5`, `+3`, `Oslo`), the whole column stays text, as written.
    /// Columns named in `reading.dates` are dates, and a cell that is not one is an error.
    static func documents(_ text: String, origin: String, reading: Reading = Reading()) throws -> [DocumentValue] {
        let rows = try rows(text, origin: origin)
        guard let header = rows.first else { return [] }
        var paths: [FieldPath] = []
        for (i, cell) in header.enumerated() {
            let name = cell.text.trimmingCharacters(in: .whitespaces)
            if name.isEmpty { throw ShellError("\(origin): column \(i + 1) of the header has no name") }
            paths.append(FieldPath(name))
        }
        var seen: [FieldPath: Int] = [:]
        for (i, path) in paths.enumerated() {
            if let first = seen[path] {
                throw ShellError("\(origin): the header names '\(header[i].text)' twice (columns \(first + 1) and "
                    + "\(i + 1)); each column needs a name of its own")
            }
            seen[path] = i
        }
        for (r, row) in rows.dropFirst().enumerated() where row.count != header.count {
            throw ShellError("\(origin): row \(r + 2) has \(row.count) cell\(row.count == 1 ? "" : "s"), the header "
                + "\(header.count); every row needs one cell per column (an empty cell for a missing value)")
        }
        func isNull(_ cell: Cell) -> Bool {
            !cell.quoted && (cell.text.isEmpty || cell.text == reading.nullMarker)
        }
        // Each column's reading of its unquoted cells: typed only when every one reads as a value.
        var typed: [Bool] = []
        for (c, path) in paths.enumerated() {
            if reading.dates.contains(path) { typed.append(true); continue }
            typed.append(rows.dropFirst().allSatisfy { row in
                let cell = row[c]
                return cell.quoted || isNull(cell) || Kind.of(cell.text) != .text
            })
        }
        var out: [DocumentValue] = []
        out.reserveCapacity(rows.count - 1)
        for (r, row) in rows.dropFirst().enumerated() {
            var document = DocumentValue.object([DocumentValue.Field]())
            for (c, cell) in row.enumerated() {
                let value: DocumentValue
                if isNull(cell) {
                    value = .null
                } else if reading.dates.contains(paths[c]) {
                    guard let date = Parser.date(cell.text) else {
                        throw ShellError("\(origin): row \(r + 2), column '\(header[c].text)': '\(cell.text)' is not a "
                            + "date in ISO 8601 (such as 2024-05-01 or 2024-05-01T10:30:00Z)")
                    }
                    value = .date(date)
                } else if cell.quoted {
                    value = CSV.value(cell)
                } else if typed[c] {
                    switch Kind.of(cell.text) {
                    case .number(let n): value = n
                    case .bool(let b): value = .bool(b)
                    case .date(let d): value = .date(d)
                    case .structure(let v): value = v
                    case .text: value = .string(cell.text)
                    }
                } else {
                    value = .string(cell.text)
                }
                document = document.setting(value, at: paths[c])
            }
            out.append(document)
        }
        return out
    }

    /// A quoted cell is text, unless it holds a JSON list or object (which CSV must quote for their commas).
    static func value(_ cell: Cell) -> DocumentValue {
        if cell.text.hasPrefix("[") || cell.text.hasPrefix("{"), let v = try? Parser.wholeLiteral(cell.text) {
            return CSV.extendedDate(v).map(DocumentValue.date) ?? v
        }
        return .string(cell.text)
    }
}
