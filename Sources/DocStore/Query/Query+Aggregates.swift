import Foundation

// Aggregates, distinct values and groups: the same verbs for typed and untyped queries, computed from the encoded
// documents (or from an index's keys) by ``Executor/aggregate(groupBy:_:ordered:dropNilGroup:)``.

/// What computing an aggregate found, and how.
struct AggregateRun: Sendable {
    var rows: [GroupRow]
    var access: AggregateAccess
    var plan: Plan
    var statistics: QueryStatistics
}

extension Query {
    /// Computes `aggregate` over the query's matches, grouped by `groupBy` (one group of all of them when empty).
    /// Over the whole query the order does not matter and is dropped; over a slice, the slice is taken first.
    func aggregateRun(groupBy: [FieldPath], _ aggregate: Aggregate, dropNilGroup: Bool = false,
                      in context: ReadContext) throws -> AggregateRun {
        let ordered = selection.window != nil
        var q = self
        if !ordered { q.selection = q.selection.forCounting }
        guard let executor = try q.executor(in: context) else {
            let rows = groupBy.isEmpty ? [try GroupRow.ofNothing(aggregate, collection: collection)] : []
            return AggregateRun(rows: rows, access: .matches(reading: []), plan: try q.plan(in: context),
                                statistics: QueryStatistics())
        }
        let (rows, access) = try executor.aggregate(groupBy: groupBy, aggregate, ordered: ordered, dropNilGroup: dropNilGroup)
        return AggregateRun(rows: rows, access: access, plan: executor.plan, statistics: executor.statistics.value)
    }

    /// One aggregate over every match.
    func aggregateValue(_ aggregate: Aggregate, in context: ReadContext) throws -> DocumentValue {
        try aggregateRun(groupBy: [], aggregate, in: context).rows.first?.result ?? .null
    }

    /// The aggregate of the query's matches (within the slice, when sliced): `.int` or `.double` for `sum`,
    /// `.double` or `.null` for `average`, the value or `.null` for `min` and `max`.
    ///
    /// For example: `try Query<DocumentValue>("people").aggregate(.sum("score"), in: ctx)`.
    public func aggregate(_ aggregate: Aggregate, in context: ReadContext) throws -> DocumentValue {
        try aggregateValue(aggregate, in: context)
    }

    /// The sum of a field's numbers over the matches; 0 when there are none. See ``Aggregate/sum(_:)``.
    public func sum(_ path: FieldPath, in context: ReadContext) throws -> DocumentValue {
        try aggregateValue(.sum(path), in: context)
    }

    /// The mean of a field's numbers over the matches, `nil` when there are none.
    public func average(_ path: FieldPath, in context: ReadContext) throws -> Double? {
        if case .double(let d) = try aggregateValue(.average(path), in: context) { return d }
        return nil
    }

    /// The least value of a field over the matches (`nil` values skipped), `nil` when there is none.
    public func min(_ path: FieldPath, in context: ReadContext) throws -> DocumentValue? {
        try aggregateValue(.min(path), in: context).nonNull
    }

    /// The greatest value of a field over the matches, `nil` when there is none.
    public func max(_ path: FieldPath, in context: ReadContext) throws -> DocumentValue? {
        try aggregateValue(.max(path), in: context).nonNull
    }

    /// The distinct values of a field over the matches, in key order (`nil` and missing values left out; values
    /// equal as keys, such as `3` and `3.0`, counted once).
    ///
    /// For example: `try Query<DocumentValue>("people").distinct("city", in: ctx)`.
    public func distinct(_ path: FieldPath, in context: ReadContext) throws -> [DocumentValue] {
        try aggregateRun(groupBy: [path], .count, dropNilGroup: true, in: context).rows.map { $0.values[0] }
    }

