/// Chooses how to run a query: which index (if any) to scan and over which key ranges, what remains to check on
/// each document, and whether the order comes from the index or from a sort.
///
/// The choice uses facts the collection's ``CollectionStatistics`` give: the number of documents, and the number of
/// index entries in each candidate range, counted in the index up to a cap (exact for point look-ups on small
/// ranges). The planner reads nothing else: it knows no storage, and its plan is a value.
struct Planner<Statistics: CollectionStatistics> {
    /// Distinct keys counted per candidate before the count is called "more than".
    static var countCap: Int { 4_096 }
    /// Point look-ups combined from `[..].contains` values on compound indexes, at most.
    static var maximumRanges: Int { 256 }

    let statistics: Statistics

    /// The plan of a request: what `selection` asks of the collection, and for groups, how their aggregate is
    /// computed.
    func plan(_ selection: Selection, output: Output = .documents) throws -> Plan {
        try planWithHint(selection, output: output).plan
    }

    /// The plan of a request, and what a request of the same shape may take again of it (see ``PlanCache``).
    func planWithHint(_ selection: Selection, output: Output) throws -> (plan: Plan, hint: PlanHint?) {
        // (Without a hint, there is always a plan.)
        guard let (plan, hint) = try access(selection.planned(for: output), following: nil) else {
            throw DocStoreError(.storage, "no plan for \(selection.condition)")
        }
        return (grouped(plan, output: output, selection: selection), hint)
    }

    /// The plan of a request on the access `hint` names, built for the request's values; `nil` when that access
    /// cannot serve them, or costs more than `hint` allows.
    func plan(_ selection: Selection, output: Output, following hint: PlanHint) throws -> Plan? {
        guard let (plan, _) = try access(selection.planned(for: output), following: hint) else { return nil }
        return grouped(plan, output: output, selection: selection)
    }

    /// The plan of a request whose whole filter is `id == v`, unsorted and not grouped, on a collection that holds
    /// documents: the look-up of one key, which is what weighing every access chooses for it (nothing reads less
    /// than one key of the ids), made here without weighing, counting or a cache. `nil` for any other request.
    func idLookUp(_ selection: Selection, output: Output) throws -> Plan? {
        guard let value = selection.soleID(idPath: statistics.idPath), !output.isGroups else { return nil }
        let documents = try statistics.documentCount()
        guard documents > 0 else { return nil }
        let condition = selection.conditions[0]
        let scan = IndexScan(index: primaryKey, ranges: [KeyRange.prefix(KeyEncoder.key(value))], primary: true,
                             descending: selection.idDescending, answered: [condition], chosenFrom: [condition],
                             pointLookUps: true, estimate: 1)
        return Plan(collection: statistics.collection, documentCount: documents, filter: condition, access: .index(scan),
                    residual: .constant(true), sort: [], idPath: statistics.idPath, idDescending: selection.idDescending,
                    ordering: .natural, offset: selection.window?.range.lowerBound ?? 0,
                    limit: selection.window?.range.count, afterwards: selection.window?.afterwards ?? [])
    }

    /// `plan` with the groups `output` asks for, and how their aggregate is computed.
    private func grouped(_ plan: Plan, output: Output, selection: Selection) -> Plan {
        guard case .groups(let grouping) = output else { return plan }
        var plan = plan
        plan.grouping = grouping
        plan.aggregateAccess = grouping.isCount ? .counting(afterwards: selection.window?.afterwards ?? [])
                                                : aggregateAccess(grouping, plan: plan)
        return plan
    }

