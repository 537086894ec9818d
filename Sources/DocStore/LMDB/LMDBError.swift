import CLMDB
import Glibc

/// An error reported by LMDB itself, with LMDB's own code and text. It never leaves this folder: the environment
/// turns it into a ``StorageError`` (``storageError``).
struct LMDBError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The return code: an `MDB_*` code (negative) or an `errno` value (positive).
    let code: Int32

    init(code: Int32) { self.code = code }

    /// The map is full: the one code the environment acts on (it grows the map and tries again).
    static let mapFull = LMDBError(code: MDB_MAP_FULL)

    /// LMDB's text for the code (`mdb_strerror`), which covers `errno` values too.
    var message: String { String(cString: mdb_strerror(code)) }

    var description: String { "LMDB error \(code): \(message)" }
}

extension LMDBError {
    /// The storage interface's kind of this error.
    var storageError: StorageError {
        switch code {
        case MDB_INVALID, MDB_VERSION_MISMATCH, MDB_INCOMPATIBLE: .notAStore("it is not an LMDB file (\(message))")
        case EACCES, EPERM, EROFS: .permissionDenied(message)
        case MDB_CORRUPTED, MDB_PAGE_NOTFOUND: .damaged("LMDB met a page it cannot read (\(message))")
        default: .failed("LMDB failed: \(message)")
        }
    }
}

/// The one place where LMDB return codes become Swift errors.
///
/// Every `mdb_*` call that returns a code goes through here.
@inline(__always)
func lmdbCheck(_ rc: Int32) throws(LMDBError) {
    if rc != MDB_SUCCESS { throw LMDBError(code: rc) }
}
