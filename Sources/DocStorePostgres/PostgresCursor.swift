import DocStore

/// A cursor over one key space's table: it fetches a window of rows at a time in the direction it moves, each
/// window up to four times the last (16 rows first, 4,096 at most), so that a look-up costs one small fetch and a
/// long walk few round trips. A window fetched before the transaction wrote to the cursor's space (or to the space of
/// the documents fetched with it) is fetched again from the cursor's entry, so a walk sees the transaction's own
/// writes as an LMDB cursor does.
///
/// An entry points into the window's answer, which the transaction keeps until it ends; or, for a walk that holds
/// no entry past the next move (``PostgresTransaction/withPassingCursor(_:_:)``), which the cursor keeps until it
/// moves to another window.
final class PostgresCursor: StorageCursor {
    private let txn: PostgresTransaction
    private let table: String
    private let duplicateSorted: Bool
    /// Whether the transaction keeps the windows until it ends.
    private let keepsWindows: Bool
    /// The rows fetched last, in the order they were asked for.
    private var window: Window?
    /// The current row of ``window``.
    private var index = 0
    private var state = State.unset
    private var limit = 16
    /// Where the walk placed by ``seek(atLeast:below:)`` ends: the windows after the first stop there too.
    private var upperBound: [UInt8]?

    private enum State {
        case unset
        case onRow
        /// Past the last entry; ``index`` is the last row (if the window holds it), so that a step back finds it.
        case pastEnd
        /// Before the first entry; likewise.
        case beforeStart
    }

    private struct Window {
        let answer: PostgresResult
        let count: Int
        /// Fetched in descending order.
        let descending: Bool
        /// Nothing lies beyond its last row in its direction.
        let reachesEnd: Bool
        /// Its first row is the first value of its key in its direction: it was fetched from a key on, not from
        /// the middle of a key's values.
        let startsAtKey: Bool
        let generation: Int
    }

    /// The table whose rows the entries' values name, fetched with each window (a third column, null where the
    /// row is missing): see ``fetchedDocument()``.
    private let documents: String?
    private let documentSpace: KeySpace?

    /// Changes when a write may have changed the entries, or the documents fetched with them.
    private var generation: Int {
        txn.generation(of: space) + (documentSpace.map { txn.generation(of: $0.number) } ?? 0)
    }
    private let space: UInt32

    init(transaction: PostgresTransaction, space: KeySpace, documents: KeySpace? = nil, keepingWindows: Bool = true) {
        self.txn = transaction
        self.space = space.number
        self.table = transaction.table(space)
        self.duplicateSorted = transaction.isDuplicateSorted(space)
        keepsWindows = keepingWindows
        self.documents = documents.map(transaction.table)
        documentSpace = documents
    }

    /// `rows` (a window's `k`, `v`), with each row's document when the cursor fetches them: a look-up per row,
    /// whatever the plan kept for the statement guesses of its limit (a join may be planned as a scan of the whole
    /// table).
    private func along(_ rows: String, descending: Bool) -> String {
        guard let documents else { return rows }
        return "SELECT w.k, w.v, (SELECT d.v FROM \(documents) AS d WHERE d.k = w.v) FROM (\(rows)) AS w ORDER BY "
            + (descending ? "w.k DESC, w.v DESC" : "w.k, w.v")
    }

    /// The size of the next window fetched from a new place, when the walk said how many entries it will likely
    /// read from there (``expect(about:)``): used once.
    private var expected: Int?

    func expect(about count: Int) { expected = min(max(count + 1, 16), 4_096) }

    private func takeExpected() -> Int? {
        defer { expected = nil }
        return expected
    }

    func fetchedDocument() -> UnsafeRawBufferPointer?? {
        guard state == .onRow, let answer = window?.answer, answer.columnCount > 2 else { return nil }
        return answer.isNull(index, 2) ? .some(nil) : answer.bytes(index, 2)
    }

    private var order: String { duplicateSorted ? "k, v" : "k" }
    private var reversed: String { duplicateSorted ? "k DESC, v DESC" : "k DESC" }

    private func entry(_ i: Int) -> StorageEntry {
        let answer = window!.answer
        return (answer.bytes(i, 0), answer.bytes(i, 1))
    }

    private var current: StorageEntry? { state == .onRow ? entry(index) : nil }

