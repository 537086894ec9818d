import Foundation
import Testing
@testable import DocStore

// Aggregates, groups, distinct values and projections against a plain in-memory computation over the same random
// documents. The documents are stored three times: in a collection with regular indexes whose keys can answer
// aggregates, in one without any index (scanned on one thread), and in a store whose scans split among threads.
// All three must give the oracle's answer.
//
// The model, from the documentation of aggregates:
// - a value is read at its path; a missing field is nil, the same as a stored null;
// - `count` counts documents; `sum` and `average` take numbers only; whole numbers (integers, and Doubles without a
//   fraction where an Int64 or a UInt64 may lie: an index key does not tell them apart) add exactly, and a whole sum outside Int64 is an overflow
//   (unless it fits UInt64 and one of them lay above Int64.max: then it is a UInt64); a fraction makes the
//   sum a Double; `average` is a Double, nil of nothing;
// - `min` and `max` order non-nil values as index keys do (KeyEncoder.key, whose order other tests hold);
// - groups and distinct values come in the key order of their values, nil first; values equal as keys are one group.

// MARK: The model

/// The key of a value, a missing one being nil.
private func keyOf(_ value: DocumentValue?) -> [UInt8] { KeyEncoder.key(value ?? .null) }

private func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

/// Documents in id order (their ids are integers).
private func inIDOrder(_ documents: [DocumentValue]) -> [DocumentValue] {
    func id(_ document: DocumentValue) -> Int64 {
        if case .int(let i)? = lookup(document, "id") { return i }
        return Int64.max
    }
    let keyed: [(id: Int64, document: DocumentValue)] = documents.map { (id($0), $0) }
    return keyed.sorted { a, b in a.id < b.id }.map(\.document)
}

/// The same stored value (NaN being itself).
private func same(_ a: DocumentValue, _ b: DocumentValue) -> Bool { a == b || (isNaN(a) && isNaN(b)) }

