import Foundation
import Synchronization

/// What a `#Predicate` expression stands for, as far as DocStore can tell.
enum TranslatedExpression {
    /// The predicate's input itself (`$0`).
    case root
    /// A key path from the input (`$0.address.city`).
    case keyPath(AnyKeyPath)
    /// A constant.
    case value(DocumentValue)
    case condition(Condition)
    /// A value computed from fields (`$0.a ?? 0`, `$0.a * 2`, `$0.name.count`).
    case expression(ValueExpression)
    /// The elements of an array field that meet a condition (`$0.tags.filter { $0 > "b" }`), read only by what
    /// counts them.
    case filtered(FieldPath, Condition)
    case untranslatable
}

/// An expression DocStore can read. Foundation's expression types conform below.
protocol TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression
}

extension TranslatablePredicateExpression {
    /// `expression`, which is of this type, translated.
    static func translate<Input>(_ expression: Any, _ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        (expression as! Self).translate(translator)
    }
}

/// Which expression types are translatable, found by one cast per type. A cast of a value to
/// `any TranslatablePredicateExpression` checks the generic requirements of its type on every call, a third of the
/// time a query took to translate; a cast to the type itself compares two pointers.
private let translatableTypes = Mutex<[ObjectIdentifier: TranslatableConformance]>([:])

/// A type's conformance, or `nil` for a type that has none. (A metatype never changes.)
private struct TranslatableConformance: @unchecked Sendable {
    let type: (any TranslatablePredicateExpression.Type)?
}

/// `expression` translated by its type's conformance, or `nil` when its type has none.
private func translated<Input>(_ expression: Any, _ translator: PredicateTranslator<Input>) -> TranslatedExpression? {
    let type = Swift.type(of: expression)
    let key = ObjectIdentifier(type)
    let found = translatableTypes.withLock { $0[key] } ?? {
        let conformance = TranslatableConformance(type: type as? any TranslatablePredicateExpression.Type)
        translatableTypes.withLock { $0[key] = conformance }
        return conformance
    }()
    return found.type?.translate(expression, translator)
}

/// Which types' values order as their stored forms do (``KeyEncoder``'s order), so that `<` on them may be read from
/// the stored bytes or an index: the standard numbers, strings, dates and UUIDs, and an enum of `String` or integer
/// raw values whose own `<` agrees with its raw values' order on every pair of its cases (checked once per type).
/// Any other `Comparable` type (`Decimal`, stored as an object of its parts; an enum that ranks its cases) compares
/// as its own `<` says, which only Foundation knows: such a comparison is evaluated on the decoded document.
enum StoredOrder {
    private static let standard: Set<ObjectIdentifier> = [
        Int.self, Int8.self, Int16.self, Int32.self, Int64.self, UInt.self, UInt8.self, UInt16.self, UInt32.self,
        UInt64.self, Double.self, Float.self, String.self, Character.self, Date.self, UUID.self,
    ].reduce(into: []) { $0.insert(ObjectIdentifier($1)) }
    private static let enums = Mutex<[ObjectIdentifier: Bool]>([:])

    static func holds(for type: Any.Type) -> Bool {
        if standard.contains(ObjectIdentifier(type)) { return true }
        guard let cases = type as? any (CaseIterable & RawRepresentable & Comparable).Type else { return false }
        if let known = enums.withLock({ $0[ObjectIdentifier(type)] }) { return known }
        let agrees = rawValuesOrder(cases)
        enums.withLock { $0[ObjectIdentifier(type)] = agrees }
        return agrees
    }

    private static func rawValuesOrder<E: CaseIterable & RawRepresentable & Comparable>(_: E.Type) -> Bool {
        let cases = Array(E.allCases)
        guard cases.count <= 256 else { return false }
        for a in cases {
            for b in cases {
                let rawLess: Bool
                switch (a.rawValue, b.rawValue) {
                case let (x as String, y as String): rawLess = x < y
                case let (x as Int, y as Int): rawLess = x < y
                default: return false
                }
                if (a < b) != rawLess { return false }
            }
        }
        return true
    }

