import Foundation
import Testing
@testable import DocStore

// Untyped queries (`Query<DocumentValue>` with `Filter`s) against a plain in-memory model of their semantics, written out
// here independently of the engine: random documents, random filters, sorts, reversals and slices, run on a
// collection with indexes and on one without, both held to the same answer.
//
// The model, from the documentation of `Filter` and the key order:
// - a missing field is `nil`, the same as a stored `null`;
// - numbers compare by value whether stored as integers or doubles;
// - strings compare by Unicode scalars (every string generated here is in composed form, and no character of it is
//   more than one scalar, so scalar order, character order and canonical order agree);
// - an ordering comparison between values of different kinds, or with `nil`, is false; `==` between different
//   kinds is false and `!=` true; `nil == nil` holds and `nil != nil` does not;
// - sorting puts `nil` first, then booleans, numbers, strings, arrays, objects; ties come in id order.
// NaN is never generated.

// MARK: The model

/// Where a value's kind sorts, and which values compare with each other at all.
private func kindRank(_ value: DocumentValue) -> Int {
    switch value {
    case .null: 0
    case .bool: 1
    case .int, .uint, .double: 2
    case .date: 3
    case .string: 4
    case .bytes: 5
    case .uuid: 6
    case .array: 7
    case .object: 8
    }
}

private func numberValue(_ value: DocumentValue) -> Double? {
    switch value {
    case .int(let i): Double(i)
    case .uint(let u): Double(u)
    case .double(let d): d
    default: nil
    }
}

private func sign<V: Comparable>(_ a: V, _ b: V) -> Int { a < b ? -1 : (b < a ? 1 : 0) }

/// Two strings by their Unicode scalars, a prefix first.
private func scalarOrder(_ a: String, _ b: String) -> Int {
    var x = a.unicodeScalars.makeIterator()
    var y = b.unicodeScalars.makeIterator()
    while true {
        switch (x.next(), y.next()) {
        case (nil, nil): return 0
        case (nil, _): return -1
        case (_, nil): return 1
        case (let p?, let q?): if p != q { return p.value < q.value ? -1 : 1 }
        }
    }
}

/// The order of any two values the tests generate: by kind, then within the kind.
private func valueOrder(_ a: DocumentValue, _ b: DocumentValue) -> Int {
    let (ra, rb) = (kindRank(a), kindRank(b))
    if ra != rb { return sign(ra, rb) }
    switch (a, b) {
    case (.bool(let x), .bool(let y)):
        return sign(x ? 1 : 0, y ? 1 : 0)
    case (.string(let x), .string(let y)):
        return scalarOrder(x, y)
    case (.array(let x), .array(let y)):
        for (p, q) in zip(x, y) {
            let o = valueOrder(p, q)
            if o != 0 { return o }
        }
        return sign(x.count, y.count)
    case (.object(let x), .object(let y)):
        for (p, q) in zip(x, y) {
            let n = scalarOrder(p.name, q.name)
            if n != 0 { return n }
            let v = valueOrder(p.value, q.value)
            if v != 0 { return v }
        }
        return sign(x.count, y.count)
    default:
        if let x = numberValue(a), let y = numberValue(b) { return sign(x, y) }
        return 0   // null and null
    }
}

/// `left op right`, `left` being `nil` for a missing field.
private func holds(_ left: DocumentValue?, _ op: Filter.Comparison, _ right: DocumentValue) -> Bool {
    let value = left ?? .null
    guard kindRank(value) == kindRank(right) else { return op == .notEqual }
    if case .null = value { return op == .equal }
    let order = valueOrder(value, right)
    switch op {
    case .equal: return order == 0
    case .notEqual: return order != 0
    case .less: return order < 0
    case .lessOrEqual: return order <= 0
    case .greater: return order > 0
    case .greaterOrEqual: return order >= 0
    }
}

private func scalarsStart(_ s: String, with prefix: String) -> Bool {
    Array(s.unicodeScalars).starts(with: Array(prefix.unicodeScalars))
}

private func scalarsContain(_ s: String, _ text: String) -> Bool {
    let a = Array(s.unicodeScalars)
    let b = Array(text.unicodeScalars)
    guard a.count >= b.count else { return false }
    return (0...(a.count - b.count)).contains { Array(a[$0..<($0 + b.count)]) == b }
}

