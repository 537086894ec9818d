import Foundation
import Synchronization
import Testing
@testable import DocStore

// Updates against a plain in-memory model: random documents, random field changes applied to the matches of random
// queries, in every form (a list of changes, the dictionary form, one document at a time by id, a typed closure).
// After each update every document must be what the model made of it, every index right (`verify()` clean, and
// queries through the indexes answering as the model), and an update that cannot apply must leave the store
// exactly as it was.
//
// The model of a change, from the documentation of `FieldChange`:
// - `set` makes the objects on its way where they are missing or nil; a step through anything else is refused;
// - `unset` removes the field, if there is one;
// - `increment` of a missing or nil field makes it the number; integers add exactly (a Double on either side adds as
//   Doubles), and a sum outside Int64 is an overflow (a UInt64 when one of them lay above Int64.max); anything that
//   is not a number is refused;
// - `push` onto a missing or nil field makes an array; `pull` removes every element equal as a key; either on
//   something that is not an array is refused;
// - an update may not change the id; a unique index may not meet a value twice.

// MARK: The model

/// The same value at every depth, field order included (NaN being itself).
private func identical(_ a: DocumentValue, _ b: DocumentValue) -> Bool {
    switch (a, b) {
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(identical)
    case (.object(let x), .object(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { $0.name == $1.name && identical($0.value, $1.value) }
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern || (x.isNaN && y.isNaN)
    default: return a == b
    }
}

/// `value` at `path`: objects made where a step is missing or nil; `nil` when a step is something else.
private func setting(_ value: DocumentValue, at path: ArraySlice<Substring>, in document: DocumentValue) -> DocumentValue? {
    guard let name = path.first.map(String.init) else { return value }
    var fields: [DocumentValue.Field]
    switch document {
    case .object(let existing): fields = existing
    case .null: fields = []
    default: return nil
    }
    if let i = fields.firstIndex(where: { $0.name == name }) {
        guard let inner = setting(value, at: path.dropFirst(), in: fields[i].value) else { return nil }
        fields[i].value = inner
    } else {
        guard let inner = setting(value, at: path.dropFirst(), in: .null) else { return nil }
        fields.append(DocumentValue.Field(name, inner))
    }
    return .object(fields)
}

private func setting(_ value: DocumentValue, at path: String, in document: DocumentValue) -> DocumentValue? {
    setting(value, at: path.split(separator: ".", omittingEmptySubsequences: false)[...], in: document)
}

private func removing(_ path: ArraySlice<Substring>, from document: DocumentValue) -> DocumentValue {
    guard let name = path.first.map(String.init), case .object(var fields) = document,
          let i = fields.firstIndex(where: { $0.name == name }) else { return document }
    if path.count == 1 { fields.remove(at: i) } else { fields[i].value = removing(path.dropFirst(), from: fields[i].value) }
    return .object(fields)
}

/// Why the model refuses a change.
private enum Refusal: Error {
    case invalid, overflow

    var code: DocStoreError.Code { self == .invalid ? .invalidUpdate : .overflow }
}

/// `a + b` for an increment, as Swift adds: integers exactly, to an Int64, or a UInt64 when one of them lay above
/// Int64.max; a Double on either side makes a Double.
private func add(_ a: DocumentValue, _ b: DocumentValue) throws(Refusal) -> DocumentValue {
    func whole(_ v: DocumentValue) -> Int128? {
        switch v {
        case .int(let i): return Int128(i)
        case .uint(let u): return Int128(u)
        default: return nil
        }
    }
    func double(_ v: DocumentValue) -> Double? {
        switch v {
        case .int(let i): return Double(i)
        case .uint(let u): return Double(u)
        case .double(let d): return d
        default: return nil
        }
    }
    if let x = whole(a), let y = whole(b) {
        if let sum = Int64(exactly: x + y) { return .int(sum) }
        if max(x, y) > Int128(Int64.max), let sum = UInt64(exactly: x + y) { return .uint(sum) }
        throw .overflow
    }
    guard let x = double(a), let y = double(b) else { throw .invalid }
    return .double(x + y)
}

private func isNumber(_ v: DocumentValue) -> Bool {
    switch v {
    case .int, .uint, .double: return true
    default: return false
    }
}

/// The document with `changes` applied in order.
private func applying(_ changes: [FieldChange], to document: DocumentValue) throws(Refusal) -> DocumentValue {
    var d = document
    for change in changes {
        let path = change.path.description
        let current = lookup(d, path) ?? .null
        var new: DocumentValue?
        switch change {
        case .set(_, let value):
            new = value
        case .unset:
            d = removing(path.split(separator: ".", omittingEmptySubsequences: false)[...], from: d)
            continue
        case .increment(_, let amount):
            if current == .null {
                guard isNumber(amount) else { throw .invalid }
                new = amount
            } else {
                new = try add(current, amount)
            }
        case .push(_, let value):
            switch current {
            case .null: new = .array([value])
            case .array(let elements): new = .array(elements + [value])
            default: throw .invalid
            }
        case .pull(_, let value):
            switch current {
            case .null: continue
            case .array(let elements):
                let key = KeyEncoder.key(value)
                new = .array(elements.filter { KeyEncoder.key($0) != key })
            default: throw .invalid
            }
        }
        guard let new, let changed = setting(new, at: path, in: d) else { throw .invalid }
        d = changed
    }
    return d
}

/// The changes of the dictionary form in the order it applies them: sets, unsets, increments, pushes, pulls, each
/// kind by path.
private func dictionaryOrder(_ changes: [FieldChange]) -> [FieldChange] {
    func rank(_ c: FieldChange) -> Int {
        switch c {
        case .set: 0
        case .unset: 1
        case .increment: 2
        case .push: 3
        case .pull: 4
        }
    }
    return changes.enumerated().sorted { a, b in
        let (ra, rb) = (rank(a.element), rank(b.element))
        if ra != rb { return ra < rb }
        if ra == 1 { return a.offset < b.offset }
        return a.element.path.description < b.element.path.description
    }.map(\.element)
}

// MARK: Filters

private func holds(_ left: DocumentValue?, equal right: DocumentValue) -> Bool {
    let value = left ?? .null
    // Different kinds are never equal: most documents are told apart without their keys.
    guard KeyEncoder.kindRange(of: value) == KeyEncoder.kindRange(of: right) else { return false }
    return !isNaN(value) && !isNaN(right) && KeyEncoder.key(value) == KeyEncoder.key(right)
}

private indirect enum Expr: Sendable, CustomStringConvertible {
    case equal(String, DocumentValue)
    case greater(String, DocumentValue)
    case oneOf(String, [DocumentValue])
    case contains(String, DocumentValue)
    case or([Expr])
    case all

    var filter: Filter {
        switch self {
        case .equal(let p, let v): .compare(FieldPath(p), .equal, v)
        case .greater(let p, let v): .compare(FieldPath(p), .greater, v)
        case .oneOf(let p, let vs): .oneOf(FieldPath(p), vs)
        case .contains(let p, let v): .contains(FieldPath(p), v)
        case .or(let parts): .or(parts.map(\.filter))
        case .all: .constant(true)
        }
    }

    var description: String { filter.description }

    func matches(_ document: DocumentValue) -> Bool {
        switch self {
        case .equal(let p, let v): return holds(lookup(document, p), equal: v)
        case .greater(let p, let v):
            guard let value = lookup(document, p), value != .null, !isNaN(value),
                  KeyEncoder.kindRange(of: value) == KeyEncoder.kindRange(of: v) else { return false }
            return KeyEncoder.key(v).lexicographicallyPrecedes(KeyEncoder.key(value))
        case .oneOf(let p, let vs): return vs.contains { holds(lookup(document, p), equal: $0) }
        case .contains(let p, let v):
            switch lookup(document, p) {
            case nil, .null?: return false
            case .array(let elements)?: return elements.contains { holds($0, equal: v) }
            case let single?: return holds(single, equal: v)
            }
        case .or(let parts): return parts.contains { $0.matches(document) }
        case .all: return true
        }
    }
}

// MARK: Rounds

/// How an update is asked for.
private enum Form: Sendable {
    case list, dictionary, byID
}

/// One update: which documents, which changes, in which form.
private struct Round: Sendable, CustomStringConvertible {
    var filter: Expr
    var sort: (path: String, order: SortOrder)?
    var slice: Range<Int>?
    var changes: [FieldChange]
    var form: Form

    func query(_ collection: String) -> Query<DocumentValue> {
        var q = Query<DocumentValue>(collection).include(filter.filter)
        if let sort { q = q.sortBy(FieldPath(sort.path), order: sort.order) }
        if let slice { q = q[slice] }
        return q
    }

    var description: String { "\(query("c")) \(form): \(changes.map(\.description).joined(separator: "; "))" }

    /// The changes in the order the form applies them.
    var applied: [FieldChange] { form == .dictionary ? dictionaryOrder(changes) : changes }

    /// The ids of the documents the update changes, in id order.
    func matches(_ documents: [Int: DocumentValue]) -> [Int] {
        var ids = documents.keys.sorted().filter { filter.matches(documents[$0]!) }
        if let sort {
            let keyed = ids.map { (key: KeyEncoder.key(lookup(documents[$0]!, sort.path) ?? .null), id: $0) }
            ids = keyed.sorted { a, b in
                if a.key != b.key { return sort.order == .reverse ? b.key.lexicographicallyPrecedes(a.key) : a.key.lexicographicallyPrecedes(b.key) }
                return a.id < b.id
            }.map(\.id)
        }
        if let slice {
            let lower = min(slice.lowerBound, ids.count)
            ids = Array(ids[lower..<min(slice.upperBound, ids.count)])
        }
        return ids.sorted()
    }

    /// Runs the update on `collection`, returning the number of matches.
    func run(on collection: String, ids: [Int], in ctx: WriteContext) throws -> Int {
        switch form {
        case .list:
            return try query(collection).update(in: ctx, changes)
        case .dictionary:
            var set: [FieldPath: DocumentValue] = [:], increment: [FieldPath: DocumentValue] = [:]
            var push: [FieldPath: DocumentValue] = [:], pull: [FieldPath: DocumentValue] = [:]
            var unset: [FieldPath] = []
            for change in changes {
                switch change {
                case .set(let p, let v): set[p] = v
                case .unset(let p): unset.append(p)
                case .increment(let p, let v): increment[p] = v
                case .push(let p, let v): push[p] = v
                case .pull(let p, let v): pull[p] = v
                }
            }
            return try query(collection).update(in: ctx, set: set, unset: unset, increment: increment, push: push, pull: pull)
        case .byID:
            var found = 0
            for id in ids where try ctx.update(collection, id: .int(Int64(id)), changes) { found += 1 }
            // An id that is not there changes nothing.
            if try ctx.update(collection, id: .int(1_000_000), changes) { found += 1_000 }
            return found
        }
    }
}

/// What the model expects of an update of one collection: its documents afterwards, or the codes of the errors
/// that may stop it (which one comes first depends on the order the matches are changed in).
private enum Prediction {
    case changed([Int: DocumentValue], matched: Int)
    case refused(Set<DocStoreError.Code>)
}

private func predict(_ round: Round, on documents: [Int: DocumentValue], uniquePath: String?) -> Prediction {
    let ids = round.matches(documents)
    var after = documents
    var codes = Set<DocStoreError.Code>()
    for id in ids {
        do throws(Refusal) {
            let new = try applying(round.applied, to: documents[id]!)
            if KeyEncoder.key(lookup(new, "id") ?? .null) != KeyEncoder.key(.int(Int64(id))) { throw Refusal.invalid }
            after[id] = new
        } catch {
            codes.insert(error.code)
        }
    }
    if let uniquePath, codes.isEmpty {
        var seen = Set<[UInt8]>()
        for document in after.values {
            guard let value = lookup(document, uniquePath), value != .null else { continue }
            if !seen.insert(KeyEncoder.key(value)).inserted { codes.insert(.uniqueViolation) }
        }
    }
    return codes.isEmpty ? .changed(after, matched: ids.count) : .refused(codes)
}

// MARK: Random documents and changes

private struct Generator {
    var rng: SeededGenerator

    init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func pick<C: Collection>(_ c: C) -> C.Element { c.randomElement(using: &rng)! }

    static let groups: [DocumentValue?] = [nil, .null, .string("Oslo"), .string("Bergen"), .string("\u{E9}"),
                                           .string("e\u{301}"), .string("Troms\u{F8}"), .int(3), .double(3.0)]
    static let tags: [DocumentValue] = [.string("red"), .string("blue"), .string("\u{E9}"), .string("e\u{301}"), .int(3),
                                        .double(3.0), .string("3")]
    static let keys: [DocumentValue?] = [nil, .null, .string("p"), .string("q"), .int(7)]

    mutating func count() -> DocumentValue? {
        switch int(0...19) {
        case 0...12: return .int(Int64(int(-50...50)))
        case 13, 14: return .double(Double(int(-40...40)) / 4)
        case 15: return .int(Int64.min + Int64(int(1...100)))
        case 16: return .int(Int64(int(1...3)) << 60)
        case 17: return .null
        default: return nil
        }
    }

    mutating func x() -> DocumentValue? {
        switch int(0...9) {
        case 0...3: return .int(Int64(int(-9...9)))
        case 4: return .string(pick(["7", "x"]))
        case 5: return .bool(chance(0.5))
        case 6: return .array([.int(1)])
        case 7: return .double(0.5)
        case 8: return .null
        default: return nil
        }
    }

    mutating func documents(count n: Int) -> [Int: DocumentValue] {
        var serials = Array(1...(2 * n)).shuffled(using: &rng)
        var out: [Int: DocumentValue] = [:]
        for id in 1...n {
            var fields: [(String, DocumentValue)] = [("id", .int(Int64(id)))]
            func add(_ name: String, _ value: DocumentValue?) { if let value { fields.append((name, value)) } }
            add("g", pick(Self.groups))
            add("count", count())
            add("x", x())
            let serial = serials.removeLast()
            add("u", chance(0.7) ? .int(Int64(serial)) : (chance(0.5) ? .null : nil))
            switch int(0...9) {
            case 0...6: add("tags", .array((0..<int(0...3)).map { _ in pick(Self.tags) }))
            case 7: add("tags", .null)
            default: break
            }
            switch int(0...9) {
            case 0...6:
                var inner: [(String, DocumentValue)] = []
                if let k = pick(Self.keys) { inner.append(("k", k)) }
                if chance(0.7) { inner.append(("v", .int(Int64(int(0...9))))) }
                add("n", .object(inner))
            case 7: add("n", .string("flat"))
            default: break
            }
            if chance(0.5) { add("list", .array((0..<int(0...4)).map { _ in pick([.int(3), .double(3.0), .int(1), .string("3")]) })) }
            out[id] = .object(fields)
        }
        return out
    }

    mutating func value() -> DocumentValue {
        switch int(0...6) {
        case 0: return pick(Self.groups) ?? .null
        case 1: return .int(Int64(int(-5...5)))
        case 2: return .string(pick(["Oslo", "\u{E9}", "e\u{301}", "new"]))
        case 3: return .array([.int(1), .string("a")])
        case 4: return .object([("a", .int(1))])
        case 5: return .double(2.5)
        default: return .null
        }
    }

    /// A change that applies to every document (an increment that overflows aside).
    mutating func safeChange() -> FieldChange {
        switch int(0...11) {
        case 0, 1: return .set(FieldPath(pick(["g", "m.a", "m.b.c", "label"])), value())
        case 2: return .set("count", .int(Int64(int(-5...5))))
        case 3: return .unset(FieldPath(pick(["g", "x", "n", "n.k", "tags", "u", "nothing", "n.k.deep", "m.a", "list"])))
        case 4, 5: return .increment("count", chance(0.7) ? .int(Int64(int(0...9))) : .double(Double(int(-8...8)) / 4))
        case 6: return .increment(FieldPath(pick(["fresh", "m.n"])), .int(Int64(int(1...3))))
        case 7: return .push(FieldPath(pick(["tags", "list", "fresh_list"])), pick(Self.tags))
        case 8, 9: return .pull(FieldPath(pick(["tags", "list", "nothing"])), pick(Self.tags))
        case 10: return .set("u", .null)
        default: return .set("g", pick(Self.groups) ?? .null)
        }
    }

    /// A change that some documents refuse, or that breaks a unique index.
    mutating func riskyChange(documents n: Int) -> FieldChange {
        switch int(0...10) {
        case 0: return .increment("x", .int(1))
        case 1: return .increment("count", .int(-Int64(int(20...200))))
        case 2: return .increment("count", .string("1"))
        case 3: return .increment("g", .int(1))
        case 4: return .push("x", .int(2))
        case 5: return .pull("x", .int(1))
        case 6: return .set("n.k", .string("r"))
        case 7: return .increment("n.v", .int(1))
        case 8: return .set("u", chance(0.5) ? .int(Int64(int(1...(2 * n)))) : .double(Double(int(1...(2 * n)))))
        case 9: return .set("id", .int(Int64(int(5_000...6_000))))
        default: return .set("tags.first", .int(1))
        }
    }

    mutating func filter(documents n: Int) -> Expr {
        switch int(0...13) {
        case 12:
            // Branches that an index each answers, and that overlap: a document matched twice is changed once.
            return .or([.equal("g", pick(Self.groups) ?? .null), .greater("count", .int(Int64(int(-10...30))))])
        case 13: return .or([.contains("tags", pick(Self.tags)), .equal("n.k", pick(Self.keys) ?? .null)])
        case 0, 1: return .all
        case 2, 3: return .equal("g", pick(Self.groups) ?? .null)
        case 4: return .oneOf("g", [pick(Self.groups) ?? .null, pick(Self.groups) ?? .null])
        case 5: return .greater("count", .int(Int64(int(-40...40))))
        case 6: return .contains("tags", pick(Self.tags))
        case 7: return .equal("u", .int(Int64(int(1...(2 * n)))))
        case 8: return .equal("n.k", pick(Self.keys) ?? .null)
        case 9: return .equal("x", .string("7"))
        case 10: return .equal("nothing", .int(1))
        default: return .greater("x", .int(0))
        }
    }

    mutating func round(documents n: Int) -> Round {
        var changes = (0..<int(1...3)).map { _ in safeChange() }
        if chance(0.3) { changes.insert(riskyChange(documents: n), at: int(0...changes.count)) }
        var round = Round(filter: filter(documents: n), changes: changes, form: pick([Form.list, .list, .dictionary, .byID]))
        if chance(0.2) {
            round.sort = (pick(["count", "g", "id", "x"]), chance(0.5) ? .forward : .reverse)
            let a = int(0...(n / 2))
            round.slice = a..<(a + int(0...20))
        }
        if round.form == .dictionary {
            // One change per path and kind: the dictionary form holds no more.
            var seen = Set<String>()
            round.changes = round.changes.filter { seen.insert("\(dictionaryKind($0)) \($0.path)").inserted }
        }
        return round
    }

    /// Queries that read through the indexes of the indexed collection.
    mutating func checks(documents n: Int) -> [Expr] {
        var out: [Expr] = Self.groups.map { .equal("g", $0 ?? .null) }
        out += [.equal("g", .string("new")), .equal("g", .int(-1)), .equal("g", .array([.int(1), .string("a")]))]
        out += [.greater("count", .int(Int64(int(-30...30)))), .greater("x", .int(0)), .contains("tags", pick(Self.tags)),
                .contains("tags", .string("red")), .equal("u", .int(Int64(int(1...(2 * n))))), .equal("u", .null),
                .equal("n.k", pick(Self.keys) ?? .null), .equal("n.k", .string("r")), .oneOf("g", [.int(3), .string("Oslo")]),
                .or([.equal("g", .string("\u{E9}")), .contains("tags", .string("blue"))])]
        return Array(out.shuffled(using: &rng).prefix(9))
    }
}

private func dictionaryKind(_ change: FieldChange) -> Int {
    switch change {
    case .set: 0
    case .unset: 1
    case .increment: 2
    case .push: 3
    case .pull: 4
    }
}

// MARK: Stores

private enum Stores {
    static let indexes = [
        IndexDefinition(name: "g", kind: .regular, fields: ["g"]),
        IndexDefinition(name: "u", kind: .unique, fields: ["u"]),
        IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]),
        IndexDefinition(name: "g_count", kind: .regular, fields: ["g", "count"]),
        IndexDefinition(name: "count", kind: .regular, fields: ["count"]),
        IndexDefinition(name: "nk", kind: .regular, fields: ["n.k"]),
        IndexDefinition(name: "x", kind: .regular, fields: ["x"]),
    ]

    static func make(_ documents: [Int: DocumentValue]) async throws -> (DocStore, TemporaryDirectory) {
        let (store, dir) = try await makeStore()
        let values = documents.keys.sorted().map { documents[$0]! }
        try await store.write { ctx in
            for definition in indexes.prefix(3) { try ctx.createIndex(definition, in: "indexed") }
            for value in values.reversed() {
                try ctx.insert(value, into: "indexed")
                try ctx.insert(value, into: "plain")
            }
            for definition in indexes.dropFirst(3) { try ctx.createIndex(definition, in: "indexed") }
        }
        return (store, dir)
    }
}

