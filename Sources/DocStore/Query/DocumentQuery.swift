import Foundation

/// A query on a collection's documents without their Swift type: the same words as ``Query``, with fields named by
/// their paths and conditions given as ``Filter``s. Tools such as the REPL use it; it runs through the same planner.
///
/// For example:
/// ```swift
/// let oldest = DocumentQuery("people")
///     .include(.compare("age", .greaterOrEqual, .int(18)))
///     .sortBy("age", order: .reverse)
///     .sortBy("name")[0..<10]
/// let page = try await store.read { try oldest.results(in: $0) }   // [DocumentValue]
/// ```
/// `include`, `exclude`, `sortBy`, `reverse()` and slicing mean exactly what they mean on ``Query``.
public struct DocumentQuery: Sendable, Equatable, CustomStringConvertible {
    /// One field of the ordering.
    public struct SortField: Sendable, Equatable {
        public var path: FieldPath
        public var order: SortOrder
        public init(_ path: FieldPath, order: SortOrder = .forward) {
            self.path = path
            self.order = order
        }
    }

    /// The collection the query reads.
    public let collection: String
    /// The conditions, all of which must hold; an `exclude` is kept as a ``Filter/not(_:)``.
    public internal(set) var filters: [Filter] = []
    /// The ordering, most significant field first; ties come in id order.
    public internal(set) var sortFields: [SortField] = []
    var idDescending = false
    var window: QueryWindow?

    /// A query for every document of `collection`.
    public init(_ collection: String) { self.collection = collection }

    /// Keeps only the documents `filter` holds for (in addition to earlier conditions).
    public func include(_ filter: Filter) -> DocumentQuery {
        var q = self
        q.filters.append(filter)
        return q
    }

    /// Leaves out the documents `filter` holds for.
    public func exclude(_ filter: Filter) -> DocumentQuery { include(.not(filter)) }

    /// Orders by a field, within the ties of earlier `sortBy`s. `nil` (or a missing field) sorts first.
    public func sortBy(_ path: FieldPath, order: SortOrder = .forward) -> DocumentQuery {
        var q = self
        q.sortFields.append(SortField(path, order: order))
        return q
    }

    /// Flips every ordering (the id order of ties too); on a sliced query, reverses the slice.
    public func reverse() -> DocumentQuery {
        var q = self
        if let window = q.window {
            q.window = window.reversed()
        } else {
            for i in q.sortFields.indices { q.sortFields[i].order = q.sortFields[i].order == .forward ? .reverse : .forward }
            q.idDescending.toggle()
        }
        return q
    }

    /// The results at positions `range` of this query's results. Negative bounds count as 0.
    public subscript(_ range: Range<Int>) -> DocumentQuery {
        var q = self
        q.window = QueryWindow.slicing(q.window, range)
        return q
    }

    /// Whether the query is sliced.
    public var isSliced: Bool { window != nil }

    /// All the conditions as one filter.
    public var filter: Filter { .and(filters) }

    /// The query in the REPL's words: `people.include(age >= 18).sortBy(name)[0..<10]`.
    public var description: String {
        var text = collection
        if !filters.isEmpty { text += ".include(\(filter))" }
        for field in sortFields { text += ".sortBy(\(field.path)\(field.order == .reverse ? ", .reverse" : ""))" }
        if idDescending && window == nil && sortFields.isEmpty { text += ".reverse()" }
        if let window {
            text += "[\(window.range.lowerBound)..<\(window.range.upperBound)]"
            for step in window.afterwards {
                switch step {
                case .reverse: text += ".reverse()"
                case .slice(let r): text += "[\(r.lowerBound)..<\(r.upperBound)]"
                }
            }
        }
        return text
    }
}

/// The primary keys of some documents, as a query found them: what a tool counts, confirms, and then deletes.
///
/// Two sets are equal when they hold the same documents in the same order, so a tool can check that the documents a
/// query matches have not changed between a count and a confirmed change.
public struct DocumentIDs: Sendable, Equatable {
    let keys: [[UInt8]]
    /// How many documents.
    public var count: Int { keys.count }
    /// Whether there are none.
    public var isEmpty: Bool { keys.isEmpty }
}