/// A filter as data: built into a `Filter` for the store, and evaluated here for the model.
private indirect enum Expr: Sendable {
    case compare(String, Filter.Comparison, DocumentValue)
    case contains(String, DocumentValue)
    case containsText(String, String)
    case oneOf(String, [DocumentValue])
    case hasPrefix(String, String)
    case and([Expr])
    case or([Expr])
    case not(Expr)
    case constant(Bool)

    var filter: Filter {
        switch self {
        case .compare(let path, let op, let value): .compare(FieldPath(path), op, value)
        case .contains(let path, let element): .contains(FieldPath(path), element)
        case .containsText(let path, let text): .containsText(FieldPath(path), text)
        case .oneOf(let path, let values): .oneOf(FieldPath(path), values)
        case .hasPrefix(let path, let prefix): .hasPrefix(FieldPath(path), prefix)
        case .and(let parts): .and(parts.map(\.filter))
        case .or(let parts): .or(parts.map(\.filter))
        case .not(let part): .not(part.filter)
        case .constant(let b): .constant(b)
        }
    }

    func matches(_ document: DocumentValue) -> Bool {
        switch self {
        case .compare(let path, let op, let value):
            return holds(lookup(document, path), op, value)
        case .contains(let path, let element):
            switch lookup(document, path) {
            case nil, .null?: return false
            case .array(let elements)?: return elements.contains { holds($0, .equal, element) }
            case let single?: return holds(single, .equal, element)
            }
        case .containsText(let path, let text):
            guard case .string(let s)? = lookup(document, path) else { return false }
            return scalarsContain(s, text)
        case .oneOf(let path, let values):
            let value = lookup(document, path)
            return values.contains { holds(value, .equal, $0) }
        case .hasPrefix(let path, let prefix):
            guard case .string(let s)? = lookup(document, path) else { return false }
            return scalarsStart(s, with: prefix)
        case .and(let parts): return parts.allSatisfy { $0.matches(document) }
        case .or(let parts): return parts.contains { $0.matches(document) }
        case .not(let part): return !part.matches(document)
        case .constant(let b): return b
        }
    }
}

/// One stored document with its integer id.
private struct Row: Sendable {
    var id: Int
    var value: DocumentValue
}

private enum Step: Sendable {
    case sort(String, SortOrder)
    case reverse
    case slice(Int, Int)
}

/// A query as data: its clauses (`include` or `exclude`), then sorts and reversals, then slices and reversals.
private struct QuerySpec: Sendable {
    var clauses: [(include: Bool, expr: Expr)] = []
    var steps: [Step] = []

    func make(_ collection: String) -> Query<DocumentValue> {
        var q = Query<DocumentValue>(collection)
        for clause in clauses { q = clause.include ? q.include(clause.expr.filter) : q.exclude(clause.expr.filter) }
        for step in steps {
            switch step {
            case .sort(let path, let order): q = q.sortBy(FieldPath(path), order: order)
            case .reverse: q = q.reverse()
            case .slice(let a, let b): q = q[a..<b]
            }
        }
        return q
    }

    func matches(_ document: DocumentValue) -> Bool {
        clauses.allSatisfy { $0.expr.matches(document) == $0.include }
    }
}

/// The model's answer to a query, built step by step as the query is.
private struct ModelAnswer {
    private var keys: [(path: String, descending: Bool)] = []
    private var idDescending = false
    private var window: [Row]?
    private let matches: [Row]
    private var sorted: [Row]?

    init(matches: [Row]) { self.matches = matches }

    init(rows: [Row], spec: QuerySpec) {
        self.init(matches: rows.filter { spec.matches($0.value) })
        for step in spec.steps { apply(step) }
    }

    /// The matches in the order of the sort keys, ties by id.
    private func ordered() -> [Row] {
        let decorated = matches.map { row in (row: row, keys: keys.map { lookup(row.value, $0.path) ?? .null }) }
        return decorated.sorted { a, b in
            for (i, key) in keys.enumerated() {
                let o = valueOrder(a.keys[i], b.keys[i])
                if o != 0 { return key.descending ? o > 0 : o < 0 }
            }
            return idDescending ? a.row.id > b.row.id : a.row.id < b.row.id
        }.map(\.row)
    }

    mutating func results() -> [Row] {
        if let window { return window }
        if let sorted { return sorted }
        let rows = ordered()
        sorted = rows
        return rows
    }

    mutating func apply(_ step: Step) {
        switch step {
        case .sort(let path, let order):
            precondition(window == nil, "sorts come before slices")
            keys.append((path, order == .reverse))
            sorted = nil
        case .reverse:
            if window != nil {
                window?.reverse()
            } else {
                keys = keys.map { ($0.path, !$0.descending) }
                idDescending.toggle()
                sorted = nil
            }
        case .slice(let a, let b):
            let rows = results()
            let lower = min(max(0, a), rows.count)
            let upper = min(max(lower, b), rows.count)
            window = Array(rows[lower..<upper])
        }
    }
}

// MARK: Random documents and queries

private struct Generator {
    var rng: SeededGenerator

    init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

    // Every string is in composed form, each character a single scalar.
    static let names = ["", "Ann", "ann", "Anna", "Bob", "bob", "\u{C5}se", "\u{D8}yvind", "Zo\u{EB}", "\u{C9}mile",
                        "\u{E9}mile", "\u{674E}", "\u{65E5}\u{672C}", "\u{65E5}\u{672C}\u{8A9E}", "\u{1F600}",
                        "\u{1F600}x", "x\u{1F600}", "a b", "ab", "abc", "Z", "zz", "100", "9"]
    static let cities = ["Oslo", "oslo", "Bergen", "Troms\u{F8}", "\u{C5}s", "", "Z\u{FC}rich", "\u{6771}\u{4EAC}"]
    static let tags = ["red", "Red", "re", "green", "blue", "", "\u{F8}l", "\u{65E5}\u{672C}", "\u{1F600}"]
    static let scores: [Double] = [-0.0, 0, 0.5, -2.5, 1, 3.75, 100, 1e12, -1e12, .infinity, -.infinity]
    static let texts = ["a", "nn", "An", "\u{65E5}", "\u{1F600}", "o", "\u{F8}", "zz", "Oslo", "s", "mile", "e"]
    /// Fields a filter or sort may name, a missing one and the id among them.
    static let filterPaths = ["age", "age", "age", "name", "name", "city", "city", "active", "score", "score", "tags",
                              "tags", "address.city", "address.city", "address", "serial", "id", "nothing"]
    static let sortPaths = ["age", "age", "name", "city", "active", "score", "tags", "address.city", "address",
                            "serial", "id", "nothing"]

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func pick<C: Collection>(_ c: C) -> C.Element { c.randomElement(using: &rng)! }