    /// How the aggregate of `grouping` is computed on `plan`'s matches: from the keys of an index when the plan
    /// reads every document, or scans that index alone with nothing left to check, and the index is a regular one
    /// (every document has an entry) whose fields begin with the group fields, followed by the aggregate's field if
    /// it reads one; otherwise over the matches.
    ///
    /// A scan of one range whose conditions fix the index's first fields to one value each (`customer == x`, with
    /// perhaps a range on the next field) answers from the keys of an index that begins with the scan's fields and
    /// follows the fixed ones with the group fields and the aggregate's: `max(date)` of one customer's orders reads
    /// one key of an index on `(customer, date)`: the scan's range holds the same documents in an index that begins
    /// with the fields it bounds. (The plan's access stays the scan that was weighed; the aggregate reads that
    /// range in the other index.)
    func aggregateAccess(_ grouping: Grouping, plan: Plan) -> AggregateAccess {
        let wanted = grouping.by + (grouping.aggregate.path.map { [$0] } ?? [])
        let overMatches = AggregateAccess.matches(reading: wanted)
        guard case .constant(true) = plan.residual, plan.offset == 0, plan.limit == nil else { return overMatches }
        /// Whether `index` holds the wanted fields right after its first `fixed` fields.
        func fits(_ index: IndexDefinition, after fixed: Int = 0) -> Bool {
            index.kind == .regular && index.fields.count >= fixed + wanted.count
                && Array(index.fields[fixed..<fixed + wanted.count]) == wanted
        }
        var firstOnly = false
        if grouping.by.isEmpty { switch grouping.aggregate { case .min, .max: firstOnly = true; default: break } }
        switch plan.access {
        case .fullScan:
            // The shortest index that fits: fewer bytes per key.
            guard let index = statistics.indexes.filter({ fits($0) }).min(by: { $0.fields.count < $1.fields.count }) else {
                return overMatches
            }
            return .indexKeys(index, ranges: [KeyRange(lower: [], upper: nil)], firstOnly: firstOnly, fixedParts: 0)
        case .index(let scan) where fits(scan.index):
            // Ranges of distinct equality values, or one bounded range: disjoint, walked in key order.
            return .indexKeys(scan.index, ranges: scan.ranges.sorted { $0.lower.lexicographicallyPrecedes($1.lower) },
                              firstOnly: firstOnly, fixedParts: 0)
        case .index(let scan) where !scan.primary && scan.index.kind != .multi && scan.ranges.count == 1:
            // (A multi-value index's keys are elements: its ranges are not those of an index of the whole value.)
            let fixed = scan.index.fields.prefix { field in
                scan.answered.contains { c in
                    switch c {
                    case .compare(field, .equal, _), .oneOf(field, _): true
                    default: false
                    }
                }
            }.count
            // The ranges bound the fixed fields, and the next one when a condition answered bounds it.
            let next = fixed < scan.index.fields.count ? scan.index.fields[fixed] : nil
            let nextBounded = scan.answered.contains { c in if case .compare(next, _, _) = c { true } else { false } }
            let bounded = Array(scan.index.fields.prefix(fixed + (nextBounded ? 1 : 0)))
            guard fixed > 0, let index = statistics.indexes.filter({
                fits($0, after: fixed) && Array($0.fields.prefix(bounded.count)) == bounded
            }).min(by: { $0.fields.count < $1.fields.count }) else {
                return overMatches
            }
            return .indexKeys(index, ranges: scan.ranges, firstOnly: firstOnly, fixedParts: fixed)
        default:
            return overMatches
        }
    }

