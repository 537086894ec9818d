/// A selection as a value to keep: what a saved filter holds in the catalog and a dump writes of it.
///
/// A condition is an array whose first element names its kind, its parts after it, as the cases are declared:
/// `["compare", ["age"], ">=", 18]`, `["and", [...], [...]]`; a field's path is the array of its names. The names
/// are a stored format: a case renamed here must still read the old name.
extension Selection {
    /// The selection as a value; a part evaluated by Foundation on the decoded document cannot be kept, nor a
    /// selection that cannot run.
    func stored() throws -> DocumentValue {
        if let problem { throw problem }
        var fields: [(String, DocumentValue)] = [("conditions", .array(try conditions.map { try $0.stored() }))]
        if !sort.isEmpty {
            fields.append(("sort", .array(sort.map { .array([Self.stored($0.path), .bool($0.descending)]) })))
        }
        if idDescending { fields.append(("idDescending", true)) }
        if let window {
            let steps: [DocumentValue] = window.afterwards.map {
                switch $0 {
                case .reverse: return ["reverse"]
                case .slice(let r): return ["slice", .int(Int64(r.lowerBound)), .int(Int64(r.upperBound))]
                }
            }
            fields.append(("window", [.int(Int64(window.range.lowerBound)), .int(Int64(window.range.upperBound)),
                                      .array(steps)]))
        }
        return .object(fields)
    }

    /// The selection a stored value holds; a value that is not one throws a message naming what is wrong.
    init(stored value: DocumentValue) throws {
        self.init()
        guard case .object = value, case .array(let conditions)? = value[field: "conditions"] else {
            throw StoredParts.damaged("it has no list of conditions")
        }
        self.conditions = try conditions.map { try Condition(stored: $0) }
        if case .array(let sort)? = value[field: "sort"] {
            self.sort = try sort.map {
                var parts = try StoredParts($0, "a sort field")
                return SortSpec(path: try parts.path(), descending: try parts.bool())
            }
        }
        idDescending = value[field: "idDescending"] == true
        if let stored = value[field: "window"] {
            var parts = try StoredParts(stored, "a slice")
            let range = try parts.range()
            guard case .array(let steps) = try parts.next() else { throw StoredParts.damaged("a slice's steps") }
            window = QueryWindow(range: range, afterwards: try steps.map {
                var step = try StoredParts($0, "a step of a slice")
                switch try step.string() {
                case "reverse": return .reverse
                case "slice": return .slice(try step.range())
                case let other: throw StoredParts.damaged("a step of a slice is '\(other)'")
                }
            })
        }
    }

    static func stored(_ path: FieldPath) -> DocumentValue { .array(path.components.map { .string($0) }) }
}

extension Condition {
    func stored() throws -> DocumentValue {
        let p = Selection.stored
        switch self {
        case .compare(let f, let op, let v): return ["compare", p(f), .string(op.rawValue), v]
        case .contains(let f, let v): return ["contains", p(f), v]
        case .oneOf(let f, let vs): return ["oneOf", p(f), .array(vs)]
        case .startsWith(let f, let s): return ["startsWith", p(f), .string(s)]
        case .containsText(let f, let s): return ["containsText", p(f), .string(s)]
        case .textIgnoringCase(let f, let test, let s): return ["textIgnoringCase", p(f), .string(test.rawValue), .string(s)]
        case .anyElement(let f, let c): return ["anyElement", p(f), try c.stored()]
        case .everyElement(let f, let c): return ["everyElement", p(f), try c.stored()]
        case .test(let a, let op, let b): return ["test", try a.stored(), .string(op.rawValue), try b.stored()]
        case .and(let cs): return .array(["and"] + (try cs.map { try $0.stored() }))
        case .or(let cs): return .array(["or"] + (try cs.map { try $0.stored() }))
        case .not(let c): return ["not", try c.stored()]
        case .constant(let b): return ["constant", .bool(b)]
        case .falseOnStop(let c): return ["falseOnStop", try c.stored()]
        case .opaque(let o):
            throw DocStoreError(.encodingFailed, "the condition {\(o.summary)} is evaluated by Foundation on the "
                + "decoded \(o.typeName()), so it cannot be kept without that type: write it as a Filter")
        }
    }