private func snapshot(_ store: DocStore) async throws -> (indexed: [DocumentValue], plain: [DocumentValue]) {
    try await store.read { ctx in
        (try Query<DocumentValue>("indexed").results(in: ctx), try Query<DocumentValue>("plain").results(in: ctx))
    }
}

/// What differs between stored documents and the model's, in a few words.
private func differences(_ stored: [DocumentValue], _ model: [Int: DocumentValue]) -> String? {
    let want = model.keys.sorted().map { model[$0]! }
    guard stored.count == want.count else { return "\(stored.count) documents, expected \(want.count)" }
    for (s, w) in zip(stored, want) where !identical(normalized(s), normalized(w)) {
        return "document \(lookup(s, "id")?.json() ?? "?") is \(s.json()), expected \(w.json())"
    }
    return nil
}

/// How a write ended.
private enum Ending: Sendable {
    case matched(Int)
    case failed(DocStoreError.Code, String)
}

private func attempt(_ body: () async throws -> Int) async -> Ending {
    do { return .matched(try await body()) } catch let error as DocStoreError {
        return .failed(error.code, error.message)
    } catch {
        return .failed(.storage, "\(error)")
    }
}

// MARK: Tests

@Suite struct UpdateOracleTests {
    static let seeds: [UInt64] = randomSeeds(from: "DOCSTORE_UPDATE_SEEDS", otherwise: [0x0DA7_E001, 0x0DA7_E002])