/// The same value at every depth (NaN being itself).
private func deepSame(_ a: DocumentValue, _ b: DocumentValue) -> Bool {
    switch (a, b) {
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(deepSame)
    case (.object(let x), .object(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { $0.name == $1.name && deepSame($0.value, $1.value) }
    default: return same(a, b)
    }
}

/// `left op right` as a filter holds it: values compared by their keys, an ordering only between values of one kind.
private func holds(_ left: DocumentValue?, _ op: Filter.Comparison, _ right: DocumentValue) -> Bool {
    let value = left ?? .null
    if isNaN(value) || isNaN(right) { return op == .notEqual }
    let (a, b) = (KeyEncoder.key(value), KeyEncoder.key(right))
    switch op {
    case .equal: return a == b
    case .notEqual: return a != b
    default:
        guard value != .null, KeyEncoder.kindRange(of: value) == KeyEncoder.kindRange(of: right) else { return false }
        switch op {
        case .less: return precedes(a, b)
        case .lessOrEqual: return !precedes(b, a)
        case .greater: return precedes(b, a)
        default: return !precedes(a, b)
        }
    }
}

/// A filter as data: built into a `Filter` for the store, evaluated here for the model.
private indirect enum Expr: Sendable {
    case compare(String, Filter.Comparison, DocumentValue)
    case oneOf(String, [DocumentValue])
    case hasPrefix(String, String)
    case and([Expr])
    case or([Expr])
    case not(Expr)

    var filter: Filter {
        switch self {
        case .compare(let path, let op, let value): .compare(FieldPath(path), op, value)
        case .oneOf(let path, let values): .oneOf(FieldPath(path), values)
        case .hasPrefix(let path, let prefix): .hasPrefix(FieldPath(path), prefix)
        case .and(let parts): .and(parts.map(\.filter))
        case .or(let parts): .or(parts.map(\.filter))
        case .not(let part): .not(part.filter)
        }
    }

    func matches(_ document: DocumentValue) -> Bool {
        switch self {
        case .compare(let path, let op, let value): return holds(lookup(document, path), op, value)
        case .oneOf(let path, let values):
            let value = lookup(document, path)
            return values.contains { holds(value, .equal, $0) }
        case .hasPrefix(let path, let prefix):
            guard case .string(let s)? = lookup(document, path) else { return false }
            return Array(s.unicodeScalars).starts(with: Array(prefix.unicodeScalars))
        case .and(let parts): return parts.allSatisfy { $0.matches(document) }
        case .or(let parts): return parts.contains { $0.matches(document) }
        case .not(let part): return !part.matches(document)
        }
    }
}

/// A number as an aggregate adds it: exactly when whole and within the range of Int64 and UInt64, else as a Double.
private enum Addend {
    case whole(Int128)
    case fraction(Double)

    init?(_ value: DocumentValue?) {
        switch value {
        case .int(let i)?: self = .whole(Int128(i))
        case .uint(let u)?: self = .whole(Int128(u))
        case .double(let d)?:
            if d.isFinite, d.rounded() == d, d >= -0x1p63, d < 0x1p64 { self = .whole(Int128(d)) } else { self = .fraction(d) }
        default: return nil
        }
    }
}

/// What one aggregate should give.
private enum Expected: CustomStringConvertible {
    /// A count, or a sum of whole numbers.
    case int(Int64)
    /// A sum of whole numbers past Int64, one of them above Int64.max.
    case uint(UInt64)
    /// A sum with a fraction, or an average: within `tolerance`.
    case double(Double, tolerance: Double)
    /// An average, min or max of nothing.
    case none
    /// A min or max: its key, and the stored values that have it.
    case value(key: [UInt8], candidates: [DocumentValue])
    /// A whole sum outside Int64.
    case overflow

    var description: String {
        switch self {
        case .int(let n): return ".int(\(n))"
        case .uint(let n): return ".uint(\(n))"
        case .double(let d, let t): return ".double(\(d) ± \(t))"
        case .none: return "nil"
        case .value(_, let candidates): return "one of \(candidates.map { $0.json() })"
        case .overflow: return "an overflow"
        }
    }

    /// The key the result orders by (for exact results).
    var key: [UInt8] {
        switch self {
        case .int(let n): return KeyEncoder.key(.int(n))
        case .uint(let n): return KeyEncoder.key(.uint(n))
        case .double(let d, _): return KeyEncoder.key(.double(d))
        case .none, .overflow: return KeyEncoder.key(.null)
        case .value(let key, _): return key
        }
    }

    func accepts(_ actual: DocumentValue) -> Bool {
        switch self {
        case .int(let n): return actual == .int(n)
        case .uint(let n): return actual == .uint(n)
        case .double(let d, let tolerance):
            guard case .double(let a) = actual else { return false }
            if d.isNaN { return a.isNaN }
            if d.isInfinite { return a == d }
            return abs(a - d) <= tolerance
        case .none: return actual == .null
        case .value(let key, let candidates):
            return KeyEncoder.key(actual) == key && candidates.contains { same($0, actual) }
        case .overflow: return false
        }
    }

    static func of(_ aggregate: Aggregate, over documents: [DocumentValue]) -> Expected {
        switch aggregate {
        case .count: return .int(Int64(documents.count))
        case .sum(let path), .average(let path):
            var whole: Int128 = 0
            var fraction = 0.0
            var magnitude = 0.0
            var numbers = 0
            var sawFraction = false
            var sawAboveInt64 = false
            for document in documents {
                guard let addend = Addend(lookup(document, path.description)) else { continue }
                numbers += 1
                switch addend {
                case .whole(let w): whole += w; magnitude += abs(Double(w)); sawAboveInt64 = sawAboveInt64 || w > Int128(Int64.max)
                case .fraction(let f): fraction += f; magnitude += abs(f); sawFraction = true
                }
            }
            if case .average = aggregate {
                guard numbers > 0 else { return .none }
                let n = Double(numbers)
                return .double((Double(whole) + fraction) / n, tolerance: 1e-12 * magnitude / n + 1e-12)
            }
            if sawFraction { return .double(Double(whole) + fraction, tolerance: 1e-12 * magnitude + 1e-12) }
            if let exact = Int64(exactly: whole) { return .int(exact) }
            if sawAboveInt64, let exact = UInt64(exactly: whole) { return .uint(exact) }
            return .overflow
        case .min(let path), .max(let path):
            var best: (key: [UInt8], candidates: [DocumentValue])?
            for document in documents {
                guard let value = lookup(document, path.description), value != .null else { continue }
                let key = KeyEncoder.key(value)
                if let b = best, b.key == key {
                    best?.candidates.append(value)
                } else if best == nil || (aggregate.isMax ? precedes(best!.key, key) : precedes(key, best!.key)) {
                    best = (key, [value])
                }
            }
            return best.map { .value(key: $0.key, candidates: $0.candidates) } ?? .none
        }
    }
}

/// One group the model expects: the keys of its values, the values stored for each (any may stand for the
/// group), its documents.
private struct ExpectedGroup {
    var keys: [[UInt8]]
    var values: [[DocumentValue]]
    var documents: [DocumentValue]
    var result: Expected = .none
}

/// The groups of `documents` by `paths`, in key order.
private func groups(of documents: [DocumentValue], by paths: [String]) -> [ExpectedGroup] {
    var found: [[[UInt8]]: Int] = [:]
    var list: [ExpectedGroup] = []
    for document in documents {
        let values = paths.map { lookup(document, $0) ?? .null }
        let keys = values.map { KeyEncoder.key($0) }
        if let i = found[keys] {
            for (j, v) in values.enumerated() where !list[i].values[j].contains(where: { same($0, v) }) {
                list[i].values[j].append(v)
            }
            list[i].documents.append(document)
        } else {
            found[keys] = list.count
            list.append(ExpectedGroup(keys: keys, values: values.map { [$0] }, documents: [document]))
        }
    }
    return list.sorted { tupleOrder($0.keys, $1.keys) }
}

private func tupleOrder(_ a: [[UInt8]], _ b: [[UInt8]]) -> Bool {
    for (x, y) in zip(a, b) where x != y { return precedes(x, y) }
    return a.count < b.count
}

// MARK: Queries as data

/// How the groups of a query are asked for.
private enum Verb: Sendable, CustomStringConvertible {
    /// The aggregate of all matches; `convenience` asks through `sum`/`average`/`min`/`max` rather than `aggregate`.
    case value(convenience: Bool)
    case distinct(String)
    /// The groups: ordered by key or value, perhaps reversed, perhaps sliced.
    case groups(by: GroupOrder, reverse: Bool, slice: Range<Int>?, convenience: Bool)
    /// The number of groups (in a slice of them).
    case countGroups(slice: Range<Int>?)
    case firstGroup

    var description: String {
        switch self {
        case .value(let c): return c ? "value (convenience)" : "value"
        case .distinct(let p): return "distinct(\(p))"
        case .groups(let by, let reverse, let slice, let c):
            return "groups by \(by == .key ? "key" : "value")\(reverse ? " reversed" : "")"
                + (slice.map { " [\($0.lowerBound)..<\($0.upperBound)]" } ?? "") + (c ? " (convenience)" : "")
        case .countGroups(let slice): return "count of groups" + (slice.map { " [\($0.lowerBound)..<\($0.upperBound)]" } ?? "")
        case .firstGroup: return "first group"
        }
    }
}

private struct AggregateQuery: Sendable, CustomStringConvertible {
    var filter: Expr?
    var excluded = false
    var sort: (path: String, order: SortOrder)?
    var slice: Range<Int>?
    var groupBy: [String] = []
    var aggregate: Aggregate = .count
    var verb: Verb = .value(convenience: false)

    func make(_ collection: String) -> Query<DocumentValue> {
        var q = Query<DocumentValue>(collection)
        if let filter { q = excluded ? q.exclude(filter.filter) : q.include(filter.filter) }
        if let sort { q = q.sortBy(FieldPath(sort.path), order: sort.order) }
        if let slice { q = q[slice] }
        return q
    }

    var description: String {
        "\(make("c")).groupBy(\(groupBy.joined(separator: ", "))).\(aggregate) as \(verb)"
    }

    /// The documents the aggregate reads: the matches, sorted and sliced as the query is. `documents` are in id
    /// order.
    func matches(_ documents: [DocumentValue]) -> [DocumentValue] {
        var found = documents.filter { d in filter.map { $0.matches(d) != excluded } ?? true }
        if let sort {
            let keyed = found.map { (key: keyOf(lookup($0, sort.path)), id: keyOf(lookup($0, "id")), document: $0) }
            found = keyed.sorted { a, b in
                if a.key != b.key { return sort.order == .reverse ? precedes(b.key, a.key) : precedes(a.key, b.key) }
                return precedes(a.id, b.id)
            }.map(\.document)
        }
        if let slice {
            let lower = min(slice.lowerBound, found.count)
            found = Array(found[lower..<min(slice.upperBound, found.count)])
        }
        return found
    }

    /// Whether the groups' aggregates are exact, so that they can be ordered by value.
    static func exact(_ aggregate: Aggregate) -> Bool {
        switch aggregate {
        case .count, .min, .max: return true
        case .sum(let p), .average(let p): return p == "x" || p == "z"
        }
    }
}

/// What a query gave.
private enum Outcome: Sendable {
    case value(DocumentValue)
    case values([DocumentValue])
    case rows([Group<[DocumentValue], DocumentValue>])
    case count(Int)
    case failed(DocStoreError.Code, String)
}

/// What the model expects of a query.
private enum Expectation {
    case value(Expected)
    case values([ExpectedGroup])
    case rows([ExpectedGroup])
    case count(Int)
    case overflow

    static func of(_ query: AggregateQuery, over documents: [DocumentValue]) -> Expectation {
        let matches = query.matches(documents)
        if case .distinct(let path) = query.verb {
            return .values(groups(of: matches, by: [path]).filter { $0.keys[0] != KeyEncoder.key(.null) })
        }
        if query.groupBy.isEmpty, case .value = query.verb {
            let result = Expected.of(query.aggregate, over: matches)
            if case .overflow = result { return .overflow }
            return .value(result)
        }
        var found = groups(of: matches, by: query.groupBy)
        for i in found.indices {
            found[i].result = Expected.of(query.aggregate, over: found[i].documents)
            if case .overflow = found[i].result { return .overflow }
        }
        var order = GroupOrder.key, reverse = false, slice: Range<Int>?
        switch query.verb {
        case .groups(let by, let r, let s, _): (order, reverse, slice) = (by, r, s)
        case .countGroups(let s): slice = s
        case .firstGroup: slice = 0..<1
        default: break
        }
        if order == .value {
            found = found.enumerated().sorted { a, b in
                let (x, y) = (a.element.result.key, b.element.result.key)
                if x != y { return reverse ? precedes(y, x) : precedes(x, y) }
                return a.offset < b.offset
            }.map(\.element)
        } else if reverse {
            found.reverse()
        }
        if let slice {
            let lower = min(slice.lowerBound, found.count)
            found = Array(found[lower..<min(slice.upperBound, found.count)])
        }
        if case .countGroups = query.verb { return .count(found.count) }
        return .rows(found)
    }

    /// What is wrong with `outcome`, or nil.
    func problem(with outcome: Outcome) -> String? {
        switch (self, outcome) {
        case (.overflow, .failed(let code, _)) where code == .overflow: return nil
        case (_, .failed(let code, let message)): return "expected \(self), got error \(code): \(message)"
        case (.value(let e), .value(let v)): return e.accepts(v) ? nil : "expected \(e), got \(v.json())"
        case (.count(let n), .count(let m)): return n == m ? nil : "expected \(n) groups, got \(m)"
        case (.values(let groups), .values(let values)):
            guard groups.count == values.count else {
                return "expected \(groups.count) distinct values, got \(values.count): \(values.map { $0.json() })"
            }
            for (g, v) in zip(groups, values) where KeyEncoder.key(v) != g.keys[0] || !g.values[0].contains(where: { same($0, v) }) {
                return "distinct value \(v.json()) where one of \(g.values[0].map { $0.json() }) was expected"
            }
            return nil
        case (.rows(let groups), .rows(let rows)):
            guard groups.count == rows.count else {
                return "expected \(groups.count) groups, got \(rows.count): "
                    + rows.prefix(8).map { "\($0.key.map { $0.json() }) → \($0.value.json())" }.joined(separator: ", ")
            }
            for (i, (g, row)) in zip(groups, rows).enumerated() {
                guard row.key.count == g.keys.count,
                      zip(row.key, zip(g.keys, g.values)).allSatisfy({ v, e in
                          KeyEncoder.key(v) == e.0 && e.1.contains { same($0, v) }
                      }) else {
                    return "group #\(i): key \(row.key.map { $0.json() }), expected one of \(g.values.map { $0.map { $0.json() } })"
                }
                guard g.result.accepts(row.value) else {
                    return "group #\(i) \(row.key.map { $0.json() }): expected \(g.result), got \(row.value.json())"
                }
            }
            return nil
        default:
            return "expected \(self), got \(outcome)"
        }
    }
}

extension Expectation: CustomStringConvertible {
    var description: String {
        switch self {
        case .value(let e): return "\(e)"
        case .values(let g): return "\(g.count) distinct values"
        case .rows(let g): return "\(g.count) groups"
        case .count(let n): return "\(n) groups"
        case .overflow: return "an overflow"
        }
    }
}

// MARK: Running queries

/// A group query's groups as untyped rows, in the order and slice the query asks for.
private func rows<V>(_ q: Query<Group<[DocumentValue], V>>, _ verb: Verb, in ctx: ReadContext,
                     _ convert: (V) -> DocumentValue) throws -> Outcome {
    switch verb {
    case .groups(let by, let reverse, let slice, _):
        var shaped = q.sortBy(by, order: reverse ? .reverse : .forward)
        if let slice { shaped = shaped[slice] }
        return .rows(try shaped.results(in: ctx).map { Group(key: $0.key, value: convert($0.value)) })
    case .countGroups(let slice):
        return .count(try (slice.map { q[$0] } ?? q).count(in: ctx))
    case .firstGroup:
        return .rows(try q.first(in: ctx).map { [Group(key: $0.key, value: convert($0.value))] } ?? [])
    default:
        return .rows(try q.results(in: ctx).map { Group(key: $0.key, value: convert($0.value)) })
    }
}

private func run(_ query: AggregateQuery, on collection: String, in ctx: ReadContext) -> Outcome {
    let q = query.make(collection)
    do {
        switch query.verb {
        case .value(let convenience):
            // Read as the one value, or as the first of the results.
            let request = q.aggregate(query.aggregate)
            return .value(convenience ? try request.value(in: ctx) : try request.results(in: ctx).first ?? .null)
        case .distinct(let path):
            return .values(try q.distinct(FieldPath(path)).results(in: ctx))
        case .groups(_, _, _, true):
            // Groups reversed twice are the groups.
            let grouped = q.groupBy(query.groupBy.map { FieldPath($0) }, query.aggregate).reverse().reverse()
            return try rows(grouped, query.verb, in: ctx) { $0 }
        default:
            let grouped = q.groupBy(query.groupBy.map { FieldPath($0) }, query.aggregate)
            return try rows(grouped, query.verb, in: ctx) { $0 }
        }
    } catch let error as DocStoreError {
        return .failed(error.code, error.message)
    } catch {
        return .failed(.storage, "\(error)")
    }
}

/// Whether the query's aggregate was computed from index keys, as `explain` tells (nil when explaining failed).
private func fromIndexKeys(_ query: AggregateQuery, on collection: String, in ctx: ReadContext) -> Bool? {
    let q = query.make(collection)
    let explanation: QueryExplanation?
    switch query.verb {
    case .value: explanation = try? q.aggregate(query.aggregate).explain(in: ctx)
    case .distinct(let p): explanation = try? q.distinct(FieldPath(p)).explain(in: ctx)
    default: explanation = try? q.groupBy(query.groupBy.map { FieldPath($0) }, query.aggregate).explain(in: ctx)
    }
    guard let explanation else { return nil }
    return aggregateLine(explanation).contains("index")
}

private func aggregateLine(_ explanation: QueryExplanation) -> String {
    explanation.lines.first { $0.hasPrefix("  aggregate:") } ?? ""
}

// MARK: Random documents and queries

private struct Generator {
    var rng: SeededGenerator

    init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func pick<C: Collection>(_ c: C) -> C.Element { c.randomElement(using: &rng)! }

    /// Group values: strings equal as keys in two forms ("é", "e\u{301}"), numbers equal as keys in two widths
    /// (3 and 3.0, 0 and -0.0), integers beyond 2^53 whose keys are not exact, and a missing field (nil here)
    /// beside a stored null.
    static let groupValues: [DocumentValue?] = [
        nil, .null, .string("Oslo"), .string("Oslo"), .string("Bergen"), .string("Bergen"), .string("Troms\u{F8}"),
        .string("\u{E9}"), .string("e\u{301}"), .string("Z\u{FC}rich"), .string("Zu\u{308}rich"), .string("a\u{0}b"),
        .int(3), .double(3.0), .int(0), .double(-0.0), .double(2.5), .bool(false), .bool(true),
        .array([.int(1), .string("a")]), .int(1 << 60), .int((1 << 60) + 1), .object([("a", .int(1))]),
    ]
    static let secondGroupValues: [DocumentValue?] = [nil, .null, .int(1), .int(2), .double(2.0), .string("a"), .string("b")]
    static let nestedKeys: [DocumentValue?] = [nil, .null, .string("p"), .string("q"), .int(7)]
    static let strings = ["", "a", "B", "Oslo", "\u{E9}", "e\u{301}", "\u{F8}", "\u{65E5}\u{672C}", "a\u{0}b", "zz"]
    static let uuids = [UUID(uuidString: "00000000-0000-0000-0000-000000000001")!,
                        UUID(uuidString: "F0000000-0000-0000-0000-000000000000")!]

    /// Mostly numbers: small integers, fractions in eighths, whole doubles, -0.0, integers and whole doubles beyond
    /// 2^53; and nil, missing, strings, Booleans and arrays among them.
    mutating func x() -> DocumentValue? {
        let big = Int64.random(in: (1 << 53)...(1 << 58), using: &rng) * (chance(0.5) ? 1 : -1)
        switch int(0...99) {
        case 0..<40: return .int(Int64(int(-50...50)))
        case 40..<55: return .double(Double(int(-400...400)) / 8)
        case 55..<62: return .double(Double(int(-1000...1000)))
        case 62..<65: return .double(-0.0)
        case 65..<71: return .int(big)
        case 71..<74: return .double(Double(big))
        case 74..<80: return nil
        case 80..<86: return .null
        case 86..<90: return .string(pick(["7", "x", "\u{E9}"]))
        case 90..<93: return .bool(chance(0.5))
        case 93..<96: return .array([.int(1)])
        default: return .int(Int64(int(-3...3)))
        }
    }

    /// Anything: every kind of value, NaN and infinities too.
    mutating func y() -> DocumentValue? {
        switch int(0...39) {
        case 0, 1: return nil
        case 2, 3: return .null
        case 4: return .bool(false)
        case 5: return .bool(true)
        case 6: return .double(.nan)
        case 7...10: return .int(Int64(int(-20...20)))
        case 11, 12: return .double(Double(int(-80...80)) / 8)
        case 13, 14: return .double(0.1 * Double(int(-30...30)))
        case 15: return .double(pick([Double.infinity, -.infinity, -0.0, 1e300]))
        case 16: return .int(pick([Int64.max, Int64.min + 1, (1 << 53) + 1, -(1 << 53) - 1]))
        case 17, 18: return .date(Date(timeIntervalSinceReferenceDate: Double(int(-5...5)) * 1000))
        case 19...24: return .string(pick(Self.strings))
        case 25, 26: return .bytes(pick([[0, 1], [255], [], [0]]))
        case 27: return .uuid(pick(Self.uuids))
        case 28...30: return .array(pick([[.int(1)], [.int(1), .int(2)], [], [.string("a")], [.double(1.0)]]))
        case 31, 32: return .object(pick([[("a", .int(1))], [("b", .int(0))], [], [("a", .double(1.0))]]))
        default: return .int(Int64(int(-3...3)))
        }
    }

    /// Integers near Int64's limits (never exactly a Double), beyond them as UInt64, and 1e19 as a Double.
    mutating func z() -> DocumentValue? {
        switch int(0...99) {
        case 0..<60: return .int(Int64(int(-100...100)))
        case 60..<70: return .int(Int64.max - Int64(int(0...1000)))
        case 70..<80: return .int(Int64.min + Int64(int(1...1000)))
        case 80..<83: return .uint(UInt64.max - UInt64(int(0...1000)))
        case 83..<86: return .double(pick([1e19, -1e19]))
        case 86..<93: return nil
        default: return .null
        }
    }

    mutating func nested() -> DocumentValue? {
        switch int(0...9) {
        case 0: return nil
        case 1: return .null
        case 2: return .string("flat")
        default:
            var fields: [(String, DocumentValue)] = []
            if let k = pick(Self.nestedKeys) { fields.append(("k", k)) }
            if let v = x() { fields.append(("v", v)) }
            return .object(fields)
        }
    }

    mutating func documents(count: Int) -> [DocumentValue] {
        var serials = Array(1...count).shuffled(using: &rng)
        return (1...count).map { id in
            var fields: [(String, DocumentValue)] = [("id", .int(Int64(id)))]
            func add(_ name: String, _ value: DocumentValue?) { if let value { fields.append((name, value)) } }
            add("g", pick(Self.groupValues))
            add("h", pick(Self.secondGroupValues))
            add("x", x())
            add("y", y())
            add("z", z())
            add("n", nested())
            add("tags", chance(0.8) ? .array((0..<int(0...3)).map { _ in .string(pick(["red", "blue", "\u{E9}"])) })
                                    : (chance(0.5) ? .string("red") : nil))
            let serial = serials.removeLast()
            add("serial", chance(0.6) ? .int(Int64(serial)) : (chance(0.5) ? .null : nil))
            return .object(fields)
        }.shuffled(using: &rng)
    }

    mutating func groupConstant() -> DocumentValue { pick(Self.groupValues) ?? .null }

    mutating func number() -> DocumentValue {
        chance(0.6) ? .int(Int64(int(-40...40))) : .double(Double(int(-320...320)) / 8)
    }

    mutating func filter() -> Expr? {
        switch int(0...16) {
        case 0..<6: return nil
        case 6: return .compare("g", .equal, groupConstant())
        case 7: return .oneOf("g", (0..<int(1...4)).map { _ in groupConstant() })
        case 8: return .compare("x", pick([.greater, .greaterOrEqual, .less, .lessOrEqual]), number())
        case 9:
            let (a, b) = (int(-40...30), int(-30...40))
            return .and([.compare("x", pick([.greater, .greaterOrEqual]), .int(Int64(a))),
                         .compare("x", pick([.less, .lessOrEqual]), .int(Int64(b)))])
        case 10: return .and([.compare("g", .equal, groupConstant()), .compare("x", pick([.greaterOrEqual, .less]), number())])
        case 11: return .and([.compare("g", .equal, groupConstant()), .compare("h", .equal, pick(Self.secondGroupValues) ?? .null)])
        case 12: return .compare("h", .equal, pick(Self.secondGroupValues) ?? .null)
        case 13: return .hasPrefix("g", pick(["O", "B", "Z"]))
        case 14: return .compare("z", pick([.greater, .less]), .int(0))
        case 15: return .or([.compare("g", .equal, groupConstant()), .compare("h", .equal, .int(1))])
        default: return .not(.compare("g", .equal, groupConstant()))
        }
    }

    static let aggregatePaths: [FieldPath] = ["x", "x", "x", "y", "y", "z", "z", "n.v", "g", "h", "tags", "serial", "nothing"]
    static let groupings: [[String]] = [[], [], [], [], ["g"], ["g"], ["g"], ["h"], ["h"], ["g", "h"], ["g", "h"], ["n.k"],
                                        ["h", "g"], ["tags"], ["serial"], ["x"], ["g", "x"]]

    mutating func aggregate() -> Aggregate {
        let path = pick(Self.aggregatePaths)
        switch int(0...4) {
        case 0: return .count
        case 1: return .sum(path)
        case 2: return .average(path)
        case 3: return .min(path)
        default: return .max(path)
        }
    }

    mutating func slice(_ n: Int) -> Range<Int> {
        let a = int(0...(n / 2))
        return a..<(a + int(0...(n / 2)))
    }

    mutating func query(documents n: Int) -> AggregateQuery {
        var q = AggregateQuery()
        q.filter = filter()
        q.excluded = q.filter != nil && chance(0.15)
        if chance(0.2) {
            // An aggregate of a slice, in the query's order.
            if chance(0.75) { q.sort = (pick(["x", "y", "g", "id"]), chance(0.5) ? .forward : .reverse) }
            q.slice = slice(n)
        } else if chance(0.1) {
            q.sort = ("x", .reverse)   // an order without a slice: dropped
        }
        q.groupBy = pick(Self.groupings)
        q.aggregate = aggregate()
        if q.groupBy.isEmpty {
            q.verb = chance(0.2) ? .distinct(pick(["g", "h", "x", "y", "n.k", "tags", "nothing"]))
                                 : .value(convenience: chance(0.4))
        } else {
            switch int(0...9) {
            case 0: q.verb = .countGroups(slice: chance(0.5) ? slice(12) : nil)
            case 1: q.verb = .firstGroup
            default:
                let byValue = AggregateQuery.exact(q.aggregate) && chance(0.4)
                q.verb = .groups(by: byValue ? .value : .key, reverse: chance(0.3), slice: chance(0.3) ? slice(12) : nil,
                                 convenience: chance(0.4))
            }
        }
        return q
    }
}

// MARK: Stores

private enum Stores {
    static let indexes = [
        IndexDefinition(name: "g", kind: .regular, fields: ["g"]),
        IndexDefinition(name: "g_x", kind: .regular, fields: ["g", "x"]),
        IndexDefinition(name: "g_h_x", kind: .regular, fields: ["g", "h", "x"]),
        IndexDefinition(name: "x", kind: .regular, fields: ["x"]),
        IndexDefinition(name: "y", kind: .regular, fields: ["y"]),
        IndexDefinition(name: "h_y", kind: .regular, fields: ["h", "y"]),
        IndexDefinition(name: "z", kind: .regular, fields: ["z"]),
        IndexDefinition(name: "h_z_y", kind: .regular, fields: ["h", "z", "y"]),
        IndexDefinition(name: "nk_nv", kind: .regular, fields: ["n.k", "n.v"]),
        IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]),
        IndexDefinition(name: "serial", kind: .unique, fields: ["serial"]),
    ]

    /// A store whose collection `indexed` holds `documents` with every index above (half made before the documents,
    /// half after), and `plain` the same without any; full scans stay on one thread.
    static func indexedAndPlain(_ documents: [DocumentValue]) async throws -> (DocStore, TemporaryDirectory) {
        var options = DocStore.Options()
        options.scanThreads = 1
        let (store, dir) = try await makeStore(options: options)
        try await store.write { ctx in
            for definition in indexes.prefix(5) { try ctx.createIndex(definition, in: "indexed") }
            for document in documents {
                try ctx.insert(document, into: "indexed")
                try ctx.insert(document, into: "plain")
            }
            for definition in indexes.dropFirst(5) { try ctx.createIndex(definition, in: "indexed") }
        }
        return (store, dir)
    }

    /// A store whose full scans split among three threads from 40 documents each, holding `documents` in `split`.
    static func split(_ documents: [DocumentValue]) async throws -> (DocStore, TemporaryDirectory) {
        var options = DocStore.Options()
        options.scanThreads = 3
        options.documentsPerScanThread = 40
        let (store, dir) = try await makeStore(options: options)
        try await store.write { ctx in
            for document in documents { try ctx.insert(document, into: "split") }
        }
        return (store, dir)
    }
}

