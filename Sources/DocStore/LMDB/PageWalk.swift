import CLMDB
import Glibc

/// A read transaction's walk of one database, read from its pages in the memory map rather than by a cursor's
/// steps: the entries come as `MDB_NEXT` (or `MDB_PREV`) would give them, but the walk knows the next leaf before it
/// reaches it and asks the processor for that whole page while it reads this one. A cursor learns where its next
/// leaf lies only when it steps onto it, and waits for memory there: on a scan of a million documents, the
/// cursor's steps were 37 ms of the walk where these take 9.
///
/// The pages are LMDB's file format (as ``LMDBFileCheck`` reads it), which is fixed across LMDB 0.9's releases. The
/// walk trusts nothing in them. Where the map begins is worked out from the page the database's record lies on, and
/// taken only once the two meta pages are found there (else a cursor walks instead). Every page number is checked
/// against the last page of the read's commit, the file's size and the map's; every offset and length against its
/// page; a page that fails is ``StorageError/damaged(_:)``, which the walk throws again if asked on.
final class LMDBPageWalk: StorageWalk {
    private enum Layout {
        static let headerSize = 16, nodeHeaderSize = 8, maximumDepth = 32
        static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, meta: UInt16 = 0x08
        static let magic: UInt32 = 0xBEEF_C0DE
        /// Every kind a page may be (a page as written has no other flag, but `P_DIRTY` and the like are ignored).
        static let kinds: UInt16 = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40
        static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, duplicates: UInt16 = 0x04
        /// Databases whose keys are not compared as bytes, or that hold several values per key.
        static let notPlain: UInt16 = 0x02 | 0x04 | 0x08
        /// `P_INVALID`: the root of an empty database.
        static let noPage = UInt64.max
    }

    /// Where page 0 lies.
    private let map: UnsafeRawPointer
    private let pageSize: Int
    /// The last page of the file as its newest commit left it: no page of an older commit lies beyond.
    private let lastPage: UInt64
    private let name: String
    /// +1, or -1 for a walk backwards.
    private let step: Int
    /// The branch pages from the root down to the leaf's parent, each with the node the walk is under.
    private let branches: UnsafeMutablePointer<(page: UnsafeRawPointer, number: UInt64, index: Int, count: Int)>
    private let branchCount: Int
    private var leaf: UnsafeRawPointer
    private var leafNumber: UInt64 = 0
    /// The next node of the leaf to read, and where the walk leaves the leaf (its count, or -1 backwards).
    private var index = 0
    private var end = 0
    /// Where the leaf's nodes may begin: past its table of offsets.
    private var nodesStart = 0
    /// Where a walk forward stops (`nil`: at the end), and whether it stops at the end of this leaf: its keys are
    /// compared with the bound once per leaf, not once per entry.
    private let upper: [UInt8]?
    private var lastLeaf = false
    /// What ended the walk, if damage did.
    private var failure: (any Error)?
    /// The next leaf, of which the bytes below `aheadLeft` are still to be asked for, `aheadStep` at a time, from
    /// its end down (the way a walk forward reads a leaf's nodes). A whole page asked for at once lost most of its
    /// lines: a processor drops the prefetches it has no room for.
    private var ahead: UnsafeRawPointer?
    private var aheadLeft = 0
    private var aheadStep = 64

    /// A database as its 48-byte record in the main database describes it (an `MDB_db`, read in a read
    /// transaction, from a page of the map): where its root is, how deep it is, and where the map begins.
    struct Tree {
        let map: UnsafeRawPointer
        let pageSize: Int
        /// The last page the walk may read: of the read's commit, within the file and the map.
        let lastPage: UInt64
        let name: String
        let depth: Int
        /// `nil` for an empty database.
        let root: UInt64?

        /// What the environment says of itself, for ``init(record:name:environment:)``.
        struct Environment {
            /// LMDB's page size, and the system's.
            var pageSize: Int, systemPageSize: Int
            /// The last page of the newest commit (`me_last_pgno`), the map's size and the file's, in bytes.
            var lastPage: UInt64, mapSize: Int, fileSize: Int
            /// The read transaction's id: the commit it sees.
            var transaction: UInt64
        }