    @Test(arguments: engineSeeds(UpdateOracleTests.seeds))
    func randomUpdatesChangeExactlyTheMatchesAndKeepEveryIndexRight(seed: UInt64) async throws {
        var generator = Generator(seed: seed)
        let initial = generator.documents(count: 200)
        var models: [String: [Int: DocumentValue]] = ["indexed": initial, "plain": initial]
        let (store, dir) = try await Stores.make(initial)
        defer { _ = dir }
        var (changedRounds, refusedRounds, queryChecks) = (0, 0, 0)

        var throughIndexes = 0
        rounds: for number in 0..<70 {
            let round = generator.round(documents: initial.count)
            let before = try await snapshot(store)
            var refusedIn = Set<String>()
            for collection in ["indexed", "plain"] {
                let model = models[collection]!
                let prediction = predict(round, on: model, uniquePath: collection == "indexed" ? "u" : nil)
                let ids = round.matches(model)
                let ending = await attempt { try await store.write { ctx in try round.run(on: collection, ids: ids, in: ctx) } }
                let context = "seed \(seed), round \(number) on \(collection): \(round)"
                switch (prediction, ending) {
                case (.changed(let after, let matched), .matched(let n)):
                    #expect(n == matched, "\(context): \(n) matched, expected \(matched)")
                    models[collection] = after
                    changedRounds += 1
                case (.refused(let codes), .failed(let code, let message)):
                    #expect(codes.contains(code), "\(context): failed with \(code) (\(message)), expected one of \(codes)")
                    refusedRounds += 1
                    refusedIn.insert(collection)
                case (.changed, .failed(let code, let message)):
                    Issue.record(Comment(rawValue: "\(context): failed with \(code): \(message)"))
                    break rounds
                case (.refused(let codes), .matched(let n)):
                    Issue.record(Comment(rawValue: "\(context): \(n) matched, expected an error among \(codes)"))
                    break rounds
                }
            }
            let after = try await snapshot(store)
            for (collection, stored, previous) in [("indexed", after.indexed, before.indexed), ("plain", after.plain, before.plain)] {
                if let problem = differences(stored, models[collection]!) {
                    Issue.record(Comment(rawValue: "seed \(seed), round \(number) on \(collection): \(round)\n  \(problem)"))
                    break rounds
                }
                if refusedIn.contains(collection) {
                    // Refused: exactly as it was, field order and all.
                    let same = stored.count == previous.count && zip(stored, previous).allSatisfy { identical($0, $1) }
                    #expect(same, "seed \(seed), round \(number) on \(collection): a refused update changed the store")
                }
            }
            let report = try await store.verify()
            guard report.isClean else {
                Issue.record(Comment(rawValue: "seed \(seed), round \(number): \(round)\n\(report)"))
                break
            }
            // Queries through the indexes find what the model holds.
            let checks = generator.checks(documents: initial.count)
            let found = try await store.read { ctx in
                try checks.map { check in
                    (try Query<DocumentValue>("indexed").include(check.filter).ids(in: ctx),
                     try Query<DocumentValue>("plain").include(check.filter).ids(in: ctx),
                     try Query<DocumentValue>("indexed").include(check.filter).explain(in: ctx).index != nil)
                }
            }
            for (check, (indexed, plain, viaIndex)) in zip(checks, found) {
                queryChecks += 1
                if viaIndex { throughIndexes += 1 }
                for (collection, ids) in [("indexed", indexed), ("plain", plain)] {
                    let model = models[collection]!
                    let want = model.keys.sorted().filter { check.matches(model[$0]!) }
                    let got = ids.compactMap { if case .int(let i) = $0 { Int(i) } else { nil } }
                    #expect(got == want, "seed \(seed), round \(number) on \(collection): \(check) found \(got), expected \(want)")
                }
            }
        }
        #expect(changedRounds >= 60, "seed \(seed): only \(changedRounds) updates applied")
        #expect(refusedRounds >= 5, "seed \(seed): only \(refusedRounds) updates refused")
        #expect(queryChecks > 500)
        // The checks did read through the indexes, often.
        #expect(throughIndexes > queryChecks / 3, "seed \(seed): \(throughIndexes) of \(queryChecks) checks used an index")
    }

