import Foundation

// The verbs of a request, the same whatever it answers: each written once on a transaction's context (synchronous,
// inside `store.read {}` or `store.write {}`); its form on the store (asynchronous) runs it in a transaction of its
// own.

extension Query {
    /// The plan of this request in a transaction, ready to run; `nil` when the collection does not exist (nothing
    /// matches). Reading never creates the collection nor builds an index.
    /// The plan comes from the collection's ``PlanCache`` unless `fresh`: `explain` weighs every access anew, to
    /// show them all. `opened` is the collection when the caller opened it for reading already.
    func executor(in context: ReadContext, writing: Bool = false, fresh: Bool = false,
                  opened: CollectionHandle? = nil) throws -> Executor? {
        try context.checkValid()
        if let problem = selection.problem { throw problem }
        let open = writing ? kind.openForWriting : kind.openForReading
        guard let handle = try opened ?? open(context.scope, collection) else { return nil }
        let planner = Planner(statistics: CollectionHandle.Statistics(handle: handle, txn: context.txn))
        let plan = fresh ? SharedPlan(try planner.plan(selection, output: output))
                         : try planner.plan(selection, output: output, cache: handle.plans)
        return Executor(plan: plan, handle: handle, txn: context.txn, scan: context.scope.core.scan)
    }

    /// The plan of this request, as `explain` shows it: for a missing collection, one that reads nothing.
    func plan(in context: ReadContext) throws -> Plan {
        try executor(in: context, fresh: true)?.plan ?? .noCollection(selection, output: output, collection: collection)
    }

    /// Runs the request: its results, and the executor that ran it (`nil` for a missing collection), whose plan and
    /// statistics ``explain(in:)`` shows.
    private func run(in context: ReadContext, fresh: Bool = false, opened: CollectionHandle? = nil) throws
        -> (results: [Element], executor: Executor?) {
        let executor = try executor(in: context, fresh: fresh, opened: opened)
        if let executor, output == .documents {
            // Only the documents returned are decoded, as the walk finds them.
            return (try executor.documents(decoder(executor)), executor)
        }
        return (try computedRows(executor).map { try kind.row($0.values, $0.result) }, executor)
    }

    /// The stored documents made into elements, a failure naming the document.
    func decoder(_ executor: Executor) -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Element {
        { [kind, handle = executor.handle] id, raw in try kind.decode(raw, key: id, from: handle) }
    }

    /// What a request of fields or groups computes, before its rows are elements: each document's fields (as rows
    /// without values), or each group's values and aggregate; with no collection, the groups of nothing.
    func computedRows(_ executor: Executor?) throws -> [GroupRow] {
        guard let executor else {
            let plan = Plan.noCollection(selection, output: output, collection: collection)
            guard let grouping = plan.grouping, grouping.by.isEmpty else { return [] }
            return grouping.arranged([try GroupRow.ofNothing(grouping.aggregate, collection: collection)])
        }
        switch output {
        case .documents: return []
        case .fields(let paths): return try executor.project(paths).map { GroupRow(key: [], values: [], result: $0) }
        case .groups: return try executor.aggregate()
        }
    }

    /// The request of the number of matches (within the slice, when sliced).
    var counting: Query<Int> {
        grouped(by: [], .count) { _, value in if case .int(let n) = value { Int(n) } else { 0 } }
    }

    /// Throws unless the request is of documents: what `verb` changes.
    func requireDocuments(_ verb: String) throws {
        guard output == .documents else {
            throw DocStoreError(.invalidSchema, "cannot \(verb) \(self): a request of fields or groups changes no document",
                                collection: collection)
        }
    }

    // MARK: In a transaction

    /// The results, in order: documents, some fields of each, groups, or the one aggregate of every match.
    ///
    /// For example, inside `write`: `let page = try Person.sortBy(\.name)[0..<20].results(in: ctx)`.
    public func results(in context: ReadContext) throws -> [Element] {
        guard output == .documents else { return try run(in: context).results }
        try context.checkValid()
        if let problem = selection.problem { throw problem }
        guard let handle = try kind.openForReading(context.scope, collection) else { return try run(in: context).results }
        if let (key, index) = soleKey(handle, context.txn) {
            return try lookUp(key, through: index, in: context, handle).map { [$0] } ?? []
        }
        return try run(in: context, opened: handle).results
    }

