import CLMDB
import Glibc

/// An LMDB transaction, valid only inside the `read` or `write` closure that received it. A ``KeySpace`` is an LMDB
/// named database; its number is the `MDB_dbi`.
///
/// Values returned by ``get(_:_:)`` and by cursors point into the memory map: they are valid until the
/// transaction ends or the next write in it, and are copied out (or decoded) before either.
final class LMDBTransaction: StorageTransaction {
    let raw: OpaquePointer
    let isReadOnly: Bool
    /// A cursor's entries point into the memory map (or a write's own pages), where they stay until the
    /// transaction ends or writes.
    var keysStayInPlace: Bool { true }
    private(set) var isValid = true
    /// Set when any call in this transaction met `MDB_MAP_FULL`: the write is then retried with a larger map,
    /// whatever the caller did with the error.
    private(set) var metMapFull = false
    /// Set when any call in this transaction met `MDB_TXN_FULL`: as a nested transaction, it had no room left for
    /// dirty pages, which LMDB gives it only from what its parent has not used.
    private(set) var metTransactionFull = false

    /// What the transaction, with its nested ones, holds of its environment's ``TransactionGate``.
    let access: TransactionAccess
    /// Where a logged write (``WriteLog``) records its changes, with its nested transactions'; `nil` in a write
    /// that is not logged.
    var capture: WriteCapture?
    /// What undoes the changes made in ``nested(_:)`` scopes, in an environment that writes in place
    /// (`MDB_WRITEMAP`), where LMDB has no nested transactions; `nil` outside such a scope.
    private var undo: UndoJournal?
    /// Whether the environment writes its pages in place (`MDB_WRITEMAP`): ``nested(_:)`` then runs in this
    /// transaction, undoing what it changed when it throws.
    private lazy var writesInPlace: Bool = {
        var flags: UInt32 = 0
        return mdb_env_get_flags(mdb_txn_env(raw), &flags) == MDB_SUCCESS && flags & UInt32(MDB_WRITEMAP) != 0
    }()

    var changes: Int { access.changes }

    init(raw: OpaquePointer, isReadOnly: Bool, access: TransactionAccess) {
        self.raw = raw
        self.isReadOnly = isReadOnly
        self.access = access
    }

    /// The transaction's id: for a read, the id of the last commit it sees.
    ///
    /// The corresponding LMDB function is `mdb_txn_id`.
    var id: Int { Int(truncatingIfNeeded: mdb_txn_id(raw)) }

    /// Set when a change made of several LMDB calls failed after its first call: the transaction then holds half of
    /// it and must not commit.
    private(set) var interruptedChange: (any Error)?

    /// Set when a read-only transaction opened a database: LMDB keeps the handle only if the transaction commits.
    private(set) var opensKeySpaces = false
    /// Set by the environment once the transaction has committed: database handles opened in it stay open.
    var keptKeySpaces = false

    /// Cursors that outlive one call (lazy results), closed when the transaction ends.
    private var openCursors: [OpaquePointer] = []
    /// A cursor per duplicate-sorted space this write has put values in (``put(_:_:_:noOverwrite:noDuplicate:)``),
    /// kept for the next put there; closed when the transaction ends or the space is dropped.
    private var putCursors: [MDB_dbi: OpaquePointer] = [:]

    func invalidate() {
        guard isValid else { return }
        isValid = false
        for cursor in openCursors { mdb_cursor_close(cursor) }
        openCursors = []
        for cursor in putCursors.values { mdb_cursor_close(cursor) }
        putCursors = [:]
    }

    /// How many cursors from ``openCursor(_:)`` are still open.
    var openCursorCount: Int { openCursors.count }

    /// Closes a cursor from ``openCursor(_:)`` before the transaction ends (nothing, if it has ended: the cursor
    /// was closed then).
    func closeCursor(_ cursor: any StorageCursor) {
        guard isValid, let cursor = cursor as? LMDBCursor, let i = openCursors.firstIndex(of: cursor.raw) else { return }
        mdb_cursor_close(cursor.raw)
        openCursors.remove(at: i)
    }

    /// The corresponding LMDB function is `mdb_cursor_open`.
    func openCursor(_ db: KeySpace) throws -> any StorageCursor {
        let cursor = try newCursor(db)
        openCursors.append(cursor)
        return LMDBCursor(raw: cursor, transaction: self)
    }

