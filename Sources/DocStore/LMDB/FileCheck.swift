import CLMDB
import Foundation

/// A check of an LMDB file's structure, read from the file itself with every page number, offset and length checked
/// before use: both meta pages, every page reachable from the free list's and the main database's roots, the named
/// databases under the main one, their branch and leaf nodes, the sub-pages and sub-databases of duplicate values,
/// overflow pages, and the free list's page numbers. LMDB trusts each of these where it reads them; a damaged one
/// can send it outside the map. This check cannot: at worst it reports what it cannot make sense of.
///
/// The layout read is LMDB 0.9's on a 64-bit machine (`mdb.c`): 16-byte page headers, 8-byte node headers, 48-byte
/// database records.
struct LMDBFileCheck {
    let bytes: UnsafeRawBufferPointer
    private(set) var problems: [StorageDamage] = []
    private(set) var pagesChecked = 0
    /// Each database's root page, by name ("main", "free list", then the named ones).
    private(set) var roots: [String: UInt64] = [:]
    private(set) var pageSize = 4096
    private(set) var newestCommit: UInt64?
    /// How long the newest commit's meta page says the file is: its last page's end.
    private(set) var committedSize: Int?
    private var pageCount = 0
    /// Pages found in use (1) or free (2), by page number.
    private var state: [UInt8] = []
    /// The keys of the pages that the last walks of trees could not read.
    private var holes: [FileStorage.KeyInterval] = []
    /// Whether the file is read knowing it was cut short: free pages listed past its end are passed over (LMDB lists
    /// the highest first), rather than ending the free list there.
    private var cutShort = false

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private static let headerSize = 16, nodeHeaderSize = 8, recordSize = 48
    private static let magic: UInt32 = 0xBEEF_C0DE
    private static let noPage = UInt64.max
    private enum PageFlag {
        static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, meta: UInt16 = 0x08
        static let leaf2: UInt16 = 0x20, subpage: UInt16 = 0x40
        /// The bits that say what kind of page it is.
        static let kinds = branch | leaf | overflow | meta | subpage
    }
    private enum NodeFlag {
        static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, dupData: UInt16 = 0x04
    }
    private enum DatabaseFlag {
        static let reverseKey: UInt16 = 0x02, dupSort: UInt16 = 0x04, integerKey: UInt16 = 0x08, dupFixed: UInt16 = 0x10
        static let integerDup: UInt16 = 0x20, reverseDup: UInt16 = 0x40
    }

    /// A database record (`MDB_db`).
    private struct Record {
        var pad: UInt32, flags: UInt16, depth: UInt16
        var branchPages: UInt64, leafPages: UInt64, overflowPages: UInt64, entries: UInt64, root: UInt64
    }

    private struct Meta {
        var page: Int
        var free: Record, main: Record
        var lastPage: UInt64
        var txnid: UInt64
    }

