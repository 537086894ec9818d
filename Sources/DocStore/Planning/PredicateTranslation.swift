import Foundation

/// What a `#Predicate` expression stands for, as far as DocStore can tell.
enum TranslatedExpression {
    /// The predicate's input itself (`$0`).
    case root
    /// A key path from the input (`$0.address.city`).
    case keyPath(AnyKeyPath)
    /// A constant.
    case value(DocumentValue)
    case condition(Condition)
    case untranslatable
}

/// An expression DocStore can read. Foundation's expression types conform below.
protocol TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression
}

/// Turns a `Predicate` into a ``Condition``: what it can read becomes comparisons the planner can put on indexes and
/// the executor can evaluate on encoded bytes; any other part is kept as an opaque condition, evaluated by
/// Foundation on the decoded document.
struct PredicateTranslator<Input> {
    let variable: PredicateExpressions.Variable<Input>
    let fieldPath: (AnyKeyPath) -> FieldPath?
    /// Decodes a stored document as `Input`, for the parts evaluated on the decoded document.
    let decode: @Sendable (UnsafeRawBufferPointer) throws -> Any

    static func condition(for predicate: Predicate<Input>, fieldPath: @escaping (AnyKeyPath) -> FieldPath?,
                          decode: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Any) -> Condition {
        let translator = PredicateTranslator(variable: predicate.variable, fieldPath: fieldPath, decode: decode)
        return translator.condition(of: predicate.expression).simplified
    }

    /// The condition an expression of type `Bool` stands for.
    func condition(of expression: any PredicateExpression<Bool>) -> Condition {
        if let translatable = expression as? any TranslatablePredicateExpression,
           let condition = asCondition(translatable.translate(self)) {
            return condition
        }
        return opaque(expression)
    }

    /// A child expression that should be a condition (an operand of `&&`, `||`, `!`).
    func condition(ofChild child: Any) -> Condition {
        if let boolean = child as? any PredicateExpression<Bool> { return condition(of: boolean) }
        return .constant(false)   // not reachable for well-typed predicates
    }

    func translate(_ child: Any) -> TranslatedExpression {
        (child as? any TranslatablePredicateExpression)?.translate(self) ?? .untranslatable
    }

    private func asCondition(_ translated: TranslatedExpression) -> Condition? {
        switch translated {
        case .condition(let c): return c
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
            return try part.expression.evaluate(PredicateBindings((part.variable, input)))
        })
    }

    /// A part of a `Predicate`, which is `Sendable` as a whole: its parts are values of the predicate, never changed.
    private struct OpaquePart: @unchecked Sendable {
        let variable: PredicateExpressions.Variable<Input>
        let expression: any PredicateExpression<Bool>
    }

    /// `field op value` from two operands in either order; `nil` when they are not a field and a constant.
    func comparison(_ lhs: Any, _ op: Condition.Comparison, _ rhs: Any) -> TranslatedExpression {
        switch (translate(lhs), translate(rhs)) {
        case (.keyPath(let kp), .value(let v)):
            guard let path = fieldPath(kp) else { return .untranslatable }
            return .condition(PredicateTranslator.compare(path, op, v))
        case (.value(let v), .keyPath(let kp)):
            guard let path = fieldPath(kp) else { return .untranslatable }
            return .condition(PredicateTranslator.compare(path, op.swapped, v))
        default:
            return .untranslatable
        }
    }

    /// A comparison with NaN is decided without looking: NaN equals nothing and orders with nothing.
    static func compare(_ path: FieldPath, _ op: Condition.Comparison, _ value: DocumentValue) -> Condition {
        if case .double(let d) = value, d.isNaN { return .constant(op == .notEqual) }
        return .compare(path, op, value)
    }
}

extension DocumentValue {
    /// The value of any `Encodable` constant, as a document value; `nil` when it cannot be encoded.
    init?(constant: Any) {
        // The commonest constants directly: the same values the encoder gives them, without encoding.
        switch constant {
        case let v as Int: self = .int(Int64(v)); return
        case let v as String: self = .string(v); return
        case let v as Double: self = .double(v); return
        case let v as Bool: self = .bool(v); return
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
        key == translator.variable.key ? .root : .untranslatable
    }
}

extension PredicateExpressions.KeyPath: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        switch translator.translate(root) {
        case .root: return .keyPath(keyPath)
        case .keyPath(let base): return base.appending(path: keyPath).map { .keyPath($0) } ?? .untranslatable
        default: return .untranslatable
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
        translator.comparison(lhs, .equal, rhs)
    }
}

extension PredicateExpressions.NotEqual: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        translator.comparison(lhs, .notEqual, rhs)
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
        switch (translator.translate(sequence), translator.translate(element)) {
        case (.keyPath(let kp), .value(let v)):
            guard let path = translator.fieldPath(kp) else { return .untranslatable }
            if case .double(let d) = v, d.isNaN { return .condition(.constant(false)) }
            return .condition(.contains(path, v))
        case (.value(.array(let values)), .keyPath(let kp)):
            guard let path = translator.fieldPath(kp) else { return .untranslatable }
            let comparable = values.filter { if case .double(let d) = $0 { return !d.isNaN } else { return true } }
            return .condition(.oneOf(path, comparable))
        default:
            return .untranslatable
        }
    }
}

extension PredicateExpressions.SequenceStartsWith: TranslatablePredicateExpression {
    func translate<Input>(_ translator: PredicateTranslator<Input>) -> TranslatedExpression {
        switch (translator.translate(base), translator.translate(prefix)) {
        case (.keyPath(let kp), .value(.string(let p))):
            guard let path = translator.fieldPath(kp) else { return .untranslatable }
            return .condition(.startsWith(path, p))
        default:
            return .untranslatable
        }
    }
}
