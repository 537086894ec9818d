import Synchronization

/// The plans a collection's requests were given, by the request's shape: what it asks with its values left out.
///
/// A request planned before, with the same values, takes the same plan while the collection's size stays within
/// an eighth of what it was then. A request of the same shape with other values (another id, another city) skips
/// the weighing of every index: the access chosen then is built again for its values and, unless each of its
/// ranges is one key, counted; if it now costs more than the next best access did then, or more than twice what it
/// cost then, the request is planned from scratch and its plan kept in place of the old one. Requests with a part evaluated on the decoded document
/// are not kept: that part is another each time.
///
/// Each collection handle has its own, so that a change to the catalog (an index built or dropped) starts afresh.
final class PlanCache: Sendable {
    /// What a request of a shape reuses.
    final class Entry: Sendable {
        /// The request last planned from scratch, and its plan.
        let selection: Selection
        let output: Output
        let plan: SharedPlan
        /// The access a request of the same shape takes again, if there is one that can be rebuilt alone.
        let hint: PlanHint?

        init(selection: Selection, output: Output, plan: SharedPlan, hint: PlanHint?) {
            (self.selection, self.output, self.plan, self.hint) = (selection, output, plan, hint)
        }
    }

    /// The most shapes kept; past it the cache starts again.
    static let capacity = 128

    private let entries = Mutex<[RequestShape: Entry]>([:])

    func entry(_ shape: RequestShape) -> Entry? { entries.withLock { $0[shape] } }

    func keep(_ entry: Entry, for shape: RequestShape) {
        entries.withLock {
            if $0.count >= PlanCache.capacity { $0.removeAll(keepingCapacity: true) }
            $0[shape] = entry
        }
    }

    /// The number of shapes kept, for tests.
    var count: Int { entries.withLock { $0.count } }
}

/// The access a plan chose, as a request of the same shape builds it again with its own values.
struct PlanHint: Sendable {
    enum Kind: Sendable { case fullScan, filtering, ordering }
    let kind: Kind
    /// The index (or the ids, when `primary`) a filtering or ordering scan walks.
    let index: IndexDefinition?
    let primary: Bool
    /// The most a rebuilt scan may cost before the request is planned again: the cost of the next best access when
    /// the plan was made, and twice (and a little more than) the scan's own cost then, as a scan that grew may
    /// have lost its place to another that shrank.
    let costLimit: Double
}

extension Planner {
    /// The plan of a request, from `cache` when a request of its shape was planned before (see ``PlanCache``).
    func plan(_ selection: Selection, output: Output, cache: PlanCache) throws -> SharedPlan {
        if let plan = try idLookUp(selection, output: output) { return SharedPlan(plan) }
        guard selection.condition.firstOpaque == nil else { return SharedPlan(try plan(selection, output: output)) }
        let shape = RequestShape(selection: selection, output: output)
        if let entry = cache.entry(shape) {
            let documents = try statistics.documentCount()
            let kept = entry.plan.plan.documentCount
            if abs(documents - kept) <= max(16, kept / 8) {
                if entry.selection == selection, entry.output == output {
                    if documents == kept { return entry.plan }
                    var plan = entry.plan.plan
                    plan.documentCount = documents
                    return SharedPlan(plan)
                }
                if let hint = entry.hint, let plan = try plan(selection, output: output, following: hint) {
                    return SharedPlan(plan)
                }
            }
        }
        let (plan, hint) = try planWithHint(selection, output: output)
        let shared = SharedPlan(plan)
        cache.keep(.init(selection: selection, output: output, plan: shared, hint: hint), for: shape)
        return shared
    }
}

/// A plan as requests of one shape share it (``PlanCache``) and an executor holds it: handed on as one reference,
/// where a copy of the plan retains each of its parts (a tenth of the time of a query that reads one key).
final class SharedPlan: Sendable {
    let plan: Plan
    init(_ plan: Plan) { self.plan = plan }
}

/// A request with its values left out, for ``PlanCache``: two requests have the same shape when they differ only in
/// the values they compare fields with (not in whether a value is nil, nor in its kind, nor in how many values a
/// list holds), in where their slice begins and ends within a power of two, and in nothing else.
struct RequestShape: Hashable, Sendable {
    let selection: Selection
    let output: Output

