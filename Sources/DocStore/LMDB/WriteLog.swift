import CLMDB
import Foundation
import Glibc

/// A store's write log (`PATH-log`): how a commit at full durability waits for one small write instead of LMDB's two
/// syncs of the pages it changed.
///
/// A logged commit is made with `MDB_NOSYNC`, after a record of its changes (each put, delete and drop, with the
/// names of the databases) is written to the log with `O_DSYNC`. Its pages reach the disk later, at a checkpoint
/// (`mdb_env_sync`). Until then, a crash of the machine may leave any mix of them on disk, and a newer meta page may
/// point at pages that never arrived. So the log keeps what recovery needs to start again from the last checkpoint:
///
/// - **A base that stays whole.** A checkpoint syncs the file and copies its two meta pages into the log's header,
///   with the id of the commit they name (the base). A read transaction of the log's owner stays open at the base,
///   so that LMDB reuses none of its pages (``pin``). A crash of the machine then leaves the base's pages as they
///   were synced, whatever else reached the disk.
/// - **One checkpoint, every process's records.** The environment whose checkpoint the header names (its owner)
///   holds the pin. Any writer of any process appends its records under that checkpoint, after the last record,
///   while LMDB's writer lock orders the commits: it first finds where the records end (they must reach the
///   file's last commit), and, unless it holds the pin itself, that the owner's process is alive with its pin
///   (``baseIsHeld(_:_:owner:)``). Otherwise it syncs the file and makes a checkpoint of its own. A writer that does not
///   log (`.normal`, `.off`, a change too large for a record) syncs the file and clears the owner first. A commit
///   that is not logged is thus always made with the log cleared, and no record is ever replayed over a state that
///   lacks a commit.
/// - **When to recover.** While the machine stays up, the page cache holds every commit, whoever wrote it and
///   whatever process died. Recovery runs only when the boot id recorded in the header is not the machine's: it
///   writes the base's meta pages back, opens the file, applies the records in one transaction, syncs, and clears the
///   log. It holds the log's `flock` meanwhile, so that two processes opening after a reboot do not both do it; a
///   read-only opening that finds a log to replay is refused.
/// - **Records that never committed.** Each record carries the checkpoint's random epoch and the id of the commit it
///   makes; recovery applies records of the header's epoch with ids that follow on from the base, up to the first
///   that does not. A record whose commit then fails is struck out (its first word zeroed, durably). A record
///   written by a process that died before its commit is written over by the next writer, or, if the machine
///   crashes first, applied: a commit whose record is durable is the log's commit, as in any write-ahead log.
/// - **The file replaced.** The header names the data file's inode (recovery compares nothing else: a device's
///   number may change across a reboot); a compaction clears the log before it renames its copy over the file.
/// - **Headers that tear.** The log is two slots (``slotSize``), each a header and records; a checkpoint writes its
///   header, with the next generation, and its first record into the slot the current header is not in.
final class WriteLog {
    /// The data file's path; the log is `path + "-log"`.
    let path: String
    /// Whether this environment's commits are logged (full durability); otherwise it only clears the log's owner
    /// before its commits.
    let logs: Bool
    /// Written with `O_DSYNC`: a write returns once it is on disk.
    private var descriptor: Int32 { opened.descriptor }
    let opened: Opened
    private let pageSize: Int
    private let file: (device: UInt64, inode: UInt64)
    /// This environment's name as the log's owner: its process's id, then a random number.
    private let token = UInt64(UInt32(truncatingIfNeeded: getpid())) << 32 | UInt64(UInt32.random(in: 0...UInt32.max))
    /// Set while this environment appends under the header's checkpoint (its own, or another's it joined): the
    /// checkpoint's epoch and base, the last commit logged, and where the next record goes.
    private var epoch: UInt64 = 0
    private var base = 0
    private var owner: UInt64 = 0
    private var lastLogged = 0
    private var end = 0
    /// A read transaction at the base of this environment's last checkpoint (`pinnedAt`): LMDB reuses no page the
    /// base's trees hold while it lasts.
    private var pin: OpaquePointer?
    private var pinnedAt = -1
    /// The last commit this environment's sync found (`-1`: none): a checkpoint at that commit needs no sync.
    private var durableAt = -1
    /// The file's last page at the checkpoint (as its meta page in the header says, for another's): LMDB reuses none
    /// of the pages freed since, so the file grows by what the commits since write, until the next checkpoint.
    private var lastPageAtCheckpoint = 0
    /// The log is two slots, each a header and the records after it. A checkpoint writes its header into the slot
    /// the current header is not in, with the next generation, together with its first record, in one write: torn,
    /// it leaves the other slot as it was; whole, its generation makes it the current one.
    static let slotSize = 2 << 20
    /// The slot the current header is in (this environment's, once it has written one), and its generation.
    private var slot = 0
    private var generation: UInt64 = 0
    /// The header of this environment's checkpoint, written with its first record.
    private var pendingHeader: [UInt8]?
    /// The most bytes of records a slot holds (tests take fewer); a record that would go past them makes a
    /// checkpoint first.
    var capacity: Int
    /// How far the file may grow past its last page at the checkpoint (in pages) before the next write makes
    /// another: what bounds both the growth and the pages the next checkpoint's sync writes.
    var growthBetweenCheckpoints = 1_024
    /// How many pages the commits since the checkpoint may free before the next write makes another, or a quarter
    /// of the file's pages at the checkpoint if that is more. LMDB reuses none of them while the base is pinned: the
    /// commits take the pages they write from those free at the checkpoint, then from the file's end. The growth
    /// alone did not bound them: at each checkpoint the free pages grew by up to the growth allowed, and the time to
    /// the next with them (48,000 single inserts took a store of 100,000 people from 43 to 252 MiB, against 85 with
    /// this bound). It is larger than the growth's bound, since a checkpoint syncs every page the commits since
    /// wrote, all over the file, and costs more the sooner it comes: at 1,024 pages, single inserts took twice as
    /// long; at 8,192 alone, 15-30% longer in a store of 1,000,000 people; with the quarter, 6-13%.
    var freedBetweenCheckpoints = 8_192
    /// The pages the commits after the base, up to `heldThrough`, freed: LMDB's free list keeps them under the id
    /// of the commit that freed them.
    private var heldPages = 0
    private var heldThrough = 0
    /// A reset read transaction through which a writer reads LMDB's free list (``countHeldPages(_:through:)``).
    private var freeListReader: OpaquePointer?
    /// When this environment last logged a commit: an owner idle for a while lets the log go (``releaseIfIdle``).
    private var lastWrite = ContinuousClock.now
    /// The largest record: a change larger than this is committed with a sync instead.
    static let largestRecord = 1 << 20