    /// The whole check of the file at `path`, its findings kept (its bytes are not).
    ///
    /// The file is mapped at the size it has then. A writer in another process may grow it and commit before the
    /// meta pages are read, which then name pages past the mapped end: the file is mapped again at its new size.
    static func run(path: String, metaOnly: Bool = false) -> LMDBFileCheck.Findings {
        guard !LMDBEnvironment.isOpenLockFile(path) else {
            return Findings(problems: [StorageDamage(page: nil, space: "", message: "'\(path)' is the lock file of a "
                                + "store this process has open, not a store's file")],
                            pagesChecked: 0, roots: [:], pageSize: 0, newestCommit: nil)
        }
        var findings: Findings
        var attempts = 0
        repeat {
            attempts += 1
            guard let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) else {
                return Findings(problems: [StorageDamage(page: nil, space: "", message: "the file '\(path)' cannot be read")],
                                pagesChecked: 0, roots: [:], pageSize: 0, newestCommit: nil)
            }
            findings = run(data: data, metaOnly: metaOnly)
            let grown = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int ?? 0) > data.count
            guard grown, findings.problems.contains(where: { $0.message.contains(LMDBFileCheck.pastTheEnd) }) else { break }
        } while attempts < 4
        return findings
    }

    /// How a meta page naming pages past the end of the mapped file is reported.
    static let pastTheEnd = "lies past the end of the file"

    /// The whole check of a file's bytes.
    static func run(data: Data, metaOnly: Bool = false) -> LMDBFileCheck.Findings {
        data.withUnsafeBytes { raw in
            var check = LMDBFileCheck(bytes: raw)
            check.run(metaOnly: metaOnly)
            return Findings(problems: check.problems, pagesChecked: check.pagesChecked, roots: check.roots,
                            pageSize: check.pageSize, newestCommit: check.newestCommit,
                            committedSize: check.committedSize)
        }
    }

    struct Findings {
        var problems: [StorageDamage]
        var pagesChecked: Int
        var roots: [String: UInt64]
        var pageSize: Int
        /// The newest commit a valid meta page records.
        var newestCommit: UInt64?
        /// How long that commit's meta page says the file is.
        var committedSize: Int? = nil
    }

    // MARK: Reading

    /// The little-endian integer at `offset`; `nil` when it does not lie inside the bytes.
    private func load<I: FixedWidthInteger>(_ offset: Int) -> I? {
        guard offset >= 0, offset + MemoryLayout<I>.size <= bytes.count else { return nil }
        return I(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: I.self))
    }

    private func u16(_ offset: Int) -> UInt16? { load(offset) }
    private func u32(_ offset: Int) -> UInt32? { load(offset) }
    private func u64(_ offset: Int) -> UInt64? { load(offset) }

    private func record(at offset: Int) -> Record? {
        guard let pad = u32(offset), let flags = u16(offset + 4), let depth = u16(offset + 6),
              let branch = u64(offset + 8), let leaf = u64(offset + 16), let overflow = u64(offset + 24),
              let entries = u64(offset + 32), let root = u64(offset + 40) else { return nil }
        return Record(pad: pad, flags: flags, depth: depth, branchPages: branch, leafPages: leaf,
                      overflowPages: overflow, entries: entries, root: root)
    }

    /// Whether either meta page holds LMDB's magic number.
    fileprivate var isLMDBFile: Bool {
        bytes.count >= 2 * 512 && (u32(16) == LMDBFileCheck.magic || u32(4096 + 16) == LMDBFileCheck.magic)
    }

    private mutating func damage(_ page: UInt64?, _ space: String, _ message: String) {
        // A badly damaged file could yield a problem per node: the first ones say enough.
        guard problems.count < 100 else { return }
        problems.append(StorageDamage(page: page.map { Int(truncatingIfNeeded: $0) }, space: space, message: message))
    }

    // MARK: Meta pages

    private mutating func run(metaOnly: Bool) {
        // Hostile input stays inside these bytes: every read below is bounds-checked.
        // A file with no LMDB magic number is not damaged but foreign: LMDB refuses it itself, and the store says
        // it is not one.
        guard isLMDBFile else { return }
        let metas = readMetas()
        newestCommit = metas.map(\.txnid).max()
        if let newest = metas.max(by: { $0.txnid < $1.txnid }) {
            committedSize = Int(clamping: newest.lastPage &+ 1).multipliedReportingOverflow(by: pageSize).partialValue
        }
        guard !metaOnly else { return }
        // The newest commit, what LMDB opens. A writer writes the next commit's meta page over the older one, never
        // over the newest; and a reader of any commit keeps the pages of every commit from it on, so that a check
        // made for a reader (``FileStorage/check(path:snapshot:)``) reads pages that nobody reuses meanwhile.
        guard let newest = metas.max(by: { $0.txnid < $1.txnid }) else {
            damage(0, "", "neither meta page is valid")
            return
        }
        pageCount = Int(newest.lastPage) + 1
        state = [UInt8](repeating: 0, count: pageCount)
        state[0] = 1
        if pageCount > 1 { state[1] = 1 }
        walk(newest.free, space: "free list", isFreeList: true)
        walk(newest.main, space: "main", isMain: true)
        // Every page up to the last is in use or free (LMDB's own audit): one that is neither was left behind by
        // damage that cut off what hung from it (a key space's record emptied, say), and is reachable from nowhere.
        if problems.isEmpty {
            let lost = state.indices.filter { $0 >= 2 && state[$0] == 0 }
            if let first = lost.first {
                damage(UInt64(first), "", "\(lost.count) page\(lost.count == 1 ? " is" : "s are") neither in use nor "
                    + "free (the first is page \(first)): reachable from no tree, and never reused")
            }
        }
    }

    /// The valid meta pages. The page size is in the first one's free-list record; a damaged one is looked for in
    /// the second. A meta page whose last page lies past the end of the file is valid (free pages never written, or a
    /// file cut short, whose pages still there can be read).
    ///
    /// A writer in another process may be writing a meta page meanwhile (its fields, then its commit id): the two
    /// pages' commit ids are read before and after the rest, and the pages read again when either changed, so that
    /// no page's fields come from two commits, and a page being written is not reported as damage.
    private mutating func readMetas() -> [Meta] {
        var metas: [Meta] = []
        for size in [Int(u32(40) ?? 0), 4096] where size >= 512 && size <= 65536 && size & (size - 1) == 0 {
            pageSize = size
            for attempt in 1...8 {
                let reported = problems.count
                let before = (commitID(ofMeta: 0, first: true), commitID(ofMeta: 1, first: true))
                metas = (0...1).compactMap { meta(at: $0) }
                let after = (commitID(ofMeta: 0, first: false), commitID(ofMeta: 1, first: false))
                if before == after || attempt == 8 { break }
                problems.removeSubrange(reported...)
            }
            if !metas.isEmpty { break }
        }
        return metas
    }

    /// The commit id of meta page `index`, read from memory now: `first`, no later read moves before it; otherwise
    /// no earlier read moves after it. `nil` past the end of the bytes.
    private func commitID(ofMeta index: Int, first: Bool) -> UInt64? {
        let offset = index * pageSize + 144
        guard offset + 8 <= bytes.count, let start = bytes.baseAddress, (Int(bitPattern: start) + offset) % 8 == 0 else {
            return nil
        }
        return UInt64(littleEndian: first ? docstore_load_acquire64(start + offset) : docstore_load_after64(start + offset))
    }

    /// The meta page `index`, if it is one: a damaged one is reported.
    private mutating func meta(at index: Int) -> Meta? {
        let base = index * pageSize
        let space = "meta page \(index)"
        guard let flags = u16(base + 10), let magic = u32(base + 16), let version = u32(base + 20) else {
            damage(UInt64(index), space, "past the end of the file")
            return nil
        }
        guard flags & PageFlag.meta != 0, magic == LMDBFileCheck.magic, version == 1 else {
            damage(UInt64(index), space, "not a meta page (flags \(flags), magic \(String(magic, radix: 16)), version \(version))")
            return nil
        }
        guard let free = record(at: base + 40), let main = record(at: base + 88), let last = u64(base + 136),
              let txnid = u64(base + 144) else {
            damage(UInt64(index), space, "cut short")
            return nil
        }
        // (Its last page may lie past the end of the file: pages a commit took and freed again before it ended
        // are listed free and never written. A page a tree reaches there is damage, found by the walk.)
        guard last >= 1 else {
            damage(UInt64(index), space, "its last page is \(last)")
            return nil
        }
        return Meta(page: index, free: free, main: main, lastPage: last, txnid: txnid)
    }

    // MARK: Trees

    /// What walking one database found, to compare with its record.
    private struct Tally {
        var branch: UInt64 = 0, leaf: UInt64 = 0, overflow: UInt64 = 0, entries: UInt64 = 0
    }

    private mutating func walk(_ record: Record, space: String, isMain: Bool = false, isFreeList: Bool = false) {
        if record.root == LMDBFileCheck.noPage {
            if record.entries != 0 || record.depth != 0 {
                damage(nil, space, "no root page, yet \(record.entries) entries and depth \(record.depth)")
            }
            return
        }
        guard record.depth >= 1, record.depth <= 64 else {
            damage(record.root, space, "depth \(record.depth) is impossible")
            return
        }
        roots[space] = record.root
        var tally = Tally()
        visit(record.root, level: 1, record: record, space: space, isMain: isMain, isFreeList: isFreeList, tally: &tally)
        guard problems.isEmpty else { return }   // counts after damage say nothing more
        if tally.branch != record.branchPages || tally.leaf != record.leafPages || tally.overflow != record.overflowPages
            || tally.entries != record.entries {
            damage(record.root, space, "its record says \(record.branchPages) branch, \(record.leafPages) leaf and "
                + "\(record.overflowPages) overflow pages and \(record.entries) entries; the tree has \(tally.branch), "
                + "\(tally.leaf), \(tally.overflow) and \(tally.entries)")
        }
    }

    /// Claims `count` pages from `page` for this walk; false (reported) when one is past the end or met before.
    private mutating func claim(_ page: UInt64, count: UInt64 = 1, space: String, free: Bool = false) -> Bool {
        guard page < UInt64(pageCount), count >= 1, count <= UInt64(pageCount) - page else {
            damage(page, space, "page \(page)\(count > 1 ? " (and \(count - 1) after it)" : "") "
                + FileStorage.pastTheLastPage(pageCount))
            return false
        }
        // A page in use lies wholly within the file (the commit's last page may lie past its end, free pages there
        // never written; a page a tree reaches there is a file cut short, whose reads would fault).
        guard free || (page + count) * UInt64(pageSize) <= UInt64(bytes.count) else {
            damage(page, space, "page \(page)\(count > 1 ? " (and \(count - 1) after it)" : "") "
                + LMDBFileCheck.pastTheEnd)
            return false
        }
        for p in Int(page)..<Int(page + count) {
            if state[p] != 0 {
                damage(UInt64(p), space, free || state[p] == 2 ? "page \(p) is both free and in use"
                    : "page \(p) is reached twice (a loop, or a page shared by two places)")
                return false
            }
            state[p] = free ? 2 : 1
        }
        return true
    }

    /// Walks the tree from `page`, whose keys must lie from `lower` on and before `upper` (its parent's keys around
    /// it): a key outside them is one a look-up would not find, though a walk from the first key would.
    private mutating func visit(_ page: UInt64, level: Int, record: Record, space: String, isMain: Bool,
                                isFreeList: Bool, tally: inout Tally, lower: UnsafeRawBufferPointer? = nil,
                                upper: UnsafeRawBufferPointer? = nil) {
        guard claim(page, space: space) else { return }
        pagesChecked += 1
        let base = Int(page) * pageSize
        guard let number = u64(base), let flags = u16(base + 10) else {
            damage(page, space, "page \(page) \(LMDBFileCheck.pastTheEnd)")
            return
        }
        guard number == page else {
            damage(page, space, "page \(page) says it is page \(number)")
            return
        }
        // Exactly one kind: LMDB descends while a page says branch, so a page saying both is read as a branch.
        let kind = flags & PageFlag.kinds
        let isLeaf = kind == PageFlag.leaf
        guard kind == PageFlag.branch || isLeaf, isLeaf == (level == Int(record.depth)) else {
            damage(page, space, "flags \(String(flags, radix: 16)) at level \(level) of \(record.depth): expected a "
                + (level == Int(record.depth) ? "leaf" : "branch") + " page")
            return
        }
        if isLeaf { tally.leaf += 1 } else { tally.branch += 1 }
        if flags & PageFlag.leaf2 != 0 {
            // Fixed-size duplicates (`MDB_DUPFIXED`): keys side by side, no nodes.
            guard isLeaf, record.flags & DatabaseFlag.dupFixed != 0, let end = u16(base + 12).map(Int.init),
                  let width = u16(base + 8).map(Int.init), width > 0, end >= LMDBFileCheck.headerSize,
                  LMDBFileCheck.headerSize + (end - LMDBFileCheck.headerSize) / 2 * width <= pageSize else {
                damage(page, space, "a page of fixed-size keys where a tree's page is expected")
                return
            }
            // LMDB reads the page's keys at the width its tree's record gives: a page of another width, or keys out
            // of order, are keys a look-up would not find (or would find cut).
            guard width == Int(record.pad) else {
                damage(page, space, "keys of \(width) bytes in a tree whose keys are \(record.pad) bytes")
                return
            }
            let count = (end - LMDBFileCheck.headerSize) / 2
            if record.flags & (DatabaseFlag.reverseKey | DatabaseFlag.integerKey) == 0,
               let i = outOfOrder(fixedKeysAt: base + LMDBFileCheck.headerSize, count: count, width: width,
                                  lower: lower, upper: upper) {
                damage(page, space, "fixed-size key \(i) out of order")
                return
            }
            tally.entries += UInt64(count)
            return
        }
        let nodes = self.nodes(inPageAt: base, length: pageSize, page: page, space: space)
        guard let nodes else { return }
        // A branch page's keys are kept, and its children visited once they are read: each child's keys must lie
        // between the two keys around it.
        var keys: [UnsafeRawBufferPointer] = []
        if !isLeaf { keys.reserveCapacity(nodes.count) }
        var previous: UnsafeRawBufferPointer?
        let ordered = record.flags & (DatabaseFlag.reverseKey | DatabaseFlag.integerKey) == 0
        for (i, node) in nodes.enumerated() {
            guard let key = self.key(of: node, within: base + pageSize, page: page, space: space) else { return }
            // A branch page's first key is empty: everything before the second goes left.
            if ordered, !(i == 0 && !isLeaf) {
                // The keys in order, the first from `lower` on and the last before `upper`: all lie between.
                if let previous, !LMDBFileCheck.precedes(previous, key) {
                    damage(page, space, "keys out of order at node \(i)")
                    return
                }
                if previous == nil, let lower, LMDBFileCheck.precedes(key, lower) {
                    damage(page, space, "key of node \(i) lies before the key its parent page has for it")
                    return
                }
                previous = key
                if i + 1 == nodes.count, let upper, !LMDBFileCheck.precedes(key, upper) {
                    damage(page, space, "key of node \(i) lies at or after the key its parent page has for the next page")
                    return
                }
            }
            if !isLeaf {
                keys.append(key)
                continue
            }
            guard let lo = u16(node), let hi = u16(node + 2), let nodeFlags = u16(node + 4) else { return }
            let size = Int(UInt32(lo) | UInt32(hi) << 16)
            let dataStart = node + LMDBFileCheck.nodeHeaderSize + key.count
            leaf(nodeFlags, key: key, data: dataStart, size: size, pageEnd: base + pageSize, page: page, record: record,
                 space: space, isMain: isMain, isFreeList: isFreeList, tally: &tally)
            if problems.count >= 100 { return }
        }
        guard !isLeaf else { return }
        for (i, node) in nodes.enumerated() {
            guard let lo = u16(node), let hi = u16(node + 2), let nodeFlags = u16(node + 4) else { return }
            let child = UInt64(lo) | UInt64(hi) << 16 | UInt64(nodeFlags) << 32
            visit(child, level: level + 1, record: record, space: space, isMain: isMain, isFreeList: isFreeList,
                  tally: &tally, lower: !ordered ? nil : i == 0 ? lower : keys[i],
                  upper: !ordered ? nil : i + 1 < keys.count ? keys[i + 1] : upper)
            if problems.count >= 100 { return }
        }
    }

    /// The offsets of a page's nodes (page-relative offsets checked to lie within it, after the pointers); `nil`,
    /// reported, when its bounds make no sense.
    private mutating func nodes(inPageAt base: Int, length: Int, page: UInt64, space: String) -> [Int]? {
        guard let lower = u16(base + 12).map(Int.init), let upper = u16(base + 14).map(Int.init) else {
            damage(page, space, "cut short")
            return nil
        }
        guard lower >= LMDBFileCheck.headerSize, lower <= upper, upper <= length, (lower - LMDBFileCheck.headerSize) % 2 == 0 else {
            damage(page, space, "free-space bounds \(lower)..\(upper) do not fit a page of \(length) bytes")
            return nil
        }
        let count = (lower - LMDBFileCheck.headerSize) / 2
        var offsets: [Int] = []
        offsets.reserveCapacity(count)
        for i in 0..<count {
            guard let offset = u16(base + LMDBFileCheck.headerSize + 2 * i).map(Int.init),
                  offset >= upper, offset + LMDBFileCheck.nodeHeaderSize <= length else {
                damage(page, space, "node \(i) lies outside the page's node area")
                return nil
            }
            offsets.append(base + offset)
        }
        if count == 0 { damage(page, space, "an empty page in a tree") }
        return count == 0 ? nil : offsets
    }

    private mutating func key(of node: Int, within end: Int, page: UInt64, space: String) -> UnsafeRawBufferPointer? {
        guard let size = u16(node + 6).map(Int.init), node + LMDBFileCheck.nodeHeaderSize + size <= end else {
            damage(page, space, "a key runs past the end of its page")
            return nil
        }
        let start = node + LMDBFileCheck.nodeHeaderSize
        return UnsafeRawBufferPointer(rebasing: bytes[start..<(start + size)])
    }

    private mutating func leaf(_ flags: UInt16, key: UnsafeRawBufferPointer, data: Int, size: Int, pageEnd: Int,
                               page: UInt64, record: Record, space: String, isMain: Bool, isFreeList: Bool,
                               tally: inout Tally) {
        // LMDB follows these flags without asking whether the database allows them (a key's duplicates in a
        // database without them are read through a cursor that does not exist).
        let isDupSort = record.flags & DatabaseFlag.dupSort != 0
        let allowed: Bool
        switch flags {
        case 0: allowed = true
        case NodeFlag.bigData: allowed = !isDupSort
        case NodeFlag.subData: allowed = isMain
        case NodeFlag.dupData, NodeFlag.dupData | NodeFlag.subData: allowed = isDupSort
        default: allowed = false
        }
        guard allowed else {
            damage(page, space, "a node with flags \(String(flags, radix: 16)), which a "
                + (isDupSort ? "database of duplicates" : isMain ? "main database" : "database") + " cannot hold")
            return
        }
        if flags & NodeFlag.bigData != 0 {
            guard data + 8 <= pageEnd, let first = u64(data) else {
                damage(page, space, "an overflow reference runs past the end of its page")
                return
            }
            guard claimOverflow(first, size: size, space: space, tally: &tally) else { return }
            tally.entries += 1
            if isFreeList { freePages(listAt: Int(first) * pageSize + LMDBFileCheck.headerSize, size: size, space: space) }
            return
        }
        guard data + size <= pageEnd else {
            damage(page, space, "a value of \(size) bytes runs past the end of its page")
            return
        }
        if flags & NodeFlag.subData != 0 {
            guard size == LMDBFileCheck.recordSize, let child = self.record(at: data) else {
                damage(page, space, "a database record of \(size) bytes")
                return
            }
            if flags & NodeFlag.dupData != 0 {
                // The duplicates of one key, in a tree of their own: they count as this database's entries.
                var dups = Tally()
                // The duplicates are the sub-tree's keys, in the duplicates' order.
                var dupFlags: UInt16 = record.flags & DatabaseFlag.dupFixed
                if record.flags & DatabaseFlag.integerDup != 0 { dupFlags |= DatabaseFlag.integerKey }
                let written = record.flags & DatabaseFlag.dupFixed == 0 ? 0 : dupFlags
                guard child.flags == written else {   // what LMDB writes, and reads the sub-tree by
                    damage(page, space, "a key's duplicates have a record with flags \(String(child.flags, radix: 16))")
                    return
                }
                if record.flags & DatabaseFlag.reverseDup != 0 { dupFlags |= DatabaseFlag.reverseKey }
                var dupRecord = child
                dupRecord.flags = dupFlags
                visitDuplicates(dupRecord, space: space, tally: &dups)
                tally.entries += dups.entries   // their pages are counted in their own record, not the database's
            } else if isMain {
                tally.entries += 1
                walk(child, space: String(decoding: key, as: UTF8.self))
            } else {
                damage(page, space, "a database record outside the main database")
            }
            return
        }
        if flags & NodeFlag.dupData != 0 {
            // (Duplicates sort as keys do unless the database says otherwise: `MDB_REVERSEDUP`, `MDB_INTEGERDUP`.)
            let ordered = record.flags & (DatabaseFlag.reverseDup | DatabaseFlag.integerDup) == 0
            tally.entries += duplicates(inSubpageAt: data, size: size, page: page, space: space, ordered: ordered)
            return
        }
        tally.entries += 1
        if isFreeList { freePages(listAt: data, size: size, space: space) }
    }

    private mutating func visitDuplicates(_ record: Record, space: String, tally: inout Tally) {
        guard record.root != LMDBFileCheck.noPage, record.depth >= 1, record.depth <= 64 else {
            damage(nil, space, "a key's duplicates have no tree (depth \(record.depth))")
            return
        }
        var found = Tally()
        visit(record.root, level: 1, record: record, space: space, isMain: false, isFreeList: false, tally: &found)
        if problems.isEmpty && (found.entries != record.entries || found.leaf != record.leafPages
            || found.branch != record.branchPages) {
            damage(record.root, space, "a key's duplicates number \(found.entries) in \(found.branch) branch and "
                + "\(found.leaf) leaf pages; their record says \(record.entries) in \(record.branchPages) and \(record.leafPages)")
        }
        tally = found
    }

    /// The duplicates of one key kept inside its node (a sub-page): their number, 0 when damaged (reported).
    private mutating func duplicates(inSubpageAt start: Int, size: Int, page: UInt64, space: String,
                                     ordered: Bool) -> UInt64 {
        guard size >= LMDBFileCheck.headerSize, let flags = u16(start + 10),
              flags & PageFlag.kinds == PageFlag.leaf | PageFlag.subpage else {
            damage(page, space, "a key's duplicates are not a sub-page")
            return 0
        }
        if flags & PageFlag.leaf2 != 0 {
            guard let lower = u16(start + 12).map(Int.init), lower >= LMDBFileCheck.headerSize, lower <= size,
                  let width = u16(start + 8).map(Int.init), width > 0 else {
                damage(page, space, "a sub-page of fixed-size duplicates with impossible bounds")
                return 0
            }
            let count = (lower - LMDBFileCheck.headerSize) / 2
            guard LMDBFileCheck.headerSize + count * width <= size else {
                damage(page, space, "fixed-size duplicates run past their sub-page")
                return 0
            }
            if ordered, let i = outOfOrder(fixedKeysAt: start + LMDBFileCheck.headerSize, count: count, width: width,
                                           lower: nil, upper: nil) {
                damage(page, space, "a key's fixed-size duplicate \(i) out of order")
                return 0
            }
            return UInt64(count)
        }
        guard let nodes = self.nodes(inPageAt: start, length: size, page: page, space: space) else { return 0 }
        var previous: UnsafeRawBufferPointer?
        for node in nodes {
            // A duplicate is a key alone: LMDB reads any flag on it as it would on a database's node (duplicates of a
            // duplicate, through a cursor that does not exist).
            guard u16(node + 4) == 0 else {
                damage(page, space, "a key's duplicate with flags \(String(u16(node + 4) ?? 0, radix: 16))")
                return 0
            }
            guard let value = key(of: node, within: start + size, page: page, space: space) else { return 0 }
            if let previous, !LMDBFileCheck.precedes(previous, value) {
                damage(page, space, "a key's duplicates are out of order")
                return 0
            }
            previous = value
        }
        return UInt64(nodes.count)
    }

    private mutating func claimOverflow(_ first: UInt64, size: Int, space: String, tally: inout Tally) -> Bool {
        guard first < UInt64(pageCount) else {
            damage(first, space, "an overflow page \(first) " + FileStorage.pastTheLastPage(pageCount))
            return false
        }
        let base = Int(first) * pageSize
        guard let number = u64(base), number == first, let flags = u16(base + 10), flags & PageFlag.overflow != 0,
              let count = u32(base + 12), count >= 1 else {
            damage(first, space, "not an overflow page")
            return false
        }
        guard claim(first, count: UInt64(count), space: space) else { return false }
        pagesChecked += Int(count)
        guard size <= Int(count) * pageSize - LMDBFileCheck.headerSize else {
            damage(first, space, "a value of \(size) bytes in \(count) overflow pages")
            return false
        }
        tally.overflow += UInt64(count)
        return true
    }

    /// The page numbers of one free-list entry: a count, then as many page numbers.
    private mutating func freePages(listAt start: Int, size: Int, space: String) {
        guard size >= 8, let count = u64(start), count <= UInt64((size - 8) / 8) else {
            damage(nil, space, "a free-list entry of \(size) bytes with an impossible count")
            return
        }
        for i in 0..<Int(count) {
            guard let page = u64(start + 8 + 8 * i) else { return }
            guard page < UInt64(pageCount) else {
                if cutShort { continue }
                damage(page, space, "free page \(page) " + FileStorage.pastTheLastPage(pageCount))
                return
            }
            // Each page but the two meta pages is either in a tree or listed free, once: the free list's own pages
            // (walked already) are in use, and a page listed twice would be handed out twice.
            guard page >= 2 else {
                damage(page, space, "meta page \(page) is listed as free, and a commit would write over it")
                continue
            }
            switch state[Int(page)] {
            case 0: state[Int(page)] = 2
            case 2: damage(page, space, "free page \(page) is listed twice, and would be handed out twice")
            default: damage(page, space, "page \(page) of the free list's own tree is listed as free")
            }
        }
    }

    /// Byte order, shorter first on a tie: LMDB's default order.
    /// The first of `count` keys of `width` bytes side by side from `start` that is not after the one before it
    /// (the first from `lower` on, the last before `upper`), or `nil` when they are in order.
    private func outOfOrder(fixedKeysAt start: Int, count: Int, width: Int, lower: UnsafeRawBufferPointer?,
                            upper: UnsafeRawBufferPointer?) -> Int? {
        guard start + count * width <= bytes.count else { return 0 }
        var previous = lower
        for i in 0..<count {
            let key = UnsafeRawBufferPointer(rebasing: bytes[(start + i * width)..<(start + (i + 1) * width)])
            if let previous, i == 0 ? LMDBFileCheck.precedes(key, previous) : !LMDBFileCheck.precedes(previous, key) {
                return i
            }
            previous = key
        }
        if count > 0, let upper, let previous, !LMDBFileCheck.precedes(previous, upper) { return count - 1 }
        return nil
    }

    private static func precedes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let n = min(a.count, b.count)
        let c = n == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, n)
        return c != 0 ? c < 0 : a.count < b.count
    }
}

