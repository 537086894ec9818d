import CLMDB

/// Where a plan's candidate documents come from, one at a time.
///
/// Each candidate's bytes point into the memory map and are valid until the next call: on an engine that keeps what
/// it fetched until the transaction ends, a walk of the documents or of an index's entries alone keeps only the part
/// it is in (``StorageTransaction/openPassingCursor(_:)``).
class CandidateSource {
    typealias Candidate = (id: UnsafeRawBufferPointer, document: UnsafeRawBufferPointer)

    /// The next candidate, or `nil` at the end.
    func next() throws -> Candidate? { nil }

    /// Closes the source's cursors; it yields nothing more.
    func close() {}
}

/// Counters of one run, for `explain` and the `.timer` of tools.
public struct QueryStatistics: Sendable, Equatable, CustomStringConvertible {
    /// Index entries, or documents in a full scan, that the walk stepped over.
    public internal(set) var entriesScanned = 0
    /// Documents read (their bytes looked at).
    public internal(set) var documentsRead = 0
    /// Documents decoded into the Swift type (returned ones, and those an opaque condition needed).
    public internal(set) var documentsDecoded = 0
    /// Documents returned (or counted, or deleted).
    public internal(set) var returned = 0

    public var description: String {
        "\(entriesScanned) entries scanned, \(documentsRead) documents read, \(documentsDecoded) decoded, "
            + "\(returned) returned"
    }
}

/// Every document, in id order or its reverse: by the engine's walk where it has one, else by a cursor.
final class FullScanSource: CandidateSource {
    private let txn: any StorageTransaction
    private let cursor: (any StorageCursor)?
    private let descending: Bool
    private var started = false
    private let statistics: StatisticsBox
    /// The engine's walk, used unretained, as `keeper` keeps it (a retain and a release per document were a fifth
    /// of a scan's time).
    private let walk: Unmanaged<StorageWalk>?
    private let keeper: StorageWalk?

    init(txn: any StorageTransaction, documents: KeySpace, descending: Bool, statistics: StatisticsBox) throws {
        self.txn = txn
        self.descending = descending
        self.statistics = statistics
        keeper = try txn.walk(documents, from: nil, below: nil, descending: descending)
        walk = keeper.map { Unmanaged.passUnretained($0) }
        cursor = keeper == nil ? try txn.openPassingCursor(documents) : nil
    }

    private var closed = false

    override func close() {
        guard !closed else { return }
        closed = true
        if let cursor { txn.closeCursor(cursor) }
    }

    override func next() throws -> Candidate? {
        guard !closed else { return nil }
        let entry: StorageEntry?
        if let walk {
            entry = try walk._withUnsafeGuaranteedRef { try $0.next() }
        } else if started {
            entry = descending ? try cursor?.previous() : try cursor?.next()
        } else {
            started = true
            entry = descending ? try cursor?.last() : try cursor?.first()
        }
        guard let (key, value) = entry else { return nil }
        statistics.value.entriesScanned += 1
        try statistics.checkCancellation()
        statistics.value.documentsRead += 1
        return (key, value)
    }
}

/// Shared, mutable statistics of a run (sources and the executor add to them).
final class StatisticsBox {
    // Exclusivity is not checked at run time: a box belongs to one run on one thread (a split scan gives each
    // thread its own), and the checks were three calls per document of a scan.
    @exclusivity(unchecked) var value = QueryStatistics()

    /// Every 4,096 entries, stops a walk whose task was cancelled (a REPL's Ctrl-C, say) with `CancellationError`.
    @inline(__always)
    func checkCancellation() throws {
        if value.entriesScanned & 4095 == 0 && WriteCancellation.isCancelled { throw CancellationError() }
    }
}

/// The entries of one index in some key ranges, each followed to its document.
final class IndexScanSource: CandidateSource {
    private let scan: IndexScan
    private let txn: any StorageTransaction
    private let documents: KeySpace
    private let cursor: any StorageCursor
    private var rangeIndex = 0
    private var positioned = false
    /// Ids already produced, when the scan can meet a document twice (shared by the scans of a union).
    private let seen: SeenIDs?
    private let fetchDocuments: Bool
    private let statistics: StatisticsBox
    private var idCopy: [UInt8] = []

    final class SeenIDs { var ids = Set<[UInt8]>() }

    /// Walks `scan` in `space`: the index's, or for the ids, the documents' own.
    init(scan: IndexScan, space: KeySpace, txn: any StorageTransaction, documents: KeySpace, seen: SeenIDs?,
         fetchDocuments: Bool = true, statistics: StatisticsBox) throws {
        self.scan = scan
        self.txn = txn
        self.documents = documents
        self.seen = seen
        self.fetchDocuments = fetchDocuments
        self.statistics = statistics
        readsInBatches = fetchDocuments && !scan.primary && txn.prefersBatches
        keysStayInPlace = !scan.index.isUnique && txn.isReadOnly && txn.keysStayInPlace
        // Where the walk hands on documents (fetched with an index's entries, or the ids' own entries), they are
        // kept: a walk in id order holds them all until it ends.
        let fetching = readsInBatches ? try txn.openCursor(space, fetchingValuesIn: documents) : nil
        self.cursor = try fetching ?? (fetchDocuments ? txn.openCursor(space) : txn.openPassingCursor(space))
        fetchesAlong = fetching != nil
    }

