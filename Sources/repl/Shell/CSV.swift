import DocStore
import Foundation

/// Comma-separated values (RFC 4180): a header of field paths, then one document per row.
///
/// Written by `.export` and `.mode csv`, read by `.import`, so that a file written here reads back as the same
/// documents. A column's cells are read by one rule for the whole column, never cell by cell, so that no text in it
/// is ever turned into something else:
/// - a column where every cell is a JSON value, at least one of them a list, an object or a string in quotes, is
///   read as JSON (`{"$date": "..."}` as a date); it is how a column holding lists or objects is written;
/// - otherwise a quoted cell is text, and the unquoted cells are numbers, true/false or dates only when every one of
///   them reads as such a value written exactly as it prints here; when any does not (`00501`, `0E0`, `1e5`,
///   `2.50`, `Oslo`), the whole column stays text, as written;
/// - an empty unquoted cell, or the null marker, is nil.
enum CSV {
    static func quote(_ s: String, always: Bool = false) -> String {
        guard always || s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) || s.hasPrefix(" ")
                || s.hasSuffix(" ") || s.isEmpty else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
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

    /// What an unquoted cell of a column that is not JSON reads as, when its column allows it.
    enum Kind: Equatable {
        /// A number written as it prints here: an optional minus, no leading zero, no `+`, no exponent, the
        /// fraction's shortest digits.
        case number(DocumentValue)
        case bool(Bool)
        /// A date written as DocStore prints it.
        case date(Date)
        case text

        static func of(_ text: String) -> Kind {
            if let n = number(text) { return .number(n) }
            if text == "true" || text == "false" { return .bool(text == "true") }
            if text.count == 24, text.hasSuffix("Z"), let d = Parser.date(text), CSV.printed(d) == text { return .date(d) }
            return .text
        }

        private static func number(_ text: String) -> DocumentValue? {
            // Only the bytes are looked at until the shape is right: most cells of most columns are not numbers.
            let shape = text.utf8.withContiguousStorageIfAvailable { Self.shape(of: $0) } ?? Self.shape(of: Array(text.utf8)[...])
            switch shape {
            case .integer:
                if let i = Int64(text), String(i) == text { return .int(i) }
                if let u = UInt64(text), String(u) == text { return .uint(u) }
                return nil
            case .fraction:
                // Written with the shortest digits that give the same Double back, as `.export` writes it.
                guard let d = Double(text), d.isFinite else { return nil }
                let shortest = d.description
                let same = shortest.utf8.contains(UInt8(ascii: "e")) ? CSV.plain(d) == text : shortest == text
                return same ? .double(d) : nil
            case nil:
                return nil
            }
        }

        private enum Shape { case integer, fraction }

        /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most 1,100 fraction digits.
        private static func shape<Bytes: Collection<UInt8>>(of bytes: Bytes) -> Shape? {
            var i = bytes.startIndex
            if i != bytes.endIndex, bytes[i] == UInt8(ascii: "-") { i = bytes.index(after: i) }
            let wholeStart = i
            while i != bytes.endIndex, (0x30...0x39).contains(bytes[i]) { i = bytes.index(after: i) }
            let wholeCount = bytes.distance(from: wholeStart, to: i)
            guard wholeCount > 0, bytes[wholeStart] != UInt8(ascii: "0") || wholeCount == 1 else { return nil }
            if i == bytes.endIndex { return .integer }
            guard bytes[i] == UInt8(ascii: ".") else { return nil }
            i = bytes.index(after: i)
            let fractionStart = i
            while i != bytes.endIndex, (0x30...0x39).contains(bytes[i]) { i = bytes.index(after: i) }
            let fractionCount = bytes.distance(from: fractionStart, to: i)
            return i == bytes.endIndex && fractionCount > 0 && fractionCount <= 1_100 ? .fraction : nil
        }
    }