    /// The one key a request reads, when it is a look-up by id alone (`include { $0.id == x }`) or by the value of
    /// a unique index of one field (`include { $0.email == x }`), whole or its first; with the unique index it is
    /// read through. `nil` for any other request.
    ///
    /// Such a request matches one document at most, and the planner would make the same look-up
    /// (``Planner/idLookUp(_:output:)``, or a point on the unique index with nothing left to check); making and
    /// running that plan cost a look-up most of its time. An engine with a round trip per call reads an index
    /// entry with its document in one walk, and is left to its plan.
    private func soleKey(_ handle: CollectionHandle, _ txn: any StorageTransaction) -> (key: [UInt8], index: KeySpace?)? {
        guard let (path, value) = selection.soleEquality else { return nil }
        if let window = selection.window,
           window.range.lowerBound != 0 || window.range.isEmpty || !window.afterwards.isEmpty { return nil }
        if path == handle.info.idPath { return (KeyEncoder.key(value), nil) }
        guard !txn.prefersBatches else { return nil }
        // (By position, as in extremeOfAll(_:in:opened:).)
        for i in handle.indexes.indices where handle.indexes[i].isUnique && handle.indexes[i].definition.fields.count == 1 {
            if handle.indexes[i].definition.fields[0] == path { return (KeyEncoder.key(value), handle.indexes[i].database) }
        }
        return nil
    }

    /// The document ``soleKey(_:_:)`` finds, or `nil`. An index entry whose document is missing is passed over, as
    /// a walk does (`verify()` reports it). (The result is returned as `Element?` alone: in a generic function that
    /// is not specialized, each type made of `Element`, such as `[Element]` or `Element??`, costs a look-up of its
    /// metadata.)
    private func lookUp(_ key: [UInt8], through index: KeySpace?, in context: ReadContext, _ handle: CollectionHandle)
        throws -> Element? {
        guard let index else {
            guard let raw = try context.txn.get(handle.documents, key) else { return nil }
            return try kind.decode(raw, key: key, from: handle)
        }
        guard let id = try context.txn.get(index, key), let raw = try context.txn.get(handle.documents, id) else { return nil }
        return try kind.decode(raw, key: id, from: handle)
    }

    /// The first result, or `nil`. `q.first` is `q[0..<1]`'s only result.
    public func first(in context: ReadContext) throws -> Element? {
        guard output == .documents else { return try self[0..<1].results(in: context).first }
        try context.checkValid()
        if let problem = selection.problem { throw problem }
        guard let handle = try kind.openForReading(context.scope, collection) else { return nil }
        // A look-up of one key is its own first: `q[0..<1]` looks up the same key (``soleKey(_:_:)``).
        if let (key, index) = soleKey(handle, context.txn) { return try lookUp(key, through: index, in: context, handle) }
        return try self[0..<1].run(in: context, opened: handle).results.first
    }

    /// The last result, or `nil`: the last of the slice when the query is sliced (`q[0..<5].last` is the fifth
    /// result of `q`), else the last of all, which for an unsorted query is the document with the greatest id.
    public func last(in context: ReadContext) throws -> Element? {
        // Unsliced, reverse() flips the ordering; sliced, it reverses the slice: either way its first is our last.
        try reverse().first(in: context)
    }

    /// Any one result, or `nil`: the cheapest to find, whatever the ordering (within the slice, when sliced).
    public func any(in context: ReadContext) throws -> Element? {
        // A slice is a slice of the ordered results: only without one may the order be dropped. Groups have no
        // cheaper one than the first.
        guard selection.window == nil, !output.isGroups else { return try first(in: context) }
        var q = self
        q.selection.sort = []
        return try q[0..<1].results(in: context).first
    }

    /// The number of results (within the slice, if sliced): of documents, answered from index entries alone when
    /// the indexes answer the whole condition, no document decoded unless a condition needs it; of groups, how
    /// many groups.
    public func count(in context: ReadContext) throws -> Int {
        if output.isGroups { return try computedRows(try executor(in: context)).count }
        // The counting plan, run by the executor's count alone: no row of a group to make and convert.
        let counting = self.counting
        guard let executor = try counting.executor(in: context) else { return 0 }
        guard case .counting(let afterwards)? = executor.plan.aggregateAccess else { return try counting.value(in: context) }
        return WindowStep.apply(afterwards, toCount: try executor.count())
    }

    /// The one result of a request that has one, such as an aggregate of every match (which has one even when
    /// nothing matches: a count or a sum of 0, an average, a `min` or a `max` of `nil`). A request without a result
    /// throws.
    ///
    /// For example: `let oldest = try Person.query().aggregate(.max(\.age)).value(in: ctx)`.
    public func value(in context: ReadContext) throws -> Element {
        // An aggregate of every match has its one row without a slice to take it: no second request to plan, and
        // no array of results.
        if case .groups(let grouping) = output, selection.window == nil {
            if grouping.by.isEmpty {
                var opened: CollectionHandle?
                if let value = try extremeOfAll(grouping, in: context, opened: &opened) { return try kind.row([], value) }
                if let row = try computedRows(try executor(in: context, opened: opened)).first {
                    return try kind.row(row.values, row.result)
                }
            } else if let value = try run(in: context).results.first {
                return value   // every group made, as `results` makes them
            }
        } else if let value = try first(in: context) {
            return value
        }
        throw DocStoreError(.invalidSchema, "\(self) has no result", collection: collection)
    }

