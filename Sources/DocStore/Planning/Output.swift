/// What an aggregate computes over the documents of a query, or over each group's.
///
/// Values are read from the encoded documents; nothing is decoded. `nil` and missing values are skipped, as SQL
/// skips `NULL`; `sum` and `average` skip values that are not numbers as well.
public enum Aggregate: Sendable, Hashable, CustomStringConvertible {
    /// The number of documents.
    case count
    /// The sum of the field's numbers; 0 when there are none. Whole numbers (integers of any width, and `Double`s
    /// without a fraction from -2^63 up to 2^64, where an index key cannot tell them from integers) add exactly: a
    /// sum that does not fit in an `Int64` is an error, not a wrap. Once a number with a fraction comes in, the sum is
    /// a `Double`.
    case sum(FieldPath)
    /// The mean of the field's numbers, as a `Double`; `nil` when there are none.
    case average(FieldPath)
    /// The least value, in the order of index keys (numbers of every width by their value, `nil` skipped).
    case min(FieldPath)
    /// The greatest value, in the order of index keys.
    case max(FieldPath)

    /// The field the aggregate reads, if any.
    public var path: FieldPath? {
        switch self {
        case .count: return nil
        case .sum(let p), .average(let p), .min(let p), .max(let p): return p
        }
    }

    /// Whether this is `max`.
    var isMax: Bool { if case .max = self { true } else { false } }

    /// As the shell writes it: `count()`, `sum(score)`.
    public var description: String {
        switch self {
        case .count: return "count()"
        case .sum(let p): return "sum(\(p))"
        case .average(let p): return "average(\(p))"
        case .min(let p): return "min(\(p))"
        case .max(let p): return "max(\(p))"
        }
    }
}

/// What a request answers: its documents, some fields of each, or groups of its matches with an aggregate each (an
/// aggregate of every match is one group, by no field).
enum Output: Sendable, Equatable {
    case documents
    case fields([FieldPath])
    case groups(Grouping)
}

/// The groups a request answers: the fields grouped by, the aggregate of each group, their order and their slice.
struct Grouping: Sendable, Equatable {
    var by: [FieldPath]
    var aggregate: Aggregate
    /// The group of documents without a value is left out (the distinct values of a field).
    var dropsNil = false
    /// The caller decodes each value of the groups (keys, `min`, `max`) as a Swift type, which takes a number
    /// stored as an integer or as a `Double` alike: a number's index key gives it. An untyped answer says which it
    /// was stored as, which only the document tells.
    var valuesDecoded = false
    var order = GroupOrder.key
    var descending = false
    /// Groups of equal aggregates in descending key order: set by ``Query/reverse()``, so that it flips every
    /// ordering (a `sortBy` puts ties in key order).
    var tiesDescending = false
    var window: QueryWindow?

    /// Whether this is the count of every match, which a count answers.
    var isCount: Bool { by.isEmpty && aggregate == .count }
}

/// What groups are ordered by: their key (the default, `nil` first) or their aggregate.
public enum GroupOrder: Sendable {
    /// The values of the fields grouped by, in the order of index keys.
    case key
    /// The group's aggregate, ties by key.
    case value
}

/// How an aggregate is computed.
enum AggregateAccess: Sendable, Equatable {
    /// The matches counted (the count of every match), then `afterwards` applied to the count.
    case counting(afterwards: [WindowStep])
    /// From the keys of an index in `ranges` and their entry counts: no document read, except one per distinct key
    /// whose value the key does not give back exactly (a number, for an untyped answer: see
    /// ``Grouping/valuesDecoded``). `firstOnly`: a `min` or `max` of everything, which the first
    /// key in the walk's direction answers. `fixedParts`: the key's first parts, which the one range fixes to one
    /// value each, come before the groups' (see ``Planner/aggregateAccess(_:plan:)``).
    case indexKeys(IndexDefinition, ranges: [KeyRange], firstOnly: Bool, fixedParts: Int)
    /// Over the query's matches (in order and within the slice, when the query is sliced), reading the named fields
    /// from each.
    case matches(reading: [FieldPath])
}
