import Foundation

/// How much of a store's file is in use: what ``DocStore/spaceUsage()`` reports, and what tells a user when
/// ``DocStore/compact(path:options:)`` would pay. An LMDB file never shrinks by itself: pages freed by deletes are reused by
/// later writes, not given back.
public struct SpaceUsage: Sendable, Equatable, CustomStringConvertible {
    /// The size of the data file.
    public var fileBytes: Int
    public var pageSize: Int
    /// Pages up to the last one written.
    public var pages: Int
    /// Pages among those that hold nothing, and that later commits reuse.
    public var freePages: Int
    /// The size the file may grow to before the store enlarges its map (up to
    /// ``DocStore/Options/maximumMapSize``).
    public var mapBytes: Int

    /// Bytes that hold data: the pages written, less the free ones.
    public var bytesInUse: Int { max(0, pages - freePages) * pageSize }
    /// What a compaction gives back at least: the file less what is in use. (It gives back more where pages are
    /// partly empty, as keys inserted in random order leave them: it fills every page.)
    public var reclaimableBytes: Int { max(0, fileBytes - bytesInUse) }

    public var description: String {
        "file \(fileBytes) bytes, \(bytesInUse) in use, \(freePages) free pages of \(pageSize) bytes"
    }
}

extension DocStore {
    /// Writes a copy of the store, as of its last commit, to `path`: a consistent snapshot, taken while readers and
    /// writers go on (a write of this process waits only if it must grow the map, or drops a collection or an
    /// index, meanwhile). The copy is written
    /// beside `path` and renamed onto it once complete and synced, so `path` never holds half a backup; a file
    /// already there is replaced. With `compact` (the default), the copy is written as ``compact(path:options:)``
    /// writes: no free pages, and every page full. The copy opens as a store of its own and passes ``verify()``.
    ///
    /// For example:
    /// ```swift
    /// try await store.backup(to: "/var/backups/people-\(day).db")
    /// ```
    public nonisolated func backup(to path: String, compact: Bool = true) async throws {
        try refuseWritingOverItself(path, "back up")
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw DocStoreError(.cannotOpen, "cannot back up to \(path): it is a directory; give the path of a file")
        }
        let temporary = path + ".incomplete"
        unlink(temporary)
        do {
            // The copy holds what the store holds: it may be read by whom the store may be, not by whom the umask
            // lets, from its first byte.
            try await copy(to: .path(temporary, mode: storeFileMode()), compact: compact, naming: path)
        } catch {
            unlink(temporary)
            throw error
        }
        do {
            try mapErrors { try DurableFile.replace(path, with: temporary) }
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Refuses a path that names the store's file, or its lock file, by whatever name (a link, `..`): `verb`ing
    /// the store onto it would replace the file the store has open.
    nonisolated func refuseWritingOverItself(_ path: String, _ verb: String) throws {
        guard core.file != nil, let target = FileStorage.fileID(of: path) else { return }
        guard target != FileStorage.fileID(of: self.path), target != FileStorage.fileID(of: self.path + "-lock") else {
            throw DocStoreError(.cannotOpen, "cannot \(verb) \(self.path) onto \(path): it is the store's own "
                + "file; give another path")
        }
    }

    /// The permissions of the store's file, for the copies made of it; `nil` for a store on a server.
    nonisolated func storeFileMode() -> mode_t? {
        var info = stat()
        guard core.file != nil, stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    /// Writes a copy of the store, as of its last commit, to an open file descriptor (a pipe, a socket, a file),
    /// as ``backup(to:compact:)`` does to a path, with LMDB's copy: with `compact`, free pages are left out and the
    /// others written as they are. The descriptor is neither synced nor closed.
    public nonisolated func backup(toDescriptor descriptor: Int32, compact: Bool = true) async throws {
        try await copy(to: .descriptor(descriptor), compact: compact, naming: "file descriptor \(descriptor)")
    }

    /// Copies on a thread of its own: a copy is long I/O, and must hold neither the store's thread nor the pool's.
    private nonisolated func copy(to destination: CopyDestination, compact: Bool, naming target: String) async throws {
        try checkOpen()
        let engine = UncheckedEngine(engine: try core.fileEngine(for: "a copy of the file"))
        // A read opens every key space the catalog names, if this process has not yet: a compact copy to a file
        // takes their handles (a key space not open here makes it LMDB's copy).
        if compact, case .path = destination { try await withRead { _ in } }
        for attempt in 1...4 {
            do {
                return try await DocStore.onThread("DocStore backup") {
                    try engine.engine.copy(to: destination, compact: compact)
                }
            } catch StorageError.mapGrownElsewhere where attempt < 4 {
                // A read on the store's thread adopts the size another process grew the map to.
                try await withRead { _ in }
                if case .path(let path, _) = destination { unlink(path) }
            } catch StorageError.closed {
                throw DocStoreError(.closed, "the store at \(path) is closed")
            } catch {
                throw DocStoreError(.storage, "cannot back up \(path) to \(target): \(error)", underlying: error)
            }
        }
    }

    /// The store's file: its size, what is in use, the free pages and the map, so that a user knows when
    /// compacting pays.
    ///
    /// For example:
    /// ```swift
    /// let usage = try await store.spaceUsage()
    /// if usage.reclaimableBytes > usage.fileBytes / 2 { print("compacting would give back \(usage.reclaimableBytes) bytes") }
    /// ```
    public func spaceUsage() throws -> SpaceUsage {
        try checkOpen()
        return try mapErrors {
            let file = try core.fileEngine(for: "the file's space")
            let pages = try file.pageUsage()
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            return SpaceUsage(fileBytes: size, pageSize: pages.pageSize, pages: pages.inUse, freePages: pages.free,
                              mapBytes: pages.mapBytes)
        }
    }

    /// Rewrites the closed store at `path` into a new file as small as its data (no free pages, and every page
    /// filled: each key space is written again in key order): the new file is written beside it, synced and renamed
    /// over it, and the store is whole at every moment, the old file until the rename and the new one after,
    /// whenever the process is stopped. The new file keeps the store's permissions. Returns the file's size before
    /// and after.
    ///
    /// No process may have the store open: the compaction refuses with ``DocStoreError/Code/alreadyOpen`` if one
    /// has, or opens it before the new file is in place, or opened it, wrote and closed it meanwhile (the
    /// compaction then keeps nothing of its rewrite, and the write is there). An opening in this process waits for
    /// none of this: it is refused while the compaction runs. A path that is a symbolic link stays one: the file it
    /// points to is replaced.
    ///
    /// For example:
    /// ```swift
    /// let (before, after) = try await DocStore.compact(path: "people.db")
    /// ```
    @discardableResult
    public static func compact(path: String, options: Options = Options()) async throws -> (before: Int, after: Int) {
        try await onThread("DocStore compaction") { try StoreCore.compact(path: path, options: options) }
    }

    /// Runs `body` on a new thread named `name`: long I/O that must hold neither the store's thread nor the pool's.
    static func onThread<R: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> R)
        async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try body() }) }
            thread.name = name
            thread.start()
        }
    }
}

/// The engine, handed to a copy's thread: its ``StorageEngine/copy(to:compact:)`` may run on any thread.
private struct UncheckedEngine: @unchecked Sendable {
    let engine: any FileStorageEngine
}
