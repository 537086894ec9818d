import Foundation

/// A value inside an encoded buffer: its tag and where its payload starts and ends.
///
/// Only ``BinaryReader/value(at:within:)`` makes one, so a `ValueRef` always lies inside its reader's buffer, its
/// payload is as long as its tag says, and a container's count fits in its bytes: the readers of scalars and
/// headers below rely on that and check nothing more.
struct ValueRef {
    let tag: UInt8
    /// Offset of the payload (just after the tag).
    let start: Int
    /// Offset just past the value.
    let end: Int

    fileprivate init(tag: UInt8, start: Int, end: Int) {
        self.tag = tag
        self.start = start
        self.end = end
    }
}

/// A field of an object: where its name's bytes lie, and its value.
struct FieldRef {
    let nameStart: Int
    let nameCount: Int
    let value: ValueRef
}

/// Reads values in the binary format from borrowed bytes. A corrupt buffer gives ``MalformedDocument``, never a
/// crash and never a read outside the buffer.
///
/// Every walk over encoded values (the decoders, ``DocumentValue``, index keys, the scan's field look-ups) steps
/// from one value to the next with ``value(at:within:)``, the only code that works out where a value ends, and
/// with ``field(at:within:)``, which adds a field's name in front of it. Both are told the end of the bytes that
/// enclose the value, and refuse anything that runs past it: the checks are plain code, not assertions, so an
/// optimized build keeps them.
struct BinaryReader {
    let buffer: UnsafeRawBufferPointer
    /// Shapes to read a document of format 3 with, besides those of ``ShapeTable``; unretained, so that a reader
    /// stays a plain value that copies without reference counting (a scan copies one per document): the caller
    /// keeps the set alive while it reads.
    private let shapes: Unmanaged<ShapeSet>?

    init(_ buffer: UnsafeRawBufferPointer, shapes: ShapeSet? = nil) {
        self.buffer = buffer
        self.shapes = shapes.map(Unmanaged.passUnretained)
    }

    /// The document's root value, after checking the version byte (not the checksum: ``checkChecksum()``). The
    /// root of a document of format 3 is an object of tag ``BinaryFormat/Tag/shaped``, its shape and offsets checked.
    func root() throws -> ValueRef { try rootAndShape().root }

    /// The root, and its layout when the document is of format 3 (``shaped(_:)``, which a look-up of one of its
    /// fields starts from).
    @inline(__always)
    func rootAndShape() throws -> (root: ValueRef, shaped: Shaped?) {
        let end = try valueEnd()
        if buffer[0] == BinaryFormat.shapedVersion {
            guard end >= BinaryFormat.shapedHeaderSize else {
                throw MalformedDocument(offset: 0, reason: "too short to be a document")
            }
            let ref = ValueRef(tag: BinaryFormat.Tag.shaped, start: 1, end: end)
            return (ref, try shaped(ref))
        }
        let ref = try value(at: 1, within: end)
        guard ref.end == end else {
            throw MalformedDocument(offset: ref.end, reason: "\(end - ref.end) bytes after the document")
        }
        return (ref, nil)
    }

    /// Where the document's value must end: before its checksum, or at the end of a document without one.
    private func valueEnd() throws -> Int {
        guard buffer.count >= 2 else { throw MalformedDocument(offset: 0, reason: "too short to be a document") }
        switch buffer[0] {
        case BinaryFormat.version, BinaryFormat.shapedVersion:
            guard buffer.count >= 2 + BinaryFormat.checksumSize else {
                throw MalformedDocument(offset: 0, reason: "too short to be a document")
            }
            return buffer.count - BinaryFormat.checksumSize
        case BinaryFormat.uncheckedVersion: return buffer.count
        case let version: throw MalformedDocument(offset: 0, reason: "unknown format version \(version)")
        }
    }