// MARK: - Salvage

extension LMDBFileCheck {
    typealias Salvage = FileStorage.Salvage
    typealias LoosePage = FileStorage.LoosePage

    fileprivate mutating func salvage(_ wanted: (String) -> Bool) -> Salvage {
        var result = Salvage()
        let metas = readMetas().sorted { $0.txnid > $1.txnid }
        pageCount = bytes.count / pageSize
        state = [UInt8](repeating: 0, count: pageCount)
        result.newestCommit = metas.first?.txnid
        if let newest = metas.first, newest.lastPage >= UInt64(pageCount) {
            result.cutShort = (pageCount, newest.lastPage)
            cutShort = true
        }
        var read: Meta?
        for meta in metas {
            state = [UInt8](repeating: 0, count: pageCount)
            var named: [(name: String, record: Record)] = []
            collect(meta.main.root, level: 1, space: "main") { reader, flags, key, data, size, _ in
                if flags == NodeFlag.subData, size == LMDBFileCheck.recordSize, let record = reader.record(at: data) {
                    named.append((String(decoding: key, as: UTF8.self), record))
                }
            }
            if named.isEmpty && meta.txnid != metas.last?.txnid { continue }
            if !named.isEmpty {
                read = meta
                result.readCommit = meta.txnid
            }
            for (name, record) in named where wanted(name) {
                result.recordedEntries[name] = record.entries
                var entries: [(key: [UInt8], value: [UInt8])] = []
                holes = []
                collect(record.root, level: 1, space: name) { reader, flags, key, data, size, pageEnd in
                    if let value = reader.plainValue(flags: flags, data: data, size: size, pageEnd: pageEnd, space: name) {
                        entries.append((Array(key), value))
                    } else {
                        reader.damage(nil, name, "an entry with flags \(String(flags, radix: 16)) that cannot be read")
                        reader.holes.append(FileStorage.KeyInterval(lower: Array(key), upper: Array(key) + [0]))
                    }
                }
                result.databases[name] = entries
                result.holes[name] = holes
            }
            break
        }
        // The leaf pages no tree reaches, but those the free list of the commit read holds. In a file cut short,
        // every one left, even when the free list cannot be read; and when the newest commit cannot be read, those
        // the older commit's free list holds too, since the newest may have written on them.
        let everyPage = result.cutShort != nil || read == nil
        (result.loosePages, result.freePagesLeftOut) = loosePages(
            freeList: everyPage && !result.readNewest ? nil : read?.free,
            lastPage: metas.map(\.lastPage).max() ?? UInt64(pageCount), evenWithFreePages: everyPage)
        result.damage = problems
        return result
    }

