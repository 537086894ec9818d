import Foundation

/// DocStore's document format, versions 2 and 3.
///
/// A document of version 2 is a version byte, one value, and a checksum: the CRC-32C (``CRC32C``) of the version
/// byte and the value, 4 bytes little-endian. Version 1 is the same without the checksum; documents of version 1 are
/// still read, and are written again when they change (in version 3 in a file, in version 2 on a server). Each value
/// is a tag byte and a payload:
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
/// finds a field by path without decoding the rest of the document. Their count must agree with the values their
/// bytes hold; a count too large for the bytes (more elements than bytes, more fields than pairs of bytes) is
/// refused as soon as the container is read. ``BinaryReader`` reads the format.
///
/// Version 3 (``shapedVersion``) leaves the names of the root object's fields out: they are the document's shape
/// (``DocumentShape``), which the store keeps once under an id. After the version byte come the shape's id
/// (UInt64, a hash of the names: ``DocumentShape/id(of:salt:)``), the width `w` of the offsets (1, 2 or 4 bytes, the
/// least that holds them), the number of fields (a varint, which must be the shape's), the offset of each field's
/// value but the first (`w` bytes little-endian each, counted from the first value), the values in the shape's
/// order, and the checksum. A field is found from its position in the shape, without a walk over the fields
/// before it; each value must end where the next begins.
enum BinaryFormat {
    static let version: UInt8 = 2
    /// The version whose root object's field names are its shape's.
    static let shapedVersion: UInt8 = 3
    /// The version without a checksum, which is still read.
    static let uncheckedVersion: UInt8 = 1
    /// The size of the checksum that ends a document of ``version`` or ``shapedVersion``.
    static let checksumSize = 4
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
        /// The root object of a document of ``BinaryFormat/shapedVersion``, as ``BinaryReader/root()`` hands it
        /// on: never stored as a tag (a value may not have it), it tells the object apart for the readers.
        static let shaped: UInt8 = 0x10
    }

    /// The least size of the header of a document of ``shapedVersion`` before its offsets: version, shape id,
    /// width, a count of one byte.
    static let shapedHeaderSize = 11

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

    /// Ends a document (begun with ``BinaryFormat/version``) with the checksum of everything written so far.
    mutating func seal() {
        littleEndian(bytes.withUnsafeBytes { CRC32C.checksum($0) })
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
        name(v)
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

    /// A field name inside an object: its length and UTF-8 bytes, as a string's after its tag.
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