    mutating func age() -> DocumentValue? {
        switch int(0...99) {
        case 0..<58: return .int(Int64(int(0...90)))
        case 58..<72: return .double(Double(int(0...90)) + pick([0, 0.5, 0.25]))
        case 72..<82: return nil
        case 82..<92: return .null
        case 92..<95: return .string(pick(["7", "forty"]))
        default: return .int(Int64(int(-5...(-1))))
        }
    }

    mutating func address() -> DocumentValue? {
        switch int(0...99) {
        case 0..<78: return .object([("city", .string(pick(Self.cities)))])
        case 78..<86: return .object([("city", .null)])
        case 86..<91: return .object([DocumentValue.Field]())
        case 91..<97: return nil
        default: return .string("nowhere")
        }
    }

    mutating func tagsValue() -> DocumentValue? {
        switch int(0...99) {
        case 0..<88: return .array((0..<int(0...4)).map { _ in .string(pick(Self.tags)) })
        case 88..<94: return nil
        default: return .string(pick(Self.tags))   // not an array: one element to `contains`
        }
    }

    mutating func rows(count: Int) -> [Row] {
        var seen = Set<Int>()
        var ids: [Int] = []
        while ids.count < count {
            let id = int(-1_000...1_000_000)
            if seen.insert(id).inserted { ids.append(id) }
        }
        return ids.map { id in
            var fields: [(String, DocumentValue)] = [("id", .int(Int64(id)))]
            if chance(0.95) { fields.append(("name", .string(pick(Self.names)))) }
            if let age = age() { fields.append(("age", age)) }
            if chance(0.95) { fields.append(("city", .string(pick(Self.cities)))) }
            if chance(0.95) { fields.append(("active", .bool(chance(0.5)))) }
            if let tags = tagsValue() { fields.append(("tags", tags)) }
            if chance(0.95) {
                fields.append(("score", .double(chance(0.4) ? pick(Self.scores) : Double(int(-20...20)) / 4)))
            }
            if let address = address() { fields.append(("address", address)) }
            if chance(0.85) { fields.append(("serial", .string("S\(id)"))) }
            return Row(id: id, value: .object(fields))
        }
    }

    /// A constant to compare `path` with: mostly a value some document holds there, sometimes `null` or a value
    /// of another kind.
    mutating func constant(for path: String, _ rows: [Row]) -> DocumentValue {
        if chance(0.55) { return lookup(pick(rows).value, path) ?? .null }
        switch int(0...9) {
        case 0: return .null
        case 1: return .int(Int64(int(-3...95)))
        case 2: return .double(Double(int(-3...95)) + 0.5)
        case 3: return .string(pick(Self.names))
        case 4: return .string(pick(Self.cities))
        case 5: return .bool(chance(0.5))
        case 6: return .array((0..<int(0...2)).map { _ in .string(pick(Self.tags)) })
        case 7: return .string(pick(Self.tags))
        case 8: return .double(pick(Self.scores))
        default: return .int(Int64(int(0...90)))
        }
    }

    mutating func comparison() -> Filter.Comparison { pick(Filter.Comparison.allCases) }

    mutating func leaf(_ rows: [Row]) -> Expr {
        let path = pick(Self.filterPaths)
        switch int(0...99) {
        case 0..<42:
            return .compare(path, comparison(), constant(for: path, rows))
        case 42..<50:
            // A range on one field, as a planner likes to see it.
            let (a, b) = (constant(for: path, rows), constant(for: path, rows))
            let (low, high) = valueOrder(a, b) <= 0 ? (a, b) : (b, a)
            return .and([.compare(path, chance(0.5) ? .greater : .greaterOrEqual, low),
                         .compare(path, chance(0.5) ? .less : .lessOrEqual, high)])
        case 50..<62:
            let p = chance(0.7) ? "tags" : path
            return .contains(p, chance(0.8) ? .string(pick(Self.tags)) : constant(for: p, rows))
        case 62..<70:
            let p = pick(["name", "name", "city", "address.city", "serial", path])
            if chance(0.5), case .string(let s)? = lookup(pick(rows).value, p), !s.isEmpty {
                let start = int(0...(s.count - 1))
                let length = int(1...(s.count - start))
                return .containsText(p, String(s.dropFirst(start).prefix(length)))
            }
            return .containsText(p, pick(Self.texts))
        case 70..<83:
            return .oneOf(path, (0..<int(0...4)).map { _ in constant(for: path, rows) })
        case 83..<96:
            let p = pick(["name", "name", "city", "address.city", "serial", path])
            if chance(0.6), case .string(let s)? = lookup(pick(rows).value, p) {
                return .hasPrefix(p, String(s.prefix(int(0...3))))
            }
            return .hasPrefix(p, pick(["", "A", "a", "\u{C5}", "\u{65E5}", "\u{1F600}", "S1", "Os", "x"]))
        default:
            return .constant(chance(0.6))
        }
    }

