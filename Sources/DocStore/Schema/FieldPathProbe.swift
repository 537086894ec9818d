import Foundation

/// Finds the field path that a key path stands for, by decoding probe instances of the type.
///
/// The probe decoder answers every request with a value unique to where it was asked (the coding path): the
/// integers 1, 2, 3... in one probe, and 8, 11, 14... in a second, the strings "\u{1}probe1"... and so
/// on. Reading a key path on a decoded instance gives back one of those values, and so the path; both probes must
/// agree, so that a computed property (`age + 1`) is not mistaken for the field whose value it happens to equal.
/// Booleans have only two values, so a key path to a `Bool` is found in further passes, each with a single `true`.
/// An array gets one element; a key path to the array finds the path of its element. A value the probe cannot make
/// (an enum that rejects the probe string) is taken from `CaseIterable`, or, for an enum with raw values, is its
/// first case; such values are found in further passes too, each giving one of them another case (the second).
/// When the whole type still cannot be probed, only key paths with explicit paths work, and the error names the
/// cause.
struct FieldPathProbe<Root: Decodable> {
    let instance: Root
    let recorder: ProbeRecorder
    let check: Root
    let checkRecorder: ProbeRecorder

    init() throws {
        recorder = ProbeRecorder(base: 0, stride: 1)
        instance = try Root(from: ProbeDecoder(recorder: recorder, path: []))
        // Small enough for Int8 fields; a stride of 3 from another base makes aliases land differently.
        checkRecorder = ProbeRecorder(base: 5, stride: 3)
        check = try Root(from: ProbeDecoder(recorder: checkRecorder, path: []))
    }

    /// The field path of `keyPath`, or `nil` when its value is not one the probe made (a computed property) or is
    /// inside an array element (`\.tags.first`, `\.addresses[0].city`): no field path names those.
    func path(of keyPath: PartialKeyPath<Root>) throws -> FieldPath? {
        guard let path = try anyPath(of: keyPath), !path.components.contains(ProbeRecorder.elementMarker) else {
            return nil
        }
        return path
    }

    private func anyPath(of keyPath: PartialKeyPath<Root>) throws -> FieldPath? {
        let value = instance[keyPath: keyPath]
        if let found = recorder.path(of: value) {
            if checkRecorder.path(of: check[keyPath: keyPath]) == found { return FieldPath(components: found) }
            // Else a computed property, or an enum's raw value equal to a probe value by chance: the passes
            // below find the enum's field, and nothing for the property.
        }
        if ProbeRecorder.boolValue(value) == false {
            for position in 0..<recorder.boolCount {
                let pass = ProbeRecorder(base: 0, stride: 1, truePosition: position)
                let probed = try Root(from: ProbeDecoder(recorder: pass, path: []))
                if ProbeRecorder.boolValue(probed[keyPath: keyPath]) == true, let found = pass.boolPaths[position] {
                    return fieldPath(found, of: value)
                }
            }
            return nil
        }
        // A value made in place of one the type rejected (an enum's case): the pass that gives it another case
        // changes the key path's value to that case. Only that value (or its raw value) counts: a computed property
        // reading it, or a struct holding it, changes too, but is not that value.
        for position in 0..<recorder.substitutionCount {
            guard let first = recorder.substitutionValues[position],
                  ProbeRecorder.holds(value, made: first) else { continue }
            let pass = ProbeRecorder(base: 0, stride: 1, alternatePosition: position)
            let probed = try Root(from: ProbeDecoder(recorder: pass, path: []))
            if let second = pass.substitutionValues[position], "\(second)" != "\(first)",
               ProbeRecorder.holds(probed[keyPath: keyPath], made: second), let found = pass.substitutionPaths[position] {
                return fieldPath(found, of: value)
            }
        }
        return nil
    }

