import CLMDB
import Foundation
import Synchronization

/// An open LMDB environment: one memory-mapped file plus its lock file.
///
/// The environment is opened with `MDB_NOSUBDIR` (the path names the data file, as with SQLite; LMDB keeps
/// `PATH-lock` beside it) and `MDB_NOTLS`, so read transactions are not tied to threads.
/// It is owned by one ``DocStore`` actor, which runs every write transaction synchronously, one at a time, on its
/// thread; read transactions run on the threads of their callers, side by side with each other and with the writer
/// (``TransactionGate`` says where they wait). No transaction ever crosses an `await`.
///
/// The map grows by itself. Before a write the environment checks how full the map is and doubles it early;
/// if a write still meets `MDB_MAP_FULL`, the transaction is aborted, the map enlarged, and the write run again,
/// up to ``Configuration/maximumMapSize``.
///
/// Opened read-only (`MDB_RDONLY`), the data file is opened for reading only and no write transaction can begin.
/// LMDB still registers readers in the lock file, which it opens for writing; on a read-only file system it goes
/// without. Where the lock file cannot be opened for another reason (a folder or lock file this process may not
/// write), the environment is opened without locking (`MDB_NOLOCK`), provided no process has it open then.
final class LMDBEnvironment: FileStorageEngine {
    typealias Configuration = FileStorage.Configuration

    let path: String
    private(set) var raw: OpaquePointer?
    private let configuration: Configuration
    /// Whether it was opened without the lock file (`MDB_NOLOCK`): no writer in another process knows of its readers.
    private(set) var isWithoutLockFile = false
    /// Read transactions reset after their read (`mdb_txn_reset`), renewed by the next reads.
    private let idleReaders = Mutex<[IdleReader]>([])
    /// A reset read transaction: renewed by one reader at a time, on any thread (`MDB_NOTLS`).
    private struct IdleReader: @unchecked Sendable { let raw: OpaquePointer }
    /// The most reset read transactions kept.
    private static let idleReadersKept = 8
    private let fileID: FileID
    /// Whether commits change the file's pages in place (`MDB_WRITEMAP`): opened ``Configuration/exclusive`` with
    /// no sync at commit. The file is then as long as the map, which grows in smaller steps (``inPlaceMapSize(for:)``).
    let writesInPlace: Bool
    /// This opening's `flock` on the data file (``OpeningLock``), held until the environment closes.
    private var openingLock: OpeningLock?
    /// Whether a write of this environment has committed. (Changed by the writer alone.)
    private var hasCommitted = false
    /// How many times this environment set its map to a larger size, for tests.
    private(set) var mapGrowths = 0
    /// The thread that syncs the file every ``Configuration/flushInterval``, if any.
    private(set) var flusher: Flusher?
    /// Where this process's transactions wait for each other.
    let gate = TransactionGate()
    var syncsAtCommit: Bool { configuration.sync != .none && !configuration.readOnly }
    /// Whether the next commit waits for the disk at most for one small write: one that does not sync, or one the
    /// write log records with no checkpoint near (``WriteLog/briefCommitGeneration(_:)``, as the last write left
    /// it), under a header no other writer has changed since. Safe on any thread.
    var nextCommitIsBrief: Bool {
        guard syncsAtCommit else { return true }
        guard let (generation, log) = briefCommit.withLock({ $0 }) else { return false }
        return log.generation == generation
    }
    private let briefCommit = Mutex<(UInt64, WriteLog.Opened)?>(nil)
    /// Held by a write from before its transaction begins until it ends, and by closing: one thread of the process
    /// writes at a time, whatever calls. (The store's writes already take turns, on its thread or in its turn; this
    /// keeps the engine safe on its own. LMDB's lock would keep a second writer waiting in `mdb_txn_begin`, but only
    /// after it may have grown the map, which LMDB refuses while another transaction of the process is open.)
    private let writer = NSRecursiveLock()
    /// Called when a write that deleted a database aborts, before any reader may begin: the handles opened on the
    /// database are closed, and whoever keeps them must forget them.
    var onKeySpacesClosed: (() -> Void)?
    /// The file's write log, in a writable environment (``WriteLog``): at full durability, what a commit waits for.
    private(set) var log: WriteLog?
    /// What lets the log go when this environment has not written for a while.
    private var idleRelease: (any DispatchSourceTimer)?

    /// Lets the log go if this environment owns it and has not written for a second, unless a write is under way.
    private func releaseLogIfIdle() {
        guard writer.try() else { return }
        defer { writer.unlock() }
        guard let env = raw, log?.isIdleOwner == true else { return }
        releaseLog(env, alone: false)
        noteWhetherTheNextCommitIsBrief()
    }

    /// With the writer lock held, after a write or a change of the log's owner: ``nextCommitIsBrief``.
    private func noteWhetherTheNextCommitIsBrief() {
        var brief: (UInt64, WriteLog.Opened)?
        if let env = raw, let log, let generation = log.briefCommitGeneration(env) { brief = (generation, log.opened) }
        briefCommit.withLock { $0 = brief }
    }

    /// What identifies a file in this process: device and inode.
    typealias FileID = FileStorage.FileID

    /// Files open in this process. LMDB must not open one environment twice in a process:
    /// closing the second handle would drop the first one's POSIX locks on the lock file.
    private static let openFiles = Mutex<Set<FileID>>([])
    /// Files being compacted in this process (``FileStorage/compact(path:configuration:bytesPerCommit:prepare:beforeReplacing:)``):
    /// no opening here until the compaction ends. (Changed under the lock of ``openFiles``.)
    private static let compacting = Mutex<Set<FileID>>([])
    /// The lock file of each file open in this process with one, by the file. (Changed under the lock of
    /// ``openFiles``.) The process must never open one by another name, for a store or to read it: closing any
    /// descriptor of a file lets go of every `fcntl` lock the process holds on it, and LMDB's locks on its lock
    /// file are how other processes know that this one has the file open and which of its reader slots are alive
    /// (`mdb_reader_check` clears the others, and their pages are then written over under this process's reads).
    private static let openLockFiles = Mutex<[FileID: FileID]>([:])

    /// Whether the file is open (or being compacted) in this process.
    static func isOpen(_ file: FileID) -> Bool {
        openFiles.withLock { $0.contains(file) || compacting.withLock { $0.contains(file) } }
    }

    /// Whether the file at `path` is the lock file of a file open in this process: one to refuse to open or read.
    static func isOpenLockFile(_ path: String) -> Bool {
        guard let id = fileID(of: path) else { return false }
        return openLockFiles.withLock { $0.values.contains(id) }
    }

    /// Refuses every opening of this environment's file in the process, whether or not the environment is still
    /// open, until the closure returned is called: a compaction's, which replaces the file.
    func reserveFile() -> () -> Void {
        let file = fileID
        LMDBEnvironment.openFiles.withLock { _ in _ = LMDBEnvironment.compacting.withLock { $0.insert(file) } }
        return { LMDBEnvironment.openFiles.withLock { _ in _ = LMDBEnvironment.compacting.withLock { $0.remove(file) } } }
    }

    /// The corresponding LMDB functions are `mdb_env_create`, `mdb_env_set_maxdbs`, `mdb_env_set_maxreaders`,
    /// `mdb_env_set_mapsize`, `mdb_env_open` and `mdb_reader_check`.
    convenience init(path: String, configuration: Configuration) throws {
        do { try self.init(opening: path, configuration) } catch let error as LMDBError { throw error.storageError }
    }

