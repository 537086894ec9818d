import Foundation
import Testing
@testable import DocStore

/// `store.check(Type)`: every stored document decoded with the type as it is now, the failures listed.
@Suite struct DecodingCheckTests {
    struct ContactV1: Document {
        var id: Int
        var name: String
        var phone: String
        static let collection = "contacts"
    }

    /// The next version: a required field the stored documents lack, and `phone` now a number.
    struct ContactV2: Document {
        var id: Int
        var name: String
        var phone: Int
        var country: String
        static let collection = "contacts"
    }

    @Test func documentsThatNoLongerDecodeAreListedWithTheirFieldAndReason() async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("check.db"))
        try await store.insert(contentsOf: (1...30).map { ContactV1(id: $0, name: "c\($0)", phone: "555-\($0)") })
        // Three documents already have the new shape.
        try await store.write { ctx in
            for id in [3, 4, 5] {
                try ctx.save(.object([("id", .int(Int64(id))), ("name", .string("n")), ("phone", .int(5550)),
                                      ("country", .string("NO"))]), into: "contacts")
            }
        }
        #expect(try await store.check(ContactV1.self).failureCount == 3)
        let check = try await store.check(ContactV2.self, limit: 5)
        #expect(check.documentsChecked == 30)
        #expect(check.failureCount == 27)
        #expect(check.failures.count == 5)
        #expect(check.failures.map(\.id) == ["1", "2", "6", "7", "8"], "\(check)")
        // The first field that fails is named: `phone` is text where a number is expected.
        for failure in check.failures {
            #expect(failure.field == "phone" || failure.field == "country", "\(failure)")
            #expect(failure.collection == "contacts")
        }
        #expect(!check.isClean)
        #expect(check.description.contains("27 do not decode"), "\(check)")
        // Nothing was written by the check.
        #expect(try await Query<DocumentValue>("contacts").count(in: store) == 30)
    }

    struct Plane: Document {
        var id: Int
        var model: String
        var year: Int?
        var engine: Engine
        struct Engine: Codable, Sendable { var kind: String; var count: Int? }
        static let collection = "planes"
    }

    @Test func aFieldRenamedInTheStoreButNotInTheTypeIsReportedThoughEveryDocumentDecodes() async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("check.db"))
        try await store.write { ctx in
            for id in 1...4 {
                try ctx.insert(.object([("id", .int(Int64(id))), ("model", .string("A320")), ("builtYear", .int(2001)),
                                        ("engine", .object([("kind", .string("jet")), ("thrust", .int(5))]))]),
                               into: "planes")
            }
        }
        let check = try await store.check(Plane.self)
        #expect(check.failureCount == 0)
        #expect(check.unreadFields == ["builtYear": 4, "engine.thrust": 4], "\(check)")
        #expect(check.absentFields == ["engine.count", "year"], "\(check)")
        #expect(check.isClean && !check.fieldsMatch)
        #expect(check.description.contains("field 'builtYear' (in 4 documents) is never read by"), "\(check)")
        #expect(check.description.contains("no document holds"), "\(check)")
        // Once the documents have the type's fields, it checks clean.
        try await store.write { ctx in
            for id in 1...4 {
                try ctx.save(.object([("id", .int(Int64(id))), ("model", .string("A320")), ("year", .int(2001)),
                                      ("engine", .object([("kind", .string("jet")), ("count", .null)]))]), into: "planes")
            }
        }
        #expect(try await store.check(Plane.self).fieldsMatch)
    }

    @Test func aCollectionThatDoesNotExistChecksClean() async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("empty.db"))
        let check = try await store.check(ContactV2.self)
        #expect(check.isClean)
        #expect(check.documentsChecked == 0)
        #expect(try await store.collections().isEmpty, "the check created the collection")
    }
}

@Suite struct FieldKindsTests {
    /// Random documents whose fields take random kinds: every field's tally matches a count made here, and the
    /// mixed fields are exactly those with more than one kind (a missing field counting as one).
    @Test(arguments: randomSeeds(from: "KINDS_SEEDS", otherwise: [5, 6]))
    func fieldKindsMatchACountOfTheDocuments(seed: UInt64) async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("kinds.db"))
        var rng = SeededGenerator(seed: seed)
        let values: [DocumentValue] = [.int(1), .double(2.5), .string("s"), .bool(true), .null, .array([.int(1)]),
                                       .object([("inner", .int(1))])]
        var documents: [DocumentValue] = []
        for n in 0..<200 {
            var fields: [(String, DocumentValue)] = [("id", .int(Int64(n))), ("always", .string("x"))]
            for name in ["a", "b", "c"] where Int.random(in: 0..<4, using: &rng) > 0 {
                // `a` keeps one kind when present; `b` and `c` take any.
                fields.append((name, name == "a" ? .int(Int64(n)) : values.randomElement(using: &rng)!))
            }
            documents.append(.object(fields))
        }
        let written = documents
        try await store.write { ctx in for document in written { try ctx.insert(document, into: "things") } }
        // The count, made here: each field's kind by name, one level of nesting, absent fields as missing.
        func name(_ value: DocumentValue) -> String {
            switch value {
            case .int: "int"
            case .double: "double"
            case .string: "string"
            case .bool: "bool"
            case .null: "null"
            case .array: "array"
            case .object: "object"
            default: "other"
            }
        }
        var expected: [String: [String: Int]] = [:]
        for case .object(let fields) in documents {
            for field in fields {
                expected[field.name, default: [:]][name(field.value), default: 0] += 1
                if case .object(let inner) = field.value {
                    for f in inner { expected[field.name + "." + f.name, default: [:]][name(f.value), default: 0] += 1 }
                }
            }
        }
        for (field, kinds) in expected where kinds.values.reduce(0, +) < documents.count {
            expected[field, default: [:]]["missing"] = documents.count - kinds.values.reduce(0, +)
        }
        let kinds = try await store.fieldKinds(of: "things")
        #expect(kinds.documents == 200)
        #expect(kinds.fields == expected)
        #expect(kinds.fields["always"] == ["string": 200])
        #expect(!kinds.mixed.contains("always") && !kinds.mixed.contains("id"))
        #expect(kinds.mixed.contains("b"), "\(kinds)")
        #expect(try await store.fieldKinds(of: "nothing").documents == 0)
    }
}
