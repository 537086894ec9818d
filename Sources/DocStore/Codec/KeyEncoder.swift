import Foundation

/// Order-preserving key encoding: comparing two encoded keys byte by byte (as LMDB does) gives the order of
/// the values.
///
/// Each value starts with a byte for its kind, so values of different kinds never interleave:
///
/// `null` < `false` < `true` < NaN < numbers < dates < strings < bytes < UUIDs < arrays < objects
///
/// - Numbers of every Swift type share one order: `Int8` through `UInt64`, `Float` and `Double` compare by
///   their exact mathematical value, so `2 < 2.5 < 3` holds across types, and `-0.0` equals `0`.
///   Each is the nearest `Double`, ordered (8 bytes), and a byte that says whether the integer is exactly that
///   `Double` or, for integers beyond 2^53, how far below or above it lies.
///   NaN has a kind of its own, after the booleans and before every number, so that no range of numbers holds it.
/// - Strings are compared by Unicode scalars after canonical (NFC) normalization, as Swift's `<` compares them;
///   a zero byte is escaped and the string is terminated, so a string sorts before every longer string it begins.
/// - Compound keys are the concatenation of their parts. Every part is self-delimiting, so the key of a prefix
///   of the parts is a lower bound of every key that starts with it, and ``prefixUpperBound(_:)`` an upper one.
///
/// For example:
/// ```swift
/// var key = KeyEncoder()
/// key.append(.string("Oslo"))
/// key.append(.int(42))
/// // key.bytes sorts after every ("Oslo", n) with n < 42 and before every ("Oslo", n) with n > 42
/// ```
public struct KeyEncoder: Sendable {
    /// The encoded key so far.
    public private(set) var bytes: [UInt8] = []

    public init() {}

    /// An encoder with room for a key of `capacity` bytes, so that the usual key is made without growing.
    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Empties the key, keeping its room for the next one.
    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    enum Kind {
        static let null: UInt8 = 0x05
        static let `false`: UInt8 = 0x10
        static let `true`: UInt8 = 0x11
        static let nan: UInt8 = 0x1F
        static let number: UInt8 = 0x20
        static let date: UInt8 = 0x30
        static let string: UInt8 = 0x40
        static let bytes: UInt8 = 0x50
        static let uuid: UInt8 = 0x60
        static let array: UInt8 = 0x70
        static let object: UInt8 = 0x80
        static let end: UInt8 = 0x00
    }

    enum Exactness {
        static let below: UInt8 = 0x7F
        static let exact: UInt8 = 0x80
        static let above: UInt8 = 0x81
    }

    /// Appends one value (one part of a compound key).
    public mutating func append(_ value: DocumentValue) {
        switch value {
        case .null: bytes.append(Kind.null)
        case .bool(let b): bytes.append(b ? Kind.true : Kind.false)
        case .int(let i): appendInteger(i)
        case .uint(let u): appendInteger(Int128(u))
        case .double(let d): appendDouble(d)
        case .string(let s): appendString(s)
        case .bytes(let b): appendEscaped(kind: Kind.bytes, b)
        case .date(let d): appendDate(d.timeIntervalSinceReferenceDate)
        case .uuid(let u):
            bytes.append(Kind.uuid)
            withUnsafeBytes(of: u.uuid) { bytes.append(contentsOf: $0) }
        case .array(let elements):
            bytes.append(Kind.array)
            for e in elements { append(e) }
            bytes.append(Kind.end)
        case .object(let fields):
            bytes.append(Kind.object)
            for f in fields { appendString(f.name); append(f.value) }
            bytes.append(Kind.end)
        }
    }

