/// A condition on documents, written without their Swift type: what tools such as the REPL build from text.
///
/// A filter runs through the same planner and executor as a `#Predicate`, with the same semantics: numbers
/// compare by value whatever their encoding, a missing field is `nil`, and an ordering comparison between values of
/// different kinds (a string and a number, or `nil` and anything) is false.
///
/// For example:
/// ```swift
/// let adultsInOslo: Filter = .and([
///     .compare("age", .greaterOrEqual, .int(18)),
///     .compare("address.city", .equal, .string("Oslo")),
/// ])
/// let n = try await store.read { try Query<DocumentValue>("people").include(adultsInOslo).count(in: $0) }
/// ```
public struct Filter: Sendable, Equatable, CustomStringConvertible {
    /// How a field is compared with a value.
    public enum Comparison: String, Sendable, CaseIterable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    }

    let condition: Condition

    init(_ condition: Condition) { self.condition = condition }

    /// `path op value`. For example: `.compare("age", .less, .int(13))`.
    ///
    /// NaN equals nothing and orders with nothing, as in Swift: a comparison with it holds only for `notEqual`, as a
    /// `#Predicate` with it does, whatever index the field has.
    public static func compare(_ path: FieldPath, _ op: Comparison, _ value: DocumentValue) -> Filter {
        let comparison = Condition.Comparison(rawValue: op.rawValue) ?? .equal
        return Filter(Condition.comparing(path, comparison, value))
    }

    /// The array at `path` has an element equal to `element` (a value that is not an array counts as one
    /// element, as a multi-value index sees it). For example: `.contains("tags", .string("swift"))`.
    public static func contains(_ path: FieldPath, _ element: DocumentValue) -> Filter {
        if element.isNaN { return Filter(.constant(false)) }   // (NaN equals no element)
        return Filter(.contains(path, element))
    }

    /// The string at `path` contains `text`. For example: `.containsText("name", "nn")`.
    public static func containsText(_ path: FieldPath, _ text: String) -> Filter {
        Filter(.containsText(path, text))
    }

    /// The field equals one of `values`. For example: `.oneOf("city", [.string("Oslo"), .string("Bergen")])`.
    public static func oneOf(_ path: FieldPath, _ values: [DocumentValue]) -> Filter {
        Filter(.oneOf(path, values.filter { !$0.isNaN }))   // (NaN equals no value)
    }

    /// The string at `path` starts with `prefix`. For example: `.hasPrefix("name", "An")`.
    public static func hasPrefix(_ path: FieldPath, _ prefix: String) -> Filter {
        Filter(.startsWith(path, prefix))
    }

    /// Every filter holds (`true` when there is none).
    /// The string at `path` equals `text`, ignoring case (their cases folded, as Unicode folds them): what
    /// SwiftData users write as `$0.name.lowercased() == text`, which Foundation's `#Predicate` does not take on
    /// Linux. A document whose field is not a string does not match. Checked on each candidate: no index answers it.
    ///
    /// For example: `Person.query().include(.equalIgnoringCase("city", "oslo"))`.
    public static func equalIgnoringCase(_ path: FieldPath, _ text: String) -> Filter {
        Filter(.textIgnoringCase(path, .equal, TextTest.folded(text)))
    }

    /// The string at `path` starts with `prefix`, ignoring case.
    public static func hasPrefixIgnoringCase(_ path: FieldPath, _ prefix: String) -> Filter {
        Filter(.textIgnoringCase(path, .prefix, TextTest.folded(prefix)))
    }

    /// The string at `path` contains `text`, ignoring case: SwiftData's `localizedStandardContains` for a search
    /// field.
    ///
    /// For example: `try await Person.query().include(.containsIgnoringCase("name", search)).results(in: store)`.
    public static func containsIgnoringCase(_ path: FieldPath, _ text: String) -> Filter {
        Filter(.textIgnoringCase(path, .contains, TextTest.folded(text)))
    }

    public static func and(_ filters: [Filter]) -> Filter { Filter(Condition.and(filters.map(\.condition)).simplified) }

    /// At least one filter holds (`false` when there is none).
    public static func or(_ filters: [Filter]) -> Filter { Filter(Condition.or(filters.map(\.condition)).simplified) }

    /// The filter does not hold.
    public static func not(_ filter: Filter) -> Filter { Filter(Condition.not(filter.condition).simplified) }

    /// A filter that always (or never) holds.
    public static func constant(_ value: Bool) -> Filter { Filter(.constant(value)) }

    /// The filter as text, in the syntax of the REPL: `age >= 18 && tags.contains("swift")`.
    public var description: String { condition.description }

    /// The fields the filter reads, each once, in the order they first appear.
    public var fields: [FieldPath] {
        var out: [FieldPath] = []
        for field in condition.fields where !out.contains(field) { out.append(field) }
        return out
    }
}