        /// `nil` for a database the walk cannot read (one with duplicates, or with keys not compared as bytes), or
        /// where it cannot tell where the map begins (LMDB's pages larger than the system's, or no meta pages
        /// where the record's page says the map begins: that page's own number, which LMDB never reads, is damaged).
        init?(record: UnsafeRawBufferPointer, name: String, environment: Environment) throws {
            let pageSize = environment.pageSize
            guard record.count == 48, let base = record.baseAddress, pageSize >= 512, pageSize & (pageSize - 1) == 0,
                  pageSize <= environment.systemPageSize,
                  base.loadUnaligned(fromByteOffset: 4, as: UInt16.self) & Layout.notPlain == 0,
                  let (map, metas) = Self.map(around: base, environment) else { return nil }
            self.map = map
            self.pageSize = pageSize
            self.name = name
            // The read's commit's own last page, while its meta page is not yet written over; the file's, and the
            // map's, which a damaged number must not pass.
            let own = metas.first { $0.transaction == environment.transaction }?.lastPage ?? environment.lastPage
            let inFile = UInt64(max(environment.fileSize / pageSize, 1) - 1)
            let inMap = UInt64(max(environment.mapSize / pageSize, 1) - 1)
            lastPage = min(own, environment.lastPage, inFile, inMap)
            depth = Int(base.loadUnaligned(fromByteOffset: 6, as: UInt16.self))
            let root = base.loadUnaligned(fromByteOffset: 40, as: UInt64.self)
            guard depth <= Layout.maximumDepth, (depth == 0) == (root == Layout.noPage) else {
                throw StorageError.damaged("the record of the database \"\(name)\" says it is \(depth) pages deep "
                    + "with its root at page \(root == Layout.noPage ? "none" : String(root))")
            }
            self.root = depth == 0 ? nil : root
        }

        /// Where the map begins, from the page `inside` (a pointer into the map) lies on, and its two meta pages'
        /// commit ids and last pages; `nil` unless both meta pages are there and mapped.
        private static func map(around inside: UnsafeRawPointer, _ environment: Environment)
            -> (UnsafeRawPointer, [(transaction: UInt64, lastPage: UInt64)])? {
            let (pageSize, system) = (UInt(environment.pageSize), UInt(environment.systemPageSize))
            let page = UInt(bitPattern: inside) & ~(pageSize - 1)
            guard let pageStart = UnsafeRawPointer(bitPattern: page) else { return nil }
            let number = UInt(truncatingIfNeeded: pageStart.loadUnaligned(as: UInt64.self))
            guard number < UInt(environment.mapSize) / pageSize, page / pageSize >= number + 1 else { return nil }
            let start = page - number * pageSize
            // Mapped, both meta pages (`mincore` fails on an address no mapping holds), before anything is read.
            let aligned = start & ~(system - 1)
            let length = Int(start + 2 * pageSize - aligned)
            var resident = [UInt8](repeating: 0, count: (length + Int(system) - 1) / Int(system))
            guard let map = UnsafeRawPointer(bitPattern: start),
                  mincore(UnsafeMutableRawPointer(bitPattern: aligned), length, &resident) == 0 else { return nil }
            var metas: [(transaction: UInt64, lastPage: UInt64)] = []
            for index in 0..<2 {
                let meta = map + index * Int(pageSize)
                guard meta.loadUnaligned(as: UInt64.self) == UInt64(index),
                      meta.loadUnaligned(fromByteOffset: 10, as: UInt16.self) & Layout.meta != 0,
                      meta.loadUnaligned(fromByteOffset: 16, as: UInt32.self) == Layout.magic else { return nil }
                metas.append((meta.loadUnaligned(fromByteOffset: 144, as: UInt64.self),
                              meta.loadUnaligned(fromByteOffset: 136, as: UInt64.self)))
            }
            return (map, metas)
        }
    }

    /// The walk of `tree` from its first entry whose key is at least `lower` to the last below `upper` (or from its
    /// last, backwards).
    static func make(_ tree: Tree, from lower: [UInt8]?, below upper: [UInt8]?, descending: Bool) throws -> LMDBPageWalk {
        let walk = LMDBPageWalk(tree, upper: descending ? nil : upper, descending: descending)
        if let root = tree.root { try walk.start(at: root, from: lower) }
        return walk
    }