    /// The value of a leaf node of plain data, kept in its page or on overflow pages; `nil` for any other node, or
    /// one that cannot be read.
    private mutating func plainValue(flags: UInt16, data: Int, size: Int, pageEnd: Int, space: String) -> [UInt8]? {
        switch flags {
        case 0 where data + size <= pageEnd:
            return Array(UnsafeRawBufferPointer(rebasing: bytes[data..<(data + size)]))
        case NodeFlag.bigData where data + 8 <= pageEnd:
            guard let first = u64(data) else { return nil }
            return overflowValue(first, size: size, space: space)
        default:
            return nil
        }
    }

    /// The leaf pages up to `lastPage` that the walks so far did not reach, and that the free list `freeList` does
    /// not hold. When the free list cannot be read (or there is none to read), there are none, unless
    /// `evenWithFreePages`: then they include the free pages the free list could not tell. Also says whether every
    /// free page was left out.
    private mutating func loosePages(freeList: Record?, lastPage: UInt64,
                                     evenWithFreePages: Bool) -> (pages: [LoosePage], freeLeftOut: Bool) {
        let before = problems.count
        var freeLeftOut = false
        if let freeList {
            // The free list's pages, then the pages it lists, marked as not to be read.
            collect(freeList.root, level: 1, space: "free list") { reader, flags, _, data, size, pageEnd in
                if flags == 0, data + size <= pageEnd {
                    reader.freePages(listAt: data, size: size, space: "free list")
                } else if flags == NodeFlag.bigData, data + 8 <= pageEnd, let first = reader.u64(data) {
                    var tally = Tally()
                    if reader.claimOverflow(first, size: size, space: "free list", tally: &tally) {
                        reader.freePages(listAt: Int(first) * reader.pageSize + LMDBFileCheck.headerSize, size: size,
                                         space: "free list")
                    }
                }
            }
            freeLeftOut = problems.count == before && before < 100
        }
        var pages: [LoosePage] = []
        if freeLeftOut || evenWithFreePages {
            let end = pageCount == 0 ? 0 : Int(min(lastPage, UInt64(pageCount - 1))) + 1
            for page in 2..<max(end, 2) where state[page] == 0 {
                let base = page * pageSize
                guard u64(base) == UInt64(page), let flags = u16(base + 10),
                      flags & (PageFlag.kinds | PageFlag.leaf2) == PageFlag.leaf else { continue }
                var loose = LoosePage(page: page)
                collect(UInt64(page), level: 1, space: "page \(page), reached by no tree") { reader, flags, key, data, size, pageEnd in
                    if let value = reader.plainValue(flags: flags, data: data, size: size, pageEnd: pageEnd, space: "") {
                        loose.entries.append((Array(key), value))
                    } else if flags == NodeFlag.subData, size == LMDBFileCheck.recordSize {
                        loose.databaseNames.append(String(decoding: key, as: UTF8.self))
                    }
                }
                if !loose.entries.isEmpty || !loose.databaseNames.isEmpty { pages.append(loose) }
            }
        }
        problems.removeSubrange(min(before, problems.count)...)   // what is not a tree's page is not damage
        return (pages, freeLeftOut)
    }

