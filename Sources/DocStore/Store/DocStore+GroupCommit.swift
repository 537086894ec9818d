import Dispatch
import Synchronization

/// Group commit: writes that arrive while a commit is being made durable commit together in the next transaction.
///
/// A commit syncs on the store's thread, so the writes that arrive meanwhile wait as jobs on its queue. When a
/// write's job runs with no job behind it and no group forming (``DocStore/commitsAtOnce``), it commits at once,
/// alone, in a transaction of its own. Otherwise it goes on ``DocStore/queuedWrites`` and, when none is pending,
/// puts a commit job at the end of the thread's queue: the writes waiting behind it join the group before that
/// commit runs. A group runs each write in a transaction nested in the group's, so that a write that fails is undone
/// alone; if the group as a whole cannot commit (the map cannot grow any more, or the commit itself fails), each of
/// its writes runs again in a transaction of its own, so that none fails for a neighbour's sake. A group whose
/// transaction can take no more nested ones (LMDB limits the pages one transaction changes) commits what it holds,
/// and the rest of its writes run alone. Where a commit waits (a file whose commits sync, a server), a commit job
/// that finds fewer writes queued than the last group held waits up to 50 µs first, on the store's thread, for the
/// writers that group resumed (``StoreThread/waitForJobs(_:upTo:)``).
extension DocStore {
    /// Runs several steps in one write transaction: they commit together when `body` returns, and none of them
    /// does when it throws.
    ///
    /// Writes that arrive while a commit is being made durable wait for it, then commit together in the next
    /// transaction, with one sync (group commit). Each stays all or nothing on its own: it runs in a transaction
    /// nested in the group's, so a write that throws, or meets a unique conflict, fails alone and leaves its
    /// neighbours as they would be without it. The call returns once the commit that holds the write is durable
    /// at the store's ``Options/durability``; the writes of one task commit in the order they were made.
    ///
    /// `body` may run more than once: when the store must grow its map midway, or when its group cannot commit and
    /// each of its writes is run alone. It should change nothing outside the transaction. On a store opened with
    /// ``Options/readOnly``, `body` runs in a read transaction: its reads work, and its first change throws
    /// ``DocStoreError/Code/readOnly``.
    ///
    /// For example:
    /// ```swift
    /// let n = try await store.write { ctx in
    ///     guard var p = try ctx.get(Person.self, id: id) else { return 0 }
    ///     p.age += 1
    ///     try ctx.save(p)
    ///     return try Person.query().count(in: ctx)
    /// }
    /// ```
    ///
    /// On a store kept in a file, a write that finds the store's thread idle runs on its caller's thread, which
    /// takes the store thread's turn meanwhile (``StoreThread/borrow()``), when its commit waits for the disk at
    /// most for one small write: a commit that does not sync (``Durability/off``,
    /// ``Durability/periodic(milliseconds:)``), or one at ``Durability/full`` that writes one record of the write log
    /// with no checkpoint near (a sync of the file's pages) and no group of writers forming. It saves the hop there
    /// and back: a third of a write's time when it does not sync, a tenth when it does. Writes that come while it
    /// runs wait for it on the store's thread, and commit together after it. A commit that syncs the file
    /// (``Durability/normal``, a checkpoint, changes too large for a record of the log, a checkpoint
    /// whose owner's process has ended) runs on the store's thread: a thread of Swift's shared pool must not wait long for
    /// the disk. One that turns out to, on its caller's thread, is refused before anything is written and runs
    /// again there (`body` runs twice).
    public nonisolated func write<R: Sendable>(_ body: @escaping @Sendable (WriteContext) throws -> R) async throws
        -> R {
        try await write(body, reads: nil)
    }

    /// ``write(_:)``, with what `body` will read for its checks (`reads`): on an engine with round trips, a group
    /// commit asks for every write's reads at once, before the writes run.
    nonisolated func write<R: Sendable>(_ body: @escaping @Sendable (WriteContext) throws -> R,
                                        reads: CheckedReads?)
        async throws -> R {
        var widened: Set<String> = []
        while true {
            do {
                return try await writeOnce(body, reads: reads)
            } catch let change as CollectionHandle.IDWidthChange {
                // An id of another length than its collection's others: the collection's indexes are built again to
                // keep ids of any length, in a write of its own, and the write runs again (once per collection).
                guard widened.insert(change.collection).inserted else { throw change.stillMet }
                try await writeOnce({ try $0.scope.widenIDs(of: change.collection) }, reads: nil)
            }
        }
    }

