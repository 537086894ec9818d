import DocStore

/// A mistake found after parsing: a comparison that makes no sense for the field's values, an unknown name.
struct MeaningError: Error, Sendable {
    var message: String
    var location: SourceLocation
    var length: Int
    var suggestion: String?

    var parseError: ParseError {
        ParseError(message: message, location: location, length: length, suggestion: suggestion)
    }
}

/// A warning about a statement that runs anyway: a field that no document has.
struct Warning: Sendable {
    var message: String
    var location: SourceLocation
    var length: Int
    var suggestion: String?
}

/// Turns a parsed condition into a ``Filter``, checking each comparison against the kinds of value the field holds.
struct Lowering {
    let collection: String
    let stats: FieldStats
    var warnings: [Warning] = []

    init(collection: String, stats: FieldStats) {
        self.collection = collection
        self.stats = stats
    }

    mutating func filter(_ node: PredicateNode) throws(MeaningError) -> Filter {
        switch node {
        case .and(let items):
            var out: [Filter] = []
            for item in items { out.append(try filter(item)) }
            return .and(out)
        case .or(let items):
            var out: [Filter] = []
            for item in items { out.append(try filter(item)) }
            return .or(out)
        case .not(let a): return .not(try filter(a))
        case .constant(let b): return .constant(b)
        case .compare(let path, let op, let literal):
            if countedField(path) != nil { return try filter(.compareValues(.path(path), op, .literal(literal))) }
            let kinds = known(path)
            if op != .equal && op != .notEqual {
                if case .null = literal.value {
                    throw MeaningError(message: "nil has no order: a field is compared with nil by == or != only",
                                       location: literal.location, length: literal.length)
                }
                if kinds == [.bool] && stats.sampled == stats.total {
                    throw MeaningError(message: "'\(path.path.written)' holds true/false values, which have no order: "
                        + "compare them with == or != (or write the field alone: \(path.path.written))",
                        location: path.location, length: path.length)
                }
                if ValueKind(literal.value) == .bool {
                    throw MeaningError(message: "true and false have no order: compare with == or !=",
                                       location: literal.location, length: literal.length)
                }
                if [.array, .object].contains(ValueKind(literal.value)) {
                    throw MeaningError(message: "lists and objects have no order: compare them with == or !=",
                                       location: literal.location, length: literal.length)
                }
            }
            try checkKind(of: literal, against: path, kinds: kinds)
            return .compare(path.path, op, literal.value)
        case .isTrue(let path):
            let kinds = known(path)
            if !kinds.isEmpty && !kinds.contains(.bool) {
                throw MeaningError(message: "'\(path.path.written)' holds \(describe(kinds)), not true/false values; a field "
                    + "alone is a test of a true/false field: compare it instead (\(path.path.written) == ...)",
                    location: path.location, length: path.length)
            }
            return .compare(path.path, .equal, .bool(true))
        case .inRange(let path, let lower, let upper, let closed):
            let kinds = known(path)
            for bound in [lower, upper] {
                guard [.number, .string, .date].contains(ValueKind(bound.value)) else {
                    throw MeaningError(message: "a range's bounds are numbers, strings or dates",
                                       location: bound.location, length: bound.length)
                }
                try checkKind(of: bound, against: path, kinds: kinds)
            }
            return .and([.compare(path.path, .greaterOrEqual, lower.value),
                         .compare(path.path, closed ? .lessOrEqual : .less, upper.value)])
        case .oneOf(let path, let literals):
            let kinds = known(path)
            for literal in literals { try checkKind(of: literal, against: path, kinds: kinds) }
            return .oneOf(path.path, literals.map(\.value))
        case .contains(let path, let literal):
            let kinds = known(path)
            if kinds.contains(.string) && !kinds.contains(.array) {
                guard case .string(let text) = literal.value else {
                    throw MeaningError(message: "'\(path.path.written)' holds strings: contains looks for text, so it takes "
                        + "a string", location: literal.location, length: literal.length)
                }
                return .containsText(path.path, text)
            }
            if !kinds.isEmpty && !kinds.contains(.array) {
                throw MeaningError(message: "'\(path.path.written)' holds \(describe(kinds)), not arrays or strings: "
                    + "contains needs a list or a text to look in", location: path.location, length: path.length)
            }
            if let field = stats[path.path], !field.elementKinds.isEmpty {
                let kind = ValueKind(literal.value)
                let elements = field.elementKinds.subtracting([.null])
                if kind != .null && !elements.isEmpty && !elements.contains(kind) {
                    throw MeaningError(message: "the arrays in '\(path.path.written)' hold \(describe(elements)), so they "
                        + "never contain \(ValueKind(literal.value).plural)", location: literal.location,
                        length: literal.length)
                }
            }
            return .contains(path.path, literal.value)
        case .hasPrefix(let path, let literal):
            let kinds = known(path)
            if !kinds.isEmpty && !kinds.contains(.string) {
                throw MeaningError(message: "'\(path.path.written)' holds \(describe(kinds)), not strings: hasPrefix needs "
                    + "text", location: path.location, length: path.length)
            }
            guard case .string(let prefix) = literal.value else {
                throw MeaningError(message: "hasPrefix takes a string", location: literal.location,
                                   length: literal.length)
            }
            return .hasPrefix(path.path, prefix)
        case .ignoringCase(let path, let test, let literal, let lowered):
            let kinds = known(path)
            if !kinds.isEmpty && !kinds.contains(.string) {
                throw MeaningError(message: "'\(path.path.written)' holds \(describe(kinds)), not strings: a test that "
                    + "ignores case needs text", location: path.location, length: path.length)
            }
            guard case .string(let text) = literal.value else {
                throw MeaningError(message: "a test that ignores case takes a string", location: literal.location,
                                   length: literal.length)
            }
            // As in Swift: a lowercased string never equals, starts with or contains text with capitals.
            if lowered && text != text.lowercased() {
                warnings.append(Warning(message: "\(literal.value.json()) has capitals, which lowercased() never "
                    + "has: this matches nothing (compare with \(DocumentValue.string(text.lowercased()).json()))",
                    location: literal.location, length: literal.length))
                return .constant(false)
            }
            switch test {
            case .equal: return .equalIgnoringCase(path.path, text)
            case .prefix: return .hasPrefixIgnoringCase(path.path, text)
            case .contains: return .containsIgnoringCase(path.path, text)
            }
        case .compareValues(let a, let op, let b):
            if op != .equal && op != .notEqual {
                for case .literal(let literal) in [a, b] where [.null, .bool].contains(ValueKind(literal.value)) {
                    throw MeaningError(message: "\(literal.value == .null ? "nil" : "true and false") has no order: "
                        + "compare with == or !=", location: literal.location, length: literal.length)
                }
            }
            return .compare(try value(a), op, try value(b))
        case .choice(let test, let a, let b):
            let condition = try filter(test)
            return .or([.and([condition, try filter(a)]), .and([.not(condition), try filter(b)])])
        }
    }