    /// The `min` or `max` of a field over every document, read at one end of a regular index whose first field it
    /// is: what its plan reads (``Planner/aggregateAccess(_:plan:)``), without planning it and running an executor,
    /// which cost such a request most of its time. `nil` for any other request, and on an engine with a round trip
    /// per call, which is left to its plan.
    /// The collection, when this opened it, is left in `opened` for the plan.
    private func extremeOfAll(_ grouping: Grouping, in context: ReadContext,
                              opened: inout CollectionHandle?) throws -> DocumentValue? {
        let (path, greatest): (FieldPath, Bool)
        switch grouping.aggregate {
        case .min(let field): (path, greatest) = (field, false)
        case .max(let field): (path, greatest) = (field, true)
        default: return nil
        }
        guard selection.conditions.isEmpty, selection.sort.isEmpty, selection.problem == nil, grouping.window == nil,
              !context.txn.prefersBatches else { return nil }
        try context.checkValid()
        guard let handle = try kind.openForReading(context.scope, collection) else { return nil }
        opened = handle
        // The shortest such index, the first of equals, as the plan takes: fewer bytes per key. (By position: a
        // copy of each index, taken by a loop over them, retained and released its every part.)
        var found: Int?, fewest = Int.max
        for i in handle.indexes.indices where handle.indexes[i].definition.kind == .regular {
            let count = handle.indexes[i].definition.fields.count
            if count > 0, count < fewest, handle.indexes[i].definition.fields[0] == path { (found, fewest) = (i, count) }
        }
        guard let found else { return nil }
        let keys = IndexKeyValues(definition: handle.indexes[found].definition, handle: handle, txn: context.txn,
                                  decoded: grouping.valuesDecoded, statistics: nil)
        return try keys.extreme(of: path, greatest: greatest, in: handle.indexes[found].database)
    }

    /// How the request runs, then what running it took: it is run as ``results(in:)-(ReadContext)`` runs it (a count of every
    /// match, `aggregate(.count)`, as ``count(in:)-(ReadContext)`` counts).
    ///
    /// For example: `print(try Person.include(#Predicate { $0.age >= 18 }).explain(in: ctx))`.
    public func explain(in context: ReadContext) throws -> QueryExplanation {
        let (results, executor) = try run(in: context, fresh: true)
        if let executor { return QueryExplanation(plan: executor.plan, statistics: executor.statistics.value) }
        let plan = Plan.noCollection(selection, output: output, collection: collection)
        var statistics = QueryStatistics()
        if let grouping = plan.grouping, !grouping.isCount { statistics.returned = results.count }
        return QueryExplanation(plan: plan, statistics: statistics)
    }

    /// The results one at a time, decoded as the loop reaches them: a query of documents in index or id order
    /// streams from the index with O(1) memory; a sorted one keeps only the sort keys of its matches.
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
        let executor = try executor(in: context)
        guard let executor, output == .documents else {
            var results = try computedRows(executor).map { try kind.row($0.values, $0.result) }.makeIterator()
            return QueryCursor(context: context, executor: executor) { results.next() }
        }
        // In a write transaction the loop may write: a document moved ahead of a live cursor would be met again
        // (saving each person one year older while walking by age would never end). There the matches are
        // collected first.
        return QueryCursor(context: context, executor: executor,
                           next: try executor.cursor(collectFirst: !context.txn.isReadOnly, decoder(executor)))
    }

    /// Calls `body` with each result's stored bytes, undecoded, as `results(in:)` finds them, until it
    /// returns `false`: for measuring a query apart from decoding. The bytes are valid only during the call. It
    /// reads ahead as `results(in:)` does, for a caller that takes every result.
    @_spi(Benchmarks)
    public func forEachEncoded(in context: ReadContext, _ body: (UnsafeRawBufferPointer) throws -> Bool) throws {
        try documents.executor(in: context)?.walk(collectFirst: !context.txn.isReadOnly) { try body($1) }
    }

    /// Deletes the documents (within the slice, if sliced) and their index entries. Returns how many.
    @discardableResult
    public func delete(in context: WriteContext) throws -> Int {
        try context.checkWritable("delete documents from '\(collection)'", collection: collection)
        try requireDocuments("delete")
        guard let executor = try executor(in: context, writing: true) else { return 0 }
        var deleted = 0
        let ids = try executor.resultIDs()
        guard context.txn.prefersBatches else {
            for i in 0..<ids.count where try executor.handle.delete(id: ids[i], in: context.txn) { deleted += 1 }
            return deleted
        }
        // On an engine with round trips, what 512 deletes read is asked for at once.
        for start in stride(from: 0, to: ids.count, by: 512) {
            let batch = ids.arrays(start..<min(ids.count, start + 512))
            try executor.handle.readAhead(deleting: batch, in: context.txn)
            for id in batch where try executor.handle.delete(id: id, in: context.txn) { deleted += 1 }
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
        try requireDocuments("findOrCreate")
        if let found = try first(in: context) { return found }
        guard let insert = kind.insert else {
            throw DocStoreError(.invalidSchema, "cannot insert a \(kind.typeName())", collection: collection)
        }
        return try insert(context, try create(), collection)
    }
}

