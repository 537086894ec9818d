import Foundation

/// A filter as the planner sees it: comparisons of fields with values, and their combinations.
///
/// The planner reads it to choose index scans, and the executor evaluates it on a document's encoded bytes,
/// reading only the fields it names. A part of a `#Predicate` it cannot express is kept ``opaque(_:)`` and
/// evaluated on the decoded document, with Foundation's own evaluation.
indirect enum Condition: Sendable, CustomStringConvertible, Equatable {
    typealias Comparison = ComparisonOperator

    /// `field op value`. A missing field is null.
    case compare(FieldPath, Comparison, DocumentValue)
    /// The array at `field` has an element equal to the value.
    case contains(FieldPath, DocumentValue)
    /// The field equals one of the values.
    case oneOf(FieldPath, [DocumentValue])
    /// The string at `field` starts with the prefix (by characters, as `String.starts(with:)`).
    case startsWith(FieldPath, String)
    /// The string at `field` contains the text, by characters (every string contains the empty text).
    case containsText(FieldPath, String)
    /// A string field equal to, starting with or containing text, compared with their cases folded (the text is
    /// held folded): what `lowercased()` and `localizedCaseInsensitiveContains` are for, which Foundation's
    /// `#Predicate` does not take on Linux.
    case textIgnoringCase(FieldPath, TextTest, String)
    /// Some element of the array at `field` satisfies the condition, whose paths start at the element (`$0`):
    /// `contains(where:)`. An empty, missing or `nil` array has none.
    case anyElement(FieldPath, Condition)
    /// Every element satisfies it: `allSatisfy`. An empty, missing or `nil` array does.
    case everyElement(FieldPath, Condition)
    /// Two computed values compared (`$0.a ?? 0 > 5`, `$0.arrDelay > $0.depDelay`), as Swift compares them.
    case test(ValueExpression, Comparison, ValueExpression)
    case and([Condition])
    case or([Condition])
    case not(Condition)
    case constant(Bool)
    /// The condition, or false where evaluating it stops (an overflow, `nil!`): the bound of one `include` or
    /// `exclude`, as a `#Predicate` that throws matches nothing, whatever the conditions around it. Made by
    /// ``settled``, never around a condition that cannot stop.
    case falseOnStop(Condition)
    /// A part of a predicate evaluated on the decoded document.
    case opaque(OpaqueCondition)

    var description: String {
        switch self {
        case .compare(let f, let op, let v): return "\(f) \(op.rawValue) \(v.literal)"
        case .contains(let f, let v): return "\(f).contains(\(v.literal))"
        case .oneOf(let f, let vs): return "[\(vs.map(\.literal).joined(separator: ", "))].contains(\(f))"
        case .startsWith(let f, let p): return "\(f).starts(with: \(DocumentValue.string(p).json()))"
        case .containsText(let f, let t): return "\(f).contains(\(DocumentValue.string(t).json()))"
        case .textIgnoringCase(let f, let test, let t):
            return "\(f) \(test.rawValue) \(DocumentValue.string(t).json()), ignoring case"
        case .test(let a, let op, let b): return "\(a) \(op.rawValue) \(b)"
        case .anyElement(let f, let c): return "\(f).contains { \(c) }"
        case .everyElement(let f, let c): return "\(f).allSatisfy { \(c) }"
        case .and(let cs): return cs.isEmpty ? "true" : cs.map { $0.parenthesized(in: "&&") }.joined(separator: " && ")
        case .or(let cs): return cs.isEmpty ? "false" : cs.map { $0.parenthesized(in: "||") }.joined(separator: " || ")
        case .not(let c): return "!" + c.parenthesized(in: "!")
        case .constant(let b): return b ? "true" : "false"
        case .opaque(let o): return "{\(o.summary)}"
        case .falseOnStop(let c): return c.description
        }
    }

    private func parenthesized(in context: String) -> String {
        switch self {
        case .and where context != "&&", .or where context != "||": return "(\(description))"
        case .and(let cs) where cs.count > 1 && context == "!", .or(let cs) where cs.count > 1 && context == "!":
            return "(\(description))"
        case .compare where context == "!", .test where context == "!": return "(\(description))"
        case .falseOnStop(let c): return c.parenthesized(in: context)
        default: return description
        }
    }

    /// True when evaluating needs the decoded document somewhere.
    var needsDecoding: Bool {
        switch self {
        case .opaque: return true
        case .test(let a, _, let b): return a.needsDecoding || b.needsDecoding
        case .and(let cs), .or(let cs): return cs.contains { $0.needsDecoding }
        case .not(let c), .falseOnStop(let c): return c.needsDecoding
        default: return false
        }
    }

    /// The conjuncts of a top-level `&&` (flattened), or the condition itself.
    var conjuncts: [Condition] {
        switch self {
        case .and(let cs): return cs.flatMap(\.conjuncts)
        case .constant(true): return []
        default: return [self]
        }
    }

    /// The condition as one `include` or `exclude` holds it: where evaluating a part stops, the part is false.
    /// A conjunction's parts are settled one by one (`a && b` is false where either stops), so that the planner
    /// still sees those that cannot stop.
    var settled: Condition {
        guard computes else { return self }
        switch self {
        case .and(let cs): return .and(cs.map(\.settled))
        case .falseOnStop: return self
        default: return .falseOnStop(self)
        }
    }

    /// A condition simplified a little: nested `&&`/`||` flattened, constants folded, double negation removed.
    var simplified: Condition {
        switch self {
        case .and(let cs): return Condition.joining(cs.map(\.simplified), and: true)
        case .or(let cs): return Condition.joining(cs.map(\.simplified), and: false)
        case .not(let c):
            switch c.simplified {
            case .not(let inner): return inner
            case .constant(let b): return .constant(!b)
            case let s: return .not(s)
            }
        case .falseOnStop(let c):
            return c.simplified.settled
        default:
            return self
        }
    }

    /// `&&` (`isAnd`) or `||` of simplified parts: those of the same kind flattened, the constant that changes
    /// nothing dropped, and the one that decides the result returned alone.
    private static func joining(_ parts: [Condition], and isAnd: Bool) -> Condition {
        var out: [Condition] = []
        for c in parts {
            switch c {
            case .constant(isAnd): continue
            case .constant:
                // A part before it may stop the evaluation (`nil!`) before the constant decides: kept, in order.
                guard out.contains(where: \.computes) else { return c }
                return isAnd ? .and(out + [c]) : .or(out + [c])
            case .and(let inner) where isAnd: out += inner
            case .or(let inner) where !isAnd: out += inner
            default: out.append(c)
            }
        }
        // Dropping a nil test could let a part that stops the evaluation run where it did not.
        if isAnd && !out.contains(where: \.computes) { out = withoutImpliedNilTests(out) }
        return out.count == 1 ? out[0] : (out.isEmpty ? .constant(isAnd) : isAnd ? .and(out) : .or(out))
    }

    /// Conjuncts without the nil tests the others answer. Where one compares `x` with a value (`x > 5`, so `x` is
    /// not nil), `x != nil` is dropped; where any says `x` is not nil, `x == nil || c` is `c`; a conjunct said twice
    /// is kept once. What `(x ?? 0) <= 5` becomes (`x == nil || x <= 5`) then meets `x >= 1` as one range.
    private static func withoutImpliedNilTests(_ conjuncts: [Condition]) -> [Condition] {
        // One conjunct implies nothing of another.
        guard conjuncts.count > 1 else { return conjuncts }
        // Most conjunctions hold no nil test to drop: then all that may go is a conjunct said twice, and no set of
        // fields is needed to know it.
        var valuesAField = false
        for c in conjuncts {
            switch c {
            case .compare(_, .notEqual, .null), .or: return withoutImpliedNilTests(testing: conjuncts)
            case .compare(_, let op, let v) where v != .null && op != .notEqual: valuesAField = true
            case .oneOf(_, let vs) where !vs.contains(.null): valuesAField = true
            case .startsWith, .containsText, .textIgnoringCase: valuesAField = true
            default: break
            }
        }
        guard valuesAField else { return conjuncts }
        var out: [Condition] = []
        for c in conjuncts where !out.contains(c) { out.append(c) }
        return out
    }

    /// ``withoutImpliedNilTests(_:)`` of conjuncts among which there is a nil test, or a disjunction that may hold one.
    private static func withoutImpliedNilTests(testing conjuncts: [Condition]) -> [Condition] {
        var valued: Set<FieldPath> = []
        var present: Set<FieldPath> = []
        for c in conjuncts {
            switch c {
            case .compare(let f, .notEqual, .null): present.insert(f)
            case .compare(let f, let op, let v) where v != .null && op != .notEqual: valued.insert(f)   // nil != 5
            case .oneOf(let f, let vs) where !vs.contains(.null): valued.insert(f)
            case .startsWith(let f, _), .containsText(let f, _), .textIgnoringCase(let f, _, _): valued.insert(f)
            default: break
            }
        }
        present.formUnion(valued)
        guard !present.isEmpty else { return conjuncts }
        var out: [Condition] = []
        for c in conjuncts {
            var kept = c
            switch c {
            case .compare(let f, .notEqual, .null) where valued.contains(f): continue
            case .or(let disjuncts):
                let rest = disjuncts.filter {
                    guard case .compare(let f, .equal, .null) = $0 else { return true }
                    return !present.contains(f)
                }
                if rest.count < disjuncts.count { kept = joining(rest, and: false) }
            default: break
            }
            if !out.contains(kept) { out.append(kept) }
        }
        return out
    }
}