    /// Fetches a window by the statement `name` (`condition` on `k`, `v`) and lands on its first row.
    private func fetch(_ name: String, where condition: String?, descending: Bool, bounded: Bool = false,
                       startsAtKey: Bool = true, _ values: [UnsafeRawBufferPointer]) throws -> StorageEntry? {
        let sql = along("SELECT k, v FROM \(table)" + (condition.map { " WHERE " + $0 } ?? "")
                        + " ORDER BY " + (descending ? reversed : order) + " LIMIT $\(values.count + 1)",
                        descending: descending)
        let answer = try txn.window("\(table)_\(name)" + (documents.map { "_\($0)l" } ?? ""), sql, values, limit: limit,
                                    keeping: keepsWindows)
        if let documentSpace { txn.fetchedAlong(documentSpace, answer) }
        let count = answer.rowCount
        window = Window(answer: answer, count: count, descending: descending,
                        reachesEnd: !bounded && count < limit, startsAtKey: startsAtKey, generation: generation)
        limit = min(limit * 4, 4096)
        index = 0
        guard count > 0 else {
            state = descending ? .beforeStart : .pastEnd
            window = nil
            return nil
        }
        state = .onRow
        return entry(0)
    }

    /// Fetches the rows after (or before) the current one, in that direction.
    private func fetch(beyond entry: StorageEntry, forward: Bool) throws -> StorageEntry? {
        if forward, let upperBound {
            return try upperBound.withUnsafeBytes { upper in
                duplicateSorted
                    ? try fetch("afterin", where: "(k, v) > ($1, $2) AND k < $3", descending: false, startsAtKey: false,
                                [entry.key, entry.value, upper])
                    : try fetch("afterin", where: "k > $1 AND k < $2", descending: false, [entry.key, upper])
            }
        }
        if duplicateSorted {
            return try fetch(forward ? "after" : "before", where: forward ? "(k, v) > ($1, $2)" : "(k, v) < ($1, $2)",
                             descending: !forward, startsAtKey: false, [entry.key, entry.value])
        }
        return try fetch(forward ? "after" : "before", where: forward ? "k > $1" : "k < $1", descending: !forward,
                         [entry.key])
    }

    /// One step forward or back.
    private func step(forward: Bool) throws -> StorageEntry? {
        switch state {
        case .unset:
            return forward ? try first() : try last()
        case .pastEnd:
            if forward { return nil }
            guard let window, window.generation == generation else { return try last() }
            state = .onRow
            return entry(index)
        case .beforeStart:
            if !forward { return nil }
            guard let window, window.generation == generation else { return try first() }
            state = .onRow
            return entry(index)
        case .onRow:
            let window = window!
            let here = entry(index)
            if window.generation != generation { return try fetch(beyond: here, forward: forward) }
            let along = forward != window.descending
            let next = index + (along ? 1 : -1)
            if next >= 0 && next < window.count {
                index = next
                return entry(next)
            }
            if along && window.reachesEnd {
                state = forward ? .pastEnd : .beforeStart
                return nil
            }
            return try fetch(beyond: here, forward: forward)
        }
    }

    func first() throws -> StorageEntry? {
        limit = takeExpected() ?? 16
        upperBound = nil
        return try fetch("first", where: nil, descending: false, [])
    }

    func last() throws -> StorageEntry? {
        limit = takeExpected() ?? 16
        upperBound = nil
        return try fetch("last", where: nil, descending: true, [])
    }

    func next() throws -> StorageEntry? { try step(forward: true) }
    func previous() throws -> StorageEntry? { try step(forward: false) }

    /// The range's rows, 256 first: a walk of an index range ends where the range does, often in the first
    /// window.
    func seek(atLeast key: UnsafeRawBufferPointer, below upper: [UInt8]?) throws -> StorageEntry? {
        guard let upper else { return try seek(atLeast: key) }
        limit = takeExpected() ?? 256
        upperBound = upper
        return try upper.withUnsafeBytes {
            try fetch("range", where: "k >= $1 AND k < $2", descending: false, [key, $0])
        }
    }

    func seek(atLeast key: UnsafeRawBufferPointer) throws -> StorageEntry? {
        if key.isEmpty { return try first() }
        limit = takeExpected() ?? 16
        upperBound = nil
        return try fetch("seek", where: "k >= $1", descending: false, [key])
    }

    func value(forKey key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        guard let found = try seek(atLeast: key), found.key.elementsEqual(key) else { return nil }
        return found.value
    }

    func nextKey() throws -> StorageEntry? { try neighbouringKey(forward: true) }
    func previousKey() throws -> StorageEntry? { try neighbouringKey(forward: false) }

