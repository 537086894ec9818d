import Foundation
import Testing
@testable import DocStore

/// `Person`'s collection, with one more index declared than `Person` declares.
private struct PersonWithNameIndex: Document, Equatable {
    var id: UUID
    var name: String
    var age: Int
    var city: String
    var email: String?
    var tags: [String]
    static let collection = "people"
    static let indexes: [IndexSpec<PersonWithNameIndex>] = [.index("age", \.age), .index("by_name", \.name)]
}

/// A type of the `people` collection whose id is at another field.
private struct PersonKeyedByName: Document {
    var id: String
    var age: Int
    enum CodingKeys: String, CodingKey { case id = "name", age }
    static let collection = "people"
}

/// Another type of the `people` collection.
private struct PersonAge: Document {
    var id: UUID
    var age: Int
    var double: Int { age * 2 }
    static let collection = "people"
}

@Suite struct ReadsNeverWriteTests {
    /// Every read verb, typed and untyped, on `Person`'s collection.
    private static func readEverything(_ store: DocStore) async throws -> [Int] {
        let typed = Person.include(#Predicate { $0.age > 20 }).sortBy(\.name)
        let untyped = typed.decoded(as: DocumentValue.self)
        return try await store.read { ctx in
            [try typed.results(in: ctx).count, try typed.count(in: ctx), try typed.ids(in: ctx).count,
             try typed.first(in: ctx) == nil ? 0 : 1, try typed.any(in: ctx) == nil ? 0 : 1,
             try drained(try typed.cursor(in: ctx)).count, try typed.explain(in: ctx).statistics.returned,
             try untyped.results(in: ctx).count, try untyped.ids(in: ctx).count,
             try ctx.get(Person.self, id: UUID()) == nil ? 0 : 1,
             try ctx.get("people", id: .string("x")) == nil ? 0 : 1]
        }
    }

    @Test func readingAMissingCollectionAnswersEmptyAndCommitsNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let before = try await store.lastCommittedTransaction()
        #expect(try await Self.readEverything(store) == Array(repeating: 0, count: 11))
        var observed = Person.query().observe(in: store).makeAsyncIterator()
        #expect(try await observed.next() == [])
        #expect(try await store.collections().isEmpty)
        #expect(try await store.lastCommittedTransaction() == before, "a read committed a write")
        #expect(try await store.undeclaredIndexes(of: Person.self).isEmpty)
    }

    @Test func readsDoNotBuildADeclaredIndexButPrepareAndWritesDo() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = (0..<40).map { Person(name: "P\($0)", age: $0) }
        try await store.insert(contentsOf: people)
        let before = try await store.lastCommittedTransaction()
        let byName = PersonWithNameIndex.include(#Predicate { $0.name == "P7" })
        let read = try await store.read { ctx in (try byName.results(in: ctx).map(\.id), try byName.explain(in: ctx)) }
        #expect(read.0 == [people[7].id])
        #expect(read.1.index == nil, "\(read.1)")
        #expect(try await store.lastCommittedTransaction() == before, "a read built an index")
        #expect(try await store.collections().first?.indexes.map(\.name).contains("by_name") == false)

        try await store.prepare(PersonWithNameIndex.self)
        let prepared = try await byName.explain(in: store)
        #expect(prepared.index == "by_name", "\(prepared)")
        #expect(try await byName.results(in: store).map(\.id) == [people[7].id])
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")

        // Preparing again finds everything there.
        let again = try await store.lastCommittedTransaction()
        try await store.prepare(PersonWithNameIndex.self)
        #expect(try await store.lastCommittedTransaction() == again)
    }

