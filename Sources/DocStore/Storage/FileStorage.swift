import Foundation

/// What an engine that keeps a store in one file adds to ``StorageEngine``: a copy of the file, its pages, a
/// structural check, and the lock file beside it.
protocol FileStorageEngine: StorageEngine {
    /// Whether the file is read without its lock file: writers in other processes do not see this reader.
    var isWithoutLockFile: Bool { get }
    /// Whether a commit waits for the disk (a sync of its pages), rather than only writing into the file's cache.
    var syncsAtCommit: Bool { get }
    /// Whether the next commit, as far as this process knows, waits for the disk at most for one small write: one
    /// that does not sync, or one that syncs only a short record of its changes.
    var nextCommitIsBrief: Bool { get }
    /// ``StorageEngine/write(_:)``, refused with ``CommitWouldSync`` (the transaction aborted, nothing written)
    /// when its commit would sync the file: for a thread that must not wait long for the disk.
    func writeUnlessItSyncs<R>(_ body: (any StorageTransaction) throws -> R) throws -> R
    /// Writes the file as of its last commit into a new file at a path (which must not exist) or to an open file
    /// descriptor, in a read transaction of its own: writers go on meanwhile, in this process and others. With
    /// `compact`, free pages are left out and the pages renumbered, so the copy holds only what is in use. Safe on
    /// any thread.
    func copy(to destination: CopyDestination, compact: Bool) throws
    /// The file's pages: its page size, pages in use (up to the last one written) and free pages among them,
    /// which later commits reuse; and the map's size in bytes.
    func pageUsage() throws -> (pageSize: Int, inUse: Int, free: Int, mapBytes: Int)
    /// Checks the file's structure without trusting it (every page number and offset checked before use), as
    /// `txn`'s commit, or a later one, has it; the damage found, and the pages read.
    func checkStructure(holding txn: any StorageTransaction) -> (damage: [StorageDamage], pages: Int)
    /// A read that may open key spaces not yet open in the process: it runs with no other transaction of the
    /// process open, waiting for those in flight. ``StorageEngine/read(_:)`` runs on any thread, beside other reads
    /// and the writer, and may only open key spaces already open in the process when it began.
    func readAlone<R>(_ body: (any StorageTransaction) throws -> R) throws -> R
    /// Called, with no read of the process open, when a write that ran alone (it deleted a key space) ends or is
    /// aborted: the key space is closed whether it committed or not, and whoever keeps it must forget it before any
    /// read begins.
    var onKeySpacesClosed: (() -> Void)? { get set }
}

/// A write refused because its commit would sync the file (``FileStorageEngine/writeUnlessItSyncs(_:)``).
struct CommitWouldSync: Error {}

/// The file engine's work on a file by its path: opening it, and what needs no open store (a check before opening,
/// a compaction, a salvage). The file engine supplies these functions (`FileStorage.open`, `.check`, `.compact`,
/// `.salvage`, in the LMDB folder); the store calls them by these names, never the engine's own.
enum FileStorage {
    /// What identifies a file, whatever name reaches it: device and inode.
    struct FileID: Hashable { var device: UInt64; var inode: UInt64 }

    /// The identity of the file at `path` (a link followed), or `nil` when there is none.
    static func fileID(of path: String) -> FileID? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// Makes the file at `path`, which must not exist (nothing already there is written into), with `mode` whatever
    /// the umask (else as the umask has it), and opens it for writing: a copy of the store is no one's to read but
    /// whom `mode` names, from its first byte.
    static func createFile(_ path: String, mode: mode_t?) throws -> Int32 {
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode ?? 0o666)
        guard fd >= 0 else {
            throw StorageError.failed("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        if let mode, fchmod(fd, mode) != 0 {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            unlink(path)
            throw StorageError.failed("cannot give \(path) the permissions \(String(mode, radix: 8)): \(reason)")
        }
        return fd
    }

    /// How a file is opened.
    struct Configuration {
        var initialMapSize: Int
        var maximumMapSize: Int
        var maxDatabases: UInt32
        var maxReaders: UInt32
        /// Reads only: no write transaction can begin.
        var readOnly = false
        var sync: Sync = .full
        /// With ``Sync/none``, how often the engine syncs the file on a thread of its own; `nil`: only when closing
        /// or asked to.
        var flushInterval: Duration? = nil
        /// With ``Sync/full``: a commit waits for a record of its changes in the write log beside the file, and the
        /// file is synced at checkpoints (LMDB's ``WriteLog``); otherwise for LMDB's two syncs.
        var writeLog = true
        /// Set for the environment that applies a write log after a crash of the machine.
        var replaying = false
        /// The file is this process's alone while it is open: an opening in another process is refused, and this
        /// one is refused while another process has the file open. With ``Sync/none``, commits then change the
        /// file's pages in place (LMDB's `MDB_WRITEMAP`), which LMDB allows only when every process does.
        var exclusive = false
    }

