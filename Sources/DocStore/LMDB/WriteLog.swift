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
/// - **One owner.** Only the environment named in the header appends records, and only while the file's last commit
///   is its own last one. Any other writer, in this process or another, first syncs the file and either takes the
///   log over (a logged write: a checkpoint) or clears its owner (a write that is not logged: `.normal`, `.off`, a
///   change too large for a record). A commit that is not logged is thus always made with the log cleared, and no
///   record is ever replayed over a state that lacks a commit.
/// - **When to recover.** While the machine stays up, the page cache holds every commit, whoever wrote it and
///   whatever process died. Recovery runs only when the boot id recorded in the header is not the machine's: it
///   writes the base's meta pages back, opens the file, applies the records in one transaction, syncs, and clears the
///   log. It holds the log's `flock` meanwhile, so that two processes opening after a reboot do not both do it; a
///   read-only opening that finds a log to replay is refused.
/// - **Records that never committed.** Each record carries the checkpoint's random epoch and the id of the commit it
///   makes; recovery applies records of the header's epoch with ids that follow on from the base, up to the first
///   that does not. A record whose commit then fails is struck out (its first word zeroed, durably). A record
///   written by a process that died before its commit is written over by the next owner, or, if the machine
///   crashes first, applied: a commit whose record is durable is the log's commit, as in any write-ahead log.
/// - **The file replaced.** The header names the data file's device and inode; a compaction clears the log before it
///   renames its copy over the file.
final class WriteLog {
    /// The data file's path; the log is `path + "-log"`.
    let path: String
    /// Whether this environment's commits are logged (full durability); otherwise it only clears the log's owner
    /// before its commits.
    let logs: Bool
    /// Written with `O_DSYNC`: a write returns once it is on disk.
    private let descriptor: Int32
    private let pageSize: Int
    private let file: (device: UInt64, inode: UInt64)
    /// This environment's name as the log's owner.
    private let token = UInt64.random(in: 1...UInt64.max)
    /// Set while this environment owns the log: the checkpoint's epoch and base, the last commit logged, and where
    /// the next record goes.
    private var epoch: UInt64 = 0
    private var lastLogged = 0
    private var end = 0
    /// A read transaction at the base: LMDB reuses no page the base's trees hold while it lasts.
    private var pin: OpaquePointer?
    /// The file's last page at the checkpoint: LMDB reuses none of the pages freed since, so the file grows by what
    /// the commits since write, until the next checkpoint.
    private var lastPageAtCheckpoint = 0
    /// The most bytes the log holds; a record that would go past them makes a checkpoint first.
    var capacity = 16 << 20
    /// How far the file may grow past its last page at the checkpoint (in pages) before the next write makes
    /// another: what bounds both the growth and the pages the next checkpoint's sync writes.
    var growthBetweenCheckpoints = 4_096
    /// The log file's size: zeros are written ahead of the records a megabyte at a time, so that a record's write
    /// changes no block map and its `O_DSYNC` waits for its own bytes only.
    private var size = 0
    /// When this environment last logged a commit: an owner idle for a while lets the log go (``releaseIfIdle``).
    private var lastWrite = ContinuousClock.now
    /// The largest record: a change larger than this is committed with a sync instead.
    static let largestRecord = 4 << 20