    /// An update that fails halfway leaves nothing of itself written: alone, its transaction writes nothing; caught,
    /// the transaction goes on as it was before the update, as after a refused insert.
    @Test func anUpdateThatFailsHalfwayWritesNothingEvenWhenCaught() async throws {
        var generator = Generator(seed: 0x0DA7_E0CA)
        var documents = generator.documents(count: 60)
        // Documents 1..59 take an increment; 60 holds a string there.
        for id in 1...60 { documents[id] = setting(id == 60 ? .string("n/a") : .int(Int64(id)), at: "count", in: documents[id]!)! }
        let (store, dir) = try await Stores.make(documents)
        defer { _ = dir }
        let before = try await snapshot(store)
        for collection in ["indexed", "plain"] {
            await expectError(.invalidUpdate, mentions: ["count"]) {
                _ = try await Query<DocumentValue>(collection).update(in: store, [.increment("count", .int(1)), .set("g", .string("moved"))])
            }
            try await store.write { ctx in
                do { _ = try Query<DocumentValue>(collection).update(in: ctx, increment: ["count": .int(1)]) } catch {}
                try ctx.insert(.object([("id", .int(999))]), into: collection)
            }
            #expect(try await store.write { try $0.delete(collection, id: .int(999)) })
            // One document at a time, the last one refused.
            await expectError(.invalidUpdate) {
                try await store.write { ctx in
                    for id in 1...60 { try ctx.update(collection, id: .int(Int64(id)), [.increment("count", .int(1))]) }
                }
            }
        }
        let after = try await snapshot(store)
        #expect(after.indexed.count == 60 && after.plain.count == 60)
        #expect(zip(after.indexed, before.indexed).allSatisfy { identical($0, $1) })
        #expect(zip(after.plain, before.plain).allSatisfy { identical($0, $1) })
        #expect(try await store.verify().isClean)
    }

