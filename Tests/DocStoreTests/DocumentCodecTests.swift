import Foundation
import Testing
@_spi(Fuzzing) @testable import DocStore

// MARK: - Models

private enum Color: String, Codable, CaseIterable {
    case red, green, blue
    case ultraViolet = "ultra-violet"
}

/// Synthesized Codable for an enum with associated values: labelled, unlabelled (`_0`, `_1`) and none.
private enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case rect(width: Int, height: Int)
    case point
    case label(String, Int?)
    case group(name: String, colors: [Color])
}

/// Floating-point fields, equal when the bits are equal or both are NaN.
private struct Floats: Codable, Equatable {
    var float: Float
    var double: Double
    var floats: [Float]
    var doubles: [Double]
    var maybeDouble: Double?

    static func == (a: Floats, b: Floats) -> Bool {
        same(a.float, b.float) && same(a.double, b.double)
            && a.floats.count == b.floats.count && zip(a.floats, b.floats).allSatisfy { same($0, $1) }
            && a.doubles.count == b.doubles.count && zip(a.doubles, b.doubles).allSatisfy { same($0, $1) }
            && (a.maybeDouble == nil) == (b.maybeDouble == nil)
            && same(a.maybeDouble ?? 0, b.maybeDouble ?? 0)
    }

    static func same<F: BinaryFloatingPoint>(_ a: F, _ b: F) -> Bool {
        (a.isNaN && b.isNaN) || (a == b && a.sign == b.sign)
    }
}

private struct Address: Codable, Equatable {
    var street: String
    var city: String
    var zip: String
    var geo: [Double]
}

private struct Item: Codable, Equatable {
    var name: String
    var qty: Int
    var price: Double?
    var color: Color?
}

/// Stored under other names than its properties.
private struct Renamed: Codable, Equatable {
    var firstName: String
    var lastName: String?
    var internalCount: Int

    enum CodingKeys: String, CodingKey {
        case firstName = "first_name"
        case lastName = "last"
        case internalCount = "n"
    }
}

/// Field names that are long (a two-byte length), not ASCII, or empty.
private struct OddNames: Codable, Equatable {
    var long: Int
    var size: String
    var blank: Bool

    enum CodingKeys: String, CodingKey {
        case long = "a_field_name_longer_than_one_hundred_and_twenty_seven_bytes_so_that_its_length_takes_two_varint_bytes_in_the_document_format_of_docstore"
        case size = "gr\u{F6}\u{DF}e \u{540D}\u{524D}"
        case blank = ""
    }
}

/// Encodes a struct through a single-value container.
private struct Wrapper: Codable, Equatable {
    var inner: Address

    init(inner: Address) { self.inner = inner }
    init(from decoder: any Decoder) throws { inner = try decoder.singleValueContainer().decode(Address.self) }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(inner)
    }
}

/// A string stored as a bare string.
private struct Tag: Codable, Equatable {
    var raw: String
    init(_ raw: String) { self.raw = raw }
    init(from decoder: any Decoder) throws { raw = try decoder.singleValueContainer().decode(String.self) }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(raw)
    }
}

private struct Everything: Codable, Equatable {
    var int: Int
    var int8: Int8
    var int16: Int16
    var int32: Int32
    var int64: Int64
    var uint: UInt
    var uint8: UInt8
    var uint16: UInt16
    var uint32: UInt32
    var uint64: UInt64
    var floats: Floats
    var flag: Bool
    var text: String
    var date: Date
    var id: UUID
    var blob: Data
    var link: URL
    var maybeInt: Int?
    var maybeText: String?
    var maybeAddress: Address?
    var maybeColor: Color?
    var maybeBool: Bool?
    var tags: [String]
    var numbers: [Int]
    var empty: [String]
    var matrix: [[Int]]
    var optionals: [Int?]
    var smallNumbers: [UInt8]
    var address: Address
    var items: [Item]
    var counts: [String: Int]
    var byNumber: [Int: String]
    var color: Color
    var palette: [Color]
    var shape: Shape
    var shapes: [Shape]
    var renamed: Renamed
    var wrapped: Wrapper
    var tagged: [Tag]
    var oddNames: OddNames
}

/// Fewer fields than `Everything`, declared in another order.
private struct Summary: Codable, Equatable {
    struct City: Codable, Equatable { var city: String }
    struct ItemName: Codable, Equatable { var name: String }
    var color: Color
    var address: City
    var text: String
    var items: [ItemName]
    var int8: Int8
    var maybeText: String?

    init(_ e: Everything) {
        color = e.color
        address = City(city: e.address.city)
        text = e.text
        items = e.items.map { ItemName(name: $0.name) }
        int8 = e.int8
        maybeText = e.maybeText
    }
}

// A class hierarchy: `Dog` encodes its superclass through `superEncoder()`, `Puppy` through `superEncoder(forKey:)`.

private class Animal: Codable {
    var name: String
    var legs: Int

    init(name: String, legs: Int) {
        self.name = name
        self.legs = legs
    }

    func same(as other: Animal) -> Bool {
        type(of: self) == type(of: other) && name == other.name && legs == other.legs
    }
}

private class Dog: Animal {
    var breed: String
    var good: Bool

    private enum CodingKeys: String, CodingKey { case breed, good }

    init(name: String, legs: Int, breed: String, good: Bool) {
        self.breed = breed
        self.good = good
        super.init(name: name, legs: legs)
    }

    required init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        breed = try c.decode(String.self, forKey: .breed)
        good = try c.decode(Bool.self, forKey: .good)
        try super.init(from: c.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(breed, forKey: .breed)
        try super.encode(to: c.superEncoder())
        try c.encode(good, forKey: .good)   // written after the superclass's nested object
    }

    override func same(as other: Animal) -> Bool {
        guard let other = other as? Dog else { return false }
        return super.same(as: other) && breed == other.breed && good == other.good
    }
}

private final class Puppy: Dog {
    var toys: [String]
    var mentor: Animal?

    private enum CodingKeys: String, CodingKey { case toys, parent, mentor }

    init(name: String, breed: String, toys: [String], mentor: Animal?) {
        self.toys = toys
        self.mentor = mentor
        super.init(name: name, legs: 4, breed: breed, good: true)
    }

    required init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        toys = try c.decode([String].self, forKey: .toys)
        mentor = try c.decodeIfPresent(Animal.self, forKey: .mentor)
        try super.init(from: c.superDecoder(forKey: .parent))
    }

    override func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try super.encode(to: c.superEncoder(forKey: .parent))
        try c.encode(toys, forKey: .toys)
        try c.encodeIfPresent(mentor, forKey: .mentor)
    }

    override func same(as other: Animal) -> Bool {
        guard let other = other as? Puppy, super.same(as: other), toys == other.toys else { return false }
        switch (mentor, other.mentor) {
        case (nil, nil): return true
        case (let a?, let b?): return a.same(as: b)
        default: return false
        }
    }
}

// MARK: - Random models