    /// Where the matches of `selection` come from, what is checked on each, and how they are ordered; and what a
    /// request of the same shape may take again. Following a `hint`, only the access it names is weighed: `nil`
    /// when it cannot serve, or costs more than the hint allows.
    private func access(_ selection: Selection, following hint: PlanHint?) throws -> (Plan, PlanHint?)? {
        let documents = try statistics.documentCount()
        var plan = Plan(selection, collection: statistics.collection, documentCount: documents)
        plan.idPath = statistics.idPath
        if case .constant(false) = plan.filter {
            guard hint == nil else { return nil }
            return (Plan(selection, collection: plan.collection, documentCount: documents, nothing: Plan.Access.none),
                    nil)
        }
        if hint?.kind == .fullScan { return (plan, hint) }
        let conjuncts = plan.filter.conjuncts
        // The cheapest access so far, with what it answers and whether it gives the order; none: the full scan.
        var best: (cost: Double, access: Plan.Access, answered: [Condition], ordering: Plan.Ordering)?
        var considered: [ConsideredAccess] = []
        // The cost of every access weighed, the full scan's first.
        var costs = [Double(documents)]
        let candidates: [(IndexDefinition, Bool)]
        if let hint, let index = hint.index {
            candidates = [(index, hint.primary)]
        } else {
            candidates = [(primaryKey, true)] + statistics.indexes.map { ($0, false) }
        }

        func consider(_ cost: Double, _ access: Plan.Access, answering answered: [Condition],
                      _ ordering: Plan.Ordering) {
            if hint == nil {
                switch access {
                case .index(let scan): considered.append(.scan(scan))
                case .union(let scans): considered.append(.union(scans))
                default: break
                }
            }
            costs.append(cost)
            if cost < best?.cost ?? Double(documents) { best = (cost, access, answered, ordering) }
        }

        // Every scan that could serve, estimated together: on an engine with round trips, in one of them.
        var filtering = hint?.kind == .ordering ? [] : Planner.undominated(
            candidates.compactMap { filteringScan(on: $0.0, primary: $0.1, conjuncts: conjuncts) })
        // For each `||` over indexed fields, each branch's candidate scans.
        var unions: [(conjunct: Condition, branches: [Condition], choices: [[IndexScan]])] = []
        for conjunct in conjuncts where hint == nil {
            guard case .or(let branches) = conjunct else { continue }
            let choices = branches.map { branch in
                Planner.undominated(
                    candidates.compactMap { filteringScan(on: $0.0, primary: $0.1, conjuncts: branch.conjuncts) })
            }
            if choices.allSatisfy({ !$0.isEmpty }) { unions.append((conjunct, branches, choices)) }
        }
        var ordering = plan.sort.isEmpty || hint?.kind == .filtering ? [] : candidates.compactMap {
            orderingScan(on: $0.0, primary: $0.1, conjuncts: conjuncts, for: plan)
        }
        if hint != nil, filtering.count + ordering.count != 1 { return nil }
        var all = filtering + unions.flatMap { $0.choices.joined() } + ordering
        try estimate(&all)
        var next = all[...]
        func take(_ n: Int) -> [IndexScan] { defer { next = next.dropFirst(n) }; return Array(next.prefix(n)) }
        filtering = take(filtering.count)
        for u in unions.indices { unions[u].choices = unions[u].choices.map { take($0.count) } }
        ordering = take(ordering.count)

        // Scans that narrow the candidates.
        var narrowest = Double(documents)
        for var scan in filtering {
            var cost = Double(scan.estimate)
            narrowest = min(narrowest, cost)
            // The ids' ranges are the documents themselves, in id order: no look-up from an entry to its document,
            // and no sort when none is asked for.
            let inIDOrder = scan.primary && plan.sort.isEmpty
            if scan.primary {
                cost *= 0.5
                if inIDOrder, plan.idDescending { scan.descending = true; scan.ranges.reverse() }
            }
            // (Index order is not id order, nor the sort's.)
            consider(cost, .index(scan), answering: scan.answered, inIDOrder ? .natural : .sorted)
        }
        // A union for `||` over indexed fields: the narrowest scan of each branch.
        for (conjunct, branches, choices) in unions {
            var union = choices.compactMap { scans in scans.min { $0.estimate < $1.estimate } }   // (none empty)
            for i in union.indices { union[i].deduplicate = true }
            let cost = Double(union.reduce(0) { $0 + $1.estimate })
            narrowest = min(narrowest, cost)
            // When each scan answers its branch whole, the union (its ids seen once) answers the `||`, and no
            // document needs reading to check it: a count is then one of index entries.
            let answered = zip(branches, union).allSatisfy {
                Planner.residual($0.conjuncts, removing: $1.answered) == .constant(true)
            }
            consider(cost, .union(union), answering: answered ? [conjunct] : [], .sorted)
        }
        // A scan whose order is the wanted order.
        for scan in ordering {
            // The share of this scan's entries that match: the narrowest candidate's size over this scan's
            // (1 when this scan is itself the narrowest, its ranges having applied the filter).
            let selectivity = min(1, max(narrowest, 1) / Double(max(scan.estimate, 1)))
            var cost = Double(scan.estimate)
            if let needed = plan.needed {
                cost = min(cost, Double(needed) / max(selectivity, 1e-9))
            }
            cost *= 0.999   // on a tie, the plan that needs no sort
            consider(cost, .index(scan), answering: scan.answered, .natural)
        }
        if let hint {
            // The hinted scan, unless another access would now do better than it did when it was chosen.
            guard let best, hint.kind == .ordering || best.cost <= hint.costLimit else { return nil }
        }
        var reusable: PlanHint?
        if let best {
            plan.access = best.access
            plan.residual = Planner.residual(conjuncts, removing: best.answered)
            plan.ordering = best.ordering
            if case .index(let scan) = best.access, hint == nil {
                if scan.orderedBy == nil {
                    // The next best: the cheapest of the other costs.
                    var others = costs
                    if let i = others.firstIndex(of: best.cost) { others.remove(at: i) }
                    reusable = PlanHint(kind: .filtering, index: scan.index, primary: scan.primary,
                                        costLimit: min(others.min() ?? Double(documents), 2 * best.cost + 64))
                } else if filtering.isEmpty && unions.isEmpty {
                    // Chosen for its order alone: no scan narrows the request, whatever its values.
                    reusable = PlanHint(kind: .ordering, index: scan.index, primary: scan.primary, costLimit: .infinity)
                }
            }
        } else if considered.isEmpty {
            reusable = PlanHint(kind: .fullScan, index: nil, primary: false, costLimit: .infinity)
        }
        plan.considered = considered.isEmpty ? [] : [.fullScan(documents: documents)] + considered
        return (plan, hint ?? reusable)
    }

