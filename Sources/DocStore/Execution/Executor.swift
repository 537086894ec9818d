import Foundation

/// Runs a ``Plan``: walks its candidates, checks the residual condition on each document's bytes, orders and
/// slices the matches, and hands back documents (or ids, a count, some fields of each, or groups).
///
/// Its entry points: ``walk(collectFirst:whole:_:)`` and ``cursor(collectFirst:_:)`` for the results,
/// ``documents(_:)`` for them decoded, ``project(_:)`` for some fields of each, ``resultIDs()``, ``count()`` and
/// ``aggregate()``. It keeps the statistics of what it did.
final class Executor {
    private let shared: SharedPlan
    /// The plan, read in place: never copied whole.
    var plan: Plan { _read { yield shared.plan } }
    let handle: CollectionHandle
    let txn: any StorageTransaction
    let statistics = StatisticsBox()
    /// The scan read index entries only: documents are first read when returned.
    private(set) var scanSkippedDocuments = false
    /// What is checked on each candidate.
    private let residual: Residual
    /// What each match is ordered by.
    private let sortKeys: SortKeys
    /// How far a full scan with a condition is split among threads.
    private let scan: ParallelScan.Settings

    init(plan: SharedPlan, handle: CollectionHandle, txn: any StorageTransaction, scan: ParallelScan.Settings = .off) {
        self.shared = plan
        self.handle = handle
        self.txn = txn
        self.scan = scan
        residual = Residual(plan.plan.residual, handle: handle, statistics: statistics)
        sortKeys = SortKeys(plan.plan.sort, idDescending: plan.plan.idDescending)
    }

    /// The candidates of the plan's access. With `whole`, the caller reads every one (it does not stop early), so
    /// an index walk says it will read the entries the planner counted in its ranges.
    func makeSource(fetchDocuments: Bool = true, whole: Bool = false) throws -> CandidateSource {
        switch plan.access {
        case .none, .noCollection:
            return CandidateSource()
        case .fullScan(let descending):
            return try FullScanSource(txn: txn, documents: handle.documents, descending: descending, statistics: statistics)
        case .index(let scan):
            let source = try IndexScanSource(scan: scan, space: try handle.space(of: scan), txn: txn,
                                             documents: handle.documents, seen: scan.deduplicate ? .init() : nil,
                                             fetchDocuments: fetchDocuments, statistics: statistics)
            // A page of results read forward in the index's order, with nothing more to check: that many entries.
            // (A walk back is placed by a fetch past its range's end first.)
            if plan.ordering == .natural, residual.isTrivial, !scan.descending, let needed = plan.needed {
                source.expect(about: needed)
            } else if whole && !scan.descending {
                source.expect(about: scan.estimate)
            }
            return source
        case .union(let scans):
            let seen = IndexScanSource.SeenIDs()
            return UnionSource(try scans.map {
                let source = try IndexScanSource(scan: $0, space: try handle.space(of: $0), txn: txn,
                                                 documents: handle.documents, seen: seen,
                                                 fetchDocuments: fetchDocuments, statistics: statistics)
                if whole && !$0.descending { source.expect(about: $0.estimate) }
                return source
            })
        }
    }

    /// Whether a candidate document satisfies the residual condition.
    @inline(__always)
    func matches(_ candidate: CandidateSource.Candidate) throws -> Bool { try residual.matches(candidate) }

    /// The bytes of the document with primary key `id`, counted as read; `nil` when it is gone.
    func fetch(id: [UInt8]) throws -> UnsafeRawBufferPointer? {
        guard let raw = try txn.get(handle.documents, id) else { return nil }
        if scanSkippedDocuments { statistics.value.documentsRead += 1 }
        return raw
    }

    /// Calls `body` with each matching candidate in the access order until it returns false. With
    /// `needsDocument` false and nothing to check, an index scan reads only its entries: the candidate's
    /// `document` is then not the document (the caller uses the id alone).
    /// `whole` says whether `body` takes every match: with `false`, it may stop the walk long before its end, and
    /// the engine fetches no more than it must.
    func forEachMatch(needsDocument: Bool = true, whole: Bool,
                      _ body: (CandidateSource.Candidate) throws -> Bool) throws {
        let fetch = needsDocument || !residual.isTrivial
        if case .fullScan = plan.access {} else if !fetch { scanSkippedDocuments = true }
        let source = try makeSource(fetchDocuments: fetch, whole: whole)
        defer { source.close() }
        while let candidate = try source.next() {
            if try matches(candidate) {
                if try !body(candidate) { return }
            }
        }
    }