extension Filter {
    /// A value a filter computes from a document: a field, a literal, and arithmetic, `??`, counts and choices over
    /// them, with the semantics a `#Predicate` gives them, compared with `Filter.compare(_:_:_:)`.
    ///
    /// For example, `(depDelay ?? 0) > arrDelay * 2`:
    /// ```swift
    /// let late: Filter = .compare(.field("depDelay") ?? .literal(.int(0)), .greater, .field("arrDelay") * .literal(.int(2)))
    /// ```
    public struct Value: Sendable, Equatable, CustomStringConvertible {
        let expression: ValueExpression

        public static func field(_ path: FieldPath) -> Value { Value(expression: .field(path)) }
        public static func literal(_ value: DocumentValue) -> Value { Value(expression: .constant(value)) }

        /// Integers add, subtract, multiply and divide as `Int` does (an overflow or a division by zero: no
        /// match), any other numbers as `Double`; a value that is not a number gives `nil`.
        public static func + (a: Value, b: Value) -> Value { a.combined(.add, b) }
        public static func - (a: Value, b: Value) -> Value { a.combined(.subtract, b) }
        public static func * (a: Value, b: Value) -> Value { a.combined(.multiply, b) }
        public static func / (a: Value, b: Value) -> Value { a.combined(.divide, b) }
        public static func % (a: Value, b: Value) -> Value { a.combined(.remainder, b) }
        public static prefix func - (a: Value) -> Value { Value(expression: ValueExpression.negate(a.expression).folded) }

        /// `a ?? b`: `b` where `a` is `nil` or missing.
        public static func ?? (a: Value, b: Value) -> Value { coalescing(a, b) }

        /// `a ?? b`, by name.
        public static func coalescing(_ a: Value, _ b: Value) -> Value {
            Value(expression: .coalesce(a.expression, b.expression))
        }

        /// The characters of a string or the elements of an array; `nil` for anything else.
        public var count: Value { Value(expression: .count(expression)) }

        /// `condition ? a : b`.
        public static func choice(_ condition: Filter, _ a: Value, _ b: Value) -> Value {
            Value(expression: .choice(condition.condition, a.expression, b.expression))
        }

        /// The value as the shell writes it.
        public var description: String { expression.description }

        private func combined(_ op: ValueExpression.Operator, _ other: Value) -> Value {
            Value(expression: ValueExpression.arithmetic(op, expression, other.expression).folded)
        }
    }

    /// `a op b` for two computed values, as Swift compares them (nil equals only nil and orders with nothing).
    /// For example: `.compare(.field("arrDelay"), .greater, .field("depDelay"))`.
    public static func compare(_ a: Value, _ op: Comparison, _ b: Value) -> Filter {
        Filter(Condition.comparing(a.expression, Condition.Comparison(rawValue: op.rawValue) ?? .equal, b.expression))
    }
}

extension DocumentValue {
    /// Whether this is a `Double` NaN: a value no comparison but `!=` holds for.
    var isNaN: Bool { if case .double(let d) = self { d.isNaN } else { false } }
}
