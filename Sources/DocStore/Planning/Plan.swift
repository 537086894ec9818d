/// One field of an ordering.
struct SortSpec: Sendable, Equatable {
    let path: FieldPath
    var descending: Bool
}

/// A range of index keys: `lower` included, `upper` excluded (`nil`: to the end).
struct KeyRange: Sendable, Equatable {
    var lower: [UInt8]
    var upper: [UInt8]?

    func contains(_ key: UnsafeRawBufferPointer) -> Bool {
        if lower.withUnsafeBytes({ key.precedesInKeyOrder($0) }) { return false }
        if let upper, !upper.withUnsafeBytes({ key.precedesInKeyOrder($0) }) { return false }
        return true
    }

    /// The keys that start with `prefix` and continue with any value but nil (which sorts first): `x != nil`.
    static func notNil(after prefix: [UInt8]) -> KeyRange {
        KeyRange(lower: prefix + [KeyEncoder.kindRange(of: .null).upper], upper: KeyEncoder.prefixUpperBound(prefix))
    }

    /// The range holding exactly the keys that start with `prefix`.
    static func prefix(_ prefix: [UInt8]) -> KeyRange {
        KeyRange(lower: prefix, upper: KeyEncoder.prefixUpperBound(prefix))
    }
}

/// A walk over some ranges of one index, named by its definition; or, when ``primary``, over some ranges of the
/// documents' own keys, their ids.
struct IndexScan: Sendable, Equatable {
    let index: IndexDefinition
    var ranges: [KeyRange]
    /// The ranges are of ids, walked in the documents themselves as in a unique index on the id (``index`` then
    /// names it so): an entry is a document, and the walk is in id order.
    var primary = false
    /// Walk keys from the last to the first.
    var descending = false
    /// Within one key, walk the documents in descending id order.
    var descendingIDs = false
    /// A document may appear more than once (several ranges, or several elements of one array).
    var deduplicate = false
    /// The conditions the ranges answer exactly: they need no check on the document.
    var answered: [Condition] = []
    /// The conditions the ranges were chosen from, for `explain` (a prefix condition narrows the ranges without
    /// answering itself, so it is here and not in `answered`).
    var chosenFrom: [Condition] = []
    /// The order this scan delivers, when it was chosen for it.
    var orderedBy: [SortSpec]? = nil
    /// Each range is one key of a unique index or of the ids: at most one entry each, so the estimate is the
    /// number of ranges, with nothing counted.
    var pointLookUps = false
    /// Index entries in the ranges: counted, or estimated when the ranges hold too many distinct keys to count.
    var estimate = 0
    var estimateIsCapped = false

    /// How the ranges were chosen, for `explain`: built only when asked for, as planning runs per query.
    var bounds: String {
        var parts = chosenFrom.map(\.description)
        if let orderedBy {
            parts.append("ordered by " + orderedBy.map { "\($0.path) \($0.descending ? "descending" : "ascending")" }
                .joined(separator: ", "))
        }
        return parts.joined(separator: ", ")
    }
    var estimateText: String {
        pointLookUps ? "at most \(estimate)" : estimateIsCapped ? "about \(estimate) (estimated)" : "\(estimate)"
    }
    /// What the walk reads, for `explain`: `index age`, or `ids` for the documents' own keys.
    var name: String { primary ? "ids" : "index \(index.name)" }
}

/// How a query is carried out: where candidates come from, what is checked on each, how they are ordered and sliced.
///
/// A plan is a value: made by ``Planner``, run by the executor, printed by `explain`, compared by tests.
struct Plan: Sendable, Equatable {
    enum Access: Sendable, Equatable {
        /// No document can match.
        case none
        /// The collection does not exist: no document to read.
        case noCollection
        /// Every document, in id order (or its reverse).
        case fullScan(descending: Bool)
        case index(IndexScan)
        /// The union of several index scans (an `||` over indexed fields), each document once.
        case union([IndexScan])
    }

    enum Ordering: Sendable, Equatable {
        /// The access already delivers the wanted order: results stream, and a limit stops the walk.
        case natural
        /// Matching documents are ordered afterwards: a bounded top-k when there is a limit, a full sort otherwise.
        case sorted
    }

    let collection: String
    var documentCount: Int
    let filter: Condition
    var access: Access
    var residual: Condition
    let sort: [SortSpec]
    /// Where the collection's documents hold their ids, which order the ties of every sort.
    var idPath = Plan.defaultIDPath
    let idDescending: Bool
    var ordering: Ordering
    let offset: Int
    let limit: Int?
    /// Applied to the slice's documents after the walk.
    let afterwards: [WindowStep]
    /// The accesses considered (the full scan first), for `explain`.
    var considered: [ConsideredAccess] = []
    /// The groups the request answers, and how their aggregate is computed; `nil` for documents or their fields.
    var grouping: Grouping?
    var aggregateAccess: AggregateAccess?

    static let defaultIDPath: FieldPath = "id"

    /// The number of results the walk needs before it can stop: `offset + limit`.
    var needed: Int? { limit.map { offset + $0 } }
}

extension Plan {
    /// The plan for `selection` (its filter simplified) before indexes are weighed: a full scan, or with `nothing`,
    /// that access reading no document (none can match, or there is no collection).
    init(_ selection: Selection, collection: String, documentCount: Int, nothing: Access? = nil) {
        let filter = selection.condition.simplified
        let sorted = nothing == nil && !selection.sort.isEmpty
        self.init(collection: collection, documentCount: documentCount, filter: filter,
                  access: nothing ?? .fullScan(descending: selection.idDescending),
                  residual: nothing == nil ? filter : .constant(true), sort: selection.sort,
                  idDescending: selection.idDescending, ordering: sorted ? .sorted : .natural,
                  offset: selection.window?.range.lowerBound ?? 0, limit: selection.window?.range.count,
                  afterwards: selection.window?.afterwards ?? [])
    }

    /// The plan of a request on a collection that does not exist: it reads nothing.
    static func noCollection(_ selection: Selection, output: Output, collection: String) -> Plan {
        var plan = Plan(selection.planned(for: output), collection: collection, documentCount: 0, nothing: .noCollection)
        if case .groups(let grouping) = output {
            plan.grouping = grouping
            plan.aggregateAccess = grouping.isCount ? .counting(afterwards: selection.window?.afterwards ?? [])
                                                    : .matches(reading: [])
        }
        return plan
    }
}

extension Selection {
    /// The selection whose matches `output` reads: an aggregate of every match (not of a slice) drops the order, and
    /// a count also what is done to the slice afterwards (it is applied to the count).
    func planned(for output: Output) -> Selection {
        guard case .groups(let grouping) = output, grouping.isCount || window == nil else { return self }
        return forCounting
    }
}

/// An access the planner weighed, described for `explain`.
enum ConsideredAccess: Sendable, Equatable, CustomStringConvertible {
    case fullScan(documents: Int)
    case scan(IndexScan)
    case union([IndexScan])

    var description: String {
        switch self {
        case .fullScan(let documents):
            return "full scan: \(documents) documents"
        case .scan(let scan):
            return "\(scan.name)\(scan.orderedBy == nil ? "" : " in sort order"): "
                + "\(scan.bounds), \(scan.estimateText) entries"
        case .union(let scans):
            return "union of " + scans.map { "\($0.name): \($0.bounds)" }.joined(separator: " || ")
                + ", \(scans.reduce(0) { $0 + $1.estimate }) entries"
        }
    }
}
