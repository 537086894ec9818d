import Foundation
import Testing
@testable import DocStore

// MARK: - Deterministic randomness shared by the codec tests

/// The suite's seeded generator (``SeededGenerator``) with helpers for drawing values, so a failing random test
/// replays from the seed in its message.
struct CodecRandom: RandomNumberGenerator {
    let seed: UInt64
    private var generator: SeededGenerator

    init(seed: UInt64) {
        self.seed = seed
        generator = SeededGenerator(seed: seed)
    }

    mutating func next() -> UInt64 { generator.next() }

    /// A number in `0..<n`.
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    mutating func chance(_ oneIn: Int) -> Bool { below(oneIn) == 0 }

    mutating func pick<T>(_ options: [T]) -> T { options[below(options.count)] }

    /// Integers of every magnitude: raw bit patterns, small values, random bit widths, values near the ends.
    mutating func integer<T: FixedWidthInteger>(_ type: T.Type) -> T {
        switch below(6) {
        case 0, 1: return T(truncatingIfNeeded: next())
        case 2: return T(truncatingIfNeeded: Int64(below(41)) - 20)
        case 3:
            let v = T(truncatingIfNeeded: next() >> UInt64(below(64)))
            return T.isSigned && chance(2) ? 0 &- v : v
        case 4: return T.max &- T(truncatingIfNeeded: below(5))
        default: return T.min &+ T(truncatingIfNeeded: below(5))
        }
    }

    /// Integers close to where `Double` stops being exact: 2^53, 2^63, 2^64.
    mutating func integerNearDoubleLimits() -> Int128 {
        let one: Int128 = 1
        let centres: [Int128] = [one << 53, -(one << 53), one << 54, one << 62, one << 63, -(one << 63), one << 64, one << 60]
        let centre = pick(centres)
        let offset = Int128(below(4097)) - 2048
        return centre + offset
    }

    /// Any `Double` but NaN, from every region: raw bit patterns, subnormals, integers near 2^53..2^64, edges.
    mutating func double() -> Double {
        switch below(8) {
        case 0, 1:
            while true {
                let d = Double(bitPattern: next())
                if !d.isNaN { return d }
            }
        case 2: return Double(Int64(below(2001)) - 1000) / Double(pick([1, 2, 4, 10, 3]))
        case 3: return pick(CodecRandom.edgeDoubles)
        case 4:
            // Subnormals and their neighbours.
            let d = Double(bitPattern: next() & 0x000F_FFFF_FFFF_FFFF | (chance(8) ? 0x0010_0000_0000_0000 : 0))
            return chance(2) ? -d : d
        case 5:
            let d = Double(integerNearDoubleLimits())
            switch below(3) {
            case 0: return d.nextUp
            case 1: return d.nextDown
            default: return d
            }
        case 6: return Double(Int64(truncatingIfNeeded: next() >> UInt64(below(64))))
        default:
            let f = Float(bitPattern: UInt32(truncatingIfNeeded: next()))
            return f.isNaN ? 0.5 : Double(f)
        }
    }

    static let edgeDoubles: [Double] = [
        0, -0.0, 1, -1, 0.5, -0.5, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
        .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude, -.leastNormalMagnitude,
        Double.leastNormalMagnitude.nextDown, -Double.leastNormalMagnitude.nextDown,
        0x1p53, 0x1p53.nextUp, 0x1p53.nextDown, -0x1p53, 0x1p63, 0x1p63.nextDown, 0x1p63.nextUp, -0x1p63,
        (-0x1p63).nextUp, (-0x1p63).nextDown, 0x1p64, 0x1p64.nextDown, 0x1p64.nextUp,
        Double(Int64.max), Double(Int64.min), Double(UInt64.max), 0.1, -0.1, 1e300, -1e300, 1e-300,
        Double(Float.greatestFiniteMagnitude), Double(Float.leastNonzeroMagnitude),
    ]

    mutating func float() -> Float {
        switch below(4) {
        case 0, 1:
            while true {
                let f = Float(bitPattern: UInt32(truncatingIfNeeded: next()))
                if !f.isNaN { return f }
            }
        case 2: return Float(Int32(below(2001)) - 1000) / 8
        default:
            return pick([0, -0.0, 1, -1, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                         .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude,
                         Float.leastNormalMagnitude.nextDown, 0x1p24, Float(0x1p24).nextUp, 16_777_218, 0.1])
        }
    }

    // MARK: Strings

