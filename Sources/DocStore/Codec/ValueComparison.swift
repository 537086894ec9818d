import Foundation

/// The keys of a query's constants, encoded once, and a buffer reused for the documents' values.
final class ComparisonKeys {
    private var constants: [DocumentValue: [UInt8]] = [:]
    private var scratch: [UInt8] = []

    /// The order of the document's value at `ref` against `value`, by their keys.
    func order(of ref: ValueRef, in reader: BinaryReader, against value: DocumentValue) throws -> Int {
        let other: [UInt8]
        if let known = constants[value] {
            other = known
        } else {
            other = KeyEncoder.key(value)
            // A value holding NaN is not equal to itself: it would never be found again, only pile up.
            // Only a query's few constants are kept: a document's value compared with another's is not.
            if value == value && constants.count < 64 { constants[value] = other }
        }
        scratch.removeAll(keepingCapacity: true)
        var encoder = KeyEncoder()
        encoder.swapBuffer(&scratch)
        defer { encoder.swapBuffer(&scratch) }
        try encoder.append(ref, in: reader)
        let mine = encoder.bytes
        return mine.lexicographicallyPrecedes(other) ? -1 : (mine == other ? 0 : 1)
    }
}

/// How a condition compares a document's value with a constant.
///
/// Comparisons follow Swift's semantics for the values a `Codable` model stores: numbers compare by value across
/// integer and floating-point encodings, strings as Swift compares them (canonical equivalence), NaN equals
/// nothing, and a missing field is `nil`. An ordering comparison involving `nil`, or values of different kinds
/// (a string and a number), is false.
enum ValueComparison {
    /// `a op b` for two values computed from a document, with the same answers as the comparison of a stored value.
    static func compare(values a: DocumentValue, _ op: ComparisonOperator, _ b: DocumentValue) -> Bool {
        switch (a, b) {
        case (.int(let i), .int(let j)): return op.holds(i < j ? -1 : (i == j ? 0 : 1))
        case (.bool(let x), .bool(let y)): return op.holds(x == y ? 0 : (x ? 1 : -1))
        default: break
        }
        if let x = a.exactDouble, let y = b.exactDouble { return op.holds(x < y ? -1 : (x == y ? 0 : 1)) }
        let bytes = a.encoded()
        return (try? bytes.withUnsafeBytes { raw -> Bool in
            let reader = BinaryReader(raw)
            return try compare(try reader.root(), in: reader, op, b, keys: ComparisonKeys())
        }) ?? false
    }

    /// The number of characters of a string's UTF-8 bytes, as `String.count` gives it.
    static func characterCount(_ bytes: UnsafeRawBufferPointer) -> Int {
        var lineBreaks = 0   // "\r\n" is one character
        var previous: UInt8 = 0
        for byte in bytes {
            guard byte < 0x80 else { return String(decoding: bytes, as: UTF8.self).count }
            if byte == 0x0A && previous == 0x0D { lineBreaks += 1 }
            previous = byte
        }
        return bytes.count - lineBreaks
    }

    /// Whether `text` occurs in `string` as a run of whole characters, as a collection of characters contains
    /// another (what a `#Predicate`'s `contains` evaluates): "\n" is not in "a\r\nb", whose "\r\n" is one character.
    static func containsCharacters(_ string: String, _ text: String) -> Bool {
        let characters = Array(string), wanted = Array(text)
        guard wanted.count <= characters.count else { return false }
        for start in 0...(characters.count - wanted.count)
        where characters[start..<(start + wanted.count)].elementsEqual(wanted) {
            return true
        }
        return false
    }