    /// The machine's boot id: what tells a log written before a crash of the machine from one whose commits the
    /// page cache still holds. (Tests write another into a log's header.)
    static let bootID: [UInt8] = {
        let path = "/proc/sys/kernel/random/boot_id"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8.prefix(Header.bootIDSize))
    }()

    private init(path: String, logs: Bool, descriptor: Int32, pageSize: Int, file: (UInt64, UInt64)) {
        self.path = path
        self.logs = logs
        self.opened = Opened(descriptor: descriptor)
        self.pageSize = pageSize
        self.file = file
        capacity = WriteLog.slotSize - Header.size(pageSize: pageSize)
    }

    /// The log's open file, closed when the last holder lets it go: what any thread may read the headers through
    /// (``generation``).
    final class Opened: Sendable {
        let descriptor: Int32
        init(descriptor: Int32) { self.descriptor = descriptor }
        deinit { Glibc.close(descriptor) }

        /// The current header's generation, or `nil` when the headers cannot be read.
        var generation: UInt64? { try? WriteLog.currentHead(descriptor).generation }
    }

    /// The log of a writable environment, made if missing. Where the machine has no boot id, a log that is only
    /// cleared before commits (`logs` false: they then sync as LMDB does). An environment that does not log opens
    /// only a log that exists.
    static func open(beside path: String, environment env: OpaquePointer, logs requested: Bool) throws -> WriteLog? {
        let logs = requested && !bootID.isEmpty
        var stat = MDB_stat(), descriptor: Int32 = -1, info = Glibc.stat()
        try lmdbCheck(mdb_env_stat(env, &stat))
        try lmdbCheck(mdb_env_get_fd(env, &descriptor))
        guard fstat(descriptor, &info) == 0 else { throw LMDBError(code: errno) }
        let logPath = path + "-log"
        let fd = Glibc.open(logPath, O_RDWR | O_DSYNC | O_CLOEXEC | (logs ? O_CREAT : 0), 0o644)
        guard fd >= 0 else {
            if errno == ENOENT && !logs { return nil }
            throw StorageError.failed("cannot open the write log \(logPath): \(String(cString: strerror(errno)))")
        }
        let log = WriteLog(path: path, logs: logs, descriptor: fd, pageSize: Int(stat.ms_psize),
                           file: (UInt64(info.st_dev), UInt64(info.st_ino)))
        var size = Glibc.stat()
        guard fstat(fd, &size) == 0 else { throw LMDBError(code: errno) }
        if Int(size.st_size) < 2 * slotSize {
            // Made here, under the log's lock: zeros (so that no record's write changes the file's block map), a
            // header of no owner; the file's name made durable.
            try log.locked(LOCK_EX) {
                guard fstat(fd, &size) == 0 else { throw LMDBError(code: errno) }
                guard Int(size.st_size) < 2 * slotSize else { return }
                let zeros = [UInt8](repeating: 0, count: 2 * slotSize - Int(size.st_size))
                try log.write(zeros[...], at: Int(size.st_size))
                if size.st_size == 0 { try log.writeHeader(owner: 0, epoch: 0, base: 0, metas: nil) }
                try DurableFile.syncFolder(of: logPath)
            }
        }
        return log
    }

    // MARK: Writing

    /// Before a write's changes, with LMDB's writer lock held (its transaction begun) and `committed` the id of the
    /// file's last commit: makes the log ready for the write. Returns whether the write is to be logged.
    ///
    /// A logged write goes on after the last record of the header's checkpoint, whichever environment made it,
    /// when those records reach `committed` (``goesOn(under:_:committed:)``); otherwise it syncs the file and makes a
    /// checkpoint of its own. A write that is not logged clears the log's owner first (after a sync), unless it has
    /// none.
    ///
    /// `refusingSyncs`: throws ``CommitWouldSync`` rather than sync the file.
    func prepare(_ env: OpaquePointer, committed: Int, refusingSyncs: Bool) throws -> Bool {
        let head = try currentHead()
        if logs {
            if try goesOn(under: head, env, committed: committed) { return true }
            try checkpoint(env, committed: committed, refusingSyncs: refusingSyncs)
            return true
        }
        if head.owner != 0 {
            if refusingSyncs { throw CommitWouldSync() }
            try disown(env)
        }
        return false
    }

    /// Whether the next record can go on under the checkpoint the current header (`head`) names, this environment's
    /// or another's: the records after it reach the file's last commit (`committed`), and the commits since have not
    /// grown the file by ``growthBetweenCheckpoints`` nor freed ``freedBetweenCheckpoints`` pages (or a quarter of
    /// the file, if that is more). Sets where the record goes.
    private func goesOn(under head: Head, _ env: OpaquePointer, committed: Int) throws -> Bool {
        guard head.owner != 0 else {
            forget(head)
            return false
        }
        if head.epoch != epoch || pendingHeader != nil {
            forget(head)
            // The header as a whole, which recovery starts from: one whose meta pages are torn (its writer killed
            // while it wrote them) is not joined.
            guard let header = try WriteLog.header(descriptor, slot: head.slot), header.epoch == head.epoch,
                  header.generation == head.generation, header.inode == file.inode else { return false }
            (slot, generation, epoch, base, owner) = (head.slot, head.generation, head.epoch, Int(header.base), head.owner)
            (lastLogged, end) = (base, slot * WriteLog.slotSize + Header.size(pageSize: pageSize))
            lastPageAtCheckpoint = try header.lastPage(of: header.base) ?? lastPage(env)
            (heldPages, heldThrough) = (0, base)
        }
        if committed != lastLogged {
            // Other processes' commits since this environment's last record: their records come first.
            guard committed > lastLogged, let found = try endOfRecords(from: end, after: lastLogged, to: committed)
            else {
                forget(head)
                return false
            }
            (end, lastLogged) = (found, committed)
        }
        countHeldPages(env, through: committed)
        return try lastPage(env) - lastPageAtCheckpoint < growthBetweenCheckpoints
            && heldPages < heldBound
    }

    /// How many freed pages make a checkpoint (``freedBetweenCheckpoints``).
    private var heldBound: Int { max(freedBetweenCheckpoints, lastPageAtCheckpoint / 4) }

    /// Adds to ``heldPages`` what the commits after `heldThrough`, up to `committed` (the file's last commit: the
    /// caller holds LMDB's writer lock), freed: the records of LMDB's free list under their ids, read back from the
    /// last, so that only the records of the commits since the last count are read. Should the free list not be read (LMDB's table of readers full,
    /// say), the count is taken as reached: each write makes a checkpoint, which frees them all, until it can be
    /// read again, rather than fail.
    private func countHeldPages(_ env: OpaquePointer, through committed: Int) {
        guard committed > heldThrough else { return }
        let reader: OpaquePointer
        if let kept = freeListReader, mdb_txn_renew(kept) == MDB_SUCCESS {
            reader = kept
        } else {
            endFreeListReader()
            var handle: OpaquePointer?
            guard mdb_txn_begin(env, nil, LMDBFlags.readOnly, &handle) == MDB_SUCCESS, let handle else {
                return heldPages = heldBound
            }
            (reader, freeListReader) = (handle, handle)
        }
        defer { mdb_txn_reset(reader) }
        // (The reader's snapshot is the commit `committed`: the caller holds LMDB's writer lock.)
        var freed = 0
        let code = LMDBEnvironment.walkFreeList(reader, backward: true) { txnid, pages in
            guard txnid > heldThrough else { return false }
            freed += pages
            return true
        }
        guard code == MDB_SUCCESS else { return heldPages = heldBound }
        heldPages += freed
        heldThrough = committed
    }

    /// Where the records from `offset` on (the first of which makes the commit `after + 1`) end, once they reach
    /// the commit `committed`; `nil` when they do not reach it (one is missing, struck out or torn).
    private func endOfRecords(from offset: Int, after: Int, to committed: Int) throws -> Int? {
        let slotEnd = (slot + 1) * WriteLog.slotSize
        var wanted = 16 << 10
        while true {
            let count = min(wanted, slotEnd - offset)
            let bytes = try WriteLog.read(descriptor, count, at: offset)
            var reached: (next: Int, txnid: UInt64)?
            let cutShort = bytes.withUnsafeBytes { all in
                Record.walk(all, from: 0, epoch: epoch, after: UInt64(after)) { txnid, _, next in
                    reached = (next, txnid)
                    return txnid < UInt64(committed)
                }
            }
            if let reached, reached.txnid == UInt64(committed) { return offset + reached.next }
            // (Stopped by the end of what was read rather than by a record that does not follow: read further.)
            guard cutShort, bytes.count == count, count < slotEnd - offset else { return nil }
            wanted *= 4
        }
    }

    /// Whether the base of the checkpoint this environment appends under is held: by its own pin, or by the pin
    /// of the owner's process (``baseIsHeld(_:_:owner:)``).
    private func holdsBase(_ env: OpaquePointer) -> Bool {
        owner == token ? pin != nil && pinnedAt == base : WriteLog.baseIsHeld(env, base, owner: owner)
    }

    /// Whether the process of the checkpoint's owner (`owner`, whose first 32 bits are its process's id) is alive
    /// and has a reader slot at the commit `base`, its pin (LMDB's reader table is shared by every process that has
    /// the file open): while it does, LMDB reuses none of the base's pages. Such a slot can no longer appear once a
    /// later commit is made, so one found after a write's changes held the base throughout them. (A dead process's
    /// slot stays until LMDB clears it, at an opening or when a writer finds its holder dead: it is not counted.)
    static func baseIsHeld(_ env: OpaquePointer, _ base: Int, owner: UInt64) -> Bool {
        let pid = pid_t(truncatingIfNeeded: owner >> 32)
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        var found = (pid: pid, base: UInt64(base), held: false)
        _ = withUnsafeMutablePointer(to: &found) { context in
            mdb_reader_list(env, { message, context in
                // "       PID THREAD TXNID\n", TXNID "-" for a slot between transactions.
                guard let message, let context else { return 0 }
                let found = context.assumingMemoryBound(to: (pid: pid_t, base: UInt64, held: Bool).self)
                let words = String(cString: message).split(separator: " ", omittingEmptySubsequences: true)
                if words.count == 3, pid_t(words[0]) == found.pointee.pid,
                   let txnid = UInt64(words[2].trimmingCharacters(in: .whitespacesAndNewlines)),
                   txnid == found.pointee.base {
                    found.pointee.held = true
                }
                return 0
            }, context)
        }
        return found.held
    }

    /// Writes the record of the commit `txnid` (`changes`), before LMDB's commit. Returns where it went, for
    /// ``strike(_:)`` should the commit fail; `nil` when the changes are too large for a record, in which case the
    /// log has been cleared and the commit must be synced.
    func append(_ changes: WriteCapture, txnid: Int, in env: OpaquePointer, refusingSyncs: Bool) throws -> Int? {
        guard !changes.overflowed else {
            // (Cleared when the changes outgrew a record, unless that failed.)
            if try currentHead().owner != 0 { try disown(env) }
            return nil
        }
        // (A record that would not fit makes a checkpoint first: it then carries the new epoch. So does a base no
        // longer held, looked at now that the write's pages are chosen: its owner ended.)
        let records = slot * WriteLog.slotSize + Header.size(pageSize: pageSize)
        if end + Record.headerSize + changes.bytes.count > records + capacity
            || (pendingHeader == nil && !holdsBase(env)) {
            try checkpoint(env, committed: txnid - 1, refusingSyncs: refusingSyncs)
        }
        let record = Record.encode(changes.bytes, epoch: epoch, txnid: txnid)
        let at = end
        if var header = pendingHeader {
            // The pin moves to the base (the last commit still: this write holds LMDB's writer lock) only now, just
            // before the header names it: until then the header on disk names the last checkpoint, whose base the
            // pin must hold for as long as a writer may append under it.
            try repin(env)
            // The checkpoint's header and its first record, in one write.
            header.append(contentsOf: repeatElement(0, count: at - slot * WriteLog.slotSize - header.count))
            header.append(contentsOf: record)
            try write(header[...], at: slot * WriteLog.slotSize)
            pendingHeader = nil
        } else {
            try write(record[...], at: at)
        }
        end += record.count
        return at
    }

    /// After the commit of the record at `offset` (the commit `txnid`).
    func committed(_ txnid: Int) {
        lastLogged = txnid
        lastWrite = .now
    }

    /// The generation of the header under which the next commit would wait for one write of the log and for no
    /// sync of the file, if no other writer comes first (a checkpoint changes the header): this environment appends
    /// under the header's checkpoint and logged the file's last commit, the file has not grown nor have pages been
    /// freed enough since the checkpoint to make another (as last counted), and the slot has room for a record of
    /// 64 KiB. `nil` otherwise. (A guess all the same: a larger record, or a writer of another process that does not
    /// log, still makes the commit sync, which ``LMDBEnvironment/writeUnlessItSyncs(_:)`` refuses.)
    func briefCommitGeneration(_ env: OpaquePointer) -> UInt64? {
        guard logs, epoch != 0, pendingHeader == nil else { return nil }
        var info = MDB_envinfo()
        guard mdb_env_info(env, &info) == MDB_SUCCESS else { return nil }
        let records = slot * WriteLog.slotSize + Header.size(pageSize: pageSize)
        let brief = info.me_last_txnid == lastLogged
            && info.me_last_pgno - lastPageAtCheckpoint < growthBetweenCheckpoints
            && heldPages < heldBound
            && end + (64 << 10) < records + capacity
        return brief ? generation : nil
    }

    /// Strikes out the record at `offset`, of the commit `txnid`, which failed: durably, so that no recovery applies
    /// it. Should that write fail too, the log is cleared instead (or, failing that, no longer counted as this
    /// environment's, so that the next write makes a checkpoint).
    /// The caller holds LMDB's writer lock again (a write begun for it): the commit that failed let it go, and no
    /// other commit came before it took it back (another process's writer would have written over the record, or
    /// after it).
    func strike(_ offset: Int, txnid: Int, in env: OpaquePointer) {
        end = offset
        do {
            let head = try currentHead()
            // (Another checkpoint meanwhile: the record is of an epoch no longer current, and its slot may be
            // another's.)
            guard head.owner != 0, head.epoch == epoch else { return forget(head) }
            let bytes = try WriteLog.read(descriptor, Record.headerSize, at: offset)
            let found = bytes.withUnsafeBytes { Record.header(in: $0, at: 0) }
            guard let found, found.epoch == epoch, found.txnid == UInt64(txnid) else { return forget(head) }
            try write([0, 0, 0, 0][...], at: offset)
        } catch {
            epoch = 0
            try? disown(env)
        }
    }

    /// How long an owner that logs nothing keeps the log.
    var idleAfter = Duration.seconds(1)

    /// Whether this environment made the checkpoint it appends under, or holds a pin, and has logged nothing for
    /// ``idleAfter``: it then lets the log go (``release(_:)``), so that an idle process holds no pages from reuse
    /// and leaves nothing to recover. (An environment that only joined another's checkpoint has nothing to let go.)
    var isIdleOwner: Bool {
        ((epoch != 0 && owner == token) || pin != nil) && lastWrite.duration(to: .now) >= idleAfter
    }

    /// Syncs the file and makes its last commit the log's base, owned by this environment.
    private func checkpoint(_ env: OpaquePointer, committed: Int, refusingSyncs: Bool) throws {
        if refusingSyncs && committed != durableAt { throw CommitWouldSync() }
        // Not this environment's until the header says so: a failure on the way leaves the next write to begin
        // again here.
        epoch = 0
        pendingHeader = nil
        // (An owner that let the log go after a while idle synced the file then: if no commit came since, the
        // file is as synced, and the next write makes its checkpoint with one write.)
        if committed != durableAt { try sync(env) }
        var metas = [UInt8](repeating: 0, count: 2 * pageSize)
        var fd: Int32 = -1
        try lmdbCheck(mdb_env_get_fd(env, &fd))
        let read = metas.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard read == metas.count else { throw LMDBError(code: read < 0 ? errno : EIO) }
        let newEpoch = UInt64.random(in: 1...UInt64.max)
        let head = try currentHead()
        lastPageAtCheckpoint = try lastPage(env)
        (heldPages, heldThrough) = (0, committed)
        (slot, generation) = (1 - head.slot, head.generation &+ 1)
        pendingHeader = header(owner: token, epoch: newEpoch, base: committed, metas: metas).encoded()
        (epoch, base, owner, lastLogged) = (newEpoch, committed, token, committed)
        end = slot * WriteLog.slotSize + Header.size(pageSize: pageSize)
        lastWrite = .now
    }

    /// Syncs the file (`mdb_env_sync`), with LMDB's writer lock held: its last commit is then durable.
    private func sync(_ env: OpaquePointer) throws {
        durableAt = -1
        var info = MDB_envinfo()
        try lmdbCheck(mdb_env_info(env, &info))
        try lmdbCheck(mdb_env_sync(env, 1))
        durableAt = info.me_last_txnid
    }

    /// The last page the file's last commit uses.
    private func lastPage(_ env: OpaquePointer) throws -> Int {
        var info = MDB_envinfo()
        try lmdbCheck(mdb_env_info(env, &info))
        return info.me_last_pgno
    }

    /// Syncs the file and clears the log's owner: every commit so far is durable, and no record is to be applied.
    func disown(_ env: OpaquePointer) throws {
        epoch = 0
        pendingHeader = nil
        try sync(env)
        let head = try currentHead()
        (slot, generation) = (1 - head.slot, head.generation &+ 1)
        try writeHeader(owner: 0, epoch: 0, base: 0, metas: nil)
        unpin()
    }

    /// At closing, with LMDB's writer lock held: clears the log if this environment owns it.
    func release(_ env: OpaquePointer) {
        if let header = try? currentHead(), header.owner == token { try? disown(env) }
        // (Another environment took the log over meanwhile: this one's pin holds pages for nothing.)
        forget()
        endFreeListReader()
    }

    private func repin(_ env: OpaquePointer) throws {
        pinnedAt = -1
        if let pin, mdb_txn_renew({ mdb_txn_reset(pin); return pin }()) == MDB_SUCCESS {
            pinnedAt = mdb_txn_id(pin)
            return
        }
        unpin()
        var handle: OpaquePointer?
        try lmdbCheck(mdb_txn_begin(env, nil, LMDBFlags.readOnly, &handle))
        pin = handle
        pinnedAt = handle.map { mdb_txn_id($0) } ?? -1
    }

    /// Stops appending under the current checkpoint, without writing to the log: what a strike that could not be
    /// made, or another checkpoint, leaves. The next write joins the header's checkpoint again or makes one. The pin
    /// stays while the header (`head`, read again if not given) names this environment's checkpoint: other processes
    /// may be appending under it.
    func forget(_ head: Head? = nil) {
        epoch = 0
        pendingHeader = nil
        if let head = head ?? (try? currentHead()), head.owner == token { return }
        unpin()
    }

    func unpin() {
        if let pin { mdb_txn_abort(pin) }
        pin = nil
        pinnedAt = -1
    }

    /// At closing: the log's read transactions end before the environment does.
    func endTransactions() {
        unpin()
        endFreeListReader()
    }

    /// Gives back the reader slot the free list's count keeps (LMDB's table of readers is shared by every process).
    private func endFreeListReader() {
        if let freeListReader { mdb_txn_abort(freeListReader) }
        freeListReader = nil
    }

    // MARK: Recovery

    /// Before the file at `path` is opened, by every opening: if its log was written before a crash of the machine
    /// (another boot id) and holds records, writes the base's meta pages back into the file, syncs it, has `replay`
    /// apply the records' bodies (in order, in one transaction, then sync), and clears the log. A read-only opening
    /// that finds records to apply is refused. The log's lock is held throughout.
    static func recover(path: String, readOnly asked: Bool, replay: ([[UInt8]]) throws -> Void) throws {
        let logPath = path + "-log"
        var readOnly = asked
        var fd = Glibc.open(logPath, (readOnly ? O_RDONLY : O_RDWR | O_DSYNC) | O_CLOEXEC)
        if fd < 0 && !readOnly && [EROFS, EACCES, EPERM].contains(errno) {
            // A log this process may only read (a read-only mount): looked at as a read-only opening would, and the
            // opening of the file itself then says what is wrong.
            readOnly = true
            fd = Glibc.open(logPath, O_RDONLY | O_CLOEXEC)
        }
        guard fd >= 0 else {
            if errno == ENOENT { return }   // (no log: nothing to recover)
            throw StorageError.failed("cannot read the write log \(logPath): \(String(cString: strerror(errno)))")
        }
        defer { Glibc.close(fd) }
        while flock(fd, readOnly ? LOCK_SH : LOCK_EX) != 0 {
            guard errno == EINTR else { throw LMDBError(code: errno) }
        }
        defer { flock(fd, LOCK_UN) }
        // The headers first: the records (the current slot) only when there is something to recover.
        guard let (slot, header) = try headers(fd), header.isFromAnotherBoot else { return }
        let bytes = try read(fd, slotSize, at: slot * slotSize)
        func clear() throws {
            if !readOnly { try WriteLog.clear(fd, header, after: slot, logPath) }
        }
        // A log of another file (the store's file replaced meanwhile) has nothing to give this one. (The inode
        // alone: a device's number may change from one boot to the next.)
        var data = Glibc.stat()
        guard stat(path, &data) == 0, UInt64(data.st_ino) == header.inode else { return try clear() }
        let bodies = bytes.withUnsafeBytes {
            Record.decode($0, from: Header.size(pageSize: header.pageSize), epoch: header.epoch, base: header.base)
        }
        // (With no record to apply, the base's meta pages are still written back: a commit made since without one,
        // which changed nothing, may have left a newer meta page on disk ahead of its pages.)
        guard !readOnly else {
            throw StorageError.failed("the machine stopped while the last commits to it (\(bodies.count) recorded) "
                + "were on their way to the disk; their record is in \(logPath), and a writable opening applies it: "
                + "open the store writable once before reading it")
        }
        let file = Glibc.open(path, O_RDWR | O_CLOEXEC)
        guard file >= 0 else { throw LMDBError(code: errno) }
        defer { Glibc.close(file) }
        let written = header.metas.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, 0) }
        guard written == header.metas.count, fsync(file) == 0 else {
            throw StorageError.failed("cannot write the last checkpoint back into \(path): "
                + String(cString: strerror(errno)))
        }
        try replay(bodies)
        try clear()
    }

    /// Whether the log beside `path` holds what an opening would apply (written before a crash of the machine):
    /// what a reading of the file's pages without LMDB must refuse, since they are not yet the store's.
    static func needsApplying(path: String) -> Bool {
        let fd = Glibc.open(path + "-log", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var data = Glibc.stat()
        guard let (_, header) = try? headers(fd), header.isFromAnotherBoot, stat(path, &data) == 0,
              UInt64(data.st_ino) == header.inode else { return false }
        return true
    }

    /// Clears the owner of the log beside `path`, if it has one: what a compaction does before its copy replaces
    /// the file, once the file is synced.
    static func clear(beside path: String) throws {
        let fd = Glibc.open(path + "-log", O_RDWR | O_DSYNC | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { Glibc.close(fd) }
        while flock(fd, LOCK_EX) != 0 { guard errno == EINTR else { return } }
        defer { flock(fd, LOCK_UN) }
        guard let (slot, header) = try headers(fd), header.owner != 0 else { return }
        try clear(fd, header, after: slot, path + "-log")
    }

    /// The current header of the log open at `fd` (as ``current(in:)`` finds it), reading each slot's header only:
    /// its fixed part, and its meta pages only where it has an owner.
    private static func headers(_ fd: Int32) throws -> (Int, Header)? {
        var best: (Int, Header)?
        for slot in 0..<2 {
            if let header = try header(fd, slot: slot), header.generation >= best?.1.generation ?? 0 {
                best = (slot, header)
            }
        }
        return best
    }

    /// The header of `slot` in the log open at `fd`, if it is whole.
    private static func header(_ fd: Int32, slot: Int) throws -> Header? {
        var bytes = try read(fd, Header.fixedSize, at: slot * slotSize)
        guard let fixed = bytes.withUnsafeBytes({ Header.fixed($0) }) else { return nil }
        if fixed.owner != 0 {
            let pageSize = bytes.withUnsafeBytes {
                Int(UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 48, as: UInt64.self)))
            }
            guard pageSize >= 512, pageSize <= 1 << 16 else { return nil }
            bytes = try read(fd, Header.fixedSize + 2 * pageSize + 8, at: slot * slotSize)
        }
        return Header.decode(bytes)
    }

    /// Up to `count` bytes of the log open at `fd` from `offset`: fewer where the file ends.
    private static func read(_ fd: Int32, _ count: Int, at offset: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(0, count))
        let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
        guard read >= 0 else { throw LMDBError(code: errno) }
        bytes.removeSubrange(read...)
        return bytes
    }

    /// Writes a header of no owner into the slot after `slot`, where `header` is, with the next generation.
    private static func clear(_ fd: Int32, _ header: Header, after slot: Int, _ logPath: String) throws {
        let cleared = Header(owner: 0, epoch: 0, base: 0, device: header.device, inode: header.inode,
                             pageSize: header.pageSize, bootID: bootID,
                             metas: [UInt8](repeating: 0, count: 2 * header.pageSize),
                             generation: header.generation &+ 1).encoded()
        let written = cleared.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t((1 - slot) * slotSize)) }
        guard written == cleared.count else {
            throw StorageError.failed("cannot clear the write log \(logPath): \(String(cString: strerror(errno)))")
        }
    }

    // MARK: The file

    /// A header's fixed part, with its slot.
    typealias Head = (slot: Int, owner: UInt64, epoch: UInt64, generation: UInt64)

    /// The current header's slot, owner, epoch and generation, from the fixed part of each slot's header: the one
    /// of the later generation whose fixed part is whole. (An owned header whose fixed part is whole but its meta
    /// pages not, from a process killed while it wrote, is not joined: the next writer makes a checkpoint or clears
    /// it. A header of no owner is its fixed part alone.)
    private func currentHead() throws -> Head {
        try WriteLog.currentHead(descriptor)
    }

    private static func currentHead(_ descriptor: Int32) throws -> Head {
        var best: Head?
        var bytes = [UInt8](repeating: 0, count: Header.fixedSize)
        for slot in 0..<2 {
            let read = bytes.withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress, $0.count, off_t(slot * WriteLog.slotSize))
            }
            guard read == bytes.count else { throw LMDBError(code: read < 0 ? errno : EIO) }
            if let head = bytes.withUnsafeBytes({ Header.fixed($0) }), head.generation >= best?.generation ?? 0 {
                best = (slot, head.owner, head.epoch, head.generation)
            }
        }
        return best ?? (1, 0, 0, 0)
    }

    /// This environment's header, of its slot and generation.
    private func header(owner: UInt64, epoch: UInt64, base: Int, metas: [UInt8]?) -> Header {
        Header(owner: owner, epoch: epoch, base: UInt64(base), device: file.device, inode: file.inode,
               pageSize: pageSize, bootID: WriteLog.bootID, metas: metas ?? [UInt8](repeating: 0, count: 2 * pageSize),
               generation: generation)
    }

    private func writeHeader(owner: UInt64, epoch: UInt64, base: Int, metas: [UInt8]?) throws {
        try write(header(owner: owner, epoch: epoch, base: base, metas: metas).encoded()[...],
                  at: slot * WriteLog.slotSize)
    }

    /// The current header in `log` (both slots, or the first part of them): the whole one of the later generation,
    /// with its slot.
    static func current(in log: [UInt8]) -> (Int, Header)? {
        (0..<2).compactMap { slot -> (Int, Header)? in
            guard log.count > slot * slotSize else { return nil }
            let bytes = Array(log[(slot * slotSize)..<min(log.count, (slot + 1) * slotSize)])
            return Header.decode(bytes).map { (slot, $0) }
        }.max { $0.1.generation < $1.1.generation }
    }

    private func write(_ bytes: ArraySlice<UInt8>, at offset: Int) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes {
                pwrite(descriptor, $0.baseAddress! + done, $0.count - done, off_t(offset + done))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw StorageError.failed("cannot write the write log \(path)-log: \(String(cString: strerror(errno)))")
            }
            done += n
        }
    }

    private func locked<R>(_ operation: Int32, _ body: () throws -> R) throws -> R {
        while flock(descriptor, operation) != 0 { guard errno == EINTR else { throw LMDBError(code: errno) } }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}