    /// Appends the value `ref` of an encoded document, without building a ``DocumentValue``.
    mutating func append(_ ref: ValueRef, in reader: BinaryReader, depth: Int = 0) throws {
        guard depth <= BinaryFormat.maximumDepth else {
            throw MalformedDocument(offset: ref.start - 1, reason: "nested deeper than \(BinaryFormat.maximumDepth) levels")
        }
        switch ref.tag {
        case BinaryFormat.Tag.null: bytes.append(Kind.null)
        case BinaryFormat.Tag.false: bytes.append(Kind.false)
        case BinaryFormat.Tag.true: bytes.append(Kind.true)
        case BinaryFormat.Tag.int8, BinaryFormat.Tag.int16, BinaryFormat.Tag.int32, BinaryFormat.Tag.int64:
            appendInteger(reader.integer(ref) ?? 0)
        case BinaryFormat.Tag.uint64: appendInteger(Int128(reader.unsigned(ref) ?? 0))
        case BinaryFormat.Tag.double: appendDouble(reader.double(ref) ?? 0)
        case BinaryFormat.Tag.string:
            let utf8 = try reader.payloadBytes(ref)
            if utf8.allSatisfy({ $0 < 0x80 }) {
                appendEscaped(kind: Kind.string, utf8)
            } else {
                appendString(String(decoding: utf8, as: UTF8.self))
            }
        case BinaryFormat.Tag.bytes: appendEscaped(kind: Kind.bytes, try reader.payloadBytes(ref))
        case BinaryFormat.Tag.date: appendDate(reader.dateInterval(ref) ?? 0)
        case BinaryFormat.Tag.uuid:
            bytes.append(Kind.uuid)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: reader.buffer[ref.start..<(ref.start + 16)]))
        case BinaryFormat.Tag.array:
            bytes.append(Kind.array)
            try reader.forEachElement(ref) { try append($0, in: reader, depth: depth + 1) }
            bytes.append(Kind.end)
        case BinaryFormat.Tag.object, BinaryFormat.Tag.shaped:
            bytes.append(Kind.object)
            try reader.forEachField(ref) { name, value in
                appendString(String(decoding: name, as: UTF8.self))
                try append(value, in: reader, depth: depth + 1)
            }
            bytes.append(Kind.end)
        default:
            throw MalformedDocument(offset: ref.start - 1, reason: "unknown value tag")
        }
    }

    // MARK: Parts

    private mutating func appendDouble(_ d: Double) {
        if d.isNaN { bytes.append(Kind.nan); return }
        bytes.append(Kind.number)
        appendOrdered(d == 0 ? 0 : d)   // -0.0 == 0.0
        bytes.append(Exactness.exact)
    }

    /// A date by its interval since the reference date; -0.0 is 0, as `Date`'s `==` has it, and NaN sorts first.
    private mutating func appendDate(_ interval: Double) {
        bytes.append(Kind.date)
        appendOrdered(interval.isNaN ? -.infinity : (interval == 0 ? 0 : interval))
    }

    /// Integers within ±2^53 are exactly a `Double`: the common case, without 128-bit arithmetic.
    private mutating func appendInteger(_ i: Int64) {
        if i >= -(1 << 53) && i <= (1 << 53) {
            bytes.append(Kind.number)
            appendOrdered(Double(i))
            bytes.append(Exactness.exact)
        } else {
            appendInteger(Int128(i))
        }
    }

    private mutating func appendInteger(_ i: Int128) {
        let nearest = Double(i)
        bytes.append(Kind.number)
        appendOrdered(nearest)
        let difference = i - Int128(nearest)
        if difference == 0 {
            bytes.append(Exactness.exact)
        } else {
            bytes.append(difference < 0 ? Exactness.below : Exactness.above)
            appendBigEndian(UInt64(bitPattern: Int64(difference)) ^ (1 << 63))
        }
    }

    /// A `Double` as 8 bytes whose unsigned order is the numeric order (for non-NaN values).
    private mutating func appendOrdered(_ d: Double) {
        var bits = d.bitPattern
        if bits & (1 << 63) != 0 { bits = ~bits } else { bits |= (1 << 63) }
        appendBigEndian(bits)
    }

    private mutating func appendBigEndian(_ v: UInt64) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// A string in NFC, the normalization Swift's own `==` and `<` compare by: it comes from the standard
    /// library itself (`_withNFCCodeUnits`), so the key order is String's order by construction. (Foundation's
    /// `precomposedStringWithCanonicalMapping` on Linux misses Hangul syllables and the reordering of combining marks.)
    private mutating func appendString(_ s: String) {
        if s.utf8.allSatisfy({ $0 < 0x80 }) {
            appendEscaped(kind: Kind.string, s.utf8)
            return
        }
        bytes.append(Kind.string)
        s._withNFCCodeUnits { b in
            bytes.append(b)
            if b == 0 { bytes.append(0xFF) }
        }
        bytes.append(0x00)
        bytes.append(0x01)
    }

    /// Bytes with 0x00 written as 0x00 0xFF, ended by 0x00 0x01.
    private mutating func appendEscaped<C: Collection<UInt8>>(kind: UInt8, _ raw: C) {
        bytes.append(kind)
        for b in raw {
            bytes.append(b)
            if b == 0 { bytes.append(0xFF) }
        }
        bytes.append(0x00)
        bytes.append(0x01)
    }

    /// Appends bytes that are already a key (an id).
    mutating func appendRaw(_ raw: UnsafeRawBufferPointer) { bytes.append(contentsOf: raw) }

    /// Swaps the encoder's buffer with `buffer`: lends a caller's storage to the encoder and back, so that a loop
    /// encoding many keys allocates once.
    mutating func swapBuffer(_ buffer: inout [UInt8]) { swap(&bytes, &buffer) }

    /// Inverts the bytes appended since `start`, so that the value sorts in descending order.
    mutating func invert(from start: Int) {
        for i in start..<bytes.count { bytes[i] = ~bytes[i] }
    }

    // MARK: Range bounds

    /// The string-prefix bound: the key of every string that starts with `prefix` begins with these bytes.
    public static func stringPrefix(_ prefix: String) -> [UInt8] {
        var e = KeyEncoder()
        e.appendString(prefix)
        e.bytes.removeLast(2)   // the terminator
        return e.bytes
    }

    /// The smallest byte string greater than every key that starts with `prefix`; `nil` when there is none
    /// (the prefix is all 0xFF).
    public static func prefixUpperBound(_ prefix: [UInt8]) -> [UInt8]? {
        var bound = prefix
        while let last = bound.last {
            if last < 0xFF { bound[bound.count - 1] = last + 1; return bound }
            bound.removeLast()
        }
        return nil
    }
}

