import Foundation

/// Document ids gathered by a walk, in the order they were found or put in id order, with no array per id (or any
/// keys to be put in order: a batch's index keys).
///
/// Each id keeps its first 16 bytes as two big-endian integers: an id of 16 bytes or fewer (an integer's key, 10
/// bytes, fits; a UUID's, 17, does not) lives in them alone, and most comparisons in a sort are two integer
/// compares. Longer ids keep their bytes side by side in one buffer.
struct IDList {
    private var entries: [Entry] = []
    /// The bytes of the ids longer than 16 bytes.
    private var long: [UInt8] = []
    /// The length every id has: `nil` before the first, -1 once two differ.
    private var width: Int?

    private struct Entry {
        var high: UInt64
        var low: UInt64
        /// Where a long id's bytes start in `long`.
        var start: Int
        var count: Int
    }

    init() {}

    /// The ids of `arrays`, in their order.
    init(_ arrays: [[UInt8]]) {
        for id in arrays { id.withUnsafeBytes { append($0) } }
    }

    /// Makes room for `count` ids in all.
    mutating func reserve(_ count: Int) { entries.reserveCapacity(count) }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    mutating func append(_ id: UnsafeRawBufferPointer) {
        // The eight bytes from `offset` as a big-endian number, zeros past the id's end (a copy into a tuple was a
        // call to `memmove` per id, a twentieth of a scan that kept one document in eight).
        @inline(__always) func word(_ offset: Int) -> UInt64 {
            let left = id.count - offset
            if left >= 8 { return UInt64(bigEndian: id.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
            var value: UInt64 = 0
            for i in 0..<Swift.max(left, 0) { value |= UInt64(id[offset + i]) << (56 - 8 * i) }
            return value
        }
        var start = 0
        if id.count > 16 {
            start = long.count
            long.append(contentsOf: id)
        }
        entries.append(Entry(high: word(0), low: word(8), start: start, count: id.count))
        width = width == nil || width == id.count ? id.count : -1
    }

    /// Adds the ids of `other` after these.
    mutating func append(contentsOf other: IDList) {
        let shift = long.count
        long.append(contentsOf: other.long)
        entries.append(contentsOf: other.entries.lazy.map {
            Entry(high: $0.high, low: $0.low, start: $0.count > 16 ? $0.start + shift : 0, count: $0.count)
        })
        width = width == nil || other.width == nil || width == other.width ? width ?? other.width : -1
    }

    /// Puts the ids in byte order (or its reverse), the order LMDB keeps keys in. Ids found by one key of an index,
    /// or by the ids' own ranges, come in order already: they are only checked.
    mutating func sort(descending: Bool) {
        guard entries.count > 1 else { return }
        if let width, width >= 0 && width <= 16 {
            // The two integers are the whole id: sorted as one 128-bit number each.
            var keys = entries.map { UInt128($0.high) << 64 | UInt128($0.low) }
            guard !(descending ? keys.isSorted(by: >) : keys.isSorted(by: <)) else { return }
            if descending { keys.sort(by: >) } else { keys.sort() }
            for i in keys.indices {
                entries[i] = Entry(high: UInt64(truncatingIfNeeded: keys[i] >> 64), low: UInt64(truncatingIfNeeded: keys[i]),
                                   start: 0, count: width)
            }
            return
        }
        long.withUnsafeBytes { long in
            if descending {
                if !entries.isSorted(by: { IDList.precedes($1, $0, long) }) { entries.sort { IDList.precedes($1, $0, long) } }
            } else if !entries.isSorted(by: { IDList.precedes($0, $1, long) }) {
                entries.sort { IDList.precedes($0, $1, long) }
            }
        }
    }

    /// Keeps one id of each run of equal ones: after ``sort(descending:)``, each id once.
    mutating func dropRepeats() {
        guard entries.count > 1 else { return }
        var kept = 1
        long.withUnsafeBytes { long in
            for i in 1..<entries.count where IDList.compare(entries[kept - 1], entries[i], long) != 0 {
                entries[kept] = entries[i]
                kept += 1
            }
        }
        entries.removeLast(entries.count - kept)
    }

    /// Whether id `a` orders before id `b`, their bytes past the first 16 in `long`.
    @inline(__always)
    private static func precedes(_ a: Entry, _ b: Entry, _ long: UnsafeRawBufferPointer) -> Bool {
        compare(a, b, long) < 0
    }

    /// -1, 0 or 1 as id `a` orders before, with or after id `b`. Equal 16-byte prefixes (zero-padded) leave the
    /// rest of the bytes to decide, and then the length: a longer id with the same bytes orders after.
    @inline(__always)
    private static func compare(_ a: Entry, _ b: Entry, _ long: UnsafeRawBufferPointer) -> Int {
        if a.high != b.high { return a.high < b.high ? -1 : 1 }
        if a.low != b.low { return a.low < b.low ? -1 : 1 }
        if a.count > 16 && b.count > 16 {
            let n = Swift.min(a.count, b.count) - 16
            let order = memcmp(long.baseAddress! + a.start + 16, long.baseAddress! + b.start + 16, n)
            if order != 0 { return order < 0 ? -1 : 1 }
        }
        return a.count == b.count ? 0 : a.count < b.count ? -1 : 1
    }

    /// The positions of the ids in byte order, the ids left where they are: for a caller that keeps something
    /// beside each. Equal ids (the keys of an index, say) are in the order of their `ranks`, when given, else in
    /// the order they came.
    func idOrder(ranks: [Int]? = nil) -> [Int] {
        if long.isEmpty {
            // Every id lies in its two integers: sorted as a 128-bit number, its length and its rank each.
            var keyed = entries.indices.map { i in
                (UInt128(entries[i].high) << 64 | UInt128(entries[i].low), entries[i].count, ranks?[i] ?? i, i)
            }
            if !keyed.isSorted(by: { ($0.0, $0.1, $0.2) < ($1.0, $1.1, $1.2) }) {
                keyed.sort { ($0.0, $0.1, $0.2) < ($1.0, $1.1, $1.2) }
            }
            return keyed.map(\.3)
        }
        var order = Array(entries.indices)
        long.withUnsafeBytes { long in
            guard ranks != nil || !entries.isSorted(by: { IDList.precedes($0, $1, long) }) else { return }
            order.sort { a, b in
                let order = IDList.compare(entries[a], entries[b], long)
                return order == 0 ? (ranks?[a] ?? a) < (ranks?[b] ?? b) : order < 0
            }
        }
        return order
    }

    /// Whether the `i`th and `j`th ids are the same bytes.
    func same(_ i: Int, _ j: Int) -> Bool {
        long.withUnsafeBytes { IDList.compare(entries[i], entries[j], $0) == 0 }
    }

    /// Keeps the ids after the first `offset`, up to `limit` of them.
    mutating func keep(skipping offset: Int, taking limit: Int?) {
        guard offset > 0 || (limit ?? .max) < entries.count else { return }
        let start = Swift.min(offset, entries.count)
        entries = Array(entries[start..<Swift.min(entries.count, start + Swift.min(limit ?? .max, entries.count))])
    }

    /// The ids in the reverse order.
    mutating func reverse() { entries.reverse() }

    /// Calls `body` with the bytes of the `i`th id.
    @inline(__always)
    func withID<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let entry = entries[i]
        guard entry.count <= 16 else {
            return try long.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[entry.start..<(entry.start + entry.count)])) }
        }
        return try withUnsafeBytes(of: (entry.high.bigEndian, entry.low.bigEndian)) {
            try body(UnsafeRawBufferPointer(rebasing: $0[0..<entry.count]))
        }
    }

    /// Calls `body` with each id's bytes in order until it returns false.
    func forEach(_ body: (UnsafeRawBufferPointer) throws -> Bool) rethrows {
        for i in entries.indices {
            guard try withID(i, body) else { return }
        }
    }

    /// A copy of the `i`th id.
    subscript(i: Int) -> [UInt8] { withID(i) { Array($0) } }

    /// The ids `range` covers, each as an array: for a batch handed to an engine.
    func arrays(_ range: Range<Int>) -> [[UInt8]] { range.map { self[$0] } }
}

extension Sequence {
    /// Whether every element is in order by `areInIncreasingOrder` (no later element precedes an earlier one).
    fileprivate func isSorted(by areInIncreasingOrder: (Element, Element) throws -> Bool) rethrows -> Bool {
        var iterator = makeIterator()
        guard var previous = iterator.next() else { return true }
        while let next = iterator.next() {
            if try areInIncreasingOrder(next, previous) { return false }
            previous = next
        }
        return true
    }
}
