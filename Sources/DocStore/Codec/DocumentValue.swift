import Foundation

/// A document, or any part of one, without its Swift type.
///
/// This is what tools that do not know a model's type (the REPL, import and export) read and write.
/// Objects keep their fields in order.
///
/// For example:
/// ```swift
/// let value: DocumentValue = .object([("name", .string("Ann")), ("age", .int(41))])
/// print(value.json())   // {"name":"Ann","age":41}
/// ```
public enum DocumentValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    /// An unsigned integer above `Int64.max`; smaller ones are ``int(_:)``.
    case uint(UInt64)
    case double(Double)
    case string(String)
    case bytes([UInt8])
    case date(Date)
    case uuid(UUID)
    case array([DocumentValue])
    case object([Field])

    /// One named field of an object.
    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: DocumentValue
        public init(_ name: String, _ value: DocumentValue) { self.name = name; self.value = value }
    }

    /// An object from name-value pairs, in order.
    public static func object(_ pairs: [(String, DocumentValue)]) -> DocumentValue {
        .object(pairs.map { Field($0.0, $0.1) })
    }

    /// The value of a field of an object, or `nil`.
    public subscript(field name: String) -> DocumentValue? {
        guard case .object(let fields) = self else { return nil }
        return fields.first(where: { $0.name == name })?.value
    }

    /// The value at a dotted path, or `nil` where any step is missing.
    public subscript(path path: FieldPath) -> DocumentValue? {
        var current = self
        for name in path.components {
            guard let next = current[field: name] else { return nil }
            current = next
        }
        return current
    }

    /// This object with `value` at `path`: a field that exists is replaced where it stands, a missing one is
    /// added (at the front when `first`, else at the end), with the objects on its way made as needed (in place of
    /// a `nil` too). A step through anything else that is not an object leaves the value as it is.
    public func setting(_ value: DocumentValue, at path: FieldPath, first: Bool = false) -> DocumentValue {
        setting(value, at: path.components[...], first: first)
    }

    private func setting(_ value: DocumentValue, at path: ArraySlice<String>, first: Bool) -> DocumentValue {
        guard let name = path.first else { return self }
        var fields: [Field]
        switch self {
        case .object(let existing): fields = existing
        case .null: fields = []
        default: return self
        }
        let rest = path.dropFirst()
        if let i = fields.firstIndex(where: { $0.name == name }) {
            fields[i].value = rest.isEmpty ? value : fields[i].value.setting(value, at: rest, first: first)
        } else {
            let new = Field(name, rest.isEmpty ? value : DocumentValue.object([Field]()).setting(value, at: rest, first: first))
            if first { fields.insert(new, at: 0) } else { fields.append(new) }
        }
        return .object(fields)
    }
}

// MARK: Reading and writing the binary format

extension DocumentValue {
    /// Decodes a whole encoded document, checking its structure.
    ///
    /// - Throws: ``DocStoreError`` with code ``DocStoreError/Code/corruptDocument`` when the bytes are not a document.
    public init(encoded bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBytes { raw in
            do {
                let reader = BinaryReader(raw)
                return try DocumentValue(reader: reader, ref: try reader.root())
            } catch let error as MalformedDocument {
                throw DocStoreError(.corruptDocument, "\(error)", underlying: error)
            }
        }
    }