    /// Whether `==` on `type` is the equality of its stored forms. Not for `Decimal`, whose parts are not kept in
    /// one form (0.5 and 0.50 are equal, and stored apart).
    static func equalityHolds(for type: Any.Type) -> Bool { type != Decimal.self && type != Decimal?.self }
}

/// Turns a `Predicate` into a ``Condition``: what it can read becomes comparisons the planner can put on indexes and
/// the executor can evaluate on encoded bytes; any other part is kept as an opaque condition, evaluated by
/// Foundation on the decoded document.
struct PredicateTranslator<Input> {
    let variable: PredicateExpressions.Variable<Input>
    let fieldPath: (AnyKeyPath) -> FieldPath?
    /// The variables of closures inside the predicate (`flatMap { $0 > 5 }`), and what each stands for.
    var bound: [PredicateExpressions.VariableID: ValueExpression] = [:]
    /// False inside a closure over an array's elements, whose paths start at the element: the document is out of
    /// reach there.
    var documentInReach = true
    /// Decodes a stored document as `Input`, for the parts evaluated on the decoded document.
    let decode: @Sendable (UnsafeRawBufferPointer) throws -> Any

    static func condition(for predicate: Predicate<Input>, fieldPath: @escaping (AnyKeyPath) -> FieldPath?,
                          decode: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Any) -> Condition {
        let translator = PredicateTranslator(variable: predicate.variable, fieldPath: fieldPath, decode: decode)
        let condition = translator.condition(of: predicate.expression).simplified
        guard case .and(let parts) = condition else { return IntegerBounds.bounding(condition) }
        // (Bounds change only tests of arithmetic. A conjunction with none, and with no nil test or disjunction that
        // a second pass could drop or shorten, is simplified already.)
        guard parts.contains(where: {
            switch $0 { case .test, .or, .compare(_, .notEqual, .null): true; default: false }
        }) else { return condition }
        return Condition.and(parts.map(IntegerBounds.bounding)).simplified
    }

    /// The condition an expression of type `Bool` stands for.
    func condition(of expression: any PredicateExpression<Bool>) -> Condition {
        translated(expression, self).flatMap(asCondition) ?? opaque(expression)
    }

    /// A child expression that should be a condition (an operand of `&&`, `||`, `!`).
    ///
    /// Asks for the translatable conformance first: a cast to `any PredicateExpression<Bool>` (an existential with
    /// a constraint) resolves its requirements by name on every call, and is made only for an opaque part.
    func condition(ofChild child: Any) -> Condition {
        if let condition = translated(child, self).flatMap(asCondition) { return condition }
        if let boolean = child as? any PredicateExpression<Bool> { return opaque(boolean) }
        return .constant(false)   // not reachable for well-typed predicates
    }

    func translate(_ child: Any) -> TranslatedExpression {
        translated(child, self) ?? .untranslatable
    }

    /// The translator with `variable` standing for `value`, for the body of a closure.
    func binding<V>(_ variable: PredicateExpressions.Variable<V>, to value: ValueExpression) -> PredicateTranslator {
        var inner = self
        inner.bound[variable.key] = value
        return inner
    }

    /// The translator for the body of a closure over an array's elements (`contains { $0 > 5 }`): `variable` is
    /// the element, and nothing else is in reach.
    func element<V>(_ variable: PredicateExpressions.Variable<V>) -> PredicateTranslator {
        var inner = self
        inner.bound = [variable.key: .field(FieldPath(components: []))]
        inner.documentInReach = false
        return inner
    }

    /// The array field `sequence` reads and the condition a closure's `test` puts on its elements; `nil` when
    /// either part cannot be read on the stored bytes.
    func elements<V>(of sequence: Any, _ variable: PredicateExpressions.Variable<V>, _ test: Any)
        -> (FieldPath, Condition)? {
        guard case .field(let path)? = expression(sequence) else { return nil }
        let condition = element(variable).condition(ofChild: test)
        return condition.needsDecoding ? nil : (path, condition)
    }

    /// A child's value as an expression; `nil` when it has none DocStore can compute.
    func expression(_ child: Any) -> ValueExpression? {
        switch translate(child) {
        case .keyPath(let kp): return fieldPath(kp).map(ValueExpression.field)
        case .value(let v): return .constant(v)
        case .expression(let e): return e
        case .condition(let c): return c.needsDecoding ? nil : .truth(c)
        case .root, .filtered, .untranslatable: return nil
        }
    }

