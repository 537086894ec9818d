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
///   them reads as such a value: a number in any form whose digits a Double keeps (``CSV/number(_:lenient:)``), a
///   date as DocStore prints it; when any does not (`00501`, `+3`, `.5`, `Oslo`), the whole column stays text, as
///   written, and ``Plan/keptText`` says which cell decided it;
/// - `--number` and `--text` (``Reading``) decide a column's rule instead;
/// - an empty unquoted cell, or the null marker, is nil.
enum CSV {
    static func quote(_ s: String, always: Bool = false) -> String {
        // Looked for in the bytes, as the reader reads them: `\r\n`, or a comma followed by a combining mark, is one
        // Character equal to none of these.
        guard always || s.utf8.contains(where: { $0 == 0x2C || $0 == 0x22 || $0 == 0x0A || $0 == 0x0D })
                || s.utf8.first == 0x20 || s.utf8.last == 0x20 || s.isEmpty else { return s }
        // Each quote doubled, as a scalar: one with a combining mark after it is another Character.
        var quoted = "\""
        for scalar in s.unicodeScalars {
            if scalar == "\"" { quoted.unicodeScalars.append(scalar) }
            quoted.unicodeScalars.append(scalar)
        }
        return quoted + "\""
    }

    /// A date as DocStore prints it: `2024-05-01T00:00:00.000Z`.
    static func printed(_ date: Date) -> String {
        DocumentValue.iso8601(date)
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
        /// A number as ``CSV/number(_:lenient:)`` reads one.
        case number(Number)
        case bool(Bool)
        /// A date written as DocStore prints it.
        case date(Date)
        case text

        static func of(_ text: String) -> Kind {
            if let n = CSV.number(text) { return .number(n) }
            if text == "true" || text == "false" { return .bool(text == "true") }
            if text.utf8.count == 24, text.utf8.last == UInt8(ascii: "Z"), let d = Parser.date(text), CSV.printed(d) == text {
                return .date(d)
            }
            return .text
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
        return try? DocumentValue(json: text)
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
                // Written as JSON (``cell(_:_:)``): their column must be read as JSON, whatever else it holds.
                case .uuid, .bytes, .uint: styles[i].isJSON = true; styles[i].hasNonText = true
                // A date that its printed form (to the millisecond, in a 4-digit year) would not give back.
                case .date(let d) where Parser.date(CSV.printed(d)) != d:
                    styles[i].isJSON = true
                    styles[i].hasNonText = true
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
            case let v? where style.isJSON: return CSV.quote(v.json())
            case .string(let s)?: return CSV.quote(s, always: style.hasNonText || Kind.of(s) != .text)
            case .date(let d)?: return CSV.printed(d)
            case .double(let d)?: return d.isFinite ? CSV.plain(d) : DocumentValue.double(d).literalText
            case let v?: return CSV.quote(v.json())
            }
        }
    }

    /// The field a column's name stands for, as ``Renderer/columnName(_:)`` writes each part: dots nest
    /// (`address.city`), a part in backticks is one name whatever it holds (`` `U.S. price` ``, a backtick in it
    /// doubled), anything else is a name as it is (`Body Mass (g)`, `$0`). A name whose backticks do not close a part
    /// is one name, as written.
    static func path(ofColumn name: String) -> FieldPath {
        guard name.utf8.contains(UInt8(ascii: "`")) else { return FieldPath(name) }
        let scalars = Array(name.unicodeScalars)
        var parts: [String] = []
        var i = 0
        while true {
            var part = String.UnicodeScalarView()
            if i < scalars.count, scalars[i] == "`" {
                i += 1
                var closed = false
                while i < scalars.count {
                    if scalars[i] == "`" {
                        if i + 1 < scalars.count, scalars[i + 1] == "`" { part.append("`"); i += 2; continue }
                        closed = true
                        i += 1
                        break
                    }
                    part.append(scalars[i])
                    i += 1
                }
                guard closed, i == scalars.count || scalars[i] == "." else { return FieldPath(components: [name]) }
            } else {
                while i < scalars.count, scalars[i] != "." { part.append(scalars[i]); i += 1 }
            }
            parts.append(String(part))
            guard i < scalars.count else { return FieldPath(components: parts) }
            i += 1   // the dot
        }
    }

    /// A document's fields as columns, named as a header names them (``Renderer/flatten(_:prefix:)``): a name that
    /// holds a dot or a backtick in backticks, so that `.import` reads it back as one name.
    static func flatten(_ document: DocumentValue) -> [(String, DocumentValue)] { Renderer.flatten(document) }

    /// A cell's text, and whether it was in quotes (then it is text, whatever it looks like).
    struct Cell: Equatable, Sendable {
        var text: String
        var quoted: Bool
    }

    /// How cells that are not quoted become values.
    struct Reading: Sendable {
        /// Unquoted cells that mean nil, besides the empty cell: `NA`.
        var nullMarker: String?
        /// Columns whose cells are dates: in ISO 8601 (`2024-05-01`, `2024-05-01T10:00:00Z`, ...), or as
        /// `dateFormat` writes them.
        var dates: Set<FieldPath> = []
        /// How the cells of `dates` are written, when not in ISO 8601.
        var dateFormat: DateTextFormat?
        /// Columns whose cells are all numbers, in any form (`--number`).
        var numbers: Set<FieldPath> = []
        /// Columns whose cells are all text, as written (`--text`).
        var texts: Set<FieldPath> = []

        /// The date a cell or string of `dates` is written for: as `dateFormat` writes dates, else in ISO 8601.
        func date(_ text: String) -> Date? {
            if let dateFormat { return dateFormat.date(from: text) }
            return Parser.date(text)
        }

        /// What a date of `dates` is, for messages.
        var dateWording: String {
            if let dateFormat { return "a date written as \(dateFormat.pattern)" }
            return "a date in ISO 8601 (such as 2024-05-01 or 2024-05-01T10:30:00Z; --date-format reads others)"
        }
    }

    /// Documents from CSV text, read by the rules above: the header names each column's field (dots nest; a name in
    /// backticks is one name). Columns named in `reading.dates` are dates, and a cell that is not one is an error.
    static func documents(_ text: String, origin: String, reading: Reading = Reading()) throws -> [DocumentValue] {
        try importing(text, origin: origin, reading: reading).documents
    }

    /// Documents from CSV text, and the import's plan (with the columns kept as text).
    static func importing(_ text: String, origin: String, reading: Reading) throws
        -> (documents: [DocumentValue], plan: Plan) {
        var first = CSVRows(CSVTextBytes(text: text), origin: origin)
        let plan = try Plan(&first, origin: origin, reading: reading, idPath: nil)
        var rows = CSVRows(CSVTextBytes(text: text), origin: origin)
        _ = try rows.next()
        var out: [DocumentValue] = []
        var row = 1
        while let (cells, _) = try rows.next() {
            row += 1
            out.append(try plan.document(cells, row: row))
        }
        return (out, plan)
    }
}