    /// Keys that cut `tree` into about `parts` ranges of about as many entries each: the first keys of the subtrees
    /// at the highest level that has `parts` of them (each subtree of a level holds about as many entries as
    /// another). Empty for a tree of one page.
    static func cuts(_ tree: Tree, parts: Int) throws -> [[UInt8]] {
        guard let root = tree.root, tree.depth > 1, parts > 1 else { return [] }
        let walk = LMDBPageWalk(tree, upper: nil, descending: false)
        // The subtrees of a level, in key order, each with its first key (`nil` for the first of all).
        var level: [(number: UInt64, first: [UInt8]?)] = [(root, nil)]
        for _ in 1..<tree.depth where level.count < parts {
            var below: [(number: UInt64, first: [UInt8]?)] = []
            for (number, first) in level {
                let page = try walk.page(number, kind: Layout.branch)
                let count = walk.nodeCount(page)
                guard count > 0 else { throw walk.damage(number, "is a branch without children") }
                for i in 0..<count {
                    let offset = try walk.node(i, of: page, number, count: count)
                    let key = i == 0 ? first : Array(try walk.key(at: offset, of: page, number))
                    below.append((try walk.child(of: page, number, at: i), key))
                }
            }
            level = below
        }
        var cuts: [[UInt8]] = []
        for part in 1..<parts {
            guard let key = level[part * level.count / parts].first else { continue }
            if cuts.last.map({ $0.lexicographicallyPrecedes(key) }) ?? true { cuts.append(key) }
        }
        return cuts
    }

    private init(_ tree: Tree, upper: [UInt8]?, descending: Bool) {
        map = tree.map
        self.upper = upper
        pageSize = tree.pageSize
        lastPage = tree.lastPage
        name = tree.name
        step = descending ? -1 : 1
        leaf = tree.map
        branchCount = tree.root == nil ? 0 : max(tree.depth - 1, 0)
        branches = .allocate(capacity: max(branchCount, 1))
    }

    deinit { branches.deallocate() }

    /// The pages from the root down to the leaf the walk is on (for the tests that damage them).
    var pagesOnPath: [UInt64] { (0..<branchCount).map { branches[$0].number } + [leafNumber] }

    /// Descends from the root to the first leaf of the walk (the one that holds `lower`'s place, if given).
    private func start(at root: UInt64, from lower: [UInt8]?) throws {
        var number = root
        for level in 0..<branchCount {
            let page = try self.page(number, kind: Layout.branch)
            let count = nodeCount(page)
            guard count > 0 else { throw damage(number, "is a branch without children") }
            let index = try lower.map { try lastChild(atMost: $0, in: page, number, count: count) }
                ?? (step > 0 ? 0 : count - 1)
            branches[level] = (page, number, index, count)
            number = try child(of: page, number, at: index)
        }
        try enterLeaf(number)
        if let lower { index = min(try firstEntry(atLeast: lower, count: nodeCount(leaf)), end) }
    }

    override package func next() throws -> StorageEntry? {
        while index == end {
            if lastLeaf {
                if let failure { throw failure }
                return nil
            }
            do {
                if try !nextLeaf() { lastLeaf = true }
            } catch {
                throw fail(error)
            }
        }
        if let ahead, aheadLeft > 0 {
            // A walk forward reads the next leaf's nodes from its end down; backwards, from its nodes' start up.
            let chunk = min(aheadStep, aheadLeft)
            aheadLeft -= chunk
            docstore_prefetch_lines(ahead + (step > 0 ? aheadLeft : pageSize - aheadLeft - chunk), chunk)
        }
        do {
            let entry = try self.entry(index)
            index &+= step
            return entry
        } catch {
            throw fail(error)
        }
    }

    /// Ends the walk on `error`, which later calls throw again: a walk never goes on past damage it met.
    private func fail(_ error: any Error) -> any Error {
        failure = error
        (index, end, lastLeaf) = (0, 0, true)
        return error
    }

    // MARK: Pages

    fileprivate func damage(_ page: UInt64, _ what: String) -> StorageError {
        .damaged("page \(page) of the database \"\(name)\" \(what)")
    }

