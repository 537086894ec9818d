import Foundation

/// DocStore's document format, version 1.
///
/// A document is a version byte followed by one value. Each value is a tag byte and a payload:
///
/// | tag | value | payload |
/// | --- | --- | --- |
/// | 0x00 | null | none |
/// | 0x01, 0x02 | false, true | none |
/// | 0x03...0x06 | signed integer | 1, 2, 4 or 8 bytes, little-endian |
/// | 0x07 | unsigned integer above `Int64.max` | 8 bytes |
/// | 0x08 | floating point | 8 bytes, IEEE 754 binary64 |
/// | 0x09 | string | varint byte count, UTF-8 |
/// | 0x0A | bytes | varint byte count, bytes |
/// | 0x0B | date | 8 bytes: seconds since 2001-01-01 as a binary64 |
/// | 0x0C | UUID | 16 bytes |
/// | 0x0D | array | UInt32 byte length, UInt32 count, values |
/// | 0x0E | object | UInt32 byte length, UInt32 count, then (varint name length, name, value) per field |
///
/// Arrays and objects carry their byte length, so a reader skips a field it does not need in O(1), and
/// finds a field by path without decoding the rest of the document.
enum BinaryFormat {
    static let version: UInt8 = 1
    /// How deep arrays and objects may nest. Deeper documents are refused as malformed rather than risk the stack.
    static let maximumDepth = 256

    enum Tag {
        static let null: UInt8 = 0x00
        static let `false`: UInt8 = 0x01
        static let `true`: UInt8 = 0x02
        static let int8: UInt8 = 0x03
        static let int16: UInt8 = 0x04
        static let int32: UInt8 = 0x05
        static let int64: UInt8 = 0x06
        static let uint64: UInt8 = 0x07
        static let double: UInt8 = 0x08
        static let string: UInt8 = 0x09
        static let bytes: UInt8 = 0x0A
        static let date: UInt8 = 0x0B
        static let uuid: UInt8 = 0x0C
        static let array: UInt8 = 0x0D
        static let object: UInt8 = 0x0E
    }

    /// The payload size of a value whose tag says it (every tag but strings, bytes and containers); `nil` for
    /// those and for unknown tags.
    @inline(__always)
    static func fixedPayloadSize(_ tag: UInt8) -> Int? {
        switch tag {
        case Tag.null, Tag.false, Tag.true: return 0
        case Tag.int8: return 1
        case Tag.int16: return 2
        case Tag.int32: return 4
        case Tag.int64, Tag.uint64, Tag.double, Tag.date: return 8
        case Tag.uuid: return 16
        default: return nil
        }
    }

    /// Size of an array or object header after its tag: byte length and count.
    static let containerHeaderSize = 8
}

/// Why a sequence of bytes is not a valid document.
struct MalformedDocument: Error, CustomStringConvertible {
    var offset: Int
    var reason: String
    var description: String { "malformed document at byte \(offset): \(reason)" }
}