    /// A random ASCII string; a small alphabet often, so that prefixes and equal strings are common.
    mutating func asciiString(maxLength: Int = 8) -> String {
        let small: [UInt8] = [0x61, 0x62, 0x00, 0x01, 0x7F, 0x41]
        let useSmall = chance(2)
        var bytes: [UInt8] = []
        for _ in 0..<below(maxLength + 1) {
            bytes.append(useSmall ? pick(small) : UInt8(below(128)))
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Starters from many scripts. Every one is a starter (combining class 0) that does not compose with what
    /// follows it in ``unicodeString(maxPieces:)``.
    static let unicodeStarterRanges: [ClosedRange<UInt32>] = [
        0x20...0x7E, 0x00...0x01, 0xC0...0x17F, 0x391...0x3C9, 0x410...0x44F, 0x5D0...0x5EA, 0x627...0x64A,
        0x4E00...0x4E20, 0xAC00...0xAC30, 0x1F600...0x1F64F, 0x1F3FB...0x1F3FF, 0x1F1E6...0x1F1FF,
        0x200D...0x200D, 0xFE0F...0xFE0F, 0xFFFD...0xFFFD, 0x10000...0x10010, 0x1D400...0x1D410,
        0x212B...0x212B, 0x2126...0x2126, 0xFB01...0xFB01,
    ]

    /// A random string from many scripts: accented letters both precomposed and as a letter plus a combining
    /// mark, CJK, Hangul, emoji with modifiers and joiners, flags, `"\0"`, singletons such as U+212B ANGSTROM SIGN.
    ///
    /// Combining marks follow only ASCII letters, one at a time: beyond that Swift's own `String` comparison is
    /// not always consistent on this toolchain (`"\u{3A9}" < "\u{3A9}\u{301}"` although the second's NFC,
    /// U+038F, is below U+03A9; `"\u{308}"` and `"\u{344}"` compare neither less, greater nor equal).
    mutating func unicodeString(maxPieces: Int = 6) -> String {
        var scalars = String.UnicodeScalarView()
        let narrow = chance(3)
        for _ in 0..<below(maxPieces + 1) {
            if narrow {
                let pieces: [String] = ["a", "e", "e\u{301}", "\u{E9}", "\u{0}", "\u{1F600}", "\u{AC00}", "b"]
                scalars.append(contentsOf: pick(pieces).unicodeScalars)
                continue
            }
            let range = pick(CodecRandom.unicodeStarterRanges)
            let value = range.lowerBound + UInt32(below(Int(range.upperBound - range.lowerBound) + 1))
            let scalar = Unicode.Scalar(value)!
            scalars.append(scalar)
            if (0x61...0x7A).contains(value) || (0x41...0x5A).contains(value) {
                if chance(3) { scalars.append(Unicode.Scalar(0x300 + UInt32(below(0x34)))!) }
            }
        }
        return String(scalars)
    }

    mutating func bytes(maxLength: Int = 6) -> [UInt8] {
        (0..<below(maxLength + 1)).map { _ in chance(3) ? pick([0x00, 0xFF, 0x01]) : UInt8(truncatingIfNeeded: next()) }
    }

    mutating func uuid() -> UUID {
        var u: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &u) { raw in
            for i in raw.indices { raw[i] = chance(4) ? pick([0, 0xFF]) : UInt8(truncatingIfNeeded: next()) }
        }
        return UUID(uuid: u)
    }

    mutating func date() -> Date {
        var t = double()
        if t == 0 { t = 0 }   // -0.0 has a test of its own
        return Date(timeIntervalSinceReferenceDate: t)
    }

    // MARK: Documents

    /// A random document value of any kind, nested up to `depth` levels.
    mutating func documentValue(depth: Int, allowNaN: Bool = false, allowInfinity: Bool = true) -> DocumentValue {
        switch below(depth > 0 ? 13 : 11) {
        case 0: return .null
        case 1: return .bool(chance(2))
        case 2: return .int(integer(Int64.self))
        case 3: return .uint(UInt64(Int64.max) + 1 + UInt64(truncatingIfNeeded: integer(Int64.self)) % (UInt64(Int64.max) + 1))
        case 4:
            if allowNaN && chance(8) { return .double(.nan) }
            var d = double()
            if !allowInfinity && d.isInfinite { d = 1.5 }
            return .double(d)
        case 5: return .string(unicodeString())
        case 6: return .string(asciiString())
        case 7: return .bytes(bytes())
        case 8:
            var d = date()
            if !allowInfinity && !d.timeIntervalSinceReferenceDate.isFinite { d = Date(timeIntervalSinceReferenceDate: 12) }
            return .date(d)
        case 9: return .uuid(uuid())
        case 10: return .int(Int64(below(300)) - 150)
        case 11:
            return .array((0..<below(5)).map { _ in documentValue(depth: depth - 1, allowNaN: allowNaN, allowInfinity: allowInfinity) })
        default:
            var names = Set<String>()
            var fields: [DocumentValue.Field] = []
            for _ in 0..<below(5) {
                let name = chance(2) ? asciiString(maxLength: 5) : unicodeString(maxPieces: 3)
                guard names.insert(name).inserted else { continue }
                fields.append(.init(name, documentValue(depth: depth - 1, allowNaN: allowNaN, allowInfinity: allowInfinity)))
            }
            return .object(fields)
        }
    }
}

// MARK: - Checking helpers

/// Collects failures of a randomized check, keeping the first few for the message.
struct CodecFailures {
    private(set) var count = 0
    private(set) var examples: [String] = []

    mutating func add(_ example: @autoclosure () -> String) {
        count += 1
        if examples.count < 8 { examples.append(example()) }
    }