extension CodecRandom {
    fileprivate mutating func anyDouble(allowNaN: Bool, finite: Bool) -> Double {
        if allowNaN && chance(10) { return pick([.nan, -.nan, .signalingNaN]) }
        let d = double()
        return finite && !d.isFinite ? 1.25 : d
    }

    fileprivate mutating func anyFloat(allowNaN: Bool, finite: Bool) -> Float {
        if allowNaN && chance(10) { return .nan }
        let f = float()
        return finite && !f.isFinite ? -2.5 : f
    }

    fileprivate mutating func text() -> String { chance(2) ? asciiString(maxLength: 10) : unicodeString() }

    fileprivate mutating func maybe<T>(_ make: (inout CodecRandom) -> T) -> T? { chance(3) ? nil : make(&self) }

    fileprivate mutating func list<T>(_ max: Int, _ make: (inout CodecRandom) -> T) -> [T] {
        (0..<below(max + 1)).map { _ in make(&self) }
    }

    fileprivate mutating func address(finite: Bool) -> Address {
        Address(street: text(), city: pick(["Oslo", "Bergen", "Tromsø", "東京", "", "Zürich"]), zip: asciiString(maxLength: 5),
                geo: list(3) { $0.anyDouble(allowNaN: false, finite: finite) })
    }

    fileprivate mutating func shape() -> Shape {
        switch below(5) {
        case 0: return .circle(radius: anyDouble(allowNaN: false, finite: true))
        case 1: return .rect(width: Int(integer(Int64.self)), height: below(100))
        case 2: return .point
        case 3: return .label(text(), maybe { Int($0.integer(Int32.self)) })
        default: return .group(name: text(), colors: list(3) { $0.pick(Color.allCases) })
        }
    }

    fileprivate mutating func url() -> URL {
        let path = String((0..<below(8)).map { _ in pick(Array("abcxyz019-_~")) })
        let candidates = ["https://example.com/\(path)?q=\(below(1000))", "mailto:\(path)@example.org", "urn:isbn:0451450523",
                          "file:///tmp/\(path)", "http://[::1]:8080/\(path)#frag"]
        return URL(string: pick(candidates))!
    }

    fileprivate mutating func date(finite: Bool) -> Date {
        let d = date()
        if finite && !d.timeIntervalSinceReferenceDate.isFinite { return Date(timeIntervalSinceReferenceDate: 1) }
        return d
    }

    /// A random `Everything`. `jsonSafe` keeps to what `JSONEncoder` can write: no NaN, no infinities.
    fileprivate mutating func everything(jsonSafe: Bool = false) -> Everything {
        let nan = !jsonSafe, finite = jsonSafe
        var counts: [String: Int] = [:]
        for _ in 0..<below(4) { counts[text()] = Int(integer(Int64.self)) }
        var byNumber: [Int: String] = [:]
        for _ in 0..<below(4) { byNumber[Int(integer(Int16.self))] = text() }
        return Everything(
            int: Int(integer(Int64.self)), int8: integer(Int8.self), int16: integer(Int16.self), int32: integer(Int32.self),
            int64: integer(Int64.self), uint: UInt(integer(UInt64.self)), uint8: integer(UInt8.self), uint16: integer(UInt16.self),
            uint32: integer(UInt32.self), uint64: integer(UInt64.self),
            floats: Floats(float: anyFloat(allowNaN: nan, finite: finite), double: anyDouble(allowNaN: nan, finite: finite),
                           floats: list(3) { $0.anyFloat(allowNaN: nan, finite: finite) },
                           doubles: list(4) { $0.anyDouble(allowNaN: nan, finite: finite) },
                           maybeDouble: maybe { $0.anyDouble(allowNaN: nan, finite: finite) }),
            flag: chance(2), text: text(), date: date(finite: finite), id: uuid(), blob: Data(bytes(maxLength: 20)), link: url(),
            maybeInt: maybe { Int($0.integer(Int64.self)) }, maybeText: maybe { $0.text() },
            maybeAddress: maybe { $0.address(finite: finite) }, maybeColor: maybe { $0.pick(Color.allCases) },
            maybeBool: maybe { $0.chance(2) },
            tags: list(4) { $0.text() }, numbers: list(5) { Int($0.integer(Int64.self)) }, empty: [],
            matrix: list(3) { r in r.list(3) { Int($0.integer(Int8.self)) } },
            optionals: list(4) { r in r.maybe { Int($0.integer(Int32.self)) } },
            smallNumbers: list(4) { $0.integer(UInt8.self) },
            address: address(finite: finite),
            items: (0..<(2 + below(3))).map { _ in
                Item(name: text(), qty: below(7) - 3, price: maybe { $0.anyDouble(allowNaN: false, finite: true) },
                     color: maybe { $0.pick(Color.allCases) })
            },
            counts: counts, byNumber: byNumber, color: pick(Color.allCases), palette: list(3) { $0.pick(Color.allCases) },
            shape: shape(), shapes: list(3) { $0.shape() },
            renamed: Renamed(firstName: text(), lastName: maybe { $0.text() }, internalCount: Int(integer(Int32.self))),
            wrapped: Wrapper(inner: address(finite: finite)), tagged: list(3) { Tag($0.text()) },
            oddNames: OddNames(long: Int(integer(Int64.self)), size: text(), blank: chance(2)))
    }

    fileprivate mutating func animal() -> Animal {
        let name = text()
        switch below(3) {
        case 0: return Animal(name: name, legs: below(9))
        case 1: return Dog(name: name, legs: below(5), breed: text(), good: chance(2))
        default:
            // A mentor of static type `Animal` decodes as an `Animal`, so only plain animals round-trip there.
            let mentor: Animal? = chance(2) ? nil : Animal(name: text(), legs: below(5))
            return Puppy(name: name, breed: text(), toys: list(3) { $0.text() }, mentor: mentor)
        }
    }
}

// MARK: - Helpers

/// Equality down to the bits: doubles and dates by bit pattern, strings by their UTF-8, `.int` never equal to `.uint`.
private func identical(_ a: DocumentValue, _ b: DocumentValue) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
    case (.date(let x), .date(let y)):
        return x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
    case (.string(let x), .string(let y)): return Array(x.utf8) == Array(y.utf8)
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { identical($0, $1) }
    case (.object(let x), .object(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { Array($0.name.utf8) == Array($1.name.utf8) && identical($0.value, $1.value) }
    default: return a == b
    }
}

/// How a decoding error is told apart: its case, and its coding path with array indices as numbers.
private struct ErrorShape: Equatable, CustomStringConvertible {
    var kind: String
    var path: [String]
    var key: String?

    var description: String { "\(kind) at \(path)" + (key.map { " key \($0)" } ?? "") }

    init(kind: String, path: [String], key: String? = nil) {
        self.kind = kind
        self.path = path
        self.key = key
    }