    /// The fields the type reads, as dotted paths (an array's elements are not looked into), and the fields it reads
    /// whatever keys they hold (a dictionary): what ``DocStore/check(_:limit:)`` compares with the stored fields.
    func fieldsRead() -> (fields: Set<String>, anyKeys: Set<String>) {
        var paths = recorder.integers.values.map { $0 } + recorder.strings.values.map { $0 }
        paths += recorder.uuids.values.map { $0 }
        paths += recorder.boolPaths.values.map { $0 }
        paths += recorder.substitutionPaths.values.map { $0 }
        paths += recorder.otherPaths
        var fields: Set<String> = []
        for path in paths {
            let own = path.prefix { $0 != ProbeRecorder.elementMarker }
            if !own.isEmpty { fields.insert(own.joined(separator: ".")) }
        }
        let anyKeys = Set(recorder.anyKeyPaths.map { $0.prefix { $0 != ProbeRecorder.elementMarker }.joined(separator: ".") })
        return (fields, anyKeys)
    }

    /// The path of a value found in a pass: for an array of them, the array's own path, less the element marker.
    private func fieldPath(_ found: [String], of value: Any) -> FieldPath {
        var found = found
        if Mirror(reflecting: ProbeRecorder.unwrap(value)).displayStyle == .collection,
           found.last == ProbeRecorder.elementMarker {
            found.removeLast()
        }
        return FieldPath(components: found)
    }
}

/// Hands out unique values and remembers where each was asked for.
final class ProbeRecorder {
    /// The path component of an array's element: a key path that reaches a value through it names no field.
    static let elementMarker = "\u{0}[]"

    var counter: Int64
    let stride: Int64
    var integers: [Int64: [String]] = [:]
    var strings: [String: [String]] = [:]
    var uuids: [UUID: [String]] = [:]
    var boolCount = 0
    var boolPaths: [Int: [String]] = [:]
    /// The one Bool handed out as `true` in this pass.
    let truePosition: Int?
    /// Values made in place of one the type rejected, in the order made, and the one given another case.
    var substitutionCount = 0
    var substitutionPaths: [Int: [String]] = [:]
    var substitutionValues: [Int: Any] = [:]
    let alternatePosition: Int?
    /// Where values were read that no map above holds (dates, data, URLs), and the containers whose keys were
    /// asked for (dictionaries, which read whatever keys a document holds).
    var otherPaths: [[String]] = []
    var anyKeyPaths: [[String]] = []
    /// The types being decoded, outermost first; and how many of them are a type met again inside itself.
    var decoding: [ObjectIdentifier] = []
    var repeated = 0

    init(base: Int64, stride: Int64, truePosition: Int? = nil, alternatePosition: Int? = nil) {
        self.counter = base
        self.stride = stride
        self.truePosition = truePosition
        self.alternatePosition = alternatePosition
    }

    func nextInteger(_ path: [String]) -> Int64 {
        counter += stride
        integers[counter] = path
        return counter
    }

    func nextString(_ path: [String]) -> String {
        counter += stride
        let s = "\u{1}probe\(counter)"
        strings[s] = path
        return s
    }

    func nextUUID(_ path: [String]) -> UUID {
        counter += stride
        var bytes = [UInt8](repeating: 0xA5, count: 16)
        withUnsafeBytes(of: counter.bigEndian) { for (i, b) in $0.enumerated() { bytes[8 + i] = b } }
        let u = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        uuids[u] = path
        return u
    }

    /// Records a value made in place of one the type rejected (or an enum's case): `make` makes it, told whether
    /// this pass gives it another case.
    func substitute<T>(_ path: [String], _ make: (_ second: Bool) -> T?) -> T? {
        let position = substitutionCount
        substitutionCount += 1
        substitutionPaths[position] = path
        let made = make(alternatePosition == position)
        substitutionValues[position] = made
        return made
    }

    /// Whether `value` (unwrapped from an optional, or an array's element) is `made`, or `made`'s raw value.
    static func holds(_ value: Any, made: Any) -> Bool {
        var unwrapped = unwrap(value)
        let mirror = Mirror(reflecting: unwrapped)
        if mirror.displayStyle == .collection || mirror.displayStyle == .set {
            guard let first = mirror.children.first else { return false }
            unwrapped = unwrap(first.value)
        }
        if type(of: unwrapped) == type(of: made) { return "\(unwrapped)" == "\(made)" }
        if let raw = (made as? any RawRepresentable)?.rawValue {
            return type(of: unwrapped) == type(of: raw) && "\(unwrapped)" == "\(raw)"
        }
        return false
    }

    func nextBool(_ path: [String]) -> Bool {
        defer { boolCount += 1 }
        boolPaths[boolCount] = path
        return truePosition == boolCount
    }

