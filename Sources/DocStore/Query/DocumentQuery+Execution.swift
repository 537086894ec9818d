import Foundation

extension DocumentQuery {
    /// Plans the query; `nil` when the collection does not exist (no document matches).
    func makeExecutor(in context: ReadContext, forCounting: Bool = false) throws -> Executor? {
        try context.checkValid()
        guard let handle = try context.scope.handle(named: collection) else { return nil }
        let plan = try Planner(handle: handle, txn: context.txn).plan(
            filter: filter.condition,
            sort: forCounting ? [] : sortFields.map { SortSpec(path: $0.path, descending: $0.order == .reverse) },
            idDescending: forCounting ? false : idDescending,
            offset: window?.range.lowerBound ?? 0, limit: window?.range.count,
            afterwards: forCounting ? [] : window?.afterwards ?? [])
        // A filter has no opaque part: nothing asks for the document decoded into a type.
        return Executor(plan: plan, handle: handle, txn: context.txn) { raw in try DocumentValue(encoded: Array(raw)) }
    }

    /// The primary keys of the results, in order (within the slice and its reversals).
    private func orderedIDs(_ executor: Executor) throws -> [[UInt8]] {
        WindowStep.apply(executor.plan.afterwards, to: try executor.orderedIDs())
    }

    // MARK: Reading

    /// The results in order, and what finding them took (for a tool's timer).
    ///
    /// For example: `let (people, stats) = try DocumentQuery("people")[0..<10].execute(in: ctx)`.
    public func execute(in context: ReadContext) throws -> (documents: [DocumentValue], statistics: QueryStatistics) {
        guard let executor = try makeExecutor(in: context) else { return ([], QueryStatistics()) }
        var documents: [DocumentValue] = []
        try executor.forEachResult { id, raw in documents.append(try executor.decodeReturnedValue(raw, id: id)) }
        return (documents, executor.statistics.value)
    }

    /// The results, in order.
    public func results(in context: ReadContext) throws -> [DocumentValue] { try execute(in: context).documents }

    /// The first result, or `nil`.
    public func first(in context: ReadContext) throws -> DocumentValue? { try self[0..<1].results(in: context).first }

    /// The last result, or `nil` (of the slice, when sliced): `q.reverse().first`.
    public func last(in context: ReadContext) throws -> DocumentValue? { try reverse().first(in: context) }

    /// Any one result, or `nil`: the cheapest to find (within the slice, when sliced).
    public func any(in context: ReadContext) throws -> DocumentValue? {
        guard window == nil else { return try first(in: context) }
        var q = self
        q.sortFields = []
        return try q[0..<1].results(in: context).first
    }

    /// The number of results (within the slice, when sliced), from index entries alone where they answer the filter.
    public func count(in context: ReadContext) throws -> Int { try countWithStatistics(in: context).count }

    /// The count and what finding it took.
    public func countWithStatistics(in context: ReadContext) throws -> (count: Int, statistics: QueryStatistics) {
        guard let executor = try makeExecutor(in: context, forCounting: true) else { return (0, QueryStatistics()) }
        let n = WindowStep.apply(window?.afterwards ?? [], toCount: try executor.count())
        return (n, executor.statistics.value)
    }

    /// The primary keys of the results, in order: what ``WriteContext/deleteDocuments(_:from:)`` takes.
    public func ids(in context: ReadContext) throws -> DocumentIDs {
        guard let executor = try makeExecutor(in: context) else { return DocumentIDs(keys: []) }
        return DocumentIDs(keys: try orderedIDs(executor))
    }

    /// Calls `body` with each result in order, decoded as the walk reaches it, until it returns `false`: a query in
    /// index or id order streams with O(1) memory, a sorted one keeps only its matches' sort keys.
    ///
    /// For example, an export:
    /// ```swift
    /// try await store.read { ctx in
    ///     try DocumentQuery("people").forEach(in: ctx) { print($0.json()); return true }
    /// }
    /// ```
    /// - Returns: what the walk took.
    @discardableResult
    public func forEach(in context: ReadContext, _ body: (DocumentValue) throws -> Bool) throws -> QueryStatistics {
        guard let executor = try makeExecutor(in: context) else { return QueryStatistics() }
        let stream = try ResultStream(executor: executor, context: context)
        defer { stream.close() }
        while let (id, raw) = try stream.next() {
            try context.checkValid()
            let value = try id.withUnsafeBytes { try executor.decodeReturnedValue(raw, id: $0) }
            if try !body(value) { break }
        }
        return executor.statistics.value
    }

    /// How the query runs, then what running it took.
    public func explain(in context: ReadContext) throws -> QueryExplanation? {
        guard let executor = try makeExecutor(in: context) else { return nil }
        let statistics = try execute(in: context).statistics
        return QueryExplanation(plan: executor.plan, statistics: statistics)
    }

    // MARK: Writing

    /// Deletes the results (within the slice, when sliced) and their index entries. Returns how many.
    @discardableResult
    public func delete(in context: WriteContext) throws -> Int {
        try context.deleteDocuments(try ids(in: context), from: collection)
    }

    /// The first result; or, when there is none, `document` inserted (the collection is created if missing).
    /// Returns the document and whether it was created.
    ///
    /// For example:
    /// ```swift
    /// let (jill, created) = try await store.perform { ctx in
    ///     try DocumentQuery("people").include(.compare("name", .equal, .string("Jill")))
    ///         .findOrCreate(in: ctx, .object([("id", .string("jill")), ("name", .string("Jill"))]))
    /// }
    /// ```
    public func findOrCreate(in context: WriteContext, _ document: DocumentValue) throws
        -> (document: DocumentValue, created: Bool) {
        if let found = try first(in: context) { return (found, false) }
        return (try context.insertAndFetch(document, into: collection), true)
    }
}

extension WriteContext {
    /// Deletes the documents whose primary keys are `ids` (those still there) and their index entries. Returns how
    /// many were deleted.
    @discardableResult
    public func deleteDocuments(_ ids: DocumentIDs, from collection: String) throws -> Int {
        try checkWritable("delete documents from '\(collection)'", collection: collection)
        guard let handle = try scope.handle(named: collection) else { return 0 }
        var deleted = 0
        for key in ids.keys where try handle.delete(id: key, in: txn) { deleted += 1 }
        return deleted
    }
}