    /// The matches grouped by the values of some fields: each group's key holds the fields' values in order.
    ///
    /// For example: `try Query<DocumentValue>("people").groupBy("city", "active").count().results(in: ctx)`.
    public func groupBy(_ paths: FieldPath...) -> GroupedQuery<Element, [DocumentValue]> {
        groupBy(paths)
    }

    /// The matches grouped by the values of some fields.
    public func groupBy(_ paths: [FieldPath]) -> GroupedQuery<Element, [DocumentValue]> {
        GroupedQuery(query: self, paths: paths, key: { $0 })
    }

    // MARK: On the store

    /// An aggregate of the matches, in a read transaction of its own.
    public func aggregate(_ aggregate: Aggregate, in store: DocStore) async throws -> DocumentValue {
        try await store.read { try self.aggregate(aggregate, in: $0) }
    }

    /// The sum of a field's numbers over the matches.
    public func sum(_ path: FieldPath, in store: DocStore) async throws -> DocumentValue {
        try await store.read { try self.sum(path, in: $0) }
    }

    /// The mean of a field's numbers over the matches.
    public func average(_ path: FieldPath, in store: DocStore) async throws -> Double? {
        try await store.read { try self.average(path, in: $0) }
    }

    /// The least value of a field over the matches.
    public func min(_ path: FieldPath, in store: DocStore) async throws -> DocumentValue? {
        try await store.read { try self.min(path, in: $0) }
    }

    /// The greatest value of a field over the matches.
    public func max(_ path: FieldPath, in store: DocStore) async throws -> DocumentValue? {
        try await store.read { try self.max(path, in: $0) }
    }

    /// The distinct values of a field over the matches, in key order.
    public func distinct(_ path: FieldPath, in store: DocStore) async throws -> [DocumentValue] {
        try await store.read { try self.distinct(path, in: $0) }
    }
}

extension DocumentValue {
    /// The value, or `nil` for `.null`.
    var nonNull: DocumentValue? { self == .null ? nil : self }

    /// The value decoded as `T` (a number of another width, a date, an enum by its raw value, any `Decodable`):
    /// how an untyped answer (a group's key, a projected field, a document) is read as a Swift value.
    ///
    /// For example: `let origin = try group.key[0].decoded(as: Airport.self)`.
    public func decoded<T: Decodable>(as type: T.Type) throws -> T {
        if T.self == DocumentValue.self { return unsafeBitCast(self, to: T.self) }
        // The common scalars directly: a group's key or an aggregate per group is converted once per group.
        switch self {
        case .string(let s): if let v = s as? T { return v }
        case .int(let i):
            if let v = Int(exactly: i) as? T { return v }
            if let v = i as? T { return v }
            if let v = Double(exactly: i) as? T { return v }
        case .double(let d): if let v = d as? T { return v }
        case .bool(let b): if let v = b as? T { return v }
        case .date(let d): if let v = d as? T { return v }
        case .uuid(let u): if let v = u as? T { return v }
        default: break
        }
        return try DocumentDecoder().decode(T.self, from: encoded())
    }
}

// MARK: Typed

extension Query where Element: Document {
    /// The stored field a key path names, or an error saying it names none.
    func path(of keyPath: AnyKeyPath, for verb: String) throws -> FieldPath {
        guard let path = TypeRegistry.fieldPath(keyPath, of: Element.self) else {
            throw DocStoreError(.invalidSchema, "cannot \(verb) \(Element.self) by \(keyPath): it is not a stored field "
                + "(a computed property, or a value the key path computes)", collection: collection)
        }
        return path
    }