    /// Page `number`, checked to be of `kind` and to have a table of offsets that fits it.
    @inline(__always)
    private func page(_ number: UInt64, kind: UInt16) throws -> UnsafeRawPointer {
        guard number <= lastPage else { throw damage(number, FileStorage.pastTheLastPage(Int(clamping: lastPage) + 1)) }
        let page = map + Int(number) * pageSize
        let flags = page.loadUnaligned(fromByteOffset: 10, as: UInt16.self) & Layout.kinds
        guard flags == kind else {
            throw damage(number, "is not a \(kind == Layout.leaf ? "leaf" : "branch") page (its flags are \(flags))")
        }
        let lower = Int(page.loadUnaligned(fromByteOffset: 12, as: UInt16.self))
        let upper = Int(page.loadUnaligned(fromByteOffset: 14, as: UInt16.self))
        guard lower >= Layout.headerSize, lower & 1 == 0, lower <= upper, upper <= pageSize else {
            throw damage(number, "has its free space at \(lower)..<\(upper), outside the page")
        }
        return page
    }

    /// The number of nodes of a checked page.
    @inline(__always)
    private func nodeCount(_ page: UnsafeRawPointer) -> Int {
        (Int(page.loadUnaligned(fromByteOffset: 12, as: UInt16.self)) - Layout.headerSize) >> 1
    }

    /// The offset of node `i` of a checked page of `count` nodes, checked to leave room for the node's header.
    @inline(__always)
    private func node(_ i: Int, of page: UnsafeRawPointer, _ number: UInt64, count: Int) throws -> Int {
        let offset = Int(page.loadUnaligned(fromByteOffset: Layout.headerSize + 2 * i, as: UInt16.self))
        guard offset >= Layout.headerSize + 2 * count, offset <= pageSize - Layout.nodeHeaderSize else {
            throw damage(number, "has its node \(i) at \(offset), outside the page's nodes")
        }
        return offset
    }