    /// A computed value, its fields checked against the kinds they hold.
    mutating func value(_ node: ValueNode) throws(MeaningError) -> Filter.Value {
        switch node {
        case .path(let path):
            if let counted = countedField(path) { return .field(counted).count }
            _ = known(path)
            return .field(path.path)
        case .literal(let literal):
            return .literal(literal.value)
        case .arithmetic(let op, let a, let b, _):
            try requireNumbers(a, op)
            try requireNumbers(b, op)
            let (x, y) = (try value(a), try value(b))
            switch op {
            case "+": return x + y
            case "-": return x - y
            case "*": return x * y
            case "/": return x / y
            default: return x % y
            }
        case .negate(let a, _):
            try requireNumbers(a, "-")
            return -(try value(a))
        case .coalesce(let a, let b):
            return Filter.Value.coalescing(try value(a), try value(b))
        case .count(let a, _):
            if case .path(let path) = a {
                let kinds = known(path)
                if !kinds.isEmpty && kinds.isDisjoint(with: [.string, .array]) && stats.sampled == stats.total {
                    throw MeaningError(message: "'\(path.path.written)' holds \(describe(kinds)), not strings or arrays: "
                        + "count counts characters or elements", location: path.location, length: path.length)
                }
            }
            return try value(a).count
        }
    }