    func report(seed: UInt64) -> Comment {
        Comment(rawValue: "seed \(seed): \(count) failure(s), e.g.\n" + examples.joined(separator: "\n"))
    }
}

/// memcmp order: the first differing byte decides, a prefix sorts first. Returns -1, 0 or 1.
func keyBytesCompare(_ a: [UInt8], _ b: [UInt8]) -> Int {
    for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

func keyHex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func scalarsDescription(_ s: String) -> String {
    "\"" + s.unicodeScalars.map { $0.value < 0x80 && $0.value >= 0x20 ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined() + "\""
}

func orderSymbol(_ c: Int) -> String { c < 0 ? "<" : (c > 0 ? ">" : "==") }

func nativeCompare<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (b < a ? 1 : 0) }

/// Checks that the key order of `items` is the oracle's order: on random pairs, and between neighbours once sorted
/// by key (with a total oracle order, agreeing neighbours mean the whole order agrees). An oracle returning `nil`
/// has no answer for that pair, which is skipped.
func checkKeyOrderAgainstOracle<T>(_ items: [T], seed: UInt64, pairs: Int = 20_000, key: (T) -> [UInt8],
                                   oracle: (T, T) -> Int?, describe: (T) -> String) -> CodecFailures {
    var random = CodecRandom(seed: seed ^ 0x5EED)
    let keyed = items.map { (value: $0, key: key($0)) }
    var failures = CodecFailures()
    func check(_ a: (value: T, key: [UInt8]), _ b: (value: T, key: [UInt8])) {
        guard let expected = oracle(a.value, b.value)?.signum() else { return }
        let actual = keyBytesCompare(a.key, b.key)
        if expected != actual {
            failures.add("\(describe(a.value)) \(orderSymbol(expected)) \(describe(b.value)) but keys \(keyHex(a.key)) \(orderSymbol(actual)) \(keyHex(b.key))")
        }
    }
    guard !keyed.isEmpty else { return failures }
    for _ in 0..<pairs { check(keyed[random.below(keyed.count)], keyed[random.below(keyed.count)]) }
    let sorted = keyed.sorted { keyBytesCompare($0.key, $1.key) < 0 }
    for i in sorted.indices.dropFirst() { check(sorted[i - 1], sorted[i]) }
    return failures
}

/// Swift's order of two strings, or `nil` where Swift contradicts itself. On this toolchain `<` answers false both
/// ways for some canonically different strings, when the shorter one's NFC is a proper prefix of the other's and
/// it is not in NFC itself: `"e\u{301}"` vs `"\u{E9}\0"`, or `"e\u{301}x"` vs `"\u{E9}xy"`. That is the standard
/// library's inconsistency, not DocStore's; such pairs are skipped.
func consistentSwiftStringOrder(_ a: String, _ b: String) -> Int? {
    let (less, greater, equal) = (a < b, b < a, a == b)
    switch (less, greater, equal) {
    case (true, false, false): return -1
    case (false, true, false): return 1
    case (false, false, true): return 0
    default: return nil
    }
}

// MARK: - An exact oracle for DocumentValue order

/// A number as its exact mathematical value.
enum KeyOracleNumber: CustomStringConvertible {
    case integer(Int128)
    case double(Double)   // never NaN

    var description: String {
        switch self {
        case .integer(let i): return "\(i)"
        case .double(let d): return "\(d)(double)"
        }
    }

    static func compare(_ a: KeyOracleNumber, _ b: KeyOracleNumber) -> Int {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return nativeCompare(x, y)
        case (.double(let x), .double(let y)): return nativeCompare(x, y)
        case (.integer(let x), .double(let y)): return compare(integer: x, double: y)
        case (.double(let x), .integer(let y)): return -compare(integer: y, double: x)
        }
    }

    /// Compares an integer with a double exactly, without rounding either.
    static func compare(integer i: Int128, double d: Double) -> Int {
        if d >= 0x1p100 { return -1 }      // also +infinity
        if d <= -0x1p100 { return 1 }      // also -infinity
        let floor = d.rounded(.down)
        let f = Int128(floor)              // exact: |floor| < 2^100
        if i < f { return -1 }
        if i > f { return 1 }              // i >= floor + 1 > d
        return d == floor ? 0 : -1
    }
}

/// The order DocStore's keys promise, computed from the values with Swift's own comparisons.
enum KeyOracle {
    static func rank(_ v: DocumentValue) -> Int {
        switch v {
        case .null: return 0
        case .bool(false): return 1
        case .bool(true): return 2
        case .double(let d) where d.isNaN: return 3
        case .int, .uint, .double: return 4
        case .date: return 5
        case .string: return 6
        case .bytes: return 7
        case .uuid: return 8
        case .array: return 9
        case .object: return 10
        }
    }

    static func number(_ v: DocumentValue) -> KeyOracleNumber? {
        switch v {
        case .int(let i): return .integer(Int128(i))
        case .uint(let u): return .integer(Int128(u))
        case .double(let d) where !d.isNaN: return .double(d)
        default: return nil
        }
    }

    static func compare(_ a: DocumentValue, _ b: DocumentValue) -> Int {
        let (ra, rb) = (rank(a), rank(b))
        if ra != rb { return ra < rb ? -1 : 1 }
        if let x = number(a), let y = number(b) { return KeyOracleNumber.compare(x, y) }
        switch (a, b) {
        case (.date(let x), .date(let y)): return nativeCompare(x, y)
        // Where Swift contradicts itself (see consistentSwiftStringOrder) there is no order to hold the keys to.
        case (.string(let x), .string(let y)): return consistentSwiftStringOrder(x, y) ?? keyBytesCompare(KeyEncoder.key(a), KeyEncoder.key(b))
        case (.bytes(let x), .bytes(let y)): return x.lexicographicallyPrecedes(y) ? -1 : (x == y ? 0 : 1)
        case (.uuid(let x), .uuid(let y)): return uuidCompare(x, y)
        case (.array(let x), .array(let y)): return compare(sequence: x, y)
        case (.object(let x), .object(let y)):
            return compare(sequence: x.flatMap { [DocumentValue.string($0.name), $0.value] },
                           y.flatMap { [DocumentValue.string($0.name), $0.value] })
        default: return 0   // null, equal booleans, NaN
        }
    }

    /// Lexicographic order of tuples: the first unequal part decides; a prefix sorts first.
    static func compare(sequence a: [DocumentValue], _ b: [DocumentValue]) -> Int {
        for (x, y) in zip(a, b) {
            let c = compare(x, y)
            if c != 0 { return c }
        }
        return nativeCompare(a.count, b.count)
    }

    static func uuidBytes(_ u: UUID) -> [UInt8] { withUnsafeBytes(of: u.uuid) { Array($0) } }

    static func uuidCompare(_ a: UUID, _ b: UUID) -> Int {
        let (x, y) = (uuidBytes(a), uuidBytes(b))
        return x.lexicographicallyPrecedes(y) ? -1 : (x == y ? 0 : 1)
    }
}

func valueDescription(_ v: DocumentValue) -> String {
    switch v {
    case .string(let s): return scalarsDescription(s)
    case .double(let d): return "\(d)(double)"
    case .uint(let u): return "\(u)(uint)"
    case .array(let a): return "[" + a.map(valueDescription).joined(separator: ", ") + "]"
    default: return "\(v)"
    }
}

func compoundKeyBytes(_ parts: [DocumentValue]) -> [UInt8] {
    var e = KeyEncoder()
    for p in parts { e.append(p) }
    return e.bytes
}

// MARK: - Tests

@Suite struct KeyEncodingOrderTests {

    // MARK: Integers and floating point

    private func integerKeysSortLikeSwift<T: FixedWidthInteger>(_ type: T.Type, seed: UInt64,
                                                               value: (T) -> DocumentValue) -> CodecFailures {
        var random = CodecRandom(seed: seed)
        var values: [T] = [T.min, T.max, 0, 1, T.min &+ 1, T.max &- 1, T.max / 2, T.max / 2 &+ 1]
        if T.isSigned { values += [0 &- 1, T.min / 2] }
        for _ in 0..<1_500 { values.append(random.integer(T.self)) }
        if T.bitWidth >= 64 {
            for _ in 0..<500 {
                let near = random.integerNearDoubleLimits()
                if let v = T(exactly: near) { values.append(v) }
            }
        }
        return checkKeyOrderAgainstOracle(values, seed: seed, key: { KeyEncoder.key(value($0)) },
                             oracle: nativeCompare, describe: { "\(T.self)(\($0))" })
    }

