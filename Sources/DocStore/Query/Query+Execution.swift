import Foundation

extension Query {
    /// Plans this query in a transaction.
    func makePlan(in context: ReadContext, forCounting: Bool = false) throws -> (Plan, CollectionHandle) {
        let handle = try context.scope.handle(for: T.self)
        let resolver = context.scope.core.resolver(for: T.self)
        let fieldPath: (AnyKeyPath) -> FieldPath? = { resolver.fieldPath($0) }
        let condition = Condition.and(clauses.map { clause in
            switch clause {
            case .include(let p): return PredicateTranslator.condition(for: p, fieldPath: fieldPath)
            case .exclude(let p): return .not(PredicateTranslator.condition(for: p, fieldPath: fieldPath))
            }
        })
        var sort: [SortSpec] = []
        if !forCounting {
            for key in sortKeys {
                guard let path = resolver.fieldPath(key.keyPath) else {
                    throw DocStoreError(.invalidSchema, "cannot sort \(T.self) by \(key.keyPath): it is not a stored "
                        + "field (a computed property, or a value the key path computes)", collection: handle.name)
                }
                sort.append(SortSpec(path: path, descending: key.order == .reverse))
            }
        }
        let plan = try Planner(handle: handle, txn: context.txn).plan(
            filter: condition, sort: sort, idDescending: forCounting ? false : idDescending,
            offset: window?.range.lowerBound ?? 0, limit: window?.range.count,
            afterwards: forCounting ? [] : window?.afterwards ?? [])
        return (plan, handle)
    }

    func makeExecutor(in context: ReadContext, forCounting: Bool = false) throws -> Executor {
        let (plan, handle) = try makePlan(in: context, forCounting: forCounting)
        return Executor(plan: plan, handle: handle, txn: context.txn) { raw in
            try context.decode(T.self, from: raw, handle: handle) {
                CollectionHandle.describeID([], in: Array(raw), idPath: handle.info.idPath)
            }
        }
    }

    /// Runs the query and decodes its results.
    func run(in context: ReadContext) throws -> (results: [T], statistics: QueryStatistics) {
        try context.checkValid()
        let executor = try makeExecutor(in: context)
        // Only the documents returned are decoded; in the access order, as the scan finds them.
        var results: [T] = []
        try executor.forEachResult { id, raw in results.append(try executor.decodeReturned(T.self, raw, id: id, in: context)) }
        return (results, executor.statistics.value)
    }

    // MARK: Inside a transaction

    /// The results, decoded, in order.
    ///
    /// For example, inside `perform`: `let page = try Person.sortBy(\.name)[0..<20].results(in: ctx)`.
    public func results(in context: ReadContext) throws -> [T] { try run(in: context).results }

    /// The first result, or `nil`. `q.first` is `q[0..<1]`'s only result.
    public func first(in context: ReadContext) throws -> T? { try self[0..<1].results(in: context).first }

    /// The last result, or `nil`: the last of the slice when the query is sliced (`q[0..<5].last` is the fifth
    /// result of `q`), else the last of all, which for an unsorted query is the document with the greatest id.
    public func last(in context: ReadContext) throws -> T? {
        // Unsliced, reverse() flips the ordering; sliced, it reverses the slice: either way its first is our last.
        try reverse().first(in: context)
    }

    /// Any one result, or `nil`: the cheapest to find, whatever the ordering (within the slice, when sliced).
    public func any(in context: ReadContext) throws -> T? {
        // A slice is a slice of the ordered results: only without one may the order be dropped.
        guard window == nil else { return try first(in: context) }
        var q = self
        q.sortKeys = []
        return try q[0..<1].results(in: context).first
    }

    /// The number of results (within the slice, if sliced). Answered from index entries alone when the
    /// indexes answer the whole condition; no document is decoded unless a condition needs it.
    public func count(in context: ReadContext) throws -> Int {
        try context.checkValid()
        let counted = try makeExecutor(in: context, forCounting: true).count()
        return WindowStep.apply(window?.afterwards ?? [], toCount: counted)
    }

    /// The results one at a time, decoded as the loop reaches them: a query in index or id order streams from
    /// the index with O(1) memory; a sorted one keeps only the sort keys of its matches.
    ///
    /// For example:
    /// ```swift
    /// try await store.perform { ctx in
    ///     for person in try Person.include(#Predicate { $0.age >= 18 }).fetchedResults(in: ctx) { ... }
    /// }
    /// ```
    /// The sequence is valid inside the closure that received `context`. An error met while iterating ends the
    /// iteration, and is then in ``FetchedResults/error``.
    public func fetchedResults(in context: ReadContext) throws -> FetchedResults<T> {
        try context.checkValid()
        return try FetchedResults(query: self, context: context)
    }