    /// `WriteContext.update(_:id:_:)` changes one document and its index entries; `false` for an id or a
    /// collection that is not there.
    @Test func updatingOneDocumentByID() async throws {
        var generator = Generator(seed: 0x0DA7_E1D0)
        var documents = generator.documents(count: 30)
        let (store, dir) = try await Stores.make(documents)
        defer { _ = dir }
        let changes: [FieldChange] = [.set("g", .string("solo")), .push("tags", .string("solo")), .unset("u"), .set("m.a", .int(1))]
        let (found, missing, noCollection) = try await store.write { ctx in
            (try ctx.update("indexed", id: .int(7), changes), try ctx.update("indexed", id: .int(70), changes),
             try ctx.update("nowhere", id: .int(7), changes))
        }
        #expect(found && !missing && !noCollection)
        let oldU = lookup(documents[7]!, "u") ?? .int(-1)
        documents[7] = try applying(changes, to: documents[7]!)
        let stored = try await snapshot(store).indexed
        #expect(differences(stored, documents) == nil, "\(differences(stored, documents) ?? "")")
        let (byG, byTag, byU) = try await store.read { ctx in
            (try Query<DocumentValue>("indexed").include(.compare("g", .equal, .string("solo"))).ids(in: ctx),
             try Query<DocumentValue>("indexed").include(.contains("tags", .string("solo"))).ids(in: ctx),
             try Query<DocumentValue>("indexed").include(.compare("u", .equal, oldU)).ids(in: ctx))
        }
        #expect(byG == [.int(7)] && byTag == [.int(7)] && byU.isEmpty)
        #expect(try await store.verify().isClean)
    }