    /// The matches of a full scan with a condition, found on several threads (``ParallelScan``): each range of ids
    /// gathered by `add` into a part of its own made by `start`, the parts in id order. `nil` when this run is
    /// not split (another access, too few documents, one thread), and the caller scans alone.
    ///
    /// `add` runs on several threads at once: it may change only the part it is given.
    func matchesInParts<Part>(start: @escaping () -> Part,
                              add: @escaping (inout Part, CandidateSource.Candidate) throws -> Void) throws
        -> [Part]? {
        guard scan.threads > 1, case .fullScan = plan.access else { return nil }
        return try ParallelScan(txn: txn, documents: handle.documents, settings: scan).run(
            residual: { [shared, handle] in Residual(shared.plan.residual, handle: handle, statistics: $0) },
            statistics: statistics, start: start, add: add)
    }

    /// All the matches of a full scan split among threads, in the access order, as a source whose candidates need
    /// no further check; `nil` when the run is not split, has a limit (a walk that stops early should not read
    /// every document first), or nothing to check (the documents are then handed on as fast as they are found).
    func splitMatches() throws -> GatheredSource? {
        guard plan.limit == nil, !residual.isTrivial, case .fullScan(let descending) = plan.access,
              let parts = try matchesInParts(start: { [CandidateSource.Candidate]() }, add: { $0.append($1) }) else {
            return nil
        }
        let found = Array(parts.joined())
        return GatheredSource(descending ? found.reversed() : found)
    }

    /// Calls `body` with every matching candidate, in id order rather than the access order. An index scan first
    /// gathers its ids alone, sorts them, and then reads the documents in that order (``DocumentsByID``: through
    /// one cursor on a file, whose neighbouring ids share leaf pages; in batches on an engine with round trips).
    /// For runs that keep every match anyway (a sort without a limit); others use
    /// ``forEachMatch(needsDocument:whole:_:)``.
    ///
    /// On an engine that reads by id in batches, a read fetches the documents with the index's entries instead (one
    /// round trip per window rather than one more per batch of ids), keeps the matches (their bytes stay valid
    /// until the read ends) and hands them on in id order.
    ///
    /// `body` gathers what it is given, and writes nothing: the documents are read ahead of it, in batches on an
    /// engine with round trips, in a write transaction too.
    func forEachMatchInIDOrder(_ body: (CandidateSource.Candidate) throws -> Bool) throws {
        switch plan.access {
        case .index(let scan) where !scan.primary: break
        case .union: break
        default: return try forEachMatch(whole: true, body)   // (the ids' ranges are in id order)
        }
        var ids = IDList()
        if DocumentsByID.readsInBatches(txn) {
            var documents: [UnsafeRawBufferPointer] = []
            try forEachMatch(whole: true) { candidate in
                ids.append(candidate.id)
                documents.append(candidate.document)
                return true
            }
            for i in ids.idOrder() {
                guard try ids.withID(i, { try body(($0, documents[i])) }) else { return }
            }
            return
        }
        if let source = try idsAlone(inKeyOrder: false, checkedLater: true) {
            defer { source.close() }
            try source.appendIDs(to: &ids)
        } else {
            let source = try makeSource(fetchDocuments: false, whole: true)
            defer { source.close() }
            while let candidate = try source.next() { ids.append(candidate.id) }
        }
        ids.sort(descending: false)
        if repeatsIDs { ids.dropRepeats() }
        // (`body` gathers what it is given: nothing is written meanwhile.)
        let documents = try DocumentsByID(txn, handle.documents, unchanged: true)
        defer { documents.close() }
        for i in 0..<ids.count {
            guard let document = try documents.document(i, of: ids) else { continue }   // verify() reports it
            statistics.value.documentsRead += 1
            let more = try ids.withID(i) { id in try !matches((id, document)) || body((id, document)) }
            if !more { return }
        }
    }