    /// A store that only reads (here a new one on a file another wrote) keeps a type synced with its collection
    /// after the type's first read, as a write would: the reads after it find the kept handle under one lock, with no
    /// schema look-up and nothing to hand over. A type that declares an index the catalog lacks is not synced, so
    /// that its first write still builds the index.
    @Test func aStoreThatOnlyReadsKeepsEachTypeSyncedAfterItsFirstRead() async throws {
        let dir = TemporaryDirectory()
        let location = storeLocation(dir, "reads.db")
        let people = (0..<10).map { Person(name: "P\($0)", age: $0) }
        do {
            let writer = try await openStore(location)
            try await writer.insert(contentsOf: people)
            await writer.close()
        }
        let store = try await openStore(location)
        defer { withExtendedLifetime(store) {} }
        func synced<T: Document>(_ type: T.Type) -> ObjectIdentifier? {
            store.core.withState { store.core.synced[ObjectIdentifier(type)].map(ObjectIdentifier.init) }
        }
        #expect(synced(Person.self) == nil)
        #expect(try await Person.query().count(in: store) == 10)
        let handle = try await store.read { ctx in try ctx.scope.handleForReading(Person.self).map(ObjectIdentifier.init) }
        #expect(handle != nil && synced(Person.self) == handle, "a read left its type unsynced")
        #expect(try await Person.include(#Predicate { $0.age == 3 }).first(in: store)?.id == people[3].id)

        let byName = PersonWithNameIndex.include(#Predicate { $0.name == "P7" })
        #expect(try await byName.results(in: store).map(\.id) == [people[7].id])
        #expect(synced(PersonWithNameIndex.self) == nil, "a type was synced with a collection that lacks its index")
        try await store.insert(PersonWithNameIndex(id: UUID(), name: "Q", age: 1, city: "", email: nil, tags: []))
        #expect(try await byName.explain(in: store).index == "by_name")
        #expect(try await store.collections().first?.indexes.map(\.name).contains("by_name") == true)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func typedIDsAreTheTypesIDsInTheQueryOrder() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = (0..<30).map { Person(name: "P\(($0 * 7) % 30)", age: $0 % 5) }
        try await store.insert(contentsOf: people)
        for query in [Person.sortBy(\.name), Person.sortBy(\.age).reverse()[3..<17], Person.query().reverse(),
                      Person.include(#Predicate { $0.age == 2 }), Person.sortBy(\.name)[5..<25].reverse()[2..<9]] {
            let (ids, results) = try await store.read { ctx in (try query.ids(in: ctx), try query.results(in: ctx)) }
            #expect(ids == results.map(\.id), "\(query)")
            #expect(!ids.isEmpty, "\(query)")
        }
    }

    @Test func aTypedReadOfACollectionKeyedElsewhereIsAnErrorNotAWrongAnswer() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        #expect(try await PersonKeyedByName.query().count(in: store) == 0)   // nothing there yet: empty
        try await store.insert(Person(name: "Ann", age: 41))
        await expectError(.invalidSchema, mentions: ["people", "'id'", "'name'"]) {
            _ = try await store.get(PersonKeyedByName.self, id: "Ann")
        }
        await expectError(.invalidSchema, mentions: ["keys its documents by 'id'"]) {
            _ = try await PersonKeyedByName.query().ids(in: store)
        }
    }

    @Test func aQueryWithConditionsOnOneTypeIsNotDecodedAsAnother() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<10).map { Person(name: "P\($0)", age: $0) })
        // `name.count` is not a stored field: that part is evaluated on the decoded Person.
        let opaque = Person.include(#Predicate { $0.nameLength == 2 && $0.age > 3 })
        #expect(try await opaque.decoded(as: DocumentValue.self).count(in: store) == 6)
        await expectError(.invalidSchema, mentions: ["Person", "PersonAge"]) {
            _ = try await opaque.decoded(as: DocumentValue.self).decoded(as: PersonAge.self).results(in: store)
        }
        // Without such a part, the same request decodes as any type of the collection.
        let plain = Person.include(#Predicate { $0.age > 3 }).decoded(as: PersonAge.self)
        #expect(try await plain.results(in: store).map(\.age).sorted() == Array(4..<10))
    }
}