    /// Checks that the document's bytes are those its checksum was computed from; a document of the version
    /// without a checksum passes. Returns whether there was a checksum.
    ///
    /// - Throws: ``MalformedDocument`` when they are not: the document changed after it was written.
    @discardableResult
    func checkChecksum() throws -> Bool {
        let end = try valueEnd()
        guard end < buffer.count else { return false }
        let stored = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: end, as: UInt32.self))
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[..<end]))
        guard stored == computed else {
            throw MalformedDocument(offset: end, reason: "its checksum is \(hex(stored)) but its bytes give "
                + "\(hex(computed)): they changed after it was written")
        }
        return true
    }

    private func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    // MARK: Stepping over values

    /// The value whose tag is at `offset`, which must end by `limit`: the end of what encloses it (its array or
    /// object, or the document).
    ///
    /// Its size comes from its tag: fixed for scalars, a varint byte count for strings and bytes, the header's
    /// byte length for arrays and objects, whose count must also fit in those bytes (an element takes at least a
    /// byte, a field two), so that nothing sized by a count can be larger than the document.
    ///
    /// - Throws: ``MalformedDocument`` at `offset` (at a string's length, when that is what runs past) when
    ///   nothing lies there before `limit`, the tag is unknown, the value runs past `limit`, or a container's count
    ///   cannot fit; also when `limit` lies past the end of the buffer.
    @inline(__always)
    func value(at offset: Int, within limit: Int) throws -> ValueRef {
        guard offset >= 0, offset < limit, limit <= buffer.count, let base = buffer.baseAddress else {
            throw BinaryReader.nothing(at: offset, within: limit, buffer.count)
        }
        let tag = base.load(fromByteOffset: offset, as: UInt8.self)
        let p = offset + 1
        let end: Int
        switch tag {
        case BinaryFormat.Tag.null, BinaryFormat.Tag.false, BinaryFormat.Tag.true: end = p
        case BinaryFormat.Tag.int8: end = p + 1
        case BinaryFormat.Tag.int16: end = p + 2
        case BinaryFormat.Tag.int32: end = p + 4
        case BinaryFormat.Tag.int64, BinaryFormat.Tag.uint64, BinaryFormat.Tag.double, BinaryFormat.Tag.date: end = p + 8
        case BinaryFormat.Tag.uuid: end = p + 16
        case BinaryFormat.Tag.string, BinaryFormat.Tag.bytes:
            let (n, s) = try length(at: p, within: limit)
            end = s + n
        case BinaryFormat.Tag.array, BinaryFormat.Tag.object:
            guard limit - p >= BinaryFormat.containerHeaderSize else { throw BinaryReader.runsPast(at: offset, limit) }
            let length = Int(base.loadUnaligned(fromByteOffset: p, as: UInt32.self).littleEndian)
            let count = Int(base.loadUnaligned(fromByteOffset: p + 4, as: UInt32.self).littleEndian)
            end = p + BinaryFormat.containerHeaderSize + length
            guard count <= (tag == BinaryFormat.Tag.array ? length : length / 2) else {
                throw BinaryReader.countCannotFit(at: offset, count: count, length: length)
            }
        default:
            throw BinaryReader.unknownTag(tag, at: offset)
        }
        guard end <= limit else { throw BinaryReader.runsPast(at: offset, limit) }
        return ValueRef(tag: tag, start: p, end: end)
    }

    /// The field of an object at `offset` (a varint name length, the name, a value), which must end by `limit`,
    /// the object's end.
    ///
    /// - Throws: ``MalformedDocument`` as ``value(at:within:)`` does (a name that runs past `limit` leaves no room
    ///   for the value).
    @inline(__always)
    func field(at offset: Int, within limit: Int) throws -> FieldRef {
        let (n, s) = try length(at: offset, within: limit)
        return FieldRef(nameStart: s, nameCount: n, value: try value(at: s + n, within: limit))
    }

    /// A varint length at `offset`, read no further than `limit`: the length, and the offset just past it. The
    /// bytes it counts are not checked here.
    @inline(__always)
    func length(at offset: Int, within limit: Int) throws -> (value: Int, end: Int) {
        guard offset >= 0, offset < limit, limit <= buffer.count, let base = buffer.baseAddress else {
            throw BinaryReader.nothing(at: offset, within: limit, buffer.count)
        }
        let first = base.load(fromByteOffset: offset, as: UInt8.self)
        if first < 0x80 { return (Int(first), offset + 1) }
        return try longLength(at: offset, within: limit)
    }

    /// A varint of more than one byte (a length of 128 or more); `offset` and `limit` are checked already.
    @inline(never)
    private func longLength(at offset: Int, within limit: Int) throws -> (value: Int, end: Int) {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var i = offset
        while true {
            guard i < limit else { throw BinaryReader.runsPast(at: offset, limit) }
            let b = buffer[i]
            i += 1
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { break }
            shift += 7
            if shift > 56 { throw MalformedDocument(offset: offset, reason: "length too long") }
        }
        guard result <= UInt64(Int32.max) else { throw MalformedDocument(offset: offset, reason: "length \(result) too large") }
        return (Int(result), i)
    }

    // The errors, made out of line: the checks above stay small enough to inline into every walk.

    @inline(never)
    private static func nothing(at offset: Int, within limit: Int, _ count: Int) -> MalformedDocument {
        guard limit <= count else {
            return MalformedDocument(offset: offset, reason: "bound \(limit) lies past the end (\(count) bytes)")
        }
        return MalformedDocument(offset: offset, reason: "nothing here before the end of what encloses it (byte \(limit))")
    }

    @inline(never)
    private static func runsPast(at offset: Int, _ limit: Int) -> MalformedDocument {
        MalformedDocument(offset: offset, reason: "runs past the end of what encloses it (byte \(limit))")
    }

    @inline(never)
    private static func unknownTag(_ tag: UInt8, at offset: Int) -> MalformedDocument {
        MalformedDocument(offset: offset, reason: "unknown value tag 0x\(String(tag, radix: 16))")
    }

    @inline(never)
    private static func countCannotFit(at offset: Int, count: Int, length: Int) -> MalformedDocument {
        MalformedDocument(offset: offset, reason: "a count of \(count) cannot fit in \(length) bytes")
    }

    // MARK: Scalars

    @inline(__always) func load<I: FixedWidthInteger>(_ type: I.Type, at offset: Int) -> I {
        I(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: I.self))
    }

    /// The integer in `ref`, or `nil` when it holds another kind of value.
    func integer(_ ref: ValueRef) -> Int64? {
        switch ref.tag {
        case BinaryFormat.Tag.int8: return Int64(Int8(bitPattern: buffer[ref.start]))
        case BinaryFormat.Tag.int16: return Int64(load(Int16.self, at: ref.start))
        case BinaryFormat.Tag.int32: return Int64(load(Int32.self, at: ref.start))
        case BinaryFormat.Tag.int64: return load(Int64.self, at: ref.start)
        default: return nil
        }
    }

    func unsigned(_ ref: ValueRef) -> UInt64? {
        ref.tag == BinaryFormat.Tag.uint64 ? load(UInt64.self, at: ref.start) : nil
    }

    func double(_ ref: ValueRef) -> Double? {
        ref.tag == BinaryFormat.Tag.double ? Double(bitPattern: load(UInt64.self, at: ref.start)) : nil
    }

    /// A number as a `Double` when that is exact and not NaN (a double, or an integer within ±2^53): two such
    /// values compare as doubles in the order their keys have.
    @inline(__always)
    func exactDouble(_ ref: ValueRef) -> Double? {
        if let d = double(ref) { return d.isNaN ? nil : d }
        if let i = integer(ref), i >= -(1 << 53), i <= (1 << 53) { return Double(i) }
        return nil
    }

    func dateInterval(_ ref: ValueRef) -> Double? {
        ref.tag == BinaryFormat.Tag.date ? Double(bitPattern: load(UInt64.self, at: ref.start)) : nil
    }

    /// The bytes of a string or bytes value.
    func payloadBytes(_ ref: ValueRef) throws -> UnsafeRawBufferPointer {
        let s = try length(at: ref.start, within: ref.end).end
        return UnsafeRawBufferPointer(rebasing: buffer[s..<ref.end])
    }

    func string(_ ref: ValueRef) throws -> String {
        let bytes = try payloadBytes(ref)
        return String(decoding: bytes, as: UTF8.self)
    }

    func uuid(_ ref: ValueRef) -> UUID {
        var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &u) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[ref.start..<(ref.start + 16)])) }
        return UUID(uuid: u)
    }

    // MARK: Containers

    /// Whether `ref` is an object, its field names in the document or in its shape.
    @inline(__always)
    func isObject(_ ref: ValueRef) -> Bool { ref.tag == BinaryFormat.Tag.object || ref.tag == BinaryFormat.Tag.shaped }

    /// The number of elements or fields of an array or object (of a shaped object, its shape's: see
    /// ``shaped(_:)``, which ``root()`` checked).
    func count(_ ref: ValueRef) -> Int {
        if ref.tag == BinaryFormat.Tag.shaped { return (try? shaped(ref).count) ?? 0 }
        return Int(load(UInt32.self, at: ref.start + 4))
    }

    // MARK: Shaped objects

    /// Where the parts of a document of format 3 lie.
    struct Shaped {
        /// Unretained (a shape lives as long as the table or set that holds it, which outlives every read), and
        /// used without retaining it: a scan's threads would each retain and release it per document.
        let shape: Unmanaged<DocumentShape>
        /// The number of fields, the shape's.
        let count: Int
        /// The width of an offset, and where the offsets begin.
        let width: Int
        let offsets: Int
        /// Where the values begin and end.
        let values: Int
        let end: Int
    }

    /// The shape and layout of the root `ref` of a document of format 3.
    ///
    /// - Throws: ``MalformedDocument`` when the reader has no shapes, its shapes lack the document's, the width
    ///   is not 1, 2 or 4, or the offsets run past the values' end.
    @inline(__always)
    func shaped(_ ref: ValueRef) throws -> Shaped {
        let id = load(UInt64.self, at: ref.start)
        guard let shape = shapes?._withUnsafeGuaranteedRef({ $0.shape(id) }).map(Unmanaged.passUnretained)
                ?? ShapeTable.shape(id) else {
            throw unknownShape(id)
        }
        let names = shape._withUnsafeGuaranteedRef { $0.count }
        let width = Int(buffer[ref.start + 8])
        guard width == 1 || width == 2 || width == 4 else {
            throw MalformedDocument(offset: ref.start + 8, reason: "offsets of \(width) bytes (1, 2 or 4 expected)")
        }
        let (count, offsets) = try length(at: ref.start + 9, within: ref.end)
        guard count == names else {
            throw MalformedDocument(offset: ref.start + 9, reason: "holds \(count) values but its shape names \(names)")
        }
        let values = offsets + width * max(0, count - 1)
        guard values <= ref.end else { throw BinaryReader.runsPast(at: offsets, ref.end) }
        // (With fields, the last one's value must end where the values end; with none, nothing may follow.)
        guard count > 0 || values == ref.end else {
            throw MalformedDocument(offset: values, reason: "\(ref.end - values) bytes after the document")
        }
        return Shaped(shape: shape, count: count, width: width, offsets: offsets, values: values, end: ref.end)
    }

    @inline(never)
    private func unknownShape(_ id: UInt64) -> MalformedDocument {
        MalformedDocument(offset: 1, reason: "its shape (\(String(id, radix: 16))) is not one its store records")
    }

    /// The value of field `i` (below the shape's count) of a shaped object: from its offset to the next one's (or
    /// the end), which it must fill.
    @inline(__always)
    func field(_ i: Int, of object: Shaped) throws -> ValueRef {
        let start = i == 0 ? object.values : object.values + offset(i - 1, of: object)
        let limit = i + 1 < object.count ? object.values + offset(i, of: object) : object.end
        guard limit <= object.end else { throw BinaryReader.runsPast(at: object.offsets + i * object.width, object.end) }
        let value = try value(at: start, within: limit)
        guard value.end == limit else {
            throw MalformedDocument(offset: value.end, reason: "\(limit - value.end) bytes between a value and the next")
        }
        return value
    }

    /// Where field `k + 1` of a shaped object begins, counted from its first value.
    @inline(__always)
    func offset(_ k: Int, of object: Shaped) -> Int {
        let at = object.offsets + k * object.width
        switch object.width {
        case 1: return Int(buffer[at])
        case 2: return Int(load(UInt16.self, at: at))
        default: return Int(load(UInt32.self, at: at))
        }
    }

    /// Offset of the first element or field of a container.
    func contentStart(_ ref: ValueRef) -> Int { ref.start + BinaryFormat.containerHeaderSize }

    /// Calls `body` with each element of an array.
    ///
    /// - Throws: ``MalformedDocument`` when an element is, or when the array holds another number of elements
    ///   than its count.
    func forEachElement(_ array: ValueRef, _ body: (ValueRef) throws -> Void) throws {
        var offset = contentStart(array)
        var seen = 0
        while offset < array.end {
            let element = try value(at: offset, within: array.end)
            try body(element)
            offset = element.end
            seen += 1
        }
        try checkCount(array, seen)
    }

    /// Calls `body` with each field of an object: the name's bytes and the value.
    ///
    /// - Throws: ``MalformedDocument`` when a field is, or when the object holds another number of fields than
    ///   its count.
    func forEachField(_ object: ValueRef, _ body: (UnsafeRawBufferPointer, ValueRef) throws -> Void) throws {
        if object.tag == BinaryFormat.Tag.shaped {
            let shaped = try shaped(object)
            try shaped.shape._withUnsafeGuaranteedRef { shape in
                for i in 0..<shaped.count { try body(shape.name(i), try field(i, of: shaped)) }
            }
            return
        }
        var offset = contentStart(object)
        var seen = 0
        while offset < object.end {
            let field = try field(at: offset, within: object.end)
            try body(UnsafeRawBufferPointer(rebasing: buffer[field.nameStart..<(field.nameStart + field.nameCount)]), field.value)
            offset = field.value.end
            seen += 1
        }
        try checkCount(object, seen)
    }

    /// Refuses a container whose values, walked to its end, are not as many as its header says.
    func checkCount(_ container: ValueRef, _ seen: Int) throws {
        let count = count(container)
        guard seen == count else {
            throw MalformedDocument(offset: container.start - 1, reason: "holds \(seen) values but says \(count)")
        }
    }

    /// The value of field `name` in `object`, or `nil` when there is none (or `object` is not an object).
    ///
    /// Each field is stepped over by ``field(at:within:)``, and names are compared only when their lengths agree:
    /// the look-up a scan over many documents makes per field of its condition.
    @inline(__always)
    func field(_ object: ValueRef, named name: UnsafeRawBufferPointer) throws -> ValueRef? {
        guard object.tag == BinaryFormat.Tag.object else {
            guard object.tag == BinaryFormat.Tag.shaped else { return nil }
            let shaped = try shaped(object)
            return try shaped.shape._withUnsafeGuaranteedRef { $0.index(of: name) }.map { try field($0, of: shaped) }
        }
        let end = object.end
        var offset = contentStart(object)
        while offset < end {
            let field = try field(at: offset, within: end)
            if self.field(field, isNamed: name) { return field.value }
            offset = field.value.end
        }
        return nil
    }

    /// Whether `field`'s name is the bytes of `name`.
    @inline(__always)
    func field(_ field: FieldRef, isNamed name: UnsafeRawBufferPointer) -> Bool {
        guard field.nameCount == name.count else { return false }
        guard name.count > 0, let a = buffer.baseAddress else { return true }
        return BinaryReader.isName(name, at: a + field.nameStart)
    }

    /// Whether the `name.count` bytes at `bytes` are `name`'s. Names are short: a loop beats calling `memcmp`.
    @inline(__always)
    static func isName(_ name: UnsafeRawBufferPointer, at bytes: UnsafeRawPointer) -> Bool {
        let count = name.count
        guard count > 0, let b = name.baseAddress else { return true }
        guard count <= 16 else { return memcmp(bytes, b, count) == 0 }
        var i = 0
        while i < count {
            if bytes.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
            i += 1
        }
        return true
    }

    /// The value at a dotted path (`["address", "city"]`) from `ref`, or `nil` when any step is missing or not an object.
    func value(atPath path: FieldPath, from ref: ValueRef) throws -> ValueRef? {
        var current = ref
        for component in path.utf8Components {
            let found = try component.withUnsafeBytes { try field(current, named: $0) }
            guard let found else { return nil }
            current = found
        }
        return current
    }
}

extension UnsafeRawBufferPointer {
    /// Whether both hold the same bytes, compared by `memcmp` (`elementsEqual` steps through them one by one).
    func sameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0, let a = baseAddress, let b = other.baseAddress else { return true }
        return memcmp(a, b, count) == 0
    }

    func sameBytes(as other: [UInt8]) -> Bool { other.withUnsafeBytes { sameBytes(as: $0) } }

    /// Whether these bytes order before `other` as LMDB orders keys: by `memcmp`, then the shorter first.
    @inline(__always)
    func precedesInKeyOrder(_ other: UnsafeRawBufferPointer) -> Bool {
        let n = Swift.min(count, other.count)
        let c = n == 0 ? 0 : memcmp(baseAddress!, other.baseAddress!, n)
        return c != 0 ? c < 0 : count < other.count
    }
}

extension Array where Element == UInt8 {
    /// Whether these bytes order before `other` as LMDB orders keys: by `memcmp`, then the shorter first (what
    /// `lexicographicallyPrecedes` answers, a byte at a time).
    @inline(__always)
    func precedesInKeyOrder(_ other: [UInt8]) -> Bool {
        withUnsafeBytes { a in other.withUnsafeBytes { a.precedesInKeyOrder($0) } }
    }
}