    /// Whether text starts as only JSON does (a list, an object, a string in quotes), which no plain text does.
    static func looksLikeJSON(_ text: String) -> Bool {
        guard let first = text.utf8.first else { return false }
        return first == UInt8(ascii: "[") || first == UInt8(ascii: "{") || first == UInt8(ascii: "\"")
    }

    /// A cell's text as a JSON value, or `nil` when it is not one.
    static func jsonValue(_ text: String) -> DocumentValue? {
        guard let first = text.first, looksLikeJSON(text) || first == "-" || (first.isASCII && first.isNumber)
                || text == "true" || text == "false" || text == "null" else { return nil }
        return try? Parser.wholeLiteral(text)
    }

    /// `{"$date": "2024-05-01T00:00:00.000Z"}`, extended JSON's date, as a date.
    static func extendedDate(_ value: DocumentValue) -> Date? {
        guard case .object(let fields) = value, fields.count == 1, fields[0].name == "$date",
              case .string(let text) = fields[0].value else { return nil }
        return Parser.date(text)
    }

    // MARK: Writing

    /// The columns of a list of documents and how each is written, learned from every document before the first
    /// row: a column's name is its field's path (names that hold a dot or a backtick in backticks).
    struct Columns {
        private var columns = ColumnNames()
        private var styles: [Style] = []
        var names: [String] { columns.all }

        /// How the cells of one column are written.
        private struct Style {
            /// Whether the column holds values that are not text (text is then always quoted).
            var hasNonText = false
            /// Whether every value is written as JSON: the column holds lists or objects, or text that would read
            /// back as JSON.
            var isJSON = false
        }

        mutating func add(_ document: DocumentValue) {
            for (name, value) in CSV.flatten(document) {
                let (i, isNew) = columns.index(of: name)
                if isNew { styles.append(Style()) }
                switch value {
                case .null: break
                case .string(let s): if CSV.looksLikeJSON(s) { styles[i].isJSON = true }
                case .array, .object: styles[i].isJSON = true; styles[i].hasNonText = true
                default: styles[i].hasNonText = true
                }
            }
        }

        var header: String { names.map { CSV.quote($0) }.joined(separator: ",") + "\r\n" }

        func row(_ document: DocumentValue) -> String {
            var values = [DocumentValue?](repeating: nil, count: styles.count)
            for (name, value) in CSV.flatten(document) {
                if let i = columns.position(of: name), values[i] == nil { values[i] = value }
            }
            var line = ""
            for i in values.indices {
                if i > 0 { line += "," }
                line += cell(values[i], styles[i])
            }
            return line + "\r\n"
        }

        private func cell(_ value: DocumentValue?, _ style: Style) -> String {
            switch value {
            case nil, .null?: return ""
            case let v? where style.isJSON: return CSV.quote(Shell.exportedJSON(v))
            case .string(let s)?: return CSV.quote(s, always: style.hasNonText || Kind.of(s) != .text)
            case .date(let d)?: return CSV.printed(d)
            case .double(let d)? where d.isFinite: return CSV.plain(d)
            case let v?: return CSV.quote(v.json())
            }
        }
    }

    /// The field a column's name stands for: dots nest (`address.city`), a name in backticks is one name
    /// (`` `U.S. price` ``), anything else is a name as it is (`Body Mass (g)`).
    static func path(ofColumn name: String) -> FieldPath { Parser.path(named: name) }

    /// A document's fields as columns, named as a header names them (``Renderer/flatten(_:prefix:)``): a name that
    /// holds a dot or a backtick in backticks, so that `.import` reads it back as one name.
    static func flatten(_ document: DocumentValue) -> [(String, DocumentValue)] { Renderer.flatten(document) }

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