    init(_ error: any Error) {
        func names(_ path: [any CodingKey]) -> [String] { path.map { $0.intValue.map(String.init) ?? $0.stringValue } }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            self.init(kind: "keyNotFound", path: names(context.codingPath), key: key.stringValue)
        case DecodingError.typeMismatch(_, let context): self.init(kind: "typeMismatch", path: names(context.codingPath))
        case DecodingError.valueNotFound(_, let context): self.init(kind: "valueNotFound", path: names(context.codingPath))
        case DecodingError.dataCorrupted(let context): self.init(kind: "dataCorrupted", path: names(context.codingPath))
        default: self.init(kind: "\(type(of: error)): \(error)", path: [])
        }
    }
}

private enum Step {
    case field(String)
    case index(Int)
}

/// `value` with the value at `path` replaced, or removed when `replacement` is nil.
private func replacing(_ path: [Step], in value: DocumentValue, with replacement: DocumentValue?) -> DocumentValue {
    guard let first = path.first else { return replacement ?? .null }
    let rest = Array(path.dropFirst())
    switch (first, value) {
    case (.field(let name), .object(var fields)):
        guard let i = fields.firstIndex(where: { $0.name == name }) else { return value }
        if rest.isEmpty && replacement == nil { fields.remove(at: i) } else {
            fields[i].value = replacing(rest, in: fields[i].value, with: replacement)
        }
        return .object(fields)
    case (.index(let i), .array(var elements)):
        elements[i] = replacing(rest, in: elements[i], with: replacement)
        return .array(elements)
    default: return value
    }
}

/// The same replacement in a JSONSerialization tree.
private func replacing(_ path: [Step], inJSON value: Any, with replacement: Any?) -> Any {
    guard let first = path.first else { return replacement ?? NSNull() }
    let rest = Array(path.dropFirst())
    switch first {
    case .field(let name):
        var dict = value as! [String: Any]
        if rest.isEmpty && replacement == nil { dict.removeValue(forKey: name) } else {
            dict[name] = replacing(rest, inJSON: dict[name]!, with: replacement)
        }
        return dict
    case .index(let i):
        var array = value as! [Any]
        array[i] = replacing(rest, inJSON: array[i], with: replacement)
        return array
    }
}

/// The text of a tag object `{"<tag>": "text"}` (which may hold fields of `others` too), or nil when `parsed` is
/// not one.
private func tag(_ parsed: Any, _ name: String, alongside others: Set<String> = []) -> String? {
    guard let dict = parsed as? [String: Any], Set(dict.keys).subtracting(others) == [name] else { return nil }
    return dict[name] as? String
}

/// Where `parsed` (from JSONSerialization) differs from what `value.json()` should say, or nil when it does not.
private func jsonMismatch(_ value: DocumentValue, _ parsed: Any, at path: String = "$") -> String? {
    func check(_ ok: Bool) -> String? { ok ? nil : "\(path): \(value) read back as \(type(of: parsed)) \(parsed)" }
    switch value {
    case .null: return check(parsed is NSNull)
    case .bool(let b): return check((parsed as? NSNumber)?.boolValue == b)
    case .int(let i): return check((parsed as? NSNumber)?.stringValue == String(i))
    case .uint(let u): return check(tag(parsed, "$uint") == String(u))
    case .double(let d):
        // JSONSerialization reads some numbers as NSDecimalNumber, whose doubleValue rounds; its text does not.
        guard let n = parsed as? NSNumber else { return check(false) }
        return check(n.doubleValue == d || Double(n.stringValue) == d)
    case .string(let s): return check((parsed as? String).map { Array($0.unicodeScalars) == Array(s.unicodeScalars) } ?? false)
    case .bytes(let b): return check(tag(parsed, "$bytes") == Data(b).base64EncodedString())
    case .uuid(let u): return check(tag(parsed, "$uuid") == u.uuidString)
    case .date(let d):
        guard let text = tag(parsed, "$date", alongside: ["$seconds"]) else { return check(false) }
        // Foundation's ISO 8601 style truncates to milliseconds (and misprints intervals in (-1e-3, 0)), so the
        // instant is checked only where that cannot matter.
        let t = d.timeIntervalSinceReferenceDate
        guard abs(t) < 1e9, t == 0 || abs(t) >= 1e-3 else { return nil }
        let back = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        return check(back.map { abs($0.timeIntervalSince(d)) < 0.0015 } ?? false)
    case .array(let elements):
        guard let array = parsed as? [Any], array.count == elements.count else { return check(false) }
        for (i, (e, p)) in zip(elements, array).enumerated() {
            if let m = jsonMismatch(e, p, at: "\(path)[\(i)]") { return m }
        }
        return nil
    case .object(let fields):
        var parsed = parsed
        // An object with a field named with a `$` is wrapped.
        if fields.contains(where: { $0.name.hasPrefix("$") }) {
            guard let wrapper = parsed as? [String: Any], wrapper.count == 1, let inner = wrapper["$object"] else {
                return check(false)
            }
            parsed = inner
        }
        guard let dict = parsed as? [String: Any], dict.count == fields.count else { return check(false) }
        for f in fields {
            guard let p = dict[f.name] else { return "\(path): no field \(scalarsDescription(f.name)) in \(dict.keys.map(scalarsDescription))" }
            if let m = jsonMismatch(f.value, p, at: "\(path).\(f.name)") { return m }
        }
        return nil
    }
}

/// Every path of objects inside `value` (unique names assumed), with the value found there.
private func allFieldPaths(_ value: DocumentValue, prefix: [String] = []) -> [([String], DocumentValue)] {
    guard case .object(let fields) = value else { return [] }
    return fields.flatMap { f in [(prefix + [f.name], f.value)] + allFieldPaths(f.value, prefix: prefix + [f.name]) }
}

/// Reads the value at `path` from encoded bytes without decoding the rest.
private func readPath(_ path: FieldPath, in bytes: [UInt8]) throws -> DocumentValue? {
    try bytes.withUnsafeBytes { raw in
        let reader = BinaryReader(raw)
        guard let ref = try reader.value(atPath: path, from: try reader.root()) else { return nil }
        return try DocumentValue(reader: reader, ref: ref)
    }
}

// MARK: - Tests

@Suite struct DocumentCodecTests {

    // MARK: Round trips

    /// The version byte first, the checksum of everything before it last.
    @Test func everyDocumentStartsWithTheFormatVersionAndEndsWithItsChecksum() throws {
        func sealed(_ bytes: [UInt8]) -> Bool {
            let body = bytes.dropLast(BinaryFormat.checksumSize)
            let stored = bytes.suffix(BinaryFormat.checksumSize).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            return bytes.first == BinaryFormat.version && Array(body).withUnsafeBytes { CRC32C.checksum($0) } == stored
        }
        var random = CodecRandom(seed: 1001)
        for _ in 0..<50 {
            #expect(sealed(try DocumentEncoder().encode(random.everything())))
            #expect(sealed(random.documentValue(depth: 2).encoded()))
        }
        #expect(sealed(try DocumentEncoder().encode(42)))
    }

    @Test func randomRichModelsRoundTrip() throws {
        var random = CodecRandom(seed: 1011)
        var failures = CodecFailures()
        for i in 0..<400 {
            let value = random.everything()
            let copy = try DocumentDecoder().decode(Everything.self, from: try DocumentEncoder().encode(value))
            if copy != value { failures.add("#\(i): \(value)\n  decoded as \(copy)") }
        }
        #expect(failures.count == 0, failures.report(seed: 1011))
    }