    mutating func expr(_ rows: [Row], depth: Int) -> Expr {
        guard depth > 0, chance(0.4) else { return leaf(rows) }
        switch int(0...5) {
        case 0, 1: return .and((0..<int(0...3)).map { _ in expr(rows, depth: depth - 1) })
        case 2, 3: return .or((0..<int(0...3)).map { _ in expr(rows, depth: depth - 1) })
        default: return .not(expr(rows, depth: depth - 1))
        }
    }

    /// A slice of a list of `n` results: often small, sometimes empty, past the end, or with a negative bound.
    mutating func slice(count n: Int) -> Step {
        switch int(0...9) {
        case 0:
            let a = int(0...(n + 2))
            return .slice(a, a)
        case 1:
            let a = int(n...(n + 5))
            return .slice(a, a + int(0...5))
        case 2:
            let a = int(-3...(-1))
            return .slice(a, int(a...(n + 2)))
        case 3:
            return .slice(int(0...max(0, n / 2)), n + int(0...10))
        default:
            let a = int(0...max(0, min(n, 40)))
            return .slice(a, a + int(0...15))
        }
    }

    /// A random query and the model's answer.
    mutating func query(_ rows: [Row]) -> (QuerySpec, [Row]) {
        var spec = QuerySpec()
        for _ in 0..<[0, 0, 1, 1, 1, 1, 1, 2, 2, 3][int(0...9)] {
            spec.clauses.append((include: chance(0.7), expr: expr(rows, depth: 3)))
        }
        for _ in 0..<[0, 0, 1, 1, 1, 2, 2, 3][int(0...7)] {
            if chance(0.2) { spec.steps.append(.reverse) }
            spec.steps.append(.sort(pick(Self.sortPaths), chance(0.35) ? .reverse : .forward))
        }
        if chance(0.3) { spec.steps.append(.reverse) }
        // Slices and reversals after the sorts: a slice of a reversed slice among them.
        var answer = ModelAnswer(rows: rows, spec: spec)
        for _ in 0..<[0, 0, 1, 1, 2, 2, 3, 4][int(0...7)] {
            let step = chance(0.65) ? slice(count: answer.results().count) : .reverse
            spec.steps.append(step)
            answer.apply(step)
        }
        return (spec, answer.results())
    }

    /// The indexes of a random run: usually one of each kind, and some more; some made before the documents are
    /// inserted and some after (built from the documents already there).
    mutating func indexes() -> (before: [IndexDefinition], after: [IndexDefinition]) {
        var chosen: [IndexDefinition] = []
        let usual = [IndexDefinition(name: "age", kind: .regular, fields: ["age"]),
                     IndexDefinition(name: "city_age", kind: .regular, fields: ["city", "age"]),
                     IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]),
                     IndexDefinition(name: "serial", kind: .unique, fields: ["serial"])]
        let more = [IndexDefinition(name: "name", kind: .regular, fields: ["name"]),
                    IndexDefinition(name: "score", kind: .regular, fields: ["score"]),
                    IndexDefinition(name: "address_city", kind: .regular, fields: ["address.city"]),
                    IndexDefinition(name: "active_name", kind: .regular, fields: ["active", "name"]),
                    IndexDefinition(name: "unique_id", kind: .unique, fields: ["id"])]
        for definition in usual where chance(0.85) { chosen.append(definition) }
        for definition in more where chance(0.4) { chosen.append(definition) }
        var before: [IndexDefinition] = []
        var after: [IndexDefinition] = []
        for definition in chosen {
            if chance(0.5) { before.append(definition) } else { after.append(definition) }
        }
        return (before, after)
    }
}

// MARK: Checking the store against the model

private func describeIDs(_ ids: [Int]) -> String {
    "[" + ids.prefix(10).map(String.init).joined(separator: ", ") + (ids.count > 10 ? ", …" : "") + "] (\(ids.count))"
}

private func documentID(_ document: DocumentValue?) -> Int? {
    guard case .int(let i)? = document.flatMap({ lookup($0, "id") }) else { return nil }
    return Int(i)
}

/// One query and the model's answer to it.
private struct QueryCase: Sendable {
    var number: Int
    var spec: QuerySpec
    var expected: [Row]
}

/// Everything the store answers for one query, in one transaction.
private struct Observation: Equatable {
    var results: [DocumentValue]
    var count: Int
    var first: DocumentValue?
    var last: DocumentValue?
    var ids: [DocumentValue]
    /// What a cursor streamed.
    var streamed: [DocumentValue] = []
    /// Whether `any` gave one of the results (or `nil` when there is none).
    var anyIsAResult: Bool

    init(_ query: Query<DocumentValue>, in ctx: ReadContext) throws {
        results = try query.results(in: ctx)
        count = try query.count(in: ctx)
        first = try query.first(in: ctx)
        last = try query.last(in: ctx)
        ids = try query.ids(in: ctx)
        let any = try query.any(in: ctx)
        anyIsAResult = any.map(results.contains) ?? results.isEmpty
        var streamed: [DocumentValue] = []
        let cursor = try query.cursor(in: ctx)
        while let document = try cursor.next() { streamed.append(document) }
        self.streamed = streamed
    }

