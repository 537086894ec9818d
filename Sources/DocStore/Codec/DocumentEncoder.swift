import Foundation

/// Encodes `Encodable` values straight into DocStore's binary document format, with no JSON in between.
///
/// `Date` is written as a date, `UUID` as a UUID, `Data` as bytes and `URL` as its string, so a tool without the
/// Swift type still sees what each field is.
///
/// For example:
/// ```swift
/// let bytes = try DocumentEncoder().encode(person)
/// let value = try DocumentValue(encoded: bytes)   // the same document, without its type
/// ```
public struct DocumentEncoder: Sendable {
    public init() {}

    /// Encodes `value` as a document, version byte first.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try encode(value, shapedWith: nil)
    }

    /// Encodes `value` as a document; with a `salt`, a root object in format 3 (``BinaryFormat/shapedVersion``)
    /// under the shape of its names in a store of that salt: the bytes ``BinaryFormat/shaped(_:salt:shapeID:)``
    /// makes of the format-2 document, in one pass. The shape is put in ``ShapeTable`` (the document is read with
    /// it before the write records it); when the table cannot take it, the document is written in format 2.
    ///
    /// `last`, given for the documents of one batch, keeps the last document's names and what they came to, so that
    /// the next document of the same names (nearly each, in a batch of one type) takes them without a look-up.
    func encode<T: Encodable>(_ value: T, shapedWith salt: UInt64?, last: LastShape? = nil) throws -> [UInt8] {
        let state = EncodingState()
        if salt != nil {
            state.shapesRoot = true
            state.rootNames.reserveCapacity(last?.names.capacity ?? 64)
            state.rootFields.reserveCapacity(last?.ends.count ?? 8)
        }
        state.writer.byte(BinaryFormat.version)
        try state.encodeValue(value, parent: nil, key: nil)
        if let salt, state.writer.bytes.count > 1 {
            if state.writer.bytes[1] == BinaryFormat.Tag.object { return try state.rootFields(salt: salt, last: last) }
            guard state.rootFields.isEmpty else {
                throw EncodingError.invalidValue(value, .init(codingPath: [],
                    debugDescription: "a keyed container wrote names into a root that is not an object"))
            }
        }
        state.writer.seal()
        return state.writer.bytes
    }
}

/// The root names of the last document one thread encoded in a batch, and the shape they came to
/// (``DocumentEncoder/encode(_:shapedWith:last:)``).
final class LastShape {
    var salt: UInt64 = 0
    var names: [UInt8] = []
    var ends: [Int] = []
    var id: UInt64 = 0
    var held = false
}

/// A key of an object or an index in an array, for coding paths.
struct IndexKey: CodingKey {
    var stringValue: String { "\(intValue ?? 0)" }
    var intValue: Int?
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.intValue = intValue }
}

/// A coding path kept as a chain, turned into an array only when an error needs it.
final class PathNode {
    let parent: PathNode?
    let key: any CodingKey
    init(_ parent: PathNode?, _ key: any CodingKey) { self.parent = parent; self.key = key }

    static func array(_ node: PathNode?) -> [any CodingKey] {
        var keys: [any CodingKey] = []
        var n = node
        while let current = n { keys.append(current.key); n = current.parent }
        return keys.reversed()
    }
}

/// The writer and the stack of open containers shared by every encoder of one document.
///
/// The format writes each container's byte length in its header, and `Encoder` never says when a container
/// is finished, so containers are closed when a shallower container writes again, or when the value that
/// opened them has finished encoding.
final class EncodingState {
    // Exclusivity is not checked at run time here: the state belongs to one `encode` call, on one thread, and
    // no access to it overlaps another; the checks cost about a sixth of the encoding time.
    @exclusivity(unchecked) var writer = BinaryWriter()
    struct Open { var header: Int; var count: Int }
    @exclusivity(unchecked) var open: [Open] = []
    /// Whether the root object's names are kept apart from its values (``DocumentEncoder/encode(_:shapedWith:)``):
    /// the names' bytes one after the other, and per field where its name ends there and its value begins in
    /// `writer`.
    var shapesRoot = false
    @exclusivity(unchecked) var rootNames: [UInt8] = []
    @exclusivity(unchecked) var rootFields: [(nameEnd: Int, valueStart: Int)] = []

    /// Writes the name of the next field of the object open at `level`.
    @inline(__always)
    func name(_ name: String, level: Int) {
        guard shapesRoot && level == 1 else { writer.name(name); return }
        var name = name
        name.withUTF8 { rootNames.append(contentsOf: $0) }
        rootFields.append((rootNames.count, writer.bytes.count))
    }

