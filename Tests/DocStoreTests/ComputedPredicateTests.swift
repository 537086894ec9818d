import Foundation
import Testing
@testable import DocStore

// Predicates written the way Swift developers write them over optionals and numbers (`??`, `?.`, `flatMap`, `!`,
// the ternary, arithmetic, ranges, counts) are evaluated on the stored bytes, and give Foundation's answers:
// random documents and constants, each predicate run on a collection with indexes and on one without, and compared
// with `Predicate.evaluate` on the same models (a throw, as for `nil!`, counts as no match).

// MARK: Models

private struct FlightRow: Sendable {
    var id: Int
    var depDelay: Int?
    var arrDelay: Int?
    var distance: Int
    var hour: Int
    var airTime: Double?
    var score: Double
    var dest: String
    var tailnum: String?
    var tags: [String]
}

private protocol FlightModel: Document, Equatable where ID == Int {
    var id: Int { get }
    var depDelay: Int? { get }
    var arrDelay: Int? { get }
    var distance: Int { get }
    var hour: Int { get }
    var airTime: Double? { get }
    var score: Double { get }
    var dest: String { get }
    var tailnum: String? { get }
    var tags: [String] { get }
    init(_ row: FlightRow)
}

private struct IndexedFlight: FlightModel {
    var id: Int
    var depDelay: Int?
    var arrDelay: Int?
    var distance: Int
    var hour: Int
    var airTime: Double?
    var score: Double
    var dest: String
    var tailnum: String?
    var tags: [String]
    static let collection = "flights_indexed"
    static let indexes: [IndexSpec<IndexedFlight>] = [
        .index("depDelay", \.depDelay), .index("distance", \.distance), .index("dest", \.dest),
        .index("tailnum", \.tailnum), .multi("tags", \.tags), .index("hour", \.hour),
    ]
    init(_ r: FlightRow) {
        (id, depDelay, arrDelay, distance, hour, airTime, score, dest, tailnum, tags) =
            (r.id, r.depDelay, r.arrDelay, r.distance, r.hour, r.airTime, r.score, r.dest, r.tailnum, r.tags)
    }
}

extension PlainFlight {
    /// Not a stored field: a predicate reading it is evaluated by Foundation on the decoded document.
    var computedTail: String? { tailnum.map { $0 + "!" } }
}

private struct PlainFlight: FlightModel {
    var id: Int
    var depDelay: Int?
    var arrDelay: Int?
    var distance: Int
    var hour: Int
    var airTime: Double?
    var score: Double
    var dest: String
    var tailnum: String?
    var tags: [String]
    static let collection = "flights_plain"
    init(_ r: FlightRow) {
        (id, depDelay, arrDelay, distance, hour, airTime, score, dest, tailnum, tags) =
            (r.id, r.depDelay, r.arrDelay, r.distance, r.hour, r.airTime, r.score, r.dest, r.tailnum, r.tags)
    }
}

/// The constants of one round of predicates.
private struct Constants {
    var a: Int, b: Int, x: Int, h: Int, n: Int, m: Int
    var d: Double
    var s: String, p: String

    init(using rng: inout SeededGenerator) {
        a = Int.random(in: -30...60, using: &rng)
        b = a + Int.random(in: 0...400, using: &rng)
        x = Int.random(in: -20...80, using: &rng)
        h = Int.random(in: 0...23, using: &rng)
        n = Int.random(in: 0...4, using: &rng)
        m = Int.random(in: 1...9, using: &rng)
        d = Double(Int.random(in: 0...400, using: &rng)) / 2
        s = ["A", "B", "X", "", "AB", "é", "e\u{301}", "\n", "A\r", "XAB"].randomElement(using: &rng)!
        p = ["N1", "N", "", "N2", "n"].randomElement(using: &rng)!
    }
}