    /// The sum of a numeric field over the matches; 0 when there are none.
    ///
    /// For example: `let total = try Person.query().sum(\.score, in: ctx)`.
    public func sum<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                                 in context: ReadContext) throws -> V {
        try aggregateValue(.sum(path(of: keyPath, for: "sum")), in: context).decoded(as: V.self)
    }

    /// The sum of an optional numeric field over the matches (`nil` skipped); 0 when there are none.
    public func sum<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                                 in context: ReadContext) throws -> V {
        try aggregateValue(.sum(path(of: keyPath, for: "sum")), in: context).decoded(as: V.self)
    }

    /// The mean of a numeric field over the matches, `nil` when there are none.
    ///
    /// For example: `let mean = try Person.include(#Predicate { $0.city == "Oslo" }).average(\.age, in: ctx)`.
    public func average<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                                     in context: ReadContext) throws -> Double? {
        try average(path(of: keyPath, for: "average"), in: context)
    }

    /// The mean of an optional numeric field over the matches (`nil` skipped), `nil` when there are none.
    public func average<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                                     in context: ReadContext) throws -> Double? {
        try average(path(of: keyPath, for: "average"), in: context)
    }

    /// The least value of a field over the matches, `nil` when there are none.
    public func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                         in context: ReadContext) throws -> V? {
        try min(path(of: keyPath, for: "take the min of"), in: context)?.decoded(as: V.self)
    }

    /// The least non-`nil` value of an optional field over the matches.
    public func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                         in context: ReadContext) throws -> V? {
        try min(path(of: keyPath, for: "take the min of"), in: context)?.decoded(as: V.self)
    }

    /// The greatest value of a field over the matches, `nil` when there are none.
    ///
    /// For example: `let oldest = try Person.query().max(\.age, in: ctx)`.
    public func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                         in context: ReadContext) throws -> V? {
        try max(path(of: keyPath, for: "take the max of"), in: context)?.decoded(as: V.self)
    }

    /// The greatest non-`nil` value of an optional field over the matches.
    public func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                         in context: ReadContext) throws -> V? {
        try max(path(of: keyPath, for: "take the max of"), in: context)?.decoded(as: V.self)
    }

    /// The distinct values of a field over the matches, in key order.
    ///
    /// For example: `let cities = try Person.query().distinct(\.city, in: ctx)`.
    public func distinct<V: Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                  in context: ReadContext) throws -> [V] {
        try distinct(path(of: keyPath, for: "take the distinct values of"), in: context).map { try $0.decoded(as: V.self) }
    }

    /// The distinct non-`nil` values of an optional field over the matches, in key order.
    public func distinct<V: Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                  in context: ReadContext) throws -> [V] {
        try distinct(path(of: keyPath, for: "take the distinct values of"), in: context).map { try $0.decoded(as: V.self) }
    }

    /// The matches grouped by a field's value (`nil` is a group of its own, first).
    ///
    /// For example: `let perCity = try await Person.query().groupBy(\.city).count(in: store)`.
    public func groupBy<K: Decodable & Sendable>(_ keyPath: KeyPath<Element, K> & Sendable) -> GroupedQuery<Element, K> {
        let path = TypeRegistry.fieldPath(keyPath, of: Element.self)
        var query = self
        if path == nil && query.selection.problem == nil {
            query.selection.problem = DocStoreError(.invalidSchema, "cannot group \(Element.self) by \(keyPath): it is "
                + "not a stored field (a computed property, or a value the key path computes)", collection: collection)
        }
        return GroupedQuery(query: query, paths: path.map { [$0] } ?? [], key: { try $0[0].decoded(as: K.self) })
    }

    /// The matches grouped by the values of two fields, each group's key a pair (`nil` a group of its own, first).
    ///
    /// For example: `let perRoute = try await Flight.query().groupBy(\.origin, \.dest).count(in: store)`, whose
    /// groups' keys are `(origin, dest)`.
    public func groupBy<K1: Decodable & Sendable, K2: Decodable & Sendable>(
        _ first: KeyPath<Element, K1> & Sendable, _ second: KeyPath<Element, K2> & Sendable
    ) -> GroupedQuery<Element, (K1, K2)> {
        let paths = [first as AnyKeyPath, second as AnyKeyPath].map { TypeRegistry.fieldPath($0, of: Element.self) }
        var query = self
        if paths.contains(nil) && query.selection.problem == nil {
            let keyPath = paths[0] == nil ? "\(first)" : "\(second)"
            query.selection.problem = DocStoreError(.invalidSchema, "cannot group \(Element.self) by \(keyPath): it is "
                + "not a stored field (a computed property, or a value the key path computes)", collection: collection)
        }
        return GroupedQuery(query: query, paths: paths.compactMap { $0 },
                            key: { (try $0[0].decoded(as: K1.self), try $0[1].decoded(as: K2.self)) })
    }

    // MARK: On the store

    /// The sum of a numeric field over the matches, in a read transaction of its own.
    public func sum<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                                 in store: DocStore) async throws -> V {
        try await store.read { try self.sum(keyPath, in: $0) }
    }

    /// The sum of an optional numeric field over the matches.
    public func sum<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                                 in store: DocStore) async throws -> V {
        try await store.read { try self.sum(keyPath, in: $0) }
    }

    /// The mean of a numeric field over the matches.
    public func average<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                                     in store: DocStore) async throws -> Double? {
        try await store.read { try self.average(keyPath, in: $0) }
    }

    /// The mean of an optional numeric field over the matches.
    public func average<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                                     in store: DocStore) async throws -> Double? {
        try await store.read { try self.average(keyPath, in: $0) }
    }

    /// The least value of a field over the matches.
    public func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                         in store: DocStore) async throws -> V? {
        try await store.read { try self.min(keyPath, in: $0) }
    }

    /// The least non-`nil` value of an optional field over the matches.
    public func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                         in store: DocStore) async throws -> V? {
        try await store.read { try self.min(keyPath, in: $0) }
    }

    /// The greatest value of a field over the matches.
    public func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                         in store: DocStore) async throws -> V? {
        try await store.read { try self.max(keyPath, in: $0) }
    }

    /// The greatest non-`nil` value of an optional field over the matches.
    public func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                         in store: DocStore) async throws -> V? {
        try await store.read { try self.max(keyPath, in: $0) }
    }

    /// The distinct values of a field over the matches, in key order.
    public func distinct<V: Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                  in store: DocStore) async throws -> [V] {
        try await store.read { try self.distinct(keyPath, in: $0) }
    }

    /// The distinct non-`nil` values of an optional field over the matches, in key order.
    public func distinct<V: Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable,
                                                  in store: DocStore) async throws -> [V] {
        try await store.read { try self.distinct(keyPath, in: $0) }
    }
}