    /// The first entry of the next key, or the last of the previous one: found in the window when it shows them,
    /// else fetched.
    private func neighbouringKey(forward: Bool) throws -> StorageEntry? {
        guard duplicateSorted, let here = current else { return try step(forward: forward) }
        let key = Array(here.key)
        while let entry = try withinWindow(forward: forward) {
            if !entry.key.elementsEqual(key) { return entry }
        }
        if state != .onRow { return nil }
        return try key.withUnsafeBytes {
            try fetch(forward ? "nextkey" : "prevkey", where: forward ? "k > $1" : "k < $1", descending: !forward, [$0])
        }
    }

    /// A step that stays inside the window (or finds the table's end there); `nil`, staying put, when the next
    /// row lies outside the window.
    private func withinWindow(forward: Bool) throws -> StorageEntry? {
        guard state == .onRow, let window, window.generation == generation else { return nil }
        let along = forward != window.descending
        let next = index + (along ? 1 : -1)
        if next >= 0 && next < window.count {
            index = next
            return entry(next)
        }
        if along && window.reachesEnd { state = forward ? .pastEnd : .beforeStart }
        return nil
    }

    /// The row of the current key's first (or last) value, when the window shows where that key's values end:
    /// a row of another key beyond it, the table's end, or a window that starts at the key.
    private func edgeOfKey(first: Bool) -> Int? {
        guard state == .onRow, let window, window.generation == generation else { return nil }
        let key = entry(index).key
        let step = (first != window.descending) ? -1 : 1   // towards smaller values in the window's order
        var i = index
        while true {
            let next = i + step
            if next < 0 { return window.startsAtKey ? i : nil }
            if next >= window.count { return window.reachesEnd ? i : nil }
            if !entry(next).key.elementsEqual(key) { return i }
            i = next
        }
    }

    func firstDuplicate() throws -> StorageEntry? {
        guard let here = current else { return nil }
        guard duplicateSorted else { return here }
        if let edge = edgeOfKey(first: true) { index = edge; return entry(edge) }
        let key = Array(here.key)
        return try key.withUnsafeBytes { try fetch("firstdup", where: "k = $1", descending: false, bounded: true, [$0]) }
    }

    func lastDuplicate() throws -> StorageEntry? {
        guard let here = current else { return nil }
        guard duplicateSorted else { return here }
        if let edge = edgeOfKey(first: false) { index = edge; return entry(edge) }
        let key = Array(here.key)
        return try key.withUnsafeBytes { try fetch("lastdup", where: "k = $1", descending: true, bounded: true, [$0]) }
    }

    func nextDuplicate() throws -> StorageEntry? { try duplicate(forward: true) }
    func previousDuplicate() throws -> StorageEntry? { try duplicate(forward: false) }

    /// The next (or previous) value of the current key, or `nil`, staying put, when there is none.
    private func duplicate(forward: Bool) throws -> StorageEntry? {
        guard duplicateSorted, let here = current, let window else { return nil }
        if window.generation == generation {
            let along = forward != window.descending
            let next = index + (along ? 1 : -1)
            if next >= 0 && next < window.count {
                let candidate = entry(next)
                guard candidate.key.elementsEqual(here.key) else { return nil }
                index = next
                return candidate
            }
            if along && window.reachesEnd { return nil }
        }
        let answer = try txn.run("\(table)_\(forward ? "nextdup" : "prevdup")" + (documents.map { "_\($0)l" } ?? ""),
                                 along("SELECT k, v FROM \(table) WHERE k = $1 AND v \(forward ? ">" : "<") $2 ORDER BY v"
                                       + (forward ? "" : " DESC") + " LIMIT $3", descending: !forward),
                                 [here.key, here.value], integers: [limit])
        guard answer.rowCount > 0 else { return nil }
        if keepsWindows { txn.keep(answer) }
        if let documentSpace { txn.fetchedAlong(documentSpace, answer) }
        self.window = Window(answer: answer, count: answer.rowCount, descending: !forward, reachesEnd: false,
                             startsAtKey: false, generation: generation)
        limit = min(limit * 4, 4096)
        index = 0
        return entry(0)
    }

    /// Counted in the window when it shows both ends of the key's values (a walk of groups meets most keys so),
    /// else asked.
    func duplicateCount() throws -> Int {
        guard let here = current else { return 0 }
        guard duplicateSorted else { return 1 }
        if let first = edgeOfKey(first: true), let last = edgeOfKey(first: false) { return abs(last - first) + 1 }
        return try txn.run("\(table)_dupcount", "SELECT count(*) FROM \(table) WHERE k = $1", [here.key])
            .binaryInteger(0, 0)
    }

    func contains(key: [UInt8], value: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { k in
            try value.withUnsafeBytes { v in
                try txn.run("\(table)_contains", "SELECT 1 FROM \(table) WHERE k = $1 AND v = $2", [k, v]).rowCount > 0
            }
        }
    }
}