    /// What a commit syncs.
    enum Sync {
        /// The data, then the page that makes the commit the last one.
        case full
        /// The data only: the last commits may be lost in a crash of the machine, never the file's consistency.
        case dataOnly
        /// Nothing: the file is synced when asked to, or on the engine's flush thread.
        case none
    }

    /// What can still be read of a damaged file: the entries of the named key spaces asked for, read past every
    /// damaged page, the leaf pages that no tree reaches, and the damage met on the way.
    struct Salvage {
        /// Each key space's entries (key, value) in the order found: those of a damaged page are missing.
        var databases: [String: [(key: [UInt8], value: [UInt8])]] = [:]
        /// The number of entries each key space's record says it has.
        var recordedEntries: [String: UInt64] = [:]
        /// The keys of each key space's pages that could not be read (below a page cut off or past the end): every
        /// entry the space has that was not read lies in one of these. A space whose tree was read whole has none.
        var holes: [String: [KeyInterval]] = [:]
        var damage: [StorageDamage] = []
        /// The leaf pages that no tree reaches, each with its entries: pages cut off from their space by a
        /// damaged page above them or by the end of the file, and pages no longer in use unless the free list's are
        /// left out (``freePagesLeftOut``). Which space a page belongs to, the caller works out from what it holds.
        var loosePages: [LoosePage] = []
        /// Whether the pages the free list holds are left out of ``loosePages``. When they are not (the free list
        /// could not be read whole, or the trees read are an older commit's), loose pages may hold older versions of
        /// entries, and entries deleted since.
        var freePagesLeftOut = false
        /// The newest commit a meta page records.
        var newestCommit: UInt64?
        /// The commit whose trees were read: the newest, or the one before when the newest's main space cannot
        /// be read; `nil` when neither can be.
        var readCommit: UInt64?
        /// The pages the file has, and the last page its newest commit names, when that lies past its end.
        var cutShort: (pages: Int, lastPage: UInt64)?

        /// Whether the trees read are those of the newest commit.
        var readNewest: Bool { readCommit != nil && readCommit == newestCommit }
    }

    /// The keys from `lower` (`nil`: from the first) up to but not including `upper` (`nil`: to the last), in byte
    /// order.
    struct KeyInterval {
        var lower: [UInt8]?
        var upper: [UInt8]?

        func contains(_ key: [UInt8]) -> Bool {
            (lower.map { !key.lexicographicallyPrecedes($0) } ?? true) && (upper.map { key.lexicographicallyPrecedes($0) } ?? true)
        }
    }

    /// A leaf page that no tree reaches.
    struct LoosePage {
        var page: Int
        /// Its entries of plain values, kept in the page or on overflow pages.
        var entries: [(key: [UInt8], value: [UInt8])] = []
        /// The names of the key spaces whose records it holds (a page of the main space).
        var databaseNames: [String] = []
    }
}

/// Files made durable by path: the copies that replace a file (a backup, a compaction) are synced, then their folder.
enum DurableFile {
    /// `fsync` of a file or a folder.
    static func sync(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StorageError.failed("cannot open \(path) to sync it: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw StorageError.failed("cannot sync \(path): \(String(cString: strerror(errno)))") }
    }

    /// `fsync` of the folder that holds `path`, so that a rename into it is durable.
    static func syncFolder(of path: String) throws {
        try sync(URL(fileURLWithPath: path).deletingLastPathComponent().path)
    }

    /// Puts the complete copy at `temporary` in the place of `path`, durably: the copy is synced, renamed over
    /// `path` (so `path` holds the old file or the new one, never part of one), and the folder is synced.
    static func replace(_ path: String, with temporary: String) throws {
        try sync(temporary)
        guard rename(temporary, path) == 0 else {
            throw StorageError.failed("cannot move \(temporary) onto \(path): \(String(cString: strerror(errno)))")
        }
        try syncFolder(of: path)
    }
}

/// Where a copy of the file goes: a new file, made with `mode` (else as the umask has it) before a byte is
/// written into it, or an open descriptor.
enum CopyDestination {
    case path(String, mode: mode_t?)
    case descriptor(Int32)
}

/// Damage the storage engine's own check of the file found: where (a page, a key space) and what.
struct StorageDamage: Sendable, Equatable, CustomStringConvertible {
    var page: Int?
    /// The key space (a named database, "main", "free list"), or "" for the file as a whole.
    var space: String
    var message: String

    var description: String {
        (page.map { "page \($0)" } ?? "the file") + (space.isEmpty ? "" : " (\(space))") + ": \(message)"
    }
}
