import Foundation
import Testing
@_spi(Fuzzing) @testable import DocStore

/// Documents of format 3, whose root object's field names are a shape kept apart: every reader finds in one what it
/// finds in the document of format 2 it was written from, and refuses a damaged one without reading outside it.
@Suite struct ShapedDocumentTests {
    private struct Person: Codable, Equatable {
        var id: Int
        var name: String
        var age: Int
        var score: Double
        var tags: [String]
        var address: [String: String]
        var bonus: Int?
    }

    /// A random object of one to eight fields, some holding values long enough for offsets of 2 or 4 bytes.
    private func randomObject(_ random: inout CodecRandom) -> DocumentValue {
        DocumentValue.object((0..<(1 + random.below(8))).map { i in
            let value: DocumentValue
            switch random.below(12) {
            case 0: value = .string(String(repeating: "x", count: 200 + random.below(400)))
            case 1: value = .bytes([UInt8](repeating: 7, count: random.chance(4) ? 70_000 : 300))
            default: value = random.documentValue(depth: 3, allowNaN: true)
            }
            return ("f\(i)" + random.asciiString(maxLength: 3), value)
        })
    }

    private func shaped(_ value: DocumentValue, id: UInt64) throws -> (bytes: [UInt8], names: [String]) {
        try #require(try InPlaceReading.shaped(value.encoded(), id: id))
    }

    @Test func shapedDocumentsReadAsTheDocumentsTheyCameFrom() throws {
        var random = CodecRandom(seed: 3301)
        var failures = CodecFailures()
        var widths = Set<UInt8>()
        for _ in 0..<2_000 {
            let value = randomObject(&random)
            let id = random.next() | 1 << 63
            let (bytes, names) = try shaped(value, id: id)
            widths.insert(bytes[9])
            guard case .object(let fields) = value, names == fields.map(\.name) else {
                failures.add("the shape's names are not the fields': \(names)")
                continue
            }
            let set = ShapeSet([(id, DocumentShape(names))])
            try bytes.withUnsafeBytes { raw in
                let reader = BinaryReader(raw, shapes: set)
                if (try? reader.checkChecksum()) != true { failures.add("the checksum does not hold") }
                let root = try reader.root()
                if try DocumentValue(reader: reader, ref: root).encoded() != value.encoded() {
                    failures.add("read back as another value: \(value)")
                }
                var key = KeyEncoder()
                try key.append(root, in: reader)
                if key.bytes != KeyEncoder.key(value) { failures.add("its key differs: \(value)") }
            }
            // Written again in format 2 (as a patch of a field reads it), the same bytes as the value's own.
            _ = ShapeTable.add(id, names)
            if try bytes.withUnsafeBytes({ try BinaryFormat.unshaped($0) }) != value.encoded() {
                failures.add("written back in format 2 as other bytes: \(value)")
            }
            var paths = allPaths(value).map { FieldPath(components: $0) }
            paths.append(FieldPath(components: ["\u{1}missing"]))
            let outcome = bytes.withUnsafeBytes { InPlaceReading.readEveryWay($0, paths: paths, shapes: [id: names]) }
            if !outcome.wellFormed { failures.add("refused: \(value)") }
            if let disagreement = outcome.disagreement { failures.add(disagreement) }
        }
        #expect(failures.count == 0, failures.report(seed: 3301))
        #expect(widths == [1, 2, 4])
    }

    @Test func aModelDecodesFromItsShapedDocument() throws {
        let people = (0..<50).map { i in
            Person(id: i, name: "name \(i)", age: i % 90, score: Double(i) / 3, tags: Array(repeating: "t", count: i % 4),
                   address: ["city": "city \(i)"], bonus: i % 3 == 0 ? nil : i)
        }
        var shapes: [UInt64: [String]] = [:]
        for person in people {
            let document = try DocumentEncoder().encode(person)
            // The shape is the names: a person without a bonus has another one.
            let id: UInt64 = person.bonus == nil ? 1 : 2
            let (bytes, names) = try #require(try InPlaceReading.shaped(document, id: id))
            shapes[id] = names
            #expect(bytes.count < document.count)
            let set = ShapeSet(shapes.map { ($0.key, DocumentShape($0.value)) })
            let decoded = try bytes.withUnsafeBytes { try DocumentDecoder().decode(Person.self, from: $0, shapes: set) }
            #expect(decoded == person)
            let age = try bytes.withUnsafeBytes { raw -> DocumentValue? in
                let reader = BinaryReader(raw, shapes: set)
                return try reader.value(atPath: "age", from: try reader.root()).map { try DocumentValue(reader: reader, ref: $0) }
            }
            #expect(age == .int(Int64(person.age)))
        }
        #expect(shapes[1] == ["id", "name", "age", "score", "tags", "address"])
    }

