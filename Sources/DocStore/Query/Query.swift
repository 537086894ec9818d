import Foundation

/// A query: which documents of a type, in what order, which slice of them. A value, built by refinement, that
/// runs nothing until asked (`results`, `first`, `count`, ...).
///
/// For example:
/// ```swift
/// let adults = Query<Person>()
///     .include(#Predicate { $0.age >= 18 })
///     .exclude(#Predicate { $0.city == "Oslo" })
///     .sortBy(\.age)                       // then by name within an age:
///     .sortBy(\.name, order: .reverse)
/// let page = try await adults[20..<40].results(in: store)
/// ```
///
/// The words mean what they say:
/// - `include` and `exclude` add conditions; all of them must hold (`&&`), whenever they are added.
/// - `sortBy` is cumulative: each call sorts within the ties of the ones before. Documents that tie on every sort
///   key, and the documents of an unsorted query, come in id order. `nil` sorts before any value.
/// - `reverse()` flips every ordering, the id order of ties included, so `q.reverse().first` is `q.last`.
///   On a sliced query it reverses the slice: `q[0..<5].reverse()` holds the same five documents, last first.
/// - `q[a..<b]` is the slice of `q`'s results at positions `a..<b` (fewer when there are fewer); slicing a slice
///   narrows it: `q[10..<20][0..<5]` is `q[10..<15]`.
/// - `first` is the first result of the query as it stands, and `last` the last: `q[0..<5].last` is the fifth
///   result of `q` (or the last of fewer), not the last of everything.
public struct Query<T: Document>: Sendable {
    enum Clause: Sendable {
        case include(Predicate<T>)
        case exclude(Predicate<T>)
    }

    struct SortKey: Sendable {
        let keyPath: PartialKeyPath<T> & Sendable
        var order: SortOrder
    }

    var clauses: [Clause] = []
    var sortKeys: [SortKey] = []
    /// Ties, and unsorted results, come in descending id order.
    var idDescending = false
    var window: QueryWindow?

    /// A query for every document of `T`.
    public init() {}

    /// Keeps only the documents for which `predicate` is true (in addition to earlier conditions).
    ///
    /// For example: `Person.query().include(#Predicate { $0.age >= 18 && $0.tags.contains("swift") })`.
    public func include(_ predicate: Predicate<T>) -> Query {
        var q = self
        q.clauses.append(.include(predicate))
        return q
    }

    /// Leaves out the documents for which `predicate` is true.
    ///
    /// For example: `Person.query().exclude(#Predicate { $0.city == "Oslo" })`.
    public func exclude(_ predicate: Predicate<T>) -> Query {
        var q = self
        q.clauses.append(.exclude(predicate))
        return q
    }

    /// Orders by a field, within the ties of earlier `sortBy`s.
    ///
    /// For example: `Person.sortBy(\.age).sortBy(\.name, order: .reverse)`.
    public func sortBy<Value: Comparable>(_ keyPath: KeyPath<T, Value> & Sendable, order: SortOrder = .forward) -> Query {
        var q = self
        q.sortKeys.append(SortKey(keyPath: keyPath, order: order))
        return q
    }

    /// Orders by an optional field, `nil` first (last with `.reverse`).
    public func sortBy<Value: Comparable>(_ keyPath: KeyPath<T, Value?> & Sendable, order: SortOrder = .forward) -> Query {
        var q = self
        q.sortKeys.append(SortKey(keyPath: keyPath, order: order))
        return q
    }

    /// Flips every ordering (the id order of ties too); on a sliced query, reverses the slice.
    ///
    /// For example: `Person.sortBy(\.age).reverse().first(in: store)` is the oldest person.
    public func reverse() -> Query {
        var q = self
        if let window = q.window {
            q.window = window.reversed()
        } else {
            for i in q.sortKeys.indices { q.sortKeys[i].order = q.sortKeys[i].order == .forward ? .reverse : .forward }
            q.idDescending.toggle()
        }
        return q
    }

    /// The results at positions `range` of this query's results.
    ///
    /// For example: `Person.sortBy(\.name)[0..<10]` is the first ten by name. Negative bounds count as 0.
    public subscript(_ range: Range<Int>) -> Query {
        var q = self
        q.window = QueryWindow.slicing(q.window, range)
        return q
    }

    /// The same query without its slice: what `first`, `last` and `count` are about when there is none.
    var unwindowed: Query {
        var q = self
        q.window = nil
        return q
    }
}

extension Document {
    /// A query for every document of this type. For example: `try await Person.query().count(in: store)`.
    public static func query() -> Query<Self> { Query() }

    /// A query for the documents that satisfy `predicate`.
    public static func include(_ predicate: Predicate<Self>) -> Query<Self> { Query().include(predicate) }

    /// A query for the documents that do not satisfy `predicate`.
    public static func exclude(_ predicate: Predicate<Self>) -> Query<Self> { Query().exclude(predicate) }

    /// A query for every document, ordered by a field.
    public static func sortBy<Value: Comparable>(_ keyPath: KeyPath<Self, Value> & Sendable,
                                                 order: SortOrder = .forward) -> Query<Self> {
        Query().sortBy(keyPath, order: order)
    }

    /// A query for every document, ordered by an optional field.
    public static func sortBy<Value: Comparable>(_ keyPath: KeyPath<Self, Value?> & Sendable,
                                                 order: SortOrder = .forward) -> Query<Self> {
        Query().sortBy(keyPath, order: order)
    }

    /// Any one document of this type, or `nil` when there is none.
    public static func any(in store: DocStore) async throws -> Self? { try await query().any(in: store) }
}