/// Records the first few disagreements in full and how many there were.
private func report(_ found: [String], of total: Int, seed: UInt64) {
    guard !found.isEmpty else { return }
    Issue.record(Comment(rawValue: "seed \(seed): \(found.count) of \(total) query runs disagree with the model"))
    for message in found.prefix(6) { Issue.record(Comment(rawValue: message)) }
}

// MARK: Tests

@Suite struct AggregateOracleTests {
    /// The seeds: two fixed ones, or those of `DOCSTORE_AGGREGATE_SEEDS` (comma-separated).
    static let seeds: [UInt64] = randomSeeds(from: "DOCSTORE_AGGREGATE_SEEDS", otherwise: [0xA66_0001, 0xA66_0002])

    @Test(arguments: engineSeeds(AggregateOracleTests.seeds))
    func randomAggregatesAnswerLikeThePlainComputation(seed: UInt64) async throws {
        var generator = Generator(seed: seed)
        let documents = generator.documents(count: 300)
        let queries = (0..<300).map { _ in generator.query(documents: documents.count) }
        let byID = inIDOrder(documents)
        let expected = queries.map { Expectation.of($0, over: byID) }
        let (store, dir) = try await Stores.indexedAndPlain(documents)
        let (splitStore, splitDir) = try await Stores.split(documents)
        defer { _ = (dir, splitDir) }

        let (indexed, plain, viaKeys) = try await store.read { ctx in
            (queries.map { run($0, on: "indexed", in: ctx) }, queries.map { run($0, on: "plain", in: ctx) },
             queries.map { fromIndexKeys($0, on: "indexed", in: ctx) })
        }
        let split = try await splitStore.read { ctx in queries.map { run($0, on: "split", in: ctx) } }

        var found: [String] = []
        for (i, query) in queries.enumerated() {
            for (name, outcome) in [("indexed", indexed[i]), ("plain", plain[i]), ("split", split[i])] {
                if let problem = expected[i].problem(with: outcome) {
                    found.append("seed \(seed), query #\(i) on \(name)\(name == "indexed" && viaKeys[i] == true ? " (from index keys)" : ""):\n  \(query)\n  \(problem)")
                }
            }
        }
        report(found, of: 3 * queries.count, seed: seed)

        // Both ways of computing were taken, often.
        let keyRuns = viaKeys.filter { $0 == true }.count
        let scanRuns = viaKeys.filter { $0 == false }.count
        #expect(keyRuns >= 30, "seed \(seed): only \(keyRuns) of \(queries.count) aggregates came from index keys")
        #expect(scanRuns >= 30, "seed \(seed): only \(scanRuns) of \(queries.count) aggregates read the documents")
        let overflows = expected.filter { if case .overflow = $0 { true } else { false } }.count
        #expect(overflows >= 3 && overflows < queries.count / 3, "seed \(seed): \(overflows) overflows expected")
    }