    private nonisolated func writeOnce<R: Sendable>(_ body: @escaping @Sendable (WriteContext) throws -> R,
                                                    reads: CheckedReads?)
        async throws -> R {
        try checkOpen()
        if writesOnCallersThreadsWhenIdle && thread.borrow() {
            // (Asked with the turn held: no write of this process comes between the answer and the write.)
            guard core.file?.nextCommitIsBrief == true else {
                thread.giveBack()
                return try await writeOnThread(body, reads: reads)
            }
            let start = DispatchTime.now().uptimeNanoseconds
            let result = Result { () throws -> R in
                defer { thread.giveBack() }
                return try withWrite(body, unlessItSyncs: true)
            }
            // A commit that would have synced the file after all (changes too large for a record, a slot full, a
            // checkpoint whose owner's process has ended) runs again on the store's thread.
            if case .failure(let error) = result, error is CommitWouldSync {
                return try await writeOnThread(body, reads: reads)
            }
            let made = writesOnCallersThreads.add(1, ordering: .relaxed).newValue
            // A long write (an index built, many documents changed) yields its caller's thread, as a long read does;
            // and so does every 16th: a task that loops short writes would otherwise never let go of its thread.
            if made % 16 == 0 || DispatchTime.now().uptimeNanoseconds - start > 500_000 { await Task.yield() }
            return try result.get()
        }
        return try await writeOnThread(body, reads: reads)
    }

    /// ``write(_:)`` as a job of the store's thread: at once when no other write waits, else with the group.
    private func writeOnThread<R: Sendable>(_ body: @escaping @Sendable (WriteContext) throws -> R,
                                            reads: CheckedReads?)
        async throws -> R {
        try checkOpen()
        if commitsAtOnce { return try withWrite(body, reads: reads) }
        let cancelled = CancellationFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                queuedWrites.append(PendingWrite(body: body, reads: reads, continuation: continuation,
                                                 cancelled: cancelled))
                guard !commitScheduled else { return }
                commitScheduled = true
                Task { await self.commitQueuedWrites() }
            }
        } onCancel: {
            cancelled.set()
        }
    }

    /// Whether a write that reaches the store's thread commits at once, alone: when nothing waits behind it and no
    /// group is forming. After a group of several, where commits wait, it queues instead, as the first of the next
    /// group: the other writers that group resumed are about to come back, and a commit of its own would leave them
    /// to the commit after it (four writers in step would alternate groups of one and three, two commits where one
    /// would do).
    var commitsAtOnce: Bool {
        isReadOnly || (queuedWrites.isEmpty && thread.waitingJobs == 0 && (!commitsWait || lastGroupSize <= 1))
    }

    /// Commits every queued write: alone, or as a group.
    private func commitQueuedWrites(waited: Bool = false) async {
        // When fewer writes wait than the last group held, the writers it resumed are about to queue their next
        // ones: where a commit waits (for syncs, for a server), a moment's wait lets one commit carry them too. The
        // jobs that came meanwhile (their writes) run first, and join the queue; the commit follows them.
        if !waited && commitsWait && lastGroupSize > 1 && queuedWrites.count < lastGroupSize,
           thread.waitForJobs(lastGroupSize - queuedWrites.count, upTo: DocStore.commitWait) > 0 {
            Task { await self.commitQueuedWrites(waited: true) }
            return
        }
        commitScheduled = false
        let group = queuedWrites
        queuedWrites = []
        lastGroupSize = group.count
        if group.count == 1 {
            group[0].runAlone(in: self)
        } else if !group.isEmpty {
            commitGroup(group)
        }
    }

    private func commitGroup(_ group: [any QueuedWrite]) {
        // Whether a write of the group committed into the group's transaction, and so may have handed the store
        // collections whose databases were opened in it: they are closed if that transaction does not commit.
        var published = false
        // Where the group was cut short because its transaction could take no more nested ones: the writes from
        // there on run alone once it has committed.
        var cut = group.count
        do {
            try checkOpen()
            try mapErrors {
                try core.env.write { [core] txn in
                    // A run before this one met a full map, and what it opened was closed with it.
                    if published { core.forgetCollections(); published = false }
                    cut = group.count
                    // The shapes this transaction sees before any write of the group (each write's own scope sees
                    // the writes before it, and cannot take what it loads as recorded).
                    try core.loadShapes(in: txn, generation: try core.catalog(txn).generation(), committedView: true,
                                        loadedAt: core.stateAtStart().shapesLoadedAt)
                    if txn.prefersBatches { try DocStore.readAhead(group, core: core, txn: txn) }
                    for (i, write) in group.enumerated() {
                        if txn.mustRunAgain { break }
                        let attempt = Attempt()
                        do {
                            let end = try txn.nested { child -> UInt64 in
                                let scope = try TransactionScope(core: core, txn: child, nested: true)
                                attempt.scope = scope
                                let context = WriteContext(scope: scope)
                                defer { context.invalidate() }
                                try write.run(context)
                                return try core.catalog(child).generation()
                            }
                            published = true
                            attempt.scope?.committed(endGeneration: end)
                        } catch StorageError.nestingRefused {
                            attempt.scope?.aborted()
                            cut = i
                            break
                        } catch {
                            attempt.scope?.aborted()
                            write.failed(storeError(error))
                        }
                    }
                }
            }
        } catch {
            if published { core.forgetCollections() }
            for write in group { write.runAlone(in: self) }
            return
        }
        largestGroup = max(largestGroup, cut)
        lastGroupSize = cut
        if changes.hasSubscribers { changes.notify(lastCommitted: try? core.env.lastCommittedTransaction()) }
        for write in group[..<cut] { write.finish() }
        for write in group[cut...] { write.runAlone(in: self) }
    }
}