    @Test func aShapedDocumentNeedsItsShape() throws {
        let (bytes, names) = try shaped(["a": 1, "b": "two"], id: 7)
        func failure(_ shapes: ShapeSet?) -> String {
            bytes.withUnsafeBytes { raw in
                do { _ = try BinaryReader(raw, shapes: shapes).root(); return "none" } catch { return "\(error)" }
            }
        }
        #expect(failure(nil).contains("its shape (7) is not one its store records"))
        #expect(failure(ShapeSet([(8, DocumentShape(names))])).contains("its shape (7) is not one its store records"))
        #expect(failure(ShapeSet([(7, DocumentShape(names))])) == "none")
        // A shape of another number of fields than the document's values: the offsets and values do not agree.
        let wrong = ShapeSet([(7, DocumentShape(["a", "b", "c"]))])
        #expect(bytes.withUnsafeBytes { (try? DocumentValue(reader: BinaryReader($0, shapes: wrong), ref: try BinaryReader($0, shapes: wrong).root())) } == nil)
    }

    /// A shaped object of no fields with bytes after it, sealed as if sound: refused, as format 2 refuses bytes
    /// after its root.
    @Test func bytesAfterAShapedObjectOfNoFieldsAreRefused() throws {
        var writer = BinaryWriter()
        writer.byte(BinaryFormat.shapedVersion)
        writer.littleEndian(UInt64(2))
        writer.byte(1)
        writer.varint(0)
        writer.byte(0xAA)
        writer.seal()
        let set = ShapeSet([(2, DocumentShape([]))])
        let refusal = writer.bytes.withUnsafeBytes { raw in
            do { _ = try BinaryReader(raw, shapes: set).root(); return "none" } catch { return "\(error)" }
        }
        #expect(refusal.contains("1 bytes after the document"), "\(refusal)")
    }

    @Test func onlyAnObjectTakesAShape() throws {
        #expect(try InPlaceReading.shaped(DocumentValue.array([1, 2]).encoded(), id: 1) == nil)
        #expect(try InPlaceReading.shaped(DocumentValue.int(3).encoded(), id: 1) == nil)
        let kept = try DocumentValue.object([("a", 1)]).encoded().withUnsafeBytes { raw in
            try BinaryFormat.shaped(raw) { _ in nil }
        }
        #expect(kept == nil)
        // An empty object has a shape of no names, and no values.
        let (empty, names) = try shaped(DocumentValue.object([DocumentValue.Field]()), id: 2)
        #expect(names.isEmpty)
        let set = ShapeSet([(2, DocumentShape([]))])
        let value = try empty.withUnsafeBytes { raw in
            let reader = BinaryReader(raw, shapes: set)
            return try DocumentValue(reader: reader, ref: try reader.root())
        }
        #expect(value == DocumentValue.object([DocumentValue.Field]()))
    }