// MARK: - The header and the records

extension WriteLog {
    /// A slot's first bytes: a fixed part (its owner, epoch, base, generation...) under a checksum of its own, then,
    /// for a header with an owner, the base's two meta pages and a checksum of all of it. A header of no owner is
    /// the fixed part alone: one write within a page, which a process killed while it writes leaves whole or
    /// not at all.
    struct Header {
        static let magic: UInt64 = 0x3130_474F_4C53_4444   // "DDSLOG01"
        static let bootIDSize = 40
        static let fixedSize = 112
        var owner: UInt64
        var epoch: UInt64
        var base: UInt64
        var device: UInt64
        var inode: UInt64
        var pageSize: Int
        var bootID: [UInt8]
        var metas: [UInt8]
        /// Which of the two slots' headers is the current one: the later.
        var generation: UInt64 = 0

        /// The last page of the commit `txnid` (LMDB's `mm_last_pg`), by the meta page of the two the header keeps
        /// that names it.
        func lastPage(of txnid: UInt64) -> Int? {
            for page in 0..<2 where metas.count >= (page + 1) * pageSize && pageSize >= 152 {
                func word(_ offset: Int) -> UInt64 {
                    metas.withUnsafeBytes {
                        UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: page * pageSize + offset, as: UInt64.self))
                    }
                }
                if word(144) == txnid { return Int(word(136)) }
            }
            return nil
        }

        /// Whether the header names an owner whose commits a crash of the machine may have cut short: one written
        /// under another boot id than this one's.
        var isFromAnotherBoot: Bool { owner != 0 && !WriteLog.bootID.isEmpty && bootID != WriteLog.bootID }

        /// Where the records begin: the header rounded up to whole 4 KiB blocks.
        static func size(pageSize: Int) -> Int { (fixedSize + 8 + 2 * pageSize + 4095) / 4096 * 4096 }

        func encoded() -> [UInt8] {
            var bytes = [UInt8]()
            bytes.reserveCapacity(WriteLog.Header.size(pageSize: pageSize))
            for word in [Header.magic, owner, epoch, base, device, inode, UInt64(pageSize)] {
                withUnsafeBytes(of: word.littleEndian) { bytes.append(contentsOf: $0) }
            }
            bytes.append(contentsOf: bootID.prefix(Header.bootIDSize))
            bytes.append(contentsOf: repeatElement(0, count: 96 - bytes.count))
            withUnsafeBytes(of: generation.littleEndian) { bytes.append(contentsOf: $0) }
            let fixedSum = bytes.withUnsafeBytes { CRC32C.checksum($0) }
            withUnsafeBytes(of: UInt64(fixedSum).littleEndian) { bytes.append(contentsOf: $0) }
            guard owner != 0 else { return bytes }
            bytes.append(contentsOf: metas)
            let sum = bytes.withUnsafeBytes { CRC32C.checksum($0) }
            withUnsafeBytes(of: UInt64(sum).littleEndian) { bytes.append(contentsOf: $0) }
            return bytes
        }

        /// The fixed part's owner, epoch and generation in `bytes` (a slot's first ``fixedSize`` bytes), if its
        /// checksum holds.
        static func fixed(_ bytes: UnsafeRawBufferPointer) -> (owner: UInt64, epoch: UInt64, generation: UInt64)? {
            guard bytes.count >= fixedSize else { return nil }
            func word(_ i: Int) -> UInt64 {
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self))
            }
            let sum = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<104]))
            guard word(0) == magic, UInt64(sum) == word(13) else { return nil }
            return (word(1), word(2), word(12))
        }

        /// The header in `bytes`, if they hold a whole one.
        static func decode(_ bytes: [UInt8]) -> Header? {
            guard bytes.count >= fixedSize, bytes.withUnsafeBytes({ fixed($0) }) != nil else { return nil }
            func word(_ i: Int) -> UInt64 {
                bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) }
            }
            let pageSize = Int(word(6))
            guard pageSize >= 512, pageSize <= 1 << 16 else { return nil }
            var metas: [UInt8] = []
            if word(1) != 0 {
                let end = fixedSize + 2 * pageSize
                guard bytes.count >= end + 8 else { return nil }
                let sum = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<end])) }
                guard UInt64(sum) == word(end / 8) else { return nil }
                metas = Array(bytes[fixedSize..<end])
            }
            var bootID = Array(bytes[56..<(56 + bootIDSize)])
            while bootID.last == 0 { bootID.removeLast() }
            return Header(owner: word(1), epoch: word(2), base: word(3), device: word(4), inode: word(5),
                          pageSize: pageSize, bootID: bootID, metas: metas, generation: word(12))
        }
    }

    /// A record: magic, the body's length, the epoch, the commit's id, a checksum of all of it, then the body
    /// (``WriteCapture``'s operations).
    enum Record {
        static let magic: UInt32 = 0x5244_5344   // "DSDR"
        static let headerSize = 32

        static func encode(_ body: [UInt8], epoch: UInt64, txnid: Int) -> [UInt8] {
            var bytes = [UInt8]()
            bytes.reserveCapacity(headerSize + body.count)
            withUnsafeBytes(of: magic.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: UInt32(body.count).littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: epoch.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: UInt64(txnid).littleEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: repeatElement(0, count: 8))
            bytes.append(contentsOf: body)
            let sum = bytes.withUnsafeBytes { CRC32C.checksum($0) }
            bytes.withUnsafeMutableBytes {
                $0.storeBytes(of: UInt64(sum).littleEndian, toByteOffset: 24, as: UInt64.self)
            }
            return bytes
        }

        /// The bodies of the records of `epoch` from `offset` on whose commits follow on from `base`, up to the
        /// first that does not (a record struck out, torn, of another epoch or out of turn).
        static func decode(_ log: UnsafeRawBufferPointer, from offset: Int, epoch: UInt64, base: UInt64) -> [[UInt8]] {
            var bodies: [[UInt8]] = []
            walk(log, from: offset, epoch: epoch, after: base) { _, body, _ in
                bodies.append(Array(log[body]))
                return true
            }
            return bodies
        }

        /// The length of the body, the epoch and the commit's id of the record whose header begins at `at` in `log`;
        /// `nil` where no record begins (no magic, or too few bytes for a header).
        static func header(in log: UnsafeRawBufferPointer, at: Int) -> (length: Int, epoch: UInt64, txnid: UInt64)? {
            guard at >= 0, at + headerSize <= log.count else { return nil }
            func load<T: FixedWidthInteger>(_ i: Int, _: T.Type) -> T {
                T(littleEndian: log.loadUnaligned(fromByteOffset: at + i, as: T.self))
            }
            guard load(0, UInt32.self) == magic else { return nil }
            return (Int(load(4, UInt32.self)), load(8, UInt64.self), load(16, UInt64.self))
        }

        /// Hands `visit` each record of `epoch` from `offset` on whose commit follows on from `after` (its commit,
        /// its body's bytes, and where the next record begins), up to the first that does not (a record struck
        /// out, torn, of another epoch or out of turn) or until `visit` returns false. Returns whether it stopped
        /// at the end of `log`, with no whole record left there.
        @discardableResult
        static func walk(_ log: UnsafeRawBufferPointer, from offset: Int, epoch: UInt64, after: UInt64,
                         _ visit: (_ txnid: UInt64, _ body: Range<Int>, _ next: Int) -> Bool) -> Bool {
            var at = offset, next = after + 1
            while at + headerSize <= log.count {
                guard let header = header(in: log, at: at) else { return false }
                let length = header.length
                guard at + headerSize + length <= log.count else { return true }
                guard header.epoch == epoch, header.txnid == next else { return false }
                var record = Array(log[at..<(at + headerSize + length)])
                let stored = UInt64(littleEndian: log.loadUnaligned(fromByteOffset: at + 24, as: UInt64.self))
                record.withUnsafeMutableBytes { $0.storeBytes(of: 0, toByteOffset: 24, as: UInt64.self) }
                guard UInt64(record.withUnsafeBytes { CRC32C.checksum($0) }) == stored else { return false }
                at += headerSize + length
                guard visit(next, (at - length)..<at, at) else { return false }
                next += 1
            }
            return true
        }
    }
}