    private init(opening path: String, _ configuration: Configuration) throws {
        self.path = path
        self.configuration = configuration
        if !configuration.replaying { try LMDBEnvironment.recover(path: path, configuration: configuration) }

        var flags = LMDBFlags.noSubdirectory | LMDBFlags.noThreadLocalStorage
        if configuration.readOnly { flags |= LMDBFlags.readOnly } else { flags |= configuration.syncFlags }
        let inPlace = configuration.exclusive && configuration.sync == .none && !configuration.readOnly
            && !configuration.replaying
        if inPlace { flags |= LMDBFlags.writeMap }
        var withoutLock = false
        /// What this process has open already, which no opening of the file may go past.
        func refuseFilesOpenHere(_ open: Set<FileID>) throws {
            guard let existing = LMDBEnvironment.fileID(of: path) else { return }
            if open.contains(existing) || LMDBEnvironment.compacting.withLock({ $0.contains(existing) }) {
                throw StorageError.alreadyOpenInProcess
            }
            if LMDBEnvironment.openLockFiles.withLock({ $0.values.contains(existing) }) {
                throw StorageError.notAStore("it is the lock file of a store this process has open")
            }
        }
        // (The lock on the data file is taken outside the lock of the open files: it may wait for a moment.)
        var opened: (env: OpaquePointer, file: FileID, lock: OpeningLock?)?
        for attempt in 1...3 where opened == nil {
            try LMDBEnvironment.openFiles.withLock { try refuseFilesOpenHere($0) }
            let openingLock = configuration.replaying ? nil
                : try OpeningLock(path, exclusive: configuration.exclusive, creating: !configuration.readOnly)
            let file = try LMDBEnvironment.openFiles.withLock { open -> (OpaquePointer, FileID)? in
                try refuseFilesOpenHere(open)
                // The map of a file written in place is as long as the file (LMDB sets the file's length to the
                // map's), and at least as long as its last commit needs: a file is never cut by opening it. One that
                // is shorter than that (free pages at its end were never written) is lengthened, if it is a store's:
                // another program's file is opened as it is, to be refused.
                var mapSize = configuration.initialMapSize
                if inPlace {
                    let (size, lengthens) = LMDBEnvironment.inPlaceMapSize(opening: path)
                    if !lengthens || LMDBEnvironment.holdsCatalog(path, configuration) {
                        mapSize = size
                    } else {
                        flags &= ~LMDBFlags.writeMap
                    }
                }
                var env: OpaquePointer
                do {
                    env = try LMDBEnvironment.open(path, flags: flags, mapSize: mapSize, configuration)
                } catch let error as LMDBError where configuration.readOnly
                            && (error.code == EACCES || error.code == EPERM) && access(path, R_OK) == 0 {
                    // The data file can be read, so it is the lock file that cannot be opened for writing.
                    guard LMDBEnvironment.lockFileIsUnused(path + "-lock") else {
                        throw StorageError.lockFileUnavailable(error.message)
                    }
                    env = try LMDBEnvironment.open(path, flags: flags | LMDBFlags.noLock, mapSize: mapSize,
                                                   configuration)
                    withoutLock = true
                } catch {
                    openingLock?.removeFileIfMadeEmpty()
                    throw error
                }
                // A compaction in another process may have put a new file at the path after it was locked (LMDB
                // waits for the compaction's lock, then opens the path): opened again, the new one locked.
                if let openingLock, !openingLock.locks(env) {
                    mdb_env_close(env)
                    guard attempt < 3 else {
                        throw StorageError.failed("the file was replaced by another while it was being opened")
                    }
                    return nil
                }
                // The holes of a file written in place are given their blocks: a write into one on a full disk would
                // stop the process, where an allocation refused fails the opening, which then writes copies.
                if flags & LMDBFlags.writeMap != 0, !LMDBEnvironment.allocate(env, from: 0, to: mapSize) {
                    mdb_env_close(env)
                    flags &= ~LMDBFlags.writeMap
                    env = try LMDBEnvironment.open(path, flags: flags, mapSize: configuration.initialMapSize,
                                                   configuration)
                }
                guard let id = LMDBEnvironment.fileID(of: path) else {
                    mdb_env_close(env)
                    throw LMDBError(code: ENOENT)
                }
                open.insert(id)
                if !withoutLock, let lock = LMDBEnvironment.fileID(of: path + "-lock") {
                    LMDBEnvironment.openLockFiles.withLock { $0[id] = lock }
                }
                return (env, id)
            }
            if let (env, id) = file { opened = (env, id, openingLock) }
        }
        guard let (env, registered, openingLock) = opened else { throw LMDBError(code: EAGAIN) }
        do {
            var dead: Int32 = 0
            try lmdbCheck(mdb_reader_check(env, &dead))
        } catch {
            LMDBEnvironment.close(env, forgetting: registered)
            throw error
        }
        self.raw = env
        self.fileID = registered
        self.isWithoutLockFile = withoutLock
        self.writesInPlace = flags & LMDBFlags.writeMap != 0
        self.openingLock = openingLock
        if !configuration.readOnly && !configuration.replaying && !withoutLock {
            do {
                let logs = configuration.sync == .full && configuration.writeLog
                log = try WriteLog.open(beside: path, environment: env, logs: logs)
                // A logged commit waits for its record, not for LMDB's syncs.
                if logs, log != nil { try lmdbCheck(mdb_env_set_flags(env, LMDBFlags.noSync, 1)) }
            } catch {
                log = nil
                LMDBEnvironment.close(env, forgetting: registered)
                raw = nil
                throw error
            }
        }
        if let interval = configuration.flushInterval, !configuration.readOnly {
            flusher = Flusher(environment: env, every: interval, gate: writesInPlace ? gate : nil)
        }
        if log?.logs == true {
            // An owner of the log idle for a second lets it go: its pin would keep other processes' commits from
            // reusing pages, and a crash of the machine then has nothing to apply.
            let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
            timer.schedule(deadline: .now() + 1, repeating: 1, leeway: .milliseconds(250))
            timer.setEventHandler { [weak self] in self?.releaseLogIfIdle() }
            timer.resume()
            idleRelease = timer
        }
    }

    /// Applies the file's write log if the machine stopped before its commits reached the disk (``WriteLog``), with
    /// an environment of its own: the records in one transaction, then a sync. Nothing, if the file is open in the
    /// process (its opening is then refused).
    static func recover(path: String, configuration: Configuration) throws {
        guard LMDBEnvironment.fileID(of: path).map(LMDBEnvironment.isOpen) != true else { return }
        try WriteLog.recover(path: path, readOnly: configuration.readOnly) { bodies in
            var replaying = configuration
            (replaying.replaying, replaying.sync, replaying.flushInterval) = (true, .none, nil)
            let environment = try LMDBEnvironment(opening: path, replaying)
            defer { environment.close() }
            try environment.write { txn in
                for body in bodies { try WriteCapture.apply(body, in: txn as! LMDBTransaction) }
            }
            try environment.flush()
        }
    }

    /// Creates and opens an environment handle; on failure the handle is closed, as LMDB requires.
    private static func open(_ path: String, flags: UInt32, mapSize: Int, _ configuration: Configuration) throws
        -> OpaquePointer {
        var env: OpaquePointer?
        try lmdbCheck(mdb_env_create(&env))
        guard let env else { throw LMDBError(code: ENOMEM) }
        do {
            try lmdbCheck(mdb_env_set_maxdbs(env, configuration.maxDatabases))
            try lmdbCheck(mdb_env_set_maxreaders(env, configuration.maxReaders))
            try lmdbCheck(mdb_env_set_mapsize(env, mapSize))
            try lmdbCheck(mdb_env_open(env, path, flags, 0o644))
            return env
        } catch {
            mdb_env_close(env)
            throw error
        }
    }

    /// Whether no process has the environment open: each one that has holds a shared `fcntl` lock on the first
    /// byte of the lock file, which `F_GETLK` reports (a file that cannot be read counts as in use).
    fileprivate static func lockFileIsUnused(_ lockPath: String) -> Bool {
        let fd = Glibc.open(lockPath, O_RDONLY | O_CLOEXEC)
        if fd < 0 { return errno == ENOENT }
        defer { Glibc.close(fd) }
        var lock = firstByteWriteLock
        guard fcntl(fd, F_GETLK, &lock) == 0 else { return false }
        return lock.l_type == Int16(F_UNLCK)
    }

    /// A write lock on the first byte of a lock file, the byte every opening of the environment locks.
    private static var firstByteWriteLock: flock {
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        return lock
    }