    /// The key of the node at `offset`, checked to lie within the page.
    @inline(__always)
    private func key(at offset: Int, of page: UnsafeRawPointer, _ number: UInt64) throws -> UnsafeRawBufferPointer {
        let size = Int(page.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self))
        guard offset + Layout.nodeHeaderSize + size <= pageSize else { throw damage(number, "has a key past its end") }
        return UnsafeRawBufferPointer(start: page + offset + Layout.nodeHeaderSize, count: size)
    }

    /// The number of the page under node `i` of a branch.
    private func child(of page: UnsafeRawPointer, _ number: UInt64, at i: Int) throws -> UInt64 {
        let offset = try node(i, of: page, number, count: nodeCount(page))
        let low = UInt64(page.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        let high = UInt64(page.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self))
        return low | high << 32
    }

    /// Makes page `number` the walk's leaf, from its first node (its last, backwards).
    private func enterLeaf(_ number: UInt64) throws {
        leaf = try page(number, kind: Layout.leaf)
        leafNumber = number
        let count = nodeCount(leaf)
        nodesStart = Layout.headerSize + 2 * count
        (index, end) = step > 0 ? (0, count) : (count - 1, -1)
        if let upper, count > 0 {
            let lastKey = try key(at: try node(count - 1, of: leaf, number, count: count), of: leaf, number)
            if upper.withUnsafeBytes({ Self.compare(lastKey, $0) >= 0 }) {
                end = try firstEntry(atLeast: upper, count: count)
                lastLeaf = true
            }
        }
        // The leaf after this one is asked into the caches while this one is read, a few of its lines with each
        // entry (``next()``), as many as spread its lines over this leaf's entries.
        ahead = nil
        if branchCount > 0 {
            let (parent, parentNumber, at, siblings) = branches[branchCount - 1]
            let next = at + step
            if next >= 0, next < siblings, let sibling = try? child(of: parent, parentNumber, at: next), sibling <= lastPage {
                let start = map + Int(sibling) * pageSize
                docstore_prefetch_lines(start + (step > 0 ? 0 : pageSize - 64), 64)
                ahead = start
                aheadLeft = pageSize
                aheadStep = max(64, (pageSize / max(count, 1) + 63) & ~63)
            }
        }
    }

    /// Moves to the next leaf; false after the last.
    private func nextLeaf() throws -> Bool {
        var level = branchCount - 1
        while level >= 0 {
            let next = branches[level].index + step
            if next >= 0, next < branches[level].count { branches[level].index = next; break }
            level -= 1
        }
        guard level >= 0 else { return false }
        while true {
            let (page, pageNumber, at, _) = branches[level]
            let number = try child(of: page, pageNumber, at: at)
            level += 1
            guard level < branchCount else { try enterLeaf(number); return true }
            let childPage = try self.page(number, kind: Layout.branch)
            let count = nodeCount(childPage)
            guard count > 0 else { throw damage(number, "is a branch without children") }
            branches[level] = (childPage, number, step > 0 ? 0 : count - 1, count)
        }
    }

    // MARK: Entries

    /// The leaf's entry `i`: its key, and its value on the leaf or on the overflow pages the node names.
    @inline(__always)
    private func entry(_ i: Int) throws -> StorageEntry {
        let offset = Int(leaf.loadUnaligned(fromByteOffset: Layout.headerSize + 2 * i, as: UInt16.self))
        guard offset >= nodesStart, offset <= pageSize - Layout.nodeHeaderSize else {
            throw damage(leafNumber, "has its node \(i) at \(offset), outside the page's nodes")
        }
        let node = leaf + offset
        let size = Int(node.loadUnaligned(as: UInt32.self))
        let flags = node.loadUnaligned(fromByteOffset: 4, as: UInt16.self)
        let keySize = Int(node.loadUnaligned(fromByteOffset: 6, as: UInt16.self))
        let data = offset + Layout.nodeHeaderSize + keySize
        let key = UnsafeRawBufferPointer(start: node + Layout.nodeHeaderSize, count: keySize)
        if flags == 0 {
            guard data + size <= pageSize else { throw damage(leafNumber, "has a value past its end") }
            return (key, UnsafeRawBufferPointer(start: leaf + data, count: size))
        }
        guard flags == Layout.bigData, data + 8 <= pageSize else {
            throw damage(leafNumber, "has a node with flags \(flags), which a database without duplicates never has")
        }
        let first = leaf.loadUnaligned(fromByteOffset: data, as: UInt64.self)
        let pages = (UInt64(Layout.headerSize + size) + UInt64(pageSize) - 1) / UInt64(pageSize)
        guard first <= lastPage, lastPage - first >= pages - 1 else {
            throw damage(leafNumber, "names overflow pages \(first)... past the file's end")
        }
        let start = map + Int(first) * pageSize
        let kind = start.loadUnaligned(fromByteOffset: 10, as: UInt16.self) & Layout.kinds
        guard kind == Layout.overflow, UInt64(start.loadUnaligned(fromByteOffset: 12, as: UInt32.self)) >= pages else {
            throw damage(first, "is not the overflow page of \(pages) page(s) that a value of \(size) bytes needs")
        }
        return (key, UnsafeRawBufferPointer(start: start + Layout.headerSize, count: size))
    }

    /// Byte order, as LMDB compares keys by default (`memcmp`, then the shorter first).
    @inline(__always)
    private static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = min(a.count, b.count)
        if common > 0, let x = a.baseAddress, let y = b.baseAddress {
            let order = memcmp(x, y, common)
            if order != 0 { return Int(order) }
        }
        return a.count - b.count
    }

    /// In a branch, the last child whose first key is at most `lower` (node 0's key is below every key).
    private func lastChild(atMost lower: [UInt8], in page: UnsafeRawPointer, _ number: UInt64, count: Int) throws -> Int {
        try lower.withUnsafeBytes { lower in
            var (low, high) = (1, count)
            while low < high {
                let middle = (low + high) >> 1
                let key = try key(at: try node(middle, of: page, number, count: count), of: page, number)
                if Self.compare(key, lower) <= 0 { low = middle + 1 } else { high = middle }
            }
            return low - 1
        }
    }

    /// In the leaf of `count` nodes, the first entry whose key is at least `lower` (`count` when none is).
    private func firstEntry(atLeast lower: [UInt8], count: Int) throws -> Int {
        try lower.withUnsafeBytes { lower in
            var (low, high) = (0, count)
            while low < high {
                let middle = (low + high) >> 1
                let key = try key(at: try node(middle, of: leaf, leafNumber, count: count), of: leaf, leafNumber)
                if Self.compare(key, lower) < 0 { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }
}