    /// An increment of the same field by integers, Doubles, of a missing or nil field; a push onto nil; a pull of
    /// every element equal as a key (3 and 3.0, "é" and "e\u{301}").
    @Test func incrementPushAndPullFollowTheirRules() async throws {
        let (store, dir) = try await Stores.make([
            1: .object([("id", .int(1)), ("count", .int(5)), ("tags", .array([.int(3), .double(3.0), .string("\u{E9}"), .string("e\u{301}"), .string("3")]))]),
            2: .object([("id", .int(2)), ("count", .double(0.5)), ("tags", .null)]),
            3: .object([("id", .int(3)), ("count", .null)]),
            4: .object([("id", .int(4))]),
        ])
        defer { _ = dir }
        let n = try await Query<DocumentValue>("indexed").update(in: store, increment: ["count": .int(2)], push: ["tags": .string("new")])
        #expect(n == 4)
        try await store.write { ctx in
            _ = try Query<DocumentValue>("indexed").include(.compare("id", .equal, .int(1)))
                .update(in: ctx, [.pull("tags", .double(3)), .pull("tags", .string("e\u{301}")), .increment("count", .double(0.25))])
        }
        let stored = try await snapshot(store).indexed
        #expect(lookup(stored[0], "count") == .double(7.25))
        #expect(lookup(stored[0], "tags") == .array([.string("3"), .string("new")]))
        #expect(lookup(stored[1], "count") == .double(2.5))
        #expect(lookup(stored[1], "tags") == .array([.string("new")]))
        #expect(lookup(stored[2], "count") == .int(2))
        #expect(lookup(stored[3], "count") == .int(2))
        #expect(lookup(stored[3], "tags") == .array([.string("new")]))
        #expect(try await store.verify().isClean)
        let refused: [FieldChange] = [.push("count", .int(1)), .pull("count", .int(1)), .increment("tags", .int(1)),
                                      .increment("count", .bool(true)), .set("count.deeper", .int(1))]
        for change in refused {
            await expectError(.invalidUpdate) { _ = try await Query<DocumentValue>("indexed").update(in: store, [change]) }
        }
        #expect(try await snapshot(store).indexed.elementsEqual(stored, by: identical))
    }

