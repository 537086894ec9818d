import Foundation

/// Runs a ``Plan``: walks its candidates, checks the residual condition on each document's bytes, orders and
/// slices the matches, and hands back documents (or ids, or a count).
final class Executor {
    let plan: Plan
    let handle: CollectionHandle
    let txn: Transaction
    let statistics = StatisticsBox()
    /// The scan read index entries only: documents are first read when returned.
    private(set) var scanSkippedDocuments = false
    /// Decodes a document into the query's type, for the parts of the condition evaluated on it.
    private let decodeForCondition: OpaqueCondition?

    init(plan: Plan, handle: CollectionHandle, txn: Transaction) {
        self.plan = plan
        self.handle = handle
        self.txn = txn
        decodeForCondition = plan.residual.firstOpaque
        // Constants' keys are computed once for all the documents this run checks.
        residual = CompiledCondition.make(plan.residual, keys: ComparisonKeys())
        residualNeedsDecoding = plan.residual.needsDecoding
        if case .constant(let b) = plan.residual { constantResidual = b } else { constantResidual = nil }
        sortPaths = plan.sort.map { CompiledPath($0.path) }
        sortLayouts = sortPaths.map(\.layout)
        sortDescending = plan.sort.map(\.descending)
    }

    func makeSource(fetchDocuments: Bool = true) throws -> CandidateSource {
        switch plan.access {
        case .none, .noCollection:
            return CandidateSource()
        case .fullScan(let descending):
            return try FullScanSource(txn: txn, documents: handle.documents, descending: descending, statistics: statistics)
        case .index(let scan):
            return try IndexScanSource(scan: scan, index: try handle.index(scan.index), txn: txn, documents: handle.documents,
                                       seen: scan.deduplicate ? .init() : nil, fetchDocuments: fetchDocuments,
                                       statistics: statistics)
        case .union(let scans):
            let seen = IndexScanSource.SeenIDs()
            return UnionSource(try scans.map {
                try IndexScanSource(scan: $0, index: try handle.index($0.index), txn: txn, documents: handle.documents, seen: seen,
                                    fetchDocuments: fetchDocuments, statistics: statistics)
            })
        }
    }

    /// Whether a candidate document satisfies the residual condition.
    func matches(_ candidate: CandidateSource.Candidate) throws -> Bool {
        if let constantResidual { return constantResidual }
        let reader = BinaryReader(candidate.document)
        let root: ValueRef
        do { root = try reader.root() } catch let error as MalformedDocument {
            throw DocStoreError(.corruptDocument, "document \(Executor.hex(candidate.id)) of collection '\(handle.name)' "
                + "is damaged: \(error)", collection: handle.name)
        }
        guard residualNeedsDecoding, let decodeForCondition else {
            // The common case: no closure capturing this document, so nothing is allocated per document.
            return try residual.check(.init(reader: reader, root: root, decoded: Executor.noDecoding))
        }
        var decoded: Any?
        return try residual.check(.init(reader: reader, root: root) { [self] in
            if let decoded { return decoded }
            statistics.value.documentsDecoded += 1
            let value: Any
            do { value = try decodeForCondition.decode(candidate.document) } catch {
                throw DecodingFailure.named(error, type: decodeForCondition.typeName, collection: handle.name) {
                    CollectionHandle.describeID(Array(candidate.id), in: Array(candidate.document),
                                                idPath: handle.info.idPath)
                }
            }
            decoded = value
            return value
        })
    }

    /// The residual condition, compiled once for the documents this run checks.
    private let residual: CompiledCondition

    /// Whether some part of the residual condition needs the decoded document.
    private let residualNeedsDecoding: Bool

    /// The residual's answer when it is a constant (no condition left, or one known to be false).
    private let constantResidual: Bool?

    /// The decoder of a residual that never asks for one.
    private static func noDecoding() throws -> Any { throw CancellationError() }

    static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        "0x" + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The bytes of the document with primary key `id`, counted as read; `nil` when it is gone.
    func fetch(id: [UInt8]) throws -> UnsafeRawBufferPointer? {
        guard let raw = try txn.get(handle.documents, id) else { return nil }
        if scanSkippedDocuments { statistics.value.documentsRead += 1 }
        return raw
    }

    /// A document being returned, decoded as the query's elements and counted; a failure names the document.
    func decodeReturned<Element>(_ raw: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer,
                                 as kind: ElementKind<Element>) throws -> Element {
        statistics.value.documentsDecoded += 1
        statistics.value.returned += 1
        return try kind.decode(raw, collection: handle.name) {
            CollectionHandle.describeID(Array(id), in: Array(raw), idPath: handle.info.idPath)
        }
    }