    /// The machine's boot id: what tells a log written before a crash of the machine from one whose commits the
    /// page cache still holds. Tests set another.
    nonisolated(unsafe) static var bootID: [UInt8] = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return [] }
        return Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8.prefix(Header.bootIDSize))
    }()

    private init(path: String, logs: Bool, descriptor: Int32, pageSize: Int, file: (UInt64, UInt64)) {
        self.path = path
        self.logs = logs
        self.descriptor = descriptor
        self.pageSize = pageSize
        self.file = file
    }

    deinit { Glibc.close(descriptor) }

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
        log.size = Int(size.st_size)
        if log.size == 0 {
            // Made here, under the log's lock: a header of no owner; the file's name made durable.
            try log.locked(LOCK_EX) {
                guard fstat(fd, &size) == 0 else { throw LMDBError(code: errno) }
                log.size = Int(size.st_size)
                guard log.size == 0 else { return }
                try log.writeHeader(owner: 0, epoch: 0, base: 0, metas: nil)
                log.size = Header.size(pageSize: log.pageSize)
                try DurableFile.syncFolder(of: logPath)
            }
        }
        return log
    }

    // MARK: Writing

    /// Before a write's changes, with LMDB's writer lock held (its transaction begun) and `committed` the id of the
    /// file's last commit: makes the log ready for the write. Returns whether the write is to be logged.
    ///
    /// A logged write goes on from this environment's last record when nothing came between; otherwise it syncs the
    /// file and takes the log over. A write that is not logged clears the log's owner first (after a sync), unless
    /// it has none.
    func prepare(_ env: OpaquePointer, committed: Int) throws -> Bool {
        let header = try readOwner()
        if logs {
            if epoch != 0, header.owner == token, header.epoch == epoch, committed == lastLogged,
               try lastPage(env) - lastPageAtCheckpoint < growthBetweenCheckpoints { return true }
            try checkpoint(env, committed: committed)
            return true
        }
        if header.owner != 0 { try disown(env) }
        return false
    }

    /// Writes the record of the commit `txnid` (`changes`), before LMDB's commit. Returns where it went, for
    /// ``strike(_:)`` should the commit fail; `nil` when the changes are too large for a record, in which case the
    /// log has been cleared and the commit must be synced.
    func append(_ changes: WriteCapture, txnid: Int, in env: OpaquePointer) throws -> Int? {
        guard !changes.overflowed else {
            try disown(env)
            return nil
        }
        // (A record that would not fit makes a checkpoint first: it then carries the new epoch.)
        if end + Record.headerSize + changes.bytes.count > capacity { try checkpoint(env, committed: txnid - 1) }
        let record = Record.encode(changes.bytes, epoch: epoch, txnid: txnid)
        let at = end
        while at + record.count > size {
            let zeros = [UInt8](repeating: 0, count: 1 << 20)
            try write(zeros[...], at: size)
            size += zeros.count
        }
        try write(record[...], at: at)
        end += record.count
        return at
    }

    /// After the commit of the record at `offset` (the commit `txnid`).
    func committed(_ txnid: Int) {
        lastLogged = txnid
        lastWrite = .now
    }

    /// Strikes out the record at `offset`, whose commit failed: durably, so that no recovery applies it. Should
    /// that write fail too, the log is cleared instead (or, failing that, no longer counted as this
    /// environment's, so that the next write makes a checkpoint).
    func strike(_ offset: Int, in env: OpaquePointer) {
        end = offset
        do { try write([0, 0, 0, 0][...], at: offset) } catch {
            epoch = 0
            try? disown(env)
        }
    }

    /// How long an owner that logs nothing keeps the log.
    var idleAfter = Duration.seconds(1)

    /// Whether this environment owns the log (or did, and has not seen another take it over) and has logged
    /// nothing for ``idleAfter``: it then lets the log go (``release(_:)``), so that an idle process holds no pages
    /// from reuse and leaves nothing to recover.
    var isIdleOwner: Bool { epoch != 0 && lastWrite.duration(to: .now) >= idleAfter }

    /// Syncs the file and makes its last commit the log's base, owned by this environment.
    private func checkpoint(_ env: OpaquePointer, committed: Int) throws {
        // Not this environment's until the header says so: a failure on the way leaves the next write to begin
        // again here.
        epoch = 0
        try lmdbCheck(mdb_env_sync(env, 1))
        // The pin moves to the synced commit, before the header names it.
        try repin(env)
        var metas = [UInt8](repeating: 0, count: 2 * pageSize)
        var fd: Int32 = -1
        try lmdbCheck(mdb_env_get_fd(env, &fd))
        let read = metas.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard read == metas.count else { throw LMDBError(code: read < 0 ? errno : EIO) }
        let newEpoch = UInt64.random(in: 1...UInt64.max)
        try writeHeader(owner: token, epoch: newEpoch, base: committed, metas: metas)
        lastPageAtCheckpoint = try lastPage(env)
        (epoch, lastLogged, end) = (newEpoch, committed, Header.size(pageSize: pageSize))
        lastWrite = .now
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
        try lmdbCheck(mdb_env_sync(env, 1))
        try writeHeader(owner: 0, epoch: 0, base: 0, metas: nil)
        unpin()
    }

    /// At closing, with LMDB's writer lock held: clears the log if this environment owns it.
    func release(_ env: OpaquePointer) {
        if let header = try? readOwner(), header.owner == token, header.epoch == epoch, epoch != 0 {
            try? disown(env)
        }
        // (Another environment took the log over meanwhile: this one's pin holds pages for nothing.)
        epoch = 0
        unpin()
    }

    private func repin(_ env: OpaquePointer) throws {
        if let pin, mdb_txn_renew({ mdb_txn_reset(pin); return pin }()) == MDB_SUCCESS { return }
        unpin()
        var handle: OpaquePointer?
        try lmdbCheck(mdb_txn_begin(env, nil, LMDBFlags.readOnly, &handle))
        pin = handle
    }

    func unpin() {
        if let pin { mdb_txn_abort(pin) }
        pin = nil
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
        var info = Glibc.stat()
        guard fstat(fd, &info) == 0 else { throw LMDBError(code: errno) }
        func read(_ count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: min(count, Int(info.st_size)))
            let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            return read == bytes.count ? bytes : nil
        }
        // The header first: the records only when there is something to recover.
        guard let first = read(Header.fixedSize + 2 * (1 << 16) + 8), let header = Header.decode(first),
              header.owner != 0, !bootID.isEmpty, header.bootID != bootID, let bytes = read(Int(info.st_size))
        else { return }
        func clear() throws {
            if !readOnly { try WriteLog.clear(fd, header, logPath) }
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

    /// Clears the owner of the log beside `path`, if it has one: what a compaction does before its copy replaces
    /// the file, once the file is synced.
    static func clear(beside path: String) throws {
        let fd = Glibc.open(path + "-log", O_RDWR | O_DSYNC | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { Glibc.close(fd) }
        while flock(fd, LOCK_EX) != 0 { guard errno == EINTR else { return } }
        defer { flock(fd, LOCK_UN) }
        var bytes = [UInt8](repeating: 0, count: Header.fixedSize + 2 * (1 << 16) + 8)
        let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard read > 0, let header = Header.decode(Array(bytes[..<read])), header.owner != 0 else { return }
        try clear(fd, header, path + "-log")
    }

    private static func clear(_ fd: Int32, _ header: Header, _ logPath: String) throws {
        let cleared = Header(owner: 0, epoch: 0, base: 0, device: header.device, inode: header.inode,
                             pageSize: header.pageSize, bootID: bootID,
                             metas: [UInt8](repeating: 0, count: 2 * header.pageSize)).encoded()
        let written = cleared.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == cleared.count else {
            throw StorageError.failed("cannot clear the write log \(logPath): \(String(cString: strerror(errno)))")
        }
    }

    // MARK: The file

    private func readOwner() throws -> (owner: UInt64, epoch: UInt64) {
        var words = [UInt64](repeating: 0, count: 3)
        let read = words.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard read == 24 else { throw LMDBError(code: read < 0 ? errno : EIO) }
        guard UInt64(littleEndian: words[0]) == Header.magic else { return (0, 0) }
        return (UInt64(littleEndian: words[1]), UInt64(littleEndian: words[2]))
    }

    private func writeHeader(owner: UInt64, epoch: UInt64, base: Int, metas: [UInt8]?) throws {
        let header = Header(owner: owner, epoch: epoch, base: UInt64(base), device: file.device, inode: file.inode,
                            pageSize: pageSize, bootID: WriteLog.bootID,
                            metas: metas ?? [UInt8](repeating: 0, count: 2 * pageSize))
        try write(header.encoded()[...], at: 0)
    }

    private func write(_ bytes: ArraySlice<UInt8>, at offset: Int) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + done, $0.count - done, off_t(offset + done)) }
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
    /// The log's first bytes: its owner, the base and the base's two meta pages, all under a checksum.
    struct Header {
        static let magic: UInt64 = 0x3130_474F_4C53_4444   // "DDSLOG01"
        static let bootIDSize = 40
        static let fixedSize = 104
        var owner: UInt64
        var epoch: UInt64
        var base: UInt64
        var device: UInt64
        var inode: UInt64
        var pageSize: Int
        var bootID: [UInt8]
        var metas: [UInt8]

        /// Where the records begin: the header rounded up to whole 4 KiB blocks.
        static func size(pageSize: Int) -> Int { (fixedSize + 8 + 2 * pageSize + 4095) / 4096 * 4096 }

        func encoded() -> [UInt8] {
            var bytes = [UInt8]()
            bytes.reserveCapacity(WriteLog.Header.size(pageSize: pageSize))
            for word in [Header.magic, owner, epoch, base, device, inode, UInt64(pageSize)] {
                withUnsafeBytes(of: word.littleEndian) { bytes.append(contentsOf: $0) }
            }
            bytes.append(contentsOf: bootID.prefix(Header.bootIDSize))
            bytes.append(contentsOf: repeatElement(0, count: Header.fixedSize - bytes.count))
            bytes.append(contentsOf: metas)
            let sum = bytes.withUnsafeBytes { CRC32C.checksum($0) }
            withUnsafeBytes(of: UInt64(sum).littleEndian) { bytes.append(contentsOf: $0) }
            return bytes
        }

        /// The header in `bytes`, if they hold a whole one.
        static func decode(_ bytes: [UInt8]) -> Header? {
            guard bytes.count >= fixedSize else { return nil }
            func word(_ i: Int) -> UInt64 {
                bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) }
            }
            guard word(0) == magic else { return nil }
            let pageSize = Int(word(6))
            guard pageSize >= 512, pageSize <= 1 << 16, bytes.count >= fixedSize + 2 * pageSize + 8 else { return nil }
            let end = fixedSize + 2 * pageSize
            let sum = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<end])) }
            let stored = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: end, as: UInt64.self)) }
            guard UInt64(sum) == stored else { return nil }
            var bootID = Array(bytes[56..<(56 + bootIDSize)])
            while bootID.last == 0 { bootID.removeLast() }
            return Header(owner: word(1), epoch: word(2), base: word(3), device: word(4), inode: word(5),
                          pageSize: pageSize, bootID: bootID, metas: Array(bytes[fixedSize..<end]))
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
            bytes.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(sum).littleEndian, toByteOffset: 24, as: UInt64.self) }
            return bytes
        }

        /// The bodies of the records of `epoch` from `offset` on whose commits follow on from `base`, up to the
        /// first that does not (a record struck out, torn, of another epoch or out of turn).
        static func decode(_ log: UnsafeRawBufferPointer, from offset: Int, epoch: UInt64, base: UInt64) -> [[UInt8]] {
            var bodies: [[UInt8]] = [], at = offset, next = base + 1
            while at + headerSize <= log.count {
                func load<T: FixedWidthInteger>(_ i: Int, _: T.Type) -> T {
                    T(littleEndian: log.loadUnaligned(fromByteOffset: at + i, as: T.self))
                }
                guard load(0, UInt32.self) == magic else { break }
                let length = Int(load(4, UInt32.self))
                guard at + headerSize + length <= log.count, load(8, UInt64.self) == epoch,
                      load(16, UInt64.self) == next else { break }
                var record = Array(log[at..<(at + headerSize + length)])
                let stored = load(24, UInt64.self)
                record.withUnsafeMutableBytes { $0.storeBytes(of: 0, toByteOffset: 24, as: UInt64.self) }
                guard UInt64(record.withUnsafeBytes { CRC32C.checksum($0) }) == stored else { break }
                bodies.append(Array(record[headerSize...]))
                at += headerSize + length
                next += 1
            }
            return bodies
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
        guard forgotten == mark.forgotten else {
            overflowed = true
            bytes = []
            return
        }
        bytes.removeSubrange(mark.count...)
        numbers = mark.numbers
    }

    /// The record's number for `dbi`, naming it first if this is its first operation.
    func number(of dbi: MDB_dbi, name: () -> (String, UInt32)?) -> UInt16? {
        if let known = numbers[dbi] { return known }
        guard !overflowed, let (name, flags) = name(), nextNumber < Int(UInt16.max) else {
            overflowed = true
            bytes = []
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
        if bytes.count > WriteLog.largestRecord {
            overflowed = true
            bytes = []
        }
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
