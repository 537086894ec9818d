import Foundation

// A request's verbs on a store: each runs in a transaction of its own, through one of two helpers.

extension Query {

    /// Runs `verb` in a read transaction of its own: the store's form of every read verb.
    func reading<T: Sendable>(_ store: DocStore, _ verb: @escaping @Sendable (Query, ReadContext) throws -> T)
        async throws -> T {
        try await store.read { [self] in try verb(self, $0) }
    }

    /// Runs `verb` in a write transaction of its own: the store's form of every verb that writes.
    func writing<T: Sendable>(_ store: DocStore, _ verb: @escaping @Sendable (Query, WriteContext) throws -> T)
        async throws -> T {
        try await store.write { [self] in try verb(self, $0) }
    }

    /// The results, in order. For example: `try await Person.sortBy(\.age)[0..<10].results(in: store)`.
    public func results(in store: DocStore) async throws -> [Element] { try await reading(store) { try $0.results(in: $1) } }

    /// The first result, or `nil`.
    public func first(in store: DocStore) async throws -> Element? { try await reading(store) { try $0.first(in: $1) } }

    /// The last result, or `nil` (of the slice, when sliced).
    public func last(in store: DocStore) async throws -> Element? { try await reading(store) { try $0.last(in: $1) } }

    /// Any one result, or `nil`.
    public func any(in store: DocStore) async throws -> Element? { try await reading(store) { try $0.any(in: $1) } }

    /// The number of results (within the slice, when sliced).
    public func count(in store: DocStore) async throws -> Int { try await reading(store) { try $0.count(in: $1) } }

    /// The one result of a request that has one, such as an aggregate of every match.
    ///
    /// For example: `let total = try await Person.query().aggregate(.sum(\.score)).value(in: store)`.
    public func value(in store: DocStore) async throws -> Element { try await reading(store) { try $0.value(in: $1) } }

    /// How the request runs, then what running it took. For example: `print(try await q.explain(in: store))`.
    public func explain(in store: DocStore) async throws -> QueryExplanation {
        try await reading(store) { try $0.explain(in: $1) }
    }

    /// Deletes the documents and their index entries in one transaction; returns how many.
    @discardableResult
    public func delete(in store: DocStore) async throws -> Int { try await writing(store) { try $0.delete(in: $1) } }

    /// The first result, or the element `create` makes, inserted, in one write transaction. A read looks first, so
    /// that finding costs no write; when it finds nothing, the write looks again before it inserts.
    public func findOrCreate(in store: DocStore, _ create: @escaping @Sendable () throws -> Element) async throws
        -> Element {
        if let found = try await first(in: store) { return found }
        return try await writing(store) { try $0.findOrCreate(in: $1, create) }
    }

    /// Applies `changes` to every result in one write transaction; returns how many matched.
    @discardableResult
    public func update(in store: DocStore, _ changes: [FieldChange]) async throws -> Int {
        try await writing(store) { try $0.update(in: $1, changes) }
    }

    /// Sets, unsets, increments, pushes onto and pulls from fields of every result in one write transaction.
    ///
    /// For example:
    /// `try await people.include(filter).update(in: store, set: ["city": .string("Bergen")], increment: ["age": .int(1)])`.
    @discardableResult
    public func update(in store: DocStore, set: [FieldPath: DocumentValue] = [:], unset: [FieldPath] = [],
                       increment: [FieldPath: DocumentValue] = [:], push: [FieldPath: DocumentValue] = [:],
                       pull: [FieldPath: DocumentValue] = [:]) async throws -> Int {
        let changes = FieldChange.list(set: set, unset: unset, increment: increment, push: push, pull: pull)
        return try await writing(store) { try $0.update(in: $1, changes) }
    }
}

extension Query where Element: Document {
    /// The ids of the documents, in order.
    public func ids(in store: DocStore) async throws -> [Element.ID] { try await reading(store) { try $0.ids(in: $1) } }

    /// Decodes, modifies and saves every result in one write transaction; returns how many matched.
    ///
    /// For example:
    /// `let moved = try await Person.include(#Predicate { $0.city == "Oslo" }).update(in: store) { $0.city = "Bergen" }`.
    @discardableResult
    public func update(in store: DocStore, _ change: @escaping @Sendable (inout Element) throws -> Void) async throws -> Int {
        try await writing(store) { try $0.update(in: $1, change) }
    }
}

extension Query where Element == DocumentValue {
    /// The ids of the documents, in order.
    public func ids(in store: DocStore) async throws -> [DocumentValue] { try await reading(store) { try $0.ids(in: $1) } }
}
