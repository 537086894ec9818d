import Foundation
import Synchronization

/// A full scan with a condition, split among threads: the documents' keys are cut into ranges, each thread reads
/// the ranges it takes next in a read transaction of its own that sees the same commit as the query's, and each
/// range's matches are gathered apart, so that putting the ranges side by side gives what one thread would have
/// found, in the same order.
///
/// LMDB lets readers run at once without locks; what one document costs is mostly reading its pages from memory,
/// so a second thread on a second core nearly halves a long scan.
struct ParallelScan {
    /// How far a store splits its scans.
    typealias Settings = ScanSettings

    /// Ranges per thread: a thread that finishes early takes the next range, so that uneven ranges even out.
    static let rangesPerThread = 8

    let txn: any StorageTransaction
    let documents: KeySpace
    let settings: Settings

    /// Runs `add` on each document of the collection that its thread's residual condition matches, each range's
    /// matches into a part of its own made by `start`; the parts in key order, or `nil` when the scan is not worth
    /// splitting or cannot be (a write transaction, one that opened key spaces itself, no second reader).
    ///
    /// `start` and `add` run on several threads at once: they must not share anything they change. Each thread
    /// gets its own `Residual` from `residual` and its own statistics, added to `statistics` at the end. The
    /// candidates' bytes stay valid after the call, for as long as `txn`: every reader of one commit reads the same
    /// pages of the map, which LMDB does not reuse while one of them is open.
    func run<Part>(residual: @escaping (StatisticsBox) -> Residual, statistics: StatisticsBox, start: @escaping () -> Part,
                   add: @escaping (inout Part, CandidateSource.Candidate) throws -> Void) throws -> [Part]? {
        let count = try txn.entryCount(documents)
        let threads = min(settings.threads, count / max(settings.documentsPerThread, 1))
        guard threads > 1 else { return nil }
        let wanted = threads * ParallelScan.rangesPerThread
        // Where the engine can say, ranges of about as many documents each; else ranges of keys of equal width.
        guard let cuts = try txn.cuts(documents, parts: wanted) ?? txn.withCursor(documents, { cursor -> [[UInt8]]? in
            guard let first = try cursor.first(), let last = try cursor.last() else { return nil }
            return ParallelScan.cuts(from: Array(first.key), to: Array(last.key), parts: wanted)
        }), !cuts.isEmpty else { return nil }
        var transactions = [txn]
        for _ in 1..<threads {
            guard let twin = txn.twin() else { break }
            transactions.append(twin)
        }
        defer { for twin in transactions.dropFirst() { twin.end() } }
        guard transactions.count > 1 else { return nil }

        let ranges = cuts.count + 1
        let parts = UnsafeMutableBufferPointer<Part?>.allocate(capacity: ranges)
        parts.initialize(repeating: nil)
        defer { parts.deinitialize(); parts.deallocate() }
        let counted = UnsafeMutableBufferPointer<QueryStatistics>.allocate(capacity: transactions.count)
        counted.initialize(repeating: QueryStatistics())
        defer { counted.deinitialize(); counted.deallocate() }
        let nextRange = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let failure = Mutex<(any Error)?>(nil)

        /// One thread's work: ranges until none is left or another thread failed.
        func work(_ worker: Int) {
            let txn = transactions[worker]
            // Made on the thread that uses them, from its own memory: nothing a thread writes per document shares
            // a cache line with another thread's.
            let box = StatisticsBox()
            let residual = residual(box)
            defer { counted[worker] = box.value }
            do {
                try txn.withCursor(documents) { cursor in
                    while !stop.load(ordering: .relaxed) {
                        let range = nextRange.add(1, ordering: .relaxed).oldValue
                        guard range < ranges else { return }
                        let lower = range == 0 ? nil : cuts[range - 1]
                        let upper = range == cuts.count ? nil : cuts[range]
                        var part = start()
                        // The engine's walk where it has one (which stops at `upper` itself), used unretained as
                        // `kept` keeps it; else the cursor's steps.
                        let kept = try txn.walk(documents, from: lower, below: upper, descending: false)
                        defer { withExtendedLifetime(kept) {} }
                        let walk = kept.map { Unmanaged.passUnretained($0) }
                        var entry = try walk.map { try $0._withUnsafeGuaranteedRef { try $0.next() } }
                            ?? lower.map { try cursor.seek(atLeast: $0) } ?? cursor.first()
                        while let (key, document) = entry {
                            if walk == nil, let upper, !upper.withUnsafeBytes({ key.precedesInKeyOrder($0) }) { break }
                            box.value.entriesScanned += 1
                            box.value.documentsRead += 1
                            if box.value.entriesScanned & 4095 == 0 {
                                // Only the query's own thread is in its task: it sees a cancellation, and tells.
                                if worker == 0 { try box.checkCancellation() }
                                if stop.load(ordering: .relaxed) { return }
                            }
                            if try residual.matches((key, document)) { try add(&part, (key, document)) }
                            entry = try walk.map { try $0._withUnsafeGuaranteedRef { try $0.next() } } ?? cursor.next()
                        }
                        parts[range] = part
                    }
                }
            } catch {
                failure.withLock { if $0 == nil { $0 = error } }
                stop.store(true, ordering: .relaxed)
            }
        }

        // The helpers are joined before this returns, and let go of the work then: nothing they touch is used
        // after the call, nor kept by them.
        let job = Job(work)
        let finished = DispatchSemaphore(value: 0)
        for worker in 1..<transactions.count {
            let thread = Thread { job.run(worker); finished.signal() }
            thread.name = "DocStore scan"
            thread.start()
        }
        work(0)
        for _ in 1..<transactions.count { finished.wait() }
        job.release()
        if let error = failure.withLock({ $0 }) { throw error }
        // The helpers may have read nearly everything: the query's own thread checks once more for its task.
        if WriteCancellation.isCancelled { throw CancellationError() }
        for part in counted {
            statistics.value.entriesScanned += part.entriesScanned
            statistics.value.documentsRead += part.documentsRead
            statistics.value.documentsDecoded += part.documentsDecoded
        }
        return parts.map { $0! }
    }

