import Foundation
import Synchronization

/// An embedded document store: `Codable` models in an LMDB file, with secondary indexes kept in the same
/// transaction as each document.
///
/// All work runs on the actor, in synchronous LMDB transactions that never cross an `await`; only `Sendable`
/// values leave it.
///
/// For example:
/// ```swift
/// let store = try await DocStore(path: "people.db")          // creates or opens
/// try await store.insert(Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: nil, tags: ["swift"]))
/// let total = try await Person.query().count(in: store)
/// ```
public actor DocStore {
    /// How a store is opened.
    public struct Options: Sendable {
        /// The size of the memory map to start with. The map grows by itself as the store fills.
        public var initialMapSize: Int = 64 << 20
        /// The size past which the map does not grow: a write that needs more fails with
        /// ``DocStoreError/Code/storeFull`` and writes nothing.
        public var maximumMapSize: Int = 1 << 40
        /// The most LMDB databases the file may hold: one per collection, one per index, and the catalog.
        public var maxDatabases: UInt32 = 1024
        /// The most concurrent read transactions, across processes.
        public var maxReaders: UInt32 = 126
        /// Opens the store for reading only (LMDB's `MDB_RDONLY`): the data file is opened without write access, so
        /// a store on a read-only file system, or in a file this process may not write, can be read. Every change
        /// is refused with ``DocStoreError/Code/readOnly`` (``DocStore/prepare(_:)`` too, when something is
        /// missing); reads never write, so every read works. The store must exist.
        ///
        /// LMDB still records readers in the lock file `PATH-lock` when it can open it for writing, so writers in
        /// other processes keep the pages being read; on a read-only file system it goes without. Where the lock
        /// file cannot be opened for another reason (a folder or lock file this process may not write), the store
        /// is opened without it (`MDB_NOLOCK`) if no process has it open then; it must then not be written while
        /// it is open here.
        ///
        /// For example:
        /// ```swift
        /// var options = DocStore.Options()
        /// options.readOnly = true
        /// let archive = try await DocStore(path: "/mnt/backup/people.db", options: options)
        /// ```
        public var readOnly = false
        /// The most threads one query's full scan uses to check its condition: the documents' ids are cut into
        /// ranges, read at once by as many LMDB readers, each seeing the same commit, and the matches put back in
        /// order. A scan of fewer than 16,384 documents a thread stays on one. An update of 64 documents or more
        /// makes their new bytes and index keys on as many threads, and writes them in order. The default is the
        /// number of cores, up to 4; `1` keeps every scan and update on the calling thread.
        public var scanThreads = min(ProcessInfo.processInfo.activeProcessorCount, 4)
        /// Reads the file's structure before opening it, without trusting it (every page number and offset checked
        /// before use), and refuses a damaged file with ``DocStoreError/Code/damagedFile`` naming the page, rather
        /// than letting LMDB read through a damaged page later, which can stop the process. Off by default: it reads
        /// every page in use once. Turn it on for a file that comes from elsewhere; ``DocStore/verify()`` always
        /// runs the same check first.
        public var checkFile = false
        /// Checks each document against the checksum it was written with before decoding it for a read (a query's
        /// results, `get`), so that a changed byte inside a value is an error naming the document instead of a wrong
        /// answer. Off by default: it reads every returned document's bytes once more. ``DocStore/verify()`` always
        /// checks every document's checksum.
        public var checkChecksums = false
        /// What a write that has returned survives: see ``Durability``. The default, ``Durability/full``, survives
        /// a crash of the machine.
        public var durability = Durability.full
        /// The file is this process's alone while the store is open, as with SQLite's `locking_mode=EXCLUSIVE`: an
        /// opening of it in another process is refused with ``DocStoreError/Code/alreadyOpen``, and so is this one
        /// while another process has it open. At ``Durability/off`` and ``Durability/periodic(milliseconds:)``
        /// commits then change the file's pages in place, in a writable map (LMDB's `MDB_WRITEMAP`, which LMDB allows
        /// only when no other process has the file open), instead of writing copies of them: a commit of a few
        /// documents costs a third to a half of the time. Large commits (thousands of documents) take somewhat longer
        /// instead, and the file is as long as its map, which grows by half at a time, its disk space taken as it
        /// grows (so that a full disk fails a write rather than the process). Off by default; at other durabilities
        /// it only keeps other processes out.
        ///
        /// Every opening of a store takes a lock on its file (`flock`) that says which kind it is; a program that
        /// opens the file with LMDB alone does not, and must not while a store is open exclusively.
        public var exclusive = false
        /// The fewest documents a scan gives a thread; lowered by tests to split small collections.
        var documentsPerScanThread = 16_384

        public init() {}
    }

    /// What a write that has returned survives, named as SQLite's `synchronous` setting names its levels. At every
    /// level a commit is all or nothing, and a crash of the writing process (a `kill -9`, a trap) loses no write
    /// that returned: the operating system holds what was written. The levels differ in what a crash of the machine
    /// (a power loss, a kernel panic) may take.
    ///
    /// For example:
    /// ```swift
    /// var options = DocStore.Options()
    /// options.durability = .normal          // one sync per commit
    /// let store = try await DocStore(path: "/var/lib/app/events.db", options: options)
    /// ```
    public enum Durability: Sendable, Hashable, CustomStringConvertible {
        /// SQLite's `FULL`, the default: a write that returned survives a crash of the machine. Each commit waits
        /// for one `O_DSYNC` write of a record of its changes to the write log beside the file (`PATH-log`); the
        /// file's pages are synced at checkpoints, and an opening after a crash of the machine applies the records
        /// since the last one (*Transactions* has the details).
        case full
        /// SQLite's `NORMAL`: each commit syncs its pages, and writes but does not sync the page that makes them
        /// the store's state (one `fsync`; LMDB's `MDB_NOMETASYNC`). A crash of the machine may lose the last
        /// commits (the store opens as it was at an earlier one), and never damages the file.
        case normal
        /// SQLite's `OFF`: no sync at commit (LMDB's `MDB_NOSYNC`); the file is synced when the store closes and by
        /// ``DocStore/flush()``. A crash of the machine may lose every commit since the last sync, and on a file
        /// system that does not keep writes in order it may damage the file (``DocStore/recover(from:to:)`` then
        /// copies out what is sound).
        case off
        /// As ``off``, with a thread that syncs the file every `milliseconds`: a crash of the machine may lose the
        /// commits of about the last `milliseconds`, with the same caveat on file systems that reorder writes.
        case periodic(milliseconds: Int)

        public var description: String {
            switch self {
            case .full: return "full"
            case .normal: return "normal"
            case .off: return "off"
            case .periodic(let ms): return "periodic(\(ms) ms)"
            }
        }
    }

    /// The path of the store's data file (LMDB keeps `PATH-lock` beside it).
    public nonisolated let path: String
    /// Whether the store was opened with ``Options/readOnly``.
    public nonisolated let isReadOnly: Bool
    /// Whether a read-only store was opened without LMDB's lock file (`MDB_NOLOCK`), because this process may not
    /// write it: a process that writes the store while it is open here does not keep the pages its reads use, so
    /// its answers could be wrong. A tool should say so.
    public nonisolated let isWithoutLockFile: Bool
    /// The store's state. Writes use it in the store thread's turn (on that thread, or on a caller's that borrowed
    /// it); reads of a file on their callers' threads, through what guards it (``StoreCore/withState(_:)``, the
    /// collections' ``PlanCache``s, the engine's gate).
    nonisolated(unsafe) let core: StoreCore
    /// Set by ``close()``.
    private let closed = Atomic<Bool>(false)
    nonisolated var isClosed: Bool { closed.load(ordering: .acquiring) }
    /// Signals observers after commits, this process's and others'. Observers hold the store only while they read:
    /// when it is released, its core closes the file and then ends every observation.
    nonisolated let changes: ChangeNotifier
    /// The thread the actor runs on: its LMDB work never holds a thread of the cooperative pool.
    nonisolated let thread: StoreThread
    /// Where reads of a file run when their callers' threads are taken by others.
    nonisolated let readers: ReaderThreads
    /// Writes waiting for the next group commit, in the order they came.
    var queuedWrites: [any QueuedWrite] = []
    /// Whether a job that commits ``queuedWrites`` is on the store's thread's queue.
    var commitScheduled = false
    /// The most writes one commit has held, for tests.
    var largestGroup = 0
    /// The writes the last group commit held.
    var lastGroupSize = 0 { didSet { groupsForming.store(lastGroupSize > 1, ordering: .relaxed) } }
    /// Whether a group commit waits a moment (``commitWait``) for the writers the last group resumed: on a file
    /// whose commits sync, and on a server. Waiting 60 µs took 16 writers from 11,600-12,000 commits a second to
    /// 17,500-18,000 and 4 from 5,500-6,300 to 7,300-7,400 on a file (20,000 documents, AMD EPYC, 2 cores); 200 µs
    /// gained less. With the 50 µs kept: 19,300 and 8,900 on a file, and 16 writers on PostgreSQL went from 7,100
    /// to 7,900-8,400.
    nonisolated let commitsWait: Bool
    static let commitWait = Duration.microseconds(50)
    /// Writes run on their callers' threads, in the store thread's turn (``StoreThread/borrow()``), for tests.
    nonisolated let writesOnCallersThreads = Atomic(0)
    /// Whether a write that finds the store's thread idle runs on its caller's thread (see ``write(_:)``): on a file
    /// whose next commit waits for the disk at most for one small write, and, where commits sync, when the last
    /// commit was not a group's.
    nonisolated var writesOnCallersThreadsWhenIdle: Bool {
        !isReadOnly && core.file != nil && (!commitsWait || !groupsForming.load(ordering: .relaxed))
    }
    /// Whether the last commit was a group's (``lastGroupSize``, for callers' threads).
    nonisolated let groupsForming = Atomic(false)

    public nonisolated var unownedExecutor: UnownedSerialExecutor { thread.asUnownedSerialExecutor() }

    /// Opens the store at `path`, creating it when the file does not exist.
    ///
    /// For example:
    /// ```swift
    /// var options = DocStore.Options()
    /// options.maximumMapSize = 8 << 30
    /// let store = try await DocStore(path: "/var/lib/app/people.db", options: options)
    /// ```
    /// - Throws: ``DocStoreError`` with code ``DocStoreError/Code/cannotOpen`` (unwritable folder, a directory,
    ///   no file to open read-only), ``DocStoreError/Code/notAStore`` (a file of another kind, or another program's
    ///   LMDB environment), ``DocStoreError/Code/formatTooNew``, or ``DocStoreError/Code/alreadyOpen``.
    public init(path: String, options: Options = Options()) async throws {
        self.init(core: try StoreCore(path: path, options: options), threadName: (path as NSString).lastPathComponent)
    }

    /// Opens a store on an engine that does not keep it in a file (DocStorePostgres's), under `name`: what errors
    /// and tools call it, in place of a path. The engine is made, and the catalog read, on a thread of their own:
    /// both wait on the network. The engine is closed when opening fails.
    package init(engine: @escaping @Sendable () throws -> any StorageEngine, name: String, threadName: String,
                 options: Options) async throws {
        let opened = try await DocStore.onThread("DocStore opening \(threadName)") {
            UncheckedCore(core: try StoreCore(path: name, engine: try engine(), file: nil, isReadOnly: options.readOnly,
                                              checksChecksums: options.checkChecksums, scan: .off))
        }
        self.init(core: opened.core, threadName: threadName)
    }

    private init(core: StoreCore, threadName: String) {
        self.path = core.path
        self.isReadOnly = core.isReadOnly
        let changes = ChangeNotifier()
        self.changes = changes
        self.core = core
        core.onRelease = { [changes] in changes.finishAll() }
        self.isWithoutLockFile = core.file?.isWithoutLockFile ?? false
        self.commitsWait = core.file?.syncsAtCommit ?? !core.isReadOnly   // (a server's commit is a round trip)
        self.thread = StoreThread(name: "DocStore " + threadName)
        self.readers = ReaderThreads(name: "DocStore reads " + threadName)
    }

    deinit {
        thread.stop()
        readers.stop()
    }

    /// Throws ``DocStoreError/Code/readOnly`` when the store was opened read-only, saying that `what` was refused:
    /// for the shell, which refuses a change before asking anyone to confirm it.
    package nonisolated func checkWritable(_ what: String) throws {
        if isReadOnly { throw core.readOnlyRefusal(what) }
    }

    /// Closes the store. Later calls throw ``DocStoreError/Code/closed``. The store also closes when released.
    public func close() {
        closed.store(true, ordering: .releasing)
        core.env.close()   // (after the reads in flight)
        changes.finishAll()
    }

    /// Makes every write that has returned durable now, whatever ``Options/durability`` says: a sync of the file.
    /// For a store opened with ``Durability/off`` or ``Durability/periodic(milliseconds:)``, at a moment that
    /// matters (before answering a request that must not be lost, say).
    public func flush() throws {
        try checkOpen()
        do { try core.env.flush() } catch let error as StorageError {
            throw DocStoreError(.storage, "cannot sync \(path): \(error)", underlying: error)
        }
    }

    // MARK: Transactions

    /// Runs `body` in a read transaction: it sees the last committed state and blocks no writer. Reading never
    /// writes: a collection that does not exist reads as empty.
    ///
    /// For example:
    /// ```swift
    /// let (adults, total) = try await store.read { ctx in
    ///     (try Person.include(#Predicate { $0.age >= 18 }).count(in: ctx), try Person.query().count(in: ctx))
    /// }
    /// ```
    ///
    /// On a store kept in a file, the read runs beside other reads and the store's writer: it waits for none of
    /// them, nor they for it. It runs on the calling thread while fewer reads than the machine has cores run on
    /// their callers' threads, otherwise on a reader thread of the store's (``ReaderThreads``). The calling thread is
    /// the caller's executor's, the main actor's included: like every `async` function of the library, `read` is
    /// `nonisolated(nonsending)`, so a call from the main actor neither leaves it nor comes back to it. (It waits
    /// only where LMDB needs the process to itself: while the map grows, or a write deletes an index or a
    /// collection; and a read of a catalog that changed since the last read, which opens what is new, waits for the
    /// reads in flight.) A store on a server reads on its own thread:
    /// its reads wait on the network, which must not hold a thread of the shared pool.
    ///
    /// A read that held its caller's thread for more than half a millisecond yields it before returning
    /// (`Task.yield()`): a task that loops long reads would otherwise keep a thread of the shared pool, which has one
    /// per core, from every other task.
    ///
    /// On a store on a server, `body` may run more than once (up to ten times), as a write's may: a read answered
    /// from this process's copy of what the last commit left runs again when it finds, at its end, that another
    /// process committed meanwhile. So `body` should do nothing but read and return what it read.
    public nonisolated func read<R: Sendable>(_ body: @Sendable (ReadContext) throws -> R) async throws -> R {
        guard core.file != nil else { return try await withRead(body) }
        let start = DispatchTime.now().uptimeNanoseconds
        // (No `Result<R, _>` or `R?` on the usual path: each is a type the runtime looks up per call for an `R` it
        // does not know when this is compiled.)
        let onReaderThread = readers.runsTheCallingThread
        if onReaderThread || readers.enterInline() {
            let value: R
            do {
                defer { if !onReaderThread { readers.leaveInline() } }
                value = try readNow(body)
            } catch {
                if DispatchTime.now().uptimeNanoseconds - start > 500_000 { await Task.yield() }
                throw error
            }
            if DispatchTime.now().uptimeNanoseconds - start > 500_000 { await Task.yield() }
            return value
        }
        // (The body is done with before this returns.)
        let result: Result<R, any Error> = await withoutActuallyEscaping(body) { body in
            do { return .success(try await readers.run { [self] in try readNow(body) }) } catch { return .failure(error) }
        }
        if DispatchTime.now().uptimeNanoseconds - start > 500_000 { await Task.yield() }
        return try result.get()
    }

    /// Creates `T`'s collection and builds the indexes it declares, if they are missing: what its first write
    /// would do, done ahead of reads that should use the indexes.
    ///
    /// For example: `try await store.prepare(Person.self)` at start-up.
    public func prepare<T: Document>(_ type: T.Type) throws {
        // On a store opened read-only, this refuses only when something is missing.
        try withWrite { _ = try $0.scope.handle(for: type) }
    }

    func withRead<R>(_ body: (ReadContext) throws -> R) throws -> R {
        try readNow(body)
    }

    /// ``withRead(_:)`` on any thread, for a store kept in a file; on the store's thread for one on a server.
    private nonisolated func readNow<R>(_ body: (ReadContext) throws -> R) throws -> R {
        try checkOpen()
        return try mapErrors { try inReadTransaction({ ReadContext(scope: $0) }, body) }
    }

    /// Runs `body` in a read transaction. The collections the transaction opened stay open after it, whether
    /// `body` returned or threw.
    ///
    /// In a file, a read runs beside the others when every key space its catalog names is open in the process, as
    /// it then opens none (LMDB lets one transaction at a time open databases, and a database opened after a read
    /// began is not that read's to open). Otherwise they are opened first, alone, for it and the reads after it.
    private nonisolated func inReadTransaction<C: ReadContext, R>(_ makeContext: (TransactionScope) -> C,
                                                      _ body: (C) throws -> R) throws -> R {
        var last: TransactionScope?
        defer { last?.readEnded() }
        guard let file = core.file else {
            return try core.env.read { [core] txn in
                try Self.run(body, in: TransactionScope(core: core, txn: txn), makeContext, last: &last)
            }
        }
        for _ in 0..<3 {
            do {
                return try file.read { [core] txn in
                    let scope = try TransactionScope(core: core, txn: txn)
                    guard scope.keySpacesOpenedAtStart == scope.startGeneration else {
                        throw KeySpacesToOpen()
                    }
                    return try Self.run(body, in: scope, makeContext, last: &last)
                }
            } catch is KeySpacesToOpen {
                // The key spaces are opened alone, then the read runs beside the others again.
                guard core.openEveryKeySpace(file) else { break }
            }
        }
        // The catalog keeps changing, or an entry of it is damaged: the read runs alone, where it may open what it
        // needs.
        return try file.readAlone { [core] txn in
            try Self.run(body, in: TransactionScope(core: core, txn: txn), makeContext, last: &last)
        }
    }

    /// `body` given the context of `scope`, which is invalid once it returns or throws; `scope` is kept in `last`.
    /// (A function apart, given `last` in-out: a nested function that set it, called from the closures above, put
    /// it on the heap, an allocation per read.)
    private static func run<C: ReadContext, R>(_ body: (C) throws -> R, in scope: TransactionScope,
                                               _ makeContext: (TransactionScope) -> C,
                                               last: inout TransactionScope?) throws -> R {
        last = scope
        let context = makeContext(scope)
        defer { context.invalidate() }
        return try body(context)
    }

    /// Thrown by a read that must run alone, before its body runs.
    private struct KeySpacesToOpen: Error {}

    /// Runs `body` in a write transaction, committed when it returns.
    ///
    /// On a store opened read-only it runs in a read transaction instead: its reads work, and each change refuses
    /// with ``DocStoreError/Code/readOnly``.
    ///
    /// Called on the store's thread, or on a thread that holds its turn (``StoreThread/borrow()``): it touches no
    /// state of the actor's, and writes are one at a time either way.
    ///
    /// A write that meets an id of another length than its collection keeps (``CollectionHandle/IDWidthChange``)
    /// runs again once the collection keeps ids of any length, made so in a transaction of its own.
    ///
    /// `unlessItSyncs`: throws ``CommitWouldSync``, with nothing written, where the commit would sync the file (on
    /// a caller's thread, which must not wait long for the disk).
    nonisolated func withWrite<R>(_ body: (WriteContext) throws -> R, reads: CheckedReads? = nil,
                                  unlessItSyncs: Bool = false) throws -> R {
        var widened: Set<String> = []
        while true {
            do {
                return try writeTransaction(body, reads: reads, unlessItSyncs: unlessItSyncs)
            } catch let change as CollectionHandle.IDWidthChange {
                guard widened.insert(change.collection).inserted else { throw change.stillMet }
                try writeTransaction({ try $0.scope.widenIDs(of: change.collection) }, reads: nil,
                                     unlessItSyncs: unlessItSyncs)
            }
        }
    }

    private nonisolated func writeTransaction<R>(_ body: (WriteContext) throws -> R, reads: CheckedReads?,
                                                 unlessItSyncs: Bool) throws -> R {
        try checkOpen()
        if isReadOnly { return try mapErrors { try inReadTransaction({ WriteContext(scope: $0) }, body) } }
        return try mapErrors {
            let attempt = Attempt()
            do {
                func write<T>(_ body: (any StorageTransaction) throws -> T) throws -> T {
                    if unlessItSyncs, let file = core.file { return try file.writeUnlessItSyncs(body) }
                    return try core.env.write(body)
                }
                let (result, end) = try write { [core] txn -> (R, UInt64) in
                    attempt.scope?.aborted()   // a previous attempt that met a full map
                    let current = try TransactionScope(core: core, txn: txn)
                    attempt.scope = current
                    let context = WriteContext(scope: current)
                    defer { context.invalidate() }
                    if let reads, txn.prefersBatches, let keys = try? reads.keys(context), !keys.isEmpty {
                        try txn.prefetch(keys, expectingAbsent: reads.expectingAbsent)
                    }
                    let result = try body(context)
                    return (result, try core.catalog(txn).generation())
                }
                attempt.scope?.committed(endGeneration: end)
                if changes.hasSubscribers { changes.notify(lastCommitted: try? core.env.lastCommittedTransaction()) }
                return result
            } catch {
                attempt.scope?.aborted()
                throw error
            }
        }
    }

    /// The scope of the latest run of a transaction's closure, which the map's growth may run more than once.
    final class Attempt { var scope: TransactionScope? }

    nonisolated func checkOpen() throws {
        if isClosed { throw DocStoreError(.closed, "the store at \(path) is closed") }
    }

    /// Turns errors from the layers below into ``DocStoreError``s that say what happened to this store.
    nonisolated func mapErrors<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch { throw storeError(error) }
    }

    /// An error from the layers below as a ``DocStoreError`` that says what happened to this store.
    nonisolated func storeError(_ error: any Error) -> any Error {
        switch error {
        case let error as MalformedDocument:
            return DocStoreError(.corruptDocument, "a stored document in \(path) is damaged: \(error)")
        case let error as StorageError:
            switch error {
            case .full(let maximum):
                return DocStoreError(.storeFull, "the store at \(path) is full: the write needs more than its maximum "
                    + "size of \(maximum >> 20) MiB (DocStore.Options.maximumMapSize); nothing was written")
            case .permissionDenied where isReadOnly:
                // The storage's answer to a change in a read-only store, should one get that far.
                return DocStoreError(.readOnly, "cannot change the store at \(path): it was opened read-only",
                                     underlying: error)
            case .closed:
                return DocStoreError(.closed, "the store at \(path) is closed")
            case .damaged(let why):
                return StoreCore.damagedFile(path, why)
            case .outcomeUnknown(let why):
                return DocStoreError(.commitOutcomeUnknown, "\(why) (\(path))", underlying: error)
            case .interruptedChange(let cause):
                return DocStoreError(.storage, "a change failed halfway (\(cause)), so the whole transaction was "
                    + "rolled back: nothing was written", underlying: DocStoreError(.storage, "\(cause)"))
            default:
                return DocStoreError(.storage, "\(error) on \(path)", underlying: error)
            }
        default:
            return error
        }
    }

    // MARK: Documents

    /// Inserts a new document and its index entries, in one transaction.
    ///
    /// For example:
    /// ```swift
    /// try await store.insert(Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: []))
    /// ```
    /// - Throws: ``DocStoreError/Code/duplicateID`` when a document with the same id exists,
    ///   ``DocStoreError/Code/uniqueViolation`` when a unique index already holds one of its values.
    ///
    /// The document is encoded before the write, on the caller's thread; the write, which runs in the store thread's
    /// turn, only writes its bytes. The same holds for ``save(_:)`` and ``insert(contentsOf:)``.
    public nonisolated func insert<T: Document>(_ document: T) async throws {
        let bytes = try CollectionHandle.encoded(document, for: TypeRegistry.schema(T.self).collection,
                                                 shapedWith: core.encodingSalt)
        try await write({ try $0.write(bytes, as: T.self, mode: .insert) },
                        reads: CheckedReads(expectingAbsent: true) { try $0.checkedReads(bytes, as: T.self) })
    }

    /// Inserts the document, or replaces the one with the same id, updating its index entries.
    public nonisolated func save<T: Document>(_ document: T) async throws {
        let bytes = try CollectionHandle.encoded(document, for: TypeRegistry.schema(T.self).collection,
                                                 shapedWith: core.encodingSalt)
        try await write({ try $0.write(bytes, as: T.self, mode: .save) },
                        reads: CheckedReads(expectingAbsent: false) { try $0.checkedReads(bytes, as: T.self) })
    }

    /// Inserts several documents in one transaction: all of them, or none when one fails.
    public nonisolated func insert<S: Sequence & Sendable>(contentsOf documents: S) async throws
        where S.Element: Document {
        let collection = try TypeRegistry.schema(S.Element.self).collection
        let encoded = try CollectionHandle.encoded(Array(documents), for: collection, shapedWith: core.encodingSalt)
        try await write { try $0.insert(encoded: encoded, as: S.Element.self) }
    }

    /// The document of type `T` with `id`, or `nil` when there is none.
    ///
    /// - Throws: ``DocStoreError/Code/decodingFailed`` naming the collection, id and field when the stored
    ///   document no longer decodes as `T`.
    public nonisolated func get<T: Document>(_ type: T.Type, id: T.ID) async throws -> T? {
        try await read { try $0.get(type, id: id) }
    }

    /// Deletes the document of type `T` with `id` and its index entries. Returns whether there was one.
    @discardableResult
    public func delete<T: Document>(_ type: T.Type, id: T.ID) async throws -> Bool {
        try await write { try $0.delete(type, id: id) }
    }

    // MARK: Catalog

    /// The collections in the store's catalog, with their indexes, as a tool without the Swift types sees them.
    public nonisolated func collections() async throws -> [CollectionInfo] {
        try await read { try $0.collections() }
    }

    /// The indexes the store keeps for `T`'s collection that `T` no longer declares. They are maintained until
    /// ``dropIndex(_:from:)`` removes them.
    public func undeclaredIndexes<T: Document>(of type: T.Type) throws -> [IndexDefinition] {
        let schema = try TypeRegistry.schema(type)
        guard let info = try withRead({ try $0.scope.handleForReading(type)?.info }) else { return [] }
        return StoreCore.undeclared(in: info, by: schema)
    }

    /// Deletes an index and its entries. Returns whether there was one. An index the type still declares is
    /// built again by the type's next write, or by ``prepare(_:)``.
    @discardableResult
    public func dropIndex(_ name: String, from collection: String) throws -> Bool {
        try withWrite { try $0.dropIndex(name, from: collection) }
    }
}

extension DocStore {
    /// Runs `body` in a write transaction that is then rolled back, and returns what it returned: a rehearsal
    /// that sees its own changes and leaves the store as it was.
    ///
    /// For example, how many documents a change would leave:
    /// ```swift
    /// let left = try await store.dryRun { ctx in
    ///     try Query<DocumentValue>("people").include(.compare("age", .less, .int(13))).delete(in: ctx)
    ///     return try Query<DocumentValue>("people").count(in: ctx)
    /// }
    /// ```
    public func dryRun<R: Sendable>(_ body: @Sendable (WriteContext) throws -> R) throws -> R {
        do {
            _ = try withWrite { ctx -> Never in throw RolledBack(result: try body(ctx)) }
        } catch let rolledBack as RolledBack<R> {
            return rolledBack.result
        }
    }
}

/// Carries a dry run's result out of the transaction it aborts.
private struct RolledBack<R: Sendable>: Error {
    let result: R
}

/// A core made on another thread, handed to the store that owns it from then on.
private struct UncheckedCore: @unchecked Sendable {
    let core: StoreCore
}
