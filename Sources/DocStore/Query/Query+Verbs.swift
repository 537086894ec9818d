import Foundation

// The verbs of a query, the same for typed and untyped ones: each in a transaction (synchronous, inside
// `store.read {}` or `store.write {}`) and on the store (asynchronous, in a transaction of its own).

extension Query {
    /// The plan of this query in a transaction, ready to run; `nil` when the collection does not exist (nothing
    /// matches). Reading never creates the collection nor builds an index.
    func executor(in context: ReadContext, counting: Bool = false, writing: Bool = false) throws -> Executor? {
        try context.checkValid()
        if let problem = selection.problem { throw problem }
        let open = writing ? kind.openForWriting : kind.openForReading
        guard let handle = try open(context.scope, collection) else { return nil }
        let plan = try Planner(statistics: CollectionHandle.Statistics(handle: handle, txn: context.txn))
            .plan(counting ? selection.forCounting : selection)
        return Executor(plan: plan, handle: handle, txn: context.txn, scan: context.scope.core.scan)
    }

    /// The plan of this query, as `explain` shows it: for a missing collection, one that reads nothing.
    func plan(in context: ReadContext, counting: Bool = false) throws -> Plan {
        if let executor = try executor(in: context, counting: counting) { return executor.plan }
        return Plan(counting ? selection.forCounting : selection, collection: collection, documentCount: 0,
                    nothing: .noCollection)
    }

    /// Runs the query: its results, what finding them took, and the plan it ran (`nil`: no collection).
    private func run(in context: ReadContext) throws
        -> (results: [Element], statistics: QueryStatistics, plan: Plan?) {
        guard let executor = try executor(in: context) else { return ([], QueryStatistics(), nil) }
        var results: [Element] = []
        // Only the documents returned are decoded, as the walk finds them.
        let walk = try Executor.Walk(executor, collectFirst: false, whole: true)
        while let result = try walk.next({ try executor.decodeReturned($1, id: $0, as: kind) }) { results.append(result) }
        return (results, executor.statistics.value, executor.plan)
    }

    /// The count of a counting executor's matches, after what was done to the slice.
    private func finalCount(_ counted: Int) -> Int {
        WindowStep.apply(selection.window?.afterwards ?? [], toCount: counted)
    }

    /// Every key converted to its id, in one concrete pass; `nil` as soon as one key does not hold its id exactly.
    static func exactIDs<T>(_ keys: [[UInt8]], _ convert: ([UInt8]) -> T?) -> [T]? {
        var ids: [T] = []
        ids.reserveCapacity(keys.count)
        for key in keys {
            guard let id = convert(key) else { return nil }
            ids.append(id)
        }
        return ids
    }

    /// The ids of the results, in order: given back by their primary keys where a key holds its value exactly
    /// (`allFromKeys` when every key does, else `fromKey`; a number only with `numbers`, as a key does not say
    /// whether it was an integer or a `Double`), and otherwise read from each document at the collection's id path
    /// (`decode`).
    func ids<ID>(in context: ReadContext, numbers: Bool, allFromKeys: ([[UInt8]]) -> [ID]?,
                 fromKey: (DocumentValue) -> ID?, _ decode: (BinaryReader, ValueRef) throws -> ID) throws -> [ID] {
        guard let executor = try executor(in: context) else { return [] }
        let keys = try executor.resultIDs()
        if let all = allFromKeys(keys) { return all }
        var ids: [ID] = []
        for key in keys {
            if let value = KeyEncoder.exactValue(ofKey: key, numbers: numbers), let id = fromKey(value) {
                ids.append(id)
                continue
            }
            guard let raw = try executor.fetch(id: key) else { continue }
            let reader = BinaryReader(raw)
            do {
                guard let ref = try reader.value(atPath: executor.handle.info.idPath, from: try reader.root()) else {
                    throw DocStoreError(.corruptDocument, "it has no id at '\(executor.handle.info.idPath)'")
                }
                ids.append(try decode(reader, ref))
            } catch {
                throw DecodingFailure.named(error, type: kind.typeName(), collection: collection) {
                    CollectionHandle.describeID(key, in: Array(raw), idPath: executor.handle.info.idPath)
                }
            }
        }
        return ids
    }

    // MARK: In a transaction

    /// The results, decoded, in order.
    ///
    /// For example, inside `write`: `let page = try Person.sortBy(\.name)[0..<20].results(in: ctx)`.
    public func results(in context: ReadContext) throws -> [Element] { try run(in: context).results }

    /// The first result, or `nil`. `q.first` is `q[0..<1]`'s only result.
    public func first(in context: ReadContext) throws -> Element? { try self[0..<1].results(in: context).first }

    /// The last result, or `nil`: the last of the slice when the query is sliced (`q[0..<5].last` is the fifth
    /// result of `q`), else the last of all, which for an unsorted query is the document with the greatest id.
    public func last(in context: ReadContext) throws -> Element? {
        // Unsliced, reverse() flips the ordering; sliced, it reverses the slice: either way its first is our last.
        try reverse().first(in: context)
    }

