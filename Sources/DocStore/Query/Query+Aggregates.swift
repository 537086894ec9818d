import Foundation

// What a request answers besides its documents: some fields of each, an aggregate of every match, distinct values,
// groups. Each is a request of its own (a `Query` whose elements are the rows), read by the common verbs, and planned
// and computed from the encoded documents or from an index's keys.

extension Query {
    /// The request with only the fields at `paths` of each result: each read from the stored bytes where it lies,
    /// the rest of the document never decoded. Missing fields are left out; a dotted path keeps its nesting
    /// (`address.city` gives `{"address": {"city": ...}}`).
    ///
    /// For example: `Query<DocumentValue>("people").include(filter).select("name", "address.city")`.
    public func select(_ paths: FieldPath...) -> Query<DocumentValue> { select(paths) }

    /// The request with only the fields at `paths` of each result.
    public func select(_ paths: [FieldPath]) -> Query<DocumentValue> {
        documents.answering(.fields(paths), as: kind.opening(as: .documentValue))
    }

    /// Orders groups by their key or their aggregate (ties by key); the last `sortBy` decides.
    ///
    /// For example: `Person.query().groupBy(\.city).sortBy(.value, order: .reverse)[0..<10]`.
    public func sortBy<Key, Value>(_ by: GroupOrder, order: SortOrder = .forward) -> Query where Element == Group<Key, Value> {
        withGroups { $0.order = by; $0.descending = order == .reverse; $0.tiesDescending = false } ?? self
    }

    /// This request's matches in groups by `paths`, each with `aggregate`, its rows made by `row`.
    func grouped<T>(by paths: [FieldPath], _ aggregate: Aggregate, dropsNil: Bool = false, decoded: Bool = false,
                    _ row: @escaping @Sendable ([DocumentValue], DocumentValue) throws -> T) -> Query<T> {
        // (`answering` replaces the output whole: no copy of the request of documents between.)
        answering(.groups(Grouping(by: paths, aggregate: aggregate, dropsNil: dropsNil, valuesDecoded: decoded)),
                  as: kind.opening(rows: row))
    }
}

extension Query where Element == DocumentValue {
    /// The request of `aggregate` over the matches (within the slice, when sliced): `.int` for `count`, `.int` or
    /// `.double` for `sum`, `.double` or `.null` for `average`, the value or `.null` for `min` and `max`.
    ///
    /// For example: `try Query<DocumentValue>("people").aggregate(.sum("score")).value(in: ctx)`.
    public func aggregate(_ aggregate: Aggregate) -> Query<DocumentValue> { grouped(by: [], aggregate) { $1 } }

    /// The request of the distinct values of a field over the matches, in key order (`nil` and missing values left
    /// out; values equal as keys, such as `3` and `3.0`, counted once).
    ///
    /// For example: `try Query<DocumentValue>("people").distinct("city").results(in: ctx)`.
    public func distinct(_ path: FieldPath) -> Query<DocumentValue> {
        grouped(by: [path], .count, dropsNil: true) { values, _ in values[0] }
    }

    /// The matches grouped by the values of some fields, with the number of documents in each: each group's key
    /// holds the fields' values in order.
    ///
    /// For example: `try Query<DocumentValue>("people").groupBy("city", "active").results(in: ctx)`.
    public func groupBy(_ paths: FieldPath...) -> Query<Group<[DocumentValue], Int>> {
        grouped(by: paths, .count) { values, count in Group(key: values, value: try count.decoded(as: Int.self)) }
    }

    /// The matches grouped by the values of some fields, with `aggregate` of each group (`.null` where there is
    /// none: an `average`, `min` or `max` of nothing).
    ///
    /// For example: `Query<DocumentValue>("people").groupBy(["city"], .average("age"))`.
    public func groupBy(_ paths: [FieldPath], _ aggregate: Aggregate) -> Query<Group<[DocumentValue], DocumentValue>> {
        grouped(by: paths, aggregate) { Group(key: $0, value: $1) }
    }
}

extension Query where Element: Document {
    /// The stored field a key path names, or `nil` and the request's problem saying it names none.
    func path(of keyPath: AnyKeyPath, for verb: String, problem: inout DocStoreError?) -> FieldPath? {
        if let path = TypeRegistry.fieldPath(keyPath, of: Element.self) { return path }
        if problem == nil { problem = Aggregation<Element, Int>.notStored(keyPath, verb) }
        return nil
    }

    /// The request with only the fields the key paths name, as ``DocumentValue`` objects; decode them as a smaller
    /// type with `decoded(as:)`.
    ///
    /// For example: `Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age)`.
    public func select(_ keyPaths: PartialKeyPath<Element>...) -> Query<DocumentValue> {
        var query = self
        let paths = keyPaths.compactMap { query.path(of: $0, for: "select", problem: &query.selection.problem) }
        return query.select(paths)
    }