    /// Inside a write transaction, aggregates see its own changes: new, changed and deleted documents, through the
    /// index keys as through the documents.
    @Test func aggregatesInAWriteSeeItsOwnChanges() async throws {
        let seed: UInt64 = 0xA66_3717
        var generator = Generator(seed: seed)
        let all = generator.documents(count: 260)
        let (stored, added) = (Array(all.prefix(200)), Array(all.dropFirst(200)))
        let queries = (0..<150).map { _ in generator.query(documents: 240) }
        let (store, dir) = try await Stores.indexedAndPlain(stored)
        defer { _ = dir }
        // In the write: 60 documents added, 20 deleted, 20 changed (x set to 1 through the dictionary form).
        let deleted = stored.prefix(20).compactMap { lookup($0, "id") }
        let changed = stored.dropFirst(20).prefix(20).compactMap { lookup($0, "id") }
        var after = Array(stored.dropFirst(40)) + added
        for document in stored.dropFirst(20).prefix(20) { after.append(document.setting(.int(1), at: "x")) }
        let (indexed, plain) = try await store.write { ctx in
            for c in ["indexed", "plain"] {
                for document in added { try ctx.insert(document, into: c) }
                for id in deleted { try ctx.delete(c, id: id) }
                _ = try Query<DocumentValue>(c).include(.oneOf("id", changed)).update(in: ctx, set: ["x": .int(1)])
            }
            return (queries.map { run($0, on: "indexed", in: ctx) }, queries.map { run($0, on: "plain", in: ctx) })
        }
        let byID = inIDOrder(after)
        var found: [String] = []
        for (i, query) in queries.enumerated() {
            let expected = Expectation.of(query, over: byID)
            for (name, outcome) in [("indexed", indexed[i]), ("plain", plain[i])] {
                if let problem = expected.problem(with: outcome) { found.append("query #\(i) on \(name) in the write:\n  \(query)\n  \(problem)") }
            }
        }
        report(found, of: 2 * queries.count, seed: seed)
    }

    /// The index's keys answer where they should, as `explain` says, and give what reading the documents gives.
    @Test func theKeysOfARegularIndexAnswerWhereTheyFit() async throws {
        var generator = Generator(seed: 0xA66_1DE7)
        let documents = generator.documents(count: 240)
        let (store, dir) = try await Stores.indexedAndPlain(documents)
        defer { _ = dir }
        // (query, the index expected to answer from its keys, or nil for a scan of the matches)
        let cases: [(AggregateQuery, String?)] = [
            (AggregateQuery(groupBy: ["g"], aggregate: .count, verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), "keys of index g:"),
            (AggregateQuery(groupBy: ["g"], aggregate: .sum("x"), verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), "keys of index g_x:"),
            (AggregateQuery(groupBy: ["g", "h"], aggregate: .max("x"), verb: .groups(by: .value, reverse: true, slice: nil, convenience: false)), "keys of index g_h_x:"),
            (AggregateQuery(groupBy: ["h"], aggregate: .max("z"), verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), "keys of index h_z_y:"),
            (AggregateQuery(groupBy: ["h"], aggregate: .average("y"), verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), "keys of index h_y:"),
            (AggregateQuery(groupBy: ["n.k"], aggregate: .min("n.v"), verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), "keys of index nk_nv:"),
            (AggregateQuery(aggregate: .min("x")), "first key of index x"),
            (AggregateQuery(aggregate: .max("x")), "first key of index x"),
            (AggregateQuery(aggregate: .max("y")), "first key of index y"),
            (AggregateQuery(aggregate: .min("y")), "first key of index y"),
            (AggregateQuery(aggregate: .sum("x")), "keys of index x:"),
            (AggregateQuery(aggregate: .average("z")), "keys of index z:"),
            (AggregateQuery(verb: .distinct("g")), "keys of index g:"),
            (AggregateQuery(verb: .distinct("y")), "keys of index y:"),
            // A filter the same index answers whole.
            (AggregateQuery(filter: .compare("x", .lessOrEqual, .int(10)), aggregate: .max("x")), "first key of index x"),
            (AggregateQuery(filter: .compare("x", .less, .double(2.5)), aggregate: .max("x")), "first key of index x"),
            (AggregateQuery(filter: .and([.compare("x", .greater, .int(-5)), .compare("x", .less, .int(7))]), aggregate: .max("x")), "first key of index x"),
            (AggregateQuery(filter: .and([.compare("x", .greater, .int(-5)), .compare("x", .less, .int(7))]), aggregate: .min("x")), "first key of index x"),
            (AggregateQuery(filter: .compare("x", .greaterOrEqual, .int(3)), aggregate: .sum("x")), "keys of index x:"),
            // A filter that fixes an index's first fields: the keys past them, in an index that begins with the
            // scan's fields.
            (AggregateQuery(filter: .compare("g", .equal, .string("Oslo")), aggregate: .max("x")), "first key of index g_x past g "),
            (AggregateQuery(filter: .compare("g", .equal, .int(3)), aggregate: .min("x")), "first key of index g_x past g "),
            (AggregateQuery(filter: .compare("g", .equal, .null), aggregate: .min("x")), "first key of index g_x past g "),
            (AggregateQuery(filter: .compare("g", .equal, .string("Bergen")), aggregate: .sum("x")), "keys of index g_x past g:"),
            (AggregateQuery(filter: .oneOf("g", [.string("Oslo")]), aggregate: .average("x")), "keys of index g_x past g:"),
            (AggregateQuery(filter: .compare("g", .equal, .string("Oslo")), groupBy: ["h"], aggregate: .max("x"), verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), "keys of index g_h_x past g:"),
            (AggregateQuery(filter: .and([.compare("g", .equal, .int(3)), .compare("h", .equal, .int(2))]), aggregate: .max("x")), "first key of index g_h_x past g, h "),
            (AggregateQuery(filter: .compare("g", .equal, .string("Bergen")), groupBy: ["h"], aggregate: .count, verb: .groups(by: .value, reverse: true, slice: nil, convenience: false)), "keys of index g_h_x past g:"),
            (AggregateQuery(filter: .and([.compare("h", .equal, .int(1)), .compare("z", .greater, .int(0))]), aggregate: .max("z")), "first key of index h_z_y past h "),
            (AggregateQuery(filter: .and([.compare("h", .equal, .int(1)), .compare("z", .less, .int(3))]), aggregate: .min("z")), "first key of index h_z_y past h "),
            (AggregateQuery(filter: .and([.compare("h", .equal, .int(1)), .compare("z", .notEqual, .null)]), aggregate: .max("z")), "first key of index h_z_y past h "),
            // A count of every match is counted as `count` counts, from the index's entries.
            (AggregateQuery(filter: .compare("z", .greater, .int(0)), aggregate: .count), "access:   index z (index on z)"),
            (AggregateQuery(filter: .oneOf("y", [.string("a"), .int(1), .bool(true), .null]), aggregate: .max("y")), "first key of index y"),
            (AggregateQuery(filter: .oneOf("y", [.string("a"), .int(1), .bool(true), .null]), aggregate: .min("y")), "first key of index y"),
            // Scans: a filter left to check, a multi or unique index, fields in another order, a slice.
            (AggregateQuery(filter: .hasPrefix("g", "O"), groupBy: ["g"], aggregate: .count, verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), nil),
            (AggregateQuery(groupBy: ["tags"], aggregate: .count, verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), nil),
            (AggregateQuery(aggregate: .max("tags")), nil),
            (AggregateQuery(groupBy: ["serial"], aggregate: .count, verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), nil),
            (AggregateQuery(aggregate: .min("serial")), nil),
            (AggregateQuery(groupBy: ["h", "g"], aggregate: .sum("x"), verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), nil),
            (AggregateQuery(groupBy: ["g"], aggregate: .sum("y"), verb: .groups(by: .key, reverse: false, slice: nil, convenience: false)), nil),
            (AggregateQuery(sort: ("x", .forward), slice: 3..<100, aggregate: .sum("x")), nil),
            (AggregateQuery(slice: 0..<50, aggregate: .min("x")), nil),
            // Two fields fixed: the keys past both.
            (AggregateQuery(filter: .and([.compare("g", .equal, .string("Oslo")), .compare("h", .equal, .int(1))]), aggregate: .sum("x")), "keys of index g_h_x past g, h:"),
            // Fixed fields to more than one value, or a next field the index does not hold after them.
            (AggregateQuery(filter: .oneOf("g", [.string("Oslo"), .string("Bergen")]), aggregate: .max("x")), nil),
            (AggregateQuery(filter: .and([.compare("h", .equal, .int(1)), .compare("z", .greater, .int(0))]), aggregate: .max("y")), nil),
        ]
        let queries = cases.map(\.0)
        let (indexed, plain, explanations) = try await store.read { ctx in
            (queries.map { run($0, on: "indexed", in: ctx) }, queries.map { run($0, on: "plain", in: ctx) },
             try queries.map { q -> (String, String) in
                 func explain(_ collection: String) throws -> QueryExplanation {
                     switch q.verb {
                     case .value: try q.make(collection).aggregate(q.aggregate).explain(in: ctx)
                     case .distinct(let p): try q.make(collection).distinct(FieldPath(p)).explain(in: ctx)
                     default: try q.make(collection).groupBy(q.groupBy.map { FieldPath($0) }, q.aggregate).explain(in: ctx)
                     }
                 }
                 return (try explain("indexed").description, aggregateLine(try explain("plain")))
             })
        }
        let byID = inIDOrder(documents)
        for (i, (query, index)) in cases.enumerated() {
            let expected = Expectation.of(query, over: byID)
            #expect(expected.problem(with: indexed[i]) == nil, "\(query) on indexed: \(expected.problem(with: indexed[i]) ?? "")\n\(explanations[i].0)")
            #expect(expected.problem(with: plain[i]) == nil, "\(query) on plain: \(expected.problem(with: plain[i]) ?? "")")
            let (text, plainLine) = explanations[i]
            if let index {
                #expect(text.contains(index), "\(query) should be answered from index keys (\(index)):\n\(text)")
            } else {
                #expect(text.contains("over the matches, reading"), "\(query) should read the matches:\n\(text)")
            }
            if case .value = query.verb, query.aggregate == .count {
                #expect(plainLine.isEmpty, "\(query) on plain is a count: \(plainLine)")
            } else {
                #expect(plainLine.contains("over the matches, reading"), "\(query) on plain: \(plainLine)")
            }
        }
    }