// MARK: Groups

/// One group: the value of the fields grouped by, and the group's aggregate.
public struct Group<Key: Sendable, Value: Sendable>: Sendable {
    public let key: Key
    public let value: Value

    public init(key: Key, value: Value) {
        self.key = key
        self.value = value
    }
}

extension Group: Equatable where Key: Equatable, Value: Equatable {}
extension Group: Hashable where Key: Hashable, Value: Hashable {}

/// What groups are ordered by: their key (the default, `nil` first) or their aggregate.
public enum GroupOrder: Sendable {
    case key, value
}

/// A query's matches grouped by the values of some fields, waiting for the aggregate to compute per group.
///
/// For example:
/// ```swift
/// let perCity = try await Person.query().groupBy(\.city).count(in: store)          // [Group(key: "Bergen", value: 120), ...]
/// let top10 = try await Person.query().groupBy(\.city).count().sortBy(.value, order: .reverse)[0..<10].results(in: store)
/// let ages = try await Person.query().groupBy(\.city).average(\.age, in: store)
/// ```
public struct GroupedQuery<Element: Sendable, Key: Sendable>: Sendable {
    let query: Query<Element>
    let paths: [FieldPath]
    let key: @Sendable ([DocumentValue]) throws -> Key

    /// Each group's `aggregate`, as a value (`.null` where there is none: an `average`, `min` or `max` of nothing).
    public func aggregate(_ aggregate: Aggregate) -> GroupQuery<Key, DocumentValue> {
        groups(aggregate) { $0 }
    }