    /// The lock file held by this process alone: an `fcntl` write lock on the byte each opening locks (shared, or
    /// alone by the first), taken only if no other process holds it. An opening elsewhere then waits until it is
    /// released. (Closing any descriptor of the file releases this process's locks on it: an environment of the
    /// file closed meanwhile releases it too.)
    struct ExclusiveLock {
        private let descriptor: Int32

        /// Throws ``StorageError/openElsewhere`` when another process holds the lock file, and names the reason when
        /// the lock file cannot be opened or locked at all (a folder this process may not write into, say).
        init(_ lockPath: String) throws {
            let fd = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                throw StorageError.failed("cannot open the lock file \(lockPath): \(String(cString: strerror(errno)))")
            }
            var lock = LMDBEnvironment.firstByteWriteLock
            guard fcntl(fd, F_SETLK, &lock) == 0 else {
                let code = errno
                Glibc.close(fd)
                if code == EACCES || code == EAGAIN { throw StorageError.openElsewhere }
                throw StorageError.failed("cannot lock \(lockPath): \(String(cString: strerror(code)))")
            }
            descriptor = fd
        }

        func release() { Glibc.close(descriptor) }
    }

    private static func fileID(of path: String) -> FileID? { FileStorage.fileID(of: path) }

    deinit { close() }

    /// Closes the environment. Further use throws; closing twice does nothing.
    ///
    /// The corresponding LMDB function is `mdb_env_close`.
    /// Reads and copies running on other threads are waited for.
    func close() { shut(orderly: true) }

    /// Closes the environment as the death of its process would leave it: nothing synced, the write log left as it
    /// is. For tests of a crash of the machine.
    func abandon() { shut(orderly: false) }

    /// For tests of a commit that fails: the next commit's transaction is aborted instead and the commit reported as
    /// failed with `EIO`, as a write error of the disk would; `afterFailure` then runs before the write takes LMDB's
    /// writer lock back (another process may write meanwhile).
    func failNextCommit(afterFailure: @escaping () -> Void) {
        writer.lock()
        defer { writer.unlock() }
        failingCommit = afterFailure
    }
    private var failingCommit: (() -> Void)?

    private func shut(orderly: Bool) {
        writer.lock()
        defer { writer.unlock() }
        // (Stopped before the gate is passed alone: its thread may be waiting at the gate, to sync a map written in
        // place.)
        flusher?.stop()
        gate.alone {
            guard let env = raw else { return }
            flusher = nil
            dropIdleReaders()
            idleRelease?.cancel()
            idleRelease = nil
            // The log is cleared if this environment owns it. Commits that were not synced (`MDB_NOSYNC`, or a meta
            // page left unsynced) are made durable: LMDB's close does not sync.
            if orderly { releaseLog(env, alone: true) }
            log?.endTransactions()
            log = nil
            failingCommit = nil
            briefCommit.withLock { $0 = nil }
            if orderly && !configuration.readOnly { _ = mdb_env_sync(env, 1) }
            LMDBEnvironment.close(env, forgetting: fileID)
            openingLock = nil
            raw = nil
        }
    }

    /// Clears the log if this environment owns it, under LMDB's writer lock (a write begun for it, then aborted),
    /// which every writer that appends to the log holds too. `alone`: the caller holds the gate alone (closing).
    private func releaseLog(_ env: OpaquePointer, alone: Bool) {
        guard let log else { return }
        var handle: OpaquePointer?
        var rc = mdb_txn_begin(env, nil, 0, &handle)
        // (Another process's commit grew the map, perhaps more than once: adopted, then begun again.)
        for _ in 0..<8 where rc == MDB_MAP_RESIZED {
            guard (try? resize(0, alone: alone)) != nil else { break }
            rc = mdb_txn_begin(env, nil, 0, &handle)
        }
        guard rc == MDB_SUCCESS, let handle else {
            // (The pin stays while the header names this environment's checkpoint, others appending under it, until
            // the environment closes: they then find it gone, and make a checkpoint of their own.)
            return log.forget()
        }
        log.release(env)
        mdb_txn_abort(handle)
    }

    /// Closes `env` and forgets its file, both under the lock of the open files: once the handle is closed, a file
    /// that was deleted while open frees its inode, and a store created meanwhile may get it. Forgotten after, the
    /// inode would be forgotten for that store too, and a second opening of its file let through.
    private static func close(_ env: OpaquePointer, forgetting file: FileID) {
        openFiles.withLock { open in
            mdb_env_close(env)
            open.remove(file)
            _ = openLockFiles.withLock { $0.removeValue(forKey: file) }
        }
    }

    private func dropIdleReaders() {
        for reader in idleReaders.withLock({ readers in defer { readers = [] }; return readers }) {
            mdb_txn_abort(reader.raw)
        }
    }

    private func environment() throws -> OpaquePointer {
        guard let raw else { throw StorageError.closed }
        return raw
    }

    /// Syncs the file: every commit so far becomes durable.
    ///
    /// The corresponding LMDB function is `mdb_env_sync`.
    func flush() throws {
        try translatingErrors {
            let env = try environment()
            guard !configuration.readOnly else { return }
            // (A map written in place is synced through the map: not while it is set to another size.)
            if writesInPlace { gate.enter() }
            defer { if writesInPlace { gate.leave() } }
            try lmdbCheck(mdb_env_sync(env, 1))
            // A sync of the flush thread's that failed lost what it was to write, though this one succeeded.
            if let failed = flusher?.takeFailure() {
                throw StorageError.failed("a sync of the file at an interval failed (\(LMDBError(code: failed).message)): "
                    + "commits made before it may not be on disk")
            }
        }
    }

    /// A thread that syncs an environment's file at an interval, until stopped. `mdb_env_sync` of a file opened
    /// without `MDB_WRITEMAP` is an `fdatasync` of its descriptor, which may run beside transactions on other
    /// threads; with it, an `msync` of the map, which passes the environment's gate as a reader does, so that the
    /// map is not set to another size meanwhile. The environment stops the thread before it closes.
    final class Flusher: @unchecked Sendable {
        // @unchecked: `environment` is only read; `stopped` and the wake-up are guarded by `condition`.
        private let environment: OpaquePointer
        private let interval: Duration
        /// (By the monotonic clock: a wall clock set back would put the next sync off by as much.)
        private let condition = MonotonicCondition()
        private var stopped = false
        private let finished = DispatchSemaphore(value: 0)
        private var flushes = 0
        /// The code of a sync that failed, until ``takeFailure()`` reports it. (On Linux the pages a failed
        /// writeback held are left clean, and the next sync of the descriptor succeeds: this is the only word of it.)
        private var failure: Int32?
        /// What syncs the file: `mdb_env_sync`, or a test's stand-in (``syncing(with:)``).
        private var sync: @Sendable (OpaquePointer) -> Int32 = { mdb_env_sync($0, 1) }

        /// Syncs with `sync` from the next interval on: a test's stand-in for a disk that fails.
        func syncing(with sync: @escaping @Sendable (OpaquePointer) -> Int32) {
            condition.lock()
            self.sync = sync
            condition.unlock()
        }

        /// Syncs done, for tests.
        var flushCount: Int {
            condition.lock()
            defer { condition.unlock() }
            return flushes
        }

        init(environment: OpaquePointer, every interval: Duration, gate: TransactionGate?) {
            self.environment = environment
            self.interval = interval
            if let gate {
                sync = { environment in
                    gate.enter()
                    defer { gate.leave() }
                    return mdb_env_sync(environment, 1)
                }
            }
            let thread = Thread { [self] in run() }
            thread.name = "DocStore flush"
            thread.start()
        }

        private func run() {
            defer { finished.signal() }
            let nanoseconds = max(interval.nanoseconds, 1_000_000)
            condition.lock()
            while !stopped {
                _ = condition.wait(until: MonotonicCondition.now() + nanoseconds)
                if stopped { break }
                let sync = self.sync
                condition.unlock()
                let rc = sync(environment)
                condition.lock()
                if rc != 0 && failure == nil { failure = rc }
                flushes += 1
            }
            condition.unlock()
        }

        /// The code of a sync that failed since the last call, if one did.
        func takeFailure() -> Int32? {
            condition.lock()
            defer { failure = nil; condition.unlock() }
            return failure
        }

        /// Stops the thread and waits for it: no sync runs after this returns.
        /// Stops the thread and waits for it to end; once stopped, does nothing.
        func stop() {
            condition.lock()
            let running = !stopped
            stopped = true
            condition.signal()
            condition.unlock()
            if running { finished.wait() }
        }
    }

    /// Syncs the flush thread has done, for tests.
    var flushesDone: Int { flusher.map { f in f.flushCount } ?? 0 }

    /// The flags the environment was opened with (`mdb_env_get_flags`), for tests.
    var openFlags: UInt32 {
        var flags: UInt32 = 0
        if let raw { _ = mdb_env_get_flags(raw, &flags) }
        return flags
    }

    // MARK: Transactions

    /// Runs `body` in a read-only transaction, which sees the last committed state.
    ///
    /// It may run on any thread, beside other reads and the writer. Transaction handles are kept between reads and
    /// renewed (`mdb_txn_reset`, `mdb_txn_renew`), so a read costs no allocation. A read that opened a database ends
    /// with `mdb_txn_commit` instead, whether `body` returned or threw: LMDB keeps a database handle opened in a
    /// read transaction only when that transaction commits (a reset or an abort closes it).
    /// ``LMDBTransaction/keptKeySpaces`` then says the handles are kept.
    func read<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        gate.enter()
        defer { gate.leave() }
        return try reading(alone: false, body)
    }

    /// A read with no other transaction of the process open: one that may open databases not yet open in the
    /// process.
    func readAlone<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        try gate.alone { try reading(alone: true, body) }
    }

    private func reading<R>(alone: Bool, _ body: (any StorageTransaction) throws -> R) throws -> R {
        try translatingErrors {
            var handle: OpaquePointer?
            var attempts = 0, waitsForASlot = 0
            while true {
                attempts += 1
                let env = try environment()
                var rc: Int32
                if let idle = idleReaders.withLock({ $0.popLast() })?.raw {
                    rc = mdb_txn_renew(idle)
                    if rc == MDB_SUCCESS { handle = idle } else { mdb_txn_abort(idle) }
                } else {
                    rc = mdb_txn_begin(env, nil, LMDBFlags.readOnly, &handle)
                }
                if rc == MDB_MAP_RESIZED && attempts < 4 {
                    // Another process grew the map: adopt its size, with no transaction of this process open: no
                    // read (the gate alone) and no write (its lock, held from before its transaction begins until it
                    // ends; remapping under a writer between its calls would pull its pages from under it).
                    // (The writer's lock first, then the gate alone, as a write and closing take them: a read that
                    // runs alone lets the gate go while it waits for the writer.)
                    if alone {
                        gate.endAlone()
                        writer.lock()
                        defer { writer.unlock() }
                        gate.beginAlone()
                        try setMapSize(0)
                    } else {
                        gate.leave()
                        defer { gate.enter() }
                        writer.lock()
                        defer { writer.unlock() }
                        try gate.alone { try setMapSize(0) }
                    }
                    continue
                }
                if rc == MDB_READERS_FULL && waitsForASlot < 5_000 {
                    // Every slot of LMDB's reader table is taken (``Configuration/maxReaders``, across processes):
                    // this process's idle reads give theirs back, and the read waits for one, up to five seconds,
                    // out of the gate (what passes it alone does not wait for a read that has not begun).
                    dropIdleReaders()
                    waitsForASlot += 1
                    attempts -= 1   // (a wait is no attempt at the map's size)
                    if !alone { gate.leave() }
                    usleep(1_000)
                    if !alone { gate.enter() }
                    continue
                }
                try lmdbCheck(rc)
                break
            }
            guard let handle else { throw LMDBError(code: EINVAL) }
            let txn = LMDBTransaction(raw: handle, isReadOnly: true, access: TransactionAccess(gate: gate, alone: alone))
            defer {
                txn.invalidate()
                if txn.opensKeySpaces {
                    // Frees the handle, as an abort would; a read-only commit has nothing to fail on.
                    txn.keptKeySpaces = mdb_txn_commit(handle) == MDB_SUCCESS
                    if txn.keptKeySpaces { txn.access.committed() }
                } else {
                    mdb_txn_reset(handle)
                    let idle = IdleReader(raw: handle)
                    let kept = idleReaders.withLock { readers in
                        guard readers.count < LMDBEnvironment.idleReadersKept else { return false }
                        readers.append(idle)
                        return true
                    }
                    if !kept { mdb_txn_abort(handle) }
                }
                txn.access.ended()
            }
            return try body(txn)
        }
    }

    /// Reads the file with ``LMDBFileCheck``, as `txn` (held open meanwhile) or a later commit has it.
    func checkStructure(holding txn: any StorageTransaction) -> (damage: [StorageDamage], pages: Int) {
        FileStorage.check(path: path, snapshot: txn.id)
    }

    /// Runs `body` in a write transaction, committed when it returns and aborted when it throws.
    ///
    /// If the map is full, the transaction is aborted, the map enlarged and `body` run again: `body` must have no
    /// effects outside the transaction that would be wrong to repeat. Past the maximum map size, the error is
    /// ``StorageError/full(maximum:)`` and nothing is written.
    ///
    /// A write that deletes a database runs alone (``TransactionGate``): it is aborted there, and run again once the
    /// reads in flight have ended, with new ones kept waiting until it ends.
    func write<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        try write(refusingSyncs: false, body)
    }

    func writeUnlessItSyncs<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        try write(refusingSyncs: true, body)
    }

    private func write<R>(refusingSyncs: Bool, _ body: (any StorageTransaction) throws -> R) throws -> R {
        try translatingErrors {
            writer.lock()
            defer { writer.unlock() }
            defer { noteWhetherTheNextCommitIsBrief() }
            var alone = false
            defer {
                // What a write that ran alone deleted is closed, whether it committed or not: the store forgets
                // its handles before any read begins.
                if alone { onKeySpacesClosed?(); gate.endAlone() }
            }
            while true {
                let env = try environment()
                try growIfNearlyFull(alone: alone)
                var handle: OpaquePointer?
                let rc = mdb_txn_begin(env, nil, 0, &handle)
                if rc == MDB_MAP_RESIZED {
                    try resize(0, alone: alone)
                    continue
                }
                try lmdbCheck(rc)
                guard let handle else { throw LMDBError(code: EINVAL) }
                let access = TransactionAccess(gate: gate, alone: alone)
                let txn = LMDBTransaction(raw: handle, isReadOnly: false, access: access)
                defer { access.ended() }
                let result: R
                do {
                    let txnid = txn.id
                    var unloggable: (any Error)?
                    if let log, try log.prepare(env, committed: txnid - 1, refusingSyncs: refusingSyncs) {
                        let capture = WriteCapture()
                        capture.onOverflow = {
                            // (Refused at the end: the transaction is aborted, and the log left as it is.)
                            if refusingSyncs { return unloggable = CommitWouldSync() }
                            do { try log.disown(env) } catch { unloggable = error }
                        }
                        txn.capture = capture
                    }
                    result = try body(txn)
                    if let unloggable { throw unloggable }
                    if access.needsToRunAlone { throw StorageError.failed("a database is deleted alone") }
                    if txn.metMapFull { throw LMDBError.mapFull }
                    if let interrupted = txn.interruptedChange { throw StorageError.interruptedChange(interrupted) }
                    // A logged write's record goes to disk first; changes too large for one are synced instead.
                    var record: Int?, syncs = false
                    if let log, let capture = txn.capture, capture.overflowed || !capture.bytes.isEmpty {
                        record = try log.append(capture, txnid: txnid, in: env, refusingSyncs: refusingSyncs)
                        syncs = record == nil
                    }
                    txn.invalidate()
                    // A change too large for a record commits as LMDB does at full durability: its pages synced
                    // before the meta page that names them.
                    if syncs { _ = mdb_env_set_flags(env, LMDBFlags.noSync, 0) }
                    let failing = failingCommit
                    failingCommit = nil
                    let rc = failing == nil ? mdb_txn_commit(handle) : { mdb_txn_abort(handle); return EIO }()
                    if syncs { _ = mdb_env_set_flags(env, LMDBFlags.noSync, 1) }
                    access.ended()   // (before a wait for the readers, some of which may wait for it)
                    failing?()
                    if rc != MDB_SUCCESS, let record, let log {
                        // (The failed commit let LMDB's writer lock go: a write begun takes it again.)
                        var again: OpaquePointer?
                        let begun = mdb_txn_begin(env, nil, 0, &again)
                        if begun == MDB_SUCCESS, let again {
                            // (Struck only if no commit came between: a writer of another process that took the lock
                            // meanwhile wrote its record over this one, or after it.)
                            if Int(truncatingIfNeeded: mdb_txn_id(again)) == txnid {
                                log.strike(record, txnid: txnid, in: env)
                            } else {
                                log.forget()
                            }
                            mdb_txn_abort(again)
                        } else {
                            // (Another process's commit grew the map: a commit came between, as above. Or LMDB refuses
                            // every write after a failed meta page, say: without the writer lock, the record is left
                            // as it is, since another process's writer may be writing its own over it. The next writer
                            // does; a crash of the machine before that would apply it, as it would a record whose
                            // process died before its commit.)
                            log.forget()
                        }
                    }
                    if rc == MDB_MAP_FULL { try grow(alone: alone); continue }
                    try lmdbCheck(rc)
                    if record != nil { log?.committed(txnid) }
                    hasCommitted = true
                    txn.keptKeySpaces = true
                    access.committed()
                    return result
                } catch {
                    if txn.isValid { txn.invalidate(); mdb_txn_abort(handle) }
                    access.ended()
                    // (A database deleted in the aborted transaction is closed all the same.)
                    if alone { onKeySpacesClosed?() }
                    if access.needsToRunAlone && !alone {
                        gate.beginAlone()
                        alone = true
                        continue
                    }
                    if txn.metMapFull || (error as? LMDBError) == .mapFull {
                        try grow(alone: alone)
                        continue
                    }
                    throw error
                }
            }
        }
    }

    // MARK: Copies

    /// Copies the file as of its last commit into a new file, or to an open descriptor. A compact copy to a new file
    /// is a rewrite (``rewrite(to:mode:besideOthers:bytesPerCommit:)``): full pages, none free. It falls back to
    /// LMDB's compacting copy when a database is not open in this process (another process made it since).
    ///
    /// The corresponding LMDB functions are `mdb_env_copy2` and `mdb_env_copyfd2` (with `MDB_CP_COMPACT` when
    /// `compact`).
    func copy(to destination: CopyDestination, compact: Bool) throws {
        if compact, case .path(let path, let mode) = destination {
            do {
                try rewrite(to: path, mode: mode, besideOthers: true)
                return
            } catch is NotOpenHere {
                unlink(path)
            }
        }
        switch destination {
        case .descriptor(let fd): try copy(toDescriptor: fd, compact: compact)
        case .path(let path, let mode):
            // (Made here, not by LMDB's `mdb_env_copy2`, which makes it as the umask has it: the copy is no one's to
            // read but whom `mode` names at any moment.)
            let fd = try FileStorage.createFile(path, mode: mode)
            do { try copy(toDescriptor: fd, compact: compact) } catch {
                Glibc.close(fd)
                throw error
            }
            guard Glibc.close(fd) == 0 else {
                throw StorageError.failed("cannot write \(path): \(String(cString: strerror(errno)))")
            }
        }
    }

    private func copy(toDescriptor fd: Int32, compact: Bool) throws {
        // A copy holds a read transaction: the environment stays open, and its map its size, until it ends.
        gate.enter()
        defer { gate.leave() }
        guard let env = raw else { throw StorageError.closed }
        let rc = mdb_env_copyfd2(env, fd, compact ? LMDBFlags.copyCompact : 0)
        if rc == MDB_MAP_RESIZED { throw StorageError.mapGrownElsewhere }
        try translatingErrors { try lmdbCheck(rc) }
    }

    /// Writes every database into a new file at `path`, key by key in key order with `MDB_APPEND` (`MDB_APPENDDUP`
    /// for a key's further values), then syncs it. Appending fills each page before it starts the next; keys put in
    /// random order leave pages between half and wholly full (about two thirds on average), and a copy
    /// (`mdb_env_copy2`) keeps them as they are. The new file has no free pages but the few its commits leave: it
    /// commits every `bytesPerCommit` of keys and values (64 MiB unless a test asks for less), so that LMDB holds no
    /// more than about that in memory.
    ///
    /// `path` must not exist: the file is created here (with `mode`, else as the umask has it), so that nothing
    /// already there is written into.
    ///
    /// Alone (``TransactionGate``), it opens the source's databases in its read transaction. Beside others (a
    /// backup, while readers and writers go on), it opens none: it takes the handles this process had open when
    /// its read transaction began, and throws ``NotOpenHere`` for a database it had not. Returns the id of the
    /// commit it copied.
    /// The corresponding LMDB functions are `mdb_dbi_flags` and `mdb_cursor_put`, on a new environment opened
    /// without a lock file (`MDB_NOLOCK`: no other process knows of it).
    @discardableResult
    func rewrite(to path: String, mode: mode_t?, besideOthers: Bool = false, bytesPerCommit: Int = 64 << 20) throws
        -> UInt64 {
        Glibc.close(try FileStorage.createFile(path, mode: mode))   // LMDB makes an empty file a new environment
        if besideOthers {
            gate.enter()
            defer { gate.leave() }
            // The handles open before the read transaction begins, each committed before it: valid in it. (A
            // database opened later is not in its snapshot; one deleted waits for the gate.)
            let open = gate.openNamesNow()
            return try translatingErrors {
                try rewriting(to: path, bytesPerCommit: bytesPerCommit, openingMain: false) { _, name in
                    guard let dbi = open[String(decoding: name.dropLast().map { UInt8(bitPattern: $0) },
                                                as: UTF8.self)] else { throw NotOpenHere() }
                    return dbi
                }
            }
        } else {
            return try gate.alone { try translatingErrors {
                try rewriting(to: path, bytesPerCommit: bytesPerCommit, openingMain: true) { reading, name in
                    var dbi: MDB_dbi = 0
                    let rc = name.withUnsafeBufferPointer { mdb_dbi_open(reading, $0.baseAddress, 0, &dbi) }
                    if rc == MDB_INCOMPATIBLE {
                        throw StorageError.notAStore("its main database holds a record that is not a database ("
                            + String(decoding: name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self) + ")")
                    }
                    try lmdbCheck(rc)
                    return dbi
                }
            } }
        }
    }

    /// A database a rewrite beside others finds that this process has not open.
    struct NotOpenHere: Error {}

    /// The rewrite in a read transaction of its own, `database` giving each named database's handle in it.
    ///
    /// The main database is opened (`mdb_dbi_open` with no name) only when `openingMain`, alone: that call sets
    /// its comparator in the table every transaction of the process reads. Beside others its handle is taken as
    /// it stands, valid in every transaction (LMDB's `MAIN_DBI`, 1), its comparator set when the store first
    /// opened its catalog.
    private func rewriting(to path: String, bytesPerCommit: Int, openingMain: Bool,
                           database: (OpaquePointer?, [CChar]) throws -> MDB_dbi) throws -> UInt64 {
        let (info, stat) = try infoAndStat()
        let source = try environment()
        var reading: OpaquePointer?
        let begun = mdb_txn_begin(source, nil, LMDBFlags.readOnly, &reading)
        if begun == MDB_MAP_RESIZED { throw StorageError.mapGrownElsewhere }
        try lmdbCheck(begun)
        defer { mdb_txn_abort(reading) }
        // The main database holds a record per named database, and nothing else in a store.
        var main: MDB_dbi = 1
        if openingMain { try lmdbCheck(mdb_dbi_open(reading, nil, 0, &main)) }
        let names = try Self.keys(of: main, in: reading)
        // The new file is no larger than its source but for the few pages its commits leave free, or pages of
        // another size (the system's, when the source came from another machine): room for twice the source, and a
        // megabyte more per database. (The file's meta page keeps the map's size, as the source's does.)
        let used = (info.me_last_pgno + 1) * Int(stat.ms_psize)
        let mapSize = max(info.me_mapsize, 2 * used + names.count << 20)
        let writer = try Rewriter(path: path, databases: names.count, mapSize: mapSize, bytesPerCommit: bytesPerCommit)
        for name in names {
            let from = try database(reading, name)
            var flags: UInt32 = 0
            try lmdbCheck(mdb_dbi_flags(reading, from, &flags))
            try writer.create(name, flags: flags)
            try writer.append(from, in: reading, duplicates: flags & LMDBFlags.duplicateSort != 0)
        }
        try writer.finish()
        return UInt64(mdb_txn_id(reading))
    }

    /// The keys of `dbi`, each with a NUL after it: the names of the databases, for the main one.
    private static func keys(of dbi: MDB_dbi, in txn: OpaquePointer?) throws -> [[CChar]] {
        var cursor: OpaquePointer?
        try lmdbCheck(mdb_cursor_open(txn, dbi, &cursor))
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val(), names: [[CChar]] = []
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        while rc == MDB_SUCCESS {
            let bytes = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)
            names.append(bytes.map { CChar(bitPattern: $0) } + [0])
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        if rc != MDB_NOTFOUND { try lmdbCheck(rc) }
        return names
    }

    /// The new environment of a rewrite, and its write transaction: entries appended to one database at a time,
    /// committed every `bytesPerCommit`. Appending goes on across commits, each key after the last one there.
    private final class Rewriter {
        private let bytesPerCommit: Int
        private let environment: OpaquePointer
        private var txn: OpaquePointer?
        private var cursor: OpaquePointer?
        private var dbi: MDB_dbi = 0
        private var pending = 0

        init(path: String, databases: Int, mapSize: Int, bytesPerCommit: Int) throws {
            self.bytesPerCommit = bytesPerCommit
            var env: OpaquePointer?
            try lmdbCheck(mdb_env_create(&env))
            guard let env else { throw LMDBError(code: ENOMEM) }
            environment = env
            do {
                try lmdbCheck(mdb_env_set_maxdbs(env, MDB_dbi(max(databases, 1))))
                try lmdbCheck(mdb_env_set_mapsize(env, mapSize))
                try lmdbCheck(mdb_env_open(env, path, LMDBFlags.noSubdirectory | LMDBFlags.noLock | LMDBFlags.noSync,
                                           0o600))
                try lmdbCheck(mdb_txn_begin(env, nil, 0, &txn))
            } catch {
                mdb_env_close(env)
                throw error
            }
        }

        deinit {
            if let cursor { mdb_cursor_close(cursor) }
            if let txn { mdb_txn_abort(txn) }
            mdb_env_close(environment)
        }

        /// Creates the database `name` (NUL-terminated) with `flags`, and makes it the one appended to.
        func create(_ name: [CChar], flags: UInt32) throws {
            if let cursor { mdb_cursor_close(cursor) }
            cursor = nil
            try name.withUnsafeBufferPointer {
                try lmdbCheck(mdb_dbi_open(txn, $0.baseAddress, flags | LMDBFlags.create, &dbi))
            }
            try lmdbCheck(mdb_cursor_open(txn, dbi, &cursor))
        }

        /// Puts every entry of `from` into the database being written, in order: each new key appended, each
        /// further value of a key appended to its values.
        func append(_ from: MDB_dbi, in reading: OpaquePointer?, duplicates: Bool) throws {
            var source: OpaquePointer?
            try lmdbCheck(mdb_cursor_open(reading, from, &source))
            defer { mdb_cursor_close(source) }
            var key = MDB_val(), value = MDB_val()
            var rc = mdb_cursor_get(source, &key, &value, MDB_FIRST)
            var flags = LMDBFlags.append
            while rc == MDB_SUCCESS {
                try lmdbCheck(mdb_cursor_put(cursor, &key, &value, flags))
                pending += key.mv_size + value.mv_size
                if pending >= bytesPerCommit { try commitAndGoOn() }
                guard duplicates else {
                    rc = mdb_cursor_get(source, &key, &value, MDB_NEXT)
                    continue
                }
                // The next value of this key, or else the first of the next key.
                rc = mdb_cursor_get(source, &key, &value, MDB_NEXT_DUP)
                flags = LMDBFlags.appendDuplicate
                if rc == MDB_NOTFOUND {
                    rc = mdb_cursor_get(source, &key, &value, MDB_NEXT_NODUP)
                    flags = LMDBFlags.append
                }
            }
            if rc != MDB_NOTFOUND { try lmdbCheck(rc) }
        }

        private func commitAndGoOn() throws {
            try commit()
            try lmdbCheck(mdb_txn_begin(environment, nil, 0, &txn))
            try lmdbCheck(mdb_cursor_open(txn, dbi, &cursor))
        }

        private func commit() throws {
            if let cursor { mdb_cursor_close(cursor) }
            cursor = nil
            let rc = mdb_txn_commit(txn)
            txn = nil
            pending = 0
            try lmdbCheck(rc)
        }

        /// Commits the last transaction and syncs the file.
        func finish() throws {
            try commit()
            try lmdbCheck(mdb_env_sync(environment, 1))
        }
    }

    /// The page size, the pages up to the last one written, the free pages (those the free list holds, which
    /// later commits reuse), and the map's size.
    ///
    /// The corresponding LMDB function is `mdb_cursor_get` on the free list (database 0).
    func pageUsage() throws -> (pageSize: Int, inUse: Int, free: Int, mapBytes: Int) {
        try translatingErrors {
            // (Inside a read: LMDB reads the environment's information from the map, which another thread may
            // otherwise be setting to another size.)
            try read { txn -> (pageSize: Int, inUse: Int, free: Int, mapBytes: Int) in
                let (info, stat) = try infoAndStat()
                guard let lmdb = txn as? LMDBTransaction else {
                    return (Int(stat.ms_psize), info.me_last_pgno + 1, 0, info.me_mapsize)
                }
                var pages = 0
                try lmdbCheck(LMDBEnvironment.walkFreeList(lmdb.raw, backward: false) { _, count in
                    pages += count
                    return true
                })
                return (Int(stat.ms_psize), info.me_last_pgno + 1, pages, info.me_mapsize)
            }
        }
    }

    /// Hands `visit` each record of LMDB's free list (database 0) in the read transaction `txn`, from the first or
    /// back from the last, until `visit` returns false: its key, the id of the commit that freed its pages, and its
    /// count of pages (a record is a list of page numbers whose first word is its length). Returns LMDB's code,
    /// `MDB_SUCCESS` once the walk is over.
    static func walkFreeList(_ txn: OpaquePointer, backward: Bool,
                             _ visit: (_ txnid: Int, _ pages: Int) -> Bool) -> Int32 {
        var cursor: OpaquePointer?
        let opened = mdb_cursor_open(txn, 0, &cursor)
        guard opened == MDB_SUCCESS else { return opened }
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val()
        var rc = mdb_cursor_get(cursor, &key, &value, backward ? MDB_LAST : MDB_FIRST)
        while rc == MDB_SUCCESS, key.mv_size == MemoryLayout<Int>.size {
            let pages = value.mv_size >= MemoryLayout<Int>.size ? max(0, value.mv_data.loadUnaligned(as: Int.self)) : 0
            guard visit(key.mv_data.loadUnaligned(as: Int.self), pages) else { return MDB_SUCCESS }
            rc = mdb_cursor_get(cursor, &key, &value, backward ? MDB_PREV : MDB_NEXT)
        }
        return rc == MDB_NOTFOUND ? MDB_SUCCESS : rc
    }

    // MARK: Map size

    /// The size of the map in bytes, and how much of it is in use. Only the writer calls it, holding its lock,
    /// which every change of the map's size holds.
    private func usage() throws -> (used: Int, mapSize: Int) {
        try translatingErrors {
            let (info, stat) = try infoAndStat()
            return ((info.me_last_pgno + 1) * Int(stat.ms_psize), info.me_mapsize)
        }
    }

    /// The environment's information (map size, last page) and its main database's statistics (page size).
    ///
    /// The corresponding LMDB functions are `mdb_env_info` and `mdb_env_stat`.
    private func infoAndStat() throws -> (MDB_envinfo, MDB_stat) {
        let env = try environment()
        var info = MDB_envinfo()
        try lmdbCheck(mdb_env_info(env, &info))
        var stat = MDB_stat()
        try lmdbCheck(mdb_env_stat(env, &stat))
        return (info, stat)
    }

    /// The id of the last committed write transaction, by any process: it changes with every commit.
    func lastCommittedTransaction() throws -> Int {
        // (LMDB reads it beside the newest meta page, in the map: not while the map is set to another size.)
        gate.enter()
        defer { gate.leave() }
        return try translatingErrors {
            let env = try environment()
            var info = MDB_envinfo()
            try lmdbCheck(mdb_env_info(env, &info))
            return info.me_last_txnid
        }
    }

    private func growIfNearlyFull(alone: Bool) throws {
        // (A file written in place grows with its map: not before this environment has committed or found the
        // catalog, so that the write with which a store's opening looks at a file refused as another program's
        // leaves it as it was.)
        guard !writesInPlace || hasCommitted || gate.openName(KeySpace.catalogName) != nil else { return }
        let (used, size) = try usage()
        if used > size / 10 * 8 && size < configuration.maximumMapSize {
            try resize(min(configuration.maximumMapSize, grown(size, using: used, full: false)), alone: alone)
        }
    }

    /// The size the map grows to from `size`: twice that, or, where the file is as long as the map
    /// (``writesInPlace``), half as much again as what is in use, before a write (`full` false); or half as much
    /// again as the map, for a write that found it full (what is in use is the last commit's: a large write may need
    /// far more, and runs again after each step).
    private func grown(_ size: Int, using used: Int, full: Bool) -> Int {
        guard writesInPlace else { return size * 2 }
        return LMDBEnvironment.inPlaceMapSize(for: full ? max(size, used) : used)
    }

    /// The map's size for `used` bytes in a file written in place: half as much again, at least 1 MiB more, in whole
    /// MiB. Growing by a half keeps the file near its data, and the map below 80% full after each step.
    static func inPlaceMapSize(for used: Int) -> Int {
        let size = used + max(used / 2, 1 << 20)
        return (size + (1 << 20) - 1) & ~((1 << 20) - 1)
    }

    /// The map's size for opening `path` to write in place: the file's length, or more if its last commit names
    /// pages past its end (pages taken and freed again in one commit are never written), or if it is new; and
    /// whether LMDB will then lengthen a file that has pages.
    private static func inPlaceMapSize(opening path: String) -> (size: Int, lengthens: Bool) {
        let length = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int ?? 0
        let committed = length == 0 ? 0 : LMDBFileCheck.run(path: path, metaOnly: true).committedSize ?? 0
        if length == 0 { return (inPlaceMapSize(for: 0), false) }
        return committed > length ? (inPlaceMapSize(for: committed), true) : (length, false)
    }

    /// Whether the file at `path` has the catalog's key space (``KeySpace/catalogName``): read with an environment
    /// of its own, read-only and closed again, before the file is opened to be written. (No other environment of
    /// the file is open in the process: closing this one lets go of no lock another holds.)
    private static func holdsCatalog(_ path: String, _ configuration: Configuration) -> Bool {
        let flags = LMDBFlags.noSubdirectory | LMDBFlags.noThreadLocalStorage | LMDBFlags.readOnly
        guard let env = try? open(path, flags: flags, mapSize: 0, configuration) else { return false }
        defer { mdb_env_close(env) }
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, LMDBFlags.readOnly, &txn) == MDB_SUCCESS, let txn else { return false }
        defer { mdb_txn_abort(txn) }
        var dbi: MDB_dbi = 0
        return mdb_dbi_open(txn, KeySpace.catalogName, 0, &dbi) == MDB_SUCCESS
    }

    /// Gives the bytes `start..<end` of the file of `env` their blocks (`posix_fallocate`), lengthening it to `end`
    /// if it is shorter; what they hold is kept. Returns whether it could: not on a full disk, say.
    private static func allocate(_ env: OpaquePointer, from start: Int, to end: Int) -> Bool {
        var fd: Int32 = -1
        guard end > start, mdb_env_get_fd(env, &fd) == MDB_SUCCESS else { return end <= start }
        return posix_fallocate(fd, off_t(start), off_t(end - start)) == 0
    }

    private func grow(alone: Bool) throws {
        // A reader left behind by a crashed process pins old pages: free its slot before asking for more room.
        if let env = raw {
            var dead: Int32 = 0
            try lmdbCheck(mdb_reader_check(env, &dead))
        }
        let (used, size) = try usage()
        guard size < configuration.maximumMapSize else {
            throw StorageError.full(maximum: configuration.maximumMapSize)
        }
        try resize(min(configuration.maximumMapSize, grown(size, using: used, full: true)), alone: alone)
    }

    /// Sets the map's size with no transaction of this process open, as LMDB requires: alone, or already so.
    private func resize(_ size: Int, alone: Bool) throws {
        if alone { try setMapSize(size) } else { try gate.alone { try setMapSize(size) } }
    }

    /// Called alone (``TransactionGate``). A size of 0 adopts the size another process grew the map to. A map
    /// written in place first gets the blocks it grows by: a disk with no room for them fails the write, where a
    /// page written into a hole would stop the process.
    private func setMapSize(_ size: Int) throws {
        let env = try environment()
        dropIdleReaders()
        if writesInPlace, size > 0 {
            var info = MDB_envinfo()
            try lmdbCheck(mdb_env_info(env, &info))
            guard LMDBEnvironment.allocate(env, from: info.me_mapsize, to: size) else {
                throw StorageError.failed("the disk has no room for the file to grow to \(size >> 20) MiB "
                    + "(\(String(cString: strerror(ENOSPC))))")
            }
        }
        try lmdbCheck(mdb_env_set_mapsize(env, size))
        if size > 0 { mapGrowths += 1 }
    }

    /// Runs `body`, turning LMDB's codes into ``StorageError``s: nothing above this folder sees an ``LMDBError``.
    private func translatingErrors<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as LMDBError { throw error.storageError }
    }
}