    @Test func extremeValuesRoundTrip() throws {
        var random = CodecRandom(seed: 1021)
        var low = random.everything()
        low.int = .min; low.int8 = .min; low.int16 = .min; low.int32 = .min; low.int64 = .min
        low.uint = .min; low.uint8 = .min; low.uint16 = .min; low.uint32 = .min; low.uint64 = .min
        low.floats = Floats(float: -.infinity, double: -.infinity, floats: [-.greatestFiniteMagnitude, -0.0, .nan],
                            doubles: [-.greatestFiniteMagnitude, -0.0, -.leastNonzeroMagnitude, .signalingNaN], maybeDouble: nil)
        low.text = ""; low.tags = []; low.numbers = [Int.min]; low.blob = Data(); low.maybeInt = nil; low.maybeText = nil
        low.maybeAddress = nil; low.maybeColor = nil; low.maybeBool = nil; low.optionals = [nil, nil]; low.matrix = [[], []]
        low.counts = [:]; low.byNumber = [:]; low.shapes = []; low.tagged = []; low.date = .distantPast
        var high = random.everything()
        high.int = .max; high.int8 = .max; high.int16 = .max; high.int32 = .max; high.int64 = .max
        high.uint = .max; high.uint8 = .max; high.uint16 = .max; high.uint32 = .max; high.uint64 = .max
        high.floats = Floats(float: .infinity, double: .nan, floats: [.greatestFiniteMagnitude, .leastNonzeroMagnitude],
                             doubles: [.greatestFiniteMagnitude, .infinity, 0x1p53 + 2, Double(bitPattern: 0x7FF0_0000_0000_0001)],
                             maybeDouble: .leastNormalMagnitude.nextDown)
        high.text = "\u{0}e\u{301}\u{E9}\u{1F469}\u{200D}\u{1F4BB}\u{10FFFF}\"\\\n"; high.maybeInt = Int.max
        high.maybeBool = false; high.maybeText = ""; high.date = Date(timeIntervalSinceReferenceDate: .infinity)
        high.numbers = [Int.max, Int.min, 0]; high.smallNumbers = [0, 255]
        high.counts = ["": 0, "\u{0}": Int.min, "é": Int.max]; high.byNumber = [Int.min: "", Int.max: "x", 0: "0"]
        for value in [low, high] {
            let copy = try DocumentDecoder().decode(Everything.self, from: try DocumentEncoder().encode(value))
            #expect(copy == value)
        }
    }

    @Test func topLevelValuesOfEveryKindRoundTrip() throws {
        func roundTrip<T: Codable & Equatable>(_ value: T) throws -> Bool {
            try DocumentDecoder().decode(T.self, from: try DocumentEncoder().encode(value)) == value
        }
        #expect(try roundTrip(Int8.min))
        #expect(try roundTrip(UInt64.max))
        #expect(try roundTrip(UInt(12)))
        #expect(try roundTrip(Float(1.5)))
        #expect(try roundTrip(-0.0 as Double))
        #expect(try roundTrip("text"))
        #expect(try roundTrip(true))
        #expect(try roundTrip(Optional<Int>.none))
        #expect(try roundTrip(Optional<Int>.some(3)))
        #expect(try roundTrip([Int?.none, 1]))
        #expect(try roundTrip([[String]]([[], ["a"]])))
        #expect(try roundTrip(["a": 1, "b": 2]))
        #expect(try roundTrip(Color.ultraViolet))
        #expect(try roundTrip(Shape.point))
        #expect(try roundTrip(Shape.label("x", nil)))
        #expect(try roundTrip(Tag("t")))
        #expect(try roundTrip(Date(timeIntervalSince1970: 1_700_000_000.25)))
        #expect(try roundTrip(Data([0, 1, 255])))
        #expect(try roundTrip(URL(string: "https://example.com/a?b=c")!))
        let nan = try DocumentDecoder().decode(Double.self, from: try DocumentEncoder().encode(Double.nan))
        #expect(nan.isNaN)
    }