    /// The results one at a time, in order and within the window and its later steps.
    ///
    /// In the access order (no sort), documents are handed on as the scan finds them: one look-up each. Sorted
    /// results, and with `collectFirst` all of them, are ordered by their ids first and then read one by one: a
    /// loop that writes between two results cannot then move a document ahead of the walk and meet it again.
    fileprivate final class Walk {
        private let executor: Executor
        // Everything the per-result path reads is a constant of the walk: nothing is copied or checked for
        // exclusive access per result (a copy of the plan per result cost a third of a raw walk).
        private let limit: Int?
        private let offset: Int
        private let countsReads: Bool
        private let source: CandidateSource?
        /// Whether `source`'s candidates are matches already (a split scan's).
        private let checked: Bool
        private let ids: IDList
        /// Reads the documents of `ids`.
        private let documents: DocumentsByID?
        private var position = 0
        private var skipped = 0
        private var produced = 0
        private var closed = false

        /// With `whole`, the caller takes every result (the walk is not left early): a full scan may then be
        /// split among threads, its matches gathered before the first is handed on.
        init(_ executor: Executor, collectFirst: Bool, whole: Bool = false) throws {
            self.executor = executor
            let (limit, offset) = (executor.plan.limit, executor.plan.offset)
            (self.limit, self.offset) = (limit, offset)
            if executor.plan.ordering == .natural && executor.plan.afterwards.isEmpty && !collectFirst {
                let gathered = whole ? try executor.splitMatches() : nil
                source = limit == 0 ? nil : try gathered ?? executor.makeSource(whole: whole && limit == nil)
                checked = gathered != nil
                ids = IDList()
                documents = nil
            } else {
                source = nil
                checked = false
                ids = try executor.resultIDs()
                documents = ids.isEmpty ? nil : try DocumentsByID(executor.txn, executor.handle.documents)
            }
            countsReads = executor.scanSkippedDocuments
        }

        deinit { close() }

        /// Calls `body` with the next result's id and stored bytes (valid during the call) and returns what it
        /// returns; `nil` after the last result.
        func next<R>(_ body: (_ id: UnsafeRawBufferPointer, _ document: UnsafeRawBufferPointer) throws -> R) throws -> R? {
            guard !closed else { return nil }
            if let source {
                if let limit, produced >= limit { close(); return nil }
                while let candidate = try source.next() {
                    guard try checked || executor.matches(candidate) else { continue }
                    if skipped < offset { skipped += 1; continue }
                    produced += 1
                    return try body(candidate.id, candidate.document)
                }
                close()
                return nil
            }
            guard let documents else { return nil }
            while position < ids.count {
                position += 1
                guard let raw = try documents.document(position - 1, of: ids) else { continue }   // verify() reports it
                let found = try ids.withID(position - 1) { id -> R? in
                    if countsReads { executor.statistics.value.documentsRead += 1 }
                    return try body(id, raw)
                }
                if let found { return found }
            }
            close()
            return nil
        }

        func close() {
            guard !closed else { return }
            closed = true
            source?.close()
            documents?.close()
        }
    }

    /// Calls `body` with each result's id and stored bytes (valid during the call), in order, until it returns
    /// `false`. With `collectFirst`, the matches are found before the first is handed on (a loop that writes cannot
    /// then meet a document twice); with `whole`, the caller takes every result, and a full scan may be split among
    /// threads.
    func walk(collectFirst: Bool = false, whole: Bool = true,
              _ body: (_ id: UnsafeRawBufferPointer, _ document: UnsafeRawBufferPointer) throws -> Bool) throws {
        let walk = try Walk(self, collectFirst: collectFirst, whole: whole)
        while let more = try walk.next(body), more {}
    }