/// Every form, written as a developer writes it.
private func predicates<F: FlightModel>(_ type: F.Type, _ c: Constants) -> [(String, Predicate<F>)] {
    let (a, b, x, h, n, m, d, s, p) = (c.a, c.b, c.x, c.h, c.n, c.m, c.d, c.s, c.p)
    let negativeH = -h
    let negativeM = -m
    let (yes, no, pz, nz) = (true, false, 0.0, -0.0)
    return [
        // A part that stops the evaluation (`nil!`) before a constant decides: the constant does not hide it.
        ("stop before a deciding constant", #Predicate<F> { $0.depDelay! > x || yes }),
        ("stop before false, negated", #Predicate<F> { !($0.depDelay! > x && no) }),
        // Nil tests inside `!` guard a part that stops the evaluation.
        ("guarded stop, negated", #Predicate<F> { !($0.depDelay != nil && $0.arrDelay! > 0 && ($0.depDelay ?? 0) > 5) }),
        ("-0.0 is not 0.0 when dividing", #Predicate<F> { $0.hour > 0 && $0.score / pz > 0 && $0.score / nz > 0 }),
        ("coalesce", #Predicate<F> { ($0.depDelay ?? 0) > x }),
        ("coalesce <=", #Predicate<F> { ($0.depDelay ?? 0) <= x }),
        ("coalesce !=", #Predicate<F> { ($0.depDelay ?? 0) != x }),
        ("coalesce ==", #Predicate<F> { ($0.depDelay ?? 7) == x }),
        ("coalesce != its default", #Predicate<F> { ($0.depDelay ?? x) != x }),
        ("optional range", #Predicate<F> { $0.depDelay != nil && ($0.depDelay ?? 0) >= a && ($0.depDelay ?? 0) <= a + 5 }),
        ("closed range", #Predicate<F> { (a...b).contains($0.distance) }),
        ("half-open range", #Predicate<F> { (a..<b).contains($0.distance) }),
        ("range in a negation", #Predicate<F> { !(a..<b).contains($0.distance) && $0.hour > 3 }),
        ("two fields", #Predicate<F> { ($0.arrDelay ?? 0) > ($0.depDelay ?? 0) + x }),
        ("two fields, plain", #Predicate<F> { $0.distance > $0.hour * 100 }),
        ("ternary", #Predicate<F> { $0.depDelay == nil ? $0.hour < h : $0.depDelay! > x }),
        ("flatMap ?? false", #Predicate<F> { $0.arrDelay.flatMap { $0 > x } ?? false }),
        ("flatMap == true", #Predicate<F> { $0.airTime.flatMap { $0 > d } == true }),
        ("flatMap != ?? false", #Predicate<F> { $0.arrDelay.flatMap { $0 != x } ?? false }),
        ("flatMap isEmpty == true", #Predicate<F> { $0.tailnum.flatMap { $0.isEmpty } == true }),
        ("flatMap == false", #Predicate<F> { $0.arrDelay.flatMap { $0 < x } == false }),
        ("string contains", #Predicate<F> { $0.dest.contains(s) }),
        ("arithmetic", #Predicate<F> { $0.distance * 2 > x * 10 }),
        ("subtraction", #Predicate<F> { $0.distance - $0.hour >= b }),
        ("force unwrap", #Predicate<F> { $0.tailnum != nil && $0.tailnum!.starts(with: p) }),
        ("force unwrap, negated", #Predicate<F> { !($0.depDelay! > x) }),
        ("force unwrap, negated prefix", #Predicate<F> { !$0.tailnum!.starts(with: p) }),
        ("force unwrap, negated contains", #Predicate<F> { !$0.tailnum!.contains(s) }),
        ("force unwrap after ||", #Predicate<F> { $0.depDelay == nil || $0.depDelay! > x }),
        ("modulo with an index", #Predicate<F> { $0.distance % m == 0 && $0.dest == s }),
        ("integer division", #Predicate<F> { $0.distance / m == a }),
        ("optional count", #Predicate<F> { ($0.tailnum?.count ?? 0) > n }),
        ("array count", #Predicate<F> { $0.tags.count > n }),
        ("array isEmpty", #Predicate<F> { $0.tags.isEmpty }),
        ("string isEmpty", #Predicate<F> { !$0.dest.isEmpty && $0.hour > h }),
        ("unary minus", #Predicate<F> { -$0.hour < negativeH }),
        ("double division", #Predicate<F> { $0.score / 2.0 > d }),
        ("two doubles divided", #Predicate<F> { $0.airTime != nil && $0.score / $0.airTime! > 1 }),
        ("double arithmetic", #Predicate<F> { ($0.airTime ?? 0.5) * 2 + 1 < d }),
        ("nested ternary", #Predicate<F> { ($0.hour > h ? $0.distance : -$0.distance) > a }),
        ("constant ternary", #Predicate<F> { a > x ? $0.hour < h : $0.distance > b }),
        ("contains(where:)", #Predicate<F> { $0.tags.contains { $0 == "b" } }),
        ("contains(where:) ordered", #Predicate<F> { $0.tags.contains { $0 > "a" } && $0.hour > h }),
        ("contains(where:) prefix", #Predicate<F> { $0.tags.contains { $0.starts(with: "c") } }),
        ("allSatisfy", #Predicate<F> { $0.tags.allSatisfy { $0 != "c" } }),
        ("allSatisfy count", #Predicate<F> { $0.tags.allSatisfy { $0.count == 1 && $0 < "c" } }),
        ("not contains(where:)", #Predicate<F> { !$0.tags.contains { $0 == "a" || $0 == "b" } }),
        // Arithmetic on an Int field with constants, read as a range of the field (an index serves it).
        ("add, bounded", #Predicate<F> { $0.distance + a > b }),
        ("subtract, bounded", #Predicate<F> { $0.distance - a <= b && $0.hour >= h }),
        ("multiply, bounded", #Predicate<F> { $0.distance * m >= b }),
        ("multiply by a negative", #Predicate<F> { $0.hour * negativeM > negativeH * m - x }),
        ("multiply, equal", #Predicate<F> { $0.distance * m == b }),
        ("multiply, not equal", #Predicate<F> { $0.distance * m != b && $0.hour > h }),
        ("unwrapped add", #Predicate<F> { $0.depDelay! + a < x }),
        ("constant first", #Predicate<F> { b < m * $0.distance }),
        ("bounded, negated", #Predicate<F> { !($0.distance * m < b) }),
        ("filter count", #Predicate<F> { $0.tags.filter { $0 != "a" }.count >= n }),
        ("filter count of two", #Predicate<F> { $0.tags.filter { $0 == "b" || $0.starts(with: "c") }.count == 2 }),
        ("filter isEmpty", #Predicate<F> { $0.tags.filter { $0 > "a" }.isEmpty && $0.hour < h }),
        ("filter count in arithmetic", #Predicate<F> { $0.tags.filter { $0 < "c" }.count * 10 > $0.hour }),
    ]
}

@Suite struct ComputedPredicateTests {
    private static func rows(count: Int, using rng: inout SeededGenerator) -> [FlightRow] {
        let dests = ["AB", "BX", "XA", "", "é", "e\u{301}x", "ABX", "A\r\nB", "XXABX"]
        let tails = ["N1", "N12", "N2", "n1", "", "M3"]
        return (1...count).map { id in
            FlightRow(id: id,
                      depDelay: Bool.random(using: &rng) ? nil : Int.random(in: -30...90, using: &rng),
                      arrDelay: Int.random(in: 0..<4, using: &rng) == 0 ? nil : Int.random(in: -40...100, using: &rng),
                      distance: Int.random(in: 0...500, using: &rng),
                      hour: Int.random(in: 0...23, using: &rng),
                      airTime: Bool.random(using: &rng) ? nil : Double(Int.random(in: 0...800, using: &rng)) / 4,
                      score: Double(Int.random(in: -100...900, using: &rng)) / 2,
                      dest: dests.randomElement(using: &rng)!,
                      tailnum: Bool.random(using: &rng) ? nil : tails.randomElement(using: &rng)!,
                      tags: (0..<Int.random(in: 0...4, using: &rng)).map { _ in ["a", "b", "c"].randomElement(using: &rng)! })
        }
    }

    private func check<F: FlightModel>(_ type: F.Type, rows: [FlightRow], constants: [Constants], store: DocStore,
                                       wholeDoublesAsIntegers: Bool = false) async throws {
        let models = rows.map(F.init)
        if wholeDoublesAsIntegers {
            // As a document written without its Swift type may hold them: `Double` fields read back from integers.
            try await store.prepare(F.self)
            try await store.write { tx in
                for row in rows { try tx.insert(Self.document(row), into: F.collection) }
            }
            #expect(try await Query<F>().results(in: store) == models)
        } else {
            try await store.insert(contentsOf: models)
        }
        for c in constants {
            for (name, predicate) in predicates(F.self, c) {
                let expected = models.filter { (try? predicate.evaluate($0)) ?? false }.map(\.id)
                let query = F.include(predicate)
                #expect(try await query.ids(in: store) == expected, "\(F.self) \(name) with \(c)")
                #expect(try await query.count(in: store) == expected.count, "\(F.self) count \(name) with \(c)")
                // `exclude` keeps what the predicate does not match, including where it throws (`nil!`).
                let kept = Set(expected)
                #expect(try await F.exclude(predicate).ids(in: store) == models.map(\.id).filter { !kept.contains($0) },
                        "\(F.self) exclude \(name) with \(c)")
            }
        }
    }

    @Test(arguments: [1, 2, 3])
    func computedPredicatesAnswerAsFoundationDoes(seed: UInt64) async throws {
        var rng = SeededGenerator(seed: seed)
        let rows = Self.rows(count: 300, using: &rng)
        let constants = (0..<6).map { _ in Constants(using: &rng) }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await check(IndexedFlight.self, rows: rows, constants: constants, store: store)
        try await check(PlainFlight.self, rows: rows, constants: constants, store: store)
    }

    private static func document(_ r: FlightRow) -> DocumentValue {
        func number(_ d: Double) -> DocumentValue { d.rounded() == d && abs(d) < 1e15 ? .int(Int64(d)) : .double(d) }
        func optional<T>(_ v: T?, _ f: (T) -> DocumentValue) -> DocumentValue { v.map(f) ?? .null }
        return .object([
            ("id", .int(Int64(r.id))), ("depDelay", optional(r.depDelay) { .int(Int64($0)) }),
            ("arrDelay", optional(r.arrDelay) { .int(Int64($0)) }), ("distance", .int(Int64(r.distance))),
            ("hour", .int(Int64(r.hour))), ("airTime", optional(r.airTime, number)), ("score", number(r.score)),
            ("dest", .string(r.dest)), ("tailnum", optional(r.tailnum) { .string($0) }),
            ("tags", .array(r.tags.map { .string($0) })),
        ])
    }

    /// A `Double` field whose documents hold integers computes as Swift computes with the decoded `Double`
    /// (`3 / 2` is 1.5).
    @Test func wholeDoublesStoredAsIntegersComputeAsDoubles() async throws {
        var rng = SeededGenerator(seed: 7)
        let rows = Self.rows(count: 300, using: &rng)
        let constants = (0..<6).map { _ in Constants(using: &rng) }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await check(PlainFlight.self, rows: rows, constants: constants, store: store, wholeDoublesAsIntegers: true)
    }

    /// An unsigned integer above `Int64.max` (stored without a Swift type) is a number in arithmetic, computed as a
    /// `Double` as the shell's other numbers beyond `Int` are.
    @Test func anUnsignedAboveInt64MaxIsANumberInArithmetic() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { tx in
            for (id, n) in [(1, DocumentValue.uint(.max)), (2, .int(5)), (3, .double(2.5)), (4, .string("x"))] {
                try tx.insert(.object([("id", .int(Int64(id))), ("n", n)]), into: "numbers")
            }
        }
        func ids(_ filter: Filter) async throws -> [Int64] {
            try await Query<DocumentValue>("numbers").include(filter).results(in: store).compactMap {
                if case .int(let id)? = $0[field: "id"] { return id } else { return nil }
            }
        }
        #expect(try await ids(.compare(.field("n") - .literal(.int(1)), .greater, .literal(.double(1e19)))) == [1])
        #expect(try await ids(.compare(.field("n") / .literal(.int(2)), .greaterOrEqual, .literal(.int(2)))) == [1, 2])
        #expect(try await ids(.compare(-.field("n"), .less, .literal(.int(0)))) == [1, 2, 3])
    }

    /// The byte search under `String.contains`'s ASCII path, against a plain search.
    @Test func byteSearchFindsWhatAPlainSearchFinds() {
        var rng = SeededGenerator(seed: 12)
        for _ in 0..<5_000 {
            let haystack = (0..<Int.random(in: 0...12, using: &rng)).map { _ in UInt8.random(in: 97...99, using: &rng) }
            let needle = (0..<Int.random(in: 1...4, using: &rng)).map { _ in UInt8.random(in: 97...99, using: &rng) }
            let expected = haystack.count >= needle.count
                && (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
            let found = haystack.withUnsafeBytes { h in needle.withUnsafeBytes { ValueComparison.occurs($0, in: h) } }
            #expect(found == expected, "\(needle) in \(haystack)")
        }
    }

    /// A conjunct said twice is kept once, and a nil test another conjunct answers is dropped, with or without
    /// a nil test among the conjuncts (two ways through the simplification).
    @Test func conjunctsSaidTwiceOrImpliedAreKeptOnce() {
        let (five, oslo, mail) = (5, "Oslo", "a@b")
        let age = Condition.compare("age", .greater, .int(5)), city = Condition.compare("city", .equal, .string("Oslo"))
        let email = Condition.compare("email", .equal, .string("a@b"))
        #expect(Query<Person>.condition(#Predicate { $0.age > five && $0.city == oslo && $0.age > five })
                == .and([age, city]))
        #expect(Query<Person>.condition(#Predicate { $0.age > five && $0.age > five }) == age)
        #expect(Query<Person>.condition(#Predicate { $0.email != nil && $0.email == mail && $0.age > five })
                == .and([email, age]))
        #expect(Query<Person>.condition(#Predicate { $0.email != nil && $0.age > five && $0.age > five })
                == .and([.compare("email", .notEqual, .null), age]))
        #expect(Query<Person>.condition(#Predicate { $0.age > five && $0.city == oslo }) == .and([age, city]))
        // `(email ?? "") <= x` is `email == nil || email <= x`: the nil test drops that disjunct, and what is left
        // then answers the nil test.
        #expect(Query<Person>.condition(#Predicate { $0.email != nil && ($0.email ?? "") <= mail })
                == .compare("email", .lessOrEqual, .string("a@b")))
    }

    /// None of the forms above is left to Foundation on the decoded document.
    @Test func noFormIsEvaluatedOnTheDecodedDocument() {
        var rng = SeededGenerator(seed: 9)
        for (name, predicate) in predicates(IndexedFlight.self, Constants(using: &rng)) {
            let condition = Query<IndexedFlight>.condition(predicate)
            #expect(!condition.needsDecoding, "\(name) is opaque: \(condition)")
        }
    }

    /// Parts left to Foundation on the decoded document (a closure over an array's elements that reads the
    /// document too, a computed property) answer as Foundation does; where Foundation throws (`nil!`) the document
    /// does not match, as elsewhere, and `exclude` keeps it.
    @Test func partsLeftToFoundationAnswerAsFoundationDoes() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: 5)
        let models = Self.rows(count: 200, using: &rng).map(PlainFlight.init)
        try await store.insert(contentsOf: models)
        for predicate in [#Predicate<PlainFlight> { flight in flight.tags.contains { $0.count < flight.hour } },
                          #Predicate<PlainFlight> { $0.computedTail!.count > 2 || $0.hour > 20 }] {
            #expect(Query<PlainFlight>.condition(predicate).needsDecoding)
            let expected = models.filter { (try? predicate.evaluate($0)) ?? false }.map(\.id)
            #expect(try await PlainFlight.include(predicate).ids(in: store) == expected)
            let kept = Set(expected)
            #expect(try await PlainFlight.exclude(predicate).ids(in: store) == models.map(\.id).filter { !kept.contains($0) })
        }
    }

    /// A range whose lower bound is above its upper one holds nothing (Foundation's own evaluation stops the process
    /// there, as Swift does making such a range): no document matches it, and none is excluded by it.
    @Test func aReversedRangeHoldsNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: 6)
        let models = Self.rows(count: 200, using: &rng).map(IndexedFlight.init)
        try await store.insert(contentsOf: models)
        let (a, b, x) = (40, 10, 30)
        let reversed = [
            #Predicate<IndexedFlight> { (a...b).contains($0.distance) },
            #Predicate<IndexedFlight> { (a..<b).contains($0.distance) },
            #Predicate<IndexedFlight> { (a...b).contains($0.hour) },
            #Predicate<IndexedFlight> { ($0.distance...$0.hour).contains(x) && $0.distance > $0.hour },
        ]
        for predicate in reversed {
            #expect(try await IndexedFlight.include(predicate).count(in: store) == 0)
            #expect(try await IndexedFlight.exclude(predicate).count(in: store) == models.count)
        }
    }

    /// `(x ?? c) op k` is read as a condition on `x`, which an index on `x` answers.
    @Test func aCoalescedFieldUsesItsIndex() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: 4)
        try await store.insert(contentsOf: Self.rows(count: 200, using: &rng).map(IndexedFlight.init))
        let x = 50
        let coalesced = try await IndexedFlight.include(#Predicate { ($0.depDelay ?? 0) > x }).explain(in: store)
        #expect(coalesced.index == "depDelay", "\(coalesced)")
        let ranged = try await IndexedFlight.include(#Predicate { (10...20).contains($0.distance) }).explain(in: store)
        #expect(ranged.index == "distance", "\(ranged)")
        let a = 10
        let optionalRange = try await IndexedFlight.include(#Predicate {
            $0.depDelay != nil && ($0.depDelay ?? 0) >= a && ($0.depDelay ?? 0) <= a + 5
        }).explain(in: store)
        #expect(optionalRange.index == "depDelay", "\(optionalRange)")
        let flatMapped = try await IndexedFlight.include(#Predicate { $0.depDelay.flatMap { $0 > x } ?? false }).explain(in: store)
        #expect(flatMapped.index == "depDelay", "\(flatMapped)")
        let y = 3
        let chosen = try await IndexedFlight.include(#Predicate { y > 2 ? $0.distance == 7 : $0.hour == 1 }).explain(in: store)
        #expect(chosen.index == "distance", "\(chosen)")
        for explanation in [coalesced, ranged, optionalRange, flatMapped, chosen] {
            #expect(!explanation.decodesForFilter)
            // The index answers the whole condition: nothing is left to check on the documents.
            #expect(explanation.plan.residual == .constant(true), "\(explanation)")
        }
    }
}

/// `x + a op k` and `x * a op k` on an `Int` field are ranges of the field: an index serves them, and a value
/// whose arithmetic would overflow (where Swift traps) is left out, as it is when computed.
@Suite struct IntegerBoundsTests {
    private struct Counter: Document, Equatable {
        var id: Int
        var n: Int
        static let collection = "counters"
        static let indexes: [IndexSpec<Counter>] = [.index("n", \.n)]
    }

    @Test func arithmeticOnAnIndexedIntFieldUsesItsIndex() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (1...300).map { Counter(id: $0, n: $0 - 150) })
        let (a, k) = (7, 40)
        for predicate in [#Predicate<Counter> { $0.n * 2 > k }, #Predicate<Counter> { $0.n + a <= k },
                          #Predicate<Counter> { $0.n - a == k }, #Predicate<Counter> { k < 3 * $0.n }] {
            let explanation = try await Counter.include(predicate).explain(in: store)
            #expect(explanation.index == "n", "\(explanation)")
            #expect(explanation.plan.residual == .constant(true), "\(explanation)")
        }
    }

    /// Near the ends of Int, the range leaves out what would overflow; `exclude` keeps it, as for `nil!`.
    @Test func aValueWhoseArithmeticOverflowsIsLeftOut() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let values = [Int.min, Int.min + 1, Int.min / 2 - 1, Int.min / 2, -3, 0, 3, Int.max / 2, Int.max / 2 + 1,
                      Int.max - 5, Int.max - 4, Int.max]
        try await store.insert(contentsOf: values.enumerated().map { Counter(id: $0.offset + 1, n: $0.element) })
        func ids(_ predicate: Predicate<Counter>) async throws -> [Int] {
            try await Counter.include(predicate).results(in: store).map(\.n)
        }
        let (five, zero, two, minusTwo) = (5, 0, 2, -2)
        // What Swift computes, with an overflow as no match.
        func expected(_ f: (Int) -> (Int, Bool), _ holds: (Int) -> Bool) -> [Int] {
            values.filter { let (r, o) = f($0); return !o && holds(r) }
        }
        #expect(try await ids(#Predicate { $0.n + five > zero }) == expected({ $0.addingReportingOverflow(5) }, { $0 > 0 }))
        #expect(try await ids(#Predicate { $0.n - five < zero }) == expected({ $0.subtractingReportingOverflow(5) }, { $0 < 0 }))
        #expect(try await ids(#Predicate { $0.n * two >= zero }) == expected({ $0.multipliedReportingOverflow(by: 2) }, { $0 >= 0 }))
        #expect(try await ids(#Predicate { $0.n * minusTwo <= zero }) == expected({ $0.multipliedReportingOverflow(by: -2) }, { $0 <= 0 }))
        #expect(try await ids(#Predicate { $0.n * two != zero }) == expected({ $0.multipliedReportingOverflow(by: 2) }, { $0 != 0 }))
        let excluded = try await Counter.exclude(#Predicate { $0.n + five > zero }).results(in: store).map(\.n)
        #expect(excluded == values.filter { let (r, o) = $0.addingReportingOverflow(5); return o || r <= 0 })
    }
}
