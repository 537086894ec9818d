import Foundation

/// DocStore's JSON: the text of a document, of a dump, of the shell's JSON output and of what its `.import` reads,
/// written and read here alone. It keeps every value exactly, so that what is read back is what was written.
///
/// Strings, booleans, `null`, arrays and objects (with their fields in order) are plain JSON. An integer is written
/// without a point, a Double always with one (`1.0`) or an exponent, so each reads back as what it was. The kinds
/// JSON lacks are objects of one tagged field: `{"$date": "2024-05-01T10:00:00.000Z"}` (with `"$seconds"`, the
/// exact seconds since 2001, when milliseconds do not hold the date exactly), `{"$uuid": "..."}`,
/// `{"$bytes": "base64"}`, `{"$uint": "12"}` for an unsigned integer, `{"$double": "nan"}`
/// (`"inf"`, `"-inf"`) for a Double JSON cannot write. A document's own object with a field whose name starts
/// with `$` is wrapped as `{"$object": {...}}`. Reading, a `$date` may be any ISO 8601 text the shell reads (a day,
/// a time with or without a fraction), an object whose first field is a `$` name of no tag above is an object, and
/// comments (`//`, `/* */`) are skipped.
/// (The Backups and compaction section of the Transactions article describes the format for users.)
enum ExtendedJSON {
    /// Appends `value`'s text to `out`, as UTF-8; `pretty`, with each element and field on a line of its own,
    /// indented by two spaces a level (a tag stays on one line).
    static func write(_ value: DocumentValue, to out: inout [UInt8], pretty: Bool = false, indent: Int = 0) {
        func newline(_ level: Int) {
            guard pretty else { return }
            out.append(0x0A)
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * level))
        }
        switch value {
        case .null: append("null", &out)
        case .bool(let b): append(b ? "true" : "false", &out)
        case .int(let i): append(String(i), &out)
        case .string(let s): string(s, &out)
        case .double(let d):
            if !d.isFinite { tagged("$double", nonFiniteText(d), &out) }
            else if d == d.rounded(), abs(d) < 1e15 { append(String(format: "%.1f", d), &out) }
            else { append("\(d)", &out) }
        case .uint(let u): tagged("$uint", String(u), &out)
        case .uuid(let u): tagged("$uuid", u.uuidString, &out)
        case .bytes(let b): tagged("$bytes", Data(b).base64EncodedString(), &out)
        case .date(let d):
            let text = DocumentValue.iso8601(d)
            append("{\"$date\":", &out)
            string(text, &out)
            if parseDate(text) != d {
                // (As a double is written: a date of NaN or infinite seconds, which no text names, reads back too.)
                append(",\"$seconds\":", &out)
                write(.double(d.timeIntervalSinceReferenceDate), to: &out, pretty: false, indent: 0)
            }
            out.append(UInt8(ascii: "}"))
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, e) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                write(e, to: &out, pretty: pretty, indent: indent + 1)
            }
            if !elements.isEmpty { newline(indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            let wrapped = fields.contains { $0.name.utf8.first == UInt8(ascii: "$") }
            append(wrapped ? "{\"$object\":{" : "{", &out)
            for (i, f) in fields.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                string(f.name, &out)
                append(pretty ? ": " : ":", &out)
                write(f.value, to: &out, pretty: pretty, indent: indent + 1)
            }
            if !fields.isEmpty { newline(indent) }
            append(wrapped ? "}}" : "}", &out)
        }
    }

    /// Appends the text of the stored value `ref`, as ``write(_:to:)`` writes it once decoded, without decoding
    /// the strings, objects and arrays that make most of a document.
    static func write(reader: BinaryReader, ref: ValueRef, depth: Int = 0, to out: inout [UInt8]) throws {
        guard depth <= BinaryFormat.maximumDepth else {
            throw MalformedDocument(offset: ref.start - 1, reason: "nested deeper than \(BinaryFormat.maximumDepth) levels")
        }
        switch ref.tag {
        case BinaryFormat.Tag.null: append("null", &out)
        case BinaryFormat.Tag.false: append("false", &out)
        case BinaryFormat.Tag.true: append("true", &out)
        case BinaryFormat.Tag.int8, BinaryFormat.Tag.int16, BinaryFormat.Tag.int32, BinaryFormat.Tag.int64:
            append(String(reader.integer(ref) ?? 0), &out)
        case BinaryFormat.Tag.string:
            string(UnsafeRawBufferPointer(try reader.payloadBytes(ref)), &out)
        case BinaryFormat.Tag.array:
            out.append(UInt8(ascii: "["))
            var first = true
            try reader.forEachElement(ref) { element in
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                try write(reader: reader, ref: element, depth: depth + 1, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case BinaryFormat.Tag.object, BinaryFormat.Tag.shaped:
            var wrapped = false
            try reader.forEachField(ref) { name, _ in if name.first == UInt8(ascii: "$") { wrapped = true } }
            append(wrapped ? "{\"$object\":{" : "{", &out)
            var first = true
            try reader.forEachField(ref) { name, value in
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                string(name, &out)
                out.append(UInt8(ascii: ":"))
                try write(reader: reader, ref: value, depth: depth + 1, to: &out)
            }
            append(wrapped ? "}}" : "}", &out)
        default:
            // The rarer kinds (unsigned, Double, bytes, date, UUID), and an unknown tag's error, as decoded.
            write(try DocumentValue(reader: reader, ref: ref, depth: depth), to: &out)
        }
    }

    /// `value`'s text.
    static func text(_ value: DocumentValue, pretty: Bool = false) -> String {
        var out: [UInt8] = []
        write(value, to: &out, pretty: pretty)
        return String(decoding: out, as: UTF8.self)
    }

    private static func append(_ text: String, _ out: inout [UInt8]) {
        out.append(contentsOf: text.utf8)
    }

    /// A JSON string: quotes, backslashes and control characters escaped, every other byte as it is.
    private static func string(_ s: String, _ out: inout [UInt8]) { string(s.utf8, &out) }

    private static func string<Bytes: Collection<UInt8>>(_ utf8: Bytes, _ out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        defer { out.append(UInt8(ascii: "\"")) }
        if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: utf8)   // most text: nothing to escape
            return
        }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(byte)
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(byte)
            case 0x0A: append("\\n", &out)
            case 0x0D: append("\\r", &out)
            case 0x09: append("\\t", &out)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                append("\\u00", &out)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
    }

    private static func tagged(_ tag: String, _ text: String, _ out: inout [UInt8]) {
        append("{\"\(tag)\":", &out)
        string(text, &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The text of `{"$double": ...}` for a Double JSON cannot write: `nan`, `inf` or `-inf`.
    static func nonFiniteText(_ d: Double) -> String { d.isNaN ? "nan" : d > 0 ? "inf" : "-inf" }

    /// The Double that ``nonFiniteText(_:)`` wrote `text` for.
    static func nonFinite(_ text: String) -> Double? {
        switch text {
        case "nan": return .nan
        case "inf": return .infinity
        case "-inf": return -.infinity
        default: return nil
        }
    }

    static func parseDate(_ text: String) -> Date? {
        try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
    }

    /// The value a text holds, its tags read back into the kinds they stand for; throws ``JSONError``.
    static func read(_ line: some StringProtocol) throws -> DocumentValue {
        var reader = Reader(bytes: Array(line.utf8))
        reader.skipSpace()
        let value = try reader.value()
        reader.skipSpace()
        guard reader.at == reader.bytes.count else { throw reader.failure("text after the value") }
        return value
    }

    private struct Reader {
        let bytes: [UInt8]
        var at = 0
        /// Arrays and objects open around the value being read: no deeper than a stored document may be.
        var depth = 0

        func failure(_ what: String, at offset: Int? = nil) -> JSONError { JSONError(reason: what, offset: offset ?? at) }

        /// After a comma: a closing `close` there is an error, where the comma is.
        mutating func refuseCommaBefore(_ close: UInt8) throws {
            let comma = at - 1
            skipSpace()
            if at < bytes.count, bytes[at] == close {
                throw failure("a comma before '\(Character(Unicode.Scalar(close)))': JSON has none after the last value",
                              at: comma)
            }
        }

        /// Skips white space, and comments (`// ...` to the end of the line, `/* ... */`), which a JSON file
        /// written by hand may hold.
        mutating func skipSpace() {
            while at < bytes.count {
                if [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1; continue }
                guard bytes[at] == UInt8(ascii: "/"), at + 1 < bytes.count else { return }
                if bytes[at + 1] == UInt8(ascii: "/") {
                    while at < bytes.count, bytes[at] != 0x0A { at += 1 }
                } else if bytes[at + 1] == UInt8(ascii: "*") {
                    at += 2
                    while at + 1 < bytes.count, !(bytes[at] == UInt8(ascii: "*") && bytes[at + 1] == UInt8(ascii: "/")) { at += 1 }
                    at = min(at + 2, bytes.count)
                } else {
                    return
                }
            }
        }

        mutating func expect(_ byte: UInt8) throws {
            skipSpace()
            guard at < bytes.count, bytes[at] == byte else {
                throw failure("expected '\(Character(Unicode.Scalar(byte)))'")
            }
            at += 1
        }

        mutating func value() throws -> DocumentValue {
            skipSpace()
            guard at < bytes.count else { throw failure("a value is missing") }
            if bytes[at] == UInt8(ascii: "{") || bytes[at] == UInt8(ascii: "[") {
                guard depth < BinaryFormat.maximumDepth else {
                    throw failure("values nested deeper than \(BinaryFormat.maximumDepth) levels")
                }
                depth += 1
            }
            switch bytes[at] {
            case UInt8(ascii: "{"):
                defer { depth -= 1 }
                return try object()
            case UInt8(ascii: "["):
                defer { depth -= 1 }
                at += 1
                var elements: [DocumentValue] = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "]") { at += 1; return .array([]) }
                while true {
                    elements.append(try value())
                    skipSpace()
                    guard at < bytes.count else { throw failure("an array is not closed") }
                    if bytes[at] == UInt8(ascii: ",") { at += 1; try refuseCommaBefore(UInt8(ascii: "]")); continue }
                    try expect(UInt8(ascii: "]"))
                    return .array(elements)
                }
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try word("true"); return .bool(true)
            case UInt8(ascii: "f"): try word("false"); return .bool(false)
            case UInt8(ascii: "n"): try word("null"); return .null
            default: return try number()
            }
        }

        mutating func word(_ w: String) throws {
            let u = Array(w.utf8)
            guard bytes.count - at >= u.count, Array(bytes[at..<at + u.count]) == u else { throw failure("unknown word") }
            at += u.count
        }

        mutating func number() throws -> DocumentValue {
            let start = at
            var isInteger = true
            while at < bytes.count, let c = Optional(bytes[at]),
                  (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
                    || c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") { isInteger = false }
                at += 1
            }
            let text = String(decoding: bytes[start..<at], as: UTF8.self)
            if isInteger, let i = Int64(text) { return .int(i) }
            if isInteger, let u = UInt64(text) { return .uint(u) }
            if !text.isEmpty, let d = Double(text) { return .double(d) }
            at = start
            throw failure("not a value")
        }

        mutating func string() throws -> String {
            at += 1
            var out: [UInt8] = []
            while at < bytes.count {
                let c = bytes[at]
                at += 1
                if c == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
                guard c == UInt8(ascii: "\\") else { out.append(c); continue }
                guard at < bytes.count else { break }
                let e = bytes[at]
                at += 1
                switch e {
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar), bytes.count - at >= 6, bytes[at] == UInt8(ascii: "\\"),
                       bytes[at + 1] == UInt8(ascii: "u") {
                        at += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw failure("an invalid \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw failure("an invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: out.append(e)
                }
            }
            throw failure("a string is not closed")
        }

        mutating func hex4() throws -> UInt32 {
            guard bytes.count - at >= 4, let v = UInt32(String(decoding: bytes[at..<at + 4], as: UTF8.self), radix: 16)
            else { throw failure("an invalid \\u escape") }
            at += 4
            return v
        }

        /// An object; with `untag`, one of a single tag is read as the value it stands for.
        mutating func object(untag: Bool = true) throws -> DocumentValue {
            at += 1
            var fields: [DocumentValue.Field] = []
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "}") { at += 1 } else {
                while true {
                    skipSpace()
                    guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { throw failure("expected a field name") }
                    let name = try string()
                    try expect(UInt8(ascii: ":"))
                    skipSpace()
                    if untag, fields.isEmpty, name == "$object", at < bytes.count, bytes[at] == UInt8(ascii: "{") {
                        // The fields of a wrapped object are the document's own: their names are never tags.
                        guard depth < BinaryFormat.maximumDepth else {
                            throw failure("values nested deeper than \(BinaryFormat.maximumDepth) levels")
                        }
                        depth += 1
                        defer { depth -= 1 }
                        fields.append(DocumentValue.Field(name, try object(untag: false)))
                    } else {
                        fields.append(DocumentValue.Field(name, try value()))
                    }
                    skipSpace()
                    guard at < bytes.count else { throw failure("an object is not closed") }
                    if bytes[at] == UInt8(ascii: ",") { at += 1; try refuseCommaBefore(UInt8(ascii: "}")); continue }
                    try expect(UInt8(ascii: "}"))
                    break
                }
            }
            return untag ? try untagged(fields) : .object(fields)
        }

        /// An object of one tag as the value it stands for; any other object as it is.
        func untagged(_ fields: [DocumentValue.Field]) throws -> DocumentValue {
            guard let tag = fields.first?.name, tag.hasPrefix("$") else { return .object(fields) }
            func text() throws -> String {
                guard case .string(let s) = fields[0].value else { throw failure("\(tag) holds no text") }
                return s
            }
            switch (tag, fields.count) {
            case ("$object", 1):
                guard case .object = fields[0].value else { throw failure("$object holds no object") }
                return fields[0].value
            case ("$uint", 1):
                guard let u = UInt64(try text()) else { throw failure("$uint holds no unsigned integer") }
                return .uint(u)
            case ("$uuid", 1):
                guard let u = UUID(uuidString: try text()) else { throw failure("$uuid holds no UUID") }
                return .uuid(u)
            case ("$bytes", 1):
                guard let d = Data(base64Encoded: try text()) else { throw failure("$bytes holds no base64") }
                return .bytes(Array(d))
            case ("$double", 1):
                guard let d = ExtendedJSON.nonFinite(try text()) else { throw failure("$double holds no nan, inf or -inf") }
                return .double(d)
            case ("$date", 1), ("$date", 2):
                if fields.count == 2 {
                    guard fields[1].name == "$seconds", case .double(let s) = fields[1].value else {
                        throw failure("$date's second field is not $seconds")
                    }
                    return .date(Date(timeIntervalSinceReferenceDate: s))
                }
                // MongoDB's forms: milliseconds since 1970, as {"$numberLong": "..."} or a number.
                switch fields[0].value {
                case .int(let ms): return .date(Date(timeIntervalSince1970: Double(ms) / 1000))
                case .object(let inner) where inner.count == 1 && inner[0].name == "$numberLong":
                    guard case .string(let text) = inner[0].value, let ms = Int64(text) else {
                        throw failure("$date's $numberLong holds no integer")
                    }
                    return .date(Date(timeIntervalSince1970: Double(ms) / 1000))
                default: break
                }
                let text = try text()
                guard let d = ExtendedJSON.parseDate(text) ?? DateTextFormat.iso8601(text) else {
                    throw failure("$date holds no ISO 8601 date")
                }
                return .date(d)
            default:
                return .object(fields)
            }
        }
    }
}