    /// The number of documents in each group.
    public func count() -> GroupQuery<Key, Int> {
        groups(.count) { if case .int(let n) = $0 { Int(n) } else { 0 } }
    }

    /// The sum of a field's numbers in each group.
    public func sum(_ path: FieldPath) -> GroupQuery<Key, DocumentValue> { groups(.sum(path)) { $0 } }

    /// The mean of a field's numbers in each group, `nil` for a group without any.
    public func average(_ path: FieldPath) -> GroupQuery<Key, Double?> {
        groups(.average(path)) { if case .double(let d) = $0 { d } else { nil } }
    }

    /// The least value of a field in each group.
    public func min(_ path: FieldPath) -> GroupQuery<Key, DocumentValue?> { groups(.min(path)) { $0.nonNull } }

    /// The greatest value of a field in each group.
    public func max(_ path: FieldPath) -> GroupQuery<Key, DocumentValue?> { groups(.max(path)) { $0.nonNull } }

    func groups<Value>(_ aggregate: Aggregate, _ value: @escaping @Sendable (DocumentValue) throws -> Value)
        -> GroupQuery<Key, Value> {
        let (query, paths) = (query, paths)
        return GroupQuery(description: "\(query).groupBy(\(paths.map(\.description).joined(separator: ", "))).\(aggregate)",
                          run: { try query.aggregateRun(groupBy: paths, aggregate, in: $0) },
                          key: key, value: value)
    }

    /// The number of documents in each group, in a read transaction of its own.
    public func count(in store: DocStore) async throws -> [Group<Key, Int>] { try await count().results(in: store) }

    /// The number of documents in each group.
    public func count(in context: ReadContext) throws -> [Group<Key, Int>] { try count().results(in: context) }
}

extension GroupedQuery where Element: Document {
    /// The sum of a numeric field in each group.
    public func sum<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable) -> GroupQuery<Key, V> {
        typed(keyPath, verb: "sum", Aggregate.sum) { try $0.decoded(as: V.self) }
    }

    /// The sum of an optional numeric field in each group (`nil` skipped).
    public func sum<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable) -> GroupQuery<Key, V> {
        typed(keyPath, verb: "sum", Aggregate.sum) { try $0.decoded(as: V.self) }
    }

    /// The mean of a numeric field in each group, `nil` for a group without any.
    public func average<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable)
        -> GroupQuery<Key, Double?> {
        typed(keyPath, verb: "average", Aggregate.average) { if case .double(let d) = $0 { d } else { nil } }
    }

    /// The mean of an optional numeric field in each group.
    public func average<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable)
        -> GroupQuery<Key, Double?> {
        typed(keyPath, verb: "average", Aggregate.average) { if case .double(let d) = $0 { d } else { nil } }
    }

    /// The least value of a field in each group.
    public func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable) -> GroupQuery<Key, V?> {
        typed(keyPath, verb: "take the min of", Aggregate.min) { try $0.nonNull?.decoded(as: V.self) }
    }

    /// The least non-`nil` value of an optional field in each group.
    public func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable) -> GroupQuery<Key, V?> {
        typed(keyPath, verb: "take the min of", Aggregate.min) { try $0.nonNull?.decoded(as: V.self) }
    }

    /// The greatest value of a field in each group.
    public func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable) -> GroupQuery<Key, V?> {
        typed(keyPath, verb: "take the max of", Aggregate.max) { try $0.nonNull?.decoded(as: V.self) }
    }

    /// The greatest non-`nil` value of an optional field in each group.
    public func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable) -> GroupQuery<Key, V?> {
        typed(keyPath, verb: "take the max of", Aggregate.max) { try $0.nonNull?.decoded(as: V.self) }
    }

    private func typed<Value>(_ keyPath: AnyKeyPath, verb: String, _ make: (FieldPath) -> Aggregate,
                              _ value: @escaping @Sendable (DocumentValue) throws -> Value) -> GroupQuery<Key, Value> {
        do {
            return groups(make(try query.path(of: keyPath, for: verb)), value)
        } catch {
            return GroupQuery(description: "\(query)", run: { _ in throw error }, key: key, value: value)
        }
    }

    /// The sum of a numeric field in each group, in a read transaction of its own.
    public func sum<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                                 in store: DocStore) async throws -> [Group<Key, V>] {
        try await sum(keyPath).results(in: store)
    }

    /// The mean of a numeric field in each group, in a read transaction of its own.
    ///
    /// For example: `let ages = try await Person.query().groupBy(\.city).average(\.age, in: store)`.
    public func average<V: AdditiveArithmetic & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                                     in store: DocStore) async throws -> [Group<Key, Double?>] {
        try await average(keyPath).results(in: store)
    }

    /// The least value of a field in each group, in a read transaction of its own.
    public func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                         in store: DocStore) async throws -> [Group<Key, V?>] {
        try await min(keyPath).results(in: store)
    }

    /// The greatest value of a field in each group, in a read transaction of its own.
    public func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable,
                                                         in store: DocStore) async throws -> [Group<Key, V?>] {
        try await max(keyPath).results(in: store)
    }
}