    /// `min` and `max` of every document, read at an end of an index without a plan (`value(in:)`), against the
    /// same request planned (`results(in:)`) and against Swift: over `nil`s at the least end, long strings that
    /// share a long prefix, numbers (untyped, their value read from the document: a key does not say how a number
    /// was stored), and a field whose only index is compound. Over no document, then over documents without a
    /// value, each is `nil`.
    @Test func minAndMaxAtAnIndexEndAnswerAsThePlanAndSwift() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let seed = UInt64.random(in: 0...UInt64.max)
        func check(_ expected: [IndexEnd], _ note: String) async throws {
            let names = expected.compactMap(\.name), levels = expected.compactMap(\.level)
            let ranks = expected.map(\.rank)
            let note = "seed \(seed), \(note)"
            try await store.read { ctx in
                func both<V: Equatable & Sendable>(_ q: Query<V?>, _ swift: V?, _ what: String) throws {
                    let fast = try q.value(in: ctx), planned = try q.results(in: ctx).first ?? nil
                    #expect(fast == swift && planned == swift, "\(note) \(what): \(String(describing: fast)), planned \(String(describing: planned)), Swift \(String(describing: swift))")
                }
                try both(IndexEnd.query().aggregate(.max(\.name)), names.max(), "max(name)")
                try both(IndexEnd.query().aggregate(.min(\.name)), names.min(), "min(name)")
                try both(IndexEnd.query().aggregate(.max(\.level)), levels.max(), "max(level)")
                try both(IndexEnd.query().aggregate(.min(\.level)), levels.min(), "min(level)")
                try both(IndexEnd.query().aggregate(.max(\.rank)), ranks.max(), "max(rank)")
                try both(IndexEnd.query().aggregate(.min(\.rank)), ranks.min(), "min(rank)")
                // Untyped, each as stored: from the key where it is exact, else from the document.
                let untyped = Query<DocumentValue>(IndexEnd.collection)
                let untypedMax = try untyped.aggregate(.max("name")).value(in: ctx)
                #expect(untypedMax == (names.max().map { .string($0) } ?? .null), "\(note) untyped max(name): \(untypedMax)")
                let untypedLevel = try untyped.aggregate(.min("level")).value(in: ctx)
                #expect(untypedLevel == (levels.min().map { .double($0) } ?? .null), "\(note) untyped min(level): \(untypedLevel)")
            }
        }
        try await check([], "no document")
        var rng = SeededGenerator(seed: seed)
        var documents: [IndexEnd] = []
        for id in 0..<200 {
            let long = String(repeating: "p", count: 300) + String(Int.random(in: 0..<1_000_000, using: &rng))
            documents.append(IndexEnd(id: id, name: nil, level: nil, rank: Int.random(in: -50...50, using: &rng)))
            if id == 0 { continue }
            let name: String? = switch Int.random(in: 0..<4, using: &rng) {
            case 0: nil
            case 1: long
            default: "n\(Int.random(in: 0..<1_000, using: &rng))"
            }
            let level: Double? = Bool.random(using: &rng) ? nil : Double(Int.random(in: -30...30, using: &rng)) / 4
            documents[id] = IndexEnd(id: id, name: name, level: level, rank: documents[id].rank)
        }
        try await store.insert(documents[0])
        try await check([documents[0]], "one document without values")
        try await store.insert(contentsOf: Array(documents.dropFirst()))
        try await check(documents, "\(documents.count) documents")
        try await IndexEnd.include(#Predicate { $0.id > 100 }).delete(in: store)
        try await check(Array(documents.prefix(101)), "after deleting half")
    }

