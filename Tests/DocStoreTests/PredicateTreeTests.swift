import Foundation
import Testing
@testable import DocStore

// Random predicate trees, built from Foundation's own expression types as `#Predicate` builds them, nested to a
// few levels over every form DocStore evaluates on the stored bytes (`&&`, `||`, `!`, the ternary, comparisons of
// fields and computed values, `??`, `!`, `flatMap`, arithmetic, unary minus, ranges, counts, `isEmpty`, string
// search, closures over an array's elements), over optionals, nils and empty arrays. Each is run with indexes and
// without, and its ids compared with Foundation's `Predicate.evaluate` on the same models: Foundation is the oracle.

private protocol TreeModel: Document, Equatable where ID == Int {
    var id: Int { get }
    var a: Int? { get }
    var b: Int { get }
    var d: Double? { get }
    var e: Double { get }
    var s: String { get }
    var t: String? { get }
    var tags: [String] { get }
    init(id: Int, a: Int?, b: Int, d: Double?, e: Double, s: String, t: String?, tags: [String])
}

private struct IndexedTree: TreeModel {
    var id: Int, a: Int?, b: Int, d: Double?, e: Double, s: String, t: String?, tags: [String]
    static let collection = "trees_indexed"
    static let indexes: [IndexSpec<IndexedTree>] = [
        .index("a", \.a), .index("b", \.b), .index("e", \.e), .index("s", \.s), .index("t", \.t), .multi("tags", \.tags),
    ]
}

private struct PlainTree: TreeModel {
    var id: Int, a: Int?, b: Int, d: Double?, e: Double, s: String, t: String?, tags: [String]
    static let collection = "trees_plain"
}

/// Stored without its Swift type: nil fields missing, whole doubles written as integers.
private struct UntypedTree: TreeModel {
    var id: Int, a: Int?, b: Int, d: Double?, e: Double, s: String, t: String?, tags: [String]
    static let collection = "trees_untyped"

    var document: DocumentValue {
        func number(_ x: Double) -> DocumentValue { x.rounded() == x ? .int(Int64(x)) : .double(x) }
        var fields: [(String, DocumentValue)] = [("id", .int(Int64(id))), ("b", .int(Int64(b))), ("e", number(e)),
                                                 ("s", .string(s)), ("tags", .array(tags.map { .string($0) }))]
        if let a { fields.append(("a", .int(Int64(a)))) }
        if let d { fields.append(("d", number(d))) }
        if let t { fields.append(("t", .string(t))) }
        return .object(fields)
    }
}

/// An expression with the Swift it stands for, to name a failing predicate.
private struct Built<Output> {
    let expression: any StandardPredicateExpression<Output>
    let text: String
}

/// Builds random expressions over the fields of `M`, to a depth.
private struct TreeBuilder<M: TreeModel> {
    let root: PredicateExpressions.Variable<M>
    var rng: SeededGenerator

    private mutating func pick(_ n: Int) -> Int { Int.random(in: 0..<n, using: &rng) }
    private mutating func small() -> Int { Int.random(in: -6...6, using: &rng) }
    private mutating func text() -> String { ["", "a", "b", "ab", "é", "e\u{301}", "ba"].randomElement(using: &rng)! }

    private func field<T>(_ path: KeyPath<M, T> & Sendable, _ name: String) -> Built<T> {
        Built(expression: PredicateExpressions.KeyPath(root: root, keyPath: path), text: "$0.\(name)")
    }

    private static func value<T: Sendable & Codable>(_ v: T, _ text: String) -> Built<T> {
        Built(expression: PredicateExpressions.Value(v), text: text)
    }

    // MARK: Int