    /// Whether every candidate matches, without looking at it.
    var residualIsTrivial: Bool {
        if case .constant(true) = plan.residual { return true }
        return false
    }

    /// Calls `body` with each matching candidate in the access order until it returns false. With
    /// `needsDocument` false and nothing to check, an index scan reads only its entries: the candidate's
    /// `document` is then not the document (the caller uses the id alone).
    func forEachMatch(needsDocument: Bool = true, _ body: (CandidateSource.Candidate) throws -> Bool) throws {
        let fetch = needsDocument || !residualIsTrivial
        if case .fullScan = plan.access {} else if !fetch { scanSkippedDocuments = true }
        let source = try makeSource(fetchDocuments: fetch)
        defer { source.close() }
        while let candidate = try source.next() {
            if try matches(candidate) {
                if try !body(candidate) { return }
            }
        }
    }

    /// Calls `body` with every matching candidate, in id order rather than the access order. An index scan first
    /// gathers its ids alone, sorts them, and then reads the documents through one cursor: neighbouring ids share
    /// leaf pages, which LMDB searches without descending from the root. For runs that keep every match anyway
    /// (a sort without a limit); others use ``forEachMatch(needsDocument:_:)``.
    func forEachMatchInIDOrder(_ body: (CandidateSource.Candidate) throws -> Bool) throws {
        switch plan.access {
        case .index, .union: break
        default: return try forEachMatch(body)
        }
        var ids = PackedIDs()
        do {
            let source = try makeSource(fetchDocuments: false)
            defer { source.close() }
            while let candidate = try source.next() { ids.append(candidate.id) }
        }
        try txn.withCursor(handle.documents) { cursor in
            try ids.forEachInOrder(descending: false) { id in
                guard let document = try cursor.value(forKey: id) else { return true }   // verify() reports it
                statistics.value.documentsRead += 1
                return try !matches((id, document)) || body((id, document))
            }
        }
    }

    /// Calls `body` with each result's id and bytes, in order and within the window and its later steps.
    ///
    /// In the access order (no sort), documents are handed on as the scan finds them: one look-up each. Sorted
    /// results are ordered by their keys first and then read by id. `body` must not write to the transaction.
    func forEachResult(_ body: (_ id: UnsafeRawBufferPointer, _ document: UnsafeRawBufferPointer) throws -> Void) throws {
        guard plan.ordering == .natural && plan.afterwards.isEmpty else {
            // Sorted, or the window reversed: the ids in order first.
            let ids = WindowStep.apply(plan.afterwards, to: try orderedIDs())
            try txn.withCursor(handle.documents) { cursor in
                for id in ids {
                    try id.withUnsafeBytes { id in
                        guard let raw = try cursor.value(forKey: id) else { return }
                        if scanSkippedDocuments { statistics.value.documentsRead += 1 }
                        try body(id, raw)
                    }
                }
            }
            return
        }
        if plan.limit == 0 { return }
        var skipped = 0
        var produced = 0
        try forEachMatch { candidate in
            if skipped < plan.offset { skipped += 1; return true }
            produced += 1
            try body(candidate.id, candidate.document)
            return plan.limit.map { produced < $0 } ?? true
        }
    }

    // MARK: Ordering

    /// One match in a sort: its sort key (sort fields, then id, each flipped where descending) and its id.
    struct Row {
        var key: [UInt8]
        var idStart: Int
        /// The first sort field's value when it is a number a `Double` holds exactly, for a cheap comparison.
        var number: Double? = nil
        var id: ArraySlice<UInt8> { key[idStart...] }
    }

    /// The sort key of a document: each sort field's order-preserving key (bytes inverted for a descending
    /// field: keys are prefix-free, so inverting reverses their order), then the id likewise.
    ///
    /// With a `bound` (the last row a full top-k keeps), gives `nil` as soon as the first field orders after the
    /// bound's: such a document cannot enter the top k, and the rest of its key is not worth building. Two numbers
    /// are compared as numbers, before any key is built; otherwise the first field's key is compared.
    func sortKey(_ candidate: CandidateSource.Candidate, into key: inout [UInt8],
                 unlessAfter bound: Row? = nil) throws -> (idStart: Int, number: Double?)? {
        let reader = BinaryReader(candidate.document)
        let root = try reader.root()
        var number: Double?
        var first: ValueRef?
        if let path = sortLayouts.first {
            first = try path.value(in: reader, from: root)
            number = first.flatMap { reader.exactDouble($0) }
            if let n = number, let b = bound?.number, sortDescending[0] ? n < b : n > b { return nil }
        }
        key.removeAll(keepingCapacity: true)
        var encoder = KeyEncoder()
        encoder.swapBuffer(&key)
        defer { encoder.swapBuffer(&key) }
        for i in sortLayouts.indices {
            let start = encoder.bytes.count
            if let ref = i == 0 ? first : try sortLayouts[i].value(in: reader, from: root) {
                try encoder.append(ref, in: reader)
            } else {
                encoder.append(.null)
            }
            if sortDescending[i] { encoder.invert(from: start) }
            if i == 0, let bound, Executor.compare(encoder.bytes, bound.key) > 0 { return nil }
        }
        let idStart = encoder.bytes.count
        encoder.appendRaw(candidate.id)
        if plan.idDescending { encoder.invert(from: idStart) }
        return (idStart, number)
    }


