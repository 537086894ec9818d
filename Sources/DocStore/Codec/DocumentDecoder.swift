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
    ///   ``DocStoreError`` with code ``DocStoreError/Code/corruptDocument`` when the bytes are not a document
    ///   (anywhere in it, however deep).
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, from: $0) }
    }

    public func decode<T: Decodable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer) throws -> T {
        try decode(type, from: buffer, shapes: nil)
    }

    /// Decodes a document of any format, one of format 3 with `shapes` besides those of ``ShapeTable``.
    func decode<T: Decodable>(_ type: T.Type, from buffer: UnsafeRawBufferPointer, shapes: ShapeSet?) throws -> T {
        let reader = BinaryReader(buffer, shapes: shapes)
        do {
            let root = try reader.root()
            return try DocumentValueDecoder(reader: reader, ref: root, parent: nil, key: nil).decodeValue(type)
        } catch let error as MalformedDocument {
            throw DocStoreError(.corruptDocument, "\(error)", underlying: error)
        }
    }
}

/// The generic metatype the coders' fast paths compare against, made once: a non-generic type's metatype
/// (`String.self`) costs nothing to name, but `[String].self` is a run-time look-up.
enum KnownTypes {
    static let stringArray = ObjectIdentifier([String].self)
}

/// The `Decoder` for one value of a document.
///
/// Decoders of nested values point to their parent and hold their key, so the coding path is built only when an
/// error needs it: decoding a field allocates nothing unless the field is itself a keyed or unkeyed value.
final class DocumentValueDecoder: Decoder {
    let reader: BinaryReader
    let ref: ValueRef
    let parent: DocumentValueDecoder?
    let key: (any CodingKey)?
    /// Where the next field of this object is expected: just after the last one found.
    /// (Not checked for exclusivity at run time: a decoder is used by one synchronous decode, and no two accesses
    /// overlap.)
    @exclusivity(unchecked) var hint: Int = 0
    /// The layout of a shaped object (the root of a document of format 3), found once for all its fields; `hint`
    /// is then the position of the field expected next.
    @exclusivity(unchecked) var shaped: BinaryReader.Shaped?

    /// How many values this one is nested in.
    let depth: Int

    init(reader: BinaryReader, ref: ValueRef, parent: DocumentValueDecoder?, key: (any CodingKey)?) {
        self.reader = reader
        self.ref = ref
        self.parent = parent
        self.key = key
        self.depth = (parent?.depth ?? -1) + 1
    }

    /// Refuses to go deeper than the format allows: a recursive type fed a hostile document would exhaust the stack.
    @inline(__always)
    func checkDepth() throws {
        if depth > BinaryFormat.maximumDepth {
            throw MalformedDocument(offset: ref.start - 1, reason: "nested deeper than \(BinaryFormat.maximumDepth) levels")
        }
    }

    var codingPath: [any CodingKey] {
        var keys: [any CodingKey] = []
        var node: DocumentValueDecoder? = self
        while let current = node {
            if let key = current.key { keys.append(key) }
            node = current.parent
        }
        return keys.reversed()
    }

