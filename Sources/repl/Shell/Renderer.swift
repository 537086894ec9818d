import Foundation
import DocStore

/// How results are printed: `.mode table|box|csv|json|line`.
enum OutputMode: String, CaseIterable, Sendable {
    /// A table drawn with ASCII (`+----+`), as sqlite3's `.mode table`.
    case table
    /// A table drawn with Unicode box characters (`┌────┐`), as sqlite3's `.mode box`.
    case box
    /// Comma-separated values (RFC 4180): a line of field names (unless `.headers off`), then a line per document.
    case csv
    /// A JSON array of documents; one document alone as an object.
    case json
    /// `name = value`, one field per line, a blank line between documents.
    case line

    /// Whether the mode draws a table (and `.width` applies).
    var isTable: Bool { self == .table || self == .box }
}

/// Prints results as `.mode` chose, with the settings of `.headers` and `.width`.
///
/// A list of documents is printed through a ``Rendering``: laid out once (its columns and their widths), then a row at
/// a time, so that a long result is written in pieces and never held as one text.
struct Renderer {
    var mode: OutputMode
    /// Whether tables and CSV start with the field names (`.headers on|off`).
    var headers = true
    /// Column widths from `.width`, in column order: 0 (or no entry) sizes a column to its cells, a negative width
    /// right-aligns.
    var widths: [Int] = []

    /// How `documents` will print; at a terminal `columns` wide, a table is cut to fit.
    func rendering<Documents: Collection<DocumentValue>>(of documents: Documents, fitting columns: Int? = nil) throws
        -> Rendering {
        try Rendering(documents, renderer: self, fitting: columns)
    }

    /// All of `documents` as one text, for small results (`.watch`); under a table, how many there are, counted as
    /// `noun`s (none without a noun).
    func render(_ documents: [DocumentValue], fitting columns: Int? = nil, counting noun: String? = "document") throws
        -> String {
        if documents.isEmpty { return emptyText(counting: noun ?? "document") }
        let rendering = try rendering(of: documents, fitting: columns)
        var out = rendering.head
        for (i, document) in documents.enumerated() { out += rendering.row(document, at: i) }
        out += rendering.foot
        if mode.isTable, let noun {
            out += Renderer.summary(count: documents.count, hiddenColumns: rendering.hiddenColumns, counting: noun)
        }
        return out
    }

    /// One document (`first`, `last`, `any`, `findOrCreate`), or one row of another kind (a group): as JSON an
    /// object, in the other modes as a list of one.
    func render(_ document: DocumentValue?, fitting columns: Int? = nil, counting noun: String = "document") -> String {
        guard let document else {
            switch mode {
            case .json: return "null\n"
            case .csv: return ""
            case .table, .box, .line: return "(no \(noun))\n"
            }
        }
        if mode == .json { return document.json(pretty: true) + "\n" }
        // A list of one is laid out at once, never stopped by Ctrl-C.
        return (try? render([document], fitting: columns, counting: noun)) ?? ""
    }

    /// One value computed from the matches (`sum(score)`): a row of one column, named as the aggregate is written;
    /// as JSON an object, and with no line under a table (there is always one row).
    func render(value: DocumentValue, named column: String, fitting columns: Int? = nil) -> String {
        let row = DocumentValue.object([.init(column, value)])
        if mode == .json { return row.json(pretty: true) + "\n" }
        return (try? render([row], fitting: columns, counting: nil)) ?? ""
    }

    /// What a query computed from its matches, all at once (`.watch` redraws it).
    func render(_ computed: Shell.Computed, fitting columns: Int? = nil) throws -> String {
        switch computed {
        case .rows(let rows, let noun): return try render(rows, fitting: columns, counting: noun)
        case .one(let row, let noun): return render(row, fitting: columns, counting: noun)
        case .value(let value, let column): return render(value: value, named: column, fitting: columns)
        case .count(let n): return render(count: n)
        }
    }