    /// A test of a string child (`starts(with:)`, `contains`), put on each field its value may come from: a field,
    /// forced (`$0.nickname!` stops where it is nil, as Foundation's throw does), or chosen by `??` or the ternary
    /// (`($0.a ?? "x").starts(with: p)` is `a != nil && a.starts(with: p) || a == nil && "x".starts(with: p)`); on a
    /// constant, `onConstant` answers.
    func text(_ child: Any, _ condition: (FieldPath) -> Condition, onConstant: (String) -> Bool) -> TranslatedExpression {
        func pushed(_ e: ValueExpression) -> Condition? {
            switch e {
            case .field(let path): return condition(path)
            case .constant(.string(let s)): return .constant(onConstant(s))
            case .unwrap(let inner):
                return pushed(inner).map { .and([.test(e, .notEqual, .constant(.null)), $0]) }
            case .coalesce(let a, let b):
                guard let first = pushed(a), let second = pushed(b) else { return nil }
                let isNil = Condition.comparing(a, .equal, .constant(.null))
                return .or([.and([.not(isNil), first]), .and([isNil, second])])
            case .choice(let test, let a, let b):
                guard let first = pushed(a), let second = pushed(b) else { return nil }
                return .or([.and([test, first]), .and([.not(test), second])])
            default: return nil
            }
        }
        return expression(child).flatMap(pushed).map { .condition($0.simplified) } ?? .untranslatable
    }

    /// `lhs op rhs` on numbers of `type`: computed here only for `Int` (64 bits, an overflow stops) and `Double`.
    /// Other numeric types (`Float`, `Int32`, `UInt`, `Decimal`) overflow or round differently, and stay with
    /// Foundation on the decoded document.
    func arithmetic(_ op: ValueExpression.Operator, _ lhs: Any, _ rhs: Any, on type: Any.Type) -> TranslatedExpression {
        guard PredicateTranslator.isIntOrDouble(type) else { return .untranslatable }
        // A `Double` field may hold an integer, written without its type: Swift would compute with its `Double`.
        let isDouble = type == Double.self
        return combining(lhs, rhs) {
            isDouble ? .arithmetic(op, .asDoubleUnlessConstant($0), .asDoubleUnlessConstant($1)) : .arithmetic(op, $0, $1)
        }
    }

    static func isIntOrDouble(_ type: Any.Type) -> Bool { type == Int.self || type == Double.self }

    /// An expression from two children, or `.untranslatable`.
    func combining(_ lhs: Any, _ rhs: Any, _ make: (ValueExpression, ValueExpression) -> ValueExpression)
        -> TranslatedExpression {
        guard let a = expression(lhs), let b = expression(rhs) else { return .untranslatable }
        return .expression(make(a, b).folded)
    }

    private func asCondition(_ translated: TranslatedExpression) -> Condition? {
        switch translated {
        case .condition(let c): return c
        case .expression(let e):
            // A `Bool` value used as a condition: `$0.flag ?? false`, `cond ? $0.a : $0.b`.
            return e.needsDecoding ? nil : Condition.comparing(e, .equal, .constant(.bool(true)))
        case .keyPath(let kp):
            // A Bool field used as a condition: `$0.active`.
            guard let path = fieldPath(kp) else { return nil }
            return .compare(path, .equal, .bool(true))
        case .value(.bool(let b)): return .constant(b)
        default: return nil
        }
    }

    private func opaque(_ expression: any PredicateExpression<Bool>) -> Condition {
        let name = String(describing: type(of: expression))
        let summary = name.prefix(while: { $0 != "<" })
        let part = OpaquePart(variable: variable, expression: expression)
        return .opaque(OpaqueCondition(summary: "\(summary) expression, evaluated on the decoded document",
                                       type: ObjectIdentifier(Input.self),
                                       typeName: { String(reflecting: Input.self) }, decode: decode) { document in
            guard let input = document as? Input else {
                throw DocStoreError(.invalidSchema, "a condition on \(Input.self) met a document decoded as "
                    + "\(type(of: document))")
            }
            // Foundation's throw (`nil!`) stops the evaluation: the part is settled as one that computes.
            do { return try part.expression.evaluate(PredicateBindings((part.variable, input))) } catch {
                throw NoMatch()
            }
        })
    }

