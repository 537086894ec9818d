import Foundation
import Testing
@testable import DocStore

// `ids` gives an id back from its primary key when the key holds it exactly, and reads the document otherwise: either
// way the ids are the ones the documents hold.

private struct ByInt: Document { var id: Int; var n: Int; static let collection = "by_int" }
private struct ByDouble: Document { var id: Double; var n: Int; static let collection = "by_double" }
private struct ByString: Document { var id: String; var n: Int; static let collection = "by_string" }
private struct ByUUID: Document { var id: UUID; var n: Int; static let collection = "by_uuid" }
private struct ByDate: Document { var id: Date; var n: Int; static let collection = "by_date" }


@Suite struct IDsFromKeysTests {
    private static let strings = ["", "a", "Zürich", "e\u{301}", "\u{0}x", "x\u{0}", "ASCII only", "日本", "\u{7F}"]

    /// An id of a common type is keyed without encoding it: the key must be the encoded id's, byte for byte, or a
    /// document saved under one key would be looked for under another.
    @Test func anIDKeyedDirectlyHasTheKeyOfTheEncodedID() throws {
        func encodedKey<ID: Encodable>(_ id: ID) throws -> [UInt8] {
            let bytes = try DocumentEncoder().encode(id)
            return try bytes.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                var key = KeyEncoder()
                try key.append(try reader.root(), in: reader)
                return key.bytes
            }
        }
        var rng = SeededGenerator(seed: 11)
        for _ in 0..<1_000 {
            let i = Int.random(in: .min ... .max, using: &rng) >> Int.random(in: 0...63, using: &rng)
            #expect(try CollectionHandle.idKey(i, collection: "c") == encodedKey(i), "Int \(i)")
            #expect(try CollectionHandle.idKey(Int64(i), collection: "c") == encodedKey(Int64(i)), "Int64 \(i)")
            let u = UUID()
            #expect(try CollectionHandle.idKey(u, collection: "c") == encodedKey(u), "UUID \(u)")
        }
        for s in Self.strings + ["a\r\nb", "Å", "A\u{30A}", String(repeating: "x", count: 300)] {
            #expect(try CollectionHandle.idKey(s, collection: "c") == encodedKey(s), "String \(s.debugDescription)")
        }
        // A string too long for a key is refused.
        let long = String(repeating: "y", count: IndexKeys.maximumKeySize + 1)
        #expect(throws: DocStoreError.self) { try CollectionHandle.idKey(long, collection: "c") }
    }

    /// Random values of every kind a key is made of: each is given back exactly or not at all, and what is given
    /// back has the same key.
    @Test func aKeyGivesBackItsValueExactlyOrNotAtAll() {
        var rng = SeededGenerator(seed: 7)
        var values: [DocumentValue] = [.int(0), .int(1 << 53), .int(-(1 << 53)), .int((1 << 53) + 1), .int(.max), .int(.min),
                                       .uint(.max), .double(-0.0), .double(0.5), .double(.nan), .double(.infinity),
                                       .double(-.infinity), .double(1e300), .date(Date(timeIntervalSinceReferenceDate: 0)),
                                       .date(Date(timeIntervalSinceReferenceDate: -1.5)), .bool(true), .null,
                                       .bytes([0, 1]), .array([.int(1)]), .object([.init("a", .int(1))])]
        values += Self.strings.map(DocumentValue.string)
        for _ in 0..<2_000 {
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: values.append(.int(Int64.random(in: -(1 << 60)...(1 << 60), using: &rng) >> Int.random(in: 0...60, using: &rng)))
            case 1: values.append(.double(Double.random(in: -1e6...1e6, using: &rng)))
            case 2: values.append(.uuid(UUID()))
            case 3: values.append(.date(Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &rng))))
            default:
                let scalars = (0..<Int.random(in: 0...6, using: &rng)).map { _ in
                    Character(Unicode.Scalar([0, 0x41, 0x7A, 0x7F, 0xE9, 0x301, 0x65E5][Int.random(in: 0..<7, using: &rng)])!)
                }
                values.append(.string(String(scalars)))
            }
        }
        for value in values {
            let key = KeyEncoder.key(value)
            let back = KeyEncoder.exactValue(ofKey: key, numbers: true)
            switch value {
            case .uuid, .date: #expect(back == value, "\(value)")
            case .string(let s) where s.utf8.allSatisfy({ $0 < 0x80 }): #expect(back == value, "\(value)")
            case .int(let i) where i != 0 && i.magnitude <= 1 << 53: #expect(back == value, "\(value)")
            case .double(let d) where !d.isNaN && d != 0 && abs(d) <= 0x1p53 && d.rounded() != d: #expect(back == value, "\(value)")
            default: break
            }
            if let back {
                #expect(KeyEncoder.key(back) == key, "\(value) came back as \(back), whose key differs")
                if case .string = value {} else if case .string = back { Issue.record("\(value) came back as a string") }
            }
            if case .int = value {} else if case .double = value {} else {
                #expect(KeyEncoder.exactValue(ofKey: key, numbers: false) == back, "\(value)")
            }
            #expect(KeyEncoder.exactValue(ofKey: key, numbers: false).map { v -> Bool in
                if case .int = v { return false }; if case .double = v { return false }; return true } ?? true,
                "a number came back without numbers: \(value)")
        }
    }

    /// Documents keyed by every kind of id: typed and untyped `ids` equal the ids of the results, in order.
    @Test func idsAreTheDocumentsIDsForEveryKindOfID() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: 11)
        let ints: [Int] = [0, -1, 1 << 53, -(1 << 53), (1 << 53) + 1, .max, .min] + (0..<40).map { _ in
            Int.random(in: -(1 << 62)...(1 << 62), using: &rng) >> Int.random(in: 0...62, using: &rng) }
        let doubles: [Double] = [-0.0, 0.5, -0.25, 1e300, -1e-300, 0x1p53 + 2, 3] + (0..<40).map { _ in
            Double.random(in: -1e9...1e9, using: &rng) }
        let dates = [0, -1.5, 1e9, 123.456].map(Date.init(timeIntervalSinceReferenceDate:))
        try await store.write { ctx in
            for (n, id) in Set(ints).enumerated() { try ctx.insert(ByInt(id: id, n: n)) }
            for (n, id) in Set(doubles).enumerated() { try ctx.insert(ByDouble(id: id, n: n)) }
            for (n, id) in Self.strings.enumerated() { try ctx.insert(ByString(id: id, n: n)) }
            for n in 0..<20 { try ctx.insert(ByUUID(id: UUID(), n: n)) }
            for (n, id) in dates.enumerated() { try ctx.insert(ByDate(id: id, n: n)) }
        }
        try await store.read { ctx in
            try Self.check(ByInt.self, in: ctx)
            try Self.check(ByDouble.self, in: ctx)
            try Self.check(ByString.self, in: ctx)
            try Self.check(ByUUID.self, in: ctx)
            try Self.check(ByDate.self, in: ctx)
        }
    }

    private static func check<T: Document>(_ type: T.Type, in ctx: ReadContext) throws where T.ID: Equatable {
        for query in [T.query(), T.query().reverse(), T.query().include(Filter.compare("n", .greater, .int(2)))] {
            let results = try query.results(in: ctx)
            #expect(!results.isEmpty)
            let typed = try query.ids(in: ctx)
            #expect(typed == results.map(\.id), "\(T.self): typed ids")
            // Byte for byte: a string's key holds its canonical form, which may differ from the stored one.
            #expect(typed.map { Array("\($0)".utf8) } == results.map { Array("\($0.id)".utf8) }, "\(T.self): as printed")
                        let untypedQuery = query.decoded(as: DocumentValue.self)
            let untyped = try untypedQuery.ids(in: ctx)
            let documents = try untypedQuery.results(in: ctx)
            #expect(untyped == documents.map { $0[path: FieldPath("id")] ?? DocumentValue.null }, "\(T.self): untyped ids")
            #expect(untyped.map { Array("\($0)".utf8) } == documents.map { Array("\($0[path: FieldPath("id")] ?? DocumentValue.null)".utf8) },
                    "\(T.self): untyped ids as printed")
        }
    }
}