    /// The document whose root object `writer` holds without its names: in format 3, or in format 2 when
    /// ``ShapeTable`` has other names under the shape's id or no room for it.
    func rootFields(salt: UInt64, last: LastShape?) throws -> [UInt8] {
        closeContainers(deeperThan: 0)
        let bytes = writer.bytes
        // Every value of the root object follows a name: one written through another kind of container at the
        // root (an unkeyed one asked of the same encoder) would lose its place.
        let count = bytes.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 6, as: UInt32.self))) }
        guard count == rootFields.count, (rootFields.first?.valueStart ?? bytes.count) == 2 + BinaryFormat.containerHeaderSize
        else {
            throw EncodingError.invalidValue((), .init(codingPath: [],
                debugDescription: "the root object was written through another container than its keyed one"))
        }
        let values = rootFields.indices.map { i in
            rootFields[i].valueStart..<(i + 1 < rootFields.count ? rootFields[i + 1].valueStart : bytes.count)
        }
        return rootNames.withUnsafeBytes { all in
            var start = 0
            let names = rootFields.map { field in
                defer { start = field.nameEnd }
                return UnsafeRawBufferPointer(rebasing: all[start..<field.nameEnd])
            }
            let id: UInt64, held: Bool
            if let last, last.salt == salt, last.names == rootNames, last.ends.elementsEqual(rootFields.lazy.map(\.nameEnd)) {
                (id, held) = (last.id, last.held)
            } else {
                id = DocumentShape.id(of: names, salt: salt)
                if let known = ShapeTable.shape(id) {
                    held = known._withUnsafeGuaranteedRef { $0.hasNames(names) }
                } else {
                    let strings = names.map { String(decoding: $0, as: UTF8.self) }
                    held = ShapeTable.add(id, strings, byEncoder: true)?.names == strings
                }
                if let last { (last.salt, last.names, last.ends, last.id, last.held) = (salt, rootNames, rootFields.map(\.nameEnd), id, held) }
            }
            return bytes.withUnsafeBytes { document in
                held ? BinaryFormat.shaped(id: id, values: values, of: document)
                     : BinaryFormat.named(names, values: values, of: document)
            }
        }
    }

    func closeContainers(deeperThan level: Int) {
        while open.count > level {
            let c = open.removeLast()
            writer.closeContainer(at: c.header, count: c.count)
        }
    }

    /// Called before a container at `level` (1-based) writes an element.
    func prepareWrite(level: Int, path: PathNode?) throws {
        guard level > 0, open.count >= level else {
            throw EncodingError.invalidValue((), .init(codingPath: PathNode.array(path),
                debugDescription: "DocStore writes documents in one pass: this value wrote to a container after leaving it"))
        }
        closeContainers(deeperThan: level)
        open[level - 1].count += 1
    }

    /// Refuses a container that would nest deeper than every reader reads (``BinaryFormat/maximumDepth``): a
    /// document written so would never read back, nor dump.
    func checkDepth(under path: PathNode?, _ key: (any CodingKey)?) throws {
        guard open.count + 1 >= BinaryFormat.maximumDepth else { return }
        throw EncodingError.invalidValue((), .init(codingPath: PathNode.array(key.map { PathNode(path, $0) } ?? path),
            debugDescription: "the document nests deeper than \(BinaryFormat.maximumDepth - 1) levels of objects and "
                + "arrays, more than a stored document may"))
    }

    /// Opens a container of `tag` as the field or element that `begin` starts (and names): the container's path
    /// and level, or what `begin` threw, for the container to throw on first use.
    func openNested(_ tag: UInt8, under path: PathNode?, _ begin: () throws -> any CodingKey)
        -> (path: PathNode?, level: Int, failure: (any Error)?) {
        do {
            let key = try begin()
            try checkDepth(under: path, key)
            let header = writer.openContainer(tag: tag)
            open.append(.init(header: header, count: 0))
            return (PathNode(path, key), open.count, nil)
        } catch {
            return (path, 0, error)
        }
    }

    /// Writes any encodable value at the current position: scalars and common types directly, others through
    /// their `encode(to:)`. The coding path node is made only for the latter.
    func encodeValue<T: Encodable>(_ value: T, parent: PathNode?, key: (any CodingKey)?) throws {
        if T.self == String.self { writer.string(unsafeBitCast(value, to: String.self)); return }
        if T.self == Int.self { writer.int(Int64(unsafeBitCast(value, to: Int.self))); return }
        if T.self == Double.self { writer.double(unsafeBitCast(value, to: Double.self)); return }
        if T.self == Bool.self { writer.bool(unsafeBitCast(value, to: Bool.self)); return }
        if T.self == Date.self { writer.date(unsafeBitCast(value, to: Date.self)); return }
        if T.self == UUID.self { writer.uuid(unsafeBitCast(value, to: UUID.self)); return }
        if ObjectIdentifier(T.self) == KnownTypes.stringArray {
            let strings = unsafeBitCast(value, to: [String].self)
            let header = writer.openContainer(tag: BinaryFormat.Tag.array)
            for s in strings { writer.string(s) }
            writer.closeContainer(at: header, count: strings.count)
            return
        }
        if T.self == Data.self { writer.data(unsafeBitCast(value, to: Data.self)); return }
        if T.self == URL.self { writer.string(unsafeBitCast(value, to: URL.self).absoluteString); return }
        let level = open.count
        let encoder = DocumentValueEncoder(state: self, path: key.map { PathNode(parent, $0) } ?? parent, level: level)
        try value.encode(to: encoder)
        if !encoder.wroteValue { writer.null() }
        closeContainers(deeperThan: level)
    }
}