    private func newCursor(_ db: KeySpace) throws -> OpaquePointer {
        var cursor: OpaquePointer?
        try check(mdb_cursor_open(raw, db.number, &cursor))
        guard let cursor else { throw LMDBError(code: EINVAL) }
        return cursor
    }

    func changingAtomically(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            if interruptedChange == nil { interruptedChange = error }
            throw error
        }
    }

    var mustRunAgain: Bool { metMapFull || access.needsToRunAlone }

    /// Runs `body` in a child transaction (LMDB's nested transactions): committed into this one when `body` returns,
    /// aborted alone when it throws. A child that meets a full map marks this transaction too, so that the
    /// environment grows the map and runs the whole write again.
    ///
    /// A child may dirty only the pages its parent has left of LMDB's limit (`MDB_TXN_FULL`, about 512 MiB), and
    /// cannot spill its parent's to make room: a child that runs out is refused (``StorageError/nestingRefused(_:)``)
    /// whatever `body` did with the error, as it would run in a transaction of its own.
    ///
    /// The corresponding LMDB functions are `mdb_txn_begin` (with a parent), `mdb_txn_commit` and `mdb_txn_abort`.
    func nested<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        if writesInPlace { return try undoable(body) }
        var handle: OpaquePointer?
        let begun = mdb_txn_begin(mdb_txn_env(raw), raw, 0, &handle)
        guard begun == MDB_SUCCESS, let handle else {
            throw StorageError.nestingRefused(LMDBError(code: begun == MDB_SUCCESS ? EINVAL : begun).message)
        }
        let child = LMDBTransaction(raw: handle, isReadOnly: false, access: access)
        child.capture = capture
        let openedBefore = access.opened.count
        let recordedBefore = capture?.mark()
        do {
            let result = try body(child)
            if child.metMapFull { throw LMDBError.mapFull }
            // (A transaction nested in the child ran out of room, and `body` caught its error.)
            if child.metTransactionFull { throw LMDBError(code: MDB_TXN_FULL) }
            if let interrupted = child.interruptedChange { throw StorageError.interruptedChange(interrupted) }
            child.invalidate()
            // The commit frees the child, whether it succeeds or not.
            let committed = mdb_txn_commit(handle)
            guard committed == MDB_SUCCESS else { throw StorageError.nestingRefused(LMDBError(code: committed).message) }
            return result
        } catch {
            if child.isValid { child.invalidate(); mdb_txn_abort(handle) }
            // (What the child opened is closed with it, and its changes are not recorded.)
            access.opened.removeSubrange(min(openedBefore, access.opened.count)...)
            if let recordedBefore { capture?.rollBack(to: recordedBefore) }
            if child.metMapFull { metMapFull = true }
            if child.metTransactionFull { metTransactionFull = true }
            if child.metTransactionFull, !child.metMapFull {
                throw StorageError.nestingRefused(LMDBError(code: MDB_TXN_FULL).message)
            }
            if let error = error as? LMDBError { throw error.storageError }
            throw error
        }
    }

    /// ``nested(_:)`` where LMDB has none (`MDB_WRITEMAP`): `body` runs in this transaction, and each change it
    /// makes first notes what undoes it (the value a key held, whether a key held a value, a database it made).
    /// When `body` throws, the notes are played back from the last, so that this transaction is as it was, as after
    /// a nested one's abort. A change that cannot be undone so (a database dropped or emptied), or an undo that
    /// fails, leaves the transaction unable to commit (``interruptedChange``): the whole write fails, or runs again
    /// as a whole.
    private func undoable<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        let journal = undo ?? UndoJournal()
        let outermost = undo == nil
        undo = journal
        defer { if outermost { undo = nil } }
        let mark = journal.entries.count
        let (irreversibleBefore, interruptedBefore) = (journal.irreversible, interruptedChange)
        let recordedBefore = capture?.mark()
        do {
            let result = try body(self)
            if metMapFull { throw LMDBError.mapFull }
            // (A change interrupted in `body`, which caught its error.)
            if interruptedBefore == nil, let interrupted = interruptedChange {
                throw StorageError.interruptedChange(interrupted)
            }
            return result
        } catch let thrown {
            // (LMDB's codes leave this folder as storage errors, as a nested transaction's do.)
            let error = (thrown as? LMDBError)?.storageError ?? thrown
            // A full map runs the whole write again; a transaction already unable to commit stays so.
            guard !metMapFull, interruptedBefore == nil else { throw error }
            guard !journal.irreversible || irreversibleBefore else {
                if interruptedChange == nil { interruptedChange = error }
                throw error
            }
            do {
                try rollBack(journal, to: mark)
            } catch let failure {
                // (Whatever encloses this scope cannot undo it either: the notes it would need are gone.)
                interruptedChange = failure
                journal.irreversible = true
                throw error
            }
            interruptedChange = nil
            if let recordedBefore { capture?.rollBack(to: recordedBefore) }
            throw error
        }
    }

    /// Plays `journal`'s notes back from the last down to `mark`, with LMDB's calls alone (nothing recorded).
    private func rollBack(_ journal: UndoJournal, to mark: Int) throws {
        for putCursor in putCursors.values { mdb_cursor_close(putCursor) }
        putCursors = [:]
        while journal.entries.count > mark {
            let entry = journal.entries.removeLast()
            var rc: Int32 = MDB_SUCCESS
            entry.key.withUnsafeBytes { kb in
                var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                switch entry.change {
                case .absent:
                    rc = mdb_del(raw, entry.space, &k, nil)
                case .held(let old):
                    rc = old.withUnsafeBytes { vb in
                        var v = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                        return mdb_put(raw, entry.space, &k, &v, 0)
                    }
                case .valueAbsent(let value):
                    rc = value.withUnsafeBytes { vb in
                        var v = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                        return mdb_del(raw, entry.space, &k, &v)
                    }
                case .made:
                    // Deleted, and its handle closed: nothing of the scope's names it once it has ended.
                    rc = mdb_drop(raw, entry.space, 1)
                    if rc == MDB_SUCCESS { access.opened.removeAll { $0.1 == entry.space } }
                }
            }
            if rc != MDB_NOTFOUND { try check(rc) }
        }
    }

    /// Before a change of `key` in `db` inside a ``nested(_:)`` scope that writes in place: notes what undoes it.
    /// `value`: the value a put adds to, or a delete takes from, a duplicate-sorted space; `nil` for a delete of
    /// every value the key holds.
    private func noteBeforeChanging(_ db: KeySpace, _ key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer?,
                                    deleting: Bool) throws {
        guard let undo else { return }
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        if try flags(of: db) & LMDBFlags.duplicateSort == 0 {
            var old = MDB_val()
            let rc = mdb_get(raw, db.number, &k, &old)
            if rc != MDB_NOTFOUND { try check(rc) }
            undo.entries.append(UndoJournal.Entry(space: db.number, key: Array(key), change: rc == MDB_NOTFOUND
                ? .absent : .held(Array(UnsafeRawBufferPointer(start: old.mv_data, count: old.mv_size)))))
            return
        }
        let cursor = try newCursor(db)
        defer { mdb_cursor_close(cursor) }
        if let value {
            var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
            let rc = mdb_cursor_get(cursor, &k, &v, MDB_GET_BOTH)
            if rc != MDB_NOTFOUND { try check(rc) }
            let held = rc == MDB_SUCCESS
            // A put of a value held, or a delete of one not held, changes nothing.
            guard held == deleting else { return }
            undo.entries.append(UndoJournal.Entry(space: db.number, key: Array(key),
                                                  change: deleting ? .held(Array(value)) : .valueAbsent(Array(value))))
            return
        }
        var v = MDB_val()
        var rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_KEY)
        while rc == MDB_SUCCESS {
            let held = Array(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
            undo.entries.append(UndoJournal.Entry(space: db.number, key: Array(key), change: .held(held)))
            rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT_DUP)
        }
        if rc != MDB_NOTFOUND { try check(rc) }
    }

    /// A read transaction begun now on the same environment, kept only if it sees the same commit as this one.
    ///
    /// The corresponding LMDB functions are `mdb_txn_env`, `mdb_txn_begin` and `mdb_txn_id`.
    func twin() -> (any StorageTransaction)? {
        guard isReadOnly, isValid, !opensKeySpaces, let env = mdb_txn_env(raw) else { return nil }
        var handle: OpaquePointer?
        // The environment has `MDB_NOTLS`: the new reader is not tied to this thread, nor to this one's slot.
        guard mdb_txn_begin(env, nil, LMDBFlags.readOnly, &handle) == MDB_SUCCESS, let handle else { return nil }
        guard mdb_txn_id(handle) == mdb_txn_id(raw) else {
            mdb_txn_abort(handle)
            return nil
        }
        return LMDBTransaction(raw: handle, isReadOnly: true, access: TransactionAccess(gate: access.gate))
    }

    /// Ends a transaction from ``twin()``: its cursors are closed, and it is aborted.
    ///
    /// The corresponding LMDB function is `mdb_txn_abort`.
    func end() {
        guard isValid else { return }
        invalidate()
        mdb_txn_abort(raw)
    }

    /// Checks a return code from a call made in this transaction.
    @inline(__always)
    func check(_ rc: Int32) throws(LMDBError) {
        if rc != MDB_SUCCESS {
            if rc == MDB_MAP_FULL { metMapFull = true }
            if rc == MDB_TXN_FULL { metTransactionFull = true }
            throw LMDBError(code: rc)
        }
    }

    // MARK: Databases

    /// Opens a named database, creating it when `create` is true; `nil` when it does not exist.
    ///
    /// The handle stays open after the transaction only if the transaction commits; in a read-only transaction
    /// that sets ``opensKeySpaces``, so that the environment commits it.
    ///
    /// The corresponding LMDB function is `mdb_dbi_open`.
    ///
    /// A read beside others (not alone) calls nothing of LMDB's: it looks the name up among the databases open in
    /// the process, which hold every one its catalog names (see ``DocStore``'s reads); a name not there does not
    /// exist.
    func openKeySpace(_ name: String?, create: Bool, duplicateSort: Bool, fixedSizeValues: Bool) throws -> KeySpace? {
        if let name, isReadOnly, !access.alone {
            return access.gate.openName(name).map(KeySpace.init(number:))
        }
        access.openingKeySpace(readOnly: isReadOnly)
        if isReadOnly { opensKeySpaces = true }
        var flags: UInt32 = 0
        if create { flags |= LMDBFlags.create }
        if duplicateSort { flags |= LMDBFlags.duplicateSort | (fixedSizeValues ? LMDBFlags.fixedSizeDuplicates : 0) }
        var dbi: MDB_dbi = 0
        // A logged write records a database it makes (one that is only opened changes nothing).
        let recording = create && (capture != nil || undo != nil)
        var rc = mdb_dbi_open(raw, name, recording ? flags & ~LMDBFlags.create : flags, &dbi)
        let made = recording && rc == MDB_NOTFOUND
        if made { rc = mdb_dbi_open(raw, name, flags, &dbi) }
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        if let name { access.opened.append((name, dbi)) }
        let space = KeySpace(number: dbi)
        if made { _ = recorded(space) }
        if made { undo?.entries.append(UndoJournal.Entry(space: dbi, key: [], change: .made)) }
        return space
    }

    /// The flags `db` was created with (`MDB_DUPSORT`, `MDB_DUPFIXED`...): those it keeps, whatever it is opened with.
    ///
    /// The corresponding LMDB function is `mdb_dbi_flags`.
    func flags(of db: KeySpace) throws -> UInt32 {
        var flags: UInt32 = 0
        try check(mdb_dbi_flags(raw, db.number, &flags))
        return flags
    }

    /// The corresponding LMDB function is `mdb_drop`.
    /// Deleting closes the database's handle at once, for every transaction of the process: the write must run
    /// alone (``TransactionGate``), or it fails here and the environment runs it again alone.
    func drop(_ db: KeySpace, delete: Bool) throws {
        access.changes &+= 1
        undo?.irreversible = true
        if delete { try access.deletingKeySpace() }
        if let cursor = putCursors.removeValue(forKey: db.number) { mdb_cursor_close(cursor) }
        let number = recorded(db)
        try check(mdb_drop(raw, db.number, delete ? 1 : 0))
        capture?.add(delete ? .deleteSpace : .empty, number)
        if delete {
            capture?.forget(db.number)
            access.gate.closed(db.number)
        }
    }

    /// `db`'s number in the record of a logged write (named there at its first change); `nil` if not logged.
    private func recorded(_ db: KeySpace) -> UInt16? {
        capture?.number(of: db.number) {
            guard let name = access.opened.last(where: { $0.1 == db.number })?.0 ?? access.gate.name(of: db.number)
            else { return nil }
            var flags: UInt32 = 0
            guard mdb_dbi_flags(raw, db.number, &flags) == MDB_SUCCESS else { return nil }
            return (name, flags)
        }
    }

    /// A walk of `db` read from its pages (``LMDBPageWalk``), in a read transaction only: a write's changed pages
    /// are not in the map.
    func walk(_ db: KeySpace, from lower: [UInt8]?, below upper: [UInt8]?, descending: Bool) throws -> StorageWalk? {
        guard !descending || (lower == nil && upper == nil), let tree = try tree(of: db) else { return nil }
        return try LMDBPageWalk.make(tree, from: lower, below: upper, descending: descending)
    }

    /// Keys read from the branch pages of `db` (``LMDBPageWalk/cuts(_:parts:)``), in a read transaction only.
    func cuts(_ db: KeySpace, parts: Int) throws -> [[UInt8]]? {
        try tree(of: db).map { try LMDBPageWalk.cuts($0, parts: parts) }
    }

    /// The tree of `db` as this read sees it: its record read from the main database (whose number is 1,
    /// `MAIN_DBI` in LMDB); `nil` in a write, or for a database the walk does not read.
    ///
    /// The corresponding LMDB functions are `mdb_get`, `mdb_env_stat`, `mdb_env_info` and `mdb_env_get_fd`.
    private func tree(of db: KeySpace) throws -> LMDBPageWalk.Tree? {
        if let known = trees[db.number] { return known }
        guard isReadOnly, isValid, let env = mdb_txn_env(raw),
              let name = access.opened.first(where: { $0.1 == db.number })?.0 ?? access.gate.name(of: db.number)
        else { return nil }
        var stat = MDB_stat(), info = MDB_envinfo(), descriptor: Int32 = -1, file = Glibc.stat()
        try check(mdb_env_stat(env, &stat))
        try check(mdb_env_info(env, &info))
        try check(mdb_env_get_fd(env, &descriptor))
        guard fstat(descriptor, &file) == 0 else { return nil }
        let environment = LMDBPageWalk.Tree.Environment(
            pageSize: Int(stat.ms_psize), systemPageSize: sysconf(Int32(_SC_PAGESIZE)), lastPage: UInt64(info.me_last_pgno),
            mapSize: info.me_mapsize, fileSize: Int(file.st_size), transaction: UInt64(mdb_txn_id(raw)))
        return try name.utf8CString.withUnsafeBufferPointer { bytes in
            var k = MDB_val(mv_size: bytes.count - 1, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            var v = MDB_val()
            let rc = mdb_get(raw, 1, &k, &v)
            if rc == MDB_NOTFOUND { return nil }
            try check(rc)
            let tree = try LMDBPageWalk.Tree(record: UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size),
                                             name: name, environment: environment)
            trees[db.number] = tree
            return tree
        }
    }

    /// The trees this read has read already (a split scan walks one from each of its ranges): its snapshot and the
    /// map do not change while it lasts.
    private var trees: [UInt32: LMDBPageWalk.Tree] = [:]

    /// The corresponding LMDB function is `mdb_stat`.
    func entryCount(_ db: KeySpace) throws -> Int {
        var stat = MDB_stat()
        try check(mdb_stat(raw, db.number, &stat))
        return stat.ms_entries
    }

    // MARK: Reading and writing

    /// The corresponding LMDB function is `mdb_get`.
    func get(_ db: KeySpace, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(raw, db.number, &k, &v)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc)
        return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    }

    /// The corresponding LMDB function is `mdb_put`; in a duplicate-sorted space, `mdb_cursor_put` through the
    /// space's cursor, which appends a value that orders after every value its key holds (`MDB_APPENDDUP`, as
    /// ``putInOrder(_:_:)`` does): ids written one by one in order fill their pages rather than leaving each split
    /// page half empty. (The look-up leaves the cursor on the key's page, where the put finds it again at once.)
    @discardableResult
    func put(_ db: KeySpace, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
             noOverwrite: Bool, noDuplicate: Bool) throws -> Bool {
        var flags: UInt32 = 0
        if noOverwrite { flags |= LMDBFlags.noOverwrite }
        if noDuplicate { flags |= LMDBFlags.noDuplicateData }
        let rc: Int32
        if undo != nil { try noteBeforeChanging(db, key, value: value, deleting: false) }
        if !noOverwrite, let cursor = try putCursor(db) {
            var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
            var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
            // The key's first value from `value` on: none means every value it holds orders before `value`.
            let found = mdb_cursor_get(cursor, &k, &v, MDB_GET_BOTH_RANGE)
            if found == MDB_NOTFOUND { flags |= LMDBFlags.appendDuplicate } else { try check(found) }
            k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
            v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
            access.changes &+= 1
            rc = mdb_cursor_put(cursor, &k, &v, flags)
            if rc == MDB_SUCCESS { capture?.add(.put, recorded(db), key: key, value: value) }
        } else {
            rc = put(db, key, value, flags: flags)
        }
        if rc == MDB_KEYEXIST && (noOverwrite || noDuplicate) { return false }
        try check(rc)
        return true
    }

    /// The cursor ``put(_:_:_:noOverwrite:noDuplicate:)`` keeps for `db`, made at its first put there; `nil` for a
    /// space that is not duplicate-sorted (or a read).
    private func putCursor(_ db: KeySpace) throws -> OpaquePointer? {
        if let cursor = putCursors[db.number] { return cursor }
        guard !isReadOnly, try flags(of: db) & LMDBFlags.duplicateSort != 0 else { return nil }
        let cursor = try newCursor(db)
        putCursors[db.number] = cursor
        return cursor
    }

    /// The corresponding LMDB function is `mdb_cursor_put`, through one cursor: LMDB looks for each key on the
    /// leaf page where the last one went before it descends from the root.
    func putInOrder(_ db: KeySpace,
                    _ body: (_ put: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws {
        access.changes &+= 1
        let cursor = try newCursor(db)
        defer { mdb_cursor_close(cursor) }
        // In a duplicate-sorted space, a key's values that order after every value it holds are appended
        // (`MDB_APPENDDUP`): a full page of them goes on on a new one rather than splitting in half, so that values
        // that come in order (ids, mostly) fill their pages. The greatest value is looked up once per key.
        let sorted = try flags(of: db) & LMDBFlags.duplicateSort != 0
        var key: [UInt8]?, greatest: [UInt8] = [], holdsAny = false
        try body { k, v in
            var keyValue = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
            var value = MDB_val(mv_size: v.count, mv_data: UnsafeMutableRawPointer(mutating: v.baseAddress))
            var flags: UInt32 = 0
            if sorted {
                if key.map({ !k.elementsEqual($0) }) ?? true {
                    key = Array(k)
                    var found = MDB_val()
                    var rc = mdb_cursor_get(cursor, &keyValue, &found, MDB_SET_KEY)
                    if rc == MDB_SUCCESS { rc = mdb_cursor_get(cursor, &keyValue, &found, MDB_LAST_DUP) }
                    if rc != MDB_NOTFOUND { try check(rc) }
                    holdsAny = rc == MDB_SUCCESS
                    greatest.removeAll(keepingCapacity: true)
                    if holdsAny {
                        greatest.append(contentsOf: UnsafeRawBufferPointer(start: found.mv_data, count: found.mv_size))
                    }
                    keyValue = MDB_val(mv_size: k.count, mv_data: UnsafeMutableRawPointer(mutating: k.baseAddress))
                }
                if !holdsAny || greatest.lexicographicallyPrecedes(v) {
                    flags = LMDBFlags.appendDuplicate
                    holdsAny = true
                    greatest.removeAll(keepingCapacity: true)
                    greatest.append(contentsOf: v)
                }
            }
            if undo != nil { try noteBeforeChanging(db, k, value: v, deleting: false) }
            try check(mdb_cursor_put(cursor, &keyValue, &value, flags))
            capture?.add(.put, recorded(db), key: k, value: v)
        }
    }

    /// The corresponding LMDB function is `mdb_put`, with `MDB_APPEND`.
    func append(_ db: KeySpace, _ key: [UInt8], _ value: [UInt8]) throws {
        if undo != nil {
            try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in
                try noteBeforeChanging(db, k, value: v, deleting: false)
            } }
        }
        try check(key.withUnsafeBytes { k in value.withUnsafeBytes { v in put(db, k, v, flags: LMDBFlags.append) } })
    }

    /// `mdb_put` with `flags`, its return code.
    private func put(_ db: KeySpace, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                     flags: UInt32) -> Int32 {
        access.changes &+= 1
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        let rc = mdb_put(raw, db.number, &k, &v, flags)
        if rc == MDB_SUCCESS { capture?.add(.put, recorded(db), key: key, value: value) }
        return rc
    }

    /// The corresponding LMDB function is `mdb_del`.
    @discardableResult
    func delete(_ db: KeySpace, _ key: [UInt8], value: [UInt8]?) throws -> Bool {
        access.changes &+= 1
        if undo != nil {
            try key.withUnsafeBytes { k in
                if let value {
                    try value.withUnsafeBytes { v in try noteBeforeChanging(db, k, value: v, deleting: true) }
                } else {
                    try noteBeforeChanging(db, k, value: nil, deleting: true)
                }
            }
        }
        return try key.withUnsafeBytes { kb in
            var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
            let rc: Int32
            if let value {
                rc = value.withUnsafeBytes { vb in
                    var v = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                    let rc = mdb_del(raw, db.number, &k, &v)
                    if rc == MDB_SUCCESS { capture?.add(.deleteValue, recorded(db), key: kb, value: vb) }
                    return rc
                }
            } else {
                rc = mdb_del(raw, db.number, &k, nil)
                if rc == MDB_SUCCESS { capture?.add(.delete, recorded(db), key: kb) }
            }
            if rc == MDB_NOTFOUND { return false }
            try check(rc)
            return true
        }
    }

    /// The corresponding LMDB functions are `mdb_cursor_open` and `mdb_cursor_close`.
    func withCursor<R>(_ db: KeySpace, _ body: (any StorageCursor) throws -> R) throws -> R {
        let cursor = try newCursor(db)
        defer { mdb_cursor_close(cursor) }
        return try body(LMDBCursor(raw: cursor, transaction: self))
    }
}

