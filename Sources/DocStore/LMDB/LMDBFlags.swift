import CLMDB

/// LMDB's flag macros arrive in Swift as `Int32`; the functions take `UInt32`. They are converted here, once.
enum LMDBFlags {
    static let noSubdirectory = UInt32(MDB_NOSUBDIR)
    static let noThreadLocalStorage = UInt32(MDB_NOTLS)
    static let readOnly = UInt32(MDB_RDONLY)
    static let noLock = UInt32(MDB_NOLOCK)
    static let noSync = UInt32(MDB_NOSYNC)
    /// Commits change their pages in place, in a writable map, rather than writing copies with `pwrite`. LMDB then
    /// has no nested transactions (``LMDBTransaction/nested(_:)`` undoes by notes instead), keeps the file as long as
    /// the map, and must be the only process with the file open.
    static let writeMap = UInt32(MDB_WRITEMAP)
    static let noMetaSync = UInt32(MDB_NOMETASYNC)
    static let create = UInt32(MDB_CREATE)
    static let duplicateSort = UInt32(MDB_DUPSORT)
    static let fixedSizeDuplicates = UInt32(MDB_DUPFIXED)
    static let noOverwrite = UInt32(MDB_NOOVERWRITE)
    static let noDuplicateData = UInt32(MDB_NODUPDATA)
    static let append = UInt32(MDB_APPEND)
    static let appendDuplicate = UInt32(MDB_APPENDDUP)
    static let copyCompact = UInt32(MDB_CP_COMPACT)
}