    init(reader: BinaryReader, ref: ValueRef, depth: Int = 0) throws {
        guard depth <= BinaryFormat.maximumDepth else {
            throw MalformedDocument(offset: ref.start - 1, reason: "nested deeper than \(BinaryFormat.maximumDepth) levels")
        }
        switch ref.tag {
        case BinaryFormat.Tag.null: self = .null
        case BinaryFormat.Tag.false: self = .bool(false)
        case BinaryFormat.Tag.true: self = .bool(true)
        case BinaryFormat.Tag.int8, BinaryFormat.Tag.int16, BinaryFormat.Tag.int32, BinaryFormat.Tag.int64:
            self = .int(reader.integer(ref) ?? 0)
        case BinaryFormat.Tag.uint64: self = .uint(reader.unsigned(ref) ?? 0)
        case BinaryFormat.Tag.double: self = .double(reader.double(ref) ?? 0)
        case BinaryFormat.Tag.string: self = .string(try reader.string(ref))
        case BinaryFormat.Tag.bytes: self = .bytes(Array(try reader.payloadBytes(ref)))
        case BinaryFormat.Tag.date: self = .date(Date(timeIntervalSinceReferenceDate: reader.dateInterval(ref) ?? 0))
        case BinaryFormat.Tag.uuid: self = .uuid(reader.uuid(ref))
        case BinaryFormat.Tag.array:
            // The count fits in the container's bytes (checked when `ref` was read); the cap keeps each of many
            // nested containers from reserving room for the whole document.
            var elements: [DocumentValue] = []
            elements.reserveCapacity(min(reader.count(ref), 1024))
            try reader.forEachElement(ref) { elements.append(try DocumentValue(reader: reader, ref: $0, depth: depth + 1)) }
            self = .array(elements)
        case BinaryFormat.Tag.object, BinaryFormat.Tag.shaped:
            var fields: [Field] = []
            fields.reserveCapacity(min(reader.count(ref), 1024))
            try reader.forEachField(ref) { name, value in
                fields.append(Field(String(decoding: name, as: UTF8.self), try DocumentValue(reader: reader, ref: value, depth: depth + 1)))
            }
            self = .object(fields)
        default:
            throw MalformedDocument(offset: ref.start - 1, reason: "unknown value tag")
        }
    }

    /// Checks what ``init(reader:ref:depth:)`` checks (every value, to the end of every container) and builds
    /// nothing: `verify()` reads each document so.
    static func check(reader: BinaryReader, ref: ValueRef, depth: Int = 0) throws {
        guard depth <= BinaryFormat.maximumDepth else {
            throw MalformedDocument(offset: ref.start - 1, reason: "nested deeper than \(BinaryFormat.maximumDepth) levels")
        }
        switch ref.tag {
        case BinaryFormat.Tag.null, BinaryFormat.Tag.false, BinaryFormat.Tag.true, BinaryFormat.Tag.int8,
             BinaryFormat.Tag.int16, BinaryFormat.Tag.int32, BinaryFormat.Tag.int64, BinaryFormat.Tag.uint64,
             BinaryFormat.Tag.double, BinaryFormat.Tag.date, BinaryFormat.Tag.uuid:
            return
        case BinaryFormat.Tag.string, BinaryFormat.Tag.bytes:
            _ = try reader.payloadBytes(ref)
        case BinaryFormat.Tag.array:
            try reader.forEachElement(ref) { try check(reader: reader, ref: $0, depth: depth + 1) }
        case BinaryFormat.Tag.object, BinaryFormat.Tag.shaped:
            try reader.forEachField(ref) { _, value in try check(reader: reader, ref: value, depth: depth + 1) }
        default:
            throw MalformedDocument(offset: ref.start - 1, reason: "unknown value tag")
        }
    }

    /// The value as a document in the binary format, version byte included.
    public func encoded() -> [UInt8] {
        var writer = BinaryWriter()
        writer.byte(BinaryFormat.version)
        write(to: &writer)
        writer.seal()
        return writer.bytes
    }

    func write(to writer: inout BinaryWriter) {
        switch self {
        case .null: writer.null()
        case .bool(let b): writer.bool(b)
        case .int(let i): writer.int(i)
        case .uint(let u): writer.uint(u)
        case .double(let d): writer.double(d)
        case .string(let s): writer.string(s)
        case .bytes(let b): writer.data(b)
        case .date(let d): writer.date(d)
        case .uuid(let u): writer.uuid(u)
        case .array(let elements):
            let header = writer.openContainer(tag: BinaryFormat.Tag.array)
            for e in elements { e.write(to: &writer) }
            writer.closeContainer(at: header, count: elements.count)
        case .object(let fields):
            let header = writer.openContainer(tag: BinaryFormat.Tag.object)
            for f in fields { writer.name(f.name); f.value.write(to: &writer) }
            writer.closeContainer(at: header, count: fields.count)
        }
    }
}