    /// What differs from the model's answer; empty when nothing does.
    func problems(expected: [Row]) -> [String] {
        var out: [String] = []
        let want = expected.map(\.id)
        let got = results.map { documentID($0) ?? Int.min }
        if got != want {
            out.append("results: expected \(describeIDs(want)), got \(describeIDs(got))")
        } else if results != expected.map(\.value) {
            out.append("results: the ids are right but some documents differ from those inserted")
        }
        if count != want.count { out.append("count: expected \(want.count), got \(count)") }
        if first != expected.first?.value {
            out.append("first: expected \(want.first.map(String.init) ?? "nil"), got \(first?.json() ?? "nil")")
        }
        if last != expected.last?.value {
            out.append("last: expected \(want.last.map(String.init) ?? "nil"), got \(last?.json() ?? "nil")")
        }
        if streamed != results { out.append("cursor: streamed \(describeIDs(streamed.map { documentID($0) ?? Int.min }))") }
        if !anyIsAResult { out.append("any: not one of the results") }
        if ids != want.map({ DocumentValue.int(Int64($0)) }) {
            out.append("ids: expected \(describeIDs(want)), got \(ids.count) ids, in another order or set")
        }
        return out
    }
}

/// Runs `cases` on both collections in one read transaction; returns a message per disagreement.
private func disagreements(_ cases: [QueryCase], in store: DocStore, seed: UInt64) async throws -> [String] {
    try await store.read { ctx in
        var out: [String] = []
        for c in cases {
            var observed: [Observation] = []
            for collection in ["indexed", "plain"] {
                let query = c.spec.make(collection)
                var found: [String]
                do {
                    let observation = try Observation(query, in: ctx)
                    observed.append(observation)
                    found = observation.problems(expected: c.expected)
                } catch {
                    found = ["threw: \(error)"]
                }
                guard !found.isEmpty else { continue }
                let plan = (try? query.explain(in: ctx).description) ?? "(no plan)"
                out.append("seed \(seed), query #\(c.number): \(query)\n  " + found.joined(separator: "\n  ")
                    + "\n" + plan)
            }
            // The two collections hold the same documents: with and without indexes, the same answers.
            if observed.count == 2 && observed[0] != observed[1] {
                out.append("seed \(seed), query #\(c.number): \(c.spec.make("indexed"))\n  the answers with and "
                    + "without indexes differ")
            }
        }
        return out
    }
}

/// Records the first few disagreements in full and how many there were.
private func report(_ found: [String], of total: Int, seed: UInt64) {
    guard !found.isEmpty else { return }
    Issue.record(Comment(rawValue: "seed \(seed): \(found.count) disagreements with the model in \(total) queries"))
    for message in found.prefix(4) { Issue.record(Comment(rawValue: message)) }
}

/// A store whose collections `indexed` and `plain` hold `rows`; `indexed` gets the given indexes, some before its
/// documents and some after.
private func makeModelStore(_ rows: [Row], indexes: (before: [IndexDefinition], after: [IndexDefinition])) async throws
    -> (DocStore, TemporaryDirectory) {
    let (store, dir) = try await makeStore()
    try await store.write { ctx in
        for definition in indexes.before { try ctx.createIndex(definition, in: "indexed") }
        for row in rows {
            try ctx.insert(row.value, into: "indexed")
            try ctx.insert(row.value, into: "plain")
        }
        for definition in indexes.after { try ctx.createIndex(definition, in: "indexed") }
    }
    return (store, dir)
}

// MARK: Tests

@Suite struct DocumentQueryTests {
    static let seeds = randomSeeds(from: "DOCSTORE_DOCUMENT_QUERY_SEEDS", otherwise: [0xD0C0_0E21_0001, 0xD0C0_0E21_0002])

    @Test(arguments: DocumentQueryTests.seeds)
    func randomDocumentQueriesAnswerLikeAPlainFilterAndSort(seed: UInt64) async throws {
        var generator = Generator(seed: seed)
        let rows = generator.rows(count: 300)
        let indexes = generator.indexes()
        let (store, dir) = try await makeModelStore(rows, indexes: indexes)
        defer { _ = dir }

        var cases: [QueryCase] = []
        for number in 0..<350 {
            let (spec, expected) = generator.query(rows)
            cases.append(QueryCase(number: number, spec: spec, expected: expected))
        }
        var found: [String] = []
        for start in stride(from: 0, to: cases.count, by: 50) {
            found += try await disagreements(Array(cases[start..<min(start + 50, cases.count)]), in: store, seed: seed)
        }
        report(found, of: cases.count, seed: seed)

        // The indexes are really there, so the indexed collection is not just a second full scan.
        let infos = try await store.collections()
        let made = Set(infos.first { $0.name == "indexed" }?.indexes.map(\.name) ?? [])
        #expect(made == Set((indexes.before + indexes.after).map(\.name)), "seed \(seed)")
        #expect(infos.first { $0.name == "plain" }?.indexes.isEmpty == true, "seed \(seed)")
    }

