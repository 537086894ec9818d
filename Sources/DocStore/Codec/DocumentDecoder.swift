import Foundation

/// Decodes `Decodable` values straight from DocStore's binary document format.
///
/// It reads the bytes where they lie (inside LMDB's memory map, when the store calls it), finds fields by name
/// without decoding the ones the type does not ask for, and expects the fields in the order they were written
/// (trying that first makes each look-up O(1) for synthesized `Codable`), while accepting any order.
///
/// For example:
/// ```swift
/// let bytes = try DocumentEncoder().encode(person)
/// let copy = try DocumentDecoder().decode(Person.self, from: bytes)
/// ```
public struct DocumentDecoder: Sendable {
    public init() {}

    /// Decodes a document (version byte first).
    ///
    /// - Throws: `DecodingError` naming the coding path when the document does not fit `T`;
    ///   ``DocStoreError`` with code ``DocStoreError/Code/corruptDocument`` when the bytes are not a document.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    public func decode<T: Decodable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer) throws -> T {
        let reader = BinaryReader(buffer)
        let root: ValueRef
        do { root = try reader.root() } catch let error as MalformedDocument {
            throw DocStoreError(.corruptDocument, "\(error)", underlying: error)
        }
        return try DocumentValueDecoder(reader: reader, ref: root, path: nil).decodeValue(type)
    }
}

/// The `Decoder` for one value of a document.
final class DocumentValueDecoder: Decoder {
    let reader: BinaryReader
    let ref: ValueRef
    let path: PathNode?
    /// Where the next field of this object is expected: just after the last one found.
    var hint: Int = 0

    init(reader: BinaryReader, ref: ValueRef, path: PathNode?) {
        self.reader = reader
        self.ref = ref
        self.path = path
    }

    var codingPath: [any CodingKey] { PathNode.array(path) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard ref.tag == BinaryFormat.Tag.object else { throw mismatch(type: [String: Any].self, ref) }
        hint = reader.contentStart(ref)
        return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard ref.tag == BinaryFormat.Tag.array else { throw mismatch(type: [Any].self, ref) }
        return UnkeyedContainer(decoder: self, offset: reader.contentStart(ref), count: reader.count(ref))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleValueContainer(decoder: self) }

    // MARK: Values

    static func kindName(_ tag: UInt8) -> String {
        switch tag {
        case BinaryFormat.Tag.null: return "null"
        case BinaryFormat.Tag.false, BinaryFormat.Tag.true: return "a boolean"
        case BinaryFormat.Tag.int8, BinaryFormat.Tag.int16, BinaryFormat.Tag.int32,
             BinaryFormat.Tag.int64, BinaryFormat.Tag.uint64: return "an integer"
        case BinaryFormat.Tag.double: return "a floating-point number"
        case BinaryFormat.Tag.string: return "a string"
        case BinaryFormat.Tag.bytes: return "bytes"
        case BinaryFormat.Tag.date: return "a date"
        case BinaryFormat.Tag.uuid: return "a UUID"
        case BinaryFormat.Tag.array: return "an array"
        case BinaryFormat.Tag.object: return "an object"
        default: return "an unknown value"
        }
    }