    /// A count: the number alone, named in line mode (`count = 3`) and under a header in CSV.
    func render(count: Int) -> String {
        switch mode {
        case .table, .box, .json: return "\(count)\n"
        case .line: return "count = \(count)\n"
        case .csv: return (headers ? "count\r\n" : "") + "\(count)\r\n"
        }
    }

    /// What an empty list prints: of documents, or of other rows (`noun`: "group", "value").
    func emptyText(counting noun: String = "document") -> String {
        switch mode {
        case .json: return "[]\n"
        case .csv: return ""
        case .table, .box, .line: return "(no \(noun)s)\n"
        }
    }

    /// The line under a table: how many documents (or groups, values), and how many columns did not fit.
    static func summary(count: Int, hiddenColumns: Int = 0, counting noun: String = "document") -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")" + hidden(hiddenColumns) + "\n"
    }

    /// "(2 more columns did not fit; .mode line shows every field)", or nothing.
    static func hidden(_ columns: Int) -> String {
        columns == 0 ? "" : " (\(columns) more column\(columns == 1 ? "" : "s") did not fit; "
            + ".mode line shows every field)"
    }

    // MARK: Lines, for a page at a time

    /// Lines printed before the first document.
    var headLines: Int {
        switch mode {
        case .table, .box: return headers ? 3 : 1
        case .csv: return headers ? 1 : 0
        case .json: return 1
        case .line: return 0
        }
    }

    /// Lines printed after the last document (the line under a table not counted).
    var footLines: Int {
        switch mode {
        case .table, .box, .json: return 1
        case .csv, .line: return 0
        }
    }

    /// Lines the document at `index` of a list takes.
    func lines(of document: DocumentValue, at index: Int) -> Int {
        switch mode {
        case .table, .box, .json: return 1
        case .line: return max(1, Renderer.flatten(document).count) + (index > 0 ? 1 : 0)
        case .csv:
            // A quoted cell keeps its line breaks; every other value is written on one line.
            var breaks = 0
            for (_, value) in Renderer.flatten(document) {
                if case .string(let s) = value { breaks += s.reduce(0) { $1 == "\n" || $1 == "\r\n" ? $0 + 1 : $0 } }
            }
            return 1 + breaks
        }
    }

    // MARK: Values

    /// `name = value`, one field per line, nested fields by their dotted path.
    static func lines(_ document: DocumentValue) -> String {
        let columns = flatten(document)
        let width = columns.map(\.0.onOneLine.count).max() ?? 0
        return columns.map { name, value in
            let name = name.onOneLine
            return String(repeating: " ", count: max(0, width - name.count)) + name + " = " + cell(value).printable
        }.joined(separator: "\n") + "\n"
    }

    /// A document's fields as dotted paths and values; arrays stay whole. A name that holds a dot or a backtick is
    /// written in backticks, as the query language writes it: a key `"a.b"` and a field `b` nested in `a` are two
    /// columns, `` `a.b` `` and `a.b`, and `.import` reads a CSV header back as the names it came from.
    static func flatten(_ value: DocumentValue, prefix: String = "") -> [(String, DocumentValue)] {
        guard case .object(let fields) = value else { return [(prefix.isEmpty ? "value" : prefix, value)] }
        if fields.isEmpty && !prefix.isEmpty { return [(prefix, value)] }
        return fields.flatMap { field -> [(String, DocumentValue)] in
            let name = prefix.isEmpty ? columnName(field.name) : prefix + "." + columnName(field.name)
            if case .object = field.value { return flatten(field.value, prefix: name) }
            return [(name, field.value)]
        }
    }

    /// One field's name in a column's name: in backticks when it holds a dot or a backtick (a backtick in it
    /// doubled), so that ``CSV/path(ofColumn:)`` reads it back as the one name it is.
    static func columnName(_ name: String) -> String {
        guard name.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "`") }) else { return name }
        return "`" + name.replacingOccurrences(of: "`", with: "``") + "`"
    }

    /// A value as a cell shows it: strings without quotes, the rest as JSON.
    static func cell(_ value: DocumentValue) -> String {
        switch value {
        case .string(let s): return s
        case .null: return "nil"
        case .date(let d): return DocumentValue.iso8601(d)
        default: return value.literalText
        }
    }

    /// Columns a string takes in a terminal (East Asian wide characters take two).
    static func width(_ s: String) -> Int {
        if s.utf8.allSatisfy({ $0 < 0x80 }) { return s.utf8.count }
        return s.unicodeScalars.reduce(0) { $0 + width($1) }
    }

    /// Columns one scalar takes: none for a combining mark or a joiner, two for a wide character.
    static func width(_ u: Unicode.Scalar) -> Int {
        let v = u.value
        if v < 0x80 { return 1 }
        if u.properties.generalCategory == .nonspacingMark || v == 0x200D || (0xFE00...0xFE0F).contains(v) {
            return 0
        }
        let wide = (0x1100...0x115F).contains(v) || (0x2E80...0xA4CF).contains(v) || (0xAC00...0xD7A3).contains(v)
            || (0xF900...0xFAFF).contains(v) || (0xFE30...0xFE4F).contains(v) || (0xFF00...0xFF60).contains(v)
            || (0xFFE0...0xFFE6).contains(v) || (0x1F300...0x1FAFF).contains(v) || (0x20000...0x3FFFD).contains(v)
        return wide ? 2 : 1
    }

    /// `s` cut to at most `limit` columns, ending in `…` when it was cut.
    static func clip(_ s: String, _ limit: Int) -> String {
        guard width(s) > limit else { return s }
        guard limit > 0 else { return "" }
        var out = ""
        var used = 0
        for c in s {
            let w = c.unicodeScalars.reduce(0) { $0 + width($1) }
            if used + w > limit - 1 { break }
            out.append(c)
            used += w
        }
        return out + "…"
    }
}