/// Groups with their aggregates: ordered by key (`nil` first) unless sorted by value, sliceable, countable.
///
/// Made by a ``GroupedQuery``'s aggregate; runs nothing until asked.
public struct GroupQuery<Key: Sendable, Value: Sendable>: Sendable, CustomStringConvertible {
    let text: String
    let run: @Sendable (ReadContext) throws -> AggregateRun
    let key: @Sendable ([DocumentValue]) throws -> Key
    let value: @Sendable (DocumentValue) throws -> Value
    var order: (by: GroupOrder, descending: Bool) = (.key, false)
    var window: QueryWindow?

    init(description: String, run: @escaping @Sendable (ReadContext) throws -> AggregateRun,
         key: @escaping @Sendable ([DocumentValue]) throws -> Key, value: @escaping @Sendable (DocumentValue) throws -> Value) {
        text = description
        self.run = run
        self.key = key
        self.value = value
    }

    /// Orders the groups by their key or their aggregate (ties by key); the last `sortBy` decides.
    ///
    /// For example: `Person.query().groupBy(\.city).count().sortBy(.value, order: .reverse)[0..<10]`.
    public func sortBy(_ by: GroupOrder, order: SortOrder = .forward) -> GroupQuery {
        var q = self
        q.order = (by, order == .reverse)
        return q
    }

    /// The groups at positions `range`.
    public subscript(_ range: Range<Int>) -> GroupQuery {
        var q = self
        q.window = QueryWindow.slicing(q.window, range)
        return q
    }

    /// In the shell's words: `people.groupBy(city).count().sortBy(value, .reverse)[0..<10]`.
    public var description: String {
        var text = self.text
        if order.by == .value || order.descending {
            text += ".sortBy(\(order.by == .key ? "key" : "value")\(order.descending ? ", .reverse" : ""))"
        }
        if let window { text += "[\(window.range.lowerBound)..<\(window.range.upperBound)]" }
        return text
    }

    /// The groups' rows in this query's order and slice.
    private func ordered(_ rows: [GroupRow]) -> [GroupRow] {
        var rows = rows
        switch order.by {
        case .key: if order.descending { rows.reverse() }
        case .value:
            let keyed = rows.map { (KeyEncoder.key($0.result), $0) }
            rows = keyed.sorted { a, b in
                if a.0 != b.0 { return order.descending ? b.0.lexicographicallyPrecedes(a.0) : a.0.lexicographicallyPrecedes(b.0) }
                return a.1.key.lexicographicallyPrecedes(b.1.key)
            }.map(\.1)
        }
        guard let window else { return rows }
        let lower = Swift.min(window.range.lowerBound, rows.count)
        return Array(rows[lower..<Swift.min(window.range.upperBound, rows.count)])
    }

