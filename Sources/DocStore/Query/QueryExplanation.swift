/// A query's plan as a person reads it, and what running it took.
///
/// For example, `print(try await Person.include(#Predicate { $0.age >= 18 }).sortBy(\.age)[0..<10].explain(in: store))`
/// prints something like:
/// ```
/// query on people (1000 documents)
///   filter:   age >= 18
///   access:   index age in sort order: age >= 18, ordered by age ascending, 830 entries
///   residual: none: the index answers the whole filter
///   order:    age ascending, then id; from the index, no sort
///   slice:    offset 0, limit 10: the walk stops after 10 matches
///   ran:      10 entries scanned, 10 documents read, 10 decoded, 10 returned
/// ```
public struct QueryExplanation: Sendable, CustomStringConvertible {
    /// The plan itself, as a value.
    let plan: Plan
    /// What running the query took.
    public let statistics: QueryStatistics

    /// The index the plan scans, if any (the first of a union; the one whose keys answer an aggregate); `nil` for
    /// the documents' own ids (``readsByID``).
    public var index: String? {
        switch (plan.access, plan.aggregateAccess) {
        case (.fullScan, .indexKeys(let index, _, _, _)?): return index.name
        case (.index(let scan), .indexKeys(let index, _, _, _)?) where !scan.primary: return index.name
        case (.index(let scan), _): return scan.primary ? nil : scan.index.name
        case (.union(let scans), _): return scans.first?.index.name
        default: return nil
        }
    }
    /// Whether the plan reads the documents by their ids, as key look-ups or key ranges rather than a scan.
    public var readsByID: Bool { if case .index(let scan) = plan.access { scan.primary } else { false } }
    /// Whether the order comes from an index walk (no sort).
    public var orderFromIndex: Bool { if case .index = plan.access { plan.ordering == .natural } else { false } }
    /// Whether matches are sorted with a bounded top-k heap.
    public var usesTopK: Bool { plan.ordering == .sorted && plan.needed != nil }
    /// Whether some condition needs the decoded document.
    public var decodesForFilter: Bool { plan.residual.needsDecoding }

    /// Where the keys an aggregate reads begin, past the fields the filter fixes: ` past customer`.
    private static func past(_ fixed: Int, of index: IndexDefinition) -> String {
        fixed == 0 ? "" : " past " + index.fields.prefix(fixed).map(\.description).joined(separator: ", ")
    }

    /// The plan, line by line, then what running it took.
    public var lines: [String] {
        var keyIndex: IndexDefinition?
        if case .indexKeys(let index, _, _, _)? = plan.aggregateAccess { keyIndex = index }
        var lines = ["query on \(plan.collection) (\(plan.documentCount) documents)"]
        lines.append("  filter:   \(plan.filter)")
        switch (plan.access, keyIndex) {
        case (.fullScan, let keyIndex?):
            lines.append("  access:   the keys of index \(keyIndex.name) (\(keyIndex.kind.rawValue) on "
                + "\(keyIndex.fields.map(\.description).joined(separator: ", "))), not the documents")
        case (.noCollection, _):
            lines.append("  access:   none: there is no such collection, so no document")
        case (.none, _):
            lines.append("  access:   none: the filter is always false")
        case (.fullScan(let descending), _):
            lines.append("  access:   full scan of the documents in \(descending ? "descending" : "ascending") id order")
        case (.index(let scan), _) where scan.primary:
            lines.append("  access:   the documents by id, no index: \(scan.bounds); "
                + "\(scan.ranges.count) key \(scan.ranges.count == 1 ? "look-up or range" : "ranges"), "
                + "\(scan.estimateText) documents")
        case (.index(let scan), let keyIndex):
            lines.append("  access:   index \(scan.index.name) (\(scan.index.kind.rawValue) on "
                + "\(scan.index.fields.map(\.description).joined(separator: ", "))): \(scan.bounds); "
                + "\(scan.ranges.count) key range\(scan.ranges.count == 1 ? "" : "s"), \(scan.estimateText) entries"
                + (scan.deduplicate ? ", deduplicated" : ""))
            if let keyIndex, keyIndex != scan.index {
                lines.append("            its range read in index \(keyIndex.name) (\(keyIndex.kind.rawValue) on "
                    + "\(keyIndex.fields.map(\.description).joined(separator: ", "))), which begins with the same fields: "
                    + "the keys, not the documents")
            }
        case (.union(let scans), _):
            lines.append("  access:   union of \(scans.count) index scans, deduplicated:")
            for scan in scans {
                lines.append("              \(scan.name): \(scan.bounds), \(scan.estimateText) entries")
            }
        }
        if plan.considered.count > 1 {
            lines.append("  chosen among: " + plan.considered.map(\.description).joined(separator: "; "))
        }
        if case .constant(true) = plan.residual {
            lines.append("  residual: none: the access answers the whole filter")
        } else {
            lines.append("  residual: \(plan.residual) — "
                + (plan.residual.needsDecoding ? "some of it needs the decoded document"
                                               : "evaluated on the encoded fields, no decoding"))
        }
        // Ties come in id order, unless the query sorts by the id itself (then there are none).
        let sortsByID = plan.sort.contains { $0.path == plan.idPath }
        let order = plan.sort.map { "\($0.path) \($0.descending ? "descending" : "ascending")" }
            + (sortsByID ? [] : ["id \(plan.idDescending ? "descending" : "ascending")"])
        // An aggregate or a count of every match has no order that matters.
        if plan.aggregateAccess == nil || plan.limit != nil {
            let how = switch (plan.ordering, plan.access, plan.needed) {
            case (.natural, .fullScan, _): "as stored, no sort"
            case (.natural, .index(let scan), _) where scan.primary: "as stored, no sort"
            case (.natural, _, _): "from the index, no sort"
            case (.sorted, _, let needed?): "top-\(needed) heap over the matches, reading only the sort fields"
            case (.sorted, _, nil): "full sort of the matches' sort keys"
            }
            lines.append("  order:    \(order.joined(separator: ", then ")); \(how)")
        }
        if let limit = plan.limit {
            lines.append("  slice:    offset \(plan.offset), limit \(limit)"
                + (plan.ordering == .natural ? ": the walk stops after \(plan.offset + limit) matches" : ""))
        }
        if !plan.afterwards.isEmpty {
            lines.append("  then:     " + plan.afterwards.map { step -> String in
                switch step {
                case .reverse: return "reversed"
                case .slice(let r): return "[\(r.lowerBound)..<\(r.upperBound)] of that"
                }
            }.joined(separator: ", "))
        }
        switch plan.aggregateAccess {
        case .indexKeys(let index, _, firstOnly: true, let fixed)?:
            lines.append("  aggregate: the first key of index \(index.name)\(Self.past(fixed, of: index)) in the walk's "
                + "direction (nil skipped): one cursor step, no document read unless the key does not give its value back")
        case .indexKeys(let index, _, firstOnly: false, let fixed)?:
            lines.append("  aggregate: from the keys of index \(index.name)\(Self.past(fixed, of: index)): each distinct "
                + "key once, with its number of entries; no document read unless a key does not give its value back")
        case .matches(let fields)?:
            lines.append("  aggregate: over the matches, reading "
                + "\(fields.isEmpty ? "no field" : fields.map(\.description).joined(separator: ", ")) "
                + "from each document's bytes; groups in a hash table, then in key order")
        case .counting?, nil:
            break
        }
        lines.append("  ran:      \(statistics)")
        return lines
    }

    /// The lines, as printed.
    public var description: String { lines.joined(separator: "\n") }
}