    @Test func classHierarchyRoundTripsThroughSuperEncoders() throws {
        var random = CodecRandom(seed: 1031)
        var failures = CodecFailures()
        for i in 0..<300 {
            let animal = random.animal()
            let bytes = try DocumentEncoder().encode(animal)
            let copy: Animal
            switch animal {
            case is Puppy: copy = try DocumentDecoder().decode(Puppy.self, from: bytes)
            case is Dog: copy = try DocumentDecoder().decode(Dog.self, from: bytes)
            default: copy = try DocumentDecoder().decode(Animal.self, from: bytes)
            }
            if !copy.same(as: animal) {
                let json = try DocumentValue(encoded: bytes).json()
                failures.add("#\(i): \(json)")
            }
        }
        #expect(failures.count == 0, failures.report(seed: 1031))

        // The superclass's fields live in a nested object named by the super key, as JSONEncoder writes them.
        let puppy = Puppy(name: "Rex", breed: "collie", toys: ["ball"], mentor: Animal(name: "Old", legs: 3))
        let value = try DocumentValue(encoded: try DocumentEncoder().encode(puppy))
        #expect(value[path: "parent.super.name"] == .string("Rex"))
        #expect(value[path: "parent.breed"] == .string("collie"))
        #expect(value[path: "parent.good"] == .bool(true))
        #expect(value[path: "mentor.legs"] == .int(3))
        #expect(value.objectFieldNames == ["parent", "toys", "mentor"])
        #expect(value[path: "parent"]?.objectFieldNames == ["breed", "super", "good"])
        let json = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(puppy)) as? [String: Any]
        #expect(Set((json ?? [:]).keys) == Set(value.objectFieldNames))
    }

    @Test func customCodingKeysNameTheStoredFields() throws {
        var random = CodecRandom(seed: 1041)
        for _ in 0..<100 {
            let r = Renamed(firstName: random.text(), lastName: random.maybe { $0.text() }, internalCount: random.below(100))
            let bytes = try DocumentEncoder().encode(r)
            #expect(try DocumentDecoder().decode(Renamed.self, from: bytes) == r)
            let value = try DocumentValue(encoded: bytes)
            #expect(value.objectFieldNames == (r.lastName == nil ? ["first_name", "n"] : ["first_name", "last", "n"]))
            #expect(value[field: "first_name"] == .string(r.firstName))
        }
    }

    /// `JSONEncoder`/`JSONDecoder` are the reference: both coders must give back the same value.
    @Test func documentCodersAgreeWithJSONCoders() throws {
        var random = CodecRandom(seed: 1051)
        var failures = CodecFailures()
        for i in 0..<300 {
            let value = random.everything(jsonSafe: true)
            let viaJSON = try JSONDecoder().decode(Everything.self, from: try JSONEncoder().encode(value))
            let viaDocument = try DocumentDecoder().decode(Everything.self, from: try DocumentEncoder().encode(value))
            if viaJSON != viaDocument || viaDocument != value {
                failures.add("#\(i): JSON gives \(viaJSON)\n  DocStore gives \(viaDocument)")
            }
        }
        for _ in 0..<100 {
            let animal = random.animal()
            guard let puppy = animal as? Puppy else { continue }
            let viaJSON = try JSONDecoder().decode(Puppy.self, from: try JSONEncoder().encode(puppy))
            let viaDocument = try DocumentDecoder().decode(Puppy.self, from: try DocumentEncoder().encode(puppy))
            if !viaJSON.same(as: viaDocument) { failures.add("puppy \(puppy.name) differs") }
        }
        #expect(failures.count == 0, failures.report(seed: 1051))
    }

    /// A type that writes itself through nested containers, keyed and unkeyed, under a key and in an array.
    private struct Nested: Encodable {
        enum Keys: String, CodingKey { case point, list, name }
        enum PointKeys: String, CodingKey { case x, y }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            var point = c.nestedContainer(keyedBy: PointKeys.self, forKey: .point)
            try point.encode(1, forKey: .x)
            try point.encode(2, forKey: .y)
            var list = c.nestedUnkeyedContainer(forKey: .list)
            try list.encode("a")
            var inner = list.nestedContainer(keyedBy: PointKeys.self)
            try inner.encode(3, forKey: .x)
            var deeper = list.nestedUnkeyedContainer()
            try deeper.encode(true)
            try deeper.encode(4)
            try list.encode("b")
            try c.encode("n", forKey: .name)
        }
    }

    @Test func nestedContainersWriteTheirValuesInPlace() throws {
        let value = try DocumentValue(encoded: try DocumentEncoder().encode(Nested()))
        #expect(value.json() == #"{"point":{"x":1,"y":2},"list":["a",{"x":3},[true,4],"b"],"name":"n"}"#)
    }

    // MARK: Reading without the type

    @Test func documentValueReadsEncodedModelsWithoutTheirType() throws {
        var random = CodecRandom(seed: 1061)
        var failures = CodecFailures()
        for i in 0..<300 {
            let e = random.everything()
            let bytes = try DocumentEncoder().encode(e)
            let value = try DocumentValue(encoded: bytes)
            let expectations: [(String, DocumentValue?)] = [
                ("int64", .int(e.int64)),
                ("uint64", Int64(exactly: e.uint64).map { .int($0) } ?? .uint(e.uint64)),
                ("int8", .int(Int64(e.int8))),
                ("flag", .bool(e.flag)),
                ("text", .string(e.text)),
                ("date", .date(e.date)),
                ("id", .uuid(e.id)),
                ("blob", .bytes(Array(e.blob))),
                ("link", .string(e.link.absoluteString)),
                ("color", .string(e.color.rawValue)),
                ("tags", .array(e.tags.map { .string($0) })),
                ("empty", .array([])),
                ("maybeInt", e.maybeInt.map { .int(Int64($0)) }),
                ("address.city", .string(e.address.city)),
                ("address.geo", .array(e.address.geo.map { .double($0) })),
                ("renamed.first_name", .string(e.renamed.firstName)),
                ("wrapped.zip", .string(e.wrapped.inner.zip)),
                ("floats.float", .double(Double(e.floats.float))),
                ("maybeAddress.zip", e.maybeAddress.map { .string($0.zip) }),
            ]
            for (path, expected) in expectations {
                let found = value[path: FieldPath(path)]
                let same = switch (found, expected) {
                case (nil, nil): true
                case (let f?, let x?): identical(f, x)
                default: false
                }
                if !same { failures.add("#\(i) \(path): found \(String(describing: found)), expected \(String(describing: expected))") }
            }
            // Fields in declaration order, nil optionals left out (synthesized Codable uses encodeIfPresent).
            let declared = Mirror(reflecting: e).children.compactMap { child -> String? in
                let inner = Mirror(reflecting: child.value)
                return inner.displayStyle == .optional && inner.children.isEmpty ? nil : child.label
            }
            if value.objectFieldNames != declared { failures.add("#\(i): fields \(value.objectFieldNames), declared \(declared)") }

            // Written back, the value is the same value, and still decodes as the model.
            let rewritten = value.encoded()
            let reread = try DocumentValue(encoded: rewritten)
            if !identical(reread, value) { failures.add("#\(i): rewritten value differs") }
            if try DocumentDecoder().decode(Everything.self, from: rewritten) != e { failures.add("#\(i): rewritten model differs") }
        }
        #expect(failures.count == 0, failures.report(seed: 1061))
    }

    @Test func randomDocumentValuesRoundTripThroughBytes() throws {
        var random = CodecRandom(seed: 1071)
        var failures = CodecFailures()
        for _ in 0..<2_000 {
            let value = random.documentValue(depth: 4, allowNaN: true)
            let back = try DocumentValue(encoded: value.encoded())
            let expected = value.normalizedUInt
            if !identical(back, expected) { failures.add("\(value)\n  read back as \(back)") }
        }
        #expect(failures.count == 0, failures.report(seed: 1071))
    }

    @Test func jsonOfAnyDocumentParsesWithJSONSerialization() throws {
        var random = CodecRandom(seed: 1081)
        var failures = CodecFailures()
        var values = (0..<1_500).map { _ in random.documentValue(depth: 4, allowNaN: false, allowInfinity: false) }
        for _ in 0..<100 { values.append(try DocumentValue(encoded: try DocumentEncoder().encode(random.everything(jsonSafe: true)))) }
        for value in values {
            for pretty in [false, true] {
                let text = value.json(pretty: pretty)
                do {
                    let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
                    if let mismatch = jsonMismatch(value, parsed) { failures.add("\(text)\n    \(mismatch)") }
                } catch {
                    failures.add("\(value) wrote invalid JSON \(text): \(error)")
                }
            }
        }
        #expect(failures.count == 0, failures.report(seed: 1081))
        #expect(DocumentValue.object([("name", .string("Ann")), ("age", .int(41))]).json() == #"{"name":"Ann","age":41}"#)
        #expect(DocumentValue.double(.nan).json() == #"{"$double":"nan"}"#)
        #expect(DocumentValue.double(-.infinity).json() == #"{"$double":"-inf"}"#)
    }

    @Test func readingByPathFindsEveryNestedValueWithoutDecoding() throws {
        var random = CodecRandom(seed: 1091)
        var failures = CodecFailures()
        for _ in 0..<500 {
            let value = DocumentValue.object((0..<(1 + random.below(4))).map { i in
                ("f\(i)" + random.asciiString(maxLength: 2), random.documentValue(depth: 4, allowNaN: true))
            }).normalizedUInt
            let bytes = value.encoded()
            for (components, expected) in allFieldPaths(value) {
                let path = FieldPath(components: components)
                let found = try readPath(path, in: bytes)
                if !(found.map { identical($0, expected) } ?? false) {
                    failures.add("\(components): found \(String(describing: found)), expected \(expected)")
                }
                // One step further than any value goes, or a name no object has: nothing.
                for missing in [components + ["\u{1}missing"], Array(components.dropLast()) + ["\u{1}missing"]] {
                    if let extra = try readPath(FieldPath(components: missing), in: bytes) {
                        failures.add("\(missing) should be missing, found \(extra)")
                    }
                }
            }
        }
        #expect(failures.count == 0, failures.report(seed: 1091))

        var model = random.everything()
        model.maybeAddress = nil
        let bytes = try DocumentEncoder().encode(model)
        #expect(try readPath("address.city", in: bytes) == .string(model.address.city))
        #expect(try readPath("address.zip", in: bytes) == .string(model.address.zip))
        #expect(try readPath("renamed.n", in: bytes) == .int(Int64(model.renamed.internalCount)))
        #expect(try readPath("address.nope", in: bytes) == nil)
        #expect(try readPath("nope", in: bytes) == nil)
        #expect(try readPath("maybeAddress.city", in: bytes) == nil)
        #expect(try readPath("int64.low", in: bytes) == nil)
        #expect(try readPath("address.city.x", in: bytes) == nil)
        #expect(try readPath("", in: bytes) == nil)
        #expect(try readPath("address.", in: bytes) == nil)
    }

    // MARK: Schema changes and mismatches

    @Test func decodingATypeWithFewerFieldsReadsJustThose() throws {
        var random = CodecRandom(seed: 1101)
        for _ in 0..<200 {
            let e = random.everything()
            #expect(try DocumentDecoder().decode(Summary.self, from: try DocumentEncoder().encode(e)) == Summary(e))
        }
    }

    @Test func fieldsStoredInAnyOrderDecode() throws {
        var random = CodecRandom(seed: 1111)
        func shuffled(_ v: DocumentValue) -> DocumentValue {
            switch v {
            case .object(let fields):
                var mixed = fields.map { DocumentValue.Field($0.name, shuffled($0.value)) }
                mixed.shuffle(using: &random)
                return .object(mixed)
            case .array(let elements): return .array(elements.map(shuffled))
            default: return v
            }
        }
        var failures = CodecFailures()
        for i in 0..<200 {
            let e = random.everything()
            let reordered = shuffled(try DocumentValue(encoded: try DocumentEncoder().encode(e))).encoded()
            let copy = try DocumentDecoder().decode(Everything.self, from: reordered)
            if copy != e { failures.add("#\(i): \(copy) != \(e)") }
            if try DocumentDecoder().decode(Summary.self, from: reordered) != Summary(e) { failures.add("#\(i): summary differs") }
        }
        #expect(failures.count == 0, failures.report(seed: 1111))
    }

    /// Edits made the same way to the JSON and the document of one value must fail (or not) the same way in
    /// `JSONDecoder` and `DocumentDecoder`: the error case and coding path written next to each edit.
    @Test func missingFieldsAndWrongTypesFailLikeJSONDecoder() throws {
        var random = CodecRandom(seed: 1121)
        func shape(_ kind: String, _ path: [String], key: String? = nil) -> ErrorShape { ErrorShape(kind: kind, path: path, key: key) }
        // (where, new document value, new JSON value, expected outcome, whether JSONDecoder gives the path)
        let edits: [([Step], DocumentValue?, Any?, ErrorShape?, Bool)] = [
            ([.field("address"), .field("zip")], .int(12345), 12345, shape("typeMismatch", ["address", "zip"]), true),
            ([.field("int8")], .string("x"), "x", shape("typeMismatch", ["int8"]), true),
            // JSONDecoder reports a number out of range as "not valid JSON", with an empty path.
            ([.field("int8")], .int(300), 300, shape("dataCorrupted", ["int8"]), false),
            ([.field("int")], .double(2.5), 2.5, shape("dataCorrupted", ["int"]), false),
            ([.field("items"), .index(1), .field("qty")], .string("many"), "many", shape("typeMismatch", ["items", "1", "qty"]), true),
            ([.field("items"), .index(1)], .int(1), 1, shape("typeMismatch", ["items", "1"]), true),
            ([.field("address")], .int(7), 7, shape("typeMismatch", ["address"]), true),
            ([.field("flag")], .int(1), 1, shape("typeMismatch", ["flag"]), true),
            ([.field("tags")], .string("not a list"), "not a list", shape("typeMismatch", ["tags"]), true),
            ([.field("maybeAddress")], .string("nowhere"), "nowhere", shape("typeMismatch", ["maybeAddress"]), true),
            ([.field("color")], .string("purple"), "purple", shape("dataCorrupted", ["color"]), true),
            ([.field("shape")], .object([DocumentValue.Field]()), [String: Any](), shape("typeMismatch", ["shape"]), true),
            ([.field("renamed"), .field("n")], .bool(true), true, shape("typeMismatch", ["renamed", "n"]), true),
            ([.field("floats"), .field("double")], .string("1.5"), "1.5", shape("typeMismatch", ["floats", "double"]), true),
            ([.field("address"), .field("zip")], nil, nil, shape("keyNotFound", ["address"], key: "zip"), true),
            ([.field("text")], nil, nil, shape("keyNotFound", [], key: "text"), true),
            ([.field("renamed"), .field("first_name")], nil, nil, shape("keyNotFound", ["renamed"], key: "first_name"), true),
            ([.field("items"), .index(0), .field("name")], nil, nil, shape("keyNotFound", ["items", "0"], key: "name"), true),
            ([.field("wrapped"), .field("city")], nil, nil, shape("keyNotFound", ["wrapped"], key: "city"), true),
            ([.field("maybeText")], nil, nil, nil, true),
            ([.field("items"), .index(0), .field("price")], nil, nil, nil, true),
        ]
        var failures = CodecFailures()
        for _ in 0..<20 {
            var model = random.everything(jsonSafe: true)
            model.maybeAddress = random.address(finite: true)
            model.maybeText = "here"
            // JSONSerialization rewrites numbers; keep Floats where rewriting cannot push them out of range.
            model.floats = Floats(float: 1.5, double: -2.25, floats: [0.5], doubles: [1e10], maybeDouble: nil)
            let document = try DocumentValue(encoded: try DocumentEncoder().encode(model))
            let json = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(model))
            for (path, docReplacement, jsonReplacement, expected, jsonHasPath) in edits {
                let docBytes = replacing(path, in: document, with: docReplacement).encoded()
                let jsonData = try JSONSerialization.data(withJSONObject: replacing(path, inJSON: json, with: jsonReplacement))
                let jsonOutcome: ErrorShape? = { do { _ = try JSONDecoder().decode(Everything.self, from: jsonData); return nil } catch { return ErrorShape(error) } }()
                let docOutcome: ErrorShape? = { do { _ = try DocumentDecoder().decode(Everything.self, from: docBytes); return nil } catch { return ErrorShape(error) } }()
                func text(_ o: ErrorShape?) -> String { o.map(String.init(describing:)) ?? "success" }
                if docOutcome != expected {
                    failures.add("edit \(path): DocumentDecoder gives \(text(docOutcome)), expected \(text(expected))")
                }
                let jsonAgrees = jsonHasPath ? jsonOutcome == expected : jsonOutcome?.kind == expected?.kind
                if !jsonAgrees { failures.add("edit \(path): JSONDecoder gives \(text(jsonOutcome)), expected \(text(expected))") }
            }
        }
        #expect(failures.count == 0, failures.report(seed: 1121))
    }

    @Test func wrongTypeAndMissingFieldErrorsNameTheField() throws {
        var random = CodecRandom(seed: 1131)
        let model = random.everything()
        let document = try DocumentValue(encoded: try DocumentEncoder().encode(model))

        let zipAsNumber = replacing([.field("address"), .field("zip")], in: document, with: .int(1)).encoded()
        let mismatch = #expect(throws: DecodingError.self) { _ = try DocumentDecoder().decode(Everything.self, from: zipAsNumber) }
        if case .typeMismatch(let type, let context)? = mismatch {
            #expect(ObjectIdentifier(type) == ObjectIdentifier(String.self))
            #expect(context.codingPath.map(\.stringValue) == ["address", "zip"])
        } else {
            Issue.record("expected typeMismatch, got \(String(describing: mismatch))")
        }

        let noZip = replacing([.field("address"), .field("zip")], in: document, with: nil).encoded()
        let missing = #expect(throws: DecodingError.self) { _ = try DocumentDecoder().decode(Everything.self, from: noZip) }
        if case .keyNotFound(let key, let context)? = missing {
            #expect(key.stringValue == "zip")
            #expect(context.codingPath.map(\.stringValue) == ["address"])
        } else {
            Issue.record("expected keyNotFound, got \(String(describing: missing))")
        }

        // Arrays of strings and integers take a shortcut in the decoder; their errors must still name the field.
        for (field, elements) in [("tags", [DocumentValue.string("a"), .int(2)]), ("numbers", [.int(1), .string("a")])] {
            let bytes = replacing([.field(field)], in: document, with: .array(elements)).encoded()
            let error = #expect(throws: DecodingError.self) { _ = try DocumentDecoder().decode(Everything.self, from: bytes) }
            if case .typeMismatch(_, let context)? = error {
                #expect(context.codingPath.first?.stringValue == field)
            } else {
                Issue.record("\(field): expected typeMismatch, got \(String(describing: error))")
            }
        }
    }

    // MARK: Bad input

    @Test func everyTruncatedDocumentThrows() throws {
        var random = CodecRandom(seed: 1141)
        var failures = CodecFailures()
        for _ in 0..<15 {
            let bytes = try DocumentEncoder().encode(random.everything())
            for length in 0..<bytes.count {
                let cut = Array(bytes.prefix(length))
                if (try? DocumentDecoder().decode(Everything.self, from: cut)) != nil { failures.add("decode accepted \(length) of \(bytes.count) bytes") }
                if (try? DocumentValue(encoded: cut)) != nil { failures.add("DocumentValue accepted \(length) of \(bytes.count) bytes") }
            }
        }
        #expect(failures.count == 0, failures.report(seed: 1141))
    }

    /// Corrupt bytes, whatever they are: every reader returns or throws, never traps. A value `DocumentValue`
    /// accepts is consistent: written back it reads the same, and its key read in place is its key. (The same
    /// checks run in an optimized build in `bench --fuzz-codec`, from `scripts/bench-ci`.)
    @Test func corruptBytesNeverCrashAnyReader() throws {
        var random = CodecRandom(seed: 1151)
        var inputs: [[UInt8]] = []
        var sources: [[UInt8]] = []
        for _ in 0..<20 {
            sources.append(try DocumentEncoder().encode(random.everything()))
            sources.append(try DocumentEncoder().encode(random.animal()))
            sources.append(random.documentValue(depth: 4, allowNaN: true).encoded())
        }
        for _ in 0..<4_000 {
            var bytes = random.pick(sources)
            for _ in 0..<(1 + random.below(4)) {
                let at = random.below(bytes.count)
                switch random.below(4) {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: random.next())
                case 1: bytes[at] ^= 1 << UInt8(random.below(8))
                case 2: bytes[at] = random.pick([0x00, 0xFF, 0x7F, 0x80, 0x0D, 0x0E])
                default: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
                }
            }
            if random.chance(3) { bytes.removeLast(random.below(min(bytes.count, 6) + 1)) }
            inputs.append(bytes)
        }
        for _ in 0..<3_000 {
            // Random bytes, mostly behind the right version byte and starting with a container tag.
            var bytes = (0..<random.below(48)).map { _ in
                random.chance(3) ? UInt8(random.below(16)) : UInt8(truncatingIfNeeded: random.next())
            }
            if random.chance(4) { bytes.insert(random.pick([0x0D, 0x0E]), at: 0) }
            if !random.chance(5) { bytes.insert(1, at: 0) }
            inputs.append(bytes)
        }

        var accepted = 0
        var failures = CodecFailures()
        for bytes in inputs {
            _ = try? DocumentDecoder().decode(Everything.self, from: bytes)
            _ = try? DocumentDecoder().decode(Summary.self, from: bytes)
            _ = try? DocumentDecoder().decode(Puppy.self, from: bytes)
            _ = try? DocumentDecoder().decode([String: Int].self, from: bytes)
            _ = try? DocumentDecoder().decode([Shape].self, from: bytes)
            _ = try? DocumentDecoder().decode(Double.self, from: bytes)
            let outcome = bytes.withUnsafeBytes { InPlaceReading.readEveryWay($0, paths: []) }
            if let disagreement = outcome.disagreement { failures.add("\(keyHex(bytes)): \(disagreement)") }
            guard let value = try? DocumentValue(encoded: bytes) else { continue }
            accepted += 1
            if !outcome.wellFormed { failures.add("\(keyHex(bytes)): DocumentValue accepts what the in-place reading does not") }
            let reread = try DocumentValue(encoded: value.encoded())
            if KeyEncoder.key(reread) != KeyEncoder.key(value) { failures.add("\(keyHex(bytes)): rewritten value differs") }
        }
        #expect(failures.count == 0, failures.report(seed: 1151))
        #expect(accepted > 0)
    }

    /// The scan's field look-up (`CompiledPath`) against the plain walk (`value(atPath:)`), on sound documents and
    /// on damaged ones (through `InPlaceReading`): the same value or the same error at every path, and in a sound
    /// document the value the whole document holds there.
    @Test func compiledPathsFindWhatThePlainWalkFinds() throws {
        var random = CodecRandom(seed: 1187)
        var failures = CodecFailures()
        var compared = 0
        for round in 0..<3_000 {
            let value = DocumentValue.object((0..<(1 + random.below(5))).map { i in
                ("f\(i)" + random.asciiString(maxLength: 2), random.documentValue(depth: 3, allowNaN: true))
            })
            var bytes = value.encoded()
            var paths = allFieldPaths(value).map { FieldPath(components: $0.0) }
            paths.append(FieldPath(components: ["\u{1}missing"]))
            paths.append(FieldPath(components: [String(repeating: "n", count: 200)]))
            let damaged = round % 2 == 1
            if damaged {
                for _ in 0..<(1 + random.below(3)) {
                    let at = random.below(bytes.count)
                    bytes[at] = random.chance(2) ? UInt8(truncatingIfNeeded: random.next()) : random.pick([0x00, 0x7F, 0x80, 0xFF])
                }
            }
            let sound = (try? DocumentValue(encoded: bytes)) != nil
            let outcome = bytes.withUnsafeBytes { InPlaceReading.readEveryWay($0, paths: paths) }
            if let disagreement = outcome.disagreement { failures.add("\(keyHex(bytes)): \(disagreement)") }
            if outcome.wellFormed != sound { failures.add("\(keyHex(bytes)): well formed \(outcome.wellFormed), sound \(sound)") }
            compared += paths.count
        }
        #expect(failures.count == 0, failures.report(seed: 1187))
        #expect(compared > 10_000)
    }

    /// The decoder documents `DecodingError` for a document that does not fit the type and `DocStoreError`
    /// `.corruptDocument` for bytes that are not a document; `DocumentValue(encoded:)` only the latter.
    @Test func corruptBytesThrowOnlyDocumentedErrors() throws {
        var random = CodecRandom(seed: 1161)
        let source = try DocumentEncoder().encode(random.everything())
        var decoderFailures = CodecFailures(), valueFailures = CodecFailures()
        for _ in 0..<3_000 {
            var bytes = source
            for _ in 0..<(1 + random.below(3)) { bytes[random.below(bytes.count)] = UInt8(truncatingIfNeeded: random.next()) }
            do {
                _ = try DocumentDecoder().decode(Everything.self, from: bytes)
            } catch is DecodingError {
            } catch let error as DocStoreError where error.code == .corruptDocument {
            } catch {
                decoderFailures.add("\(type(of: error)): \(error)")
            }
            do {
                _ = try DocumentValue(encoded: bytes)
            } catch let error as DocStoreError where error.code == .corruptDocument {
            } catch {
                valueFailures.add("\(type(of: error)): \(error)")
            }
        }
        #expect(decoderFailures.count == 0, decoderFailures.report(seed: 1161))
        #expect(valueFailures.count == 0, valueFailures.report(seed: 1161))
    }

    @Test func unknownVersionByteThrows() throws {
        var random = CodecRandom(seed: 1171)
        let bytes = try DocumentEncoder().encode(random.everything())
        for version in UInt8.min...UInt8.max where version != BinaryFormat.version {
            var changed = bytes
            changed[0] = version
            #expect(throws: DocStoreError.self, "version \(version)") { _ = try DocumentDecoder().decode(Everything.self, from: changed) }
            #expect(throws: DocStoreError.self, "version \(version)") { _ = try DocumentValue(encoded: changed) }
        }
        #expect(throws: DocStoreError.self) { _ = try DocumentValue(encoded: []) }
        #expect(throws: DocStoreError.self) { _ = try DocumentValue(encoded: [1]) }
    }
}

