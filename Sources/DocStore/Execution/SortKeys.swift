import Foundation

/// The sort keys of a plan's matches: each sort field's order-preserving key, then the id, in one byte string that
/// `memcmp` orders as the query asks.
struct SortKeys {
    /// The sort fields' paths, laid out once for all the documents this run orders, and their directions.
    private let sortPaths: [CompiledPath]
    /// `sortPaths` laid out, read per document with no reference counting (`sortPaths` keeps them alive).
    private let sortLayouts: [CompiledPath.Layout]
    private let sortDescending: [Bool]
    private let idDescending: Bool

    init(_ sort: [SortSpec], idDescending: Bool) {
        sortPaths = sort.map { CompiledPath($0.path) }
        sortLayouts = sortPaths.map(\.layout)
        sortDescending = sort.map(\.descending)
        self.idDescending = idDescending
    }

    /// One match in a sort: its sort key (sort fields, then id, each flipped where descending) and its id.
    struct Row {
        var key: [UInt8]
        var idStart: Int
        /// The first sort field's value when it is a number a `Double` holds exactly, for a cheap comparison.
        var number: Double? = nil
        var id: ArraySlice<UInt8> { key[idStart...] }
    }

    /// The sort key of a document: each sort field's order-preserving key (bytes inverted for a descending
    /// field: keys are prefix-free, so inverting reverses their order), then the id likewise.
    ///
    /// With a full `heap`, gives `nil` as soon as the first field orders after that of the last row the heap keeps:
    /// such a document cannot enter the top k, and the rest of its key is not worth building. Two numbers are
    /// compared as numbers, before any key is built; otherwise the first field's key is compared. (The heap is
    /// read where it lies: a copy of its last row would retain and release a key per document.)
    func make(_ candidate: CandidateSource.Candidate, into key: inout [UInt8],
              unlessAfter heap: TopK = TopK(capacity: 0)) throws -> (idStart: Int, number: Double?)? {
        let reader = BinaryReader(candidate.document)
        let (root, shaped) = try reader.rootAndShape()
        var number: Double?
        var first: ValueRef?
        if let path = sortLayouts.first {
            first = try path.value(in: reader, from: root, shaped: shaped)
            number = first.flatMap { reader.exactDouble($0) }
            if let n = number, heap.isFull, let b = heap.top.number, sortDescending[0] ? n < b : n > b { return nil }
        }
        key.removeAll(keepingCapacity: true)
        var encoder = KeyEncoder()
        encoder.swapBuffer(&key)
        defer { encoder.swapBuffer(&key) }
        for i in sortLayouts.indices {
            let start = encoder.bytes.count
            if let ref = i == 0 ? first : try sortLayouts[i].value(in: reader, from: root, shaped: shaped) {
                try encoder.append(ref, in: reader)
            } else {
                encoder.append(.null)
            }
            if sortDescending[i] { encoder.invert(from: start) }
            if i == 0, heap.isFull, SortKeys.compare(encoder.bytes, heap.top.key) > 0 { return nil }
        }
        let idStart = encoder.bytes.count
        encoder.appendRaw(candidate.id)
        if idDescending { encoder.invert(from: idStart) }
        return (idStart, number)
    }

    /// Byte order of two keys (what `lexicographicallyPrecedes` answers, by `memcmp`).
    @inline(__always)
    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.precedesInKeyOrder(b) }

    /// How `a` orders against `b` over their common length only: negative, zero or positive. A positive answer
    /// for a prefix-free field key means every key starting with `a` orders after `b`.
    @inline(__always)
    static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int32 {
        a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in
                let n = min(x.count, y.count)
                guard n > 0, let p = x.baseAddress, let q = y.baseAddress else { return 0 }
                return memcmp(p, q, n)
            }
        }
    }
}


/// The `capacity` smallest rows seen, kept in a max-heap: the largest kept row is at the top, so a row that does
/// not beat it is dropped with one comparison.
struct TopK {
    let capacity: Int
    private var heap: [SortKeys.Row] = []

    init(capacity: Int) {
        self.capacity = capacity
        heap.reserveCapacity(min(capacity, 1 << 16))
    }

    mutating func offer(_ row: SortKeys.Row) {
        guard capacity > 0 else { return }
        if heap.count < capacity {
            heap.append(row)
            siftUp(heap.count - 1)
        } else if SortKeys.precedes(row.key, heap[0].key) {
            heap[0] = row
            siftDown(0)
        }
    }

    /// Whether a newcomer must precede ``top`` to be kept.
    var isFull: Bool { heap.count == capacity && capacity > 0 }
    /// The last row kept, once the heap ``isFull``.
    var top: SortKeys.Row {
        _read { yield heap[0] }
    }

    func sorted() -> [SortKeys.Row] { heap.sorted { SortKeys.precedes($0.key, $1.key) } }

    private func greater(_ i: Int, _ j: Int) -> Bool { SortKeys.precedes(heap[j].key, heap[i].key) }

    private mutating func siftUp(_ index: Int) {
        var i = index
        while i > 0 {
            let parent = (i - 1) / 2
            guard greater(i, parent) else { return }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var i = index
        while true {
            let l = 2 * i + 1, r = l + 1
            var largest = i
            if l < heap.count && greater(l, largest) { largest = l }
            if r < heap.count && greater(r, largest) { largest = r }
            guard largest != i else { return }
            heap.swapAt(i, largest)
            i = largest
        }
    }
}