    /// Untyped `min` and `max` read at an index end answer as the same request planned and as a scan of the same
    /// documents in a collection without indexes, value for value (kind, sign and NaN included), over what keys
    /// make hard: `5` and `5.0` (one key, the first document's value) at both ends, `0`, `0.0` and `-0.0`, NaN, integers past a
    /// `Double`'s precision, kinds mixed in one field, strings that are equal only canonically, a NUL inside a
    /// string, `nil` and missing values at the least end, `nil` first parts of a compound index, and two indexes
    /// that begin with the same field. On a file the answer is read without a plan: the collection's plan cache
    /// gains nothing. The same with a filter that fixes a compound index's first field: the keys past it.
    @Test(arguments: engineSeeds([UInt64(5), 6, 7]))
    func untypedExtremesAtAnIndexEndAnswerAsAScan(seed: UInt64) async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: seed)
        let (indexed, plain) = ("ends", "ends_plain")
        try await store.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "v_w", kind: .regular, fields: ["v", "w"]), in: indexed)
            try ctx.createIndex(IndexDefinition(name: "v", kind: .regular, fields: ["v"]), in: indexed)
            try ctx.createIndex(IndexDefinition(name: "w_v", kind: .regular, fields: ["w", "v"]), in: indexed)
            try ctx.createIndex(IndexDefinition(name: "s", kind: .regular, fields: ["s"]), in: indexed)
            try ctx.createIndex(IndexDefinition(name: "d_w", kind: .regular, fields: ["d", "w"]), in: indexed)
            try ctx.createIndex(IndexDefinition(name: "d", kind: .regular, fields: ["d"]), in: indexed)
        }
        let numbers: [DocumentValue?] = [nil, .null, .int(5), .double(5.0), .int(-3), .double(-3.0), .int(0),
                                         .double(0.0), .double(-0.0), .double(.nan), .double(2.5), .int(.max),
                                         .double(9.223372036854775807e18), .int(.max - 1), .double(-1e300), .string("5"),
                                         .bool(true)]
        let strings: [DocumentValue?] = [nil, .null, .string("\u{E9}"), .string("e\u{301}"), .string("z"), .string("Z"),
                                         .string("\u{DF}"), .string("日本"), .string(""), .string("a\u{0}b"), .string("a")]
        let smalls: [DocumentValue?] = [nil, .null, .int(-2), .int(0), .int(2), .double(2.0)]
        // Equal numbers of both kinds at each end, and zeros of both signs.
        let ties: [DocumentValue?] = [nil, .int(5), .double(5.0), .int(-3), .double(-3.0), .double(-0.0), .int(0), .double(0.0)]
        func document(_ id: Int, _ fields: [(String, DocumentValue?)]) -> DocumentValue {
            .object([("id", .int(Int64(id)))] + fields.compactMap { name, value in value.map { (name, $0) } })
        }
        func insert(_ documents: [DocumentValue]) async throws {
            try await store.write { ctx in
                for d in documents { try ctx.insert(d, into: indexed); try ctx.insert(d, into: plain) }
            }
        }
        func check(_ note: String) async throws {
            let problems: [String] = try await store.read { ctx in
                let plans = { try ctx.scope.handle(named: indexed)?.plans.count ?? 0 }
                var problems: [String] = []
                for field in ["v", "w", "s", "d"] {
                    for aggregate in [Aggregate.min(FieldPath(field)), .max(FieldPath(field))] {
                        let before = try plans()
                        let fast = try Query<DocumentValue>(indexed).aggregate(aggregate).value(in: ctx)
                        if !engineIsServer, try plans() != before {
                            problems.append("\(note) \(aggregate) was planned")
                        }
                        let planned = try Query<DocumentValue>(indexed).aggregate(aggregate).results(in: ctx).first
                        let scanned = try Query<DocumentValue>(plain).aggregate(aggregate).value(in: ctx)
                        let (a, b, c) = (String(reflecting: fast), String(reflecting: planned ?? .null),
                                         String(reflecting: scanned))
                        if a != b || a != c {
                            problems.append("\(note) \(aggregate): at the end \(a), planned \(b), scanned \(c)")
                        }
                    }
                }
                // Past a fixed field: the keys of w_v past w, of d_w past d (planned; no end to read without a plan).
                for (fixed, value, field) in [("w", DocumentValue.int(2), "v"), ("w", .null, "v"), ("d", .int(5), "w"),
                                              ("d", .double(-0.0), "w")] {
                    for aggregate in [Aggregate.min(FieldPath(field)), .max(FieldPath(field))] {
                        let filter = Filter.compare(FieldPath(fixed), .equal, value)
                        let planned = try Query<DocumentValue>(indexed).include(filter).aggregate(aggregate).value(in: ctx)
                        let scanned = try Query<DocumentValue>(plain).include(filter).aggregate(aggregate).value(in: ctx)
                        let (b, c) = (String(reflecting: planned), String(reflecting: scanned))
                        if b != c { problems.append("\(note) \(fixed) == \(value) \(aggregate): planned \(b), scanned \(c)") }
                    }
                }
                return problems
            }
            #expect(problems.isEmpty, "seed \(seed): \(problems.joined(separator: "\n"))")
        }
        try await check("no document")
        try await insert([document(0, []), document(1, [("v", .null), ("w", .null), ("s", .null)])])
        try await check("documents without values")
        var documents: [DocumentValue] = []
        for id in 2..<300 {
            documents.append(document(id, [("v", numbers.randomElement(using: &rng)!),
                                           ("w", smalls.randomElement(using: &rng)!),
                                           ("s", strings.randomElement(using: &rng)!),
                                           ("d", ties.randomElement(using: &rng)!)]))
        }
        try await insert(documents)
        try await check("\(documents.count + 2) documents")
        for collection in [indexed, plain] {
            _ = try await Query<DocumentValue>(collection).include(.compare("id", .greaterOrEqual, .int(150))).delete(in: store)
        }
        try await check("after deleting half")
        for collection in [indexed, plain] {
            _ = try await Query<DocumentValue>(collection).include(.compare("id", .greaterOrEqual, .int(2))).delete(in: store)
        }
        try await check("emptied of values")
        for collection in [indexed, plain] { _ = try await Query<DocumentValue>(collection).delete(in: store) }
        try await check("emptied")
    }

    /// Over no document at all (a missing collection, a filter that is always false, one that an index finds
    /// nothing for): a count and a sum of 0, no average, min, max, distinct value or group.
    /// Typed answers take numbers from an index's keys; the same request made untyped answers each number as
    /// stored (an integer or a `Double`, which share a key), and `-0.0` keeps its sign either way.
    @Test func typedAnswersFromKeysAndUntypedAnswersAsStored() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: [SignedReading(id: 1, value: 3.0), SignedReading(id: 2, value: -0.0),
                                            SignedReading(id: 3, value: 3.0), SignedReading(id: 4, value: 2.5)])
        #expect(try await SignedReading.query().aggregate(.max(\.value)).value(in: store) == 3.0)
        let least = try await SignedReading.query().aggregate(.min(\.value)).value(in: store)
        #expect(least == 0 && least?.sign == .minus, "\(String(describing: least))")
        #expect(try await SignedReading.query().groupBy(\.value).results(in: store).map(\.key) == [-0.0, 2.5, 3.0])
        let rows = try await SignedReading.query().groupBy(\.value).decoded(as: DocumentValue.self).results(in: store)
        #expect(rows.map { $0[path: "value"] } == [.double(-0.0), .double(2.5), .double(3.0)])
        let untyped = try await Query<DocumentValue>("signed_readings").groupBy("value").results(in: store)
        #expect(untyped.map(\.key) == [[.double(-0.0)], [.double(2.5)], [.double(3.0)]])
    }

    /// Fractions add in id order, whatever order the index that found them walks in, so that a sum is the same to
    /// the last bit on either engine (a store on a server reads the documents with the index's entries).
    @Test func fractionsFoundThroughAnIndexAddInIDOrder() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        // `k` falls as the id grows: the index walks the documents in the reverse of id order.
        let x = { @Sendable (id: Int) in Double(id) * 0.37 + (id % 5 == 0 ? 1e12 + 0.5 : 0.001) }
        try await store.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "k", kind: .regular, fields: ["k"]), in: "fractions")
            for id in 1...1_200 {
                try ctx.insert(["id": .int(Int64(id)), "k": .int(Int64(1_000 - id)), "g": .int(Int64(id % 3)), "x": .double(x(id))],
                               into: "fractions")
            }
        }
        // The sum as documented: whole numbers exactly, the others as Doubles in the order given.
        func sum(_ ids: [Int]) -> DocumentValue {
            let whole = ids.map(x).filter { $0 == $0.rounded() }.reduce(0, +)
            return .double(whole + ids.map(x).filter { $0 != $0.rounded() }.reduce(0.0, +))
        }
        let found = Array(1...100)   // k >= 900
        #expect(sum(found) != sum(found.reversed()), "the sum does not depend on the order")
        let q = Query<DocumentValue>("fractions").include(.compare("k", .greaterOrEqual, .int(900)))
        let (total, groups, plan) = try await store.read { ctx in
            (try q.aggregate(.sum("x")).value(in: ctx), try q.groupBy(["g"], .sum("x")).results(in: ctx),
             try q.aggregate(.sum("x")).explain(in: ctx))
        }
        #expect(plan.lines.contains { $0.contains("index k") }, "\(plan.lines)")
        #expect(total == sum(found))
        #expect(groups.map(\.value) == (0..<3).map { g in sum(found.filter { $0 % 3 == g }) })
    }

    @Test func aggregatesOfNothing() async throws {
        var generator = Generator(seed: 0xA66_0000)
        let (store, dir) = try await Stores.indexedAndPlain(generator.documents(count: 50))
        defer { _ = dir }
        let queries: [Query<DocumentValue>] = [
            Query<DocumentValue>("nowhere"), Query<DocumentValue>("indexed").include(.constant(false)),
            Query<DocumentValue>("indexed").include(.compare("x", .greater, .int(1 << 62))),
            Query<DocumentValue>("plain").include(.compare("x", .greater, .int(1 << 62))),
            Query<DocumentValue>("indexed").include(.compare("g", .equal, .string("nowhere"))),
            Query<DocumentValue>("plain")[60..<70],
        ]
        for q in queries {
            let answers = try await store.read { ctx in
                [try q.aggregate(.count).value(in: ctx), try q.aggregate(.sum("x")).value(in: ctx), try q.aggregate(.average("x")).value(in: ctx),
                 try q.aggregate(.min("x")).value(in: ctx), try q.aggregate(.max("y")).value(in: ctx)]
            }
            #expect(answers == [.int(0), .int(0), .null, .null, .null], "\(q)")
            let (average, min, distinct, groups, groupCount) = try await store.read { ctx in
                (try q.aggregate(.average("x")).value(in: ctx), try q.aggregate(.min("x")).value(in: ctx), try q.distinct("g").results(in: ctx),
                 try q.groupBy(["g"], .sum("x")).results(in: ctx), try q.groupBy("g", "h").count(in: ctx))
            }
            #expect(average == .null && min == .null && distinct.isEmpty && groups.isEmpty && groupCount == 0, "\(q)")
        }
    }

    /// Values equal as keys but stored differently (an `Int` and a `Double`, a string in two normal forms): the
    /// index's walks, ascending for `min` and descending for `max`, give the first document's, as the scan does.
    @Test func equalKeysGiveTheFirstDocumentsValueInEveryDirection() async throws {
        let pairs: [(DocumentValue, DocumentValue)] = [(.int(5), .double(5)), (.double(5), .int(5)),
                                                       (.string("\u{E9}"), .string("e\u{301}"))]
        for (first, second) in pairs {
            let documents: [DocumentValue] = [.object([("id", .int(1)), ("x", first)]),
                                              .object([("id", .int(2)), ("x", second)])]
            let (store, dir) = try await Stores.indexedAndPlain(documents)
            defer { _ = dir }
            for c in ["indexed", "plain"] {
                let (least, greatest) = try await store.read { ctx in
                    (try Query<DocumentValue>(c).aggregate(.min("x")).value(in: ctx), try Query<DocumentValue>(c).aggregate(.max("x")).value(in: ctx))
                }
                #expect(least == first && greatest == first, "min and max of \(first), \(second) on \(c)")
            }
            let plan = try await store.read { try Query<DocumentValue>("indexed").aggregate(.max("x")).explain(in: $0) }
            #expect(plan.description.contains("first key of index x"), "\(plan)")
        }
    }

    /// A whole Double within Int64's range adds as an integer: the sum of 9.21e18 (a Double) is the integer
    /// 9,210,000,000,000,000,000, and of -2^63 (a Double) is Int64.min; two of them overflow.
    @Test func wholeDoublesNearTheLimitsOfInt64SumAsIntegers() async throws {
        let values: [Double] = [9.21e18, -0x1p63, 0x1p63 - 1024]
        let (store, dir) = try await Stores.indexedAndPlain([])
        defer { _ = dir }
        for (i, v) in values.enumerated() {
            try await store.write { ctx in
                for c in ["indexed", "plain"] {
                    _ = try Query<DocumentValue>(c).delete(in: ctx)
                    try ctx.insert(.object([("id", .int(Int64(i))), ("x", .double(v))]), into: c)
                }
            }
            for c in ["indexed", "plain"] {
                let sum = try await store.read { try Query<DocumentValue>(c).aggregate(.sum("x")).value(in: $0) }
                #expect(sum == .int(Int64(v)), "the sum of \(v) (a Double) on \(c)")
            }
            try await store.write { ctx in
                for c in ["indexed", "plain"] { try ctx.insert(.object([("id", .int(Int64(i) + 100)), ("x", .double(v))]), into: c) }
            }
            for c in ["indexed", "plain"] {
                await expectError(.overflow) { _ = try await store.read { try Query<DocumentValue>(c).aggregate(.sum("x")).value(in: $0) } }
            }
        }
    }

    /// An integer near Int64's limits that is exactly a Double (Int64.min, 2^63 - 1024) adds exactly whether it is
    /// read from the document or from an index key: the index's answer must be the scan's.
    @Test func integersThatAreExactlyDoublesSumAsIntegersFromIndexKeys() async throws {
        let values: [Int64] = [Int64.min, Int64.max - 1023, Int64.min + 1024]
        let (store, dir) = try await Stores.indexedAndPlain([])
        defer { _ = dir }
        for (i, v) in values.enumerated() {
            try await store.write { ctx in
                for c in ["indexed", "plain"] {
                    _ = try Query<DocumentValue>(c).delete(in: ctx)
                    try ctx.insert(.object([("id", .int(Int64(i))), ("g", .string("a")), ("x", .int(v))]), into: c)
                    try ctx.insert(.object([("id", .int(Int64(i) + 100)), ("g", .string("b")), ("x", .int(1))]), into: c)
                }
            }
            let (indexed, plain, grouped, explanation) = try await store.read { ctx in
                (try Query<DocumentValue>("indexed").aggregate(.sum("x")).value(in: ctx), try Query<DocumentValue>("plain").aggregate(.sum("x")).value(in: ctx),
                 try Query<DocumentValue>("indexed").groupBy(["g"], .sum("x")).results(in: ctx).map(\.value),
                 try Query<DocumentValue>("indexed").aggregate(.sum("x")).explain(in: ctx))
            }
            #expect(aggregateLine(explanation).contains("keys of index x"), "\(explanation)")
            #expect(plain == .int(v + 1), "the sum of \(v) and 1, read from the documents")
            #expect(indexed == .int(v + 1), "the sum of \(v) and 1, from the keys of index x: \(indexed)")
            #expect(grouped == [.int(v), .int(1)], "the sums of \(v) and of 1 per group, from the keys of index g_x: \(grouped)")
        }
    }

    /// Typed queries: the aggregates decode as the field's type, the groups' keys too; indexes and scans agree.
    @Test func typedAggregatesAndGroupsAnswerLikeSwift() async throws {
        let seed: UInt64 = 0xA66_7E9E
        var rng = SeededGenerator(seed: seed)
        let cities: [String?] = [nil, "Oslo", "Bergen", "Troms\u{F8}", "\u{E9}", "e\u{301}", "Z\u{FC}rich", "Zu\u{308}rich",
                                 "\u{C5}lesund", "A\u{30A}lesund"]
        let rows = (1...260).map { id in
            SaleRow(id: id, city: cities.randomElement(using: &rng)!, team: Int.random(in: 1...5, using: &rng),
                    units: Bool.random(using: &rng) || Bool.random(using: &rng) ? Int.random(in: -20...200, using: &rng) : nil,
                    price: Double(Int.random(in: -400...4000, using: &rng)) / 8,
                    big: Int64.max - Int64.random(in: 0...1000, using: &rng))
        }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: rows.map(IndexedSale.init))
        try await store.insert(contentsOf: rows.map(PlainSale.init))

        let got = try await store.read { ctx in
            (indexed: try TypedAnswers(IndexedSale.self, teamFilter: 3, in: ctx), plain: try TypedAnswers(PlainSale.self, teamFilter: 3, in: ctx))
        }
        let want = TypedAnswers(rows: rows, teamFilter: 3)
        for (name, answers) in [("indexed", got.indexed), ("plain", got.plain)] {
            for problem in want.problems(answers) { Issue.record(Comment(rawValue: "seed \(seed), \(name): \(problem)")) }
        }
        // The indexed collection answers from its keys.
        let explanations = try await store.read { ctx in
            [try IndexedSale.query().groupBy(\.team, .sum(\.units)).explain(in: ctx),
             try IndexedSale.include(#Predicate { $0.team == 3 }).groupBy(\.team, .sum(\.units)).explain(in: ctx),
             try IndexedSale.query().groupBy(\.city).explain(in: ctx),
             try IndexedSale.query().aggregate(.max(\.units)).explain(in: ctx)]
        }
        for e in explanations { #expect(aggregateLine(e).contains("index"), "\(e)") }
        // A sum of Int64s that does not fit: an error, typed or untyped, from the keys or the documents.
        await expectError(.overflow) { _ = try await IndexedSale.query().aggregate(.sum(\.big)).value(in: store) }
        await expectError(.overflow) { _ = try await PlainSale.query().aggregate(.sum(\.big)).value(in: store) }
        await expectError(.overflow) { _ = try await IndexedSale.query().groupBy(\.team, .sum(\.big)).results(in: store) }
        await expectError(.overflow) { _ = try await PlainSale.query().groupBy(\.team, .sum(\.big)).results(in: store) }
        let one = try await IndexedSale.include(#Predicate { $0.id == 1 }).aggregate(.sum(\.big)).value(in: store)
        #expect(one == rows[0].big)
    }

    /// A filter that needs the decoded model (a computed property) leaves its matches to the scan, on one thread or
    /// split among threads: the aggregates are those of exactly the matches.
    @Test func aggregatesOfAFilterOnTheDecodedModel() async throws {
        var rng = SeededGenerator(seed: 0xA66_DEC0)
        let people = (0..<300).map { i in
            Person(name: String(repeating: "n", count: Int.random(in: 1...6, using: &rng)), age: Int.random(in: 0...90, using: &rng),
                   city: ["Oslo", "Bergen", "\u{E9}", "e\u{301}"].randomElement(using: &rng)!, email: "p\(i)@x")
        }
        var options = DocStore.Options()
        options.documentsPerScanThread = 40
        for threads in [1, 3] {
            options.scanThreads = threads
            let (store, dir) = try await makeStore(options: options)
            defer { _ = dir }
            try await store.insert(contentsOf: people)
            let q = Person.include(#Predicate { $0.nameLength > 2 })
            let matching = people.filter { $0.nameLength > 2 }
            let (sum, max, perCity, distinct) = try await store.read { ctx in
                (try q.aggregate(.sum(\.age)).value(in: ctx), try q.aggregate(.max(\.age)).value(in: ctx), try q.groupBy(\.city).results(in: ctx),
                 try q.distinct(\.city).results(in: ctx))
            }
            #expect(sum == matching.map(\.age).reduce(0, +), "\(threads) threads")
            #expect(max == matching.map(\.age).max(), "\(threads) threads")
            #expect(perCity.map(\.key) == ["Bergen", "Oslo", "\u{E9}"] && perCity.map(\.value) == [
                matching.filter { $0.city == "Bergen" }.count, matching.filter { $0.city == "Oslo" }.count,
                matching.filter { $0.city == "\u{E9}" }.count,
            ], "\(threads) threads: \(perCity)")
            #expect(distinct == ["Bergen", "Oslo", "\u{E9}"], "\(threads) threads")
        }
    }

    /// `select` keeps the named fields of each result, in the query's order; missing ones are left out.
    @Test func selectKeepsTheNamedFieldsOfEachResultInOrder() async throws {
        let seed: UInt64 = 0xA66_5E1E
        var generator = Generator(seed: seed)
        let documents = generator.documents(count: 200)
        let (store, dir) = try await Stores.indexedAndPlain(documents)
        defer { _ = dir }
        let pathChoices: [String] = ["id", "g", "h", "x", "n", "n.k", "n.v", "n.k.deep", "tags", "nothing", "y", "serial"]
        var cases: [(AggregateQuery, [String])] = []
        for _ in 0..<150 {
            var q = generator.query(documents: documents.count)
            q.verb = .value(convenience: false)
            let paths = (0..<generator.int(0...4)).map { _ in generator.pick(pathChoices) }
            cases.append((q, paths))
        }
        let fixed = cases
        let got = try await store.read { ctx in
            try fixed.map { entry -> ([DocumentValue], [DocumentValue], DocumentValue?) in
                let paths = entry.1.map { FieldPath($0) }
                return (try entry.0.make("indexed").select(paths).results(in: ctx),
                        try entry.0.make("plain").select(paths).results(in: ctx),
                        try entry.0.make("plain").select(paths).first(in: ctx))
            }
        }
        let byID = inIDOrder(documents)
        var found: [String] = []
        for (i, (q, paths)) in cases.enumerated() {
            let matches = q.matches(byID)
            let want = matches.map { document -> DocumentValue in
                var out = DocumentValue.object([DocumentValue.Field]())
                for path in paths {
                    if let v = lookup(document, path) { out = out.setting(v, at: FieldPath(path)) }
                }
                return normalized(out)
            }
            for (name, results) in [("indexed", got[i].0), ("plain", got[i].1)]
            where results.count != want.count || !zip(results, want).allSatisfy({ deepSame(normalized($0), $1) }) {
                found.append("query #\(i) on \(name): \(q.make(name)).select(\(paths)): got \(results.prefix(5).map { $0.json() }), "
                    + "expected \(want.prefix(5).map { $0.json() }) (\(results.count) and \(want.count) results)")
            }
            let firstAgrees: Bool
            switch (got[i].2, want.first) {
            case (nil, nil): firstAgrees = true
            case (let a?, let b?): firstAgrees = deepSame(normalized(a), b)
            default: firstAgrees = false
            }
            if !firstAgrees {
                found.append("query #\(i): first() gave \(got[i].2?.json() ?? "nil")")
            }
        }
        report(found, of: 3 * cases.count, seed: seed)
    }

    /// `select` on a typed query decodes a smaller type.
    @Test func selectDecodesASmallerType() async throws {
        var rows: [SaleRow] = []
        for id in 1...40 {
            let city: String? = id % 3 == 0 ? nil : (id % 2 == 0 ? "Oslo" : "Troms\u{F8}")
            let units: Int? = id % 5 == 0 ? nil : id
            rows.append(SaleRow(id: id, city: city, team: id % 4, units: units, price: Double(id) / 4, big: Int64(id)))
        }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: rows.map(IndexedSale.init))
        let picked = try await IndexedSale.include(#Predicate { $0.team == 1 }).sortBy(\.price, order: .reverse)
            .select(\.city, \.units).decoded(as: CityAndUnits.self).results(in: store)
        let ofTeam: [SaleRow] = rows.filter { $0.team == 1 }.sorted { $0.price > $1.price }
        let want: [CityAndUnits] = ofTeam.map { CityAndUnits(city: $0.city, units: $0.units) }
        #expect(picked == want)
        let raw = try await IndexedSale.include(#Predicate { $0.team == 1 }).select(\.city, \.units).results(in: store)
        #expect(raw.count == want.count)
        #expect(raw.allSatisfy { value in
            guard case .object(let fields) = value else { return false }
            return fields.allSatisfy { ["city", "units"].contains($0.name) }
        }, "\(raw.map { $0.json() })")
        // Fields that do not decode as the smaller type: an error naming them.
        await expectError(.decodingFailed, mentions: ["price"]) {
            _ = try await IndexedSale.query().select(\.price).decoded(as: CityAndTeam.self).results(in: store)
        }
    }
}