    /// The path where `value` (unwrapped from optionals, arrays and raw values) was handed out.
    func path(of value: Any) -> [String]? {
        let unwrapped = ProbeRecorder.unwrap(value)
        switch unwrapped {
        case let s as String: return strings[s]
        case let u as UUID: return uuids[u]
        case let d as Date: return Int64(exactly: d.timeIntervalSinceReferenceDate).flatMap { integers[$0] }
        case let d as Double: return Int64(exactly: d).flatMap { integers[$0] }
        case let f as Float: return Int64(exactly: f).flatMap { integers[$0] }
        case let i as any BinaryInteger: return Int64(exactly: i).flatMap { integers[$0] }
        case let r as any RawRepresentable: return path(of: r.rawValue)
        default:
            let mirror = Mirror(reflecting: unwrapped)
            if mirror.displayStyle == .collection || mirror.displayStyle == .set, let first = mirror.children.first {
                // The array itself: its element's path, less the element marker.
                guard var elementPath = path(of: first.value), elementPath.last == ProbeRecorder.elementMarker else {
                    return nil
                }
                elementPath.removeLast()
                return elementPath
            }
            return nil
        }
    }

    static func unwrap(_ value: Any) -> Any {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional, let inner = mirror.children.first { return unwrap(inner.value) }
        return value
    }

    static func boolValue(_ value: Any) -> Bool? {
        let unwrapped = unwrap(value)
        if let b = unwrapped as? Bool { return b }
        let mirror = Mirror(reflecting: unwrapped)
        if mirror.displayStyle == .collection, let first = mirror.children.first { return boolValue(first.value) }
        return nil
    }
}

/// The first case, or with `second` the second (the first when there is one case only).
private func someCase<C: CaseIterable>(_ type: C.Type, second: Bool) -> Any? {
    let cases = Array(type.allCases)
    return second && cases.count > 1 ? cases[1] : cases.first
}

/// The first (or, with `second`, the second) case of an enum with raw values, by its one-byte tag, or that byte's
/// value of a one-byte raw value. An enum with raw values has no payloads, so a tag of one byte numbers at least
/// two cases (one case takes no byte, and is the only value). `nil` for any other type, whose bytes may not be a
/// value.
private func rawRepresentable<T>(_ type: T.Type, second: Bool) -> T? {
    guard T.self is any RawRepresentable.Type, MemoryLayout<T>.size <= 1, MemoryLayout<T>.alignment == 1 else {
        return nil
    }
    let byte: UInt8 = second && MemoryLayout<T>.size == 1 ? 1 : 0
    return withUnsafeTemporaryAllocation(byteCount: 1, alignment: 1) { buffer in
        buffer.initializeMemory(as: UInt8.self, repeating: byte)
        return UnsafeRawBufferPointer(buffer).load(as: T.self)
    }
}

/// The decoder that answers with probe values.
///
/// Arrays have one element, and optionals a value, unless the value is inside a type met again inside itself (a
/// comment's replies, a category's children), or deeper than ``deepest`` names: there arrays are empty and
/// optionals `nil`, so that a type that holds itself, once or several times, is probed one level into itself
/// rather than without end.
struct ProbeDecoder: Decoder {
    /// How deep (in names, an array's element counting as one) a probe goes at most.
    static let deepest = 48

    /// Whether arrays are empty and optionals `nil` here.
    static func stops(_ recorder: ProbeRecorder, _ path: [String]) -> Bool {
        recorder.repeated > 0 || path.count >= deepest
    }

    let recorder: ProbeRecorder
    let path: [String]
    var codingPath: [any CodingKey] { path.map { NamedKey($0) } }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(Keyed<Key>(recorder: recorder, path: path))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { Unkeyed(recorder: recorder, path: path) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(recorder: recorder, path: path) }

