import Foundation

/// A value a condition computes from a document: a field, a constant, or arithmetic, `??`, a count or a choice over
/// them. The parts of a `#Predicate` beyond "field op constant" become these, and are evaluated on the stored bytes.
///
/// The semantics are Swift's, as Foundation's `Predicate.evaluate` gives them, with one exception: where Swift
/// traps (an integer overflow, an integer division by zero) or Foundation throws (a forced unwrap of `nil`), the
/// document does not match.
indirect enum ValueExpression: Sendable, Equatable, CustomStringConvertible {
    enum Operator: String, Sendable {
        case add = "+", subtract = "-", multiply = "*", divide = "/", remainder = "%"
    }

    case field(FieldPath)
    case constant(DocumentValue)
    /// Numbers combined: integers as `Int` does (overflow: no match), doubles as `Double` does.
    case arithmetic(Operator, ValueExpression, ValueExpression)
    case negate(ValueExpression)
    /// `a ?? b`: `b` where `a` is nil or missing.
    case coalesce(ValueExpression, ValueExpression)
    /// The characters of a string or the elements of an array; nil for nil.
    case count(ValueExpression)
    /// The elements of the array at a path that meet a condition, counted (`tags.filter { $0 > "b" }.count`); nil
    /// where the path holds no array. The condition reads the element, as ``Condition/anyElement(_:_:)``'s does.
    case countWhere(FieldPath, Condition)
    /// `condition ? a : b`.
    case choice(Condition, ValueExpression, ValueExpression)
    /// A condition's truth, as a `Bool` value.
    case truth(Condition)
    /// `a!`: the value, which must not be nil (or the document does not match).
    case unwrap(ValueExpression)
    /// A number as a `Double`: the operand of a `Double` field's arithmetic, whose document may hold an integer
    /// (written without its Swift type), which Swift would divide as a `Double`.
    case asDouble(ValueExpression)

    var description: String {
        switch self {
        case .field(let f): return f.components.isEmpty ? "$0" : f.description   // `$0`: an array's element
        case .constant(let v): return v.literal
        case .arithmetic(let op, let a, let b): return "(\(a) \(op.rawValue) \(b))"
        case .negate(let a): return "-\(a)"
        case .coalesce(let a, let b): return "(\(a) ?? \(b))"
        case .count(let a): return "\(a).count"
        case .countWhere(let f, let c): return "\(f).filter { \(c) }.count"
        case .choice(let c, let a, let b): return "(\(c) ? \(a) : \(b))"
        case .truth(let c): return "(\(c))"
        case .unwrap(let a): return "\(a)!"
        case .asDouble(let a): return "Double(\(a))"
        }
    }

    /// The same expression: constants alike to the bit (`x / -0.0` is not `x / 0.0`), conditions as ``Condition``
    /// compares them.
    static func == (a: ValueExpression, b: ValueExpression) -> Bool {
        switch (a, b) {
        case let (.field(f1), .field(f2)): return f1 == f2
        case let (.constant(v1), .constant(v2)): return identical(v1, v2)
        case let (.arithmetic(o1, a1, b1), .arithmetic(o2, a2, b2)): return o1 == o2 && a1 == a2 && b1 == b2
        case let (.coalesce(a1, b1), .coalesce(a2, b2)): return a1 == a2 && b1 == b2
        case let (.negate(a1), .negate(a2)), let (.count(a1), .count(a2)), let (.unwrap(a1), .unwrap(a2)),
             let (.asDouble(a1), .asDouble(a2)):
            return a1 == a2
        case let (.choice(c1, a1, b1), .choice(c2, a2, b2)): return c1 == c2 && a1 == a2 && b1 == b2
        case let (.truth(c1), .truth(c2)): return c1 == c2
        case let (.countWhere(f1, c1), .countWhere(f2, c2)): return f1 == f2 && c1 == c2
        default: return false
        }
    }

    private static func identical(_ a: DocumentValue, _ b: DocumentValue) -> Bool {
        switch (a, b) {
        case let (.double(x), .double(y)): return x.bitPattern == y.bitPattern
        case let (.array(x), .array(y)): return x.count == y.count && zip(x, y).allSatisfy { identical($0, $1) }
        default: return a == b
        }
    }

    /// A number as arithmetic reads it: an integer stays one; any other number is a `Double` (an unsigned integer
    /// above `Int64.max` too, except in a sum).
    enum Number {
        case int(Int64), uint(UInt64), double(Double)

        init?(_ value: DocumentValue) {
            switch value {
            case .int(let i): self = .int(i)
            case .uint(let u): self = Int64(exactly: u).map(Number.int) ?? .uint(u)
            case .double(let d): self = .double(d)
            default: return nil
            }
        }

        var value: DocumentValue {
            switch self {
            case .int(let i): return .int(i)
            case .uint(let u): return .uint(u)
            case .double(let d): return .double(d)
            }
        }

        var double: Double {
            switch self {
            case .int(let i): return Double(i)
            case .uint(let u): return Double(u)
            case .double(let d): return d
            }
        }

        /// `self op other` as Swift computes it (two integers as `Int`, else as `Double`); `nil` where Swift traps:
        /// an overflow, an integer division by zero. A sum is ``NumberSum``'s.
        func applying(_ op: Operator, _ other: Number) -> Number? {
            if op == .add {
                // Two integers add as `Int64`s: what ``NumberSum`` gives them, without its 128-bit sum.
                if case .int(let i) = self, case .int(let j) = other {
                    let (sum, overflow) = i.addingReportingOverflow(j)
                    return overflow ? nil : .int(sum)
                }
                return DocumentValue.adding(value, other.value).flatMap(Number.init)
            }
            guard case .int(let i) = self, case .int(let j) = other else {
                let (p, q) = (double, other.double)
                switch op {
                case .add: return .double(p + q)
                case .subtract: return .double(p - q)
                case .multiply: return .double(p * q)
                case .divide: return .double(p / q)
                case .remainder: return .double(p.truncatingRemainder(dividingBy: q))
                }
            }
            let (result, overflow): (Int64, Bool)
            switch op {
            case .add: (result, overflow) = i.addingReportingOverflow(j)
            case .subtract: (result, overflow) = i.subtractingReportingOverflow(j)
            case .multiply: (result, overflow) = i.multipliedReportingOverflow(by: j)
            case .divide, .remainder:
                guard j != 0 else { return nil }
                (result, overflow) = op == .divide ? i.dividedReportingOverflow(by: j) : i.remainderReportingOverflow(dividingBy: j)
            }
            return overflow ? nil : .int(result)
        }

        /// `-self`; `nil` for the one integer whose negation overflows.
        var negated: Number? {
            switch self {
            case .int(let i): return i == .min ? nil : .int(-i)
            case .uint(let u): return .double(-Double(u))
            case .double(let d): return .double(-d)
            }
        }
    }

    /// The expression with its constant arithmetic done (`a + 5` is a constant), so that the planner sees it.
    var folded: ValueExpression {
        switch self {
        case .arithmetic(let op, .constant(let a), .constant(let b)):
            guard let x = Number(a), let y = Number(b), let r = x.applying(op, y) else { return self }
            return .constant(r.value)
        case .negate(.constant(let a)):
            return Number(a)?.negated.map { .constant($0.value) } ?? self
        default:
            return self
        }
    }

    /// The expression as a `Double`; a constant is already the `Double` its predicate wrote.
    static func asDoubleUnlessConstant(_ e: ValueExpression) -> ValueExpression {
        if case .constant = e { return e }
        return .asDouble(e)
    }

    /// True when some part needs the decoded document.
    var needsDecoding: Bool {
        switch self {
        case .field, .constant: return false
        case .arithmetic(_, let a, let b), .coalesce(let a, let b): return a.needsDecoding || b.needsDecoding
        case .negate(let a), .count(let a), .unwrap(let a), .asDouble(let a): return a.needsDecoding
        case .choice(let c, let a, let b): return c.needsDecoding || a.needsDecoding || b.needsDecoding
        case .truth(let c), .countWhere(_, let c): return c.needsDecoding
        }
    }

    /// The fields read, in order of appearance.
    var fields: [FieldPath] {
        switch self {
        case .field(let f): return [f]
        case .constant: return []
        case .arithmetic(_, let a, let b), .coalesce(let a, let b): return a.fields + b.fields
        case .negate(let a), .count(let a), .unwrap(let a), .asDouble(let a): return a.fields
        case .choice(let c, let a, let b): return c.fields + a.fields + b.fields
        case .truth(let c): return c.fields
        case .countWhere(let f, _): return [f]
        }
    }
}