    private static func signed<T: FixedWidthInteger & SignedInteger>(_ v: T) -> DocumentValue { .int(Int64(v)) }

    /// `.uint` is meant for values above `Int64.max`; smaller ones go in `.int`, as the document writer does.
    private static func unsigned<T: FixedWidthInteger & UnsignedInteger>(_ v: T) -> DocumentValue {
        if let small = Int64(exactly: v) { return .int(small) }
        return .uint(UInt64(v))
    }

    @Test func signedIntegersOfEveryWidthSortLikeSwift() {
        let results = [
            integerKeysSortLikeSwift(Int8.self, seed: 11, value: Self.signed),
            integerKeysSortLikeSwift(Int16.self, seed: 12, value: Self.signed),
            integerKeysSortLikeSwift(Int32.self, seed: 13, value: Self.signed),
            integerKeysSortLikeSwift(Int64.self, seed: 14, value: Self.signed),
            integerKeysSortLikeSwift(Int.self, seed: 15, value: Self.signed),
        ]
        for (i, failures) in results.enumerated() {
            #expect(failures.count == 0, failures.report(seed: UInt64(11 + i)))
        }
    }

    @Test func unsignedIntegersOfEveryWidthSortLikeSwift() {
        let results = [
            integerKeysSortLikeSwift(UInt8.self, seed: 21, value: Self.unsigned),
            integerKeysSortLikeSwift(UInt16.self, seed: 22, value: Self.unsigned),
            integerKeysSortLikeSwift(UInt32.self, seed: 23, value: Self.unsigned),
            integerKeysSortLikeSwift(UInt64.self, seed: 24, value: Self.unsigned),
            integerKeysSortLikeSwift(UInt.self, seed: 25, value: Self.unsigned),
            // Every UInt64 through `.uint`, even the small ones the writer would store as `.int`.
            integerKeysSortLikeSwift(UInt64.self, seed: 26, value: { .uint($0) }),
        ]
        for (i, failures) in results.enumerated() {
            #expect(failures.count == 0, failures.report(seed: UInt64(21 + i)))
        }
    }

    @Test func smallUnsignedValueEncodesTheSameAsIntOrUInt() {
        var random = CodecRandom(seed: 31)
        var failures = CodecFailures()
        for _ in 0..<5_000 {
            let v = UInt64(truncatingIfNeeded: random.integer(Int64.self)) & UInt64(Int64.max)
            let viaUInt = KeyEncoder.key(.uint(v)), viaInt = KeyEncoder.key(.int(Int64(v)))
            if viaUInt != viaInt { failures.add("\(v): .uint \(keyHex(viaUInt)) vs .int \(keyHex(viaInt))") }
        }
        #expect(failures.count == 0, failures.report(seed: 31))
    }

    @Test func doublesSortLikeSwiftAndNegativeZeroEqualsZero() {
        var random = CodecRandom(seed: 41)
        var values = CodecRandom.edgeDoubles
        for _ in 0..<3_000 { values.append(random.double()) }
        let failures = checkKeyOrderAgainstOracle(values, seed: 41, key: { KeyEncoder.key(.double($0)) },
                                     oracle: nativeCompare, describe: { "\($0)" })
        #expect(failures.count == 0, failures.report(seed: 41))
        #expect(KeyEncoder.key(.double(-0.0)) == KeyEncoder.key(.double(0.0)))
        #expect(KeyEncoder.key(.double(-0.0)) == KeyEncoder.key(.int(0)))
    }

    @Test func floatsSortLikeSwift() {
        var random = CodecRandom(seed: 51)
        let values = (0..<3_000).map { _ in random.float() }
        let failures = checkKeyOrderAgainstOracle(values, seed: 51, key: { KeyEncoder.key(.double(Double($0))) },
                                     oracle: nativeCompare, describe: { "Float(\($0))" })
        #expect(failures.count == 0, failures.report(seed: 51))
    }

    /// A pool of numbers of every Swift type, each with its exact value.
    private func mixedNumbers(seed: UInt64, count: Int) -> [(value: DocumentValue, exact: KeyOracleNumber, label: String)] {
        var random = CodecRandom(seed: seed)
        var pool: [(value: DocumentValue, exact: KeyOracleNumber, label: String)] = []
        func addInteger(_ i: Int128, _ label: String) {
            if let s = Int64(exactly: i) { pool.append((.int(s), .integer(i), label)) }
            if let u = UInt64(exactly: i) { pool.append((.uint(u), .integer(i), label + " as .uint")) }
        }
        func addDouble(_ d: Double, _ label: String) { pool.append((.double(d), .double(d), label)) }
        for _ in 0..<count {
            switch random.below(12) {
            case 0: let v = random.integer(Int8.self); addInteger(Int128(v), "Int8(\(v))")
            case 1: let v = random.integer(Int16.self); addInteger(Int128(v), "Int16(\(v))")
            case 2: let v = random.integer(Int32.self); addInteger(Int128(v), "Int32(\(v))")
            case 3: let v = random.integer(Int64.self); addInteger(Int128(v), "Int64(\(v))")
            case 4: let v = random.integer(UInt8.self); addInteger(Int128(v), "UInt8(\(v))")
            case 5: let v = random.integer(UInt32.self); addInteger(Int128(v), "UInt32(\(v))")
            case 6: let v = random.integer(UInt64.self); addInteger(Int128(v), "UInt64(\(v))")
            case 7: let v = random.integerNearDoubleLimits(); addInteger(v, "integer(\(v))")
            case 8: let f = random.float(); addDouble(Double(f), "Float(\(f))")
            case 9:
                // A double next to an integer drawn at the same time, so near-ties are common.
                let i = random.integerNearDoubleLimits()
                let d = Double(i)
                addDouble(random.chance(2) ? d : (random.chance(2) ? d.nextUp : d.nextDown), "Double near \(i)")
                addInteger(i, "integer(\(i))")
            default: let d = random.double(); addDouble(d, "Double(\(d))")
            }
        }
        return pool
    }

