import Foundation
import Testing
@testable import DocStore

/// Many tasks asking for the same document at once create exactly one: with a unique index on the key, and
/// without any index on it (where only the one write transaction keeps them apart).
@Suite struct FindOrCreateConcurrencyTests {
    static let taskCount = 100

    /// Runs `taskCount` concurrent `findOrCreate`s of `query`, each task ready to create its own document.
    /// Returns the ids the tasks got, in completion order.
    static func raceFindOrCreate(_ query: Query<Person>, in store: DocStore,
                                 make: @escaping @Sendable (Int) -> Person) async throws -> [UUID] {
        try await withThrowingTaskGroup(of: UUID.self) { group in
            for task in 0..<taskCount {
                group.addTask {
                    try await query.findOrCreate(in: store) { make(task) }.id
                }
            }
            var ids: [UUID] = []
            for try await id in group { ids.append(id) }
            return ids
        }
    }

    /// Every task got the same document, the only one the key matches, beside the 50 others.
    static func expectOneCreated(by key: Query<Person>, ids: [UUID], in store: DocStore,
                                 sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(ids.count == taskCount, sourceLocation: sourceLocation)
        #expect(Set(ids).count == 1, "tasks got \(Set(ids).count) different documents", sourceLocation: sourceLocation)
        let stored = try await key.results(in: store)
        #expect(stored.count == 1, sourceLocation: sourceLocation)
        #expect(stored.first?.id == ids.first, sourceLocation: sourceLocation)
        #expect(try await Person.query().count(in: store) == 51, sourceLocation: sourceLocation)
        #expect(try await store.verify().isClean, sourceLocation: sourceLocation)
    }

    /// Other people, so that the key is looked up among documents that do not match it.
    static func others() -> [Person] {
        (0..<50).map { Person(name: "Other \($0)", age: $0, city: "Oslo", email: "other\($0)@x") }
    }

    @Test func concurrentFindOrCreateOnAUniquelyIndexedKeyCreatesOneDocument() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: Self.others())
        let key = Person.include(#Predicate { $0.email == "key@x" })

        let ids = try await Self.raceFindOrCreate(key, in: store) { task in
            Person(name: "Key \(task)", age: task, city: "Bergen", email: "key@x")
        }

        try await Self.expectOneCreated(by: key, ids: ids, in: store)
    }

    @Test func concurrentFindOrCreateOnAnUnindexedKeyCreatesOneDocument() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: Self.others())
        // `name` has no index: each look-up is a full scan.
        let key = Person.include(#Predicate { $0.name == "Key" })
        #expect(try await key.explain(in: store).index == nil)

        let ids = try await Self.raceFindOrCreate(key, in: store) { task in
            Person(name: "Key", age: task, city: "Bergen", email: "key\(task)@x")
        }

        try await Self.expectOneCreated(by: key, ids: ids, in: store)
    }
}