extension DocStore {
    /// What the writes of a group will read for their checks, asked for at once: on an engine with round trips, one
    /// round trip for the group where each write would make its own. (The reads are only asked for: a write whose
    /// collection is not open yet, or that reads something else, reads it itself.)
    fileprivate static func readAhead(_ group: [any QueuedWrite], core: StoreCore, txn: any StorageTransaction) throws {
        let scope = try TransactionScope(core: core, txn: txn)
        let context = WriteContext(scope: scope)
        defer { context.invalidate() }
        let keys = group.flatMap { write in write.reads.flatMap { try? $0.keys(context) } ?? [] }
        // Taken as absent without asking only when every write of the group expects them so: a body of the
        // caller's own must read what is there, even in a run that does not commit.
        let absent = group.allSatisfy { $0.reads?.expectingAbsent == true }
        if !keys.isEmpty { try txn.prefetch(keys, expectingAbsent: absent) }
    }
}

/// What a write will read for its checks (see ``DocStore/write(_:reads:)``), and whether it is refused when any of
/// it is there: an insert of the store's own, whose body the caller does not see, so that an engine with round
/// trips may take the keys as absent without asking (``StorageTransaction/prefetch(_:expectingAbsent:)``) and run
/// it again when one was there.
struct CheckedReads: Sendable {
    let expectingAbsent: Bool
    let keys: @Sendable (WriteContext) throws -> [(KeySpace, [UInt8])]
}

/// A write waiting for its commit, whatever its result's type.
protocol QueuedWrite: AnyObject {
    /// What the write will read for its checks, if it says (see ``DocStore/write(_:reads:)``).
    var reads: CheckedReads? { get }
    /// Runs the write's body, keeping its result for ``finish()``.
    func run(_ context: WriteContext) throws
    /// The write did not commit: ``finish()`` gives `error`.
    func failed(_ error: any Error)
    /// After the commit: resumes the caller with the write's result or error.
    func finish()
    /// Runs the write in a transaction of its own and resumes the caller.
    func runAlone(in store: isolated DocStore)
}

final class PendingWrite<R: Sendable>: QueuedWrite {
    private let body: @Sendable (WriteContext) throws -> R
    let reads: CheckedReads?
    private let continuation: CheckedContinuation<R, any Error>
    private let cancelled: CancellationFlag
    private var outcome: Result<R, any Error>?

    init(body: @escaping @Sendable (WriteContext) throws -> R,
         reads: CheckedReads?,
         continuation: CheckedContinuation<R, any Error>, cancelled: CancellationFlag) {
        self.body = body
        self.reads = reads
        self.continuation = continuation
        self.cancelled = cancelled
    }

    func run(_ context: WriteContext) throws {
        outcome = nil
        outcome = .success(try runBody(context))
    }

    /// The body, in the commit's task, seeing its caller's cancellation as a body run in the caller's task would.
    private func runBody(_ context: WriteContext) throws -> R {
        try WriteCancellation.$ofCaller.withValue(cancelled) { try body(context) }
    }


    func failed(_ error: any Error) {
        outcome = .failure(error)
    }

    func finish() {
        continuation.resume(with: outcome ?? .failure(DocStoreError(.storage, "the write was not run")))
    }

    func runAlone(in store: isolated DocStore) {
        continuation.resume(with: Result { try store.withWrite(runBody, reads: reads) })
    }
}