    mutating func int(_ depth: Int) -> Built<Int> {
        let leaves = 6
        switch pick(depth <= 0 ? leaves : leaves + 6) {
        case 0: return field(\.b, "b")
        case 1: let k = small(); return Self.value(k, "\(k)")
        case 2: let k = small(); return coalesce(field(\.a, "a"), Self.value(k, "\(k)"))
        case 3: return unwrap(field(\.a, "a"))
        case 4: return count(pick(2) == 0 ? string(0) : nil)
        case 5: return coalesce(optionalCount(), Self.value(0, "0"))
        case 6, 7: return arithmetic(int(depth - 1), [.add, .subtract, .multiply][pick(3)], int(depth - 1))
        case 8:
            let k = [1, 2, 3, -2, 7][pick(5)]
            return pick(2) == 0 ? divide(int(depth - 1), k) : remainder(int(depth - 1), k)
        case 9: return negate(int(depth - 1))
        case 10: return choice(bool(depth - 1), int(depth - 1), int(depth - 1))
        default: return coalesce(mapped(field(\.a, "a")), Self.value(1, "1"))
        }
    }

    private func arithmetic<T: Numeric & Sendable & Codable>(_ x: Built<T>, _ op: PredicateExpressions.ArithmeticOperator,
                                                              _ y: Built<T>) -> Built<T> {
        func make<A: StandardPredicateExpression<T>, B: StandardPredicateExpression<T>>(_ a: A, _ b: B) -> any StandardPredicateExpression<T> {
            PredicateExpressions.Arithmetic(lhs: a, rhs: b, op: op)
        }
        let symbol = op == .add ? "+" : op == .subtract ? "-" : "*"
        return Built(expression: make(x.expression, y.expression), text: "(\(x.text) \(symbol) \(y.text))")
    }

    private func divide(_ x: Built<Int>, _ k: Int) -> Built<Int> {
        func make<A: StandardPredicateExpression<Int>>(_ a: A) -> any StandardPredicateExpression<Int> {
            PredicateExpressions.IntDivision(lhs: a, rhs: PredicateExpressions.Value(k))
        }
        return Built(expression: make(x.expression), text: "(\(x.text) / \(k))")
    }

    private func remainder(_ x: Built<Int>, _ k: Int) -> Built<Int> {
        func make<A: StandardPredicateExpression<Int>>(_ a: A) -> any StandardPredicateExpression<Int> {
            PredicateExpressions.IntRemainder(lhs: a, rhs: PredicateExpressions.Value(k))
        }
        return Built(expression: make(x.expression), text: "(\(x.text) % \(k))")
    }

    private func negate<T: SignedNumeric & Sendable & Codable>(_ x: Built<T>) -> Built<T> {
        func make<A: StandardPredicateExpression<T>>(_ a: A) -> any StandardPredicateExpression<T> { PredicateExpressions.UnaryMinus(a) }
        return Built(expression: make(x.expression), text: "-\(x.text)")
    }

    private func coalesce<T>(_ x: Built<T?>, _ y: Built<T>) -> Built<T> {
        func make<A: StandardPredicateExpression<T?>, B: StandardPredicateExpression<T>>(_ a: A, _ b: B) -> any StandardPredicateExpression<T> {
            PredicateExpressions.NilCoalesce(lhs: a, rhs: b)
        }
        return Built(expression: make(x.expression, y.expression), text: "(\(x.text) ?? \(y.text))")
    }

    private func unwrap<T>(_ x: Built<T?>) -> Built<T> {
        func make<A: StandardPredicateExpression<T?>>(_ a: A) -> any StandardPredicateExpression<T> { PredicateExpressions.ForcedUnwrap(a) }
        return Built(expression: make(x.expression), text: "\(x.text)!")
    }

    private func choice<T>(_ test: Built<Bool>, _ x: Built<T>, _ y: Built<T>) -> Built<T> {
        func make<C: StandardPredicateExpression<Bool>, A: StandardPredicateExpression<T>, B: StandardPredicateExpression<T>>(
            _ c: C, _ a: A, _ b: B) -> any StandardPredicateExpression<T> {
            PredicateExpressions.Conditional(test: c, trueBranch: a, falseBranch: b)
        }
        return Built(expression: make(test.expression, x.expression, y.expression),
                     text: "(\(test.text) ? \(x.text) : \(y.text))")
    }

