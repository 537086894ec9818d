import Foundation
import Testing
@testable import DocStore

/// Documents written and read without their Swift type, as tools like the REPL do.
@Suite struct UntypedDocumentsTests {
    static func annValue(id: UUID, email: String) -> DocumentValue {
        .object([("id", .uuid(id)), ("name", .string("Ann")), ("age", .int(41)), ("city", .string("Oslo")),
                 ("email", .string(email)), ("tags", .array([.string("swift"), .string("lmdb")]))])
    }

    @Test func writesWithoutTheTypeMaintainTheIndexesTheCatalogRecords() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("untyped.db")
        let typed = Person(name: "Bob", age: 30, email: "bob@example.com", tags: ["swift"])
        do {
            let store = try await DocStore(path: path)
            try await store.insert(typed)           // records Person's indexes in the catalog
            await store.close()
        }
        let id = UUID()
        do {
            // A process that has never heard of Person.
            let store = try await DocStore(path: path)
            try await store.write { ctx in
                try ctx.insert(UntypedDocumentsTests.annValue(id: id, email: "ann@example.com"), into: "people")
            }
            await expectError(.uniqueViolation) {
                try await store.write { ctx in
                    try ctx.insert(UntypedDocumentsTests.annValue(id: UUID(), email: "bob@example.com"), into: "people")
                }
            }
            await store.close()
        }
        let store = try await DocStore(path: path)
        let ann = try #require(try await store.get(Person.self, id: id))
        #expect(ann == Person(id: id, name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: ["swift", "lmdb"]))
        let key = try idKey(id)
        #expect(try await store.entries(of: Person.self, index: "age").contains(IndexEntry(key: KeyEncoder.key(.int(41)), id: key)))
        #expect(try await store.entries(of: Person.self, index: "tags").filter { $0.id == key }.count == 2)
        #expect(try await store.entries(of: Person.self, index: "email").count == 2)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func typedDocumentsReadBackWithoutTheirType() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let p = Person(name: "Ann", age: 41, city: "Bergen", email: nil, tags: ["a"])
        try await store.insert(p)
        let value = try await store.write { ctx in try ctx.get("people", id: .uuid(p.id)) }
        #expect(value == .object([("id", .uuid(p.id)), ("name", .string("Ann")), ("age", .int(41)),
                                  ("city", .string("Bergen")), ("tags", .array([.string("a")]))]))
        #expect(try await store.write { try Query<DocumentValue>("people").count(in: $0) } == 1)
        #expect(try await store.write { try Query<DocumentValue>("nowhere").results(in: $0) }.isEmpty)
    }

    @Test func deletingWithoutTheTypeRemovesTheEntries() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let p = Person(name: "Ann", age: 41, email: "ann@example.com", tags: ["a", "b"])
        try await store.insert(p)
        #expect(try await store.write { try $0.delete("people", id: .uuid(p.id)) })
        for index in ["age", "city_age", "email", "tags"] {
            #expect(try await store.entries(of: Person.self, index: index).isEmpty, "index \(index)")
        }
    }

    @Test func aNewCollectionIsKeyedByItsIdField() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            try ctx.insert(.object([("id", .int(2)), ("text", .string("b"))]), into: "notes")
            try ctx.insert(.object([("id", .int(1)), ("text", .string("a"))]), into: "notes")
        }
        let notes = try await store.write { try Query<DocumentValue>("notes").results(in: $0) }
        #expect(notes.map { $0[field: "text"] } == [.string("a"), .string("b")], "documents come in id order")
        let info = try #require(try await store.collections().first { $0.name == "notes" })
        #expect(info.idPath == "id")
        #expect(info.indexes.isEmpty)
    }

    @Test func aDocumentWithoutIdIsGivenOneAndOneNotAnObjectIsRefused() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { try $0.insert(.object([("text", .string("no id"))]), into: "notes") }
        await expectError(.encodingFailed) {
            try await store.write { try $0.insert(.array([.int(1)]), into: "notes") }
        }
        let stored = try await store.write { try $0.get("notes", id: .int(1)) }
        #expect(stored == .object([("id", .int(1)), ("text", .string("no id"))]))
        #expect(try await store.write { try Query<DocumentValue>("notes").count(in: $0) } == 1)
    }
}