    /// The results, each made by `decode` from its stored bytes (counted as decoded and returned), in order.
    func documents<T>(_ decode: (_ id: UnsafeRawBufferPointer, _ document: UnsafeRawBufferPointer) throws -> T)
        throws -> [T] {
        if let (key, scan) = soleKey {
            // One `get` (two through a unique index, where a call is not a round trip), where a walk would make
            // a source, open a cursor and position it.
            statistics.value.entriesScanned += 1
            if scan.primary {
                guard let raw = try txn.get(handle.documents, key) else { return [] }
                statistics.value.documentsRead += 1
                return try key.withUnsafeBytes { [try decoded($0, raw, decode)] }
            }
            // An entry whose document is missing is passed over, as a walk does (verify() reports it).
            guard let id = try txn.get(try handle.space(of: scan), key),
                  let raw = try txn.get(handle.documents, id) else { return [] }
            statistics.value.documentsRead += 1
            return [try decoded(id, raw, decode)]
        }
        var results: [T] = []
        try walk { id, raw in
            results.append(try decoded(id, raw, decode))
            return true
        }
        return results
    }

    /// The key of the one entry the plan can match, when it reads nothing else and checks nothing more: a look-up
    /// by id (``Planner/idLookUp(_:output:)``, the key a document's) or, on an engine whose calls are not round
    /// trips, by the whole key of a unique index (the key an entry's, whose value is the id). Its one range holds
    /// that key alone.
    private var soleKey: (key: [UInt8], scan: IndexScan)? {
        guard case .index(let scan) = plan.access, scan.pointLookUps, scan.ranges.count == 1,
              case .constant(true) = plan.residual, plan.offset == 0, plan.limit != 0, plan.afterwards.isEmpty,
              plan.grouping == nil else { return nil }
        // An engine with a round trip per call fetches an index entry with its document in one (a walk's cursor):
        // two gets would be two.
        guard scan.primary || !txn.prefersBatches else { return nil }
        let range = scan.ranges[0]
        return range.upper == KeyEncoder.prefixUpperBound(range.lower) ? (range.lower, scan) : nil
    }

    /// The results one at a time, each made by `decode` as the loop asks for it (`nil` after the last): in the
    /// access order they stream from the scan; with `collectFirst` (or a sort) the matches are found first.
    func cursor<T>(collectFirst: Bool,
                   _ decode: @escaping (_ id: UnsafeRawBufferPointer, _ document: UnsafeRawBufferPointer) throws -> T)
        throws -> () throws -> T? {
        let walk = try Walk(self, collectFirst: collectFirst)
        return { try walk.next { try self.decoded($0, $1, decode) } }
    }

    /// A result being returned, made by `decode`, and counted.
    private func decoded<T>(_ id: UnsafeRawBufferPointer, _ raw: UnsafeRawBufferPointer,
                            _ decode: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> T) throws -> T {
        statistics.value.documentsDecoded += 1
        statistics.value.returned += 1
        return try decode(id, raw)
    }

    /// Each result with only the fields at `paths`, read from its stored bytes where they lie (the rest never
    /// decoded; a missing field left out, a dotted path keeping its nesting).
    func project(_ paths: [FieldPath]) throws -> [DocumentValue] {
        let compiled = paths.map(CompiledPath.init)
        var results: [DocumentValue] = []
        try walk { id, raw in
            let reader = BinaryReader(raw)
            var value = DocumentValue.object([DocumentValue.Field]())
            do {
                let root = try reader.root()
                for path in compiled {
                    guard let ref = try path.value(in: reader, from: root) else { continue }
                    value = value.setting(try DocumentValue(reader: reader, ref: ref), at: path.path)
                }
            } catch let error as MalformedDocument {
                throw DocStoreError(.corruptDocument, "document \(CollectionHandle.hex(id)) of collection '\(handle.name)' "
                    + "is damaged: \(error)", collection: handle.name, underlying: error)
            }
            statistics.value.returned += 1
            results.append(value)
            return true
        }
        return results
    }

    /// The ids of the results, in order: within the window, and after what was done to it.
    func resultIDs() throws -> IDList {
        var ids = try orderedIDs()
        ids.apply(plan.afterwards)
        return ids
    }

    /// Whether the plan's walk may meet a document more than once (several ranges, or an index of arrays' elements):
    /// ids gathered in one loop (``idsAlone(inKeyOrder:checkedLater:)``) keep one of each once in id order.
    private var repeatsIDs: Bool {
        if case .index(let scan) = plan.access { return scan.deduplicate }
        return false
    }