    /// The groups, in order.
    public func results(in context: ReadContext) throws -> [Group<Key, Value>] {
        try ordered(try run(context).rows).map { Group(key: try key($0.values), value: try value($0.result)) }
    }

    /// The first group, or `nil`.
    public func first(in context: ReadContext) throws -> Group<Key, Value>? { try self[0..<1].results(in: context).first }

    /// The number of groups (within the slice).
    public func count(in context: ReadContext) throws -> Int { ordered(try run(context).rows).count }

    /// How the groups are computed, then what computing them took.
    public func explain(in context: ReadContext) throws -> QueryExplanation {
        let ran = try run(context)
        var statistics = ran.statistics
        statistics.returned = ordered(ran.rows).count
        var keyIndex: IndexDefinition?
        if case .indexKeys(let index, _) = ran.access { keyIndex = index }
        return QueryExplanation(plan: ran.plan, statistics: statistics, aggregate: describe(ran.access), keysOf: keyIndex)
    }

    private func describe(_ access: AggregateAccess) -> String {
        switch access {
        case .indexKeys(let index, firstOnly: true):
            return "the first key of index \(index.name) in the walk's direction (nil skipped): one cursor step, "
                + "no document read unless the key does not give its value back"
        case .indexKeys(let index, firstOnly: false):
            return "from the keys of index \(index.name): each distinct key once, with its number of entries; "
                + "no document read unless a key does not give its value back"
        case .matches(let fields):
            return "over the matches, reading \(fields.isEmpty ? "no field" : fields.map(\.description).joined(separator: ", ")) "
                + "from each document's bytes; groups in a hash table, then in key order"
        }
    }

    /// The groups, in order, in a read transaction of its own.
    public func results(in store: DocStore) async throws -> [Group<Key, Value>] {
        try await store.read { try self.results(in: $0) }
    }

    /// The first group, or `nil`.
    public func first(in store: DocStore) async throws -> Group<Key, Value>? {
        try await store.read { try self.first(in: $0) }
    }

    /// The number of groups (within the slice).
    public func count(in store: DocStore) async throws -> Int {
        try await store.read { try self.count(in: $0) }
    }

    /// How the groups are computed, then what computing them took.
    public func explain(in store: DocStore) async throws -> QueryExplanation {
        try await store.read { try self.explain(in: $0) }
    }
}

extension Query {
    /// How an aggregate of the matches is computed, then what computing it took.
    ///
    /// For example: `print(try Person.query().explain(aggregate: .max("age"), in: ctx))`.
    public func explain(aggregate: Aggregate, in context: ReadContext) throws -> QueryExplanation {
        try GroupQuery(description: "\(self).\(aggregate)", run: { try self.aggregateRun(groupBy: [], aggregate, in: $0) },
                       key: { $0 }, value: { $0 }).explain(in: context)
    }

    /// How the distinct values of a field are found, then what finding them took.
    ///
    /// For example: `print(try Person.query().explain(distinct: "city", in: ctx))`.
    public func explain(distinct path: FieldPath, in context: ReadContext) throws -> QueryExplanation {
        try GroupQuery(description: "\(self).distinct(\(path))",
                       run: { try self.aggregateRun(groupBy: [path], .count, dropNilGroup: true, in: $0) },
                       key: { $0 }, value: { $0 }).explain(in: context)
    }

    /// How the distinct values of a field are found, then what finding them took.
    public func explain(distinct path: FieldPath, in store: DocStore) async throws -> QueryExplanation {
        try await store.read { try self.explain(distinct: path, in: $0) }
    }

    /// How an aggregate of the matches is computed, then what computing it took.
    public func explain(aggregate: Aggregate, in store: DocStore) async throws -> QueryExplanation {
        try await store.read { try self.explain(aggregate: aggregate, in: $0) }
    }
}
