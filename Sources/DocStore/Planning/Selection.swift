/// What a query selects, whatever it decodes to: the conditions, the ordering and the slice. What the planner reads.
struct Selection: Sendable, Equatable {
    /// All must hold.
    var conditions: [Condition] = []
    var sort: [SortSpec] = []
    /// Ties, and unsorted results, come in descending id order.
    var idDescending = false
    var window: QueryWindow?
    /// Why the query cannot run (a sort by a computed property), thrown when it is run.
    var problem: DocStoreError?

    var condition: Condition { .and(conditions) }

    /// The field and value of a request whose one condition is an equality with a value (`$0.email == x`), in no
    /// order but the ids': `nil` for any other request. (What it reads is for the caller to say: a slice, groups.)
    var soleEquality: (path: FieldPath, value: DocumentValue)? {
        guard conditions.count == 1, case .compare(let path, .equal, let value) = conditions[0], value != .null,
              sort.isEmpty else { return nil }
        return (path, value)
    }

    /// The id a look-up by id alone asks for (`$0.id == x`): `nil` for any other request.
    func soleID(idPath: FieldPath) -> DocumentValue? {
        soleEquality.flatMap { $0.path == idPath ? $0.value : nil }
    }

    /// Adds the condition of one `include` (with `excluded`, one `exclude`), its own bound for a part that stops
    /// (``Condition/settled``): `exclude` keeps the documents its condition does not match, including those where
    /// evaluating it stops.
    mutating func add(_ condition: Condition, excluded: Bool = false) {
        conditions.append(excluded ? .not(condition.settled) : condition.settled)
    }

    /// The same selection for counting: the order does not matter, nor what is done to the slice afterwards.
    var forCounting: Selection {
        var s = self
        s.sort = []
        s.idDescending = false
        s.window?.afterwards = []
        return s
    }

    static func == (a: Selection, b: Selection) -> Bool {
        a.conditions == b.conditions && a.sort == b.sort && a.idDescending == b.idDescending && a.window == b.window
            && a.problem?.message == b.problem?.message
    }
}

/// A step applied to a slice's documents after it is taken.
enum WindowStep: Sendable, Equatable {
    case reverse
    case slice(Range<Int>)

    static func apply<E>(_ steps: [WindowStep], to elements: [E]) -> [E] {
        var out = elements
        for step in steps {
            switch step {
            case .reverse: out.reverse()
            case .slice(let r): out = Array(out[min(r.lowerBound, out.count)..<min(r.upperBound, out.count)])
            }
        }
        return out
    }

    static func apply(_ steps: [WindowStep], toCount count: Int) -> Int {
        steps.reduce(count) { n, step in
            if case .slice(let r) = step { return max(0, min(r.upperBound, n) - min(r.lowerBound, n)) }
            return n
        }
    }
}

/// A slice of a query's ordered results, and what was done to the slice afterwards.
struct QueryWindow: Sendable, Equatable {
    var range: Range<Int>
    /// Reversals, and slices of a reversed slice, applied to the slice's documents in order. (A slice of an
    /// unreversed slice narrows `range` instead.)
    var afterwards: [WindowStep] = []

    /// The slice reversed: a second reversal undoes the first.
    func reversed() -> QueryWindow {
        var w = self
        if w.afterwards.last == .reverse { w.afterwards.removeLast() } else { w.afterwards.append(.reverse) }
        return w
    }

    /// The window after slicing `window` (none: the whole result) at `range`. Negative bounds count as 0.
    static func slicing(_ window: QueryWindow?, _ range: Range<Int>) -> QueryWindow {
        let lower = max(0, range.lowerBound)
        let upper = max(lower, range.upperBound)
        guard var window else { return QueryWindow(range: lower..<upper) }
        if window.afterwards.isEmpty {
            let count = window.range.count
            window.range = (window.range.lowerBound + min(lower, count))..<(window.range.lowerBound + min(upper, count))
        } else {
            // Which documents these are depends on how many the reversed slice really holds: decided after running.
            window.afterwards.append(.slice(lower..<upper))
        }
        return window
    }
}