    /// A part of a `Predicate`, which is `Sendable` as a whole: its parts are values of the predicate, never changed.
    private struct OpaquePart: @unchecked Sendable {
        let variable: PredicateExpressions.Variable<Input>
        let expression: any PredicateExpression<Bool>
    }

    /// `lhs op rhs`: a field with a constant where it is one, else a test of two computed values.
    func comparison(_ lhs: Any, _ op: Condition.Comparison, _ rhs: Any) -> TranslatedExpression {
        guard let a = expression(lhs), let b = expression(rhs) else { return .untranslatable }
        return .condition(Condition.comparing(a, op, b))
    }
}

/// `x + a op k`, `x - a op k` and `x * a op k` on an `Int` field, with integer constants, as the range of `x` they
/// hold for, so that an index on `x` serves them: `$0.age * 2 > 190` is `age > 95`, and `age <= Int.max / 2`, where
/// Swift would trap and the document does not match.
///
/// Only for a part of the predicate's top-level `&&`: there a part that stops the evaluation (an overflow) and one
/// that is false both leave the document out. Under `!` or `||` they differ, and the arithmetic stays as it is.
/// The translator makes such arithmetic only for `Int` (a `Double` field's operands are marked ``ValueExpression/asDouble(_:)``),
/// whose stored values are integers: for them the range is exact.
enum IntegerBounds {
    static func bounding(_ condition: Condition) -> Condition {
        guard case .test(let lhs, let op, let rhs) = condition else { return condition }
        let found: (ValueExpression.Operator, ValueExpression, Int64, Condition.Comparison, Int64)?
        switch (lhs, rhs) {
        case (.arithmetic(let aop, let x, .constant(.int(let a))), .constant(.int(let k))): found = (aop, x, a, op, k)
        case (.constant(.int(let k)), .arithmetic(let aop, let x, .constant(.int(let a)))): found = (aop, x, a, op.swapped, k)
        case (.arithmetic(let aop, .constant(.int(let a)), let x), .constant(.int(let k))) where aop == .add || aop == .multiply:
            found = (aop, x, a, op, k)
        case (.constant(.int(let k)), .arithmetic(let aop, .constant(.int(let a)), let x)) where aop == .add || aop == .multiply:
            found = (aop, x, a, op.swapped, k)
        default: found = nil
        }
        guard let (aop, x, a, op, k) = found else { return condition }
        let path: FieldPath
        var parts: [Condition] = []
        switch x {
        case .field(let f): path = f
        case .unwrap(.field(let f)):
            path = f
            parts.append(.compare(f, .notEqual, .null))   // `nil!` stops
        default: return condition
        }
        guard let (limits, comparison) = bounds(aop, a, op, k) else { return condition }
        parts += limits.map { Condition.comparing(path, $0.0, .int($0.1)) }
        // No comparison: no integer meets it (`x * 2 == 7`), or every one does (`x * 2 != 7`).
        parts.append(comparison.map { Condition.comparing(path, $0.0, .int($0.1)) } ?? .constant(op == .notEqual))
        return Condition.and(parts).simplified
    }

    /// The limits within which `x aop a` does not overflow, and the comparison on `x` that `x aop a op k` is
    /// there; `nil` where this cannot say (a constant that would overflow, a multiplication by 0 or -1, a
    /// remainder or a division).
    static func bounds(_ aop: ValueExpression.Operator, _ a: Int64, _ op: Condition.Comparison, _ k: Int64)
        -> (limits: [(Condition.Comparison, Int64)], comparison: (Condition.Comparison, Int64)?)? {
        switch aop {
        case .subtract:
            guard a != .min else { return nil }
            return bounds(.add, -a, op, k)
        case .add:
            let (target, overflow) = k.subtractingReportingOverflow(a)
            guard !overflow else { return nil }
            // `x + a` stays within Int when `x <= max - a` (a > 0) or `x >= min - a` (a < 0).
            let limit: [(Condition.Comparison, Int64)] = a > 0 ? [(.lessOrEqual, .max - a)] : a < 0 ? [(.greaterOrEqual, .min - a)] : []
            return (limit, compared(op, numerator: target, denominator: 1))
        case .multiply:
            guard a != 0, a != -1 else { return nil }
            // `x * a` stays within Int between these (truncating division rounds toward zero, which is the ceiling
            // of a negative quotient and the floor of a positive one).
            let limit: [(Condition.Comparison, Int64)] = a > 0
                ? [(.greaterOrEqual, Int64.min / a), (.lessOrEqual, Int64.max / a)]
                : [(.greaterOrEqual, Int64.max / a), (.lessOrEqual, Int64.min / a)]
            // Dividing by a negative `a` turns the comparison around.
            return (limit, compared(a > 0 ? op : op.swapped, numerator: k, denominator: a))
        case .divide, .remainder:
            return nil
        }
    }