extension DocumentValue {
    /// The value as DocStore's JSON, which dumps hold too: plain JSON, with the kinds JSON lacks as objects of one
    /// tagged field, `{"$date": "2024-05-01T10:00:00.000Z"}`, `{"$uuid": "..."}`, `{"$double": "inf"}` and so on,
    /// which ``init(json:)`` reads back as they were.
    public func json(pretty: Bool = false) -> String {
        ExtendedJSON.text(self, pretty: pretty)
    }

    /// The value that DocStore's JSON `text` (as ``json(pretty:)`` writes it, or plain JSON) holds.
    ///
    /// - Throws: ``JSONError`` when the text is not one JSON value, saying what is wrong and where.
    public init(json text: some StringProtocol) throws(JSONError) {
        do { self = try ExtendedJSON.read(text) } catch {
            throw error as? JSONError ?? JSONError(reason: "\(error)", offset: 0)
        }
    }

    /// A date as DocStore's JSON writes it: ISO 8601 in UTC, with milliseconds (`2024-05-01T10:00:00.000Z`).
    public static func iso8601(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

/// Why a text is not DocStore's JSON, and where.
public struct JSONError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public let reason: String
    /// The UTF-8 bytes of the text before the spot.
    public let offset: Int
    public var description: String { "\(reason) at column \(offset + 1)" }
}

extension DocumentValue {
    /// The value as plain JSON, for messages and a migration's recorded steps: dates, UUIDs and bytes as text,
    /// unsigned integers as digits and non-finite Doubles as `null`, as these have always been written. Not for data:
    /// it does not read back as the same value (``json(pretty:)`` does). A store compares the steps it recorded with
    /// those its migrator makes now, to see a migration that changed, so this text does not change.
    func plainJSON() -> String {
        switch self {
        case .date(let d): return ExtendedJSON.text(.string(DocumentValue.iso8601(d)))
        case .uuid(let u): return ExtendedJSON.text(.string(u.uuidString))
        case .bytes(let b): return ExtendedJSON.text(.string(Data(b).base64EncodedString()))
        case .uint(let u): return String(u)
        case .double(let d) where !d.isFinite: return "null"
        case .array(let elements): return "[" + elements.map { $0.plainJSON() }.joined(separator: ",") + "]"
        case .object(let fields):
            return "{" + fields.map { ExtendedJSON.text(.string($0.name)) + ":" + $0.value.plainJSON() }.joined(separator: ",") + "}"
        default: return ExtendedJSON.text(self)
        }
    }
}
