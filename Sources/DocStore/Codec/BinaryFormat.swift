import Foundation

/// DocStore's document format, version 2.
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
/// | 0x0F | object with a field table | as 0x0E, with a UInt16 per field between the header and the fields |
///
/// Arrays and objects carry their byte length, so a reader skips a field it does not need in O(1), and
/// finds a field by path without decoding the rest of the document. Their count must agree with the values their
/// bytes hold; a count too large for the bytes (more elements than bytes, more fields than pairs of bytes) is
/// refused as soon as the container is read. ``BinaryReader`` reads the format.
///
/// The field table (version 2) holds where each field starts, counted from the start of the payload (the byte
/// after the tag), in the order of the fields: a reader that expects a field at a position (the documents of a
/// collection mostly share their shape) finds it without stepping over those before it. An object whose payload
/// would pass 65,535 bytes is written without a table (0x0E). Version 1 has no tables; both versions are read.
enum BinaryFormat {
    /// The version written; documents of every version from 1 to this one are read.
    static let version: UInt8 = 2
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
        static let objectWithTable: UInt8 = 0x0F

        /// Whether the tag is an object's, with or without a field table.
        @inline(__always) static func isObject(_ tag: UInt8) -> Bool { tag == object || tag == objectWithTable }
    }

    /// Size of an array or object header after its tag: byte length and count.
    static let containerHeaderSize = 8

    /// Whether two of an object's field names are the same bytes; `names` gives each field's name. An object with
    /// a field table has none: a look-up that finds its name where the table says has found the only one.
    static func repeatsAName(_ count: Int, _ names: (Int) -> UnsafeRawBufferPointer) -> Bool {
        guard count > 1 else { return false }
        if count > 32 {
            var seen = Set<[UInt8]>()
            return (0..<count).contains { !seen.insert(Array(names($0))).inserted }
        }
        return withUnsafeTemporaryAllocation(of: UnsafeRawBufferPointer.self, capacity: count) { seen in
            for i in 0..<count {
                let a = names(i)
                for j in 0..<i where seen[j].count == a.count {
                    if a.isEmpty || memcmp(a.baseAddress!, seen[j].baseAddress!, a.count) == 0 { return true }
                }
                seen[i] = a
            }
            return false
        }
    }
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
    /// Where each field of the open objects starts, innermost object last.
    private var fieldStarts: [Int] = []
    /// For each open object, innermost last: its header's offset and its first entry in `fieldStarts`.
    private var openObjects: [(header: Int, firstField: Int)] = []

    /// Whether objects get field tables (version 2); without them, the values are as version 1 wrote them.
    let fieldTables: Bool

    init(capacity: Int = 128, fieldTables: Bool = true) {
        bytes.reserveCapacity(capacity)
        self.fieldTables = fieldTables
    }

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
        counted(v)
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

    /// A field name inside an object: its length and UTF-8 bytes, as a string's after its tag. It starts a field
    /// of the innermost open object.
    mutating func name(_ v: String) {
        if fieldTables { fieldStarts.append(bytes.count) }
        counted(v)
    }

    /// A string's length and UTF-8 bytes.
    private mutating func counted(_ v: String) {
        var s = v
        s.withUTF8 { utf8 in
            varint(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    /// Writes a container's tag and a header to be patched by ``closeContainer(at:count:)``; returns the header's offset.
    /// An object is opened with a field table, and written without one when it closes too large for it.
    mutating func openContainer(tag: UInt8) -> Int {
        let isObject = fieldTables && BinaryFormat.Tag.isObject(tag)
        byte(isObject ? BinaryFormat.Tag.objectWithTable : tag)
        let at = bytes.count
        bytes.append(contentsOf: [0, 0, 0, 0, 0, 0, 0, 0])
        if isObject { openObjects.append((at, fieldStarts.count)) }
        return at
    }

    mutating func closeContainer(at header: Int, count: Int) {
        if let object = openObjects.last, object.header == header {
            openObjects.removeLast()
            insertFieldTable(header: header, count: count, starts: fieldStarts[object.firstField...])
            fieldStarts.removeSubrange(object.firstField...)
        }
        let length = UInt32(truncatingIfNeeded: bytes.count - header - BinaryFormat.containerHeaderSize)
        let n = UInt32(truncatingIfNeeded: count)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: length.littleEndian, toByteOffset: header, as: UInt32.self)
            raw.storeBytes(of: n.littleEndian, toByteOffset: header + 4, as: UInt32.self)
        }
    }

    /// Puts the table of an object's fields between its header and its fields, or marks it an object without a
    /// table when its payload would pass what a table entry can count.
    private mutating func insertFieldTable(header: Int, count: Int, starts: ArraySlice<Int>) {
        let fields = header + BinaryFormat.containerHeaderSize
        let payload = bytes.count - header + 2 * count
        let unique = bytes.withUnsafeBytes { raw in
            !BinaryFormat.repeatsAName(starts.count) { i in
                // A name written here: its length's varint, then its bytes.
                let reader = BinaryReader(raw)
                let (n, s) = (try? reader.length(at: starts[starts.startIndex + i], within: raw.count)) ?? (0, 0)
                return UnsafeRawBufferPointer(rebasing: raw[s..<(s + n)])
            }
        }
        guard starts.count == count, payload <= Int(UInt16.max), unique else {
            bytes[header - 1] = BinaryFormat.Tag.object
            return
        }
        var table = [UInt8](repeating: 0, count: 2 * count)
        for (i, start) in starts.enumerated() {
            let offset = UInt16(start - header + 2 * count)
            table[2 * i] = UInt8(truncatingIfNeeded: offset)
            table[2 * i + 1] = UInt8(truncatingIfNeeded: offset >> 8)
        }
        bytes.insert(contentsOf: table, at: fields)
    }
}