    /// `s.count`, or `tags.count` when `string` is nil.
    private func count(_ string: Built<String>?) -> Built<Int> {
        guard let string else {
            let tags = field(\.tags, "tags")
            func make<A: StandardPredicateExpression<[String]>>(_ a: A) -> any StandardPredicateExpression<Int> {
                PredicateExpressions.KeyPath(root: a, keyPath: \[String].count)
            }
            return Built(expression: make(tags.expression), text: "$0.tags.count")
        }
        func make<A: StandardPredicateExpression<String>>(_ a: A) -> any StandardPredicateExpression<Int> {
            PredicateExpressions.KeyPath(root: a, keyPath: \String.count)
        }
        return Built(expression: make(string.expression), text: "\(string.text).count")
    }

    /// `$0.t?.count`.
    private func optionalCount() -> Built<Int?> {
        let t = field(\.t, "t")
        func make<A: StandardPredicateExpression<String?>>(_ a: A) -> any StandardPredicateExpression<Int?> {
            PredicateExpressions.OptionalFlatMap(a) { PredicateExpressions.KeyPath(root: $0, keyPath: \String.count) }
        }
        return Built(expression: make(t.expression), text: "$0.t?.count")
    }

    /// `$0.a.flatMap { $0 * 2 - 1 }`.
    private func mapped(_ x: Built<Int?>) -> Built<Int?> {
        func make<A: StandardPredicateExpression<Int?>>(_ a: A) -> any StandardPredicateExpression<Int?> {
            PredicateExpressions.OptionalFlatMap(a) {
                PredicateExpressions.Arithmetic(lhs: PredicateExpressions.Arithmetic(lhs: $0, rhs: PredicateExpressions.Value(2), op: .multiply),
                                                rhs: PredicateExpressions.Value(1), op: .subtract)
            }
        }
        return Built(expression: make(x.expression), text: "\(x.text).flatMap { $0 * 2 - 1 }")
    }

    // MARK: Double

    mutating func double(_ depth: Int) -> Built<Double> {
        switch pick(depth <= 0 ? 4 : 8) {
        case 0: return field(\.e, "e")
        case 1: let k = Double(small()) / 2; return Self.value(k, "\(k)")
        case 2: let k = Double(small()); return coalesce(field(\.d, "d"), Self.value(k, "\(k)"))
        case 3: return unwrap(field(\.d, "d"))
        case 4, 5: return arithmetic(double(depth - 1), [.add, .subtract, .multiply][pick(3)], double(depth - 1))
        case 6:
            let (x, y) = (double(depth - 1), double(depth - 1))
            func make<A: StandardPredicateExpression<Double>, B: StandardPredicateExpression<Double>>(_ a: A, _ b: B) -> any StandardPredicateExpression<Double> {
                PredicateExpressions.FloatDivision(lhs: a, rhs: b)
            }
            return Built(expression: make(x.expression, y.expression), text: "(\(x.text) / \(y.text))")
        default: return pick(2) == 0 ? negate(double(depth - 1)) : choice(bool(depth - 1), double(depth - 1), double(depth - 1))
        }
    }

    // MARK: String

    mutating func string(_ depth: Int) -> Built<String> {
        switch pick(depth <= 0 ? 3 : 4) {
        case 0: return field(\.s, "s")
        case 1: let k = text(); return coalesce(field(\.t, "t"), Self.value(k, "\"\(k)\""))
        case 2: return unwrap(field(\.t, "t"))
        default: return choice(bool(depth - 1), string(depth - 1), string(depth - 1))
        }
    }

    // MARK: Bool