    /// The scans that no other scan beats whatever the data: a scan whose ranges were chosen from conditions that
    /// another's were chosen from too (and more, or as many for an earlier one) holds at least as many entries, as
    /// each document has one entry at most in both, so it need not be counted. (`city == x && age >= 50`: the
    /// compound index on city and age beats both the city index and the age index.) The ids are always kept, for
    /// their lower cost per entry; a multi-value index, whose documents have many entries, is neither beaten nor
    /// beats.
    static func undominated(_ scans: [IndexScan]) -> [IndexScan] {
        func covers(_ a: IndexScan, _ b: IndexScan) -> Bool { b.chosenFrom.allSatisfy(a.chosenFrom.contains) }
        return scans.indices.filter { i in
            let b = scans[i]
            if b.primary || b.index.kind == .multi { return true }
            return !scans.indices.contains { j in
                let a = scans[j]
                return j != i && a.index.kind != .multi && covers(a, b) && (j < i || !covers(b, a))
            }
        }.map { scans[$0] }
    }

    /// The documents' own keys, their ids, as a unique index on the id whose entries are the documents.
    private var primaryKey: IndexDefinition {
        IndexDefinition(name: "id", kind: .unique, fields: [statistics.idPath])
    }

    /// The conjuncts left to check once `answered` ones are guaranteed by the scan.
    static func residual(_ conjuncts: [Condition], removing answered: [Condition]) -> Condition {
        let rest = conjuncts.filter { c in !answered.contains(c) && !answered.contains { implies($0, c) } }
        return Condition.and(rest).simplified
    }

    /// Whether every value the comparison `a` lets through (as an index range answers it) meets the comparison
    /// `c` on the same field: `x == 7` or `x > 20` already say `x >= 0`.
    static func implies(_ a: Condition, _ c: Condition) -> Bool {
        guard case .compare(let f, let opA, let v) = a, case .compare(f, let opC, let w) = c, v != .null, w != .null,
              KeyEncoder.kindRange(of: v) == KeyEncoder.kindRange(of: w), opC != .equal, opC != .notEqual else {
            return false
        }
        switch opA {
        case .equal: return ValueComparison.compare(values: v, opC, w)
        case .greater, .greaterOrEqual:
            guard opC == .greater || opC == .greaterOrEqual else { return false }
            return ValueComparison.compare(values: v, .greater, w)
                || (ValueComparison.compare(values: v, .equal, w) && (opA == .greater || opC == .greaterOrEqual))
        case .less, .lessOrEqual:
            guard opC == .less || opC == .lessOrEqual else { return false }
            return ValueComparison.compare(values: v, .less, w)
                || (ValueComparison.compare(values: v, .equal, w) && (opA == .less || opC == .lessOrEqual))
        case .notEqual: return false
        }
    }

    // MARK: Ranges