// MARK: - What a write changes

/// The changes of one write transaction, as a record's body: each operation a tag byte and its operands. A
/// database is named once, by the first operation on it, and then given by its number in the record.
final class WriteCapture {
    enum Operation: UInt8 {
        /// u16 number, u32 flags, u16 name's length, the name: opened (created if missing) with those flags.
        case space = 1
        /// u16 number, u32 key's length, u32 value's length, key, value.
        case put = 2
        /// u16 number, u32 key's length, key: the key with every value it holds.
        case delete = 3
        /// u16 number, u32 key's length, u32 value's length, key, value: one value of a duplicate-sorted key.
        case deleteValue = 4
        /// u16 number: every entry.
        case empty = 5
        /// u16 number: the database itself.
        case deleteSpace = 6
    }

    private(set) var bytes: [UInt8] = []
    /// Set when the changes outgrew ``WriteLog/largestRecord`` or named a database that has no name: the write is
    /// then committed with a sync, not logged.
    private(set) var overflowed = false
    /// The record's number of each database it names, and the next number: numbers are never given twice.
    private var numbers: [MDB_dbi: UInt16] = [:]
    private var nextNumber = 0
    /// Databases deleted so far: a nested transaction that deleted one and was then taken back leaves handles
    /// LMDB closed, which the record cannot follow.
    private var forgotten = 0