    /// `x op k / d` for integers `x`, as a comparison with an integer; `nil` when no integer meets it (or every
    /// one, for `!=`): `x == 7 / 2`.
    private static func compared(_ op: Condition.Comparison, numerator k: Int64, denominator d: Int64)
        -> (Condition.Comparison, Int64)? {
        let (q, r) = (k / d, k % d)   // d is neither 0 nor -1
        let exact = r == 0
        // The quotient's floor and ceiling: truncation went toward zero.
        let negative = (k < 0) != (d < 0)
        let floor = exact || !negative ? q : q - 1
        let ceiling = exact || negative ? q : q + 1
        switch op {
        case .greater: return (.greater, floor)
        case .greaterOrEqual: return (.greaterOrEqual, ceiling)
        case .less: return (.less, ceiling)
        case .lessOrEqual: return (.lessOrEqual, floor)
        case .equal, .notEqual: return exact ? (op, q) : nil
        }
    }
}

extension DocumentValue {
    /// The value of any `Encodable` constant, as a document value; `nil` when it cannot be encoded.
    init?(constant: Any) {
        // The commonest constants directly: the same values the encoder gives them, without encoding.
        // Told apart by their types first: a cast that fails costs far more than one that succeeds.
        let type = Swift.type(of: constant)
        if type == Int.self { self = .int(Int64(constant as! Int)); return }
        if type == String.self { self = .string(constant as! String); return }
        if type == Int64.self { self = .int(constant as! Int64); return }
        if type == Double.self { self = .double(constant as! Double); return }
        if type == Bool.self { self = .bool(constant as! Bool); return }
        if type == UUID.self { self = .uuid(constant as! UUID); return }
        if type == Date.self { self = .date(constant as! Date); return }
        // The same wrapped in an optional, which a cast unwraps.
        switch constant {
        case let v as Int: self = .int(Int64(v)); return
        case let v as String: self = .string(v); return
        case let v as Double: self = .double(v); return
        case let v as Bool: self = .bool(v); return
        case let v as Int64: self = .int(v); return
        case let v as UUID: self = .uuid(v); return
        case let v as Date: self = .date(v); return
        default: break
        }
        guard let encodable = constant as? any Encodable,
              let bytes = try? DocumentEncoder().encode(encodable),
              let value = try? DocumentValue(encoded: bytes) else { return nil }
        self = value
    }
}

// MARK: Foundation's expressions

extension PredicateExpressions.Variable: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        if key == translator.variable.key { return translator.documentInReach ? .root : .untranslatable }
        return translator.bound[key].map { .expression($0) } ?? .untranslatable
    }
}

extension PredicateExpressions.KeyPath: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        let base: ValueExpression
        switch translator.translate(root) {
        case .root: return .keyPath(keyPath)
        case .keyPath(let kp):
            guard CountingKeyPath(keyPath) != nil else {
                return kp.appending(path: keyPath).map { .keyPath($0) } ?? .untranslatable
            }
            guard let path = translator.fieldPath(kp) else { return .untranslatable }
            base = .field(path)
        case .expression(let e): base = e   // a closure's variable: `$0.count` inside `flatMap`
        case .filtered(let path, let c):
            // `$0.tags.filter { ... }.count`: the matching elements counted, none kept.
            let counted = ValueExpression.countWhere(path, c)
            switch CountingKeyPath(keyPath) {
            case .count?: return .expression(counted)
            case .isEmpty?: return .condition(Condition.comparing(counted, .equal, .constant(.int(0))))
            case nil: return .untranslatable
            }
        default: return .untranslatable
        }
        switch CountingKeyPath(keyPath) {
        case .count?: return .expression(.count(base))
        case .isEmpty?: return .condition(Condition.comparing(.count(base), .equal, .constant(.int(0))))
        case nil: return .untranslatable
        }
    }
}