/// The `Encoder` for one value of a document.
final class DocumentValueEncoder: Encoder {
    let state: EncodingState
    let path: PathNode?
    /// How many containers were open when this value started.
    let level: Int
    var wroteValue = false
    /// For a `superEncoder(forKey:)`, the key to write before the value, written on first use.
    var pendingKey: (container: Int, name: String)?
    /// For an array's `superEncoder()`, the array's level: the element is counted on first use, so that a super
    /// encoder never used leaves no slot the array says it holds and does not.
    var pendingElement: Int?

    init(state: EncodingState, path: PathNode?, level: Int) {
        self.state = state
        self.path = path
        self.level = level
    }

    var codingPath: [any CodingKey] { PathNode.array(path) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// Prepares to write this value, once; returns false when it was written already.
    func beginValue() throws -> Bool {
        if wroteValue { return false }
        if let level = pendingElement {
            try state.prepareWrite(level: level, path: path)
            pendingElement = nil
        }
        if let pending = pendingKey {
            try state.prepareWrite(level: pending.container, path: path)
            state.name(pending.name, level: pending.container)
            pendingKey = nil
        }
        wroteValue = true
        return true
    }

    private var ownContainer: Int?

    func openOwnContainer(tag: UInt8) throws -> Int {
        if let own = ownContainer, state.open.count >= own { return own }
        guard try beginValue() else {
            throw EncodingError.invalidValue((), .init(codingPath: codingPath,
                debugDescription: "a value was encoded twice at the same place"))
        }
        try state.checkDepth(under: nil, nil)
        let header = state.writer.openContainer(tag: tag)
        state.open.append(.init(header: header, count: 0))
        ownContainer = state.open.count
        return state.open.count
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        do {
            let level = try openOwnContainer(tag: BinaryFormat.Tag.object)
            return KeyedEncodingContainer(KeyedContainer<Key>(state: state, path: path, level: level, failure: nil))
        } catch {
            return KeyedEncodingContainer(KeyedContainer<Key>(state: state, path: path, level: 0, failure: error))
        }
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        do {
            let level = try openOwnContainer(tag: BinaryFormat.Tag.array)
            return UnkeyedContainer(state: state, path: path, level: level, failure: nil)
        } catch {
            return UnkeyedContainer(state: state, path: path, level: 0, failure: error)
        }
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleValueContainer(encoder: self) }

    // MARK: Containers

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let state: EncodingState
        let path: PathNode?
        let level: Int
        /// An error met when the container was made, thrown by its first use.
        let failure: (any Error)?

        var codingPath: [any CodingKey] { PathNode.array(path) }

        @discardableResult
        private func begin(_ key: Key) throws -> Key {
            if let failure { throw failure }
            try state.prepareWrite(level: level, path: path)
            state.name(key.stringValue, level: level)
            return key
        }

        mutating func encodeNil(forKey key: Key) throws { try begin(key); state.writer.null() }
        mutating func encode(_ value: Bool, forKey key: Key) throws { try begin(key); state.writer.bool(value) }
        mutating func encode(_ value: String, forKey key: Key) throws { try begin(key); state.writer.string(value) }
        mutating func encode(_ value: Double, forKey key: Key) throws { try begin(key); state.writer.double(value) }
        mutating func encode(_ value: Float, forKey key: Key) throws { try begin(key); state.writer.double(Double(value)) }
        mutating func encode(_ value: Int, forKey key: Key) throws { try begin(key); state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try begin(key); state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try begin(key); state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try begin(key); state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try begin(key); state.writer.int(value) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try begin(key); state.writer.uint(UInt64(value)) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try begin(key); state.writer.int(Int64(value)) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try begin(key); state.writer.int(Int64(value)) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try begin(key); state.writer.int(Int64(value)) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try begin(key); state.writer.uint(value) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try begin(key)
            try state.encodeValue(value, parent: path, key: key)
        }

        mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
            guard let value else { return }
            try encode(value, forKey: key)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                            forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let (path, level, failure) = state.openNested(BinaryFormat.Tag.object, under: path) { try begin(key) }
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(state: state, path: path, level: level,
                                                                    failure: failure))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let (path, level, failure) = state.openNested(BinaryFormat.Tag.array, under: path) { try begin(key) }
            return UnkeyedContainer(state: state, path: path, level: level, failure: failure)
        }

        mutating func superEncoder() -> any Encoder { superEncoder(named: NamedKey("super")) }

        mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key) }

        private func superEncoder(named key: any CodingKey) -> any Encoder {
            let encoder = DocumentValueEncoder(state: state, path: PathNode(path, key), level: level)
            encoder.pendingKey = (level, key.stringValue)
            return encoder
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let state: EncodingState
        let path: PathNode?
        let level: Int
        let failure: (any Error)?
        var count = 0

        var codingPath: [any CodingKey] { PathNode.array(path) }

        private mutating func begin() throws -> IndexKey {
            if let failure { throw failure }
            try state.prepareWrite(level: level, path: path)
            defer { count += 1 }
            return IndexKey(count)
        }

        mutating func encodeNil() throws { _ = try begin(); state.writer.null() }
        mutating func encode(_ value: Bool) throws { _ = try begin(); state.writer.bool(value) }
        mutating func encode(_ value: String) throws { _ = try begin(); state.writer.string(value) }
        mutating func encode(_ value: Double) throws { _ = try begin(); state.writer.double(value) }
        mutating func encode(_ value: Int) throws { _ = try begin(); state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int64) throws { _ = try begin(); state.writer.int(value) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            let k = try begin()
            try state.encodeValue(value, parent: path, key: k)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let (path, level, failure) = state.openNested(BinaryFormat.Tag.object, under: path) { try begin() }
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(state: state, path: path, level: level,
                                                                    failure: failure))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let (path, level, failure) = state.openNested(BinaryFormat.Tag.array, under: path) { try begin() }
            return UnkeyedContainer(state: state, path: path, level: level, failure: failure)
        }

        mutating func superEncoder() -> any Encoder {
            // The element is counted when the super encoder writes it (and not at all if it never does). (In a
            // container that failed to open, its level is 0, and the write throws.)
            let encoder = DocumentValueEncoder(state: state, path: PathNode(path, IndexKey(count)), level: level)
            encoder.pendingElement = level
            count += 1
            return encoder
        }
    }

    struct SingleValueContainer: SingleValueEncodingContainer {
        let encoder: DocumentValueEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }

        private func begin() throws {
            guard try encoder.beginValue() else {
                throw EncodingError.invalidValue((), .init(codingPath: codingPath,
                    debugDescription: "a single value container was written twice"))
            }
        }

        mutating func encodeNil() throws { try begin(); encoder.state.writer.null() }
        mutating func encode(_ value: Bool) throws { try begin(); encoder.state.writer.bool(value) }
        mutating func encode(_ value: String) throws { try begin(); encoder.state.writer.string(value) }
        mutating func encode(_ value: Double) throws { try begin(); encoder.state.writer.double(value) }
        mutating func encode(_ value: Float) throws { try begin(); encoder.state.writer.double(Double(value)) }
        mutating func encode(_ value: Int) throws { try begin(); encoder.state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int8) throws { try begin(); encoder.state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int16) throws { try begin(); encoder.state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int32) throws { try begin(); encoder.state.writer.int(Int64(value)) }
        mutating func encode(_ value: Int64) throws { try begin(); encoder.state.writer.int(value) }
        mutating func encode(_ value: UInt) throws { try begin(); encoder.state.writer.uint(UInt64(value)) }
        mutating func encode(_ value: UInt8) throws { try begin(); encoder.state.writer.int(Int64(value)) }
        mutating func encode(_ value: UInt16) throws { try begin(); encoder.state.writer.int(Int64(value)) }
        mutating func encode(_ value: UInt32) throws { try begin(); encoder.state.writer.int(Int64(value)) }
        mutating func encode(_ value: UInt64) throws { try begin(); encoder.state.writer.uint(value) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try begin()
            try encoder.state.encodeValue(value, parent: encoder.path, key: nil)
        }
    }
}

/// A coding key made from a name, for `superEncoder()` and for paths.
struct NamedKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}