// MARK: Typed models

private struct SaleRow: Sendable {
    var id: Int
    var city: String?
    var team: Int
    var units: Int?
    var price: Double
    var big: Int64
}

private protocol SaleModel: Document, Equatable where ID == Int {
    var id: Int { get }
    var city: String? { get }
    var team: Int { get }
    var units: Int? { get }
    var price: Double { get }
    var big: Int64 { get }
}

private struct IndexedSale: SaleModel {
    var id: Int
    var city: String?
    var team: Int
    var units: Int?
    var price: Double
    var big: Int64
    static let collection = "sales_indexed"
    static let indexes: [IndexSpec<IndexedSale>] = [
        .index("city", \.city),
        .index("team_units", \.team, \.units),
        .index("city_price", \.city, \.price),
        .index("units", \.units),
        .index("big", \.big),
        .index("team_big", \.team, \.big),
    ]
    init(_ r: SaleRow) { (id, city, team, units, price, big) = (r.id, r.city, r.team, r.units, r.price, r.big) }
}

private struct PlainSale: SaleModel {
    var id: Int
    var city: String?
    var team: Int
    var units: Int?
    var price: Double
    var big: Int64
    static let collection = "sales_plain"
    init(_ r: SaleRow) { (id, city, team, units, price, big) = (r.id, r.city, r.team, r.units, r.price, r.big) }
}