extension PredicateExpressions.Value: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        DocumentValue(constant: value).map { .value($0) } ?? .untranslatable
    }
}

extension PredicateExpressions.NilLiteral: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression { .value(.null) }
}

extension PredicateExpressions.Equal: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        guard StoredOrder.equalityHolds(for: LHS.Output.self) else { return .untranslatable }
        return translator.comparison(lhs, .equal, rhs)
    }
}

extension PredicateExpressions.NotEqual: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        guard StoredOrder.equalityHolds(for: LHS.Output.self) else { return .untranslatable }
        return translator.comparison(lhs, .notEqual, rhs)
    }
}

extension PredicateExpressions.Comparison: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        let comparison: Condition.Comparison
        switch op {
        case .lessThan: comparison = .less
        case .lessThanOrEqual: comparison = .lessOrEqual
        case .greaterThan: comparison = .greater
        case .greaterThanOrEqual: comparison = .greaterOrEqual
        @unknown default: return .untranslatable
        }
        guard StoredOrder.holds(for: LHS.Output.self) else { return .untranslatable }
        return translator.comparison(lhs, comparison, rhs)
    }
}

extension PredicateExpressions.Conjunction: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        .condition(.and([translator.condition(ofChild: lhs), translator.condition(ofChild: rhs)]))
    }
}

extension PredicateExpressions.Disjunction: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        .condition(.or([translator.condition(ofChild: lhs), translator.condition(ofChild: rhs)]))
    }
}

extension PredicateExpressions.Negation: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        .condition(.not(translator.condition(ofChild: wrapped)))
    }
}

extension PredicateExpressions.SequenceContains: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        guard StoredOrder.equalityHolds(for: RHS.Output.self) else { return .untranslatable }
        switch (translator.translate(sequence), translator.translate(element)) {
        case (.keyPath(let kp), .value(let v)):
            guard let path = translator.fieldPath(kp) else { return .untranslatable }
            if v.isNaN { return .condition(.constant(false)) }
            return .condition(.contains(path, v))
        case (.value(.array(let values)), .keyPath(let kp)):
            guard let path = translator.fieldPath(kp) else { return .untranslatable }
            return .condition(.oneOf(path, values.filter { !$0.isNaN }))
        default:
            return .untranslatable
        }
    }
}

extension PredicateExpressions.SequenceStartsWith: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        guard case .value(.string(let p)) = translator.translate(prefix) else { return .untranslatable }
        return translator.text(base, { .startsWith($0, p) }, onConstant: { $0.starts(with: p) })
    }
}

extension PredicateExpressions.NilCoalesce: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.combining(lhs, rhs) { .coalesce($0, $1) }
    }
}

extension PredicateExpressions.Arithmetic: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        let op: ValueExpression.Operator
        switch self.op {
        case .add: op = .add
        case .subtract: op = .subtract
        case .multiply: op = .multiply
        @unknown default: return .untranslatable
        }
        return translator.arithmetic(op, lhs, rhs, on: LHS.Output.self)
    }
}

extension PredicateExpressions.IntDivision: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.arithmetic(.divide, lhs, rhs, on: LHS.Output.self)
    }
}

extension PredicateExpressions.IntRemainder: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.arithmetic(.remainder, lhs, rhs, on: LHS.Output.self)
    }
}

extension PredicateExpressions.FloatDivision: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.arithmetic(.divide, lhs, rhs, on: LHS.Output.self)
    }
}

extension PredicateExpressions.UnaryMinus: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        guard PredicateTranslator<Input>.isIntOrDouble(Wrapped.Output.self) else { return .untranslatable }
        guard let a = translator.expression(wrapped) else { return .untranslatable }
        return .expression(ValueExpression.negate(Wrapped.Output.self == Double.self ? .asDoubleUnlessConstant(a) : a).folded)
    }
}