    /// The walk of the index the plan reads, ready to gather its ids in one loop of the engine's
    /// (``IndexScanSource/appendIDs(to:skipping:limit:)``): when its entries alone answer the request, or
    /// (`checkedLater`) the caller checks the rest on each document. `nil` when the access is another, or
    /// (`inKeyOrder`, for a caller that keeps the walk's order) when the walk goes back or may meet a document twice.
    private func idsAlone(inKeyOrder: Bool, checkedLater: Bool = false) throws -> IndexScanSource? {
        guard residual.isTrivial || checkedLater, case .index(let scan) = plan.access, !scan.primary else { return nil }
        // In the walk's order, each document must come once; ids put in id order lose their repeats there.
        if inKeyOrder && (scan.deduplicate || scan.descending || (scan.descendingIDs && !scan.index.isUnique)) {
            return nil
        }
        let source = try IndexScanSource(scan: scan, space: try handle.space(of: scan), txn: txn,
                                         documents: handle.documents, seen: nil, fetchDocuments: false,
                                         statistics: statistics)
        // (A slice read in the index's order stops at its end; ids put in id order afterwards are all read.)
        source.expect(about: inKeyOrder ? plan.needed ?? scan.estimate : scan.estimate)
        return source
    }

    /// The ids of the matches in the plan's order, within its window (before any reversal of the output).
    func orderedIDs() throws -> IDList {
        var ids = IDList()
        switch plan.ordering {
        case .natural:
            if let gathered = try splitMatches() {
                while let candidate = try gathered.next() { ids.append(candidate.id) }
                ids.keep(skipping: plan.offset, taking: nil)
                return ids
            }
            var skipped = 0
            if plan.limit == 0 { return ids }
            if let source = try idsAlone(inKeyOrder: true) {
                defer { source.close() }
                scanSkippedDocuments = true
                try source.appendIDs(to: &ids, skipping: plan.offset, limit: plan.limit)
                return ids
            }
            try forEachMatch(needsDocument: false, whole: plan.limit == nil) { candidate in
                if skipped < plan.offset { skipped += 1; return true }
                ids.append(candidate.id)
                return plan.limit.map { ids.count < $0 } ?? true
            }
            return ids
        case .sorted:
            let rows: [SortKeys.Row]
            var scratch: [UInt8] = []
            if let needed = plan.needed {
                var heap = TopK(capacity: needed)
                let offer = { [sortKeys] (heap: inout TopK, scratch: inout [UInt8], candidate: CandidateSource.Candidate) in
                    if let made = try sortKeys.make(candidate, into: &scratch, unlessAfter: heap) {
                        heap.offer(SortKeys.Row(key: scratch, idStart: made.idStart, number: made.number))
                    }
                }
                if let parts = try matchesInParts(start: { (TopK(capacity: needed), [UInt8]()) },
                                                  add: { try offer(&$0.0, &$0.1, $1) }) {
                    for part in parts { for row in part.0.sorted() { heap.offer(row) } }
                } else {
                    try forEachMatch(whole: true) { candidate in
                        try offer(&heap, &scratch, candidate)
                        return true
                    }
                }
                rows = heap.sorted()
            } else if plan.sort.isEmpty {
                // Id order only: the ids alone are sorted, packed (documents are read once, when returned).
                let add = { (candidate: CandidateSource.Candidate) -> Bool in ids.append(candidate.id); return true }
                if !residual.isTrivial, let parts = try matchesInParts(start: { IDList() }, add: { $0.append($1.id) }) {
                    for part in parts { ids.append(contentsOf: part) }
                } else if let source = try idsAlone(inKeyOrder: false) {
                    defer { source.close() }
                    scanSkippedDocuments = true
                    try source.appendIDs(to: &ids)
                } else if residual.isTrivial {
                    try forEachMatch(needsDocument: false, whole: true, add)
                } else {
                    try forEachMatchInIDOrder(add)
                }
                ids.sort(descending: plan.idDescending)
                if repeatsIDs { ids.dropRepeats() }
                ids.keep(skipping: plan.offset, taking: plan.limit)
                return ids
            } else {
                // Every match's sort key, side by side in one list (no array per match), put in order as a list of
                // ids is; each id is the end of its key.
                var keys = IDList(), idStarts: [Int] = []
                let add = { [sortKeys] (keys: inout IDList, idStarts: inout [Int], scratch: inout [UInt8],
                                        candidate: CandidateSource.Candidate) in
                    guard let made = try sortKeys.make(candidate, into: &scratch) else { return }
                    scratch.withUnsafeBytes { keys.append($0) }
                    idStarts.append(made.idStart)
                }
                if let parts = try matchesInParts(start: { (IDList(), [Int](), [UInt8]()) },
                                                  add: { try add(&$0.0, &$0.1, &$0.2, $1) }) {
                    for part in parts {
                        keys.append(contentsOf: part.0)
                        idStarts += part.1
                    }
                } else {
                    try forEachMatchInIDOrder { candidate in
                        try add(&keys, &idStarts, &scratch, candidate)
                        return true
                    }
                }
                for i in keys.idOrder().dropFirst(plan.offset).prefix(plan.limit ?? Int.max) {
                    keys.withID(i) { key in
                        let id = UnsafeRawBufferPointer(rebasing: key[idStarts[i]...])
                        if plan.idDescending { id.map { ~$0 }.withUnsafeBytes { ids.append($0) } } else { ids.append(id) }
                    }
                }
                return ids
            }
            for row in rows.dropFirst(plan.offset).prefix(plan.limit ?? Int.max) {
                if plan.idDescending {
                    let id = row.id.map { ~$0 }
                    id.withUnsafeBytes { ids.append($0) }
                } else {
                    row.key.withUnsafeBytes { ids.append(UnsafeRawBufferPointer(rebasing: $0[row.idStart...])) }
                }
            }
            return ids
        }
    }