extension Condition {
    /// The same condition: equal values (not equal text: `inf` and `-inf` are both `null` in JSON), and for opaque
    /// parts the same part.
    static func == (a: Condition, b: Condition) -> Bool {
        switch (a, b) {
        case let (.compare(f1, o1, v1), .compare(f2, o2, v2)): return f1 == f2 && o1 == o2 && Condition.same(v1, v2)
        case let (.contains(f1, v1), .contains(f2, v2)): return f1 == f2 && Condition.same(v1, v2)
        case let (.oneOf(f1, v1), .oneOf(f2, v2)):
            return f1 == f2 && v1.count == v2.count && zip(v1, v2).allSatisfy { Condition.same($0, $1) }
        case let (.startsWith(f1, p1), .startsWith(f2, p2)), let (.containsText(f1, p1), .containsText(f2, p2)):
            return f1 == f2 && p1 == p2
        case let (.textIgnoringCase(f1, t1, p1), .textIgnoringCase(f2, t2, p2)): return f1 == f2 && t1 == t2 && p1 == p2
        case let (.test(a1, o1, b1), .test(a2, o2, b2)): return a1 == a2 && o1 == o2 && b1 == b2
        case let (.anyElement(f1, c1), .anyElement(f2, c2)), let (.everyElement(f1, c1), .everyElement(f2, c2)):
            return f1 == f2 && c1 == c2
        case let (.and(c1), .and(c2)), let (.or(c1), .or(c2)): return c1 == c2
        case let (.not(c1), .not(c2)), let (.falseOnStop(c1), .falseOnStop(c2)): return c1 == c2
        case let (.constant(b1), .constant(b2)): return b1 == b2
        case let (.opaque(o1), .opaque(o2)): return o1 === o2
        default: return false
        }
    }