    func mismatch(type: Any.Type, _ ref: ValueRef, path: PathNode? = nil) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: PathNode.array(path ?? self.path),
            debugDescription: "expected \(type), found \(DocumentValueDecoder.kindName(ref.tag))"))
    }

    func bool(_ r: ValueRef, _ p: PathNode?) throws -> Bool {
        switch r.tag {
        case BinaryFormat.Tag.true: return true
        case BinaryFormat.Tag.false: return false
        default: throw mismatch(type: Bool.self, r, path: p)
        }
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type, _ r: ValueRef, _ p: PathNode?) throws -> I {
        if let i = reader.integer(r) {
            if let v = I(exactly: i) { return v }
        } else if let u = reader.unsigned(r) {
            if let v = I(exactly: u) { return v }
        } else if let d = reader.double(r) {
            if let v = I(exactly: d) { return v }
        } else {
            throw mismatch(type: type, r, path: p)
        }
        throw DecodingError.dataCorrupted(.init(codingPath: PathNode.array(p ?? path),
            debugDescription: "number does not fit in \(type)"))
    }

    func double(_ r: ValueRef, _ p: PathNode?) throws -> Double {
        if let d = reader.double(r) { return d }
        if let i = reader.integer(r) { return Double(i) }
        if let u = reader.unsigned(r) { return Double(u) }
        throw mismatch(type: Double.self, r, path: p)
    }

    func string(_ r: ValueRef, _ p: PathNode?) throws -> String {
        guard r.tag == BinaryFormat.Tag.string else { throw mismatch(type: String.self, r, path: p) }
        return try reader.string(r)
    }

    func isNull(_ r: ValueRef) -> Bool { r.tag == BinaryFormat.Tag.null }

    /// Decodes any value at `r`: the scalar and common array types directly, others through their `init(from:)`.
    func decode<T: Decodable>(_ type: T.Type, at r: ValueRef, path p: PathNode?) throws -> T {
        if T.self == String.self { return try string(r, p) as! T }
        if T.self == Int.self { return try integer(Int.self, r, p) as! T }
        if T.self == Double.self { return try double(r, p) as! T }
        if T.self == Bool.self { return try bool(r, p) as! T }
        if T.self == Date.self {
            if let t = reader.dateInterval(r) { return Date(timeIntervalSinceReferenceDate: t) as! T }
            if r.tag != BinaryFormat.Tag.string {
                return Date(timeIntervalSinceReferenceDate: try double(r, p)) as! T
            }
            throw mismatch(type: Date.self, r, path: p)
        }
        if T.self == UUID.self {
            if r.tag == BinaryFormat.Tag.uuid { return reader.uuid(r) as! T }
            if r.tag == BinaryFormat.Tag.string, let u = UUID(uuidString: try reader.string(r)) { return u as! T }
            throw mismatch(type: UUID.self, r, path: p)
        }
        if T.self == Data.self {
            guard r.tag == BinaryFormat.Tag.bytes else { throw mismatch(type: Data.self, r, path: p) }
            return Data(try reader.payloadBytes(r)) as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try string(r, p)) else {
                throw DecodingError.dataCorrupted(.init(codingPath: PathNode.array(p), debugDescription: "invalid URL"))
            }
            return url as! T
        }
        if T.self == [String].self {
            guard r.tag == BinaryFormat.Tag.array else { throw mismatch(type: T.self, r, path: p) }
            var out: [String] = []
            out.reserveCapacity(min(reader.count(r), 4096))
            try reader.forEachElement(r) { out.append(try string($0, p)) }
            return out as! T
        }
        if T.self == [Int].self {
            guard r.tag == BinaryFormat.Tag.array else { throw mismatch(type: T.self, r, path: p) }
            var out: [Int] = []
            out.reserveCapacity(min(reader.count(r), 4096))
            try reader.forEachElement(r) { out.append(try integer(Int.self, $0, p)) }
            return out as! T
        }
        return try T(from: DocumentValueDecoder(reader: reader, ref: r, path: p))
    }

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        try decode(type, at: ref, path: path)
    }

    /// Finds field `name`, trying the expected position first.
    func field(_ key: some CodingKey) throws -> ValueRef? {
        let name = key.stringValue
        if let found = try name.utf8.withContiguousStorageIfAvailable({ try field(UnsafeRawBufferPointer($0)) }) {
            return found
        }
        return try Array(name.utf8).withUnsafeBytes { try field($0) }
    }

    private func field(_ name: UnsafeRawBufferPointer) throws -> ValueRef? {
        let start = reader.contentStart(ref)
        var offset = hint
        var wrapped = false
        while true {
            if offset >= ref.end {
                if wrapped || hint == start { return nil }
                wrapped = true
                offset = start
            }
            if wrapped && offset >= hint { return nil }
            let (n, s) = try reader.varint(at: offset)
            try reader.need(s, n)
            let value = try reader.value(at: s + n)
            guard value.end <= ref.end else {
                throw MalformedDocument(offset: offset, reason: "field runs past its object")
            }
            if n == name.count && BinaryReader.equal(reader.buffer, s, name) {
                hint = value.end
                return value
            }
            offset = value.end
        }
    }

    // MARK: Containers

    struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: DocumentValueDecoder

        var codingPath: [any CodingKey] { decoder.codingPath }

        var allKeys: [Key] {
            var keys: [Key] = []
            try? decoder.reader.forEachField(decoder.ref) { name, _ in
                if let k = Key(stringValue: String(decoding: name, as: UTF8.self)) { keys.append(k) }
            }
            return keys
        }

        func contains(_ key: Key) -> Bool { ((try? decoder.field(key)) ?? nil) != nil }

        private func require(_ key: Key) throws -> ValueRef {
            guard let r = try decoder.field(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: decoder.codingPath,
                    debugDescription: "the document has no field '\(key.stringValue)'"))
            }
            return r
        }

        private func node(_ key: Key) -> PathNode { PathNode(decoder.path, key) }

        func decodeNil(forKey key: Key) throws -> Bool { decoder.isNull(try require(key)) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.bool(try require(key), node(key)) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.string(try require(key), node(key)) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.double(try require(key), node(key)) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decoder.double(try require(key), node(key))) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.integer(type, try require(key), node(key)) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.integer(type, try require(key), node(key)) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try decoder.decode(type, at: try require(key), path: node(key))
        }

        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.string(r, node(key))
        }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.integer(type, r, node(key))
        }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.double(r, node(key))
        }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.bool(r, node(key))
        }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.decode(type, at: r, path: node(key))
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                                   forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try DocumentValueDecoder(reader: decoder.reader, ref: try require(key), path: node(key)).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try DocumentValueDecoder(reader: decoder.reader, ref: try require(key), path: node(key)).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder {
            let key = NamedKey("super")
            guard let r = try decoder.field(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no field 'super'"))
            }
            return DocumentValueDecoder(reader: decoder.reader, ref: r, path: PathNode(decoder.path, key))
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            DocumentValueDecoder(reader: decoder.reader, ref: try require(key), path: node(key))
        }
    }

    struct UnkeyedContainer: UnkeyedDecodingContainer {
        let decoder: DocumentValueDecoder
        var offset: Int
        let total: Int
        var currentIndex = 0

        init(decoder: DocumentValueDecoder, offset: Int, count: Int) {
            self.decoder = decoder
            self.offset = offset
            self.total = count
        }

        var codingPath: [any CodingKey] { decoder.codingPath }
        var count: Int? { total }
        var isAtEnd: Bool { currentIndex >= total || offset >= decoder.ref.end }

        private mutating func next(_ type: Any.Type) throws -> (ValueRef, PathNode) {
            let key = IndexKey(currentIndex)
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [key],
                    debugDescription: "the array has only \(total) elements"))
            }
            let r = try decoder.reader.value(at: offset)
            guard r.end <= decoder.ref.end else {
                throw MalformedDocument(offset: offset, reason: "element runs past its array")
            }
            offset = r.end
            currentIndex += 1
            return (r, PathNode(decoder.path, key))
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else { return false }
            let r = try decoder.reader.value(at: offset)
            if decoder.isNull(r) { offset = r.end; currentIndex += 1; return true }
            return false
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { let (r, p) = try next(type); return try decoder.bool(r, p) }
        mutating func decode(_ type: String.Type) throws -> String { let (r, p) = try next(type); return try decoder.string(r, p) }
        mutating func decode(_ type: Double.Type) throws -> Double { let (r, p) = try next(type); return try decoder.double(r, p) }
        mutating func decode(_ type: Float.Type) throws -> Float { let (r, p) = try next(type); return Float(try decoder.double(r, p)) }
        mutating func decode(_ type: Int.Type) throws -> Int { let (r, p) = try next(type); return try decoder.integer(type, r, p) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { let (r, p) = try next(type); return try decoder.integer(type, r, p) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (r, p) = try next(type)
            return try decoder.decode(type, at: r, path: p)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let (r, p) = try next([String: Any].self)
            return try DocumentValueDecoder(reader: decoder.reader, ref: r, path: p).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let (r, p) = try next([Any].self)
            return try DocumentValueDecoder(reader: decoder.reader, ref: r, path: p).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            let (r, p) = try next(Any.self)
            return DocumentValueDecoder(reader: decoder.reader, ref: r, path: p)
        }
    }

    struct SingleValueContainer: SingleValueDecodingContainer {
        let decoder: DocumentValueDecoder
        var codingPath: [any CodingKey] { decoder.codingPath }
        private var r: ValueRef { decoder.ref }
        private var p: PathNode? { decoder.path }

        func decodeNil() -> Bool { decoder.isNull(r) }
        func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool(r, p) }
        func decode(_ type: String.Type) throws -> String { try decoder.string(r, p) }
        func decode(_ type: Double.Type) throws -> Double { try decoder.double(r, p) }
        func decode(_ type: Float.Type) throws -> Float { Float(try decoder.double(r, p)) }
        func decode(_ type: Int.Type) throws -> Int { try decoder.integer(type, r, p) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(type, r, p) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(type, r, p) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(type, r, p) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(type, r, p) }
        func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(type, r, p) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(type, r, p) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(type, r, p) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(type, r, p) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(type, r, p) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(type, at: r, path: p) }
    }
}