extension Output {
    /// Whether the request answers groups (or an aggregate of every match).
    var isGroups: Bool { if case .groups = self { true } else { false } }
}

// MARK: Ids

extension Query {
    /// Every key converted to its id, in one concrete pass; `nil` as soon as one key does not hold its id exactly.
    @inline(__always)
    static func exactIDs<T>(_ keys: IDList, _ convert: (UnsafeRawBufferPointer) -> T?) -> [T]? {
        var ids: [T] = []
        ids.reserveCapacity(keys.count)
        var exact = true
        keys.forEach { key in
            guard let id = convert(key) else { exact = false; return false }
            ids.append(id)
            return true
        }
        return exact ? ids : nil
    }

    /// The ids of the documents, in order: given back by their primary keys where a key holds its value exactly
    /// (`allFromKeys` when every key does, else `fromKey`; a number only with `numbers`, as a key does not say
    /// whether it was an integer or a `Double`), and otherwise read from each document at the collection's id path
    /// (`decode`).
    func ids<ID>(in context: ReadContext, numbers: Bool, allFromKeys: (IDList) -> [ID]?,
                 fromKey: (DocumentValue) -> ID?, _ decode: (BinaryReader, ValueRef) throws -> ID) throws -> [ID] {
        guard let executor = try documents.executor(in: context) else { return [] }
        let keys = try executor.resultIDs()
        if let all = allFromKeys(keys) { return all }
        var ids: [ID] = []
        for i in 0..<keys.count {
            let key = keys[i]
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
}

extension Query where Element: Document {
    /// The ids of the documents, in order.
    ///
    /// For example: `let ids = try Person.include(#Predicate { $0.age < 18 }).ids(in: ctx)`.
    public func ids(in context: ReadContext) throws -> [Element.ID] {
        try ids(in: context, numbers: true, allFromKeys: Self.ids(fromKeys:), fromKey: Self.id(from:)) { reader, ref in
            try DocumentValueDecoder(reader: reader, ref: ref, parent: nil, key: nil).decodeValue(Element.ID.self)
        }
    }

    /// The ids the keys give back when every key holds its id exactly and the id type is a common one, converted
    /// with no cast per id (a generic conversion per id costs more than reading the key); `nil` otherwise.
    private static func ids(fromKeys keys: IDList) -> [Element.ID]? {
        @inline(__always)
        func all<T>(_ convert: (UnsafeRawBufferPointer) -> T?) -> [Element.ID]? {
            // T is Element.ID, as checked below.
            exactIDs(keys, convert).map { unsafeBitCast($0, to: [Element.ID].self) }
        }
        func exact(_ key: UnsafeRawBufferPointer) -> DocumentValue? { KeyEncoder.exactValue(ofKey: key, numbers: false) }
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

}

extension Query where Element == DocumentValue {
    /// The ids of the documents, in order: what a tool counts, confirms, and then deletes with
    /// ``WriteContext/delete(_:id:)-(String,_)``.
    public func ids(in context: ReadContext) throws -> [DocumentValue] {
        let exact = { (key: UnsafeRawBufferPointer) in KeyEncoder.exactValue(ofKey: key, numbers: false) }
        return try ids(in: context, numbers: false, allFromKeys: { Self.exactIDs($0, exact) }, fromKey: { $0 }) { reader, ref in
            try DocumentValue(reader: reader, ref: ref)
        }
    }

}

/// A request's results decoded one at a time, as a loop asks for them, inside a transaction.
///
/// Made by ``Query/cursor(in:)``; valid inside the closure that received the context. An error (a document that
/// does not decode, a transaction that has ended) is thrown by the `next()` that meets it.
public final class QueryCursor<Element: Sendable> {
    private let context: ReadContext
    private let executor: Executor?
    private let nextResult: () throws -> Element?

    init(context: ReadContext, executor: Executor?, next: @escaping () throws -> Element?) {
        self.context = context
        self.executor = executor
        nextResult = next
    }

    /// What the walk has taken so far.
    public var statistics: QueryStatistics { executor?.statistics.value ?? QueryStatistics() }

    /// The next result, or `nil` after the last.
    public func next() throws -> Element? {
        try context.checkValid()
        return try nextResult()
    }
}
