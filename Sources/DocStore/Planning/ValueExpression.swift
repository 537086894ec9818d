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
    /// `condition ? a : b`.
    case choice(Condition, ValueExpression, ValueExpression)
    /// A condition's truth, as a `Bool` value.
    case truth(Condition)
    /// `a!`: the value, which must not be nil (or the document does not match).
    case unwrap(ValueExpression)

    var description: String {
        switch self {
        case .field(let f): return f.components.isEmpty ? "$0" : f.description   // `$0`: an array's element
        case .constant(let v): return v.literal
        case .arithmetic(let op, let a, let b): return "(\(a) \(op.rawValue) \(b))"
        case .negate(let a): return "-\(a)"
        case .coalesce(let a, let b): return "(\(a) ?? \(b))"
        case .count(let a): return "\(a).count"
        case .choice(let c, let a, let b): return "(\(c) ? \(a) : \(b))"
        case .truth(let c): return "(\(c))"
        case .unwrap(let a): return "\(a)!"
        }
    }

    /// A number as arithmetic reads it: an integer stays one; any other number is a `Double`.
    enum Number {
        case int(Int64), double(Double)

        init?(_ value: DocumentValue) {
            switch value {
            case .int(let i): self = .int(i)
            case .uint(let u): self = Int64(exactly: u).map(Number.int) ?? .double(Double(u))
            case .double(let d): self = .double(d)
            default: return nil
            }
        }

        var value: DocumentValue {
            switch self {
            case .int(let i): return .int(i)
            case .double(let d): return .double(d)
            }
        }

        var double: Double {
            switch self {
            case .int(let i): return Double(i)
            case .double(let d): return d
            }
        }

        /// `self op other` as Swift computes it (two integers as `Int`, else as `Double`); `nil` where Swift traps:
        /// an overflow, an integer division by zero.
        func applying(_ op: Operator, _ other: Number) -> Number? {
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

    /// True when some part needs the decoded document.
    var needsDecoding: Bool {
        switch self {
        case .field, .constant: return false
        case .arithmetic(_, let a, let b), .coalesce(let a, let b): return a.needsDecoding || b.needsDecoding
        case .negate(let a), .count(let a), .unwrap(let a): return a.needsDecoding
        case .choice(let c, let a, let b): return c.needsDecoding || a.needsDecoding || b.needsDecoding
        case .truth(let c): return c.needsDecoding
        }
    }

    /// The fields read, in order of appearance.
    var fields: [FieldPath] {
        switch self {
        case .field(let f): return [f]
        case .constant: return []
        case .arithmetic(_, let a, let b), .coalesce(let a, let b): return a.fields + b.fields
        case .negate(let a), .count(let a), .unwrap(let a): return a.fields
        case .choice(let c, let a, let b): return c.fields + a.fields + b.fields
        case .truth(let c): return c.fields
        }
    }
}

extension Condition {
    /// Whether some part computes a value (a ``test(_:_:_:)``), whose evaluation may stop.
    var computes: Bool {
        switch self {
        case .test: return true
        case .anyElement(_, let c), .everyElement(_, let c): return c.computes
        case .and(let cs), .or(let cs): return cs.contains { $0.computes }
        case .not(let c): return c.computes
        default: return false
        }
    }

    /// The fields a condition reads, in order of appearance (with repeats).
    var fields: [FieldPath] {
        switch self {
        case .compare(let f, _, _), .contains(let f, _), .oneOf(let f, _), .startsWith(let f, _), .containsText(let f, _):
            return [f]
        case .test(let a, _, let b): return a.fields + b.fields
        case .anyElement(let f, _), .everyElement(let f, _): return [f]
        case .and(let cs), .or(let cs): return cs.flatMap(\.fields)
        case .not(let c): return c.fields
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
