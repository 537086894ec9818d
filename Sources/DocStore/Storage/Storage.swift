import Foundation

/// The storage a store runs on, as every layer above it sees it: named spaces of ordered keys and values,
/// transactions, cursors and counts: what any engine offers. What an engine kept in one file adds (copies, page
/// usage, the structural check and salvage, the lock file) is ``FileStorageEngine`` (FileStorage.swift). LMDB
/// implements both (the `LMDB` folder, the only code that calls LMDB); no type of that implementation is named
/// above this interface.
///
/// Keys are compared as bytes. A space may be *duplicate-sorted*: a key then holds several values, kept in byte
/// order (index entries are stored so, one value per document id).

/// A handle on one space of keys, as the engine numbers it. Valid in the store that opened it.
package struct KeySpace: Hashable, Sendable {
    package let number: UInt32

    package init(number: UInt32) { self.number = number }

    /// The name of the space that holds the store's catalog: read by every transaction, changed by few.
    package static let catalogName = "__docstore__"
}

/// A key and its value. Both point into storage the engine owns: valid until the transaction ends or next writes
/// (a passing cursor's, until it next moves: ``StorageTransaction/withPassingCursor(_:_:)``), and copied out (or
/// decoded) before either.
package typealias StorageEntry = (key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)

/// An engine: its transactions, and what every engine offers whatever keeps its data (a file, a server).
package protocol StorageEngine: AnyObject {
    /// Runs `body` in a read transaction that sees the last committed state.
    func read<R>(_ body: (any StorageTransaction) throws -> R) throws -> R
    /// Runs `body` in a write transaction, committed when it returns and rolled back when it throws. `body` may run
    /// more than once (when the file must grow, or a server asks for it again): it must have no effect outside the
    /// transaction.
    func write<R>(_ body: (any StorageTransaction) throws -> R) throws -> R
    /// The id of the last committed write, by any process: it changes with every commit.
    func lastCommittedTransaction() throws -> Int
    /// Closes the engine, after making every commit durable; later calls throw ``StorageError/closed``.
    func close()
    /// Makes every commit so far durable, whatever the durability of each commit.
    func flush() throws
}