    @Test func damagedShapedDocumentsAreRefusedOrReadAlikeEveryWay() throws {
        var random = CodecRandom(seed: 3307)
        var failures = CodecFailures()
        var refused = 0
        for round in 0..<4_000 {
            let value = randomObject(&random)
            var (bytes, names) = try shaped(value, id: 5)
            for _ in 0..<(1 + random.below(3)) {
                let at = random.below(bytes.count)
                switch random.below(4) {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: random.next())
                case 1: bytes[at] ^= 1 << UInt8(random.below(8))
                case 2: bytes[at] = random.pick([0x00, 0x01, 0x02, 0x04, 0x05, 0x7F, 0xFF])
                default: bytes.remove(at: at)
                }
            }
            if round % 5 == 0 { bytes.removeLast(random.below(min(bytes.count, 12) + 1)) }
            var paths = allPaths(value).map { FieldPath(components: $0) }
            paths.append(FieldPath(components: ["nothing"]))
            let outcome = bytes.withUnsafeBytes { InPlaceReading.readEveryWay($0, paths: paths, shapes: [5: names]) }
            if !outcome.wellFormed { refused += 1 }
            if let disagreement = outcome.disagreement { failures.add(disagreement) }
            _ = bytes.withUnsafeBytes { raw in
                try? DocumentDecoder().decode([String: String].self, from: raw,
                                              shapes: ShapeSet([(5, DocumentShape(names))]))
            }
        }
        #expect(failures.count == 0, failures.report(seed: 3307))
        #expect(refused > 1_000)
    }

    /// The encoder writes format 3 in one pass: the same bytes as a document of format 2 converted, whichever way
    /// a type writes its root's fields (a keyed `encode`, a nested container, a super encoder), with a name twice,
    /// and for a root that is not an object (format 2, as the conversion leaves it).
    @Test func theEncoderWritesFormat3AsTheConversionMakesIt() throws {
        var random = CodecRandom(seed: 3313)
        var failures = CodecFailures()
        let salt = random.next() | 1
        var shaped = 0
        // (Kept from document to document, as a batch's are: one of the same names as the last, or not.)
        let last = LastShape()
        for round in 0..<600 {
            var value = round % 10 == 9 ? random.documentValue(depth: 3, allowNaN: true) : randomObject(&random)
            if case .object(var fields) = value, random.chance(8), let first = fields.first {
                fields.append(first)
                value = .object(fields)
            }
            let through = ThroughEncoder(value: value, way: round)
            let plain = value.encoded()
            guard try DocumentEncoder().encode(through) == plain else {
                failures.add("encoded as other bytes than its value's: \(value)")
                continue
            }
            let direct = try DocumentEncoder().encode(through, shapedWith: salt)
            let converted = try plain.withUnsafeBytes { try BinaryFormat.shaped($0, salt: salt) { $0.id } } ?? plain
            if direct != converted { failures.add("not the bytes the conversion makes: \(value)") }
            for _ in 0..<(round % 3) {
                if try DocumentEncoder().encode(through, shapedWith: salt, last: last) != converted {
                    failures.add("not the bytes the conversion makes, after the last document's: \(value)")
                }
            }
            guard direct.first == BinaryFormat.shapedVersion else { continue }
            shaped += 1
            // Its shape is in the process's table: the document reads back without one given.
            if try DocumentValue(encoded: direct).encoded() != plain { failures.add("read back otherwise: \(value)") }
        }
        #expect(failures.count == 0, failures.report(seed: 3313))
        #expect(shaped > 500)
    }

    /// Other names held under the id of a document's names (the table's, so the document could not be read with
    /// them): the encoder writes it in format 2, with its names.
    @Test func aDocumentWhoseIdTheTableHoldsForOtherNamesKeepsItsNames() throws {
        let salt = UInt64.random(in: 1...UInt64.max)
        let value = DocumentValue.object([("a\(salt)", 1), ("b", .object([("c", "two")])), ("d", [1, 2])])
        let id = DocumentShape.id(of: ["a\(salt)", "b", "d"], salt: salt)
        #expect(ShapeTable.add(id, ["other\(salt)"])?.names == ["other\(salt)"])
        let last = LastShape()
        for way in 0..<3 {
            #expect(try DocumentEncoder().encode(ThroughEncoder(value: value, way: way), shapedWith: salt) == value.encoded())
            #expect(try DocumentEncoder().encode(ThroughEncoder(value: value, way: way), shapedWith: salt, last: last)
                    == value.encoded())
        }
    }

    /// A type that breaks the `Encoder` rules is refused with an error, never a crash, and never written as a
    /// document that reads otherwise than it was meant: values put in the root object through an unkeyed container
    /// of the same encoder; a value written through a container it has left.
    @Test func encoderMisuseIsRefused() throws {
        struct UnkeyedIntoTheRoot: Encodable {
            func encode(to encoder: any Encoder) throws {
                var keyed = encoder.container(keyedBy: NamedKey.self)
                try keyed.encode(1, forKey: NamedKey("a"))
                var unkeyed = encoder.unkeyedContainer()
                try unkeyed.encode(2)
            }
        }
        struct AfterLeaving: Encodable {
            func encode(to encoder: any Encoder) throws {
                var root = encoder.container(keyedBy: NamedKey.self)
                var left = root.nestedContainer(keyedBy: NamedKey.self, forKey: NamedKey("a"))
                try root.encode(1, forKey: NamedKey("b"))
                var failed = left.nestedContainer(keyedBy: NamedKey.self, forKey: NamedKey("c"))
                try 5.encode(to: failed.superEncoder(forKey: NamedKey("d")))
            }
        }
        #expect(throws: EncodingError.self) { try DocumentEncoder().encode(UnkeyedIntoTheRoot(), shapedWith: 7) }
        for salt in [nil, 7] as [UInt64?] {
            #expect(throws: EncodingError.self) { try DocumentEncoder().encode(AfterLeaving(), shapedWith: salt) }
        }
    }

    private func allPaths(_ value: DocumentValue, prefix: [String] = []) -> [[String]] {
        guard case .object(let fields) = value else { return [] }
        return fields.flatMap { [prefix + [$0.name]] + allPaths($0.value, prefix: prefix + [$0.name]) }
    }
}