    @Test func numbersOfAllTypesShareOneExactOrder() {
        let pool = mixedNumbers(seed: 61, count: 4_000)
        let failures = checkKeyOrderAgainstOracle(pool, seed: 61, pairs: 60_000, key: { KeyEncoder.key($0.value) },
                                     oracle: { KeyOracleNumber.compare($0.exact, $1.exact) }, describe: { $0.label })
        #expect(failures.count == 0, failures.report(seed: 61))
    }

    @Test func integersAndDoublesCompareByExactValueWhereDoubleRoundingIsLossy() {
        let cases: [(DocumentValue, DocumentValue, Int)] = [
            (.int(1 << 53 + 1), .double(0x1p53), 1),
            (.int(1 << 53 - 1), .double(0x1p53), -1),
            (.int(1 << 53), .double(0x1p53), 0),
            (.int(1 << 53 + 1), .double(0x1p53.nextUp), -1),   // 2^53 + 2
            (.int(Int64.max), .double(0x1p63), -1),
            (.int(Int64.max), .double(0x1p63.nextDown), 1),
            (.int(Int64.min), .double(-0x1p63), 0),
            (.int(Int64.min + 1), .double(-0x1p63), 1),
            (.uint(UInt64.max), .double(0x1p64), -1),
            (.uint(UInt64.max), .double(0x1p64.nextDown), 1),
            (.uint(1 << 63), .double(0x1p63), 0),
            (.uint(1 << 63), .int(Int64.max), 1),
            (.uint(UInt64.max - 1), .uint(UInt64.max), -1),
            (.int(2), .double(2.5), -1),
            (.int(3), .double(2.5), 1),
            (.int(0), .double(-0.0), 0),
            (.int(-1), .double(-0.5), -1),
            (.int(Int64.max), .double(.infinity), -1),
            (.int(Int64.min), .double(-.infinity), 1),
            (.uint(UInt64.max), .double(.greatestFiniteMagnitude), -1),
            (.int(0), .double(.leastNonzeroMagnitude), -1),
            (.int(0), .double(-.leastNonzeroMagnitude), 1),
        ]
        for (a, b, expected) in cases {
            let actual = keyBytesCompare(KeyEncoder.key(a), KeyEncoder.key(b))
            #expect(actual == expected, "\(valueDescription(a)) should be \(orderSymbol(expected)) \(valueDescription(b))")
            // The oracle itself must agree with the table.
            #expect(KeyOracle.compare(a, b) == expected, "oracle: \(valueDescription(a)) vs \(valueDescription(b))")
        }
    }

    @Test func nanEncodesOnceAfterBooleansAndBeforeEveryNumber() {
        var random = CodecRandom(seed: 71)
        var nans: [Double] = [.nan, -.nan, .signalingNaN, -.signalingNaN, Double(Float.nan), Double(Float.signalingNaN)]
        for _ in 0..<200 {
            let payload = random.next() & 0x000F_FFFF_FFFF_FFFF | 1
            nans.append(Double(bitPattern: 0x7FF0_0000_0000_0000 | payload | (random.chance(2) ? 1 << 63 : 0)))
        }
        let nanKey = KeyEncoder.key(.double(.nan))
        var failures = CodecFailures()
        for n in nans where KeyEncoder.key(.double(n)) != nanKey {
            failures.add("NaN with bits \(String(n.bitPattern, radix: 16)) encodes as \(keyHex(KeyEncoder.key(.double(n))))")
        }
        #expect(failures.count == 0, failures.report(seed: 71))

        #expect(keyBytesCompare(KeyEncoder.key(.bool(true)), nanKey) < 0, "true must sort before NaN")
        #expect(keyBytesCompare(KeyEncoder.key(.bool(false)), nanKey) < 0, "false must sort before NaN")
        var numbers = mixedNumbers(seed: 72, count: 2_000).map(\.value)
        numbers += [.double(-.infinity), .int(Int64.min), .double(-.greatestFiniteMagnitude), .uint(UInt64.max), .double(.infinity)]
        var later = CodecFailures()
        for n in numbers where keyBytesCompare(nanKey, KeyEncoder.key(n)) >= 0 {
            later.add("NaN does not sort before \(valueDescription(n))")
        }
        #expect(later.count == 0, later.report(seed: 72))
    }

    // MARK: Other scalars

    @Test func falseSortsBeforeTrue() {
        #expect(keyBytesCompare(KeyEncoder.key(.bool(false)), KeyEncoder.key(.bool(true))) < 0)
        #expect(KeyEncoder.key(.bool(true)) == KeyEncoder.key(.bool(true)))
    }

    @Test func datesSortByTimeInterval() {
        var random = CodecRandom(seed: 81)
        var dates = [Date.distantPast, .distantFuture, Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: 0),
                     Date(timeIntervalSinceReferenceDate: .infinity), Date(timeIntervalSinceReferenceDate: -.infinity),
                     Date(timeIntervalSinceReferenceDate: .leastNonzeroMagnitude),
                     Date(timeIntervalSinceReferenceDate: -.leastNonzeroMagnitude)]
        for _ in 0..<3_000 {
            dates.append(random.chance(2) ? random.date()
                : Date(timeIntervalSince1970: Double(random.below(4_000_000_000)) + Double(random.below(1000)) / 1000))
        }
        let failures = checkKeyOrderAgainstOracle(dates, seed: 81, key: { KeyEncoder.key(.date($0)) }, oracle: nativeCompare,
                                     describe: { "Date(\($0.timeIntervalSinceReferenceDate))" })
        #expect(failures.count == 0, failures.report(seed: 81))
    }