    /// Calls `body` with each leaf node under `page` (its flags, key, where its value starts, its size, and the
    /// end of its page), skipping any page that is not what a tree's page must be. The keys a skipped page would
    /// hold (from `lower`, `nil` for the first, up to but not including `upper`, `nil` for past the last: what the
    /// branch above says) are added to ``holes``.
    private mutating func collect(_ page: UInt64, level: Int, space: String, lower: [UInt8]? = nil,
                                  upper: [UInt8]? = nil,
                                  _ body: (inout LMDBFileCheck, UInt16, UnsafeRawBufferPointer, Int, Int, Int) -> Void) {
        guard page != LMDBFileCheck.noPage else { return }
        guard level <= 64 else {
            damage(page, space, "a tree deeper than 64 levels")
            holes.append(FileStorage.KeyInterval(lower: lower, upper: upper))
            return
        }
        guard claim(page, space: space) else {
            holes.append(FileStorage.KeyInterval(lower: lower, upper: upper))
            return
        }
        let base = Int(page) * pageSize
        let flags = u16(base + 10) ?? 0, number = u64(base) ?? LMDBFileCheck.noPage
        let kind = flags & PageFlag.kinds
        guard number == page, kind == PageFlag.branch || kind == PageFlag.leaf, flags & PageFlag.leaf2 == 0 else {
            damage(page, space, "not a page of this tree (it says it is page \(number), flags \(String(flags, radix: 16)))")
            holes.append(FileStorage.KeyInterval(lower: lower, upper: upper))
            return
        }
        guard let nodes = nodes(inPageAt: base, length: pageSize, page: page, space: space) else {
            holes.append(FileStorage.KeyInterval(lower: lower, upper: upper))
            return
        }
        if kind == PageFlag.branch {
            // Child i holds the keys from the key of node i (the first node's is the page's lower bound) up to that
            // of node i + 1. A node that cannot be read leaves its keys unknown: the whole page's are a hole then.
            var children: [(page: UInt64, key: [UInt8])] = []
            for node in nodes {
                guard let key = key(of: node, within: base + pageSize, page: page, space: space),
                      let lo = u16(node), let hi = u16(node + 2), let high = u16(node + 4) else { continue }
                children.append((UInt64(lo) | UInt64(hi) << 16 | UInt64(high) << 32, Array(key)))
            }
            if children.count < nodes.count { holes.append(FileStorage.KeyInterval(lower: lower, upper: upper)) }
            for (i, child) in children.enumerated() {
                let whole = children.count < nodes.count
                collect(child.page, level: level + 1, space: space,
                        lower: whole || i == 0 ? lower : child.key,
                        upper: whole || i + 1 == children.count ? upper : children[i + 1].key, body)
            }
            return
        }
        for node in nodes {
            guard let key = key(of: node, within: base + pageSize, page: page, space: space),
                  let lo = u16(node), let hi = u16(node + 2), let nodeFlags = u16(node + 4) else { continue }
            body(&self, nodeFlags, key, node + LMDBFileCheck.nodeHeaderSize + key.count,
                 Int(UInt32(lo) | UInt32(hi) << 16), base + pageSize)
        }
    }