/// A value written through the `Encoder` API, each object's fields and array's elements in one of the ways a
/// `Codable` type may write them (chosen from `way`), so that every path of the encoder that writes a name is taken.
private struct ThroughEncoder: Encodable {
    let value: DocumentValue
    let way: Int

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .object(let fields):
            var container = encoder.container(keyedBy: NamedKey.self)
            for (i, field) in fields.enumerated() {
                let key = NamedKey(field.name), inner = ThroughEncoder(value: field.value, way: way &* 31 &+ i)
                switch (way + i) % 3 {
                case 0: try container.encode(inner, forKey: key)
                case 1: try inner.encode(to: container.superEncoder(forKey: key))
                default: try Self.put(field.value, into: &container, key, way: inner.way)
                }
            }
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for (i, element) in elements.enumerated() {
                let inner = ThroughEncoder(value: element, way: way &* 31 &+ i)
                switch (way + i) % 3 {
                case 0: try container.encode(inner)
                case 1: try inner.encode(to: container.superEncoder())
                default: try Self.put(element, into: &container, way: inner.way)
                }
            }
        default:
            var container = encoder.singleValueContainer()
            if let scalar = Self.scalar(value) { try container.encode(scalar) } else { try container.encodeNil() }
        }
    }

    /// A value that is neither an object nor an array as the Swift value that encodes as it; `nil` for null.
    private static func scalar(_ value: DocumentValue) -> (any Encodable)? {
        switch value {
        case .null, .array, .object: nil
        case .bool(let b): b
        case .int(let i): i
        case .uint(let u): u
        case .double(let d): d
        case .string(let s): s
        case .bytes(let b): Data(b)
        case .date(let d): d
        case .uuid(let u): u
        }
    }

    /// `value` written by the keyed container's own methods, and its objects and arrays as nested containers.
    private static func put(_ value: DocumentValue, into container: inout KeyedEncodingContainer<NamedKey>,
                            _ key: NamedKey, way: Int) throws {
        switch value {
        case .null: try container.encodeNil(forKey: key)
        case .bool(let b): try container.encode(b, forKey: key)
        case .int(let i): try container.encode(i, forKey: key)
        case .uint(let u): try container.encode(u, forKey: key)
        case .double(let d): try container.encode(d, forKey: key)
        case .string(let s): try container.encode(s, forKey: key)
        case .bytes(let b): try container.encode(Data(b), forKey: key)
        case .date(let d): try container.encode(d, forKey: key)
        case .uuid(let u): try container.encode(u, forKey: key)
        case .object(let fields):
            var nested = container.nestedContainer(keyedBy: NamedKey.self, forKey: key)
            for (i, field) in fields.enumerated() { try put(field.value, into: &nested, NamedKey(field.name), way: way + i) }
        case .array(let elements):
            var nested = container.nestedUnkeyedContainer(forKey: key)
            for (i, element) in elements.enumerated() { try put(element, into: &nested, way: way + i) }
        }
    }

    private static func put(_ value: DocumentValue, into container: inout any UnkeyedEncodingContainer, way: Int) throws {
        switch value {
        case .null: try container.encodeNil()
        case .bool, .int, .uint, .double, .string, .bytes, .date, .uuid: try container.encode(scalar(value)!)
        case .object(let fields):
            var nested = container.nestedContainer(keyedBy: NamedKey.self)
            for (i, field) in fields.enumerated() { try put(field.value, into: &nested, NamedKey(field.name), way: way + i) }
        case .array(let elements):
            var nested = container.nestedUnkeyedContainer()
            for (i, element) in elements.enumerated() { try put(element, into: &nested, way: way + i) }
        }
    }
}