    /// The request of an aggregate over the matches (within the slice, when sliced), read with ``value(in:)-(ReadContext)``.
    ///
    /// For example: `let total = try Person.query().aggregate(.sum(\.score)).value(in: ctx)`.
    public func aggregate<Value>(_ aggregation: Aggregation<Element, Value>) -> Query<Value> {
        let value = aggregation.value
        var query = grouped(by: [], aggregation.aggregate, decoded: true) { _, result in try value(result) }
        if let problem = aggregation.problem, query.selection.problem == nil { query.selection.problem = problem }
        return query
    }

    /// The request of the distinct values of a field over the matches, in key order.
    ///
    /// For example: `let cities = try Person.query().distinct(\.city).results(in: ctx)`.
    public func distinct<V: Decodable & Sendable>(_ keyPath: KeyPath<Element, V> & Sendable) -> Query<V> {
        distinct(keyPath as AnyKeyPath, V.self)
    }

    /// The request of the distinct non-`nil` values of an optional field over the matches, in key order.
    public func distinct<V: Decodable & Sendable>(_ keyPath: KeyPath<Element, V?> & Sendable) -> Query<V> {
        distinct(keyPath as AnyKeyPath, V.self)
    }

    private func distinct<V: Decodable & Sendable>(_ keyPath: AnyKeyPath, _ type: V.Type) -> Query<V> {
        var query = self
        let path = query.path(of: keyPath, for: "take the distinct values of", problem: &query.selection.problem)
        return query.grouped(by: path.map { [$0] } ?? [], .count, dropsNil: true, decoded: true) { values, _ in
            try values[0].decoded(as: V.self)
        }
    }

    /// The matches grouped by a field's value (`nil` is a group of its own, first), with the number of documents in
    /// each.
    ///
    /// For example: `let perCity = try await Person.query().groupBy(\.city).results(in: store)`.
    public func groupBy<K: Decodable & Sendable>(_ keyPath: KeyPath<Element, K> & Sendable) -> Query<Group<K, Int>> {
        groupBy(keyPath, .count)
    }

    /// The matches grouped by a field's value, with an aggregate of each group.
    ///
    /// For example: `let ages = try await Person.query().groupBy(\.city, .average(\.age)).results(in: store)`.
    public func groupBy<K: Decodable & Sendable, Value>(_ keyPath: KeyPath<Element, K> & Sendable,
                                                        _ aggregation: Aggregation<Element, Value>) -> Query<Group<K, Value>> {
        groups(by: [keyPath], aggregation) { values, value in Group(key: try values[0].decoded(as: K.self), value: value) }
    }

    /// The matches grouped by the values of two fields, each group's key a pair (`nil` a group of its own, first),
    /// with the number of documents in each.
    ///
    /// For example: `let perRoute = try await Flight.query().groupBy(\.origin, \.dest).results(in: store)`, whose
    /// groups' keys are `(origin, dest)`.
    public func groupBy<K1: Decodable & Sendable, K2: Decodable & Sendable>(
        _ first: KeyPath<Element, K1> & Sendable, _ second: KeyPath<Element, K2> & Sendable
    ) -> Query<Group<(K1, K2), Int>> {
        groupBy(first, second, .count)
    }

    /// The matches grouped by the values of two fields, with an aggregate of each group.
    public func groupBy<K1: Decodable & Sendable, K2: Decodable & Sendable, Value>(
        _ first: KeyPath<Element, K1> & Sendable, _ second: KeyPath<Element, K2> & Sendable,
        _ aggregation: Aggregation<Element, Value>
    ) -> Query<Group<(K1, K2), Value>> {
        groups(by: [first, second], aggregation) { values, value in
            Group(key: (try values[0].decoded(as: K1.self), try values[1].decoded(as: K2.self)), value: value)
        }
    }

    /// The groups by the fields `keyPaths` name, with `aggregation` of each, made into rows by `row`.
    private func groups<Value, T>(by keyPaths: [AnyKeyPath], _ aggregation: Aggregation<Element, Value>,
                                  _ row: @escaping @Sendable ([DocumentValue], Value) throws -> T) -> Query<T> {
        var query = self
        let paths = keyPaths.compactMap { query.path(of: $0, for: "group", problem: &query.selection.problem) }
        if query.selection.problem == nil { query.selection.problem = aggregation.problem }
        let value = aggregation.value
        return query.grouped(by: paths, aggregation.aggregate, decoded: true) { values, result in
            try row(values, try value(result))
        }
    }
}

extension Aggregation where Value == Int {
    /// The number of documents.
    public static var count: Aggregation { .init(count: { try $0.decoded(as: Int.self) }) }
}

// MARK: Groups