    @Test func deletingAQueryRemovesExactlyItsMatches() async throws {
        let seed: UInt64 = 0xDE1E_7E00_0001
        var generator = Generator(seed: seed)
        var rows = generator.rows(count: 250)
        let indexes = (before: [IndexDefinition(name: "age", kind: .regular, fields: ["age"]),
                                IndexDefinition(name: "tags", kind: .multi, fields: ["tags"])],
                       after: [IndexDefinition(name: "city_age", kind: .regular, fields: ["city", "age"]),
                               IndexDefinition(name: "serial", kind: .unique, fields: ["serial"])])
        let (store, dir) = try await makeModelStore(rows, indexes: indexes)
        defer { _ = dir }

        for round in 0..<20 {
            var (spec, expected) = generator.query(rows)
            if expected.count > 40 {
                // Keep something to delete in later rounds: a slice of the matches.
                spec.steps.append(.slice(0, 10))
                expected = Array(expected.prefix(10))
            }
            let gone = Set(expected.map(\.id))
            let toDelete = spec
            let (deletedIndexed, deletedPlain) = try await store.write { ctx in
                (try toDelete.make("indexed").delete(in: ctx), try toDelete.make("plain").delete(in: ctx))
            }
            let context = "seed \(seed), round \(round): \(spec.make("indexed"))"
            #expect(deletedIndexed == expected.count, "\(context)")
            #expect(deletedPlain == expected.count, "\(context)")
            rows.removeAll { gone.contains($0.id) }

            let want = rows.sorted { $0.id < $1.id }.map(\.value)
            let (indexed, plain) = try await store.read { ctx in
                (try Query<DocumentValue>("indexed").results(in: ctx), try Query<DocumentValue>("plain").results(in: ctx))
            }
            #expect(indexed == want, "\(context)")
            #expect(plain == want, "\(context)")
            guard indexed == want, plain == want else { return }

            // Stale index entries would show in queries on what is left.
            var cases: [QueryCase] = []
            for number in 0..<6 {
                let (s, e) = generator.query(rows)
                cases.append(QueryCase(number: 100 * round + number, spec: s, expected: e))
            }
            let found = try await disagreements(cases, in: store, seed: seed)
            report(found, of: cases.count, seed: seed)
            guard found.isEmpty else { return }
        }
    }

    @Test func forEachStreamsTheResultsInOrderAndStopsWhenAsked() async throws {
        var generator = Generator(seed: 0xF0EA_C400_0001)
        let rows = generator.rows(count: 200)
        let (store, dir) = try await makeModelStore(rows, indexes: (
            before: [IndexDefinition(name: "age", kind: .regular, fields: ["age"])],
            after: [IndexDefinition(name: "tags", kind: .multi, fields: ["tags"])]))
        defer { _ = dir }
        let queries: [Query<DocumentValue>] = [
            Query<DocumentValue>("indexed"),
            Query<DocumentValue>("indexed").reverse(),
            Query<DocumentValue>("indexed").include(.compare("age", .greaterOrEqual, .int(30))),
            Query<DocumentValue>("indexed").include(.contains("tags", .string("red"))).sortBy("name"),
            Query<DocumentValue>("indexed").sortBy("age", order: .reverse).sortBy("name")[5..<60],
            Query<DocumentValue>("indexed").sortBy("score")[10..<40].reverse()[3..<20],
            Query<DocumentValue>("plain").exclude(.hasPrefix("name", "A")).sortBy("city").reverse(),
            Query<DocumentValue>("plain").include(.constant(false)),
            Query<DocumentValue>("missing"),
        ]
        for query in queries {
            let (streamed, results, stopped, calls) = try await store.read { ctx in
                var all: [DocumentValue] = []
                let everything = try query.cursor(in: ctx)
                while let document = try everything.next() { all.append(document) }
                var some: [DocumentValue] = []
                var calls = 0
                let cursor = try query.cursor(in: ctx)
                while some.count < 7, let document = try cursor.next() {
                    calls += 1
                    some.append(document)
                }
                return (all, try query.results(in: ctx), some, calls)
            }
            #expect(streamed == results, "\(query)")
            #expect(stopped == Array(results.prefix(7)), "\(query)")
            #expect(calls == min(7, results.count), "\(query): the body ran \(calls) times")
        }
    }

    @Test func explainedCountIsTheCount() async throws {
        var generator = Generator(seed: 0xC0C0_0001)
        let rows = generator.rows(count: 200)
        let (store, dir) = try await makeModelStore(rows, indexes: (
            before: [IndexDefinition(name: "age", kind: .regular, fields: ["age"]),
                     IndexDefinition(name: "serial", kind: .unique, fields: ["serial"])],
            after: [IndexDefinition(name: "tags", kind: .multi, fields: ["tags"])]))
        defer { _ = dir }
        var queries: [Query<DocumentValue>] = [
            Query<DocumentValue>("indexed"),
            Query<DocumentValue>("indexed").include(.compare("age", .equal, .int(30))),
            Query<DocumentValue>("indexed").include(.hasPrefix("serial", "S1")),
            Query<DocumentValue>("indexed").include(.contains("tags", .string("blue")))[2..<9],
            Query<DocumentValue>("indexed").sortBy("name")[190..<250],
            Query<DocumentValue>("indexed").sortBy("age")[0..<50].reverse()[45..<60],
            Query<DocumentValue>("plain").include(.containsText("name", "nn")),
            Query<DocumentValue>("missing").include(.constant(true)),
        ]
        for _ in 0..<40 { queries.append(generator.query(rows).0.make(generator.chance(0.5) ? "indexed" : "plain")) }
        let all = queries
        let pairs = try await store.read { ctx in
            try all.map { (try $0.count(in: ctx), try $0.aggregate(.count).explain(in: ctx).statistics.returned, try $0.results(in: ctx).count) }
        }
        for (query, (count, counted, results)) in zip(all, pairs) {
            #expect(counted == count, "\(query)")
            #expect(count == results, "\(query)")
        }
    }