    mutating func bool(_ depth: Int) -> Built<Bool> {
        switch pick(depth <= 0 ? 9 : 14) {
        case 0: let (x, y) = (int(depth - 1), int(depth - 1)); return compare(x, y)
        case 1: let (x, y) = (double(depth - 1), double(depth - 1)); return compare(x, y)
        case 2: let (x, y) = (string(depth - 1), string(depth - 1)); return compare(x, y)
        case 3:
            let x = int(depth - 1)
            let k = small()
            return compare(x, Self.value(k, "\(k)"))
        case 4: return isNil()
        case 5: return textSearch(string(depth - 1))
        case 6: return inRange(int(depth - 1))
        case 7: return flatMapped()
        case 8: return pick(3) == 0 ? membership() : elements()
        case 9, 10:
            let (x, y) = (bool(depth - 1), bool(depth - 1))
            let and = pick(2) == 0
            func make<A: StandardPredicateExpression<Bool>, B: StandardPredicateExpression<Bool>>(_ a: A, _ b: B) -> any StandardPredicateExpression<Bool> {
                and ? PredicateExpressions.Conjunction(lhs: a, rhs: b) : PredicateExpressions.Disjunction(lhs: a, rhs: b)
            }
            return Built(expression: make(x.expression, y.expression), text: "(\(x.text) \(and ? "&&" : "||") \(y.text))")
        case 11:
            let x = bool(depth - 1)
            func make<A: StandardPredicateExpression<Bool>>(_ a: A) -> any StandardPredicateExpression<Bool> { PredicateExpressions.Negation(a) }
            return Built(expression: make(x.expression), text: "!\(x.text)")
        case 12: return choice(bool(depth - 1), bool(depth - 1), bool(depth - 1))
        default:
            let x = pick(2) == 0 ? count(string(depth - 1)) : int(depth - 1)
            let k = small()
            return compare(x, Self.value(k, "\(k)"))
        }
    }

    private mutating func compare<T: Comparable & Sendable & Codable>(_ x: Built<T>, _ y: Built<T>) -> Built<Bool> {
        let which = pick(6)
        func make<A: StandardPredicateExpression<T>, B: StandardPredicateExpression<T>>(_ a: A, _ b: B) -> any StandardPredicateExpression<Bool> {
            switch which {
            case 0: return PredicateExpressions.Equal(lhs: a, rhs: b)
            case 1: return PredicateExpressions.NotEqual(lhs: a, rhs: b)
            case 2: return PredicateExpressions.Comparison(lhs: a, rhs: b, op: .lessThan)
            case 3: return PredicateExpressions.Comparison(lhs: a, rhs: b, op: .lessThanOrEqual)
            case 4: return PredicateExpressions.Comparison(lhs: a, rhs: b, op: .greaterThan)
            default: return PredicateExpressions.Comparison(lhs: a, rhs: b, op: .greaterThanOrEqual)
            }
        }
        let symbol = ["==", "!=", "<", "<=", ">", ">="][which]
        return Built(expression: make(x.expression, y.expression), text: "(\(x.text) \(symbol) \(y.text))")
    }

    private mutating func isNil() -> Built<Bool> {
        let equal = pick(2) == 0
        func test<T: Equatable & Sendable & Codable>(_ x: Built<T?>) -> Built<Bool> {
            func make<A: StandardPredicateExpression<T?>>(_ a: A) -> any StandardPredicateExpression<Bool> {
                equal ? PredicateExpressions.Equal(lhs: a, rhs: PredicateExpressions.NilLiteral<T>())
                    : PredicateExpressions.NotEqual(lhs: a, rhs: PredicateExpressions.NilLiteral<T>())
            }
            return Built(expression: make(x.expression), text: "(\(x.text) \(equal ? "==" : "!=") nil)")
        }
        switch pick(3) {
        case 0: return test(field(\.a, "a"))
        case 1: return test(field(\.d, "d"))
        default: return test(field(\.t, "t"))
        }
    }

    private mutating func textSearch(_ x: Built<String>) -> Built<Bool> {
        let k = text()
        let contains = pick(3)
        func make<A: StandardPredicateExpression<String>>(_ a: A) -> any StandardPredicateExpression<Bool> {
            switch contains {
            case 0: return PredicateExpressions.CollectionContainsCollection(base: a, other: PredicateExpressions.Value(k))
            case 1: return PredicateExpressions.SequenceStartsWith(base: a, prefix: PredicateExpressions.Value(k))
            default: return PredicateExpressions.KeyPath(root: a, keyPath: \String.isEmpty)
            }
        }
        let shown = contains == 0 ? "\(x.text).contains(\"\(k)\")" : contains == 1 ? "\(x.text).starts(with: \"\(k)\")"
            : "\(x.text).isEmpty"
        return Built(expression: make(x.expression), text: shown)
    }