extension FileStorage.Configuration {
    /// What a commit syncs, as LMDB's flags: both the data and the meta page (none of these flags), the data only
    /// (`MDB_NOMETASYNC`), or nothing (`MDB_NOSYNC`).
    var syncFlags: UInt32 {
        switch sync {
        case .full: 0
        case .dataOnly: LMDBFlags.noMetaSync
        case .none: LMDBFlags.noSync
        }
    }
}

/// The file engine of ``FileStorage``: LMDB.
extension FileStorage {
    /// Whether the file at `path` has a valid meta page: it is a store's file (an empty one may have no other page).
    static func holdsMetaPage(_ path: String) -> Bool {
        LMDBFileCheck.run(path: path, metaOnly: true).newestCommit != nil
    }

    /// Whether the file at `path` is the lock file of a store this process has open: a file the process must not
    /// open to read, since closing it would let go of the store's locks (``LMDBEnvironment/isOpenLockFile(_:)``).
    static func isOpenLockFile(_ path: String) -> Bool { LMDBEnvironment.isOpenLockFile(path) }

    /// Opens (or creates) the file at `path`.
    static func open(path: String, configuration: Configuration) throws -> any FileStorageEngine {
        try LMDBEnvironment(path: path, configuration: configuration)
    }

    /// Whether the file at `path` has a write log an opening would apply first (``WriteLog/needsApplying(path:)``).
    static func writeLogNeedsApplying(path: String) -> Bool { WriteLog.needsApplying(path: path) }