extension DocumentValue {
    /// Field names of an object, in order; empty for anything else.
    fileprivate var objectFieldNames: [String] {
        guard case .object(let fields) = self else { return [] }
        return fields.map(\.name)
    }

    /// The value as it reads back: `.uint` is for values above `Int64.max`, the writer stores smaller ones as `.int`.
    fileprivate var normalizedUInt: DocumentValue {
        switch self {
        case .uint(let u): return Int64(exactly: u).map { .int($0) } ?? self
        case .array(let elements): return .array(elements.map(\.normalizedUInt))
        case .object(let fields): return .object(fields.map { .init($0.name, $0.value.normalizedUInt) })
        default: return self
        }
    }
}

/// A change patched into a document's bytes where they lie gives the bytes that decoding the document, applying
/// the change and encoding it again gives, for random documents and changes of values they hold: in format 2, and
/// in format 3, where the patch keeps the format unless the values' length takes offsets of another width.
@Suite struct DocumentPatchTests {
    @Test(arguments: [UInt64(7), 8, 9], [false, true])
    func aPatchGivesTheBytesOfDecodingChangingAndEncoding(seed: UInt64, shaped: Bool) throws {
        var rng = SeededGenerator(seed: seed)
        func value(depth: Int) -> DocumentValue {
            switch Int.random(in: 0..<(depth > 2 ? 8 : 10), using: &rng) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &rng))
            case 2: return .int([0, 1, -1, 127, 128, -129, 40_000, Int64.max, Int64.min].randomElement(using: &rng)!)
            case 3: return .double([0.5, -0.0, 1e300, .nan].randomElement(using: &rng)!)
            case 4: return .string(String(repeating: "é", count: Int.random(in: 0..<200, using: &rng)))
            case 5: return .uint(UInt64.max)
            case 6: return .date(Date(timeIntervalSince1970: 12_345))
            case 7: return .bytes([UInt8](repeating: 7, count: Int.random(in: 0..<4, using: &rng)))
            case 8: return .array((0..<Int.random(in: 0..<4, using: &rng)).map { _ in value(depth: depth + 1) })
            default:
                let names = ["a", "b", "c", "d"].shuffled(using: &rng).prefix(Int.random(in: 0...4, using: &rng))
                return .object(names.map { DocumentValue.Field($0, value(depth: depth + 1)) })
            }
        }
        /// The paths of `document`'s values reached through objects alone.
        func paths(_ document: DocumentValue, _ prefix: [String] = []) -> [[String]] {
            guard case .object(let fields) = document else { return [] }
            return fields.flatMap { [prefix + [$0.name]] + paths($0.value, prefix + [$0.name]) }
        }
        var patched = 0, stayedShaped = 0
        for _ in 0..<300 {
            let document = DocumentValue.object([.init("id", .int(1)), .init("m", value(depth: 0)),
                                                 .init("n", value(depth: 1))])
            let changes = (0..<Int.random(in: 1...3, using: &rng)).compactMap { _ -> FieldChange? in
                guard let path = paths(document).randomElement(using: &rng) else { return nil }
                let field = FieldPath(path.joined(separator: "."))
                return Bool.random(using: &rng) ? .set(field, value(depth: 1))
                                                : .increment(field, [.int(3), .double(0.25)].randomElement(using: &rng)!)
            }
            let plain = document.encoded()
            let bytes = shaped ? try #require(try InPlaceReading.shapedAndKnown(plain)) : plain
            guard let patch = bytes.withUnsafeBytes({ DocumentPatch.applying(changes, to: $0) }) else { continue }
            patched += 1
            let expected = try document.applying(changes).encoded()
            if shaped && patch.first == BinaryFormat.shapedVersion {
                stayedShaped += 1
                #expect(patch == (try InPlaceReading.shapedAndKnown(expected)), "\(changes) on \(document.plainJSON())")
            } else {
                #expect(patch == expected, "\(changes) on \(document.plainJSON())")
            }
        }
        #expect(patched > 100)
        if shaped {
            #expect(stayedShaped > 50, "few patches kept format 3: \(stayedShaped) of \(patched)")
            #expect(patched - stayedShaped > 5, "few patches crossed a width of offsets: \(patched - stayedShaped)")
        }
    }
}