private struct CityAndUnits: Codable, Equatable, Sendable {
    var city: String?
    var units: Int?
}

private struct CityAndTeam: Codable, Equatable, Sendable {
    var city: String?
    var team: Int
}

/// The answers of the typed verbs, from a store or from Swift's own computation over the rows.
private struct TypedAnswers: Sendable {
    var unitsSum = 0
    var priceSum = 0.0
    var unitsAverage: Double?
    var priceAverage: Double?
    var minCity: String?
    var maxCity: String?
    var minUnits: Int?
    var maxPrice: Double?
    var cities: [String] = []
    var perCity: [Group<String?, Int>] = []
    var unitsPerTeam: [Group<Int, Int>] = []
    var pricePerTeam: [Group<Int, Double?>] = []
    var maxUnitsPerCity: [Group<String?, Int?>] = []
    var minPricePerCity: [Group<String?, Double?>] = []
    var topCities: [Group<String?, Int>] = []
    var unitsOfTeam: [Group<Int, Int>] = []

    init<T: SaleModel>(_: T.Type, teamFilter: Int, in ctx: ReadContext) throws {
        let q = T.query()
        unitsSum = try q.aggregate(.sum(\.units)).value(in: ctx)
        priceSum = try q.aggregate(.sum(\.price)).value(in: ctx)
        unitsAverage = try q.aggregate(.average(\.units)).value(in: ctx)
        priceAverage = try q.aggregate(.average(\.price)).value(in: ctx)
        minCity = try q.aggregate(.min(\.city)).value(in: ctx)
        maxCity = try q.aggregate(.max(\.city)).value(in: ctx)
        minUnits = try q.aggregate(.min(\.units)).value(in: ctx)
        maxPrice = try q.aggregate(.max(\.price)).value(in: ctx)
        cities = try q.distinct(\.city).results(in: ctx)
        perCity = try q.groupBy(\.city).results(in: ctx)
        unitsPerTeam = try q.groupBy(\.team, .sum(\.units)).results(in: ctx)
        pricePerTeam = try q.groupBy(\.team, .average(\.price)).results(in: ctx)
        maxUnitsPerCity = try q.groupBy(\.city, .max(\.units)).results(in: ctx)
        minPricePerCity = try q.groupBy(\.city, .min(\.price)).results(in: ctx)
        topCities = try q.groupBy(\.city).sortBy(.value, order: .reverse)[0..<3].results(in: ctx)
        unitsOfTeam = try T.include(#Predicate<T> { $0.team == teamFilter }).groupBy(\.team, .sum(\.units)).results(in: ctx)
    }

    init(rows: [SaleRow], teamFilter: Int) {
        let units = rows.compactMap(\.units)
        unitsSum = units.reduce(0, +)
        priceSum = rows.map(\.price).reduce(0, +)
        unitsAverage = units.isEmpty ? nil : Double(unitsSum) / Double(units.count)
        priceAverage = rows.isEmpty ? nil : priceSum / Double(rows.count)
        let named = rows.compactMap(\.city)
        minCity = named.min()
        maxCity = named.max()
        minUnits = units.min()
        maxPrice = rows.map(\.price).max()
        cities = named.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }.sorted()
        // Keys in key order: nil first, then as Swift orders strings (canonically equal ones are one key).
        func cityOrder(_ a: String?, _ b: String?) -> Bool {
            switch (a, b) {
            case (nil, nil): return false
            case (nil, _): return true
            case (_, nil): return false
            case (let x?, let y?): return x < y
            }
        }
        var cityKeys: [String?] = []
        for row in rows where !cityKeys.contains(row.city) { cityKeys.append(row.city) }
        cityKeys.sort(by: cityOrder)
        let teams = Set(rows.map(\.team)).sorted()
        perCity = cityKeys.map { c in Group(key: c, value: rows.filter { $0.city == c }.count) }
        unitsPerTeam = teams.map { t in Group(key: t, value: rows.filter { $0.team == t }.compactMap(\.units).reduce(0, +)) }
        pricePerTeam = teams.map { t in
            let prices = rows.filter { $0.team == t }.map(\.price)
            return Group(key: t, value: prices.isEmpty ? nil : prices.reduce(0, +) / Double(prices.count))
        }
        maxUnitsPerCity = cityKeys.map { c in Group(key: c, value: rows.filter { $0.city == c }.compactMap(\.units).max()) }
        minPricePerCity = cityKeys.map { c in Group(key: c, value: rows.filter { $0.city == c }.map(\.price).min()) }
        topCities = Array(perCity.enumerated().sorted { a, b in
            a.element.value != b.element.value ? a.element.value > b.element.value : a.offset < b.offset
        }.map(\.element).prefix(3))
        unitsOfTeam = unitsPerTeam.filter { $0.key == teamFilter }
    }

    func problems(_ other: TypedAnswers) -> [String] {
        var out: [String] = []
        func check<V: Equatable>(_ name: String, _ mine: V, _ theirs: V) {
            if mine != theirs { out.append("\(name): expected \(mine), got \(theirs)") }
        }
        func close(_ a: Double?, _ b: Double?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            return abs(a - b) <= 1e-9 * max(1, abs(a))
        }
        check("sum(units)", unitsSum, other.unitsSum)
        if !close(priceSum, other.priceSum) { out.append("sum(price): expected \(priceSum), got \(other.priceSum)") }
        if !close(unitsAverage, other.unitsAverage) { out.append("average(units): expected \(String(describing: unitsAverage)), got \(String(describing: other.unitsAverage))") }
        if !close(priceAverage, other.priceAverage) { out.append("average(price): expected \(String(describing: priceAverage)), got \(String(describing: other.priceAverage))") }
        check("min(city)", minCity, other.minCity)
        check("max(city)", maxCity, other.maxCity)
        check("min(units)", minUnits, other.minUnits)
        check("max(price)", maxPrice, other.maxPrice)
        check("distinct(city)", cities, other.cities)
        check("groupBy(city).count", perCity, other.perCity)
        check("groupBy(team).sum(units)", unitsPerTeam, other.unitsPerTeam)
        if pricePerTeam.map(\.key) != other.pricePerTeam.map(\.key)
            || !zip(pricePerTeam, other.pricePerTeam).allSatisfy({ close($0.value, $1.value) }) {
            out.append("groupBy(team).average(price): expected \(pricePerTeam), got \(other.pricePerTeam)")
        }
        check("groupBy(city).max(units)", maxUnitsPerCity, other.maxUnitsPerCity)
        check("groupBy(city).min(price)", minPricePerCity, other.minPricePerCity)
        check("groupBy(city).count sorted by value, reversed, [0..<3]", topCities, other.topCities)
        check("include(team == 3).groupBy(team).sum(units)", unitsOfTeam, other.unitsOfTeam)
        return out
    }
}

/// A document with a `Double` field under an index, for answers taken from its keys.
struct SignedReading: Document, Equatable {
    var id: Int
    var value: Double
    static let collection = "signed_readings"
    static let indexes: [IndexSpec<SignedReading>] = [.index("value", \.value)]
}

/// A model whose `min` and `max` are read at an end of an index: `rank`'s only index is compound.
struct IndexEnd: Document, Equatable {
    var id: Int
    var name: String?
    var level: Double?
    var rank: Int
    static let collection = "index_ends"
    static let indexes: [IndexSpec<IndexEnd>] = [.index("name", \.name), .index("level", \.level),
                                                 .index("rank_level", \.rank, \.level)]
}