    /// Applies the write log of the file at `path` if the machine stopped before its last commits reached the disk:
    /// what an opening does first, and what must come before any other look at the file's pages.
    static func recover(path: String, configuration: Configuration) throws {
        do { try LMDBEnvironment.recover(path: path, configuration: configuration) } catch let error as LMDBError {
            throw error.storageError
        }
    }

    /// Replaces the file at `path`, which no process may have open, by a rewrite of itself (full pages, none free:
    /// ``LMDBEnvironment/rewrite(to:mode:besideOthers:bytesPerCommit:)``). The new file is written beside it (`PATH.compacting`),
    /// synced, and renamed over it, so that the file is whole at every moment, the old one until the rename and the
    /// new one after. A file left by a compaction cut short is removed first. `prepare` runs first on the file,
    /// held to itself. Returns the file's sizes before and after.
    ///
    /// Nothing written meanwhile is lost. The file stays this process's own throughout: an opening of it here is
    /// refused. Another process may open it while the copy is made; at the end, the lock file is held alone (an
    /// opening elsewhere then waits for it), and the file is replaced only if no other process has it open and no
    /// commit came after the one copied: otherwise the rewrite is thrown away (``StorageError/openElsewhere``,
    /// ``StorageError/writtenMeanwhile``). The lock file is then made anew for the new file, by opening it, before
    /// any waiting opening goes on. (It is not deleted: an opening that waits holds it open, and would go on with a
    /// lock file no later opening shares.) A path that is a symbolic link keeps it: its target is replaced.
    static func compact(path: String, configuration: Configuration, bytesPerCommit: Int = 64 << 20,
                        prepare: (any StorageEngine) throws -> Void = { _ in },
                        beforeReplacing: () throws -> Void = {}) throws -> (before: Int, after: Int) {
        let lockPath = path + "-lock"
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let temporary = target + ".compacting"
        // (Refused before the lock file is looked at: a look opens and closes it, which would let go of this
        // process's locks on it, were the file open here.)
        if let file = fileID(of: path), LMDBEnvironment.isOpen(file) { throw StorageError.alreadyOpenInProcess }
        if LMDBEnvironment.isOpenLockFile(path) {
            throw StorageError.notAStore("it is the lock file of a store this process has open")
        }
        guard LMDBEnvironment.lockFileIsUnused(lockPath) else { throw StorageError.openElsewhere }
        unlink(temporary)
        var info = stat()
        guard stat(target, &info) == 0 else { throw LMDBError(code: errno).storageError }
        let before = Int(info.st_size)
        let environment = try LMDBEnvironment(path: path, configuration: configuration)
        let releaseFile = environment.reserveFile()
        defer { releaseFile() }
        let copied: UInt64
        do {
            try prepare(environment)
            // The new file gets the store's permissions.
            copied = try environment.rewrite(to: temporary, mode: info.st_mode & 0o7777, bytesPerCommit: bytesPerCommit)
            environment.close()
            try DurableFile.sync(temporary)
            try beforeReplacing()
        } catch {
            environment.close()
            unlink(temporary)
            throw error
        }
        // Held alone from here on (another process's opening waits for it), if no other process has the file
        // open: one that had would go on with the old one.
        let held: LMDBEnvironment.ExclusiveLock
        do { held = try LMDBEnvironment.ExclusiveLock(lockPath) } catch {
            unlink(temporary)
            throw error
        }
        defer { held.release() }
        guard LMDBFileCheck.run(path: target, metaOnly: true).newestCommit == copied else {
            unlink(temporary)
            throw StorageError.writtenMeanwhile
        }
        // The file is synced (its environment closed) and no other process has it: no record of the log is needed,
        // and none may outlive the file.
        do { try WriteLog.clear(beside: path) } catch {
            unlink(temporary)
            throw error
        }
        guard rename(temporary, target) == 0 else {
            let message = String(cString: strerror(errno))
            unlink(temporary)
            throw StorageError.failed("cannot rename the compacted file over \(path): \(message)")
        }
        // The rename made durable while no other process can have the file open and commit to it.
        try DurableFile.syncFolder(of: target)
        // The lock file describes the old file's readers and commits. Opened alone, LMDB makes it anew for the new
        // file (this process's lock, held, lets it); its opening shares the lock, and its closing lets it go, and an
        // opening that waited goes on. (Should that opening fail, the next opening that finds the lock file alone
        // makes it anew.)
        try? LMDBEnvironment(path: path, configuration: configuration).close()
        return (before, fileSize(target))
    }