    /// Any one result, or `nil`: the cheapest to find, whatever the ordering (within the slice, when sliced).
    public func any(in context: ReadContext) throws -> Element? {
        // A slice is a slice of the ordered results: only without one may the order be dropped.
        guard selection.window == nil else { return try first(in: context) }
        var q = self
        q.selection.sort = []
        return try q[0..<1].results(in: context).first
    }

    /// The number of results (within the slice, if sliced). Answered from index entries alone when the
    /// indexes answer the whole condition; no document is decoded unless a condition needs it.
    public func count(in context: ReadContext) throws -> Int {
        guard let executor = try executor(in: context, counting: true) else { return 0 }
        return finalCount(try executor.count())
    }

    /// How the query runs, then what running it took (`.results` runs it as ``results(in:)`` does, `.count` as
    /// ``count(in:)``).
    ///
    /// For example: `print(try Person.include(#Predicate { $0.age >= 18 }).explain(in: ctx))`.
    public func explain(_ verb: QueryExplanation.Verb = .results, in context: ReadContext) throws -> QueryExplanation {
        guard verb == .count else {
            let ran = try run(in: context)
            return QueryExplanation(plan: try ran.plan ?? plan(in: context), statistics: ran.statistics)
        }
        guard let executor = try executor(in: context, counting: true) else {
            return QueryExplanation(plan: try plan(in: context, counting: true), statistics: QueryStatistics(),
                                    counting: true)
        }
        let counted = try executor.count()
        var statistics = executor.statistics.value
        statistics.returned = finalCount(counted)
        return QueryExplanation(plan: executor.plan, statistics: statistics, counting: true)
    }

    /// The results one at a time, decoded as the loop reaches them: a query in index or id order streams from the
    /// index with O(1) memory; a sorted one keeps only the sort keys of its matches.
    ///
    /// For example:
    /// ```swift
    /// try await store.read { ctx in
    ///     let adults = try Person.include(#Predicate { $0.age >= 18 }).cursor(in: ctx)
    ///     while let person = try adults.next() { print(person.name) }
    /// }
    /// ```
    /// The cursor is valid inside the closure that received `context`.
    public func cursor(in context: ReadContext) throws -> QueryCursor<Element> {
        try QueryCursor(executor: try executor(in: context), kind: kind, context: context)
    }

    /// Calls `body` with each result's stored bytes, undecoded, as `results(in:)` finds them, until it
    /// returns `false`: for measuring a query apart from decoding. The bytes are valid only during the call.
    @_spi(Benchmarks)
    public func forEachEncoded(in context: ReadContext, _ body: (UnsafeRawBufferPointer) throws -> Bool) throws {
        guard let executor = try executor(in: context) else { return }
        let walk = try Executor.Walk(executor, collectFirst: !context.txn.isReadOnly, whole: true)
        while let more = try walk.next({ try body($1) }), more {}
    }

    /// Deletes the results (within the slice, if sliced) and their index entries. Returns how many.
    @discardableResult
    public func delete(in context: WriteContext) throws -> Int {
        try context.checkWritable("delete documents from '\(collection)'", collection: collection)
        guard let executor = try executor(in: context, writing: true) else { return 0 }
        var deleted = 0
        for id in try executor.resultIDs() where try executor.handle.delete(id: id, in: context.txn) {
            deleted += 1
        }
        return deleted
    }

    /// The first result; or, when there is none, the element `create` makes, inserted (its collection created, and
    /// its id chosen when it is a document without one). Concurrent callers, in this process or another, create
    /// exactly one.
    ///
    /// For example:
    /// ```swift
    /// let jill = try await Person.include(#Predicate { $0.name == "Jill" }).findOrCreate(in: store) {
    ///     Person(id: UUID(), name: "Jill", age: 30, city: "Bergen", email: nil, tags: [])
    /// }
    /// ```
    public func findOrCreate(in context: WriteContext, _ create: () throws -> Element) throws -> Element {
        if let found = try first(in: context) { return found }
        return try kind.insert(context, try create(), collection)
    }

    // MARK: On the store

    /// The results, decoded, in order. For example: `try await Person.sortBy(\.age)[0..<10].results(in: store)`.
    public func results(in store: DocStore) async throws -> [Element] {
        try await store.read { try self.results(in: $0) }
    }

    /// The first result, or `nil`.
    public func first(in store: DocStore) async throws -> Element? {
        try await store.read { try self.first(in: $0) }
    }

    /// The last result, or `nil` (of the slice, when sliced).
    public func last(in store: DocStore) async throws -> Element? {
        try await store.read { try self.last(in: $0) }
    }

    /// Any one result, or `nil`.
    public func any(in store: DocStore) async throws -> Element? {
        try await store.read { try self.any(in: $0) }
    }

    /// The number of results (within the slice, when sliced).
    public func count(in store: DocStore) async throws -> Int {
        try await store.read { try self.count(in: $0) }
    }

    /// How the query runs, then what running it took. For example: `print(try await q.explain(in: store))`.
    public func explain(_ verb: QueryExplanation.Verb = .results, in store: DocStore) async throws -> QueryExplanation {
        try await store.read { try self.explain(verb, in: $0) }
    }