    /// The sort fields' paths, laid out once for all the documents this run orders, and their directions.
    private let sortPaths: [CompiledPath]
    /// `sortPaths` laid out, read per document with no reference counting (`sortPaths` keeps them alive).
    private let sortLayouts: [CompiledPath.Layout]
    private let sortDescending: [Bool]

    /// The ids of the matches in the plan's order, within its window (before any reversal of the output).
    func orderedIDs() throws -> [[UInt8]] {
        switch plan.ordering {
        case .natural:
            var ids: [[UInt8]] = []
            var skipped = 0
            if plan.limit == 0 { return [] }
            try forEachMatch(needsDocument: false) { candidate in
                if skipped < plan.offset { skipped += 1; return true }
                ids.append(Array(candidate.id))
                return plan.limit.map { ids.count < $0 } ?? true
            }
            return ids
        case .sorted:
            var rows: [Row]
            var scratch: [UInt8] = []
            if let needed = plan.needed {
                var heap = TopK(capacity: needed)
                try forEachMatch { candidate in
                    if let made = try sortKey(candidate, into: &scratch, unlessAfter: heap.bound) {
                        heap.offer(Row(key: scratch, idStart: made.idStart, number: made.number))
                    }
                    return true
                }
                rows = heap.sorted()
            } else if plan.sort.isEmpty {
                // Id order only: the ids alone are sorted, packed (documents are read once, when returned).
                var ids = PackedIDs()
                let add = { (candidate: CandidateSource.Candidate) -> Bool in ids.append(candidate.id); return true }
                if residualIsTrivial {
                    try forEachMatch(needsDocument: false, add)
                } else {
                    try forEachMatchInIDOrder(add)
                }
                return ids.sorted(descending: plan.idDescending, skipping: plan.offset, taking: plan.limit)
            } else {
                rows = []
                try forEachMatchInIDOrder { candidate in
                    guard let made = try sortKey(candidate, into: &scratch) else { return true }
                    rows.append(Row(key: scratch, idStart: made.idStart))
                    return true
                }
                rows.sort { Executor.precedes($0.key, $1.key) }
            }
            let window = rows.dropFirst(plan.offset).prefix(plan.limit ?? Int.max)
            return window.map { row in
                plan.idDescending ? row.id.map { ~$0 } : Array(row.id)
            }
        }
    }

    /// Byte order of two keys (what `lexicographicallyPrecedes` answers, by `memcmp`).
    @inline(__always)
    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let c = compare(a, b)
        return c != 0 ? c < 0 : a.count < b.count
    }

    /// How `a` orders against `b` over their common length only: negative, zero or positive. A positive answer
    /// for a prefix-free field key means every key starting with `a` orders after `b`.
    @inline(__always)
    static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int32 {
        a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in
                let n = min(x.count, y.count)
                guard n > 0, let p = x.baseAddress, let q = y.baseAddress else { return 0 }
                return memcmp(p, q, n)
            }
        }
    }

    /// The number of matches (within the window).
    func count() throws -> Int {
        var total = 0
        if case .constant(true) = plan.residual {
            switch plan.access {
            case .none, .noCollection: total = 0
            case .fullScan: total = try txn.entryCount(handle.documents)
            case .index(let scan) where !scan.deduplicate && !scan.index.isUnique:
                total = try countEntries(scan)
            default:
                let source = try makeSource(fetchDocuments: false)
                defer { source.close() }
                while try source.next() != nil { total += 1 }
            }
        } else {
            try forEachMatch { _ in total += 1; return true }
        }
        total = max(0, total - plan.offset)
        if let limit = plan.limit { total = min(total, limit) }
        statistics.value.returned = total
        return total
    }

    /// Entries in a duplicate-sorted index's ranges, a key's duplicates counted at once (`mdb_cursor_count`).
    private func countEntries(_ scan: IndexScan) throws -> Int {
        var total = 0
        try txn.withCursor(try handle.index(scan.index).database) { cursor in
            for range in scan.ranges {
                var entry = try cursor.seek(atLeast: range.lower)
                while let (key, _) = entry, range.contains(key) {
                    total += try cursor.duplicateCount()
                    statistics.value.entriesScanned += 1
                    entry = try cursor.nextKey()
                }
            }
        }
        return total
    }
}