extension KeyEncoder {
    /// The first byte of every key of `value`'s kind, and the first byte past them: a range over all values that
    /// compare with `value` (all numbers, all strings, ...).
    static func kindRange(of value: DocumentValue) -> (lower: UInt8, upper: UInt8) {
        switch value {
        case .null: return (Kind.null, Kind.null + 1)
        case .bool: return (Kind.false, Kind.true + 1)
        case .int, .uint: return (Kind.number, Kind.number + 1)
        case .double(let d): return d.isNaN ? (Kind.nan, Kind.nan + 1) : (Kind.number, Kind.number + 1)
        case .date: return (Kind.date, Kind.date + 1)
        case .string: return (Kind.string, Kind.string + 1)
        case .bytes: return (Kind.bytes, Kind.bytes + 1)
        case .uuid: return (Kind.uuid, Kind.uuid + 1)
        case .array: return (Kind.array, Kind.array + 1)
        case .object: return (Kind.object, Kind.object + 1)
        }
    }

    /// The key of a single value.
    public static func key(_ value: DocumentValue) -> [UInt8] {
        var e = KeyEncoder()
        e.append(value)
        return e.bytes
    }

    /// The key of a single value, read where it lies.
    static func key(_ ref: ValueRef, in reader: BinaryReader) throws -> [UInt8] {
        var e = KeyEncoder(capacity: 32)
        try e.append(ref, in: reader)
        return e.bytes
    }
}

// MARK: Reading a key back

extension KeyEncoder {
    /// The value a one-part key was made from, when the key gives it back exactly: a UUID, a date, a string of ASCII
    /// characters, and with `numbers`, a number within ±2^53 other than zero (an integral one as `.int`: the key does not say
    /// whether it was an integer or a `Double`). `nil` for any other key; the value is then read from its document.
    ///
    /// A string with other characters is not given back: its key holds its canonical (NFC) form, which may differ
    /// from the stored bytes.
    static func exactValue(ofKey key: [UInt8], numbers: Bool) -> DocumentValue? {
        key.withUnsafeBytes { exactValue(ofKey: $0, numbers: numbers) }
    }

    static func exactValue(ofKey key: UnsafeRawBufferPointer, numbers: Bool) -> DocumentValue? {
        guard let kind = key.first else { return nil }
        switch kind {
        case Kind.uuid where key.count == 17:
            var uuid = UUID().uuid
            withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: key[1...])) }
            return .uuid(UUID(uuid: uuid))
        case Kind.date where key.count == 9:
            let interval = orderedDouble(key[1..<9])
            return interval == -.infinity ? nil : .date(Date(timeIntervalSinceReferenceDate: interval))   // -inf: NaN?
        case Kind.number where numbers && key.count == 10 && key[9] == Exactness.exact:
            let d = orderedDouble(key[1..<9])
            // Zero may have been -0.0, which has the same key.
            guard d != 0, abs(d) <= 9_007_199_254_740_992 else { return nil }
            return d.rounded() == d ? .int(Int64(d)) : .double(d)
        case Kind.string where key.count >= 3 && key[key.count - 2] == 0x00 && key[key.count - 1] == 0x01:
            var utf8: [UInt8] = []
            utf8.reserveCapacity(key.count - 3)
            var i = 1
            while i < key.count - 2 {
                let b = key[i]
                guard b < 0x80 else { return nil }
                if b == 0 {
                    guard key[i + 1] == 0xFF else { return nil }
                    i += 1
                }
                utf8.append(b)
                i += 1
            }
            return .string(String(decoding: utf8, as: UTF8.self))
        default:
            return nil
        }
    }

    /// The integer a one-part number key was made from, when it holds one within ±2^53: for a field known to hold
    /// integers, where zero is given back too (-0.0 and 0 share a key, and are the same integer).
    static func exactInteger(ofKey key: UnsafeRawBufferPointer) -> Int64? {
        guard key.count == 10, key[0] == Kind.number, key[9] == Exactness.exact else { return nil }
        let d = orderedDouble(key[1..<9])
        guard abs(d) <= 9_007_199_254_740_992, d.rounded() == d else { return nil }
        return Int64(d)
    }

    /// The `Double` whose ordered bytes these are (the inverse of `appendOrdered`).
    static func orderedDouble(_ bytes: some Sequence<UInt8>) -> Double {
        var bits: UInt64 = 0
        for b in bytes { bits = bits << 8 | UInt64(b) }
        bits = bits & (1 << 63) != 0 ? bits & ~(1 << 63) : ~bits
        return Double(bitPattern: bits)
    }
}
