import CLMDB

/// The documents of ids asked for in order, as a walk reaches them: through one cursor on an engine whose reads
/// cost no round trip (neighbouring ids share leaf pages, which LMDB searches without descending from the root),
/// and in batches of ``StorageTransaction/entries(_:forKeys:)`` on one that prefers batches (16 first, four times
/// more each time, up to 1,024), in a read transaction: a write transaction's walk may change the documents ahead
/// of it, so each is read when it is reached. Through the cursor, a read looks up the documents of the next ids
/// before they are asked for and asks the processor for their bytes.
final class DocumentsByID {
    private let txn: any StorageTransaction
    private let space: KeySpace
    private let cursor: (any StorageCursor)?
    /// The batch read last: the documents of `ids[batchStart..<batchEnd]` that exist, in that order.
    private var batch: [StorageEntry] = []
    private var batchPosition = 0
    private var batchEnd = 0
    private var batchSize = 16
    /// What keeps the last two batches' bytes valid: a document handed on stays valid while the next is read.
    private var keepers: (AnyObject?, AnyObject?)
    /// In a read through the cursor, the documents of `ids[i]` (at `i % depth`) for the `i` from the last one asked
    /// for up to `aheadEnd`.
    private let ahead: UnsafeMutablePointer<UnsafeRawBufferPointer?>?
    private var aheadEnd = 0
    private static let depth = 4
    /// What looking up `ids[failedAt]` ahead threw: thrown when it is asked for, not before.
    private var failure: (any Error)?
    private var failedAt = 0

    /// `unchanged` says that nothing is written until the walk ends (a walk that only gathers what it reads): on an
    /// engine that prefers batches, a write transaction's walk then reads in batches too.
    init(_ txn: any StorageTransaction, _ space: KeySpace, unchanged: Bool = false) throws {
        self.txn = txn
        self.space = space
        let batches = DocumentsByID.readsInBatches(txn) || (unchanged && txn.prefersBatches)
        cursor = batches ? nil : try txn.openCursor(space)
        if cursor != nil, txn.isReadOnly {
            ahead = .allocate(capacity: DocumentsByID.depth)
            ahead?.initialize(repeating: nil, count: DocumentsByID.depth)
        } else {
            ahead = nil
        }
    }

    deinit {
        ahead?.deinitialize(count: DocumentsByID.depth)
        ahead?.deallocate()
    }

    static func readsInBatches(_ txn: any StorageTransaction) -> Bool { txn.prefersBatches && txn.isReadOnly }

    /// The document of `ids[i]`, `nil` when there is none; `i` grows from call to call.
    func document(_ i: Int, of ids: IDList) throws -> UnsafeRawBufferPointer? {
        if let cursor {
            guard let ahead else { return try ids.withID(i) { try cursor.value(forKey: $0) } }
            if let failure {
                if failedAt == i { throw failure }
                if failedAt < i { self.failure = nil }
            }
            aheadEnd = max(aheadEnd, i)
            let end = min(ids.count, i + DocumentsByID.depth)
            while failure == nil, aheadEnd < end {
                do {
                    let document = try ids.withID(aheadEnd) { try cursor.value(forKey: $0) }
                    if let document, let base = document.baseAddress { docstore_prefetch(base, document.count) }
                    ahead[aheadEnd % DocumentsByID.depth] = document
                    aheadEnd += 1
                } catch {
                    if aheadEnd == i { throw error }
                    (failure, failedAt) = (error, aheadEnd)
                }
            }
            return ahead[i % DocumentsByID.depth]
        }
        if i >= batchEnd {
            batchEnd = min(ids.count, i + batchSize)
            let fetched = try txn.entries(space, forKeys: ids.arrays(i..<batchEnd))
            (batch, batchPosition, keepers) = (fetched.entries, 0, (fetched.keeper, keepers.0))
            batchSize = min(batchSize * 4, 1024)
        }
        guard batchPosition < batch.count, ids.withID(i, { batch[batchPosition].key.sameBytes(as: $0) }) else { return nil }
        batchPosition += 1
        return batch[batchPosition - 1].value
    }

    func close() {
        if let cursor { txn.closeCursor(cursor) }
    }
}