/// Ids gathered to be put in id order: their bytes side by side in one buffer, each with its first 16 bytes as
/// two big-endian integers, so that most comparisons are two integer compares rather than a `memcmp` of arrays.
struct PackedIDs {
    private var bytes: [UInt8] = []
    private var entries: [(high: UInt64, low: UInt64, start: Int, count: Int)] = []

    mutating func append(_ id: UnsafeRawBufferPointer) {
        var prefix: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &prefix) { p in
            p.copyMemory(from: UnsafeRawBufferPointer(rebasing: id.prefix(16)))
        }
        entries.append((UInt64(bigEndian: prefix.0), UInt64(bigEndian: prefix.1), bytes.count, id.count))
        bytes.append(contentsOf: id)
    }

    /// The ids in byte order (or its reverse), after skipping `offset` of them and up to `limit`.
    func sorted(descending: Bool, skipping offset: Int, taking limit: Int?) -> [[UInt8]] {
        var result: [[UInt8]] = []
        var skipped = 0
        let limit = limit ?? Int.max
        guard limit > 0 else { return [] }
        forEachInOrder(descending: descending) { id in
            if skipped < offset { skipped += 1; return true }
            result.append(Array(id))
            return result.count < limit
        }
        return result
    }

    /// Calls `body` with each id in byte order (or its reverse) until it returns false.
    func forEachInOrder(descending: Bool, _ body: (UnsafeRawBufferPointer) throws -> Bool) rethrows {
        try bytes.withUnsafeBytes { all in
            // Equal 16-byte prefixes (zero-padded) leave the rest of the bytes to decide: a longer id with the
            // same bytes orders after.
            func precedes(_ a: (high: UInt64, low: UInt64, start: Int, count: Int),
                          _ b: (high: UInt64, low: UInt64, start: Int, count: Int)) -> Bool {
                if a.high != b.high { return a.high < b.high }
                if a.low != b.low { return a.low < b.low }
                return UnsafeRawBufferPointer(rebasing: all[a.start..<(a.start + a.count)])
                    .lexicographicallyPrecedes(UnsafeRawBufferPointer(rebasing: all[b.start..<(b.start + b.count)]))
            }
            let order = descending ? entries.sorted { precedes($1, $0) } : entries.sorted(by: precedes)
            for entry in order {
                guard try body(UnsafeRawBufferPointer(rebasing: all[entry.start..<(entry.start + entry.count)])) else { return }
            }
        }
    }
}

/// The `capacity` smallest rows seen, kept in a max-heap: the largest kept row is at the top, so a row that does
/// not beat it is dropped with one comparison.
struct TopK {
    let capacity: Int
    private var heap: [Executor.Row] = []

    init(capacity: Int) {
        self.capacity = capacity
        heap.reserveCapacity(min(capacity, 1 << 16))
    }

    mutating func offer(_ row: Executor.Row) {
        guard capacity > 0 else { return }
        if heap.count < capacity {
            heap.append(row)
            siftUp(heap.count - 1)
        } else if Executor.precedes(row.key, heap[0].key) {
            heap[0] = row
            siftDown(0)
        }
    }

    /// The row a newcomer must precede to be kept, once the heap is full.
    var bound: Executor.Row? { heap.count == capacity && capacity > 0 ? heap[0] : nil }

    func sorted() -> [Executor.Row] { heap.sorted { Executor.precedes($0.key, $1.key) } }

    private func greater(_ i: Int, _ j: Int) -> Bool { Executor.precedes(heap[j].key, heap[i].key) }

    private mutating func siftUp(_ index: Int) {
        var i = index
        while i > 0 {
            let parent = (i - 1) / 2
            guard greater(i, parent) else { return }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var i = index
        while true {
            let l = 2 * i + 1, r = l + 1
            var largest = i
            if l < heap.count && greater(l, largest) { largest = l }
            if r < heap.count && greater(r, largest) { largest = r }
            guard largest != i else { return }
            heap.swapAt(i, largest)
            i = largest
        }
    }
}