    /// The key ranges of an index's fields, from conditions on them: equality on a leading run of fields, then at
    /// most one range (or string prefix) on the next.
    private func ranges(on index: IndexDefinition, primary: Bool, conjuncts: [Condition])
        -> (ranges: [KeyRange], answered: [Condition], chosenFrom: [Condition], points: Bool)? {
        // (The ids hold no nil, and every document has one.)
        guard primary || !index.isUnique || Planner.excludesNilInEveryField(of: index, conjuncts) else { return nil }
        var prefixes: [[UInt8]] = [[]]
        var answered: [Condition] = []
        var chosenFrom: [Condition] = []
        for field in index.fields {
            if let (values, condition) = equality(on: field, in: conjuncts, unique: index.isUnique) {
                guard prefixes.count * values.count <= Planner.maximumRanges else { break }
                prefixes = prefixes.flatMap { p in values.map { p + KeyEncoder.key($0) } }
                answered.append(condition)
                chosenFrom.append(condition)
                continue
            }
            if let (lowerCondition, upperCondition, value) = bounds(on: field, in: conjuncts) {
                let ranges = prefixes.map {
                    Planner.boundedRange(after: $0, lower: lowerCondition, upper: upperCondition, kindOf: value)
                }
                answered += [lowerCondition, upperCondition].compactMap { $0 }
                chosenFrom += [lowerCondition, upperCondition].compactMap { $0 }
                return (ranges, answered, chosenFrom, false)
            }
            if let condition = prefixCondition(on: field, in: conjuncts), case .startsWith(_, let p) = condition {
                let ranges = prefixes.map { KeyRange.prefix($0 + KeyEncoder.stringPrefix(p)) }
                chosenFrom.append(condition)
                // Not answered: a prefix of bytes is not always a prefix of characters; each match is checked.
                return (ranges, answered, chosenFrom, false)
            }
            // `!= nil`: every key after nil's, which sorts first (a unique index holds no nil, and is refused above).
            if let condition = conjuncts.first(where: { $0 == .compare(field, .notEqual, .null) }) {
                let ranges = prefixes.map(KeyRange.notNil(after:))
                answered.append(condition)
                chosenFrom.append(condition)
                return (ranges, answered, chosenFrom, false)
            }
            break
        }
        guard !answered.isEmpty || prefixes.count > 1 else { return nil }
        // Every field fixed: each range is one key.
        let points = answered.count == index.fields.count
        return (prefixes.map { KeyRange.prefix($0) }, answered, chosenFrom, points)
    }

    /// The keys that start with `prefix` and continue with a value between the bounds (`>`/`>=` below, `<`/`<=`
    /// above); a missing bound is the end of the values of `value`'s kind, so that `x > 5` holds no string or nil.
    static func boundedRange(after prefix: [UInt8], lower: Condition?, upper: Condition?,
                             kindOf value: DocumentValue) -> KeyRange {
        let (kindLower, kindUpper) = KeyEncoder.kindRange(of: value)
        var low = prefix + [kindLower]
        var high: [UInt8]? = prefix + [kindUpper]
        if case .compare(_, let op, let v)? = lower {
            let k = prefix + KeyEncoder.key(v)
            low = op == .greater ? (KeyEncoder.prefixUpperBound(k) ?? k) : k
        }
        if case .compare(_, let op, let v)? = upper {
            let k = prefix + KeyEncoder.key(v)
            high = op == .lessOrEqual ? KeyEncoder.prefixUpperBound(k) : k
        }
        return KeyRange(lower: low, upper: high)
    }

    /// A unique index holds no key with a nil part, so it can answer only a query that excludes nil in every one of
    /// its fields: otherwise the documents with a nil there would be missed.
    static func excludesNilInEveryField(of index: IndexDefinition, _ conjuncts: [Condition]) -> Bool {
        index.fields.allSatisfy { field in
            conjuncts.contains { c in
                switch c {
                case .compare(field, let op, let v): return op != .notEqual && v != .null
                case .oneOf(field, let vs): return !vs.contains(.null)
                case .startsWith(field, _): return true
                default: return false
                }
            }
        }
    }