    /// Documents from CSV: the header names each column's field (dots nest; a name in backticks is one name), and
    /// each column is read by the rules above. Columns named in `reading.dates` are dates, and a cell that is not
    /// one is an error.
    static func documents(_ text: String, origin: String, reading: Reading = Reading()) throws -> [DocumentValue] {
        let rows = try rows(text, origin: origin)
        guard let header = rows.first else { return [] }
        var paths: [FieldPath] = []
        for (i, cell) in header.enumerated() {
            let name = cell.text.trimmingCharacters(in: .whitespaces)
            if name.isEmpty { throw ShellError("\(origin): column \(i + 1) of the header has no name") }
            paths.append(path(ofColumn: name))
        }
        var seen: [FieldPath: Int] = [:]
        for (i, path) in paths.enumerated() {
            if let first = seen[path] {
                throw ShellError("\(origin): the header names '\(header[i].text)' twice (columns \(first + 1) and "
                    + "\(i + 1)); each column needs a name of its own")
            }
            seen[path] = i
        }
        for path in reading.dates where !paths.contains(path) {
            throw ShellError("\(origin): --dates names '\(path.written)', but no column of the header is named so "
                + "(the header: \(paths.map(\.written).joined(separator: ", ")))")
        }
        for (r, row) in rows.dropFirst().enumerated() where row.count != header.count {
            throw ShellError("\(origin): row \(r + 2) has \(row.count) cell\(row.count == 1 ? "" : "s"), the header "
                + "\(header.count); every row needs one cell per column (an empty cell for a missing value)")
        }
        func isNull(_ cell: Cell) -> Bool {
            !cell.quoted && (cell.text.isEmpty || cell.text == reading.nullMarker)
        }
        let body = rows.dropFirst()
        // Each column's rule, from all its cells.
        // Each column's cells as JSON values when it is a JSON column; else each unquoted cell's reading. Worked out
        // once, for the column's rule and for the values.
        var jsonValues: [[DocumentValue?]?] = [], typed: [Bool] = [], kinds: [[Kind?]] = []
        for (c, path) in paths.enumerated() {
            let dates = reading.dates.contains(path)
            // Parsing every cell is costly: only a column with a cell that looks like JSON can be one.
            var values: [DocumentValue?]?
            if !dates, body.contains(where: { looksLikeJSON($0[c].text) }) {
                values = []
                for row in body {
                    if isNull(row[c]) { values?.append(nil); continue }
                    guard let value = jsonValue(row[c].text) else { values = nil; break }
                    values?.append(value)
                }
            }
            jsonValues.append(values)
            var column: [Kind?] = []
            column.reserveCapacity(body.count)
            var allRead = true
            for row in body {
                let cell = row[c]
                if cell.quoted || isNull(cell) || dates || !allRead { column.append(nil); continue }
                let kind = Kind.of(cell.text)
                if kind == .text { allRead = false }
                column.append(kind)
            }
            typed.append(dates || allRead)
            kinds.append(column)
        }
        var out: [DocumentValue] = []
        out.reserveCapacity(body.count)
        for (r, row) in body.enumerated() {
            var document = DocumentValue.object([DocumentValue.Field]())
            for (c, cell) in row.enumerated() {
                let value: DocumentValue
                if isNull(cell) {
                    // Nil only where nothing is yet: an empty `address` beside an `address.city` keeps the object.
                    if document[path: paths[c]] == nil { document = document.setting(.null, at: paths[c]) }
                    continue
                } else if reading.dates.contains(paths[c]) {
                    guard let date = Parser.date(cell.text) else {
                        throw ShellError("\(origin): row \(r + 2), column '\(header[c].text)': '\(cell.text)' is not a "
                            + "date in ISO 8601 (such as 2024-05-01 or 2024-05-01T10:30:00Z)")
                    }
                    value = .date(date)
                } else if let values = jsonValues[c], let parsed = values[r] {
                    value = Shell.readingDates(parsed)
                } else if cell.quoted || !typed[c] {
                    value = .string(cell.text)
                } else {
                    switch kinds[c][r] ?? Kind.of(cell.text) {
                    case .number(let n): value = n
                    case .bool(let b): value = .bool(b)
                    case .date(let d): value = .date(d)
                    case .text: value = .string(cell.text)
                    }
                }
                document = document.setting(value, at: paths[c])
            }
            out.append(document)
        }
        return out
    }
}
