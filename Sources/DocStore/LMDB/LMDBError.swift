import CLMDB

/// An error reported by LMDB itself, with LMDB's own code and text.
///
/// DocStore wraps these in ``DocStoreError`` where it can say more (which collection, which index),
/// and keeps the original as the underlying error.
///
/// For example:
/// ```swift
/// do { try await store.insert(person) }
/// catch let error as DocStoreError where error.underlying is LMDBError { print(error) }
/// ```
public struct LMDBError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The return code: an `MDB_*` code (negative) or an `errno` value (positive).
    public let code: Int32

    public init(code: Int32) { self.code = code }

    public static let keyExists = LMDBError(code: MDB_KEYEXIST)
    public static let notFound = LMDBError(code: MDB_NOTFOUND)
    public static let corrupted = LMDBError(code: MDB_CORRUPTED)
    public static let panic = LMDBError(code: MDB_PANIC)
    public static let versionMismatch = LMDBError(code: MDB_VERSION_MISMATCH)
    public static let invalid = LMDBError(code: MDB_INVALID)
    public static let mapFull = LMDBError(code: MDB_MAP_FULL)
    public static let databasesFull = LMDBError(code: MDB_DBS_FULL)
    public static let readersFull = LMDBError(code: MDB_READERS_FULL)
    public static let transactionFull = LMDBError(code: MDB_TXN_FULL)
    public static let mapResized = LMDBError(code: MDB_MAP_RESIZED)
    public static let incompatible = LMDBError(code: MDB_INCOMPATIBLE)
    public static let badTransaction = LMDBError(code: MDB_BAD_TXN)
    public static let badValueSize = LMDBError(code: MDB_BAD_VALSIZE)

    /// LMDB's text for the code (`mdb_strerror`), which covers `errno` values too.
    public var message: String { String(cString: mdb_strerror(code)) }

    public var description: String { "LMDB error \(code): \(message)" }
}

/// The one place where LMDB return codes become Swift errors.
///
/// Every `mdb_*` call that returns a code goes through here.
@inline(__always)
func lmdbCheck(_ rc: Int32) throws(LMDBError) {
    if rc != MDB_SUCCESS { throw LMDBError(code: rc) }
}