    /// Whether `needle` (not empty) occurs in `haystack`, byte for byte.
    static func occurs(_ needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> Bool {
        guard let n = needle.baseAddress, let h = haystack.baseAddress, needle.count <= haystack.count else {
            return false
        }
        let first = Int32(needle[0])
        var start = 0
        let last = haystack.count - needle.count
        while start <= last, let found = memchr(h + start, first, last - start + 1) {
            let at = h.distance(to: UnsafeRawPointer(found))
            if memcmp(h + at, n, needle.count) == 0 { return true }
            start = at + 1
        }
        return false
    }

    /// The bytes of the string at `ref`, or `nil` when it is missing or not a string.
    static func string(_ ref: ValueRef?, in reader: BinaryReader) throws -> UnsafeRawBufferPointer? {
        guard let ref, ref.tag == BinaryFormat.Tag.string else { return nil }
        return try reader.payloadBytes(ref)
    }

    /// Whether the array at `ref` has an element equal to `value`. A value that is not an array counts as one
    /// element, as a multi-value index indexes it; null contains nothing.
    static func arrayContains(_ ref: ValueRef, in reader: BinaryReader, _ value: DocumentValue,
                              keys: ComparisonKeys) throws -> Bool {
        guard ref.tag != BinaryFormat.Tag.null else { return false }
        guard ref.tag == BinaryFormat.Tag.array else {
            return try compare(ref, in: reader, .equal, value, keys: keys)
        }
        var found = false
        try reader.forEachElement(ref) { element in
            if !found, try compare(element, in: reader, .equal, value, keys: keys) { found = true }
        }
        return found
    }

    /// Kinds that compare with each other.
    private enum Kind { case null, bool, number, nan, date, string, bytes, uuid, array, object }

    private static func kind(_ tag: UInt8?) -> Kind {
        switch tag {
        case nil, BinaryFormat.Tag.null: return .null
        case BinaryFormat.Tag.false, BinaryFormat.Tag.true: return .bool
        case BinaryFormat.Tag.string: return .string
        case BinaryFormat.Tag.bytes: return .bytes
        case BinaryFormat.Tag.date: return .date
        case BinaryFormat.Tag.uuid: return .uuid
        case BinaryFormat.Tag.array: return .array
        case BinaryFormat.Tag.object, BinaryFormat.Tag.shaped: return .object
        default: return .number
        }
    }

    private static func kind(_ value: DocumentValue) -> Kind {
        switch value {
        case .null: return .null
        case .bool: return .bool
        case .int, .uint: return .number
        case .double(let d): return d.isNaN ? .nan : .number
        case .string: return .string
        case .bytes: return .bytes
        case .date: return .date
        case .uuid: return .uuid
        case .array: return .array
        case .object: return .object
        }
    }

    /// `ref op value`, where a nil `ref` is a missing field.
    static func compare(_ ref: ValueRef?, in reader: BinaryReader, _ op: ComparisonOperator,
                        _ value: DocumentValue, keys: ComparisonKeys) throws -> Bool {
        var left = kind(ref?.tag)
        if left == .number, let ref, let d = reader.double(ref), d.isNaN { left = .nan }
        let right = kind(value)
        if left == .nan || right == .nan {
            return op == .notEqual
        }
        guard left == right else { return op == .notEqual }
        if left == .null { return op == .equal }   // nil == nil; ordering nil is false
        guard let ref else { return false }
        // Fast paths for the common scalars; every other case compares order-preserving keys.
        let order: Int
        if let i = reader.integer(ref), case .int(let j) = value {
            order = i < j ? -1 : (i == j ? 0 : 1)
        } else if let fast = numericOrder(ref, in: reader, value) {
            order = fast
        } else if ref.tag == BinaryFormat.Tag.string, case .string(let s) = value, let fast = try asciiOrder(ref, in: reader, s) {
            order = fast
        } else {
            order = try keys.order(of: ref, in: reader, against: value)
        }
        return op.holds(order)
    }

    /// The order of two numbers when a `Double` comparison is exact: both doubles, or an integer within ±2^53
    /// against a double. `nil` otherwise (the keys then decide).
    @inline(__always)
    private static func numericOrder(_ ref: ValueRef, in reader: BinaryReader, _ value: DocumentValue) -> Int? {
        guard let left = reader.exactDouble(ref), let right = value.exactDouble else { return nil }
        return left < right ? -1 : (left == right ? 0 : 1)
    }

    /// Byte order of two ASCII strings, or `nil` when either is not ASCII.
    private static func asciiOrder(_ ref: ValueRef, in reader: BinaryReader, _ s: String) throws -> Int? {
        let bytes = try reader.payloadBytes(ref)
        var other = s
        return other.withUTF8 { utf8 -> Int? in
            guard utf8.allSatisfy({ $0 < 0x80 }), bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            let n = min(bytes.count, utf8.count)
            var result: Int32 = 0
            if n > 0, let a = bytes.baseAddress, let b = utf8.baseAddress { result = memcmp(a, b, n) }
            if result != 0 { return result < 0 ? -1 : 1 }
            return bytes.count == utf8.count ? 0 : (bytes.count < utf8.count ? -1 : 1)
        }
    }
}

extension DocumentValue {
    /// A number as a `Double` when that is exact and not NaN: the constant's side of ``BinaryReader/exactDouble(_:)``.
    var exactDouble: Double? {
        switch self {
        case .double(let d): return d.isNaN ? nil : d
        case .int(let i) where i >= -(1 << 53) && i <= (1 << 53): return Double(i)
        default: return nil
        }
    }
}

/// A comparison of two values, as the conditions and the comparisons of stored values use it.
enum ComparisonOperator: String, Sendable {
    case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="

    /// The same comparison with its operands swapped: `5 < x` is `x > 5`.
    var swapped: ComparisonOperator {
        switch self {
        case .equal, .notEqual: return self
        case .less: return .greater
        case .lessOrEqual: return .greaterOrEqual
        case .greater: return .less
        case .greaterOrEqual: return .lessOrEqual
        }
    }

    /// Whether the comparison holds for two values whose order is `order` (negative, zero or positive).
    @inline(__always)
    func holds(_ order: Int) -> Bool {
        switch self {
        case .equal: return order == 0
        case .notEqual: return order != 0
        case .less: return order < 0
        case .lessOrEqual: return order <= 0
        case .greater: return order > 0
        case .greaterOrEqual: return order >= 0
        }
    }
}