/// `IDList` keeps short ids in two integers and long ones in a buffer: whatever their lengths, it must hand back the
/// bytes it was given and sort them as LMDB orders keys (memcmp, then the shorter first).
@Suite struct IDListTests {
    @Test func idsOfEveryLengthComeBackAndSortInKeyOrder() {
        // An empty id beside others (no stored id is empty, but a damaged entry's value may be).
        for ids: [[UInt8]] in [[[], [1]], [[1], []], [[], [0]], [[0], [], []], [[], []]] {
            for descending in [false, true] {
                var list = IDList(ids)
                list.sort(descending: descending)
                let expected = ids.sorted { descending ? $1.lexicographicallyPrecedes($0) : $0.lexicographicallyPrecedes($1) }
                #expect(list.arrays(0..<list.count) == expected, "\(ids)")
                var joined = IDList(Array(ids.prefix(1)))
                joined.append(contentsOf: IDList(Array(ids.dropFirst())))
                joined.sort(descending: descending)
                #expect(joined.arrays(0..<joined.count) == expected, "\(ids) joined")
            }
        }
        var rng = SeededGenerator(seed: 36)
        for round in 0..<300 {
            // Few byte values and lengths around 16, so that prefixes and zero padding tie often.
            let sameLength = round % 3 == 0
            let length = Int.random(in: 0...24, using: &rng)
            let ids: [[UInt8]] = (0..<Int.random(in: 0...40, using: &rng)).map { _ in
                let n = sameLength ? length : Int.random(in: 0...24, using: &rng)
                return (0..<n).map { _ in [0, 1, 0xFF][Int.random(in: 0...2, using: &rng)] }
            }
            var list = IDList()
            let half = ids.count / 2
            for id in ids[..<half] { id.withUnsafeBytes { list.append($0) } }
            list.append(contentsOf: IDList(Array(ids[half...])))
            #expect((0..<list.count).map { list[$0] } == ids)

            let descending = Bool.random(using: &rng)
            list.sort(descending: descending)
            let expected = ids.sorted { descending ? $1.lexicographicallyPrecedes($0) : $0.lexicographicallyPrecedes($1) }
            #expect((0..<list.count).map { list[$0] } == expected, "round \(round)")

            // Sorted, each id once (short ids tie often here).
            var once = list
            once.dropRepeats()
            let distinct = expected.enumerated().filter { $0.offset == 0 || expected[$0.offset - 1] != $0.element }.map(\.element)
            #expect(once.arrays(0..<once.count) == distinct, "round \(round)")

            let offset = Int.random(in: 0...5, using: &rng), limit = Bool.random(using: &rng) ? nil : Int.random(in: 0...9, using: &rng)
            list.keep(skipping: offset, taking: limit)
            #expect(list.arrays(0..<list.count) == Array(expected.dropFirst(offset).prefix(limit ?? .max)))
        }
    }
}