/// One group: the value of the fields grouped by, and the group's aggregate.
public struct Group<Key: Sendable, Value: Sendable>: Sendable {
    /// The value of the field grouped by (a tuple of them for two fields, an array for fields by path).
    public let key: Key
    /// The group's aggregate.
    public let value: Value

    /// A group with its key and aggregate.
    public init(key: Key, value: Value) {
        self.key = key
        self.value = value
    }
}

extension Group: Equatable where Key: Equatable, Value: Equatable {}
extension Group: Hashable where Key: Hashable, Value: Hashable {}

/// An aggregate of a field of a ``Document`` type, typed: what `aggregate(_:)`
/// computes over every match and `groupBy(_:_:)` over each group, as a `Value`.
///
/// For example: `Person.query().aggregate(.average(\.age))` is a `Query<Double?>`, and
/// `Person.query().groupBy(\.city, .max(\.age))` a `Query<Group<String, Int?>>`.
public struct Aggregation<Root: Document, Value: Sendable>: Sendable {
    let aggregate: Aggregate
    /// Why it cannot be computed (a key path that names no stored field), thrown when it is run.
    let problem: DocStoreError?
    let value: @Sendable (DocumentValue) throws -> Value

    private init(_ keyPath: AnyKeyPath, _ verb: String, _ make: (FieldPath) -> Aggregate,
                 _ value: @escaping @Sendable (DocumentValue) throws -> Value) {
        let path = TypeRegistry.fieldPath(keyPath, of: Root.self)
        aggregate = make(path ?? "")
        problem = path == nil ? Self.notStored(keyPath, verb) : nil
        self.value = value
    }

    fileprivate init(count: @escaping @Sendable (DocumentValue) throws -> Value) {
        aggregate = .count
        problem = nil
        value = count
    }

    static func notStored(_ keyPath: AnyKeyPath, _ verb: String) -> DocStoreError {
        DocStoreError(.invalidSchema, "cannot \(verb) \(Root.self) by \(keyPath): it is not a stored field (a computed "
            + "property, or a value the key path computes)", collection: Query<Root>.collection)
    }

    /// The sum of a numeric field; 0 over nothing. See ``Aggregate/sum(_:)``.
    public static func sum(_ keyPath: KeyPath<Root, Value> & Sendable) -> Aggregation
        where Value: AdditiveArithmetic & Decodable {
        .init(keyPath, "sum", Aggregate.sum) { try $0.decoded(as: Value.self) }
    }

    /// The sum of an optional numeric field (`nil` skipped); 0 over nothing.
    public static func sum(_ keyPath: KeyPath<Root, Value?> & Sendable) -> Aggregation
        where Value: AdditiveArithmetic & Decodable {
        .init(keyPath, "sum", Aggregate.sum) { try $0.decoded(as: Value.self) }
    }

    /// The mean of a numeric field, `nil` over nothing.
    public static func average<V: AdditiveArithmetic & Decodable>(_ keyPath: KeyPath<Root, V> & Sendable)
        -> Aggregation where Value == Double? {
        .init(keyPath, "average", Aggregate.average) { if case .double(let d) = $0 { d } else { nil } }
    }

    /// The mean of an optional numeric field (`nil` skipped), `nil` over nothing.
    public static func average<V: AdditiveArithmetic & Decodable>(_ keyPath: KeyPath<Root, V?> & Sendable)
        -> Aggregation where Value == Double? {
        .init(keyPath, "average", Aggregate.average) { if case .double(let d) = $0 { d } else { nil } }
    }

    /// The least value of a field, `nil` over nothing.
    public static func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Root, V> & Sendable)
        -> Aggregation where Value == V? {
        .init(keyPath, "take the min of", Aggregate.min) { try $0.nonNull?.decoded(as: V.self) }
    }

    /// The least non-`nil` value of an optional field, `nil` over nothing.
    public static func min<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Root, V?> & Sendable)
        -> Aggregation where Value == V? {
        .init(keyPath, "take the min of", Aggregate.min) { try $0.nonNull?.decoded(as: V.self) }
    }

    /// The greatest value of a field, `nil` over nothing.
    public static func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Root, V> & Sendable)
        -> Aggregation where Value == V? {
        .init(keyPath, "take the max of", Aggregate.max) { try $0.nonNull?.decoded(as: V.self) }
    }

    /// The greatest non-`nil` value of an optional field, `nil` over nothing.
    public static func max<V: Comparable & Decodable & Sendable>(_ keyPath: KeyPath<Root, V?> & Sendable)
        -> Aggregation where Value == V? {
        .init(keyPath, "take the max of", Aggregate.max) { try $0.nonNull?.decoded(as: V.self) }
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
            // The type compared first: a cast of an optional (`Int(exactly:)`) looks up its metadata each time.
            if T.self == Int.self, let v = Int(exactly: i) { return v as! T }
            if T.self == Int64.self { return i as! T }
            if let v = Int(exactly: i) as? T { return v }   // `Int?`
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
