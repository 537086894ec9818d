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

        #expect(ids.count == Self.taskCount)
        #expect(Set(ids).count == 1)
        let stored = try await key.results(in: store)
        #expect(stored.count == 1)
        #expect(stored.first?.id == ids.first)
        #expect(try await store.count(Person.self) == 51)
        #expect(try await store.verify().isClean)
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

        #expect(ids.count == Self.taskCount)
        #expect(Set(ids).count == 1)
        let stored = try await key.results(in: store)
        #expect(stored.count == 1)
        #expect(stored.first?.id == ids.first)
        #expect(try await store.count(Person.self) == 51)
        #expect(try await store.verify().isClean)
    }
}