    /// Values a field must equal: from `field == v` or `[..].contains(field)`.
    private func equality(on field: FieldPath, in conjuncts: [Condition], unique: Bool) -> ([DocumentValue], Condition)? {
        for c in conjuncts {
            switch c {
            case .compare(field, .equal, let v):
                if unique && v == .null { continue }    // a unique index holds no nil
                return ([v], c)
            case .oneOf(field, let vs):
                if unique && vs.contains(.null) { continue }
                var seen = Set<[UInt8]>()
                let distinct = vs.filter { seen.insert(KeyEncoder.key($0)).inserted }
                return (distinct, c)
            default: continue
            }
        }
        return nil
    }

    /// A lower and an upper bound on a field, from `<`, `<=`, `>`, `>=` (values of one kind).
    private func bounds(on field: FieldPath, in conjuncts: [Condition]) -> (Condition?, Condition?, DocumentValue)? {
        var lower: Condition?
        var upper: Condition?
        var kindValue: DocumentValue?
        for c in conjuncts {
            guard case .compare(field, let op, let v) = c, op != .equal, op != .notEqual, v != .null else { continue }
            if let kindValue, KeyEncoder.kindRange(of: kindValue) != KeyEncoder.kindRange(of: v) { continue }
            switch op {
            case .greater, .greaterOrEqual:
                if lower == nil || Planner.tighterLower(c, than: lower) { lower = c }
            case .less, .lessOrEqual:
                if upper == nil || Planner.tighterUpper(c, than: upper) { upper = c }
            default: continue
            }
            kindValue = v
        }
        guard let kindValue else { return nil }
        return (lower, upper, kindValue)
    }

    private static func boundKey(_ c: Condition?) -> ([UInt8], Condition.Comparison)? {
        guard case .compare(_, let op, let v)? = c else { return nil }
        return (KeyEncoder.key(v), op)
    }

    private static func tighterLower(_ c: Condition, than other: Condition?) -> Bool {
        guard let (a, opA) = boundKey(c), let (b, _) = boundKey(other) else { return false }
        return b.lexicographicallyPrecedes(a) || (a == b && opA == .greater)
    }

    private static func tighterUpper(_ c: Condition, than other: Condition?) -> Bool {
        guard let (a, opA) = boundKey(c), let (b, _) = boundKey(other) else { return false }
        return a.lexicographicallyPrecedes(b) || (a == b && opA == .less)
    }

    /// `field.starts(with: p)` with an ASCII prefix (whose bytes bound the keys).
    private func prefixCondition(on field: FieldPath, in conjuncts: [Condition]) -> Condition? {
        conjuncts.first { c in
            if case .startsWith(field, let p) = c { return !p.isEmpty && p.utf8.allSatisfy { $0 < 0x80 } }
            return false
        }
    }

    // MARK: Candidate scans

    /// Whether `condition` is one that can narrow the keys of an index that begins with `field`.
    static func narrows(_ condition: Condition, _ field: FieldPath) -> Bool {
        switch condition {
        case .compare(field, _, _), .oneOf(field, _), .startsWith(field, _): true
        default: false
        }
    }

    /// The scan of `index` that the conditions narrow, if they narrow it at all.
    private func filteringScan(on index: IndexDefinition, primary: Bool = false, conjuncts: [Condition]) -> IndexScan? {
        if index.kind == .multi {
            guard let field = index.fields.first else { return nil }
            for c in conjuncts {
                if case .contains(field, let v) = c {
                    return IndexScan(index: index, ranges: [KeyRange.prefix(KeyEncoder.key(v))], answered: [c],
                                     chosenFrom: [c])
                }
            }
            return nil
        }
        // (Asked first, as it costs nothing: most indexes are about fields the query does not name.)
        guard let first = index.fields.first, conjuncts.contains(where: { Planner.narrows($0, first) }),
              let found = ranges(on: index, primary: primary, conjuncts: conjuncts) else { return nil }
        let points = found.points && (primary || index.isUnique)
        guard primary else {
            return IndexScan(index: index, ranges: found.ranges, deduplicate: found.ranges.count > 1,
                             answered: found.answered, chosenFrom: found.chosenFrom, pointLookUps: points)
        }
        // Distinct ids in disjoint ranges, walked in id order: each document once, with no set of those seen.
        return IndexScan(index: index, ranges: found.ranges.sorted { $0.lower.lexicographicallyPrecedes($1.lower) },
                         primary: true, answered: found.answered, chosenFrom: found.chosenFrom, pointLookUps: points)
    }