    func hash(into hasher: inout Hasher) {
        hasher.combine(selection.conditions.count)
        for c in selection.conditions { c.hashShape(into: &hasher) }
        hasher.combine(selection.sort.count)
        for s in selection.sort { hasher.combine(s.path); hasher.combine(s.descending) }
        hasher.combine(selection.idDescending)
        hasher.combine(RequestShape.windowShape(selection.window))
        switch output {
        case .documents: hasher.combine(0)
        case .fields(let paths): hasher.combine(1); hasher.combine(paths)
        case .groups(let g): hasher.combine(2); hasher.combine(g.by)
        }
    }

    static func == (a: RequestShape, b: RequestShape) -> Bool {
        let (x, y) = (a.selection, b.selection)
        return x.conditions.count == y.conditions.count
            && zip(x.conditions, y.conditions).allSatisfy { $0.hasSameShape(as: $1) }
            && x.sort == y.sort && x.idDescending == y.idDescending
            && windowShape(x.window) == windowShape(y.window)
            && x.window?.afterwards == y.window?.afterwards
            && (x.problem == nil) == (y.problem == nil)
            && a.output == b.output
    }

    /// Whether there is a slice, and the power of two its end is below: what weighs a walk that a limit stops.
    private static func windowShape(_ window: QueryWindow?) -> Int {
        guard let window else { return -1 }
        return Int.bitWidth - max(window.range.upperBound, 0).leadingZeroBitCount
    }
}

extension DocumentValue {
    /// The value's kind, as a shape tells values apart: nil, a number, a string, and so on.
    var shapeKind: Int {
        switch self {
        case .null: 0
        case .bool: 1
        case .int, .uint, .double: 2
        case .string: 3
        case .bytes: 4
        case .date: 5
        case .uuid: 6
        case .array: 7
        case .object: 8
        }
    }
}

extension Condition {
    /// Hashes what ``hasSameShape(as:)`` compares.
    func hashShape(into h: inout Hasher) {
        switch self {
        case .compare(let f, let op, let v): h.combine(0); h.combine(f); h.combine(op); h.combine(v.shapeKind)
        case .contains(let f, let v): h.combine(1); h.combine(f); h.combine(v.shapeKind)
        case .oneOf(let f, let vs):
            h.combine(2); h.combine(f); h.combine(vs.count)
            for v in vs { h.combine(v.shapeKind) }
        case .startsWith(let f, _): h.combine(3); h.combine(f)
        case .containsText(let f, _): h.combine(4); h.combine(f)
        case .textIgnoringCase(let f, let test, _): h.combine(5); h.combine(f); h.combine(test)
        case .anyElement(let f, let c): h.combine(6); h.combine(f); c.hashShape(into: &h)
        case .everyElement(let f, let c): h.combine(7); h.combine(f); c.hashShape(into: &h)
        case .test(let a, let op, let b): h.combine(8); a.hashShape(into: &h); h.combine(op); b.hashShape(into: &h)
        case .and(let cs): h.combine(9); h.combine(cs.count); for c in cs { c.hashShape(into: &h) }
        case .or(let cs): h.combine(10); h.combine(cs.count); for c in cs { c.hashShape(into: &h) }
        case .not(let c): h.combine(11); c.hashShape(into: &h)
        case .constant(let b): h.combine(12); h.combine(b)
        case .falseOnStop(let c): h.combine(13); c.hashShape(into: &h)
        case .opaque(let o): h.combine(14); h.combine(ObjectIdentifier(o))
        }
    }