    /// Keys between `first` and `last` that cut the range into `parts` ranges of about equal width, increasing,
    /// each above `first`: the eight bytes after their common prefix read as a number, and that number's range cut
    /// evenly. Empty when there is no room between them.
    static func cuts(from first: [UInt8], to last: [UInt8], parts: Int) -> [[UInt8]] {
        let common = zip(first, last).prefix { $0 == $1 }.count
        func number(_ key: [UInt8]) -> UInt64 {
            (0..<8).reduce(0) { $0 << 8 | UInt64(common + $1 < key.count ? key[common + $1] : 0) }
        }
        let (low, high) = (number(first), number(last))
        guard high > low else { return [] }
        var cuts: [[UInt8]] = []
        for i in 1..<max(parts, 1) {
            let step = (high - low).multipliedFullWidth(by: UInt64(i))
            let offset = UInt64(parts).dividingFullWidth((step.high, step.low)).quotient
            let value = low + offset
            var key = Array(first[..<common])
            for shift in stride(from: 56, through: 0, by: -8) { key.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
            if (cuts.last ?? first).precedesInKeyOrder(key) { cuts.append(key) }
        }
        return cuts
    }
}

/// One thread's share of a split scan, handed to helper threads: the work is safe to run on several threads at
/// once (each touches only what its number gives it), which the compiler cannot see; ``release()`` drops it once
/// every helper is done, so that a thread object that lives on keeps nothing of the scan.
private final class Job: @unchecked Sendable {
    private var work: ((Int) -> Void)?
    init(_ work: @escaping (Int) -> Void) { self.work = work }
    func run(_ worker: Int) { work?(worker) }
    func release() { work = nil }
}