    private mutating func inRange(_ x: Built<Int>) -> Built<Bool> {
        let low = small()
        let high = low + Int.random(in: 0...8, using: &rng)   // never reversed: Foundation stops the process there
        let closed = pick(2) == 0
        func make<A: StandardPredicateExpression<Int>>(_ a: A) -> any StandardPredicateExpression<Bool> {
            closed
                ? PredicateExpressions.RangeExpressionContains(
                    range: PredicateExpressions.ClosedRange(lower: PredicateExpressions.Value(low), upper: PredicateExpressions.Value(high)),
                    element: a)
                : PredicateExpressions.RangeExpressionContains(
                    range: PredicateExpressions.Range(lower: PredicateExpressions.Value(low), upper: PredicateExpressions.Value(high)),
                    element: a)
        }
        return Built(expression: make(x.expression), text: "(\(low)\(closed ? "..." : "..<")\(high)).contains(\(x.text))")
    }

    /// `$0.a.flatMap { $0 > k } ?? c` or `... == true`.
    private mutating func flatMapped() -> Built<Bool> {
        let k = small()
        let a = field(\.a, "a")
        func mapped<A: StandardPredicateExpression<Int?>>(_ x: A) -> any StandardPredicateExpression<Bool?> {
            PredicateExpressions.OptionalFlatMap(x) { PredicateExpressions.Comparison(lhs: $0, rhs: PredicateExpressions.Value(k), op: .greaterThan) }
        }
        let inner = Built(expression: mapped(a.expression), text: "$0.a.flatMap { $0 > \(k) }")
        if pick(2) == 0 {
            let c = pick(2) == 0
            return coalesce(inner, Self.value(c, "\(c)"))
        }
        func equalsTrue<A: StandardPredicateExpression<Bool?>>(_ x: A) -> any StandardPredicateExpression<Bool> {
            PredicateExpressions.Equal(lhs: x, rhs: PredicateExpressions.Value(Optional(true)))
        }
        return Built(expression: equalsTrue(inner.expression), text: "(\(inner.text) == true)")
    }

    /// `$0.tags.contains(k)`, `$0.tags.isEmpty`, or `[k, l].contains($0.b)`.
    private mutating func membership() -> Built<Bool> {
        let k = text()
        switch pick(3) {
        case 0:
            let tags = field(\.tags, "tags")
            func make<A: StandardPredicateExpression<[String]>>(_ a: A) -> any StandardPredicateExpression<Bool> {
                PredicateExpressions.SequenceContains(sequence: a, element: PredicateExpressions.Value(k))
            }
            return Built(expression: make(tags.expression), text: "$0.tags.contains(\"\(k)\")")
        case 1:
            let tags = field(\.tags, "tags")
            func make<A: StandardPredicateExpression<[String]>>(_ a: A) -> any StandardPredicateExpression<Bool> {
                PredicateExpressions.KeyPath(root: a, keyPath: \[String].isEmpty)
            }
            return Built(expression: make(tags.expression), text: "$0.tags.isEmpty")
        default:
            let values = [small(), small()]
            let b = field(\.b, "b")
            func make<A: StandardPredicateExpression<Int>>(_ a: A) -> any StandardPredicateExpression<Bool> {
                PredicateExpressions.SequenceContains(sequence: PredicateExpressions.Value(values), element: a)
            }
            return Built(expression: make(b.expression), text: "\(values).contains($0.b)")
        }
    }