    /// The value of `size` bytes kept on the overflow pages from `first`, if they are overflow pages that hold it.
    private mutating func overflowValue(_ first: UInt64, size: Int, space: String) -> [UInt8]? {
        var tally = Tally()
        guard claimOverflow(first, size: size, space: space, tally: &tally) else { return nil }
        let start = Int(first) * pageSize + LMDBFileCheck.headerSize
        return Array(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + size)]))
    }
}

// MARK: - The file engine's checks

extension FileStorage {
    /// Checks the structure of the file at `path` without trusting it, as the commit `snapshot` (or a later one) has
    /// it: the damage found, and the pages read. With a `snapshot`, the caller holds a read transaction of that
    /// commit, so that no page reachable from it or from a later commit is reused meanwhile.
    ///
    /// With `snapshot` 0 no transaction is held (a file being opened): a writer in another process may reuse pages
    /// while they are read. Damage found while the newest commit moved is therefore looked for again, and not
    /// reported if the file never stood still.
    static func check(path: String, snapshot: Int = 0) -> (damage: [StorageDamage], pages: Int) {
        var check = LMDBFileCheck.run(path: path)
        guard snapshot == 0 else { return (check.problems, check.pagesChecked) }
        let moved = { check.newestCommit != LMDBFileCheck.run(path: path, metaOnly: true).newestCommit }
        for _ in 0..<3 where !check.problems.isEmpty && moved() {
            check = LMDBFileCheck.run(path: path)
        }
        if !check.problems.isEmpty && moved() {
            return ([], check.pagesChecked)   // written throughout: nothing can be said
        }
        return (check.problems, check.pagesChecked)
    }

    /// How the damage reported for a page past the last of `pageCount` pages (a file cut short) ends.
    static func pastTheLastPage(_ pageCount: Int) -> String { "lies past the last page \(pageCount - 1)" }

    /// Reads the key spaces (named databases) of the damaged file at `path` that `wanted` accepts, without trusting
    /// anything: a page that is not what it should be is skipped (with what hangs from it) and reported, and the
    /// rest is read. The newest commit is read, or the one before when the newest has no readable main database; a
    /// commit whose pages run past the end of the file (a file cut short) is read as far as the file goes, and then
    /// every leaf page left is read. `nil` when the file cannot be read or is not an LMDB file.
    static func salvage(path: String, spaces wanted: (String) -> Bool) -> Salvage? {
        // (Never read: closing it would let go of that store's locks.)
        guard !LMDBEnvironment.isOpenLockFile(path) else { return nil }
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) else { return nil }
        return data.withUnsafeBytes { raw -> Salvage? in
            var reader = LMDBFileCheck(bytes: raw)
            return reader.isLMDBFile ? reader.salvage(wanted) : nil
        }
    }
}