extension Condition {
    /// Whether some part computes a value (a ``test(_:_:_:)``, or an opaque part) whose evaluation may stop, and is
    /// not settled.
    var computes: Bool {
        switch self {
        case .test, .opaque: return true   // an opaque part stops where Foundation throws
        case .falseOnStop: return false
        case .anyElement(_, let c), .everyElement(_, let c): return c.computes
        case .and(let cs), .or(let cs): return cs.contains { $0.computes }
        case .not(let c): return c.computes
        default: return false
        }
    }

    /// The fields a condition reads, in order of appearance (with repeats).
    var fields: [FieldPath] {
        switch self {
        case .compare(let f, _, _), .contains(let f, _), .oneOf(let f, _), .startsWith(let f, _), .containsText(let f, _),
             .textIgnoringCase(let f, _, _):
            return [f]
        case .test(let a, _, let b): return a.fields + b.fields
        case .anyElement(let f, _), .everyElement(let f, _): return [f]
        case .and(let cs), .or(let cs): return cs.flatMap(\.fields)
        case .not(let c), .falseOnStop(let c): return c.fields
        case .constant, .opaque: return []
        }
    }

    /// `field op value`; a comparison with NaN is decided without looking (NaN equals nothing, orders with nothing).
    static func comparing(_ path: FieldPath, _ op: Comparison, _ value: DocumentValue) -> Condition {
        if case .double(let d) = value, d.isNaN { return .constant(op == .notEqual) }
        return .compare(path, op, value)
    }