    init(stored value: DocumentValue) throws {
        var parts = try StoredParts(value, "a condition")
        switch try parts.string() {
        case "compare": self = .compare(try parts.path(), try parts.comparison(), try parts.next())
        case "contains": self = .contains(try parts.path(), try parts.next())
        case "oneOf":
            let path = try parts.path()
            guard case .array(let values) = try parts.next() else { throw StoredParts.damaged("oneOf has no list") }
            self = .oneOf(path, values)
        case "startsWith": self = .startsWith(try parts.path(), try parts.string())
        case "containsText": self = .containsText(try parts.path(), try parts.string())
        case "textIgnoringCase":
            let path = try parts.path()
            guard let test = TextTest(rawValue: try parts.string()) else { throw StoredParts.damaged("a text test") }
            self = .textIgnoringCase(path, test, try parts.string())
        case "anyElement": self = .anyElement(try parts.path(), try parts.condition())
        case "everyElement": self = .everyElement(try parts.path(), try parts.condition())
        case "test": self = .test(try parts.expression(), try parts.comparison(), try parts.expression())
        case "and": self = .and(try parts.rest.map { try Condition(stored: $0) })
        case "or": self = .or(try parts.rest.map { try Condition(stored: $0) })
        case "not": self = .not(try parts.condition())
        case "constant": self = .constant(try parts.bool())
        case "falseOnStop": self = .falseOnStop(try parts.condition())
        case let other: throw StoredParts.damaged("a condition is '\(other)'")
        }
    }
}

extension ValueExpression {
    func stored() throws -> DocumentValue {
        switch self {
        case .field(let f): return ["field", Selection.stored(f)]
        case .constant(let v): return ["constant", v]
        case .arithmetic(let op, let a, let b): return ["arithmetic", .string(op.rawValue), try a.stored(), try b.stored()]
        case .negate(let a): return ["negate", try a.stored()]
        case .coalesce(let a, let b): return ["coalesce", try a.stored(), try b.stored()]
        case .count(let a): return ["count", try a.stored()]
        case .countWhere(let f, let c): return ["countWhere", Selection.stored(f), try c.stored()]
        case .choice(let c, let a, let b): return ["choice", try c.stored(), try a.stored(), try b.stored()]
        case .truth(let c): return ["truth", try c.stored()]
        case .unwrap(let a): return ["unwrap", try a.stored()]
        case .asDouble(let a): return ["asDouble", try a.stored()]
        }
    }

    init(stored value: DocumentValue) throws {
        var parts = try StoredParts(value, "a value")
        switch try parts.string() {
        case "field": self = .field(try parts.path())
        case "constant": self = .constant(try parts.next())
        case "arithmetic":
            guard let op = Operator(rawValue: try parts.string()) else { throw StoredParts.damaged("an operator") }
            self = .arithmetic(op, try parts.expression(), try parts.expression())
        case "negate": self = .negate(try parts.expression())
        case "coalesce": self = .coalesce(try parts.expression(), try parts.expression())
        case "count": self = .count(try parts.expression())
        case "countWhere": self = .countWhere(try parts.path(), try parts.condition())
        case "choice": self = .choice(try parts.condition(), try parts.expression(), try parts.expression())
        case "truth": self = .truth(try parts.condition())
        case "unwrap": self = .unwrap(try parts.expression())
        case "asDouble": self = .asDouble(try parts.expression())
        case let other: throw StoredParts.damaged("a value is '\(other)'")
        }
    }
}

/// The parts of one stored array, read in order, each checked for its kind.
private struct StoredParts {
    private(set) var rest: ArraySlice<DocumentValue>
    let what: String

    init(_ value: DocumentValue, _ what: String) throws {
        guard case .array(let parts) = value, !parts.isEmpty else { throw StoredParts.damaged("\(what) is not a list") }
        rest = parts[...]
        self.what = what
    }

    static func damaged(_ reason: String) -> DocStoreError {
        DocStoreError(.corruptDocument, "in its stored request, \(reason)")
    }

    mutating func next() throws -> DocumentValue {
        guard let value = rest.popFirst() else { throw StoredParts.damaged("\(what) ends too soon") }
        return value
    }

    mutating func string() throws -> String {
        guard case .string(let s) = try next() else { throw StoredParts.damaged("\(what) has no text where one goes") }
        return s
    }

    mutating func bool() throws -> Bool {
        guard case .bool(let b) = try next() else { throw StoredParts.damaged("\(what) has no true or false") }
        return b
    }

    mutating func path() throws -> FieldPath {
        guard case .array(let names) = try next() else { throw StoredParts.damaged("\(what) has no field path") }
        return FieldPath(components: try names.map {
            guard case .string(let name) = $0 else { throw StoredParts.damaged("a field path holds a non-name") }
            return name
        })
    }

    mutating func range() throws -> Range<Int> {
        guard case .int(let lower) = try next(), case .int(let upper) = try next(), lower >= 0, lower <= upper,
              upper <= Int64(Int.max) else { throw StoredParts.damaged("\(what) has no range") }
        return Int(lower)..<Int(upper)
    }

    mutating func comparison() throws -> Condition.Comparison {
        guard let op = Condition.Comparison(rawValue: try string()) else { throw StoredParts.damaged("an operator") }
        return op
    }

    mutating func condition() throws -> Condition { try Condition(stored: try next()) }
    mutating func expression() throws -> ValueExpression { try ValueExpression(stored: try next()) }
}
