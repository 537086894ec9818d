import DocStore
import Foundation

/// A file as the file system knows it, whatever path names it (`./x.db`, `../dir/x.db`, a symbolic link): its device
/// and inode.
struct FileIdentity: Equatable {
    var device: UInt
    var inode: UInt

    /// The file at `path`, links followed; `nil` when there is none (or it cannot be reached).
    init?(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt(info.st_dev)
        inode = UInt(info.st_ino)
    }
}

/// What a file the shell is about to write holds, as far as stores go: LMDB's data file has its magic number at
/// the start of the meta page, after the page header; its lock file has it first.
enum StoreFileKind {
    case dataFile, lockFile

    /// LMDB's magic number, `0xBEEFC0DE`, as stored (little-endian).
    private static let magic: [UInt8] = [0xDE, 0xC0, 0xEF, 0xBE]

    /// The kind of store file at `path`, or `nil` when it is none (or cannot be read).
    init?(path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var head = [UInt8](repeating: 0, count: 20)
        let n = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n == head.count else { return nil }
        if Array(head[16..<20]) == StoreFileKind.magic {
            self = .dataFile
        } else if Array(head[0..<4]) == StoreFileKind.magic {
            self = .lockFile
        } else {
            return nil
        }
    }
}

extension Shell {
    /// Checks a file that a command is about to write (`what` names what it writes: "a dump", "the results"), and
    /// says whether to go on: every command that writes a file calls this first.
    ///
    /// The open store's file and its lock file are refused, compared by device and inode so that any path to them
    /// is caught: writing them would destroy the store under the shell (a store kept in PostgreSQL has neither). Another store's file (its data file or its
    /// lock file, known by LMDB's magic number) is written over only when confirmed; `false` when the answer is no.
    func mayWrite(_ what: String, to path: String) async throws -> Bool {
        guard let target = FileIdentity(path) else { return true }   // a new file
        for storePath in [store?.path, unopenedPath].compactMap({ $0 }) where !Shell.isServerURL(storePath) {
            if FileIdentity(storePath) == target {
                throw ShellError("cannot write \(what) to \(path): it is the file of the open store \(storePath), "
                    + "which it would destroy; give another path")
            }
            if FileIdentity(storePath + "-lock") == target {
                throw ShellError("cannot write \(what) to \(path): it is the lock file of the open store "
                    + "\(storePath) (\(storePath)-lock), which LMDB needs while the store is open; give another path")
            }
        }
        guard let kind = StoreFileKind(path: path) else { return true }
        let question: String
        switch kind {
        case .dataFile:
            question = "\(path) is a DocStore store\(Shell.sizeAndAge(of: path)); overwrite it?"
        case .lockFile:
            question = "\(path) is the lock file of a store, which a process that has the store open needs; "
                + "overwrite it?"
        }
        guard try await confirm(question, refusing: "overwrite \(path)") else {
            console.note("Nothing was written.")
            return false
        }
        return true
    }

    /// ` (12.3 MB, changed 2026-11-26 14:03 UTC)` for the file at `path`: what a person needs to know which store it
    /// is, without opening it (a damaged store could not be read safely, and opening one may leave a lock file).
    private static func sizeAndAge(of path: String) -> String {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return "" }
        let size = (attributes[.size] as? Int).map(Shell.bytes) ?? "?"
        guard let changed = attributes[.modificationDate] as? Date else { return " (\(size))" }
        var format = Date.ISO8601FormatStyle(timeZone: .gmt)
        format = format.dateSeparator(.dash).timeSeparator(.colon)
        let stamp = changed.formatted(format).replacingOccurrences(of: "T", with: " ").prefix(16)
        return " (\(size), changed \(stamp) UTC)"
    }
}

extension Shell {
    /// What ``whyUnreadable(_:)`` says of a file that is not there.
    nonisolated static let noSuchFile = "no such file"

    /// Why the file at `path` cannot be read, or `nil` when it can: there is no such file, or permission is denied
    /// (naming the folder on its way that cannot be searched, when that is why), or it is a folder.
    nonisolated static func whyUnreadable(_ path: String) -> String? {
        // (Not even opened to see: closing it would let go of the store's locks, by which other processes know
        // which of its reads are alive.)
        if DocStore.isLockFileOfOpenStore(path) { return "it is the lock file of the open store, not a file to read" }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            switch errno {
            case ENOENT: return noSuchFile
            case EACCES:
                return "permission denied" + (unsearchableFolder(on: path).map { " (the folder \($0) cannot be "
                    + "searched by this user)" } ?? " (this user may not read it)")
            case let code: return String(cString: strerror(code))
            }
        }
        defer { Glibc.close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { return "it is a folder; give a file's path" }
        return nil
    }

    /// The first folder on the way to `path` that this user may not search (enter), if any.
    private nonisolated static func unsearchableFolder(on path: String) -> String? {
        var folders: [String] = []
        var folder = (path as NSString).deletingLastPathComponent
        while !folder.isEmpty && folder != "/" && !folders.contains(folder) {
            folders.append(folder)
            folder = (folder as NSString).deletingLastPathComponent
        }
        return folders.reversed().first { access($0, X_OK) != 0 && errno == EACCES }
    }

    /// Refuses a file a command is to read (`.read`, `.import`, `.restore`) that cannot be read, saying why.
    nonisolated static func checkReadable(_ path: String) throws {
        if let why = whyUnreadable(path) { throw ShellError("cannot read \(path): \(why)") }
    }

    /// The bytes of the file at `path`, or an error that says why they cannot be read.
    nonisolated static func contents(ofFile path: String) throws -> Data {
        try checkReadable(path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ShellError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        return data
    }
}

extension Shell {
    /// Whether `location` names a store kept in PostgreSQL (`postgres://...` or `postgresql://...`) rather than a
    /// file's path.
    nonisolated static func isServerURL(_ location: String) -> Bool {
        let scheme = location.prefix { $0 != ":" }.lowercased()
        return (scheme == "postgres" || scheme == "postgresql") && location.dropFirst(scheme.count).hasPrefix("://")
    }

    /// Whether the open store is kept in PostgreSQL.
    var isOnServer: Bool { store.map { Shell.isServerURL($0.path) } ?? false }

    /// What only a store kept in a file has, by the command or option that uses it, with what does it for a store
    /// kept in PostgreSQL: a dot-command named here is refused on such a store, saying so.
    nonisolated static let serverTools: [String: String] = [
        "backup": "pg_dump --schema=NAME backs up the store's schema, pg_basebackup the whole server (.dump FILE "
            + "writes the store's documents, which any store restores)",
        "compact": "VACUUM FULL on the store's tables gives their free space back to the system (autovacuum reuses "
            + "it meanwhile)",
        "recover": "the server recovers its own data after a crash, and point-in-time recovery (a base backup and "
            + "its WAL) brings back what was lost",
        "--check": "pg_amcheck (amcheck) checks the structure of the store's tables and indexes, and .verify its "
            + "documents and index entries",
        "space": "pg_total_relation_size gives the size of each of the store's tables, and VACUUM FULL gives back "
            + "their free space",
    ]

    /// The refusal of `what` (`.backup`, `--check`), which only a store kept in a file has, on one kept in
    /// PostgreSQL, naming the server's tool that does it there (``serverTools``, by `tool`).
    nonisolated static func needsFile(_ what: String, tool: String) -> ShellError {
        ShellError("\(what) needs a store kept in a file, and this one is kept in PostgreSQL: "
            + (serverTools[tool] ?? "the server's own tools do it"))
    }
}