    /// Deletes the results and their index entries in one transaction; returns how many.
    @discardableResult
    public func delete(in store: DocStore) async throws -> Int {
        try await store.write { try self.delete(in: $0) }
    }

    /// The first result, or the element `create` makes, inserted, in one write transaction. A read looks first, so
    /// that finding costs no write; when it finds nothing, the write looks again before it inserts.
    public func findOrCreate(in store: DocStore, _ create: @escaping @Sendable () throws -> Element) async throws
        -> Element {
        if let found = try await first(in: store) { return found }
        return try await store.write { try self.findOrCreate(in: $0, create) }
    }
}

extension Query where Element: Document {
    /// The ids of the results, in order.
    ///
    /// For example: `let ids = try Person.include(#Predicate { $0.age < 18 }).ids(in: ctx)`.
    public func ids(in context: ReadContext) throws -> [Element.ID] {
        try ids(in: context, numbers: true, allFromKeys: Self.ids(fromKeys:), fromKey: Self.id(from:)) { reader, ref in
            try DocumentValueDecoder(reader: reader, ref: ref, parent: nil, key: nil).decodeValue(Element.ID.self)
        }
    }

    /// The ids the keys give back when every key holds its id exactly and the id type is a common one, converted
    /// with no cast per id (a generic conversion per id costs more than reading the key); `nil` otherwise.
    private static func ids(fromKeys keys: [[UInt8]]) -> [Element.ID]? {
        func all<T>(_ convert: ([UInt8]) -> T?) -> [Element.ID]? {
            // T is Element.ID, as checked below.
            exactIDs(keys, convert).map { unsafeBitCast($0, to: [Element.ID].self) }
        }
        func exact(_ key: [UInt8]) -> DocumentValue? { KeyEncoder.exactValue(ofKey: key, numbers: false) }
        switch Element.ID.self {
        case is Int.Type: return all { KeyEncoder.exactInteger(ofKey: $0).flatMap(Int.init(exactly:)) }
        case is Int64.Type: return all(KeyEncoder.exactInteger(ofKey:))
        case is UUID.Type: return all { if case .uuid(let u)? = exact($0) { u } else { nil } }
        case is String.Type: return all { if case .string(let s)? = exact($0) { s } else { nil } }
        default: return nil
        }
    }

    /// An id as the value its key gives back: the common id types directly, others through their `Decodable`.
    private static func id(from value: DocumentValue) -> Element.ID? {
        switch value {
        case .int(let i):
            if let id = i as? Element.ID { return id }
            if let id = Int(i) as? Element.ID { return id }
        case .uuid(let u): if let id = u as? Element.ID { return id }
        case .string(let s): if let id = s as? Element.ID { return id }
        case .date(let d): if let id = d as? Element.ID { return id }
        case .double(let d): if let id = d as? Element.ID { return id }
        default: break
        }
        return try? DocumentDecoder().decode(Element.ID.self, from: value.encoded())
    }

    /// The ids of the results, in order.
    public func ids(in store: DocStore) async throws -> [Element.ID] {
        try await store.read { try self.ids(in: $0) }
    }
}

extension Query where Element == DocumentValue {
    /// The ids of the results, in order: what a tool counts, confirms, and then deletes with
    /// ``WriteContext/delete(id:from:)``.
    public func ids(in context: ReadContext) throws -> [DocumentValue] {
        let exact = { (key: [UInt8]) in KeyEncoder.exactValue(ofKey: key, numbers: false) }
        return try ids(in: context, numbers: false, allFromKeys: { Self.exactIDs($0, exact) }, fromKey: { $0 }) { reader, ref in
            try DocumentValue(reader: reader, ref: ref)
        }
    }

    /// The ids of the results, in order.
    public func ids(in store: DocStore) async throws -> [DocumentValue] {
        try await store.read { try self.ids(in: $0) }
    }
}

/// A query's results decoded one at a time, as a loop asks for them, inside a transaction.
///
/// Made by ``Query/cursor(in:)``; valid inside the closure that received the context. An error (a document that
/// does not decode, a transaction that has ended) is thrown by the `next()` that meets it.
public final class QueryCursor<Element: Sendable> {
    private let context: ReadContext
    private let kind: ElementKind<Element>
    private let executor: Executor?
    private let walk: Executor.Walk?

    init(executor: Executor?, kind: ElementKind<Element>, context: ReadContext) throws {
        self.context = context
        self.kind = kind
        self.executor = executor
        // In a write transaction the loop may write: a document moved ahead of a live cursor would be met again
        // (saving each person one year older while walking by age would never end). There the matches are
        // collected first.
        walk = try executor.map { try Executor.Walk($0, collectFirst: !context.txn.isReadOnly) }
    }

    /// What the walk has taken so far.
    public var statistics: QueryStatistics { executor?.statistics.value ?? QueryStatistics() }

    /// The next result, or `nil` after the last.
    public func next() throws -> Element? {
        try context.checkValid()
        guard let executor, let walk else { return nil }
        return try walk.next { try executor.decodeReturned($1, id: $0, as: kind) }
    }
}