    /// Where a nested transaction began: what its abort takes back.
    struct Mark { let count: Int, numbers: [MDB_dbi: UInt16], forgotten: Int }
    func mark() -> Mark { Mark(count: bytes.count, numbers: numbers, forgotten: forgotten) }
    func rollBack(to mark: Mark) {
        // (Changes that outgrew a record were let go: the write stays unlogged.)
        guard !overflowed else { return }
        guard forgotten == mark.forgotten else { return overflow() }
        bytes.removeSubrange(mark.count...)
        numbers = mark.numbers
    }

    /// Called once, when the changes can no longer be logged: the log is cleared then, before the transaction
    /// writes a page to the file (a transaction that large spills pages), while the base is still kept.
    var onOverflow: (() -> Void)?

    private func overflow() {
        overflowed = true
        bytes = []
        onOverflow?()
        onOverflow = nil
    }

    /// The record's number for `dbi`, naming it first if this is its first operation.
    func number(of dbi: MDB_dbi, name: () -> (String, UInt32)?) -> UInt16? {
        if let known = numbers[dbi] { return known }
        guard !overflowed, let (name, flags) = name(), nextNumber < Int(UInt16.max) else {
            if !overflowed { overflow() }
            return nil
        }
        let number = UInt16(nextNumber)
        nextNumber += 1
        numbers[dbi] = number
        let utf8 = Array(name.utf8)
        bytes.append(Operation.space.rawValue)
        append(number)
        append(flags)
        append(UInt16(utf8.count))
        bytes.append(contentsOf: utf8)
        return number
    }

