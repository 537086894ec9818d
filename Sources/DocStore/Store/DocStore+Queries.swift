import Foundation

// A request's verbs on a store: each runs the context's verb in a transaction of its own (`read` or `write`).

extension Query {
    /// The results, in order. For example: `try await Person.sortBy(\.age)[0..<10].results(in: store)`.
    public func results(in store: DocStore) async throws -> [Element] {
        try await store.read { try self.results(in: $0) }
    }

    /// The first result, or `nil`.
    public func first(in store: DocStore) async throws -> Element? { try await store.read { try self.first(in: $0) } }

    /// The last result, or `nil` (of the slice, when sliced).
    public func last(in store: DocStore) async throws -> Element? { try await store.read { try self.last(in: $0) } }

    /// Any one result, or `nil`.
    public func any(in store: DocStore) async throws -> Element? { try await store.read { try self.any(in: $0) } }

    /// The number of results (within the slice, when sliced).
    public func count(in store: DocStore) async throws -> Int { try await store.read { try self.count(in: $0) } }

    /// The one result of a request that has one, such as an aggregate of every match.
    ///
    /// For example: `let total = try await Person.query().aggregate(.sum(\.score)).value(in: store)`.
    public func value(in store: DocStore) async throws -> Element { try await store.read { try self.value(in: $0) } }

    /// How the request runs, then what running it took. For example: `print(try await q.explain(in: store))`.
    public func explain(in store: DocStore) async throws -> QueryExplanation {
        try await store.read { try self.explain(in: $0) }
    }

    /// Deletes the documents and their index entries in one transaction; returns how many.
    @discardableResult
    public func delete(in store: DocStore) async throws -> Int { try await store.write { try self.delete(in: $0) } }

    /// The first result, or the element `create` makes, inserted, in one write transaction. A read looks first, so
    /// that finding costs no write; when it finds nothing, the write looks again before it inserts.
    public func findOrCreate(in store: DocStore, _ create: @escaping @Sendable () throws -> Element) async throws
        -> Element {
        if let found = try await first(in: store) { return found }
        return try await store.write { try self.findOrCreate(in: $0, create) }
    }

    /// Applies `changes` to every result in one write transaction; returns how many matched.
    @discardableResult
    public func update(in store: DocStore, _ changes: [FieldChange]) async throws -> Int {
        try await store.write { try self.update(in: $0, changes) }
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
        return try await store.write { try self.update(in: $0, changes) }
    }
}

extension Query where Element: Document {
    /// The ids of the documents, in order.
    public func ids(in store: DocStore) async throws -> [Element.ID] { try await store.read { try self.ids(in: $0) } }

    /// Decodes, modifies and saves every result in one write transaction; returns how many matched.
    ///
    /// Being `@Sendable`, `change` may run on several threads at once, in no set order, and for documents after one
    /// whose change fails (``DocStore/Options/scanThreads``): the documents are decoded, changed and encoded side by
    /// side, and written in the results' order (ids, unless the query sorts). The error thrown is the one the first
    /// document in that order met (its `change`'s, a unique conflict, a changed id), and nothing of the update is
    /// written.
    ///
    /// For example:
    /// `let moved = try await Person.include(#Predicate { $0.city == "Oslo" }).update(in: store) { $0.city = "Bergen" }`.
    @discardableResult
    public func update(in store: DocStore, _ change: @escaping @Sendable (inout Element) throws -> Void) async throws -> Int {
        try await store.write { try self.updateConcurrently(in: $0, change) }
    }
}

extension Query where Element == DocumentValue {
    /// The ids of the documents, in order.
    public func ids(in store: DocStore) async throws -> [DocumentValue] {
        try await store.read { try self.ids(in: $0) }
    }
}