    @Test func explainSaysSoForAMissingCollectionAndNamesTheIndexOfAnIndexedEquality() async throws {
        var generator = Generator(seed: 0xE8A1_0001)
        let rows = generator.rows(count: 300)
        let (store, dir) = try await makeModelStore(rows, indexes: (
            before: [IndexDefinition(name: "age", kind: .regular, fields: ["age"])],
            after: [IndexDefinition(name: "serial", kind: .unique, fields: ["serial"]),
                    IndexDefinition(name: "tags", kind: .multi, fields: ["tags"])]))
        defer { _ = dir }
        let serial = try #require(rows.compactMap { lookup($0.value, "serial") }.first)
        let (missing, byAge, bySerial, byTag, unindexed) = try await store.read { ctx in
            (try Query<DocumentValue>("missing").include(.compare("age", .equal, .int(3))).explain(in: ctx),
             try Query<DocumentValue>("indexed").include(.compare("age", .equal, .int(30))).explain(in: ctx),
             try Query<DocumentValue>("indexed").include(.compare("serial", .equal, serial)).explain(in: ctx),
             try Query<DocumentValue>("indexed").include(.contains("tags", .string("red"))).explain(in: ctx),
             try Query<DocumentValue>("plain").include(.compare("age", .equal, .int(30))).explain(in: ctx))
        }
        #expect(missing.index == nil && missing.statistics.returned == 0)
        #expect(missing.description.contains("no such collection"), "\(missing)")
        #expect(byAge.index == "age", "\(byAge.description)")
        #expect(bySerial.index == "serial", "\(bySerial.description)")
        #expect(bySerial.statistics.returned == 1, "\(bySerial.description)")
        #expect(byTag.index == "tags", "\(byTag.description)")
        #expect(unindexed.index == nil, "\(unindexed.description)")
        let ageMatches = rows.filter { holds(lookup($0.value, "age"), .equal, .int(30)) }.count
        #expect(byAge.statistics.returned == ageMatches, "\(byAge.description)")
        #expect(byAge.statistics.documentsRead <= ageMatches, "\(byAge.description)")
    }