    /// Values with the same key: `-0.0` and `0` alike, NaN like NaN. (The commonest kinds compared as their keys
    /// would compare them, without making the keys: strings byte for byte, not as `String`'s `==` does.)
    private static func same(_ a: DocumentValue, _ b: DocumentValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.string(x), .string(y)): return x.utf8.elementsEqual(y.utf8)
        case let (.uuid(x), .uuid(y)): return x == y
        default: return KeyEncoder.key(a) == KeyEncoder.key(b)
        }
    }
}

extension DocumentValue {
    /// The value as a literal in a condition: plain JSON (a UUID as its text), but for numbers JSON cannot write
    /// (`inf`, `-inf`, `nan`) and dates (`date("...")`).
    var literal: String {
        switch self {
        case .double(let d) where !d.isFinite: return "\(d)"
        case .date(let d): return "date(\(DocumentValue.string(DocumentValue.iso8601(d)).json()))"
        default: return plainJSON()
        }
    }
}

/// A part of a predicate DocStore evaluates on the decoded document: it carries the decoding it needs, so whoever
/// runs the condition needs to know nothing of the query's type.
final class OpaqueCondition: Sendable {
    let summary: String
    /// The document's type (the one `decode` makes).
    let type: ObjectIdentifier
    /// The document's type, for messages; made only when a message needs it.
    let typeName: @Sendable () -> String
    /// Decodes a stored document into the query's type.
    let decode: @Sendable (UnsafeRawBufferPointer) throws -> Any
    /// Evaluates on the decoded document (passed as `Any`, of the query's type).
    let evaluate: @Sendable (Any) throws -> Bool

    init(summary: String, type: ObjectIdentifier, typeName: @escaping @Sendable () -> String, decode: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Any,
         evaluate: @escaping @Sendable (Any) throws -> Bool) {
        self.summary = summary
        self.type = type
        self.typeName = typeName
        self.decode = decode
        self.evaluate = evaluate
    }
}

extension Condition {
    /// The first opaque part, whose decoding every opaque part of one query shares.
    var firstOpaque: OpaqueCondition? {
        switch self {
        case .opaque(let o): return o
        case .and(let cs), .or(let cs): return cs.lazy.compactMap(\.firstOpaque).first
        case .not(let c), .falseOnStop(let c): return c.firstOpaque
        default: return nil
        }
    }
}

/// How a text is matched by ``Condition/textIgnoringCase(_:_:_:)``.
enum TextTest: String, Sendable {
    case equal = "equals", prefix = "starts with", contains = "contains"

    /// Text with its case folded as every such match compares it (Unicode's case folding: "STRASSE" and "straße"
    /// fold alike, as do "Ann" and "aNN").
    static func folded(_ text: some StringProtocol) -> String {
        String(text).folding(options: [.caseInsensitive], locale: nil)
    }

    /// Whether `string`, folded, passes the test against `folded`.
    func holds(_ string: String, _ folded: String) -> Bool {
        let mine = TextTest.folded(string)
        switch self {
        case .equal: return mine == folded
        case .prefix: return mine.hasPrefix(folded)
        case .contains: return folded.isEmpty || mine.contains(folded)
        }
    }
}

/// Thrown where Swift would trap or Foundation throw (an overflow, an integer division by zero, `nil!`): the
/// document does not match. ``Condition/falseOnStop(_:)`` turns it into a non-match; it never leaves a query.
struct NoMatch: Error {}