extension String {
    /// The text on one line, safe to print: newlines and tabs shown as escapes (`\n`, `\t`), and every other control
    /// character (C0, DEL, C1) as `\u{1B}`, so that a stored value or name can neither break a table's lines nor send
    /// the terminal a command (move the cursor, erase a line, set the clipboard).
    var onOneLine: String { escapingControls(keepingLines: false) }

    /// The text safe to print, its lines and tabs kept (line mode shows a value's lines as they are, as sqlite3's
    /// does); every other control character as `\u{1B}`.
    var printable: String { escapingControls(keepingLines: true) }

    private func escapingControls(keepingLines: Bool) -> String {
        func escaped(_ scalar: Unicode.Scalar) -> Bool {
            (scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value))
                && !(keepingLines && (scalar == "\n" || scalar == "\t"))
        }
        guard unicodeScalars.contains(where: escaped) else { return self }
        var out = ""
        for scalar in unicodeScalars {
            switch scalar {
            case _ where !escaped(scalar): out.unicodeScalars.append(scalar)
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default: out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
        }
        return out
    }
}

extension DocumentValue {
    /// The value as the query language writes it: JSON, with `date("...")` for dates and `nil` for null; a UUID as
    /// its text and bytes as base64, in quotes (the language has no words for them), an unsigned integer as digits.
    var literalText: String {
        switch self {
        case .null: return "nil"
        case .date(let d): return "date(\"\(DocumentValue.iso8601(d))\")"
        case .double(let d) where !d.isFinite: return d.isNaN ? "nan" : (d < 0 ? "-inf" : "inf")
        case .uuid(let u): return DocumentValue.string(u.uuidString).json()
        case .bytes(let b): return DocumentValue.string(Data(b).base64EncodedString()).json()
        case .uint(let u): return String(u)
        default: return json()
        }
    }
}