    private static func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}


/// The `flock` an opening of a store's file holds on the data file until it closes: shared by every opening, or
/// alone by an exclusive one (``FileStorage/Configuration/exclusive``). Another process's opening that cannot take
/// its own is refused after a short wait rather than made to wait for the store to close. LMDB locks only the lock
/// file, never the data file; a `flock` belongs to its open file description, so that no other descriptor of the
/// file the process closes lets it go (as closing one would let go of an `fcntl` lock).
final class OpeningLock: Sendable {
    private let descriptor: Int32
    private let path: String
    /// Whether the opening made the file (LMDB would have).
    private let made: Bool

    /// Throws ``StorageError/openExclusivelyElsewhere`` or ``StorageError/openElsewhere`` when another process's
    /// lock is in the way. A file that does not exist yet is made (`creating`), as LMDB would. `nil` for a shared
    /// opening where the file cannot be opened (LMDB's own opening then says why) or its file system cannot lock
    /// it: an exclusive opening throws then.
    init?(_ path: String, exclusive: Bool, creating: Bool) throws {
        // (Not blocking: a path that names a FIFO opens at once, and LMDB then refuses it.)
        let flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK
        var fd = Glibc.open(path, flags)
        var made = false
        if fd < 0 && errno == ENOENT && creating {
            fd = Glibc.open(path, flags | O_CREAT | O_EXCL, 0o644)
            made = fd >= 0
        }
        guard fd >= 0 else {
            if exclusive { throw LMDBError(code: errno) }
            return nil
        }
        // A lock in the way may be only a moment's: a process that another process (or this one) starts shares its
        // descriptors until it runs its program, and with them the open file whose lock is being let go. So a lock
        // refused is asked for again for up to two seconds before the opening is refused.
        let deadline = ContinuousClock.now + .seconds(2)
        while flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            if code == EWOULDBLOCK && ContinuousClock.now < deadline {
                usleep(5_000)
                continue
            }
            Glibc.close(fd)
            if code == EWOULDBLOCK {
                // (A shared lock is refused only by an exclusive one.)
                throw exclusive ? StorageError.openElsewhere : StorageError.openExclusivelyElsewhere
            }
            guard exclusive else { return nil }
            throw StorageError.failed("the file cannot be locked (flock: \(String(cString: strerror(code)))), which "
                + "an exclusive opening needs")
        }
        (descriptor, self.path, self.made) = (fd, path, made)
    }

    deinit { Glibc.close(descriptor) }

    /// Whether the file locked is the one `env` has open: the same device and inode.
    func locks(_ env: OpaquePointer) -> Bool {
        var fd: Int32 = -1
        var mine = stat(), theirs = stat()
        guard mdb_env_get_fd(env, &fd) == MDB_SUCCESS, fstat(descriptor, &mine) == 0, fstat(fd, &theirs) == 0 else {
            return false
        }
        return mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino
    }

    /// After an opening that failed: the file it made is removed again if it is still empty.
    func removeFileIfMadeEmpty() {
        var status = stat()
        if made, fstat(descriptor, &status) == 0, status.st_size == 0 { unlink(path) }
    }
}