/// What one transaction, with its nested ones, holds of its environment's ``TransactionGate``.
final class TransactionAccess {
    let gate: TransactionGate
    /// The write runs alone: no read transaction of the process is open meanwhile.
    let alone: Bool
    private var holdsKeySpaces = false
    /// Set when the transaction was to delete a database without running alone.
    private(set) var needsToRunAlone = false
    /// The databases opened in the transaction, by name: open in the process once it commits.
    var opened: [(String, UInt32)] = []
    /// ``LMDBTransaction/changes``, of the write and its nested transactions together.
    var changes = 0

    init(gate: TransactionGate, alone: Bool = false) {
        self.gate = gate
        self.alone = alone
    }

    /// Before `mdb_dbi_open` in `txn`: waits for a transaction that opened a database to end, then holds the right
    /// until this one ends. A read beside others takes nothing: it only looks up databases already open in the
    /// process before it began (see ``DocStore``'s reads), which changes nothing LMDB shares.
    func openingKeySpace(readOnly: Bool) {
        guard !holdsKeySpaces, alone || !readOnly else { return }
        gate.keySpaces.lock()
        holdsKeySpaces = true
    }

    /// Before a database is deleted: throws unless the write runs alone.
    func deletingKeySpace() throws {
        guard alone else {
            needsToRunAlone = true
            throw StorageError.failed("a database is deleted only by a write that runs alone")
        }
    }

    /// Once the transaction has committed (a read's included): what it opened stays open.
    func committed() {
        gate.opened(opened)
        opened = []
    }

    /// When the transaction has ended (committed, reset or aborted). Called again, it does nothing.
    func ended() {
        guard holdsKeySpaces else { return }
        holdsKeySpaces = false
        gate.keySpaces.unlock()
    }
}

/// The notes ``LMDBTransaction`` keeps, inside ``LMDBTransaction/nested(_:)`` scopes of an environment that writes in
/// place, to undo what they changed: for each change, in order, what its key held before it.
final class UndoJournal {
    struct Entry {
        enum Change {
            /// The key held no value (a space that is not duplicate-sorted): undone by deleting it.
            case absent
            /// The key held this value (or, in a duplicate-sorted space, held it among others): put back.
            case held([UInt8])
            /// A duplicate-sorted key did not hold this value: undone by deleting the value.
            case valueAbsent([UInt8])
            /// The database was made (``key`` is empty): undone by deleting it.
            case made
        }
        let space: MDB_dbi
        let key: [UInt8]
        let change: Change
    }
    var entries: [Entry] = []
    /// Set once a scope made a change the notes cannot undo (a database dropped or emptied).
    var irreversible = false
}
