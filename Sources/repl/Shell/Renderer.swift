import Foundation
import DocStore

/// How results are printed: `.mode table|json|line`.
enum OutputMode: String, CaseIterable, Sendable {
    case table, json, line
}

/// Prints documents as a table, as JSON, or one field per line.
struct Renderer {
    var mode: OutputMode
    /// The widest a table cell grows before it is cut with an ellipsis.
    var maximumCellWidth = 40

    func render(_ documents: [DocumentValue]) -> String {
        switch mode {
        case .json:
            if documents.isEmpty { return "[]\n" }
            return "[\n" + documents.map { "  " + $0.json() }.joined(separator: ",\n") + "\n]\n"
        case .line:
            return documents.map(Renderer.lines).joined(separator: "\n")
        case .table:
            return table(documents)
        }
    }

    /// One document: in table mode a one-row table, else as the mode prints documents.
    func render(_ document: DocumentValue?) -> String {
        guard let document else { return "(no document)\n" }
        if mode == .json { return document.json(pretty: true) + "\n" }
        return render([document])
    }

    /// `name = value`, one field per line, nested fields by their dotted path.
    static func lines(_ document: DocumentValue) -> String {
        let columns = flatten(document)
        let width = columns.map(\.0.count).max() ?? 0
        return columns.map { name, value in
            String(repeating: " ", count: width - name.count) + name + " = " + cell(value)
        }.joined(separator: "\n") + "\n"
    }

    /// A document's fields as dotted paths and values; arrays stay whole.
    static func flatten(_ value: DocumentValue, prefix: String = "") -> [(String, DocumentValue)] {
        guard case .object(let fields) = value else { return [(prefix.isEmpty ? "value" : prefix, value)] }
        if fields.isEmpty && !prefix.isEmpty { return [(prefix, value)] }
        return fields.flatMap { field -> [(String, DocumentValue)] in
            let name = prefix.isEmpty ? field.name : prefix + "." + field.name
            if case .object = field.value { return flatten(field.value, prefix: name) }
            return [(name, field.value)]
        }
    }

    /// A value as a cell shows it: strings without quotes, the rest as JSON.
    static func cell(_ value: DocumentValue) -> String {
        switch value {
        case .string(let s): return s
        case .null: return "nil"
        case .date: return value.json().trimmingCharacters(in: ["\""])
        default: return value.literalText
        }
    }

    private func table(_ documents: [DocumentValue]) -> String {
        if documents.isEmpty { return "(no documents)\n" }
        var columns: [String] = []
        var seen: Set<String> = []
        let rows = documents.map { document -> [String: String] in
            var row: [String: String] = [:]
            for (name, value) in Renderer.flatten(document) {
                if seen.insert(name).inserted { columns.append(name) }
                row[name] = Renderer.clip(Renderer.cell(value).replacingNewlines, maximumCellWidth)
            }
            return row
        }
        var widths = columns.map { Renderer.width($0) }
        for row in rows {
            for (i, c) in columns.enumerated() { widths[i] = max(widths[i], Renderer.width(row[c] ?? "")) }
        }
        func rule(_ left: String, _ middle: String, _ right: String) -> String {
            left + widths.map { String(repeating: "─", count: $0 + 2) }.joined(separator: middle) + right + "\n"
        }
        func line(_ cells: [String]) -> String {
            "│" + zip(cells, widths).map { " " + $0 + String(repeating: " ", count: $1 - Renderer.width($0)) + " " }
                .joined(separator: "│") + "│\n"
        }
        var out = rule("┌", "┬", "┐") + line(columns) + rule("├", "┼", "┤")
        for row in rows { out += line(columns.map { row[$0] ?? "" }) }
        out += rule("└", "┴", "┘")
        out += "\(documents.count) document\(documents.count == 1 ? "" : "s")\n"
        return out
    }

    /// Columns a string takes in a terminal (East Asian wide characters take two).
    static func width(_ s: String) -> Int {
        s.unicodeScalars.reduce(0) { n, u in
            let v = u.value
            if u.properties.generalCategory == .nonspacingMark || v == 0x200D || (0xFE00...0xFE0F).contains(v) {
                return n
            }
            let wide = (0x1100...0x115F).contains(v) || (0x2E80...0xA4CF).contains(v) || (0xAC00...0xD7A3).contains(v)
                || (0xF900...0xFAFF).contains(v) || (0xFE30...0xFE4F).contains(v) || (0xFF00...0xFF60).contains(v)
                || (0xFFE0...0xFFE6).contains(v) || (0x1F300...0x1FAFF).contains(v) || (0x20000...0x3FFFD).contains(v)
            return n + (wide ? 2 : 1)
        }
    }

    static func clip(_ s: String, _ limit: Int) -> String {
        guard width(s) > limit else { return s }
        var out = ""
        for c in s {
            if width(out + String(c)) > limit - 1 { break }
            out.append(c)
        }
        return out + "…"
    }
}

extension String {
    /// The text on one line: newlines and tabs shown as escapes.
    var replacingNewlines: String {
        var out = ""
        for c in self {
            switch c {
            case "\n", "\r\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default: out.append(c)
            }
        }
        return out
    }
}

extension DocumentValue {
    /// The value as the query language writes it: JSON, with `date("...")` for dates and `nil` for null.
    var literalText: String {
        switch self {
        case .null: return "nil"
        case .date: return "date(\(json()))"
        case .double(let d) where !d.isFinite: return d.isNaN ? "nan" : (d < 0 ? "-inf" : "inf")
        default: return json()
        }
    }
}