    /// A scan of `index` in the order `plan` asks for: the index's fields after those fixed by equality must be
    /// exactly the sort fields, in one direction, so that ties left are ties of the whole key, in id order.
    private func orderingScan(on index: IndexDefinition, primary: Bool, conjuncts: [Condition], for plan: Plan)
        -> IndexScan? {
        let sort = plan.sort
        guard index.kind != .multi, let direction = sort.first?.descending,
              sort.allSatisfy({ $0.descending == direction }),
              primary || !index.isUnique || Planner.excludesNilInEveryField(of: index, conjuncts) else { return nil }
        let fields = index.fields
        var fixed = 0
        var answered: [Condition] = []
        var prefix: [UInt8] = []
        while fixed < fields.count, let (values, condition) = equality(on: fields[fixed], in: conjuncts, unique: index.isUnique),
              values.count == 1, !sort.contains(where: { $0.path == fields[fixed] }) {
            prefix += KeyEncoder.key(values[0])
            answered.append(condition)
            fixed += 1
        }
        guard Array(fields[fixed...]) == sort.map(\.path) else { return nil }
        var ranges = [KeyRange.prefix(prefix)]
        if let first = sort.first, let (lower, upper, value) = bounds(on: first.path, in: conjuncts) {
            ranges = [Planner.boundedRange(after: prefix, lower: lower, upper: upper, kindOf: value)]
            answered += [lower, upper].compactMap { $0 }
        }
        return IndexScan(index: index, ranges: ranges, primary: primary, descending: direction,
                         descendingIDs: plan.idDescending, answered: answered, chosenFrom: answered, orderedBy: sort)
    }

    /// Counts the entries in each scan's ranges, up to ``countCap`` distinct keys, all the scans' counts asked
    /// together; past the cap the estimate is a guess between what was counted and a quarter of the index.
    private func estimate(_ scans: inout [IndexScan]) throws {
        let nilKeys = [KeyRange.prefix(KeyEncoder.key(.null))]
        var counted: [Int] = []
        var asked: [IndexScan] = []
        for i in scans.indices {
            if scans[i].pointLookUps {
                scans[i].estimate = scans[i].ranges.count   // at most one entry each: nothing to count
            } else if scans[i].ranges.count == 1, scans[i].ranges[0].lower.isEmpty, scans[i].ranges[0].upper == nil {
                scans[i].estimate = try statistics.entryCount(of: scans[i])   // the whole index
            } else {
                // `x != nil` (every key but nil's, which sorts first): the whole index less its nil keys, which
                // are counted, so that a field most documents hold is not taken for a narrow range.
                var counting = scans[i]
                if counting.ranges == [KeyRange.notNil(after: [])] { counting.ranges = nilKeys }
                asked.append(counting)
                counted.append(i)
            }
        }
        guard !asked.isEmpty else { return }
        let counts = try statistics.entryCounts(of: asked, countingAtMost: Planner.countCap)
        for (i, (total, capped)) in zip(counted, counts) {
            if scans[i].ranges == [KeyRange.notNil(after: [])] {
                scans[i].estimate = max(0, try statistics.entryCount(of: scans[i]) - total)
            } else {
                scans[i].estimate = capped ? max(total, try statistics.entryCount(of: scans[i]) / 4) : total
            }
            scans[i].estimateIsCapped = capped
        }
    }
}

/// What the planner knows of a collection: its indexes, and how many documents and index entries it holds.
protocol CollectionStatistics {
    var collection: String { get }
    /// Where the documents hold their ids.
    var idPath: FieldPath { get }
    var indexes: [IndexDefinition] { get }
    func documentCount() throws -> Int
    /// The entries of the whole index `scan` walks (the documents, for the ids).
    func entryCount(of scan: IndexScan) throws -> Int
    /// The entries in each scan's key ranges, counting at most `limit` distinct keys of each; `capped` where it
    /// stopped there.
    func entryCounts(of scans: [IndexScan], countingAtMost limit: Int) throws -> [(count: Int, capped: Bool)]
}