    /// `Date`'s `==` compares the intervals, so the date at -0.0 is the date at 0.0 and needs the same key.
    @Test func dateAtNegativeZeroEncodesLikeDateAtZero() {
        let minusZero = Date(timeIntervalSinceReferenceDate: -0.0)
        let zero = Date(timeIntervalSinceReferenceDate: 0.0)
        #expect(minusZero == zero)
        #expect(KeyEncoder.key(.date(minusZero)) == KeyEncoder.key(.date(zero)),
                "\(keyHex(KeyEncoder.key(.date(minusZero)))) vs \(keyHex(KeyEncoder.key(.date(zero))))")
    }

    @Test func uuidsSortLikeSwiftAndByTheirBytes() {
        var random = CodecRandom(seed: 91)
        var uuids = (0..<2_000).map { _ in random.uuid() }
        uuids.append(contentsOf: uuids.prefix(50))   // equal pairs
        let bySwift = checkKeyOrderAgainstOracle(uuids, seed: 91, key: { KeyEncoder.key(.uuid($0)) }, oracle: nativeCompare,
                                    describe: { $0.uuidString })
        #expect(bySwift.count == 0, bySwift.report(seed: 91))
        let byBytes = checkKeyOrderAgainstOracle(uuids, seed: 92, key: { KeyEncoder.key(.uuid($0)) }, oracle: KeyOracle.uuidCompare,
                                    describe: { $0.uuidString })
        #expect(byBytes.count == 0, byBytes.report(seed: 92))
    }

    @Test func bytesSortLexicographically() {
        var random = CodecRandom(seed: 101)
        let values = (0..<2_000).map { _ in random.bytes(maxLength: 5) }
        let failures = checkKeyOrderAgainstOracle(values, seed: 101, key: { KeyEncoder.key(.bytes($0)) },
                                     oracle: { $0.lexicographicallyPrecedes($1) ? -1 : ($0 == $1 ? 0 : 1) },
                                     describe: { keyHex($0) })
        #expect(failures.count == 0, failures.report(seed: 101))
    }

    @Test func nullSortsBeforeEveryOtherValue() {
        var random = CodecRandom(seed: 111)
        let nullKey = KeyEncoder.key(.null)
        var failures = CodecFailures()
        for _ in 0..<5_000 {
            let v = random.documentValue(depth: 2, allowNaN: true)
            if v == .null { continue }
            if keyBytesCompare(nullKey, KeyEncoder.key(v)) >= 0 { failures.add("null does not sort before \(valueDescription(v))") }
        }
        #expect(failures.count == 0, failures.report(seed: 111))
    }

    @Test func optionalNilSortsBeforeEveryValue() {
        var random = CodecRandom(seed: 112)
        let values: [Int?] = (0..<2_000).map { _ in random.chance(5) ? nil : Int(random.integer(Int64.self)) }
        func optionalKey(_ v: Int?) -> [UInt8] { KeyEncoder.key(v.map { .int(Int64($0)) } ?? .null) }
        let failures = checkKeyOrderAgainstOracle(values, seed: 112, key: optionalKey, oracle: { a, b in
            switch (a, b) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?): return nativeCompare(x, y)
            }
        }, describe: { "\($0.map(String.init) ?? "nil")" })
        #expect(failures.count == 0, failures.report(seed: 112))
    }

    @Test func kindsSortNullBooleansNaNNumbersDatesStringsBytesUUIDsArraysObjects() {
        var random = CodecRandom(seed: 121)
        let values = (0..<3_000).map { _ in random.documentValue(depth: 2, allowNaN: true) }
        let failures = checkKeyOrderAgainstOracle(values, seed: 121, key: { KeyEncoder.key($0) },
                                     oracle: { nativeCompare(KeyOracle.rank($0), KeyOracle.rank($1)) == 0
                                         ? keyBytesCompare(KeyEncoder.key($0), KeyEncoder.key($1))
                                         : nativeCompare(KeyOracle.rank($0), KeyOracle.rank($1)) },
                                     describe: valueDescription)
        #expect(failures.count == 0, failures.report(seed: 121))
    }

    // MARK: Strings

    @Test func asciiStringsSortLikeSwift() {
        var random = CodecRandom(seed: 131)
        var values = ["", "\0", "\0\0", "a", "a\0", "a\0b", "a\u{1}", "ab", "b", "\u{7F}", "A", "a\0\0"]
        for _ in 0..<3_000 { values.append(random.asciiString()) }
        let failures = checkKeyOrderAgainstOracle(values, seed: 131, key: { KeyEncoder.key(.string($0)) },
                                     oracle: consistentSwiftStringOrder, describe: scalarsDescription)
        #expect(failures.count == 0, failures.report(seed: 131))
    }

    @Test func unicodeStringsSortLikeSwift() {
        var random = CodecRandom(seed: 141)
        var values = ["", "e", "\u{E9}", "e\u{301}", "e\u{301}x", "\u{E9}\0", "\u{1F600}", "\u{1F44D}\u{1F3FD}",
                      "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}", "\u{1F1F3}\u{1F1F4}", "\u{212B}", "\u{C5}",
                      "A\u{30A}", "\u{FFFD}", "\u{10000}", "\u{FB01}", "fi", "\u{AC00}", "z"]
        for _ in 0..<3_000 { values.append(random.unicodeString()) }
        let failures = checkKeyOrderAgainstOracle(values, seed: 141, key: { KeyEncoder.key(.string($0)) },
                                     oracle: consistentSwiftStringOrder, describe: scalarsDescription)
        #expect(failures.count == 0, failures.report(seed: 141))
    }

    @Test func canonicallyEquivalentStringsEncodeEqual() {
        var pairs: [(String, String)] = [
            ("e\u{301}", "\u{E9}"), ("A\u{30A}", "\u{C5}"), ("\u{212B}", "\u{C5}"), ("\u{2126}", "\u{3A9}"),
            ("x\u{301}\u{316}", "x\u{316}\u{301}"), ("\u{1100}\u{1161}", "\u{AC00}"),
            ("\u{1100}\u{1161}\u{11A8}", "\u{AC01}"), ("caf\u{E9}", "cafe\u{301}"), ("o\u{308}\u{304}", "\u{22B}"),
        ]
        var random = CodecRandom(seed: 151)
        for _ in 0..<2_000 {
            let s = random.unicodeString()
            pairs.append((s, s.decomposedStringWithCanonicalMapping))
            pairs.append((s.decomposedStringWithCanonicalMapping, s.precomposedStringWithCanonicalMapping))
        }
        var failures = CodecFailures()
        for (a, b) in pairs {
            guard a == b else { failures.add("Swift says \(scalarsDescription(a)) != \(scalarsDescription(b))"); continue }
            let (ka, kb) = (KeyEncoder.key(.string(a)), KeyEncoder.key(.string(b)))
            if ka != kb { failures.add("\(scalarsDescription(a)) == \(scalarsDescription(b)) but keys \(keyHex(ka)) != \(keyHex(kb))") }
        }
        #expect(failures.count == 0, failures.report(seed: 151))
    }

    /// A precomposed Hangul LV syllable followed by a trailing consonant jamo is canonically equivalent to the
    /// LVT syllable (Swift's `==` agrees), so both spellings need one key.
    @Test func hangulSyllableWithTrailingJamoEncodesLikeItsPrecomposedForm() {
        var failures = CodecFailures()
        for l in 0..<19 {
            for v in 0..<21 {
                let lv = 0xAC00 + UInt32((l * 21 + v) * 28)
                for t in 1..<28 {
                    let split = String(String.UnicodeScalarView([Unicode.Scalar(lv)!, Unicode.Scalar(0x11A7 + UInt32(t))!]))
                    let whole = String(Unicode.Scalar(lv + UInt32(t))!)
                    guard split == whole else { continue }   // Swift disagrees: nothing to hold DocStore to
                    let (ks, kw) = (KeyEncoder.key(.string(split)), KeyEncoder.key(.string(whole)))
                    if ks != kw { failures.add("\(scalarsDescription(split)) == \(scalarsDescription(whole)) but keys \(keyHex(ks)) != \(keyHex(kw))") }
                }
            }
        }
        #expect(failures.count == 0, failures.report(seed: 0))
    }

    /// Two combining marks of different classes after a letter are canonically equivalent in either order;
    /// checked for every combining mark the standard library knows.
    @Test func combiningMarksInEitherCanonicalOrderEncodeEqual() {
        var failures = CodecFailures()
        var checked = 0
        for value in UInt32(0)...0x10FFFF {
            guard let mark = Unicode.Scalar(value) else { continue }
            let ccc = mark.properties.canonicalCombiningClass.rawValue
            guard ccc != 0 else { continue }
            let other: Unicode.Scalar = ccc == 220 ? "\u{301}" : "\u{323}"   // classes 230 and 220
            let a = String(String.UnicodeScalarView(["x", mark, other]))
            let b = String(String.UnicodeScalarView(["x", other, mark]))
            guard a == b else { continue }
            checked += 1
            let (ka, kb) = (KeyEncoder.key(.string(a)), KeyEncoder.key(.string(b)))
            if ka != kb { failures.add("\(scalarsDescription(a)) == \(scalarsDescription(b)) (class \(ccc)) but keys \(keyHex(ka)) != \(keyHex(kb))") }
        }
        #expect(checked > 500)
        #expect(failures.count == 0, failures.report(seed: 0))
    }

    // MARK: Compound keys

    @Test func stringIntTuplesSortLikeTheirKeys() {
        var random = CodecRandom(seed: 161)
        let strings = (0..<40).map { _ in random.chance(2) ? random.asciiString(maxLength: 3) : random.unicodeString(maxPieces: 2) }
        let tuples: [(String, Int)] = (0..<2_500).map { _ in
            (random.pick(strings), random.chance(2) ? random.below(7) - 3 : Int(random.integer(Int64.self)))
        }
        let failures = checkKeyOrderAgainstOracle(tuples, seed: 161, key: { compoundKeyBytes([.string($0.0), .int(Int64($0.1))]) },
                                     oracle: { a, b in
                                         guard let first = consistentSwiftStringOrder(a.0, b.0) else { return nil }
                                         return first != 0 ? first : nativeCompare(a.1, b.1)
                                     },
                                     describe: { "(\(scalarsDescription($0.0)), \($0.1))" })
        #expect(failures.count == 0, failures.report(seed: 161))
    }

    @Test func optionalIntDoubleTuplesSortLikeTheirKeys() {
        var random = CodecRandom(seed: 171)
        let tuples: [(Int?, Double)] = (0..<2_500).map { _ in
            (random.chance(4) ? nil : random.below(5) - 2, random.chance(2) ? Double(random.below(5)) - 2 : random.double())
        }
        func optionalCompare(_ a: Int?, _ b: Int?) -> Int {
            switch (a, b) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?): return nativeCompare(x, y)
            }
        }
        let failures = checkKeyOrderAgainstOracle(tuples, seed: 171,
                                     key: { compoundKeyBytes([$0.0.map { .int(Int64($0)) } ?? .null, .double($0.1)]) },
                                     oracle: { a, b in
                                         let first = optionalCompare(a.0, b.0)
                                         return first != 0 ? first : nativeCompare(a.1, b.1)
                                     },
                                     describe: { "(\($0.0.map(String.init) ?? "nil"), \($0.1))" })
        #expect(failures.count == 0, failures.report(seed: 171))
    }

    @Test func integerArraysSortLexicographically() {
        var random = CodecRandom(seed: 181)
        let arrays: [[Int64]] = (0..<2_000).map { _ in (0..<random.below(4)).map { _ in Int64(random.below(5)) - 2 } }
        let failures = checkKeyOrderAgainstOracle(arrays, seed: 181, key: { KeyEncoder.key(.array($0.map { .int($0) })) },
                                     oracle: { $0.lexicographicallyPrecedes($1) ? -1 : ($0 == $1 ? 0 : 1) },
                                     describe: { "\($0)" })
        #expect(failures.count == 0, failures.report(seed: 181))
    }

    @Test func randomValueTuplesSortLikeTheExactOracle() {
        var random = CodecRandom(seed: 191)
        let parts = (0..<30).map { _ in random.documentValue(depth: 1, allowNaN: true) }
        let tuples = (0..<2_500).map { _ in (0..<(1 + random.below(3))).map { _ in random.pick(parts) } }
        let failures = checkKeyOrderAgainstOracle(tuples, seed: 191, key: compoundKeyBytes, oracle: KeyOracle.compare(sequence:_:),
                                     describe: { "(" + $0.map(valueDescription).joined(separator: ", ") + ")" })
        #expect(failures.count == 0, failures.report(seed: 191))
    }

    @Test func prefixKeyAndItsUpperBoundEncloseExactlyTheKeysThatStartWithIt() {
        var random = CodecRandom(seed: 201)
        let strings = ["", "a", "a\0", "ab", "b", "\u{E9}", "\u{FF}", "\u{10FFFF}"]
        let numbers: [DocumentValue] = [.int(-1), .int(0), .double(0.5), .int(1 << 53 + 1), .double(0x1p53), .uint(UInt64.max),
                                        .double(.infinity), .double(.nan), .null, .bool(true), .int(Int64.max)]
        func randomPart(_ i: Int) -> DocumentValue {
            switch i {
            case 0: return .string(random.pick(strings))
            case 1: return random.pick(numbers)
            default: return random.chance(2) ? .uuid(random.uuid()) : .bytes(random.pick([[], [0], [0xFF], [0xFF, 0xFF], [1]]))
            }
        }
        let full = (0..<1_500).map { _ in (0..<3).map { randomPart($0) } }
        var failures = CodecFailures()
        for _ in 0..<400 {
            let k = 1 + random.below(2)
            let prefixParts = Array(random.pick(full).prefix(k))
            let prefixKey = compoundKeyBytes(prefixParts)
            guard let upper = KeyEncoder.prefixUpperBound(prefixKey) else {
                failures.add("no upper bound for \(keyHex(prefixKey))"); continue
            }
            for parts in full {
                let key = compoundKeyBytes(parts)
                let order = KeyOracle.compare(sequence: Array(parts.prefix(k)), prefixParts)
                let label = "(" + parts.map(valueDescription).joined(separator: ", ") + ") vs prefix (" + prefixParts.map(valueDescription).joined(separator: ", ") + ")"
                switch order {
                case 0:
                    if !(keyBytesCompare(prefixKey, key) <= 0 && keyBytesCompare(key, upper) < 0) {
                        failures.add("\(label): key \(keyHex(key)) outside [\(keyHex(prefixKey)), \(keyHex(upper)))")
                    }
                case 1...:
                    if keyBytesCompare(upper, key) > 0 { failures.add("\(label): greater tuple's key \(keyHex(key)) below bound \(keyHex(upper))") }
                default:
                    if keyBytesCompare(key, prefixKey) >= 0 { failures.add("\(label): smaller tuple's key \(keyHex(key)) not below \(keyHex(prefixKey))") }
                }
            }
        }
        #expect(failures.count == 0, failures.report(seed: 201))
        #expect(KeyEncoder.prefixUpperBound([0x01, 0xFF, 0xFF]) == [0x02])
        #expect(KeyEncoder.prefixUpperBound([0xFF, 0xFF]) == nil)
        #expect(KeyEncoder.prefixUpperBound([]) == nil)
    }

    @Test func stringPrefixMatchesHasPrefixForASCII() {
        var random = CodecRandom(seed: 211)
        let strings = (0..<400).map { _ in random.asciiString(maxLength: 5) } + ["", "a", "a\0", "ab"]
        let prefixes = (0..<150).map { _ in random.asciiString(maxLength: 3) } + ["", "a", "a\0", "\0"]
        var failures = CodecFailures()
        for p in prefixes {
            let bound = KeyEncoder.stringPrefix(p)
            let upper = KeyEncoder.prefixUpperBound(bound)
            for s in strings {
                let key = KeyEncoder.key(.string(s))
                let startsWith = key.starts(with: bound)
                let inRange = keyBytesCompare(bound, key) <= 0 && upper.map { keyBytesCompare(key, $0) < 0 } ?? true
                if startsWith != s.hasPrefix(p) || inRange != s.hasPrefix(p) {
                    failures.add("\(scalarsDescription(s)).hasPrefix(\(scalarsDescription(p))) is \(s.hasPrefix(p)) but key \(keyHex(key)) starts with \(keyHex(bound)): \(startsWith), in range: \(inRange)")
                }
            }
        }
        #expect(failures.count == 0, failures.report(seed: 211))
    }

    @Test func stringPrefixBoundsEveryUnicodeStringWithThatPrefix() {
        var random = CodecRandom(seed: 221)
        var failures = CodecFailures()
        for _ in 0..<3_000 {
            let p = random.unicodeString(maxPieces: 3).precomposedStringWithCanonicalMapping
            let s = (p + random.unicodeString(maxPieces: 3)).precomposedStringWithCanonicalMapping
            guard s.hasPrefix(p) else { continue }
            let bound = KeyEncoder.stringPrefix(p)
            let key = KeyEncoder.key(.string(s))
            if !key.starts(with: bound) {
                failures.add("\(scalarsDescription(s)) has prefix \(scalarsDescription(p)) but key \(keyHex(key)) does not start with \(keyHex(bound))")
            }
        }
        #expect(failures.count == 0, failures.report(seed: 221))
    }

    // MARK: Keys read from encoded documents

    @Test func keyOfAValueInAnEncodedDocumentMatchesKeyOfTheDocumentValue() throws {
        var random = CodecRandom(seed: 231)
        var failures = CodecFailures()
        for _ in 0..<2_000 {
            let value = random.documentValue(depth: 3, allowNaN: true)
            let encoded = value.encoded()
            let fromDocument = try encoded.withUnsafeBytes { raw -> [UInt8] in
                let reader = BinaryReader(raw)
                var e = KeyEncoder()
                try e.append(try reader.root(), in: reader)
                return e.bytes
            }
            let direct = KeyEncoder.key(value)
            if fromDocument != direct {
                failures.add("\(valueDescription(value)): from document \(keyHex(fromDocument)), direct \(keyHex(direct))")
            }
        }
        #expect(failures.count == 0, failures.report(seed: 231))
    }
}