    func path(_ key: (any CodingKey)?) -> [any CodingKey] {
        guard let key else { return codingPath }
        return codingPath + [key]
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try checkDepth()
        guard reader.isObject(ref) else { throw mismatch([String: Any].self, ref, nil) }
        if ref.tag == BinaryFormat.Tag.shaped {
            shaped = try reader.shaped(ref)
            hint = 0
        } else {
            hint = reader.contentStart(ref)
        }
        return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try checkDepth()
        guard ref.tag == BinaryFormat.Tag.array else { throw mismatch([Any].self, ref, nil) }
        let container = UnkeyedContainer(decoder: self, offset: reader.contentStart(ref), count: reader.count(ref))
        try container.checkEnd()
        return container
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        try checkDepth()
        return SingleValueContainer(decoder: self)
    }

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
        case BinaryFormat.Tag.object, BinaryFormat.Tag.shaped: return "an object"
        default: return "an unknown value"
        }
    }

    /// A type mismatch at the field `key` of this value (or this value itself when `key` is nil).
    func mismatch(_ type: Any.Type, _ r: ValueRef, _ key: (any CodingKey)?) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: path(key),
            debugDescription: "expected \(type), found \(DocumentValueDecoder.kindName(r.tag))"))
    }

    @inline(__always)
    func bool(_ r: ValueRef, _ key: @autoclosure () -> (any CodingKey)?) throws -> Bool {
        switch r.tag {
        case BinaryFormat.Tag.true: return true
        case BinaryFormat.Tag.false: return false
        default: throw mismatch(Bool.self, r, key())
        }
    }

    @inline(__always)
    func integer<I: FixedWidthInteger>(_ type: I.Type, _ r: ValueRef, _ key: @autoclosure () -> (any CodingKey)?) throws -> I {
        if let i = reader.integer(r) {
            if let v = I(exactly: i) { return v }
        } else if let u = reader.unsigned(r) {
            if let v = I(exactly: u) { return v }
        } else if let d = reader.double(r) {
            if let v = I(exactly: d) { return v }
        } else {
            throw mismatch(type, r, key())
        }
        throw DecodingError.dataCorrupted(.init(codingPath: path(key()), debugDescription: "number does not fit in \(type)"))
    }

    @inline(__always)
    func double(_ r: ValueRef, _ key: @autoclosure () -> (any CodingKey)?) throws -> Double {
        if let d = reader.double(r) { return d }
        if let i = reader.integer(r) { return Double(i) }
        if let u = reader.unsigned(r) { return Double(u) }
        throw mismatch(Double.self, r, key())
    }

    @inline(__always)
    func string(_ r: ValueRef, _ key: @autoclosure () -> (any CodingKey)?) throws -> String {
        guard r.tag == BinaryFormat.Tag.string else { throw mismatch(String.self, r, key()) }
        return try reader.string(r)
    }

    @inline(__always)
    func isNull(_ r: ValueRef) -> Bool { r.tag == BinaryFormat.Tag.null }

    /// Decodes any value at `r` (the field `key` of this value): scalars and common arrays directly, other types
    /// through their `init(from:)` with a child decoder.
    func decode<T: Decodable>(_ type: T.Type, at r: ValueRef, key: @autoclosure () -> (any CodingKey)?) throws -> T {
        if T.self == String.self { return unsafeBitCast(try string(r, key()), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try integer(Int.self, r, key()), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try double(r, key()), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try bool(r, key()), to: T.self) }
        if T.self == Date.self {
            if let interval = reader.dateInterval(r) {
                return unsafeBitCast(Date(timeIntervalSinceReferenceDate: interval), to: T.self)
            }
            if r.tag != BinaryFormat.Tag.string {
                return unsafeBitCast(Date(timeIntervalSinceReferenceDate: try double(r, key())), to: T.self)
            }
            throw mismatch(Date.self, r, key())
        }
        if T.self == UUID.self {
            if r.tag == BinaryFormat.Tag.uuid { return unsafeBitCast(reader.uuid(r), to: T.self) }
            if r.tag == BinaryFormat.Tag.string, let u = UUID(uuidString: try reader.string(r)) {
                return unsafeBitCast(u, to: T.self)
            }
            throw mismatch(UUID.self, r, key())
        }
        if ObjectIdentifier(T.self) == KnownTypes.stringArray {
            guard r.tag == BinaryFormat.Tag.array else { throw mismatch(T.self, r, key()) }
            var out: [String] = []
            out.reserveCapacity(min(reader.count(r), 4096))
            var offset = reader.contentStart(r)
            while offset < r.end {
                let element = try reader.value(at: offset, within: r.end)
                guard element.tag == BinaryFormat.Tag.string else {
                    return try T(from: DocumentValueDecoder(reader: reader, ref: r, parent: self, key: key()))
                }
                out.append(try reader.string(element))
                offset = element.end
            }
            try reader.checkCount(r, out.count)
            return unsafeBitCast(out, to: T.self)
        }
        if T.self == Data.self {
            guard r.tag == BinaryFormat.Tag.bytes else { throw mismatch(Data.self, r, key()) }
            return unsafeBitCast(Data(try reader.payloadBytes(r)), to: T.self)
        }
        if T.self == URL.self {
            guard let url = URL(string: try string(r, key())) else {
                throw DecodingError.dataCorrupted(.init(codingPath: path(key()), debugDescription: "invalid URL"))
            }
            return unsafeBitCast(url, to: T.self)
        }
        return try T(from: DocumentValueDecoder(reader: reader, ref: r, parent: self, key: key()))
    }

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        try decode(type, at: ref, key: nil)
    }

    /// Finds field `name`, trying the expected position first.
    @inline(__always)
    func field(_ key: some CodingKey) throws -> ValueRef? {
        let name = key.stringValue
        if let found = try name.utf8.withContiguousStorageIfAvailable({ try field(UnsafeRawBufferPointer($0)) }) {
            return found
        }
        return try Array(name.utf8).withUnsafeBytes { try field($0) }
    }

    /// Walks the fields from the one expected next (at `hint`) to the end, then from the first up to `hint`; in
    /// a shaped object, finds the field's position in the shape.
    private func field(_ name: UnsafeRawBufferPointer) throws -> ValueRef? {
        if let shaped {
            let expected = hint
            let i = shaped.shape._withUnsafeGuaranteedRef { shape -> Int? in
                if expected < shaped.count, shape.name(expected).sameBytes(as: name) { return expected }
                return shape.index(of: name)
            }
            guard let i else { return nil }
            hint = i + 1
            return try reader.field(i, of: shaped)
        }
        let start = reader.contentStart(ref)
        let hint = self.hint
        var offset = hint
        var wrapped = false
        while true {
            if offset >= ref.end {
                if wrapped || hint == start { return nil }
                wrapped = true
                offset = start
            }
            if wrapped && offset >= hint { return nil }
            let field = try reader.field(at: offset, within: ref.end)
            if reader.field(field, isNamed: name) {
                self.hint = field.value.end
                return field.value
            }
            offset = field.value.end
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

        @inline(__always)
        private func require(_ key: Key) throws -> ValueRef {
            guard let r = try decoder.field(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: decoder.codingPath,
                    debugDescription: "the document has no field '\(key.stringValue)'"))
            }
            return r
        }

        func decodeNil(forKey key: Key) throws -> Bool { decoder.isNull(try require(key)) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.bool(try require(key), key) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.string(try require(key), key) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.double(try require(key), key) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decoder.double(try require(key), key)) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.integer(type, try require(key), key) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.integer(type, try require(key), key) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.integer(type, try require(key), key) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.integer(type, try require(key), key) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.integer(type, try require(key), key) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.integer(type, try require(key), key) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.integer(type, try require(key), key) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.integer(type, try require(key), key) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.integer(type, try require(key), key) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.integer(type, try require(key), key) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try decoder.decode(type, at: try require(key), key: key)
        }

        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.string(r, key)
        }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.integer(type, r, key)
        }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.double(r, key)
        }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.bool(r, key)
        }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            guard let r = try decoder.field(key), !decoder.isNull(r) else { return nil }
            return try decoder.decode(type, at: r, key: key)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                                   forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try DocumentValueDecoder(reader: decoder.reader, ref: try require(key), parent: decoder, key: key)
                .container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try DocumentValueDecoder(reader: decoder.reader, ref: try require(key), parent: decoder, key: key)
                .unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder {
            let key = NamedKey("super")
            guard let r = try decoder.field(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no field 'super'"))
            }
            return DocumentValueDecoder(reader: decoder.reader, ref: r, parent: decoder, key: key)
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            DocumentValueDecoder(reader: decoder.reader, ref: try require(key), parent: decoder, key: key)
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
        var isAtEnd: Bool { currentIndex >= total }

        /// Moves past element `r`.
        private mutating func step(past r: ValueRef) throws {
            offset = r.end
            currentIndex += 1
            try checkEnd()
        }

        /// After the last element, the array's bytes must end: its count is the number of its elements, as the
        /// other walks require.
        func checkEnd() throws {
            if isAtEnd && offset != decoder.ref.end {
                throw MalformedDocument(offset: offset, reason: "bytes after the \(total) elements of an array")
            }
        }

        private mutating func next(_ type: Any.Type) throws -> (ValueRef, IndexKey) {
            let key = IndexKey(currentIndex)
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [key],
                    debugDescription: "the array has only \(total) elements"))
            }
            let r = try decoder.reader.value(at: offset, within: decoder.ref.end)
            try step(past: r)
            return (r, key)
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else { return false }
            let r = try decoder.reader.value(at: offset, within: decoder.ref.end)
            guard decoder.isNull(r) else { return false }
            try step(past: r)
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { let (r, k) = try next(type); return try decoder.bool(r, k) }
        mutating func decode(_ type: String.Type) throws -> String { let (r, k) = try next(type); return try decoder.string(r, k) }
        mutating func decode(_ type: Double.Type) throws -> Double { let (r, k) = try next(type); return try decoder.double(r, k) }
        mutating func decode(_ type: Float.Type) throws -> Float { let (r, k) = try next(type); return Float(try decoder.double(r, k)) }
        mutating func decode(_ type: Int.Type) throws -> Int { let (r, k) = try next(type); return try decoder.integer(type, r, k) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { let (r, k) = try next(type); return try decoder.integer(type, r, k) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (r, k) = try next(type)
            return try decoder.decode(type, at: r, key: k)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let (r, k) = try next([String: Any].self)
            return try DocumentValueDecoder(reader: decoder.reader, ref: r, parent: decoder, key: k).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let (r, k) = try next([Any].self)
            return try DocumentValueDecoder(reader: decoder.reader, ref: r, parent: decoder, key: k).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            let (r, k) = try next(Any.self)
            return DocumentValueDecoder(reader: decoder.reader, ref: r, parent: decoder, key: k)
        }
    }

    struct SingleValueContainer: SingleValueDecodingContainer {
        let decoder: DocumentValueDecoder
        var codingPath: [any CodingKey] { decoder.codingPath }
        private var r: ValueRef { decoder.ref }

        func decodeNil() -> Bool { decoder.isNull(r) }
        func decode(_ type: Bool.Type) throws -> Bool { try decoder.bool(r, nil) }
        func decode(_ type: String.Type) throws -> String { try decoder.string(r, nil) }
        func decode(_ type: Double.Type) throws -> Double { try decoder.double(r, nil) }
        func decode(_ type: Float.Type) throws -> Float { Float(try decoder.double(r, nil)) }
        func decode(_ type: Int.Type) throws -> Int { try decoder.integer(type, r, nil) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decoder.integer(type, r, nil) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decoder.integer(type, r, nil) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decoder.integer(type, r, nil) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decoder.integer(type, r, nil) }
        func decode(_ type: UInt.Type) throws -> UInt { try decoder.integer(type, r, nil) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.integer(type, r, nil) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.integer(type, r, nil) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.integer(type, r, nil) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.integer(type, r, nil) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(type, at: r, key: nil) }
    }
}