    /// The first result, created by `create` and inserted when there is none, in one write transaction: concurrent
    /// callers, in this process or another, create exactly one document.
    ///
    /// For example:
    /// ```swift
    /// let jill = try await Person.include(#Predicate { $0.name == "Jill" }).findOrCreate(in: store) {
    ///     Person(id: UUID(), name: "Jill", age: 30, city: "Bergen", email: nil, tags: [])
    /// }
    /// ```
    public func findOrCreate(in context: WriteContext, _ create: () throws -> T) throws -> T {
        if let found = try first(in: context) { return found }
        let made = try create()
        try context.insert(made)
        return made
    }

    /// Deletes the results (within the slice, if sliced) and their index entries, in the transaction. Returns how
    /// many were deleted.
    @discardableResult
    public func delete(in context: WriteContext) throws -> Int {
        try context.checkWritable("delete documents from '\(try context.collection(of: T.self))'",
                                  collection: try context.collection(of: T.self))
        let executor = try makeExecutor(in: context)
        let ids = WindowStep.apply(executor.plan.afterwards, to: try executor.orderedIDs())
        var deleted = 0
        for id in ids where try executor.handle.delete(id: id, in: context.txn) { deleted += 1 }
        return deleted
    }

    /// How the query runs, then what running it took.
    public func explain(in context: ReadContext) throws -> QueryExplanation {
        try context.checkValid()
        let (plan, _) = try makePlan(in: context)
        let statistics = try run(in: context).statistics
        return QueryExplanation(plan: plan, statistics: statistics)
    }

    // MARK: On the store

    /// The results, decoded, in order. For example: `try await Person.sortBy(\.age)[0..<10].results(in: store)`.
    public func results(in store: DocStore) async throws -> [T] {
        try await store.read { try self.results(in: $0) }
    }

    /// The first result, or `nil`.
    public func first(in store: DocStore) async throws -> T? {
        try await store.read { try self.first(in: $0) }
    }

    /// The last result, or `nil` (of the slice, when sliced).
    public func last(in store: DocStore) async throws -> T? {
        try await store.read { try self.last(in: $0) }
    }

    /// Any one result, or `nil`.
    public func any(in store: DocStore) async throws -> T? {
        try await store.read { try self.any(in: $0) }
    }

    /// The number of results (within the slice, when sliced).
    public func count(in store: DocStore) async throws -> Int {
        try await store.read { try self.count(in: $0) }
    }

    /// The first result, or a new document made by `create` and inserted, atomically.
    public func findOrCreate(in store: DocStore, _ create: @escaping @Sendable () throws -> T) async throws -> T {
        try await store.perform { try self.findOrCreate(in: $0, create) }
    }

    /// Deletes the results and their index entries in one transaction; returns how many.
    @discardableResult
    public func delete(in store: DocStore) async throws -> Int {
        try await store.perform { try self.delete(in: $0) }
    }

    /// How the query runs, then what running it took. For example: `print(try await q.explain(in: store))`.
    public func explain(in store: DocStore) async throws -> QueryExplanation {
        try await store.read { try self.explain(in: $0) }
    }
}

extension DocStore {
    /// Runs `body` in a read transaction: it sees the last committed state and blocks no writer.
    ///
    /// For example:
    /// ```swift
    /// let (adults, total) = try await store.read { ctx in
    ///     (try Person.include(#Predicate { $0.age >= 18 }).count(in: ctx), try ctx.count(Person.self))
    /// }
    /// ```
    public func read<R: Sendable>(_ body: @Sendable (ReadContext) throws -> R) throws -> R {
        try withRead(body)
    }
}

extension Query {
    /// The primary keys of the results, in order, read from index entries alone where the indexes answer the
    /// whole filter: no document is read or decoded.
    ///
    /// For example, to count and then delete exactly what was counted: `let ids = try q.ids(in: ctx)`, then
    /// `try ctx.deleteDocuments(ids, from: "people")`.
    public func ids(in context: ReadContext) throws -> DocumentIDs {
        try context.checkValid()
        let executor = try makeExecutor(in: context)
        return DocumentIDs(keys: WindowStep.apply(executor.plan.afterwards, to: try executor.orderedIDs()))
    }

    /// Calls `body` with each result's stored bytes, in order, without decoding, until it returns `false`. The
    /// bytes are valid only during the call. Returns what the walk took.
    ///
    /// For example, the size of the results as stored:
    /// ```swift
    /// var bytes = 0
    /// try q.forEachEncoded(in: ctx) { bytes += $0.count; return true }
    /// ```
    @discardableResult
    public func forEachEncoded(in context: ReadContext, _ body: (UnsafeRawBufferPointer) throws -> Bool) throws
        -> QueryStatistics {
        try context.checkValid()
        let stream = try ResultStream(executor: try makeExecutor(in: context), context: context)
        defer { stream.close() }
        while let (_, raw) = try stream.next() {
            if try !body(raw) { break }
        }
        return stream.executor.statistics.value
    }
}