    /// An Int64 that an increment takes past Int64.min is an overflow; the store is left as it was.
    @Test func incrementBelowInt64MinIsAnOverflow() async throws {
        let (store, dir) = try await Stores.make([
            1: .object([("id", .int(1)), ("count", .int(0))]),
            2: .object([("id", .int(2)), ("count", .int(Int64.min + 3))]),
        ])
        defer { _ = dir }
        let before = try await snapshot(store)
        await expectError(.overflow, mentions: ["count"]) {
            _ = try await Query<DocumentValue>("indexed").update(in: store, increment: ["count": .int(-4)])
        }
        #expect(try await snapshot(store).indexed.elementsEqual(before.indexed, by: identical))
    }

    /// An increment past Int64.max is an overflow too, and must leave the store as it was: a typed model's `Int`
    /// field must still decode afterwards.
    @Test func incrementPastInt64MaxIsAnOverflow() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = [Person(name: "Ann", age: Int.max - 2), Person(name: "Bo", age: 40)]
        try await store.insert(contentsOf: people)
        await expectError(.overflow, mentions: ["age"]) {
            _ = try await Query<DocumentValue>("people").update(in: store, increment: ["age": .int(5)])
        }
        await expectError(.overflow) {
            _ = try await Query<DocumentValue>("people").update(in: store, [.increment("age", .int(Int64.max))])
        }
        let stored = try await Person.query().sortBy(\.age).results(in: store)
        #expect(stored.map(\.age) == [40, Int.max - 2])
    }

    /// Setting a field to NaN (or an increment that makes NaN) stores NaN.
    @Test func settingNaNStoresNaN() async throws {
        let (store, dir) = try await Stores.make([1: .object([("id", .int(1)), ("count", .double(.infinity))])])
        defer { _ = dir }
        for change in [FieldChange.set("x", .double(.nan)), .increment("count", .double(-.infinity))] {
            do { _ = try await Query<DocumentValue>("indexed").update(in: store, [change]) } catch {
                Issue.record(Comment(rawValue: "\(change): \(error)"))
            }
        }
        let stored = try await snapshot(store).indexed
        #expect(lookup(stored[0], "x").map(isNaN) == true, "\(stored[0])")
        #expect(lookup(stored[0], "count").map(isNaN) == true, "\(stored[0])")
    }

    /// The typed closure form, on `Person`: every match changed as Swift changes it, every index right.
    @Test func typedClosureUpdatesChangeTheMatchesAsSwiftDoes() async throws {
        let seed: UInt64 = 0x0DA7_E7E9
        var rng = SeededGenerator(seed: seed)
        let cities = ["Oslo", "Bergen", "Troms\u{F8}", "\u{E9}", "e\u{301}"]
        var people: [UUID: Person] = [:]
        for i in 0..<150 {
            let p = Person(name: "p\(i)", age: Int.random(in: 0...90, using: &rng), city: cities.randomElement(using: &rng)!,
                           email: Bool.random(using: &rng) ? "p\(i)@x" : nil,
                           tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in ["a", "b", "c"].randomElement(using: &rng)! })
            people[p.id] = p
        }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: Array(people.values))

        for round in 0..<40 {
            let lower = Int.random(in: 0...80, using: &rng)
            let city = cities.randomElement(using: &rng)!
            let tag = ["a", "b", "c"].randomElement(using: &rng)!
            let which = Int.random(in: 0...2, using: &rng)
            let upper = lower + 8
            let query: Query<Person> = which == 0 ? Person.include(#Predicate { $0.age >= lower && $0.age < upper })
                : which == 1 ? Person.include(#Predicate { $0.city == city }) : Person.include(#Predicate { $0.tags.contains(tag) })
            let matches: (Person) -> Bool = which == 0 ? { $0.age >= lower && $0.age < upper }
                : which == 1 ? { $0.city == city } : { $0.tags.contains(tag) }
            let change = PersonChange.random(using: &rng, cities: cities)
            let matched = people.values.filter(matches)
            var after = people
            for p in matched { change.apply(to: &after[p.id]!) }
            let emails = after.values.compactMap(\.email)
            let conflict = Set(emails).count != emails.count
            let context = "seed \(seed), round \(round): \(query) \(change)"

            if conflict {
                let before = try await store.all(Person.self)
                await expectError(.uniqueViolation) { _ = try await query.update(in: store) { change.apply(to: &$0) } }
                #expect(try await store.all(Person.self) == before, "\(context): a refused update changed the store")
            } else {
                let n = try await query.update(in: store) { change.apply(to: &$0) }
                #expect(n == matched.count, "\(context): \(n) matched, expected \(matched.count)")
                people = after
            }
            let stored = try await store.all(Person.self)
            #expect(stored.sorted { $0.id.uuidString < $1.id.uuidString } == people.values.sorted { $0.id.uuidString < $1.id.uuidString },
                    "\(context): the stored people differ from the model")
            // Through each index: age range, city and age, email, tags.
            let (a, c, t, e) = (Int.random(in: 0...90, using: &rng), cities.randomElement(using: &rng)!,
                                ["a", "b", "c", "z"].randomElement(using: &rng)!, "p\(Int.random(in: 0..<150, using: &rng))@x")
            let found = try await store.read { ctx in
                [Set(try Person.include(#Predicate { $0.age > a }).ids(in: ctx)),
                 Set(try Person.include(#Predicate { $0.city == c && $0.age <= a }).ids(in: ctx)),
                 Set(try Person.include(#Predicate { $0.tags.contains(t) }).ids(in: ctx)),
                 Set(try Person.include(#Predicate { $0.email == e }).ids(in: ctx))]
            }
            let want = [Set(people.values.filter { $0.age > a }.map(\.id)),
                        Set(people.values.filter { $0.city == c && $0.age <= a }.map(\.id)),
                        Set(people.values.filter { $0.tags.contains(t) }.map(\.id)),
                        Set(people.values.filter { $0.email == e }.map(\.id))]
            #expect(found == want, "\(context): queries through the indexes disagree with the model")
            let report = try await store.verify()
            #expect(report.isClean, "\(context): \(report)")
        }
    }

    /// A typed update of a sorted slice changes exactly that slice.
    @Test func aTypedUpdateOfASliceChangesExactlyTheSlice() async throws {
        var rng = SeededGenerator(seed: 0x0DA7_E511)
        let people = (0..<80).map { i in Person(name: "p\(i)", age: Int.random(in: 0...30, using: &rng)) }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: people)
        let n = try await Person.sortBy(\.age, order: .reverse)[5..<17].update(in: store) { $0.city = "Sliced" }
        #expect(n == 12)
        // Ties in age come in id order, as the query's results do.
        let order = try await Person.sortBy(\.age, order: .reverse).ids(in: store)
        let sliced = Set(order[5..<17])
        let stored = try await store.all(Person.self)
        #expect(Set(stored.filter { $0.city == "Sliced" }.map(\.id)) == sliced)
        #expect(stored.filter { !sliced.contains($0.id) }.allSatisfy { $0.city == "Oslo" })
        #expect(try await Person.include(#Predicate { $0.city == "Sliced" }).count(in: store) == 12)
        #expect(try await store.verify().isClean)
    }

    /// A closure that changes the id, or throws, stops the update: nothing is written.
    @Test func aClosureThatChangesTheIDOrThrowsWritesNothing() async throws {
        struct Stop: Error {}
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<20).map { Person(name: "p\($0)", age: $0, email: "p\($0)@x") })
        let before = try await store.all(Person.self)
        await expectError(.invalidUpdate) {
            _ = try await Person.include(#Predicate { $0.age >= 10 }).update(in: store) { $0.age += 1; $0.id = UUID() }
        }
        #expect(try await store.all(Person.self) == before)
        let seen = Counter()
        await #expect(throws: Stop.self) {
            _ = try await Person.query().update(in: store) { p in
                p.city = "Bergen"
                if seen.next() == 5 { throw Stop() }
            }
        }
        #expect(try await store.all(Person.self) == before)
        await expectError(.uniqueViolation) {
            _ = try await Person.include(#Predicate { $0.age < 3 }).update(in: store) { $0.email = "same@x" }
        }
        #expect(try await store.all(Person.self) == before)
        #expect(try await store.verify().isClean)
    }
}

/// A count shared with a `@Sendable` closure.
private final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}

/// A change the typed closure makes.
private enum PersonChange: Sendable, CustomStringConvertible {
    case move(String)
    case age(Int)
    case tag(String)
    case untag(String)
    case email(String?)
    case rename(String)

    static func random(using rng: inout SeededGenerator, cities: [String]) -> PersonChange {
        switch Int.random(in: 0...6, using: &rng) {
        case 0: return .move(cities.randomElement(using: &rng)!)
        case 1, 2: return .age(Int.random(in: -5...5, using: &rng))
        case 3: return .tag(["a", "b", "c", "d"].randomElement(using: &rng)!)
        case 4: return .untag(["a", "b", "c"].randomElement(using: &rng)!)
        case 5: return .email(Bool.random(using: &rng) ? nil : "p\(Int.random(in: 0..<200, using: &rng))@x")
        default: return .rename("n\(Int.random(in: 0...9, using: &rng))")
        }
    }

    func apply(to p: inout Person) {
        switch self {
        case .move(let c): p.city = c
        case .age(let d): p.age += d
        case .tag(let t): p.tags.append(t)
        case .untag(let t): p.tags.removeAll { $0 == t }
        case .email(let e): p.email = e
        case .rename(let n): p.name = n
        }
    }

    var description: String {
        switch self {
        case .move(let c): "{ $0.city = \(c) }"
        case .age(let d): "{ $0.age += \(d) }"
        case .tag(let t): "{ $0.tags.append(\(t)) }"
        case .untag(let t): "{ $0.tags.removeAll { $0 == \(t) } }"
        case .email(let e): "{ $0.email = \(e ?? "nil") }"
        case .rename(let n): "{ $0.name = \(n) }"
        }
    }
}