    /// A database deleted: a later operation on its number names it again.
    func forget(_ dbi: MDB_dbi) {
        numbers[dbi] = nil
        forgotten += 1
    }

    func add(_ operation: Operation, _ number: UInt16?, key: UnsafeRawBufferPointer? = nil,
             value: UnsafeRawBufferPointer? = nil) {
        guard let number, !overflowed else { return }
        bytes.append(operation.rawValue)
        append(number)
        if let key {
            append(UInt32(key.count))
            if let value { append(UInt32(value.count)) }
            bytes.append(contentsOf: key)
            if let value { bytes.append(contentsOf: value) }
        }
        if bytes.count > WriteLog.largestRecord { overflow() }
    }

    private func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Applies a record's body in `txn`.
    static func apply(_ body: [UInt8], in txn: LMDBTransaction) throws {
        var at = 0
        func take<T: FixedWidthInteger>(_: T.Type) throws -> T {
            guard at + MemoryLayout<T>.size <= body.count else { throw damaged }
            defer { at += MemoryLayout<T>.size }
            return body.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: T.self)) }
        }
        func bytes(_ count: Int) throws -> ArraySlice<UInt8> {
            guard count <= body.count - at else { throw damaged }
            defer { at += count }
            return body[at..<(at + count)]
        }
        var spaces: [UInt16: KeySpace] = [:]
        func space() throws -> KeySpace {
            guard let space = spaces[try take(UInt16.self)] else { throw damaged }
            return space
        }
        while at < body.count {
            guard let operation = Operation(rawValue: try take(UInt8.self)) else { throw damaged }
            switch operation {
            case .space:
                let number = try take(UInt16.self), flags = try take(UInt32.self)
                let name = String(decoding: try bytes(Int(try take(UInt16.self))), as: UTF8.self)
                spaces[number] = try txn.openKeySpace(name, create: true,
                                                      duplicateSort: flags & LMDBFlags.duplicateSort != 0,
                                                      fixedSizeValues: flags & LMDBFlags.fixedSizeDuplicates != 0)
            case .put, .deleteValue:
                let db = try space()
                let keyCount = Int(try take(UInt32.self)), valueCount = Int(try take(UInt32.self))
                let key = try bytes(keyCount), value = try bytes(valueCount)
                if operation == .put {
                    _ = try key.withUnsafeBytes { k in
                        try value.withUnsafeBytes { v in
                            try txn.put(db, k, v, noOverwrite: false, noDuplicate: false)
                        }
                    }
                } else {
                    try txn.delete(db, Array(key), value: Array(value))
                }
            case .delete:
                let db = try space()
                try txn.delete(db, Array(try bytes(Int(try take(UInt32.self)))), value: nil)
            case .empty: try txn.drop(try space(), delete: false)
            case .deleteSpace: try txn.drop(try space(), delete: true)
            }
        }
    }

    private static var damaged: StorageError { .damaged("a record of the write log does not parse") }
}