    /// `a op b` in the form the planner reads best: a comparison of a field with a constant where it is one, and
    /// `(x ?? c) op k` as `x op k`, or'd with `x == nil` when `c op k` holds.
    static func comparing(_ a: ValueExpression, _ op: Comparison, _ b: ValueExpression) -> Condition {
        switch (a, b) {
        case (.field(let f), .constant(let v)): return Condition.comparing(f, op, v)
        case (.constant(let v), .field(let f)): return Condition.comparing(f, op.swapped, v)
        case (.constant(let x), .constant(let y)):
            // Nothing in the document: decided now, with the same comparison the documents get.
            return .constant(ValueComparison.compare(values: x, op, y))
        case (.coalesce(.field(let f), .constant(let c)), .constant(let k)) where c != .null && k != .null:
            // Only `!=` holds for nil; every other comparison with a value already says "not nil".
            let onValue = op == .notEqual
                ? Condition.and([.compare(f, .notEqual, .null), Condition.comparing(f, op, k)]) : Condition.comparing(f, op, k)
            guard ValueComparison.compare(values: c, op, k) else { return onValue.simplified }
            // With `x == nil` or'd in, the other side meets only values: no guard needed.
            return Condition.or([.compare(f, .equal, .null), Condition.comparing(f, op, k)]).simplified
        case (.constant, .coalesce):
            return comparing(b, op.swapped, a)
        // `w.flatMap { c } == true` and `w.flatMap { c } ?? false`: `w` is not nil, and `c`.
        case (.choice(let isNil, .constant(.null), .truth(let c)), .constant(.bool(true))) where op == .equal,
             (.coalesce(.choice(let isNil, .constant(.null), .truth(let c)), .constant(.bool(false))), .constant(.bool(true)))
             where op == .equal:
            if case .compare(let f, .equal, .null) = isNil, case .compare(f, let op, let k) = c, op != .notEqual, k != .null {
                return c   // a comparison with a value already says "not nil"
            }
            return Condition.and([.not(isNil), c]).simplified
        default:
            return .test(a, op, b)
        }
    }
}