    /// Says how many entries the walk will likely read (``StorageCursor/expect(about:)``).
    func expect(about count: Int) { cursor.expect(about: count) }

    /// Whether documents are read in batches (``next()``), asked once rather than per entry.
    private let readsInBatches: Bool
    /// Whether the cursor fetches each entry's document with it (``StorageCursor/fetchedDocument()``).
    private let fetchesAlong: Bool
    /// Whether an entry's key is read in place, at an address no other key has until the transaction ends: a read
    /// of a file. ``step()`` then tells a key's next id by its key's address, and compares only a new key with the
    /// range's bound.
    private let keysStayInPlace: Bool
    /// The key of the entry before, when ``keysStayInPlace``.
    private var lastKey = UnsafeRawBufferPointer(start: nil, count: 0)

    private var hasDuplicates: Bool { !scan.index.isUnique }

    /// The bound of the current range that the walk moves towards (the upper one ascending, the lower one
    /// descending; `nil` for none): ``position(_:)`` places the cursor within the other.
    private var farBound: [UInt8]?

    /// Whether `key`, reached by ``step()``, is still short of the current range's far bound.
    @inline(__always)
    private func beforeFarBound(_ key: UnsafeRawBufferPointer) -> Bool {
        guard let farBound else { return true }
        return farBound.withUnsafeBytes { scan.descending ? !key.precedesInKeyOrder($0) : key.precedesInKeyOrder($0) }
    }

    /// Places the cursor on the first entry of the current range, in walk order.
    private func position(_ range: KeyRange) throws -> StorageEntry? {
        farBound = scan.descending ? range.lower : range.upper
        if !scan.descending {
            var entry = try range.lower.withUnsafeBytes { try cursor.seek(atLeast: $0, below: range.upper) }
            if entry != nil && hasDuplicates && scan.descendingIDs { entry = try cursor.lastDuplicate() }
            return entry
        }
        var entry: StorageEntry?
        if let upper = range.upper, try cursor.seek(atLeast: upper) != nil {
            entry = try cursor.previous()
        } else {
            entry = try cursor.last()
        }
        if let (key, _) = entry, hasDuplicates && !scan.descendingIDs {
            // Seeking the key places the cursor on its first duplicate. (`firstDuplicate` would too, but after `last`
            // LMDB's cursor keeps its end-of-file flag, and `nextDuplicate` then finds nothing.)
            entry = try cursor.seek(atLeast: Array(key))
        }
        return entry
    }

    /// Steps to the next entry in walk order; `sameKey` when it is another id of the entry before's key, which lies
    /// within the range as that one did (its bound is then not compared again).
    private func step() throws -> (entry: StorageEntry?, sameKey: Bool) {
        guard hasDuplicates, scan.descending != scan.descendingIDs else {
            let entry = scan.descending ? try cursor.previous() : try cursor.next()
            guard keysStayInPlace, let key = entry?.key else { return (entry, false) }
            // A key's ids are one node of its page, whose key they all return: the same bytes at the same place.
            defer { lastKey = key }
            return (entry, key.baseAddress == lastKey.baseAddress && key.count == lastKey.count)
        }
        // Keys one way, ids the other: walk each key's duplicates, then move to the neighbouring key.
        if scan.descending {
            if let e = try cursor.nextDuplicate() { return (e, true) }
            guard try cursor.previousKey() != nil else { return (nil, false) }
            return (try cursor.firstDuplicate(), false)
        } else {
            if let e = try cursor.previousDuplicate() { return (e, true) }
            guard try cursor.nextKey() != nil else { return (nil, false) }
            return (try cursor.lastDuplicate(), false)
        }
    }

    override func close() {
        rangeIndex = scan.ranges.count
        txn.closeCursor(cursor)
    }