extension PredicateExpressions.ForcedUnwrap: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.expression(inner).map { .expression(.unwrap($0)) } ?? .untranslatable
    }
}

extension PredicateExpressions.Conditional: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        let condition = translator.condition(ofChild: test)
        // A test that does not depend on the document picks its branch now.
        if case .constant(let b) = condition { return translator.translate(b ? trueBranch : falseBranch) }
        guard !condition.needsDecoding else { return .untranslatable }
        return translator.combining(trueBranch, falseBranch) { .choice(condition, $0, $1) }
    }
}

extension PredicateExpressions.OptionalFlatMap: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        // `w.flatMap { body }`: nil where `w` is nil, else the body with its variable standing for `w`.
        guard let w = translator.expression(wrapped),
              let body = translator.binding(variable, to: w).expression(transform) else { return .untranslatable }
        return .expression(.choice(Condition.comparing(w, .equal, .constant(.null)), .constant(.null), body))
    }
}

extension PredicateExpressions.RangeExpressionContains: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        guard StoredOrder.holds(for: Element.Output.self),
              let bounds = range as? any RangeBoundsExpression, let (lower, upper) = bounds.bounds(translator),
              let x = translator.expression(element) else { return .untranslatable }
        let below: Condition.Comparison = bounds.isClosed ? .lessOrEqual : .less
        return .condition(.and([Condition.comparing(x, .greaterOrEqual, lower), Condition.comparing(x, below, upper)]))
    }
}

/// `a...b` and `a..<b` in a predicate, read as their two bounds.
protocol RangeBoundsExpression {
    associatedtype Lower
    associatedtype Upper
    var lower: Lower { get }
    var upper: Upper { get }
    var isClosed: Bool { get }
}

extension RangeBoundsExpression {
    func bounds<Input>(_ translator: PredicateTranslator<Input>) -> (ValueExpression, ValueExpression)? {
        guard let a = translator.expression(lower), let b = translator.expression(upper) else { return nil }
        return (a, b)
    }
}

extension PredicateExpressions.ClosedRange: RangeBoundsExpression {
    var isClosed: Bool { true }
}

extension PredicateExpressions.Range: RangeBoundsExpression {
    var isClosed: Bool { false }
}

extension PredicateExpressions.CollectionContainsCollection: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        // `$0.name.contains("nn")`: a string field and a constant string.
        guard case .value(.string(let text)) = translator.translate(other) else { return .untranslatable }
        return translator.text(base, { .containsText($0, text) },
                               onConstant: { ValueComparison.containsCharacters($0, text) })
    }
}

/// `\.count` and `\.isEmpty` of a string or an array.
enum CountingKeyPath {
    case count, isEmpty

    init?(_ keyPath: AnyKeyPath) {
        guard let root = type(of: keyPath).rootType as? any CountedValue.Type else { return nil }
        if keyPath == root.countKeyPath { self = .count } else if keyPath == root.isEmptyKeyPath { self = .isEmpty } else {
            return nil
        }
    }
}

/// A type whose `count` and `isEmpty` a predicate may read on a stored value.
protocol CountedValue {
    static var countKeyPath: AnyKeyPath { get }
    static var isEmptyKeyPath: AnyKeyPath { get }
}

extension String: CountedValue {
    static var countKeyPath: AnyKeyPath { \String.count }
    static var isEmptyKeyPath: AnyKeyPath { \String.isEmpty }
}

extension Array: CountedValue {
    static var countKeyPath: AnyKeyPath { \Array.count }
    static var isEmptyKeyPath: AnyKeyPath { \Array.isEmpty }
}

extension PredicateExpressions.SequenceContainsWhere: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.elements(of: sequence, variable, test).map { .condition(.anyElement($0, $1)) } ?? .untranslatable
    }
}

extension PredicateExpressions.Filter: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.elements(of: sequence, variable, filter).map { .filtered($0, $1) } ?? .untranslatable
    }
}

extension PredicateExpressions.SequenceAllSatisfy: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.elements(of: sequence, variable, test).map { .condition(.everyElement($0, $1)) } ?? .untranslatable
    }
}