    @Test func deleteDocumentsDeletesOnlyTheIDsStillThere() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "group", kind: .regular, fields: ["group"]), in: "items")
            for i in 0..<30 {
                try ctx.insert(.object([("id", .int(Int64(i))), ("group", .string(i % 3 == 0 ? "a" : "b"))]), into: "items")
            }
        }
        let query = Query<DocumentValue>("items").include(.compare("group", .equal, .string("a")))
        let ids = try await store.read { try query.ids(in: $0) }
        #expect(ids.count == 10)

        // Between the count and the delete: two of the matches go, and a new match arrives.
        try await store.write { ctx in
            #expect(try ctx.delete("items", id: .int(3)))
            #expect(try ctx.delete("items", id: .int(27)))
            try ctx.insert(.object([("id", .int(100)), ("group", .string("a"))]), into: "items")
        }
        let (changed, deleted) = try await store.write { ctx in
            (try query.ids(in: ctx) != ids, try ids.filter { try ctx.delete("items", id: $0) }.count)
        }
        #expect(changed, "a tool can tell that the matches changed since it counted them")
        #expect(deleted == 8)
        let left = try await store.read { ctx in
            (try Query<DocumentValue>("items").results(in: ctx).compactMap(documentID), try query.results(in: ctx).compactMap(documentID))
        }
        #expect(left.0 == (0..<30).filter { $0 % 3 != 0 } + [100])
        #expect(left.1 == [100])

        let again = try await store.write { ctx in
            (try ids.filter { try ctx.delete("items", id: $0) }.count, try ids.filter { try ctx.delete("no such collection", id: $0) }.count)
        }
        #expect(again == (0, 0))
        let empty = try await store.write { try Query<DocumentValue>("nothing here").ids(in: $0) }
        #expect(empty.isEmpty)
    }

    @Test func findOrCreateFindsTheFirstMatchOrInsertsOnce() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            for (id, name, age) in [(1, "Ann", 40), (2, "Bob", 30), (3, "Ann", 20), (4, "Cy", 50)] {
                try ctx.insert(.object([("id", .int(Int64(id))), ("name", .string(name)), ("age", .int(Int64(age)))]),
                               into: "people")
            }
        }
        let anns = Query<DocumentValue>("people").include(.compare("name", .equal, .string("Ann")))
        let fallback: DocumentValue = .object([("id", .int(99)), ("name", .string("Ann")), ("age", .int(1))])
        let (byID, byAge) = try await store.write { ctx in
            (try findOrCreate(anns, in: ctx, fallback), try findOrCreate(anns.sortBy("age"), in: ctx, fallback))
        }
        #expect(byID.created == false && documentID(byID.document) == 1)
        #expect(byAge.created == false && documentID(byAge.document) == 3)

        let dee = Query<DocumentValue>("people").include(.compare("name", .equal, .string("Dee")))
        let new: DocumentValue = .object([("id", .int(5)), ("name", .string("Dee")), ("age", .int(33))])
        let first = try await store.write { try findOrCreate(dee, in: $0, new) }
        let second = try await store.write { try findOrCreate(dee, in: $0, new) }
        #expect(first.created && first.document == new)
        #expect(!second.created && second.document == new)
        let (count, dees) = try await store.read { ctx in (try Query<DocumentValue>("people").count(in: ctx), try dee.count(in: ctx)) }
        #expect(count == 5)
        #expect(dees == 1)

        // A missing collection is created by the insert.
        let made = try await store.write { ctx in
            try findOrCreate(Query<DocumentValue>("fresh"), in: ctx, .object([("id", .string("x"))]))
        }
        #expect(made.created)
        #expect(try await store.read { try Query<DocumentValue>("fresh").count(in: $0) } == 1)
    }

    /// The executor checks for cancellation every 4,096 entries of a walk: a cancelled task's long scan stops with
    /// `CancellationError`, whether it was cancelled before the scan began or during it.
    @Test func aCancelledLongScanThrowsCancellationError() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            for i in 0..<50_000 {
                try ctx.insert(.object([("id", .int(Int64(i))), ("n", .int(Int64(i % 97)))]), into: "big")
            }
        }
        let nothing = Query<DocumentValue>("big").include(.compare("n", .less, .int(-1)))
        #expect(try await store.read { try nothing.count(in: $0) } == 0)

        for operation in 0..<4 {
            let task = Task {
                try await store.read { ctx -> Int in
                    switch operation {
                    case 0: return try nothing.count(in: ctx)
                    case 1: return try nothing.results(in: ctx).count
                    case 2: return try nothing.sortBy("n").results(in: ctx).count
                    default:
                        var seen = 0
                        let cursor = try nothing.cursor(in: ctx)
                        while try cursor.next() != nil { seen += 1 }
                        return seen
                    }
                }
            }
            task.cancel()
            let outcome = await task.result
            #expect(throws: CancellationError.self, "operation \(operation)") { try outcome.get() }
        }
        // The store is still usable afterwards.
        #expect(try await store.read { try Query<DocumentValue>("big").count(in: $0) } == 50_000)
    }

    /// The ids of an index's ranges, gathered in one loop, stop too: here the first range holds 3 entries and the
    /// second 20,000, so a check that waited for the walk's count to reach a multiple of 4,096 would never come.
    @Test func aCancelledWalkOfAnIndexsIDsThrowsCancellationError() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "big")
            // (Four in five documents match neither value: the index is the cheaper access.)
            for i in 0..<100_003 {
                let n = i < 3 ? 0 : i % 5 == 0 ? 1 : 2
                try ctx.insert(.object([("id", .int(Int64(i))), ("n", .int(Int64(n)))]), into: "big")
            }
        }
        let both = Query<DocumentValue>("big").include(.oneOf("n", [.int(0), .int(1)]))
        #expect(try await store.read { try both.ids(in: $0).count } == 20_003)
        let plan = try await store.read { try both.plan(in: $0) }
        guard case .index(let scan) = plan.access else { Issue.record("not an index walk: \(plan)"); return }
        #expect(scan.ranges.count == 2)

        // Ranges that meet each other give each id once, in id order, as any other plan does.
        for repeated in [Query<DocumentValue>("big").include(.oneOf("n", [.int(1), .int(0), .int(1)])),
                         Query<DocumentValue>("big").include(.or([.compare("n", .lessOrEqual, .int(1)),
                                                                  .compare("n", .less, .int(1))]))] {
            let ids = try await store.read { try repeated.ids(in: $0) }
            #expect(ids.count == 20_003, "\(repeated)")
            let numbers = ids.map { id -> Int64 in if case .int(let n) = id { n } else { -1 } }
            #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count, "\(repeated)")
        }

        for sorted in [false, true] {
            let task = Task {
                try await store.read { ctx in
                    // The read begins before the task is cancelled: only the walk itself can see it.
                    while !Task.isCancelled { usleep(100) }
                    return try (sorted ? both.sortBy("id") : both).ids(in: ctx).count
                }
            }
            task.cancel()
            let outcome = await task.result
            #expect(throws: CancellationError.self, "sorted: \(sorted)") { try outcome.get() }
        }
    }
}

/// `findOrCreate`, saying whether it created the document.
private func findOrCreate(_ query: Query<DocumentValue>, in ctx: WriteContext, _ document: DocumentValue) throws
    -> (document: DocumentValue, created: Bool) {
    var created = false
    let found = try query.findOrCreate(in: ctx) { created = true; return document }
    return (found, created)
}