    /// A probe value of any type, falling back to a `CaseIterable` case when the type rejects the probe.
    static func value<T: Decodable>(_ type: T.Type, recorder: ProbeRecorder, path: [String]) throws -> T {
        if T.self == Date.self {
            return Date(timeIntervalSinceReferenceDate: Double(recorder.nextInteger(path))) as! T
        }
        if T.self == UUID.self { return recorder.nextUUID(path) as! T }
        if T.self == URL.self { return URL(fileURLWithPath: "/" + recorder.nextString(path)) as! T }
        if T.self == Data.self { recorder.otherPaths.append(path); return Data() as! T }
        // An enum with raw values is given its cases, never probe values (which may or may not be raw values of
        // it): the same in every pass, whatever the probe values are.
        if T.self is any RawRepresentable.Type, MemoryLayout<T>.size <= 1,
           let made = recorder.substitute(path, { rawRepresentable(T.self, second: $0) }) {
            return made
        }
        let type = ObjectIdentifier(T.self)
        let again = recorder.decoding.contains(type)
        recorder.decoding.append(type)
        if again { recorder.repeated += 1 }
        defer {
            recorder.decoding.removeLast()
            if again { recorder.repeated -= 1 }
        }
        do {
            return try T(from: ProbeDecoder(recorder: recorder, path: path))
        } catch {
            guard let iterable = T.self as? any CaseIterable.Type else { throw error }
            if let made = recorder.substitute(path, { someCase(iterable, second: $0) as? T }) { return made }
            throw error
        }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let recorder: ProbeRecorder
        let path: [String]
        var codingPath: [any CodingKey] { path.map { NamedKey($0) } }
        var allKeys: [Key] { recorder.anyKeyPaths.append(path); return [] }
        func contains(_ key: Key) -> Bool { true }
        func decodeNil(forKey key: Key) throws -> Bool { ProbeDecoder.stops(recorder, path) }
        private func p(_ key: Key) -> [String] { path + [key.stringValue] }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try ProbeDecoder.value(type, recorder: recorder, path: p(key))
        }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            guard !ProbeDecoder.stops(recorder, path) else { return nil }
            return try? ProbeDecoder.value(type, recorder: recorder, path: p(key))
        }
        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            KeyedDecodingContainer(Keyed<NestedKey>(recorder: recorder, path: p(key)))
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { Unkeyed(recorder: recorder, path: p(key)) }
        func superDecoder() throws -> any Decoder { ProbeDecoder(recorder: recorder, path: path + ["super"]) }
        func superDecoder(forKey key: Key) throws -> any Decoder { ProbeDecoder(recorder: recorder, path: p(key)) }
    }

    /// An array of one element, whose values are recorded under the array's path and the element marker.
    struct Unkeyed: UnkeyedDecodingContainer {
        let recorder: ProbeRecorder
        let path: [String]
        private var elementPath: [String] { path + [ProbeRecorder.elementMarker] }
        var codingPath: [any CodingKey] { path.map { NamedKey($0) } }
        private var elements: Int { ProbeDecoder.stops(recorder, path) ? 0 : 1 }
        var count: Int? { elements }
        var isAtEnd: Bool { currentIndex >= elements }
        var currentIndex = 0

        init(recorder: ProbeRecorder, path: [String]) { self.recorder = recorder; self.path = path }

        mutating func decodeNil() throws -> Bool { false }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            currentIndex += 1
            return try Single(recorder: recorder, path: elementPath).decode(type)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            currentIndex += 1
            return KeyedDecodingContainer(Keyed<NestedKey>(recorder: recorder, path: elementPath))
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            currentIndex += 1
            return Unkeyed(recorder: recorder, path: elementPath)
        }
        mutating func superDecoder() throws -> any Decoder {
            currentIndex += 1
            return ProbeDecoder(recorder: recorder, path: elementPath)
        }
    }

    struct Single: SingleValueDecodingContainer {
        let recorder: ProbeRecorder
        let path: [String]
        var codingPath: [any CodingKey] { path.map { NamedKey($0) } }
        func decodeNil() -> Bool { ProbeDecoder.stops(recorder, path) }
        func decode(_ type: Bool.Type) throws -> Bool { recorder.nextBool(path) }
        func decode(_ type: String.Type) throws -> String { recorder.nextString(path) }
        /// Every integer and floating-point type is a probe integer (those narrower than 64 bits truncate it).
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            if let integer = T.self as? any FixedWidthInteger.Type {
                return integer.init(truncatingIfNeeded: recorder.nextInteger(path)) as! T
            }
            if let floating = T.self as? any BinaryFloatingPoint.Type {
                return floating.init(recorder.nextInteger(path)) as! T
            }
            return try ProbeDecoder.value(type, recorder: recorder, path: path)
        }
    }
}