    /// A closure over `tags`: `contains(where:)`, `allSatisfy`, or `filter { }.count` compared.
    private mutating func elements() -> Built<Bool> {
        let k = text()
        let which = pick(3)
        let n = Int.random(in: 0...2, using: &rng)
        let tags = field(\.tags, "tags")
        func make<A: StandardPredicateExpression<[String]>>(_ a: A) -> any StandardPredicateExpression<Bool> {
            switch which {
            case 0:
                return PredicateExpressions.SequenceContainsWhere(a) {
                    PredicateExpressions.Disjunction(lhs: PredicateExpressions.Equal(lhs: $0, rhs: PredicateExpressions.Value(k)),
                                                     rhs: PredicateExpressions.SequenceStartsWith(base: $0, prefix: PredicateExpressions.Value("b")))
                }
            case 1:
                return PredicateExpressions.SequenceAllSatisfy(a) {
                    PredicateExpressions.Comparison(lhs: $0, rhs: PredicateExpressions.Value(k), op: .greaterThan)
                }
            default:
                let filtered = PredicateExpressions.Filter(a) {
                    PredicateExpressions.NotEqual(lhs: $0, rhs: PredicateExpressions.Value(k))
                }
                return PredicateExpressions.Comparison(lhs: PredicateExpressions.KeyPath(root: filtered, keyPath: \[String].count),
                                                       rhs: PredicateExpressions.Value(n), op: .greaterThanOrEqual)
            }
        }
        let shown = which == 0 ? "$0.tags.contains { $0 == \"\(k)\" || $0.starts(with: \"b\") }"
            : which == 1 ? "$0.tags.allSatisfy { $0 > \"\(k)\" }" : "($0.tags.filter { $0 != \"\(k)\" }.count >= \(n))"
        return Built(expression: make(tags.expression), text: shown)
    }
}

@Suite struct PredicateTreeTests {
    private static func models<M: TreeModel>(_ type: M.Type, count: Int, seed: UInt64) -> [M] {
        var rng = SeededGenerator(seed: seed)
        let texts = ["", "a", "b", "ab", "ba", "é", "e\u{301}", "A", "bb\r\n"]
        return (1...count).map { id in
            M(id: id,
              a: Int.random(in: 0..<3, using: &rng) == 0 ? nil : Int.random(in: -8...8, using: &rng),
              b: Int.random(in: -20...20, using: &rng),
              d: Bool.random(using: &rng) ? nil : Double(Int.random(in: -16...16, using: &rng)) / 4,
              e: Double(Int.random(in: -40...40, using: &rng)) / 8,
              s: texts.randomElement(using: &rng)!,
              t: Bool.random(using: &rng) ? nil : texts.randomElement(using: &rng)!,
              tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in texts.randomElement(using: &rng)! })
        }
    }

    private func check<M: TreeModel>(_ type: M.Type, seed: UInt64, predicates count: Int, store: DocStore) async throws {
        let models = Self.models(M.self, count: 250, seed: seed)
        if let untyped = models as? [UntypedTree] {
            try await store.write { tx in
                for model in untyped { try tx.insert(model.document, into: UntypedTree.collection) }
            }
            #expect(try await M.query().results(in: store) == models, "stored without a type, read back as \(M.self)")
        } else {
            try await store.insert(contentsOf: models)
        }
        var rng = SeededGenerator(seed: seed &+ 1)
        for round in 0..<count {
            var text = ""
            let depth = Int.random(in: 1...4, using: &rng)
            let predicate = Predicate<M> { root in
                var builder = TreeBuilder<M>(root: root, rng: rng)
                let built = builder.bool(depth)
                rng = builder.rng
                text = built.text
                return built.expression
            }
            let label = "\(M.self) seed \(seed) #\(round): \(text)"
            #expect(!Query<M>.condition(predicate).needsDecoding, "opaque: \(label)")
            let expected = models.filter { (try? predicate.evaluate($0)) ?? false }.map(\.id)
            #expect(try await M.include(predicate).ids(in: store) == expected, "\(label)")
            let kept = Set(expected)
            #expect(try await M.exclude(predicate).count(in: store) == models.count - kept.count, "exclude \(label)")
        }
    }

    /// The second seed runs on a store that splits its full scans between threads from a few dozen documents on.
    @Test(arguments: [21, 22])
    func randomPredicateTreesAnswerAsFoundationDoes(seed: UInt64) async throws {
        var options = DocStore.Options()
        if seed % 2 == 0 {
            options.scanThreads = 3
            options.documentsPerScanThread = 40
        }
        let (store, dir) = try await makeStore(options: options)
        defer { _ = dir }
        try await check(IndexedTree.self, seed: seed, predicates: 250, store: store)
        try await check(PlainTree.self, seed: seed, predicates: 250, store: store)
        try await check(UntypedTree.self, seed: seed, predicates: 250, store: store)
    }
}
