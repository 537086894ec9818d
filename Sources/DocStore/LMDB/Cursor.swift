import CLMDB

/// A position in a database, used for ordered walks and range scans.
///
/// Keys and values point into the memory map and are valid until the transaction ends or writes.
struct LMDBCursor: StorageCursor {
    let raw: OpaquePointer
    unowned let transaction: LMDBTransaction

    typealias Entry = StorageEntry

    @inline(__always)
    private func step(_ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws -> Entry? {
        var k = MDB_val(mv_size: key?.count ?? 0, mv_data: UnsafeMutableRawPointer(mutating: key?.baseAddress))
        var v = MDB_val()
        let rc = mdb_cursor_get(raw, &k, &v, op)
        if rc != 0 {
            // Only here is the transaction touched: an unowned reference costs a retain and a release per step.
            if rc == MDB_NOTFOUND { return nil }
            try transaction.check(rc)
        }
        return (UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
                UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    /// Every value of a key range in one loop of `mdb_cursor_get` (`MDB_SET_RANGE`, then `MDB_NEXT`). The bound is
    /// compared once per key: a key's values are one node of its page, and each returns that node's key, at the
    /// same address (no write moves it meanwhile: `body` writes nothing).
    func forEachValue(from lower: [UInt8], below upper: [UInt8]?, _ body: (UnsafeRawBufferPointer) throws -> Bool) throws
        -> Int {
        try lower.withUnsafeBytes { lower in
            var k = MDB_val(mv_size: lower.count, mv_data: UnsafeMutableRawPointer(mutating: lower.baseAddress))
            var v = MDB_val()
            var rc = mdb_cursor_get(raw, &k, &v, lower.isEmpty ? MDB_FIRST : MDB_SET_RANGE)
            var count = 0
            var withinKey = MDB_val()
            while rc == 0 {
                if let upper, k.mv_data != withinKey.mv_data || k.mv_size != withinKey.mv_size {
                    let key = UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)
                    guard upper.withUnsafeBytes({ key.precedesInKeyOrder($0) }) else { break }
                    withinKey = k
                }
                count += 1
                guard try body(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)) else { return count }
                rc = mdb_cursor_get(raw, &k, &v, MDB_NEXT)
            }
            if rc != 0 && rc != MDB_NOTFOUND { try transaction.check(rc) }
            return count
        }
    }

    /// The first entry. The corresponding LMDB operation is `MDB_FIRST`.
    func first() throws -> Entry? { try step(MDB_FIRST) }
    /// The last entry. The corresponding LMDB operation is `MDB_LAST`.
    func last() throws -> Entry? { try step(MDB_LAST) }
    /// The next entry, duplicates included. The corresponding LMDB operation is `MDB_NEXT`.
    func next() throws -> Entry? { try step(MDB_NEXT) }
    /// The previous entry, duplicates included. The corresponding LMDB operation is `MDB_PREV`.
    func previous() throws -> Entry? { try step(MDB_PREV) }
    /// The first entry whose key is greater than or equal to `key` (the first entry of all for an empty key, which
    /// LMDB itself refuses). The corresponding LMDB operation is `MDB_SET_RANGE`.
    func seek(atLeast key: UnsafeRawBufferPointer) throws -> Entry? {
        key.isEmpty ? try first() : try step(MDB_SET_RANGE, key: key)
    }

    /// The value under exactly `key`, or `nil`. `MDB_SET`: a cursor already on the leaf page that holds `key`
    /// searches that page alone, so look-ups in key order are cheaper than `mdb_get`'s descent from the root.
    func value(forKey key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        try step(MDB_SET, key: key)?.value
    }

    /// The first entry of the next key (skipping the current key's other duplicates). `MDB_NEXT_NODUP`.
    func nextKey() throws -> Entry? { try step(MDB_NEXT_NODUP) }
    /// The last entry of the previous key. `MDB_PREV_NODUP`.
    func previousKey() throws -> Entry? { try step(MDB_PREV_NODUP) }
    /// The first duplicate of the current key. `MDB_FIRST_DUP`, then `MDB_GET_CURRENT`: LMDB returns only the
    /// data for the former, not the key.
    func firstDuplicate() throws -> Entry? {
        guard try step(MDB_FIRST_DUP) != nil else { return nil }
        return try current()
    }
    /// The last duplicate of the current key. `MDB_LAST_DUP`, then `MDB_GET_CURRENT` (which also gives the key).
    func lastDuplicate() throws -> Entry? {
        guard try step(MDB_LAST_DUP) != nil else { return nil }
        return try current()
    }
    /// The next duplicate of the current key, or `nil` after the last. `MDB_NEXT_DUP`.
    func nextDuplicate() throws -> Entry? { try step(MDB_NEXT_DUP) }
    /// The previous duplicate of the current key, or `nil` before the first. `MDB_PREV_DUP`.
    func previousDuplicate() throws -> Entry? { try step(MDB_PREV_DUP) }
    /// The entry under the cursor. `MDB_GET_CURRENT`.
    func current() throws -> Entry? { try step(MDB_GET_CURRENT) }

    /// The number of duplicates under the current key. The corresponding LMDB function is `mdb_cursor_count`.
    func duplicateCount() throws -> Int {
        var n: Int = 0
        try transaction.check(mdb_cursor_count(raw, &n))
        return n
    }
}

extension LMDBCursor {
    /// Whether the exact pair (`key`, `value`) is in a duplicate-sorted database.
    /// The corresponding LMDB operation is `MDB_GET_BOTH`.
    func contains(key: [UInt8], value: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { kb in
            try value.withUnsafeBytes { vb in
                var k = MDB_val(mv_size: kb.count, mv_data: UnsafeMutableRawPointer(mutating: kb.baseAddress))
                var v = MDB_val(mv_size: vb.count, mv_data: UnsafeMutableRawPointer(mutating: vb.baseAddress))
                let rc = mdb_cursor_get(raw, &k, &v, MDB_GET_BOTH)
                if rc == MDB_NOTFOUND { return false }
                try transaction.check(rc)
                return true
            }
        }
    }
}