    /// Appends the ids of the ranges' entries to `ids` in one loop of the engine's: each range walked forward, in the
    /// order the scan holds them (a descending scan's last first), whatever the scan's direction within them. After
    /// the first `offset`, up to `limit` of them. For an index's entries (not the ids' own); a document met twice is
    /// there twice (no ``SeenIDs``).
    func appendIDs(to ids: inout IDList, skipping offset: Int = 0, limit: Int? = nil) throws {
        precondition(!scan.primary && seen == nil, "ids gathered in one loop from the ids' own entries, or with a set")
        // Room for the ids the planner counted: an array grown step by step copies them all again.
        ids.reserve(ids.count + min(limit ?? scan.estimate, scan.estimate, 1 << 20))
        var (sinceCheck, skipped, taken) = (0, 0, 0)
        for range in scan.ranges where limit.map({ taken < $0 }) ?? true {
            let found = try cursor.forEachValue(from: range.lower, below: range.upper) { id in
                sinceCheck += 1
                if sinceCheck == 1024 {
                    // (Not `statistics.checkCancellation()`: the count of entries grows once per range.)
                    sinceCheck = 0
                    if WriteCancellation.isCancelled { throw CancellationError() }
                }
                if skipped < offset {
                    skipped += 1
                    return true
                }
                ids.append(id)
                taken += 1
                return limit.map { taken < $0 } ?? true
            }
            statistics.value.entriesScanned += found
        }
        rangeIndex = scan.ranges.count
    }

    /// With an engine that prefers batches: the documents of the next index entries, read ahead in one call each
    /// batch (16 first, four times more each time, up to 1,024), and what keeps them and the batch before valid.
    private var batch: [StorageEntry] = []
    private var batchPosition = 0
    private var batchSize = 16
    private var keepers: (AnyObject?, AnyObject?)

    override func next() throws -> Candidate? {
        guard readsInBatches else { return try nextEntry() }
        if fetchesAlong {
            while let (id, _) = try nextEntry(fetching: false) {
                let fetched = try cursor.fetchedDocument() ?? txn.get(documents, id)
                guard let document = fetched else { continue }   // verify() reports it
                statistics.value.documentsRead += 1
                return (id, document)
            }
            return nil
        }
        if batchPosition == batch.count {
            var ids: [[UInt8]] = []
            while ids.count < batchSize, let (id, _) = try nextEntry(fetching: false) { ids.append(Array(id)) }
            guard !ids.isEmpty else { return nil }
            let fetched = try txn.entries(documents, forKeys: ids)
            (batch, batchPosition, keepers) = (fetched.entries, 0, (fetched.keeper, keepers.0))
            batchSize = min(batchSize * 4, 1024)
            statistics.value.documentsRead += batch.count
            guard !batch.isEmpty else { return try next() }   // verify() reports entries without documents
        }
        batchPosition += 1
        let (id, document) = batch[batchPosition - 1]
        return (id, document)
    }

    /// The next entry in the ranges, followed to its document when `fetching`.
    private func nextEntry(fetching: Bool = true) throws -> Candidate? {
        while rangeIndex < scan.ranges.count {
            let entry: StorageEntry?
            let within: Bool
            if positioned {
                let (next, sameKey) = try step()
                entry = next
                within = next.map { sameKey || beforeFarBound($0.key) } ?? false
            } else {
                let range = scan.ranges[rangeIndex]
                entry = try position(range)
                within = entry.map { range.contains($0.key) } ?? false
                if keysStayInPlace { lastKey = entry?.key ?? UnsafeRawBufferPointer(start: nil, count: 0) }
                positioned = true
            }
            guard let (key, value) = entry, within else {
                rangeIndex += 1
                positioned = false
                continue
            }
            statistics.value.entriesScanned += 1
            try statistics.checkCancellation()
            // An index entry's value is its document's id; the ids' own entry is the document.
            let id = scan.primary ? key : value
            if let seen {
                idCopy = Array(id)
                if !seen.ids.insert(idCopy).inserted { continue }
            }
            if scan.primary {
                if fetchDocuments && fetching { statistics.value.documentsRead += 1 }
                return (key, value)
            }
            guard fetchDocuments && fetching else { return (id, key) }
            guard let document = try txn.get(documents, id) else { continue }   // verify() reports such entries
            statistics.value.documentsRead += 1
            return (id, document)
        }
        return nil
    }
}

/// Candidates found beforehand, handed on in order: the matches of a scan split among threads
/// (``Executor/splitMatches()``). Their bytes stay valid for the transaction: readers of one commit read the same
/// pages of the map, which LMDB keeps while any of them is open.
final class GatheredSource: CandidateSource {
    private let candidates: [Candidate]
    private var position = 0

    init(_ candidates: [Candidate]) { self.candidates = candidates }

    override func next() throws -> Candidate? {
        guard position < candidates.count else { return nil }
        position += 1
        return candidates[position - 1]
    }

    override func close() { position = candidates.count }
}

/// The union of several scans, each document once.
final class UnionSource: CandidateSource {
    private var sources: [IndexScanSource]

    init(_ sources: [IndexScanSource]) { self.sources = sources }

    override func next() throws -> Candidate? {
        while let first = sources.first {
            if let candidate = try first.next() { return candidate }
            first.close()
            sources.removeFirst()
        }
        return nil
    }

    override func close() {
        for source in sources { source.close() }
        sources = []
    }
}