    /// The same condition but for the values it compares with: the same fields, operators and structure, values of
    /// the same kinds (nil apart from the rest), lists of as many values. An ASCII prefix and another are apart
    /// too, as only the first bounds an index's keys.
    func hasSameShape(as other: Condition) -> Bool {
        switch (self, other) {
        case let (.compare(f1, o1, v1), .compare(f2, o2, v2)): return f1 == f2 && o1 == o2 && v1.shapeKind == v2.shapeKind
        case let (.contains(f1, v1), .contains(f2, v2)): return f1 == f2 && v1.shapeKind == v2.shapeKind
        case let (.oneOf(f1, v1), .oneOf(f2, v2)):
            return f1 == f2 && v1.count == v2.count && zip(v1, v2).allSatisfy { $0.shapeKind == $1.shapeKind }
        case let (.startsWith(f1, p1), .startsWith(f2, p2)):
            func bounds(_ p: String) -> Bool { !p.isEmpty && p.utf8.allSatisfy { $0 < 0x80 } }
            return f1 == f2 && bounds(p1) == bounds(p2)
        case let (.containsText(f1, _), .containsText(f2, _)): return f1 == f2
        case let (.textIgnoringCase(f1, t1, _), .textIgnoringCase(f2, t2, _)): return f1 == f2 && t1 == t2
        case let (.test(a1, o1, b1), .test(a2, o2, b2)): return o1 == o2 && a1.hasSameShape(as: a2) && b1.hasSameShape(as: b2)
        case let (.anyElement(f1, c1), .anyElement(f2, c2)), let (.everyElement(f1, c1), .everyElement(f2, c2)):
            return f1 == f2 && c1.hasSameShape(as: c2)
        case let (.and(c1), .and(c2)), let (.or(c1), .or(c2)):
            return c1.count == c2.count && zip(c1, c2).allSatisfy { $0.hasSameShape(as: $1) }
        case let (.not(c1), .not(c2)), let (.falseOnStop(c1), .falseOnStop(c2)): return c1.hasSameShape(as: c2)
        case let (.constant(b1), .constant(b2)): return b1 == b2
        case let (.opaque(o1), .opaque(o2)): return o1 === o2
        default: return false
        }
    }
}

extension ValueExpression {
    func hashShape(into h: inout Hasher) {
        switch self {
        case .field(let f): h.combine(0); h.combine(f)
        case .constant(let v): h.combine(1); h.combine(v.shapeKind)
        case .arithmetic(let op, let a, let b): h.combine(2); h.combine(op); a.hashShape(into: &h); b.hashShape(into: &h)
        case .negate(let a): h.combine(3); a.hashShape(into: &h)
        case .coalesce(let a, let b): h.combine(4); a.hashShape(into: &h); b.hashShape(into: &h)
        case .count(let a): h.combine(5); a.hashShape(into: &h)
        case .countWhere(let f, let c): h.combine(6); h.combine(f); c.hashShape(into: &h)
        case .choice(let c, let a, let b): h.combine(7); c.hashShape(into: &h); a.hashShape(into: &h); b.hashShape(into: &h)
        case .truth(let c): h.combine(8); c.hashShape(into: &h)
        case .unwrap(let a): h.combine(9); a.hashShape(into: &h)
        case .asDouble(let a): h.combine(10); a.hashShape(into: &h)
        }
    }

    func hasSameShape(as other: ValueExpression) -> Bool {
        switch (self, other) {
        case let (.field(f1), .field(f2)): return f1 == f2
        case let (.constant(v1), .constant(v2)): return v1.shapeKind == v2.shapeKind
        case let (.arithmetic(o1, a1, b1), .arithmetic(o2, a2, b2)):
            return o1 == o2 && a1.hasSameShape(as: a2) && b1.hasSameShape(as: b2)
        case let (.coalesce(a1, b1), .coalesce(a2, b2)): return a1.hasSameShape(as: a2) && b1.hasSameShape(as: b2)
        case let (.negate(a1), .negate(a2)), let (.count(a1), .count(a2)), let (.unwrap(a1), .unwrap(a2)),
             let (.asDouble(a1), .asDouble(a2)):
            return a1.hasSameShape(as: a2)
        case let (.countWhere(f1, c1), .countWhere(f2, c2)): return f1 == f2 && c1.hasSameShape(as: c2)
        case let (.choice(c1, a1, b1), .choice(c2, a2, b2)):
            return c1.hasSameShape(as: c2) && a1.hasSameShape(as: a2) && b1.hasSameShape(as: b2)
        case let (.truth(c1), .truth(c2)): return c1.hasSameShape(as: c2)
        default: return false
        }
    }
}