    /// The field whose count `path` asks for: `tags.count` counts a string or array field, unless a field is named
    /// `count`.
    private func countedField(_ path: PathReference) -> FieldPath? {
        let components = path.path.components
        guard components.count > 1, components.last == "count", stats[path.path] == nil else { return nil }
        let base = FieldPath(components: Array(components.dropLast()))
        guard let field = stats[base], !field.kinds.isDisjoint(with: [.string, .array]) else { return nil }
        return base
    }

    /// Refuses arithmetic on a literal, or a field, that holds no numbers.
    private mutating func requireNumbers(_ node: ValueNode, _ op: String) throws(MeaningError) {
        switch node {
        case .literal(let literal) where ValueKind(literal.value) != .number:
            throw MeaningError(message: "'\(op)' works on numbers, not \(ValueKind(literal.value).plural)",
                               location: literal.location, length: literal.length)
        case .path(let path):
            let kinds = known(path)
            if !kinds.isEmpty && !kinds.contains(.number) && stats.sampled == stats.total {
                throw MeaningError(message: "'\(path.path.written)' holds \(describe(kinds)), not numbers: '\(op)' works "
                    + "on numbers", location: path.location, length: path.length)
            }
        default:
            break
        }
    }

    /// Checks the field an aggregate reads, without refusing it (missing values are skipped): a field no document has
    /// gets a warning, and so does a sum or average of a field that holds no numbers.
    mutating func aggregated(_ call: AggregateCall) {
        guard let path = call.path else { return }
        let kinds = known(path)
        guard call.function == .sum || call.function == .average, !kinds.isEmpty, !kinds.contains(.number) else { return }
        warnings.append(Warning(message: "'\(path.path.written)' holds \(describe(kinds)), not numbers"
            + (stats.sampled < stats.total ? " (in the \(stats.sampled) documents looked at)" : "")
            + ": \(call.function.rawValue) reads numbers and skips every other value",
            location: path.location, length: path.length))
    }

    /// The kinds the field holds, nil left out; a field no document has gets a warning (and no check).
    mutating func known(_ path: PathReference) -> Set<ValueKind> {
        guard let field = stats[path.path] else {
            if stats.sampled > 0 {
                let names = stats.paths.map(\.written)
                warnings.append(Warning(
                    message: "no document of '\(collection)' has a field '\(path.path.written)'"
                        + (stats.sampled < stats.total ? " (in the \(stats.sampled) documents looked at)" : "")
                        + "; it is nil everywhere",
                    location: path.location, length: path.length,
                    suggestion: Suggest.closest(path.path.written, in: names).map { "'\($0)'" }))
            }
            return []
        }
        return field.kinds.subtracting([.null])
    }

    /// Refuses a value of a kind the field never holds: comparing ages with "18" would quietly match nothing.
    private mutating func checkKind(of literal: Literal, against path: PathReference, kinds: Set<ValueKind>)
        throws(MeaningError) {
        let kind = ValueKind(literal.value)
        guard kind != .null, !kinds.isEmpty, !kinds.contains(kind) else { return }
        if stats.sampled < stats.total {
            // Only some documents were looked at: others may hold such values.
            warnings.append(Warning(message: "'\(path.path.written)' holds \(describe(kinds)) in the \(stats.sampled) documents "
                + "looked at, never \(kind.plural); this comparison may match nothing",
                location: literal.location, length: literal.length))
            return
        }
        var hint = ""
        if kinds.contains(.date), case .string(let s) = literal.value { hint = "; write date(\"\(s)\")" }
        if kinds.contains(.number), case .string(let s) = literal.value, Double(s) != nil { hint = "; write \(s)" }
        throw MeaningError(message: "'\(path.path.written)' holds \(describe(kinds)), never \(kind.plural), so this "
            + "comparison could not match\(hint)", location: literal.location, length: literal.length)
    }

    private func describe(_ kinds: Set<ValueKind>) -> String {
        let names = kinds.sorted().map(\.plural)
        return names.count <= 1 ? (names.first ?? "nothing") : names.dropLast().joined(separator: ", ") + " and "
            + names[names.count - 1]
    }
}