/// A transaction, valid only inside the `read` or `write` closure that received it.
package protocol StorageTransaction: AnyObject {
    var isReadOnly: Bool { get }
    /// False once the transaction has ended.
    var isValid: Bool { get }
    /// How many changes (puts, deletes, drops) the write and its nested transactions have asked for so far: bytes
    /// read before code that may write still hold when it is the same after.
    var changes: Int { get }
    /// For a read, the id of the last commit it sees.
    var id: Int { get }
    /// Whether this transaction opened key spaces, and whether they stay open after it (they do once it commits).
    var opensKeySpaces: Bool { get }
    var keptKeySpaces: Bool { get }

    /// Opens a named key space, creating it when `create` is true; `nil` when it does not exist. A space opened or
    /// dropped in a transaction that does not commit is closed with it: its handle must not be used again.
    ///
    /// A duplicate-sorted space whose values all have one size (`fixedSizeValues`, which an engine may ignore)
    /// keeps a key's values side by side, without a node each; a value of another size must then not be put.
    func openKeySpace(_ name: String?, create: Bool, duplicateSort: Bool, fixedSizeValues: Bool) throws -> KeySpace?
    /// Removes every entry of a space, keeping the space (`delete: false`), or deletes it too.
    func drop(_ space: KeySpace, delete: Bool) throws
    /// The number of entries (duplicates included), in O(1).
    func entryCount(_ space: KeySpace) throws -> Int

    /// The value stored under `key`, or `nil`.
    func get(_ space: KeySpace, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer?
    /// Stores `value` under `key`. Returns `false`, writing nothing, when `noOverwrite` is set and the key exists
    /// (or, in a duplicate-sorted space with `noDuplicate`, the pair exists).
    @discardableResult
    func put(_ space: KeySpace, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
             noOverwrite: Bool, noDuplicate: Bool) throws -> Bool
    /// Stores `value` under `key`, which orders after every key of the space (not a duplicate-sorted one): the
    /// entry goes at the end, and a full last page is continued on a new one rather than split in half, so that
    /// keys that come in order fill their pages. A key that does not order last is an error.
    func append(_ space: KeySpace, _ key: [UInt8], _ value: [UInt8]) throws
    /// Stores many entries as ``put(_:_:_:noOverwrite:noDuplicate:)`` does with neither flag: `body` hands each to
    /// the function it is given, in key order (and in value order within a key), so that an engine that walks to
    /// each place from the last one (a cursor on a leaf page) descends from the root only when it leaves it.
    func putInOrder(_ space: KeySpace,
                    _ body: (_ put: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws
    /// Deletes `key` (with `value`, only that duplicate). Returns `false` when there was nothing to delete.
    @discardableResult
    func delete(_ space: KeySpace, _ key: [UInt8], value: [UInt8]?) throws -> Bool
    /// The entries (duplicates included) whose keys lie in `lower..<upper` (to the end for `nil`), counting no
    /// further than `limit` when one is given: on an engine with round trips, counted where they are kept; else by
    /// the cursor, a key's duplicates at once.
    func entryCount(_ space: KeySpace, from lower: [UInt8], below upper: [UInt8]?, atMost limit: Int?) throws -> Int
    /// The distinct keys in `lower..<upper` (past `after`, when given), in order, at most `limit` of them, each with
    /// its first value and its number of values: on an engine with round trips, summed up where the entries are, so
    /// that a walk of groups fetches a row per key.
    func keySummaries(_ space: KeySpace, from lower: [UInt8], after: [UInt8]?, below upper: [UInt8]?, atMost limit: Int)
        throws -> [(key: [UInt8], first: [UInt8], count: Int)]
    /// Several ``entryCount(_:from:below:atMost:)``s, each up to `limit`: in one round trip on an engine with them.
    func entryCounts(_ ranges: [(space: KeySpace, lower: [UInt8], upper: [UInt8]?)], atMost limit: Int?) throws -> [Int]
    /// Reads the values under these keys ahead, for the ``get(_:_:)``s that follow before the next write: an
    /// engine with a round trip per call asks for them all in one. Does nothing on an engine without round trips.
    ///
    /// `expectingAbsent` says that the caller refuses its write when any of them is there (an insert's checks): an
    /// engine with round trips may then take them as absent without asking, check with the commit that none was
    /// there, and run the transaction again (reading them) when one was.
    func prefetch(_ keys: [(KeySpace, [UInt8])], expectingAbsent: Bool) throws
    /// Deletes as ``delete(_:_:value:)`` does, for a caller that needs no answer: an engine with a round trip per
    /// call sends it with the next statement that waits, as it sends a ``put(_:_:_:noOverwrite:noDuplicate:)``
    /// that has nothing to refuse.
    func discard(_ space: KeySpace, _ key: [UInt8], value: [UInt8]?) throws

    /// Whether reading many values in one call (``entries(_:forKeys:)``) saves time over one ``get(_:_:)`` each:
    /// an engine with a round trip per call says so, and walks that read documents by id read them in batches.
    var prefersBatches: Bool { get }
    /// Whether the bytes of an entry a cursor returns lie in place until the transaction ends or writes, each key
    /// at an address no other key has meanwhile: a walk may then tell a key's next value from a new key by the
    /// key's address. An engine that copies entries into buffers it reuses says no.
    var keysStayInPlace: Bool { get }
    /// The entries under those of `keys` that exist, in the order of `keys`, and an object that keeps their bytes
    /// valid while it lives and the transaction neither ends nor writes (an engine that keeps what it fetched until
    /// the transaction ends need not keep these: a walk that reads documents by id in batches holds only the last
    /// ones).
    func entries(_ space: KeySpace, forKeys keys: [[UInt8]]) throws -> (entries: [StorageEntry], keeper: AnyObject?)

    /// A walk of the entries of `space` whose keys lie in `lower..<upper` (`nil`: from the first, to the end), or of
    /// every entry backwards from the last (`descending`, with no bounds): an engine that can read its pages itself
    /// hands each next one to the processor before the walk reaches it. `nil` where the engine has none (a write, a
    /// duplicate-sorted space): a cursor walks instead. Valid as a cursor's entries are.
    func walk(_ space: KeySpace, from lower: [UInt8]?, below upper: [UInt8]?, descending: Bool) throws -> StorageWalk?
    /// Keys, increasing, that cut `space` into about `parts` ranges of about as many entries each, as the engine
    /// knows from how it keeps them; `nil` when it cannot say.
    func cuts(_ space: KeySpace, parts: Int) throws -> [[UInt8]]?

    /// Opens a cursor, closed when `body` returns.
    func withCursor<R>(_ space: KeySpace, _ body: (any StorageCursor) throws -> R) throws -> R
    /// Opens a cursor as ``withCursor(_:_:)`` does, for a walk that holds no entry past the cursor's next move (nor
    /// past `body`): an engine that keeps what it fetched until the transaction ends, so that entries stay valid that
    /// long, may let go of each part of the walk as the walk leaves it: a walk of a space larger than memory then
    /// holds only the part it is in.
    func withPassingCursor<R>(_ space: KeySpace, _ body: (any StorageCursor) throws -> R) throws -> R
    /// The value under `key`, copied (the first, in a duplicate-sorted space): an engine that keeps what it fetched
    /// until the transaction ends need not keep it.
    func copiedValue(_ space: KeySpace, _ key: [UInt8]) throws -> [UInt8]?
    /// Opens a cursor that stays open until the transaction ends or ``closeCursor(_:)``; check ``isValid`` before
    /// each use.
    func openCursor(_ space: KeySpace) throws -> any StorageCursor
    /// Opens a cursor as ``openCursor(_:)`` does, for a walk that holds no entry past the cursor's next move, as
    /// ``withPassingCursor(_:_:)`` does.
    func openPassingCursor(_ space: KeySpace) throws -> any StorageCursor
    /// Opens a cursor as ``openCursor(_:)`` does, over a space whose values are keys of `documents` (an index's
    /// entries, whose values are ids) whose values the caller reads as it walks: an engine with round trips may
    /// fetch those with the entries (``StorageCursor/fetchedDocument()``). `nil` when the engine does not.
    func openCursor(_ space: KeySpace, fetchingValuesIn documents: KeySpace) throws -> (any StorageCursor)?
    /// Closes a cursor from ``openCursor(_:)`` early (nothing, if the transaction has ended).
    func closeCursor(_ cursor: any StorageCursor)

    /// Runs a change made of several calls; if one fails after others succeeded, the transaction cannot commit,
    /// whatever the caller does with the error.
    func changingAtomically(_ body: () throws -> Void) throws

    /// Runs `body` in a write transaction nested in this one: what it changes becomes part of this one when `body`
    /// returns, and is undone alone when it throws, leaving this transaction as it was before. This transaction
    /// must not be used until `body` ends. A nested transaction that meets a full map makes this one
    /// ``mustRunAgain``; one that cannot begin or commit (not for anything `body` did) throws
    /// ``StorageError/nestingRefused(_:)``.
    func nested<R>(_ body: (any StorageTransaction) throws -> R) throws -> R
    /// Whether the transaction met a full map: it will not commit, and the engine runs its writer again with a
    /// larger map (or fails with ``StorageError/full(maximum:)``).
    var mustRunAgain: Bool { get }

    /// A second read-only transaction that sees exactly what this one sees, for another thread to read beside it
    /// (each transaction is used by one thread at a time); `nil` when there can be none: this one writes, opened a
    /// key space the other could not use, or a commit came in between. The caller ends it with ``end()`` before
    /// this one ends.
    func twin() -> (any StorageTransaction)?
    /// Ends a transaction from ``twin()``.
    func end()
}

extension StorageTransaction {
    var prefersBatches: Bool { false }
    package var keysStayInPlace: Bool { false }

    func discard(_ space: KeySpace, _ key: [UInt8], value: [UInt8]?) throws { _ = try delete(space, key, value: value) }
    package func append(_ space: KeySpace, _ key: [UInt8], _ value: [UInt8]) throws { try put(space, key, value) }
    package func putInOrder(_ space: KeySpace,
                            _ body: (_ put: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws {
        try body { key, value in _ = try put(space, key, value, noOverwrite: false, noDuplicate: false) }
    }

    func prefetch(_ keys: [(KeySpace, [UInt8])], expectingAbsent: Bool) throws {}
    package func walk(_ space: KeySpace, from lower: [UInt8]?, below upper: [UInt8]?, descending: Bool) throws
        -> StorageWalk? { nil }
    package func cuts(_ space: KeySpace, parts: Int) throws -> [[UInt8]]? { nil }
    func openCursor(_ space: KeySpace, fetchingValuesIn documents: KeySpace) throws -> (any StorageCursor)? { nil }
    func prefetch(_ keys: [(KeySpace, [UInt8])]) throws { try prefetch(keys, expectingAbsent: false) }

    func keySummaries(_ space: KeySpace, from lower: [UInt8], after: [UInt8]?, below upper: [UInt8]?, atMost limit: Int)
        throws -> [(key: [UInt8], first: [UInt8], count: Int)] {
        try withCursor(space) { cursor in
            var found: [(key: [UInt8], first: [UInt8], count: Int)] = []
            var entry = try cursor.seek(atLeast: after ?? lower)
            if let after, let (key, _) = entry, key.elementsEqual(after) { entry = try cursor.nextKey() }
            while let (key, value) = entry, upper.map({ key.lexicographicallyPrecedes($0) }) ?? true, found.count < limit {
                found.append((Array(key), Array(value), try cursor.duplicateCount()))
                entry = try cursor.nextKey()
            }
            return found
        }
    }

    func entryCounts(_ ranges: [(space: KeySpace, lower: [UInt8], upper: [UInt8]?)], atMost limit: Int?) throws -> [Int] {
        try ranges.map { try entryCount($0.space, from: $0.lower, below: $0.upper, atMost: limit) }
    }

    func entryCount(_ space: KeySpace, from lower: [UInt8], below upper: [UInt8]?, atMost limit: Int?) throws -> Int {
        try withCursor(space) { cursor in
            var total = 0
            var entry = try lower.withUnsafeBytes { try cursor.seek(atLeast: $0, below: upper) }
            while let (key, _) = entry, upper.map({ key.lexicographicallyPrecedes($0) }) ?? true, total < limit ?? .max {
                total += try cursor.duplicateCount()
                entry = try cursor.nextKey()
            }
            return total
        }
    }

    /// One ``get(_:_:)`` per key; the keys' bytes are copied into the keeper.
    func entries(_ space: KeySpace, forKeys keys: [[UInt8]]) throws -> (entries: [StorageEntry], keeper: AnyObject?) {
        let copies = KeyCopies(keys)
        var found: [StorageEntry] = []
        for (i, key) in keys.enumerated() {
            if let value = try get(space, key) { found.append((copies.key(i), value)) }
        }
        return (found, copies)
    }

    func openKeySpace(_ name: String?, create: Bool) throws -> KeySpace? {
        try openKeySpace(name, create: create, duplicateSort: false, fixedSizeValues: false)
    }

    /// A space of values of any size, each key's sorted (`duplicateSort`) or not.
    func openKeySpace(_ name: String?, create: Bool, duplicateSort: Bool) throws -> KeySpace? {
        try openKeySpace(name, create: create, duplicateSort: duplicateSort, fixedSizeValues: false)
    }

    func get(_ space: KeySpace, _ key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        try key.withUnsafeBytes { try get(space, $0) }
    }

    @discardableResult
    func put(_ space: KeySpace, _ key: [UInt8], _ value: [UInt8],
             noOverwrite: Bool = false, noDuplicate: Bool = false) throws -> Bool {
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in try put(space, k, v, noOverwrite: noOverwrite, noDuplicate: noDuplicate) }
        }
    }

    @discardableResult
    func delete(_ space: KeySpace, _ key: [UInt8]) throws -> Bool { try delete(space, key, value: nil) }

    func withPassingCursor<R>(_ space: KeySpace, _ body: (any StorageCursor) throws -> R) throws -> R {
        try withCursor(space, body)
    }

    func copiedValue(_ space: KeySpace, _ key: [UInt8]) throws -> [UInt8]? {
        try get(space, key).map { Array($0) }
    }

    func openPassingCursor(_ space: KeySpace) throws -> any StorageCursor { try openCursor(space) }

    /// Calls `body` with each entry of `space` whose key starts with `prefix` (every entry, for an empty prefix),
    /// in key order, duplicates included. An entry is valid only during its call of `body`
    /// (``withPassingCursor(_:_:)``): copy what is kept.
    func forEachEntry(in space: KeySpace, prefix: [UInt8] = [],
                      _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void) throws {
        try withPassingCursor(space) { cursor in
            var entry = try cursor.seek(atLeast: prefix)
            while let (key, value) = entry, key.starts(with: prefix) {
                try body(key, value)
                entry = try cursor.next()
            }
        }
    }
}

/// The entries of a key space in key order, or its reverse, one after the other: what
/// ``StorageTransaction/walk(_:from:below:descending:)`` returns. A class, not a protocol, so that a scan holds it
/// unretained (a retain and a release per entry cost a scan more than the step).
package class StorageWalk {
    /// The next entry, or `nil` after the last. Every engine's walk overrides it.
    package func next() throws -> StorageEntry? { nil }
}

/// A position in a key space, for ordered walks and range scans. Each move returns the entry it lands on, or `nil`
/// past either end.
package protocol StorageCursor {
    func first() throws -> StorageEntry?
    func last() throws -> StorageEntry?
    /// The next entry, duplicates included.
    func next() throws -> StorageEntry?
    func previous() throws -> StorageEntry?
    /// The first entry whose key is greater than or equal to `key` (the first of all for an empty key).
    func seek(atLeast key: UnsafeRawBufferPointer) throws -> StorageEntry?
    /// The first entry whose key lies in `key..<upper`, for a walk forward that stops at `upper`: an engine that
    /// fetches ahead fetches that range, and may end the walk there (``next()`` then returns `nil`).
    func seek(atLeast key: UnsafeRawBufferPointer, below upper: [UInt8]?) throws -> StorageEntry?
    /// The value under exactly `key`, or `nil`; cheaper than a transaction's `get` for look-ups in key order.
    func value(forKey key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer?
    /// The first entry of the next key, skipping the current key's other values.
    func nextKey() throws -> StorageEntry?
    /// The last entry of the previous key.
    func previousKey() throws -> StorageEntry?
    func firstDuplicate() throws -> StorageEntry?
    func lastDuplicate() throws -> StorageEntry?
    /// The next value of the current key, or `nil` after its last.
    func nextDuplicate() throws -> StorageEntry?
    func previousDuplicate() throws -> StorageEntry?
    /// How many values the current key holds.
    func duplicateCount() throws -> Int
    /// Whether the exact pair (`key`, `value`) is in a duplicate-sorted space.
    func contains(key: [UInt8], value: [UInt8]) throws -> Bool
    /// For a cursor from ``StorageTransaction/openCursor(_:fetchingValuesIn:)``: the value under the current
    /// entry's value in the other space, fetched with the entry (`.some(nil)` when there is none there); `nil`
    /// when it was not fetched, and must be read. Its bytes last as an entry's do (``StorageEntry``).
    func fetchedDocument() -> UnsafeRawBufferPointer??
    /// Says that the walk will likely read about `count` entries, forward, from where it is placed next: an engine
    /// that fetches ahead sizes that fetch to them (a page of results costs one round trip).
    func expect(about count: Int)
    /// Calls `body` with the value of each entry whose key lies in `lower..<upper` (`upper` `nil`: to the end), in
    /// key order, until it returns `false`, and returns how many it was called with: for a walk that takes the
    /// values of a range and nothing else. `body` must not write.
    func forEachValue(from lower: [UInt8], below upper: [UInt8]?, _ body: (UnsafeRawBufferPointer) throws -> Bool) throws
        -> Int
}

extension StorageCursor {
    func fetchedDocument() -> UnsafeRawBufferPointer?? { nil }
    func expect(about count: Int) {}

    func seek(atLeast key: [UInt8]) throws -> StorageEntry? {
        try key.withUnsafeBytes { try seek(atLeast: $0) }
    }

    func seek(atLeast key: UnsafeRawBufferPointer, below upper: [UInt8]?) throws -> StorageEntry? {
        let entry = try seek(atLeast: key)
        guard let upper, let found = entry else { return entry }
        return found.key.lexicographicallyPrecedes(upper) ? found : nil
    }

    package func forEachValue(from lower: [UInt8], below upper: [UInt8]?,
                              _ body: (UnsafeRawBufferPointer) throws -> Bool) throws -> Int {
        var entry = try lower.withUnsafeBytes { try seek(atLeast: $0, below: upper) }
        var count = 0
        while let (key, value) = entry {
            if let upper, !key.lexicographicallyPrecedes(upper) { break }
            count += 1
            guard try body(value) else { break }
            entry = try next()
        }
        return count
    }
}

/// Why storage refused, in terms the store explains to its user.
package enum StorageError: Error, CustomStringConvertible {
    /// The write needs more room than the file may take (`maximum` bytes); nothing was written.
    case full(maximum: Int)
    /// The engine was closed.
    case closed
    /// A change made of several calls failed after its first, so the transaction was rolled back.
    case interruptedChange(any Error)
    /// The file is not one of this engine's.
    case notAStore(String)
    /// The file or its folder may not be changed by this process (or the store was opened read-only).
    case permissionDenied(String)
    /// Opened read-only, the lock file cannot be opened and another process has the file open.
    case lockFileUnavailable(String)
    /// The file is already open in this process.
    case alreadyOpenInProcess
    /// Another process has the file open, and the operation needs it to itself.
    case openElsewhere
    /// Another process has the file open for itself alone (``FileStorage/Configuration/exclusive``).
    case openExclusivelyElsewhere
    /// Another process wrote to the file while the operation, which needs it to itself, was under way; what the
    /// operation made was thrown away.
    case writtenMeanwhile
    /// Another process grew the map past this process's: the store must adopt the new size (on its own thread,
    /// with no transaction running) before the operation is tried again.
    case mapGrownElsewhere
    /// A transaction could not begin or commit a nested one (no memory for it, or too many pages changed): what
    /// the nested one would have done must be done in a transaction of its own.
    case nestingRefused(String)
    /// The engine met a page of the file that is not what it should be.
    case damaged(String)
    /// The connection was lost while a transaction committed, and whether it committed cannot be known.
    case outcomeUnknown(String)
    /// Anything else, in the engine's words.
    case failed(String)

    package var description: String {
        switch self {
        case .full(let maximum): "the file would grow past its maximum of \(maximum >> 20) MiB"
        case .closed: "the store is closed"
        case .interruptedChange(let error): "a change failed halfway: \(error)"
        case .notAStore(let why), .permissionDenied(let why), .lockFileUnavailable(let why), .damaged(let why),
             .outcomeUnknown(let why), .failed(let why): why
        case .alreadyOpenInProcess: "the file is already open in this process"
        case .openElsewhere: "another process has the file open"
        case .openExclusivelyElsewhere: "another process has the file open for itself alone"
        case .writtenMeanwhile: "another process wrote to the file meanwhile"
        case .mapGrownElsewhere: "another process grew the file's map"
        case .nestingRefused(let why): "a nested transaction was refused: \(why)"
        }
    }
}

/// Copies of keys in memory of their own, for ``StorageTransaction/entries(_:forKeys:)``.
private final class KeyCopies {
    private let storage: UnsafeMutableRawBufferPointer
    private var ends: [Int] = []

    init(_ keys: [[UInt8]]) {
        storage = .allocate(byteCount: max(1, keys.reduce(0) { $0 + $1.count }), alignment: 1)
        var end = 0
        for key in keys {
            UnsafeMutableRawBufferPointer(rebasing: storage[end..<end + key.count]).copyBytes(from: key)
            end += key.count
            ends.append(end)
        }
    }

    deinit { storage.deallocate() }

    func key(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[(i == 0 ? 0 : ends[i - 1])..<ends[i]])
    }
}