/// Appends values in the binary format to a byte buffer.
struct BinaryWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 128) { bytes.reserveCapacity(capacity) }

    @inline(__always) mutating func byte(_ b: UInt8) { bytes.append(b) }

    @inline(__always) mutating func littleEndian<I: FixedWidthInteger>(_ v: I) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func varint(_ value: Int) {
        var v = UInt64(value)
        while v >= 0x80 { bytes.append(UInt8(truncatingIfNeeded: v) | 0x80); v >>= 7 }
        bytes.append(UInt8(v))
    }

    mutating func null() { byte(BinaryFormat.Tag.null) }
    mutating func bool(_ v: Bool) { byte(v ? BinaryFormat.Tag.true : BinaryFormat.Tag.false) }

    mutating func int(_ v: Int64) {
        if let small = Int8(exactly: v) { byte(BinaryFormat.Tag.int8); byte(UInt8(bitPattern: small)) }
        else if let s = Int16(exactly: v) { byte(BinaryFormat.Tag.int16); littleEndian(s) }
        else if let s = Int32(exactly: v) { byte(BinaryFormat.Tag.int32); littleEndian(s) }
        else { byte(BinaryFormat.Tag.int64); littleEndian(v) }
    }

    mutating func uint(_ v: UInt64) {
        if let signed = Int64(exactly: v) { int(signed) } else { byte(BinaryFormat.Tag.uint64); littleEndian(v) }
    }

    mutating func double(_ v: Double) { byte(BinaryFormat.Tag.double); littleEndian(v.bitPattern) }

    mutating func string(_ v: String) {
        byte(BinaryFormat.Tag.string)
        var s = v
        s.withUTF8 { utf8 in
            varint(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func data(_ v: some Collection<UInt8>) {
        byte(BinaryFormat.Tag.bytes)
        varint(v.count)
        bytes.append(contentsOf: v)
    }

    mutating func date(_ v: Date) { byte(BinaryFormat.Tag.date); littleEndian(v.timeIntervalSinceReferenceDate.bitPattern) }

    mutating func uuid(_ v: UUID) {
        byte(BinaryFormat.Tag.uuid)
        withUnsafeBytes(of: v.uuid) { bytes.append(contentsOf: $0) }
    }

    /// A field name inside an object.
    mutating func name(_ v: String) {
        var s = v
        s.withUTF8 { utf8 in
            varint(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    /// Writes a container's tag and a header to be patched by ``closeContainer(at:count:)``; returns the header's offset.
    mutating func openContainer(tag: UInt8) -> Int {
        byte(tag)
        let at = bytes.count
        bytes.append(contentsOf: [0, 0, 0, 0, 0, 0, 0, 0])
        return at
    }

    mutating func closeContainer(at header: Int, count: Int) {
        let length = UInt32(truncatingIfNeeded: bytes.count - header - BinaryFormat.containerHeaderSize)
        let n = UInt32(truncatingIfNeeded: count)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: length.littleEndian, toByteOffset: header, as: UInt32.self)
            raw.storeBytes(of: n.littleEndian, toByteOffset: header + 4, as: UInt32.self)
        }
    }
}

/// A value inside an encoded buffer: its tag and where its payload starts and ends.
struct ValueRef {
    var tag: UInt8
    /// Offset of the payload (just after the tag).
    var start: Int
    /// Offset just past the value.
    var end: Int
}

/// Reads values in the binary format from borrowed bytes, checking every bound: a corrupt buffer gives
/// ``MalformedDocument``, never a crash.
struct BinaryReader {
    let buffer: UnsafeRawBufferPointer

    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    /// The document's root value, after checking the version byte.
    func root() throws -> ValueRef {
        guard buffer.count >= 2 else { throw MalformedDocument(offset: 0, reason: "too short to be a document") }
        let version = buffer[0]
        guard version == BinaryFormat.version else {
            throw MalformedDocument(offset: 0, reason: "unknown format version \(version)")
        }
        let ref = try value(at: 1)
        guard ref.end == buffer.count else {
            throw MalformedDocument(offset: ref.end, reason: "\(buffer.count - ref.end) bytes after the document")
        }
        return ref
    }

    @inline(__always) func need(_ offset: Int, _ count: Int) throws {
        guard offset >= 0, count >= 0, offset <= buffer.count - count else {
            throw MalformedDocument(offset: offset, reason: "value runs past the end (\(buffer.count) bytes)")
        }
    }

    @inline(__always) func load<I: FixedWidthInteger>(_ type: I.Type, at offset: Int) -> I {
        I(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: I.self))
    }

    func varint(at offset: Int) throws -> (value: Int, end: Int) {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var i = offset
        while true {
            try need(i, 1)
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

    /// The value whose tag is at `offset`.
    func value(at offset: Int) throws -> ValueRef {
        try need(offset, 1)
        let tag = buffer[offset]
        let p = offset + 1
        let end: Int
        switch tag {
        case BinaryFormat.Tag.string, BinaryFormat.Tag.bytes:
            let (n, s) = try varint(at: p)
            end = s + n
        case BinaryFormat.Tag.array, BinaryFormat.Tag.object:
            try need(p, BinaryFormat.containerHeaderSize)
            end = p + BinaryFormat.containerHeaderSize + Int(load(UInt32.self, at: p))
        default:
            guard let size = BinaryFormat.fixedPayloadSize(tag) else {
                throw MalformedDocument(offset: offset, reason: "unknown value tag 0x\(String(tag, radix: 16))")
            }
            end = p + size
        }
        try need(p, end - p)
        return ValueRef(tag: tag, start: p, end: end)
    }

    // MARK: Scalars

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
        let (n, s) = try varint(at: ref.start)
        return UnsafeRawBufferPointer(rebasing: buffer[s..<(s + n)])
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

    /// The number of elements or fields of an array or object.
    func count(_ ref: ValueRef) -> Int { Int(load(UInt32.self, at: ref.start + 4)) }

    /// Offset of the first element or field of a container.
    func contentStart(_ ref: ValueRef) -> Int { ref.start + BinaryFormat.containerHeaderSize }

    /// Calls `body` with each element of an array.
    func forEachElement(_ array: ValueRef, _ body: (ValueRef) throws -> Void) throws {
        var offset = contentStart(array)
        while offset < array.end {
            let element = try value(at: offset)
            guard element.end <= array.end else { throw MalformedDocument(offset: offset, reason: "element runs past its array") }
            try body(element)
            offset = element.end
        }
    }

    /// Calls `body` with each field of an object: the name's bytes and the value.
    func forEachField(_ object: ValueRef, _ body: (UnsafeRawBufferPointer, ValueRef) throws -> Void) throws {
        var offset = contentStart(object)
        while offset < object.end {
            let (n, s) = try varint(at: offset)
            try need(s, n)
            let name = UnsafeRawBufferPointer(rebasing: buffer[s..<(s + n)])
            let v = try value(at: s + n)
            guard v.end <= object.end else { throw MalformedDocument(offset: offset, reason: "field runs past its object") }
            try body(name, v)
            offset = v.end
        }
    }

    /// The value of field `name` in an object, or `nil` when the object has no such field.
    func field(_ object: ValueRef, named name: UnsafeRawBufferPointer) throws -> ValueRef? {
        var offset = contentStart(object)
        while offset < object.end {
            let (n, s) = try varint(at: offset)
            try need(s, n)
            let v = try value(at: s + n)
            if n == name.count && BinaryReader.equal(buffer, s, name) {
                return v
            }
            offset = v.end
        }
        return nil
    }

    @inline(__always)
    static func equal(_ buffer: UnsafeRawBufferPointer, _ offset: Int, _ other: UnsafeRawBufferPointer) -> Bool {
        guard other.count > 0 else { return true }
        guard let a = buffer.baseAddress, let b = other.baseAddress else { return false }
        return sameBytes(a + offset, b, other.count)
    }

    /// Whether `count` bytes at `a` and `b` are equal. Field names are short: a loop beats calling `memcmp`.
    @inline(__always)
    static func sameBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
        guard count <= 16 else { return memcmp(a, b, count) == 0 }
        var i = 0
        while i < count {
            if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
            i += 1
        }
        return true
    }

    /// The value of the field named by the `count` bytes at `name` in `object`, or `nil` when there is none.
    ///
    /// The same answer as ``field(_:named:)``, in the tight loop a scan over many documents wants: each field is
    /// skipped by its tag's size alone, and names are compared only when their lengths agree. Every bound is still
    /// checked (`object` is a value from ``value(at:)``, so it lies inside the buffer).
    @inline(__always)
    func field(_ object: ValueRef, name: UnsafeRawPointer, count: Int) throws -> ValueRef? {
        guard let base = buffer.baseAddress else { return nil }
        let end = object.end
        var offset = contentStart(object)
        while offset < end {
            var n = Int(base.load(fromByteOffset: offset, as: UInt8.self))
            var s = offset + 1
            if n >= 0x80 { (n, s) = try varint(at: offset) }
            let at = s + n
            guard at < end else { throw MalformedDocument(offset: offset, reason: "field runs past its object") }
            let tag = base.load(fromByteOffset: at, as: UInt8.self)
            let p = at + 1
            var valueEnd: Int
            switch tag {
            case BinaryFormat.Tag.string, BinaryFormat.Tag.bytes:
                guard p < end else { throw MalformedDocument(offset: at, reason: "value runs past its object") }
                let length = base.load(fromByteOffset: p, as: UInt8.self)
                if length < 0x80 {
                    valueEnd = p + 1 + Int(length)
                } else {
                    let (l, e) = try varint(at: p)
                    valueEnd = e + l
                }
            case BinaryFormat.Tag.array, BinaryFormat.Tag.object:
                guard p + BinaryFormat.containerHeaderSize <= end else {
                    throw MalformedDocument(offset: at, reason: "value runs past its object")
                }
                valueEnd = p + BinaryFormat.containerHeaderSize + Int(load(UInt32.self, at: p))
            default:
                guard let size = BinaryFormat.fixedPayloadSize(tag) else {
                    throw MalformedDocument(offset: at, reason: "unknown value tag 0x\(String(tag, radix: 16))")
                }
                valueEnd = p + size
            }
            guard valueEnd <= end else { throw MalformedDocument(offset: offset, reason: "field runs past its object") }
            if n == count && BinaryReader.sameBytes(base + s, name, n) {
                return ValueRef(tag: tag, start: p, end: valueEnd)
            }
            offset = valueEnd
        }
        return nil
    }

    /// The value at a dotted path (`["address", "city"]`) from `ref`, or `nil` when any step is missing or not an object.
    func value(atPath path: FieldPath, from ref: ValueRef) throws -> ValueRef? {
        var current = ref
        for component in path.utf8Components {
            guard current.tag == BinaryFormat.Tag.object else { return nil }
            let found = try component.withUnsafeBytes { try field(current, named: $0) }
            guard let found else { return nil }
            current = found
        }
        return current
    }
}