    /// The number of matches (within the window).
    func count() throws -> Int {
        var total = 0
        if case .constant(true) = plan.residual {
            switch plan.access {
            case .none, .noCollection: total = 0
            case .fullScan: total = try txn.entryCount(handle.documents)
            case .index(let scan) where !scan.deduplicate && (scan.primary || !scan.index.isUnique):
                total = try countEntries(scan)
            default:
                let source = try makeSource(fetchDocuments: false)
                defer { source.close() }
                while try source.next() != nil { total += 1 }
            }
        } else if let parts = try matchesInParts(start: { 0 }, add: { count, _ in count += 1 }) {
            total = parts.reduce(0, +)
        } else {
            try forEachMatch(whole: true) { _ in total += 1; return true }
        }
        total = max(0, total - plan.offset)
        if let limit = plan.limit { total = min(total, limit) }
        statistics.value.returned = total
        return total
    }

    /// Entries in a duplicate-sorted index's ranges, a key's duplicates counted at once (`mdb_cursor_count`), or
    /// the documents in the ids' ranges, read no further than their keys.
    private func countEntries(_ scan: IndexScan) throws -> Int {
        var total = 0
        let space = try handle.space(of: scan)
        if txn.prefersBatches {
            // Counted by the engine, where the entries are: no entry travels.
            for range in scan.ranges {
                total += try txn.entryCount(space, from: range.lower, below: range.upper, atMost: nil)
            }
            statistics.value.entriesScanned += total
            return total
        }
        try txn.withCursor(space) { cursor in
            for range in scan.ranges {
                var entry = try cursor.seek(atLeast: range.lower)
                while let (key, _) = entry, range.contains(key) {
                    total += scan.primary ? 1 : try cursor.duplicateCount()
                    statistics.value.entriesScanned += 1
                    entry = try cursor.nextKey()
                }
            }
        }
        return total
    }
}

extension IDList {
    /// What `steps` make of the ids' order, as ``WindowStep/apply(_:to:)`` makes it of any elements'.
    mutating func apply(_ steps: [WindowStep]) {
        for step in steps {
            switch step {
            case .reverse: reverse()
            case .slice(let range): keep(skipping: range.lowerBound, taking: range.count)
            }
        }
    }
}
