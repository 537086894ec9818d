import Foundation
import Testing
@testable import DocStore

/// The walk that reads a read transaction's pages itself (`LMDBPageWalk`) against LMDB's own cursor: the same
/// entries, byte for byte, in the same order, from any starting key and backwards; and damage to the pages it
/// reads is an error that names it, never a crash.
@Suite struct PageWalkTests {
    /// The walked space's name, found in a file by its bytes.
    static let name = "walked-space"

    static func environment(_ dir: TemporaryDirectory, _ name: String = "walk.mdb") throws -> LMDBEnvironment {
        try LMDBEnvironment(path: dir.path(name), configuration: .init(
            initialMapSize: 1 << 24, maximumMapSize: 1 << 28, maxDatabases: 4, maxReaders: 8))
    }

    /// Random keys of 1 to 60 bytes, many sharing prefixes, with values of every size: empty, small, and larger
    /// than a page (kept on overflow pages); then a third deleted, so that some pages are left part full.
    static func fill(_ env: LMDBEnvironment, seed: UInt64, count: Int) throws -> KeySpace {
        var rng = SeededGenerator(seed: seed)
        let space = try env.write { txn in try txn.openKeySpace(Self.name, create: true)! }
        var keys: [[UInt8]] = []
        try env.write { txn in
            for _ in 0..<count {
                let prefix = keys.isEmpty || Bool.random(using: &rng) ? [] : Array(keys.randomElement(using: &rng)!.prefix(Int.random(in: 0...8, using: &rng)))
                let key = prefix + (0..<Int.random(in: 1...(60 - prefix.count), using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let size = switch Int.random(in: 0..<20, using: &rng) {
                case 0: 0
                case 1: Int.random(in: 4_000...20_000, using: &rng)
                default: Int.random(in: 1...300, using: &rng)
                }
                let value = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
                try txn.put(space, key, value)
                keys.append(key)
            }
        }
        try env.write { txn in
            for key in keys where Int.random(in: 0..<3, using: &rng) == 0 { try txn.delete(space, key) }
        }
        return space
    }

    /// Every entry from `walk`, copied.
    static func entries(_ walk: StorageWalk) throws -> [[UInt8]] {
        var found: [[UInt8]] = []
        while let (key, value) = try walk.next() { found.append(Array(key)); found.append(Array(value)) }
        return found
    }

    /// The cursor's entries from `lower` below `upper` (or backwards from the last), copied.
    static func cursorEntries(_ txn: any StorageTransaction, _ space: KeySpace, from lower: [UInt8]?,
                              below upper: [UInt8]? = nil, descending: Bool) throws -> [[UInt8]] {
        try txn.withCursor(space) { cursor in
            var found: [[UInt8]] = []
            var entry = descending ? try cursor.last() : try cursor.seek(atLeast: lower ?? [])
            while let (key, value) = entry, upper.map({ key.lexicographicallyPrecedes($0) }) ?? true {
                found.append(Array(key)); found.append(Array(value))
                entry = descending ? try cursor.previous() : try cursor.next()
            }
            return found
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aWalkGivesWhatTheCursorGives(seed: UInt64) throws {
        let dir = TemporaryDirectory()
        let env = try Self.environment(dir)
        defer { env.close() }
        let space = try Self.fill(env, seed: seed, count: 6_000)
        var rng = SeededGenerator(seed: seed + 100)
        try env.read { txn in
            let all = try Self.cursorEntries(txn, space, from: nil, below: nil, descending: false)
            let forward = try #require(try txn.walk(space, from: nil, below: nil, descending: false))
            #expect(try Self.entries(forward) == all)
            #expect(try forward.next() == nil, "a walk that ended stays ended")
            let backward = try #require(try txn.walk(space, from: nil, below: nil, descending: true))
            let allBackward = try Self.cursorEntries(txn, space, from: nil, below: nil, descending: true)
            #expect(try Self.entries(backward) == allBackward)
            let depth = try #require(try txn.walk(space, from: nil, below: nil, descending: false) as? LMDBPageWalk).pagesOnPath.count
            #expect(depth >= 3, "the tree is \(depth) deep: the walk must cross branches")
            // From keys that are there, keys between them, prefixes of them, and keys past either end.
            let keys = stride(from: 0, to: all.count, by: 2).map { all[$0] }
            var lowers: [[UInt8]] = [[], [0], [255, 255, 255], keys[0], keys[keys.count - 1], keys[keys.count - 1] + [0]]
            for _ in 0..<60 {
                let key = keys.randomElement(using: &rng)!
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: lowers.append(key)
                case 1: lowers.append(key + [0])
                case 2: lowers.append(Array(key.prefix(Int.random(in: 1...key.count, using: &rng))))
                default: lowers.append((0..<Int.random(in: 1...10, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
                }
            }
            for lower in lowers {
                let walk = try #require(try txn.walk(space, from: lower, below: nil, descending: false))
                let expected = try Self.cursorEntries(txn, space, from: lower, descending: false)
                #expect(try Self.entries(walk) == expected, "from \(lower)")
                // And up to a bound: another of the keys, above or below this one (nothing then), or its own.
                for upper in [lowers.randomElement(using: &rng)!, lower, lower + [0]] {
                    let walk = try #require(try txn.walk(space, from: lower, below: upper, descending: false))
                    let expected = try Self.cursorEntries(txn, space, from: lower, below: upper, descending: false)
                    #expect(try Self.entries(walk) == expected, "from \(lower) below \(upper)")
                }
            }
            let upTo = try #require(try txn.walk(space, from: nil, below: keys[keys.count / 2], descending: false))
            #expect(try Self.entries(upTo) == Array(all.prefix(keys.count / 2 * 2)))
            #expect(try txn.walk(space, from: [1], below: nil, descending: true) == nil, "backwards from a key: the cursor's")
            #expect(try txn.walk(space, from: nil, below: [1], descending: true) == nil, "backwards to a key: the cursor's")
        }
    }

    /// Cuts read from the branch pages split a space into ranges of about as many entries each, however the keys
    /// spread over their range: here numbers' keys (a double's bits, so that each power of two takes as wide a
    /// stretch of keys as the next), and random keys.
    @Test func cutsMakeRangesOfAboutAsManyEntries() throws {
        let dir = TemporaryDirectory()
        let env = try Self.environment(dir)
        defer { env.close() }
        let numbers = try env.write { txn in try txn.openKeySpace("n", create: true)! }
        try env.write { txn in
            for i in 1...30_000 {
                let key = withUnsafeBytes(of: Double(i).bitPattern.bigEndian) { Array($0) }
                try txn.put(numbers, key, [UInt8](repeating: 7, count: 60))
            }
        }
        let random = try Self.fill(env, seed: 4, count: 6_000)
        try env.read { txn in
            for (space, parts) in [(numbers, 16), (numbers, 3), (random, 8), (random, 40)] {
                let cuts = try #require(try txn.cuts(space, parts: parts))
                #expect(zip(cuts, cuts.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) }, "increasing")
                var counts = [Int](repeating: 0, count: cuts.count + 1)
                try txn.forEachEntry(in: space) { key, _ in
                    counts[cuts.firstIndex { !$0.lexicographicallyPrecedes(key) && !$0.elementsEqual(key) } ?? cuts.count] += 1
                }
                let total = counts.reduce(0, +)
                #expect(cuts.count >= parts / 2 && cuts.count < parts, "\(cuts.count) cuts for \(parts) parts")
                #expect(counts.allSatisfy { $0 > 0 && $0 < 3 * total / (cuts.count + 1) }, "\(counts)")
            }
        }
        // A space of one page has no cut; a write has none to give.
        let small = try env.write { txn in try txn.openKeySpace("one", create: true)! }
        try env.write { txn in _ = try txn.put(small, [1], [1]) }
        let one = try env.read { txn in try txn.cuts(small, parts: 8) }
        #expect(one == [])
        let inWrite = try env.write { txn in try txn.cuts(numbers, parts: 8) }
        #expect(inWrite == nil)
    }

    /// Where `bytes` stand in `data`.
    static func offsets(of bytes: [UInt8], in data: Data) -> [Int] {
        let all = [UInt8](data)
        return (0...(all.count - bytes.count)).filter { all[$0] == bytes[0] && all[$0..<$0 + bytes.count].elementsEqual(bytes) }
    }

    /// Damage outside the walked space's own pages: its record in the main database (a depth with no root, a root
    /// with no depth), the number of the page that record lies on (which LMDB never reads, and the walk takes where
    /// the map begins from), and a file cut short below pages the walk reaches.
    @Test func damageToTheRecordItsPageOrTheFilesLengthIsNeverACrash() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("clean.mdb")
        var pages = Set<UInt64>()
        var all: [[UInt8]] = []
        do {
            let env = try Self.environment(dir, "clean.mdb")
            let space = try Self.fill(env, seed: 12, count: 3_000)
            try env.read { txn in
                let walk = try #require(try txn.walk(space, from: nil, below: nil, descending: false) as? LMDBPageWalk)
                while try walk.next() != nil { pages.formUnion(walk.pagesOnPath) }
                all = try Self.cursorEntries(txn, space, from: nil, descending: false)
            }
            env.close()
        }
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        // The records: every copy of the main database's page holds one after the name (old copies lie on free pages).
        let records = Self.offsets(of: Array(Self.name.utf8), in: clean).map { $0 + Self.name.utf8.count }
        #expect(!records.isEmpty)
        func open(_ copy: Data, _ label: String, _ body: (LMDBEnvironment, KeySpace) throws -> Void) throws {
            let damagedPath = dir.path("\(label).mdb")
            try copy.write(to: URL(fileURLWithPath: damagedPath))
            defer { for file in [damagedPath, damagedPath + "-lock"] { try? FileManager.default.removeItem(atPath: file) } }
            let env = try Self.environment(dir, "\(label).mdb")
            defer { env.close() }
            try body(env, try env.write { txn in try txn.openKeySpace(Self.name, create: false)! })
        }
        // A depth with no root, and a root with no depth.
        for (depth, root) in [(UInt16(3), UInt64.max), (0, UInt64(pages.min()!))] {
            var copy = clean
            for record in records {
                withUnsafeBytes(of: depth) { copy.replaceSubrange(record + 6..<record + 8, with: $0) }
                withUnsafeBytes(of: root) { copy.replaceSubrange(record + 40..<record + 48, with: $0) }
            }
            try open(copy, "record-\(depth)") { env, space in
                #expect(throws: StorageError.self, "depth \(depth), root \(root)") {
                    try env.read { txn in _ = try txn.walk(space, from: nil, below: nil, descending: false) }
                }
            }
        }
        // The record's page numbered wrongly: the map's start cannot be told, and the cursor walks.
        for wrong in [UInt64(1), 3, 1 << 20, UInt64.max] {
            var copy = clean
            for record in records {
                let page = record / 4096 * 4096
                withUnsafeBytes(of: wrong) { copy.replaceSubrange(page..<page + 8, with: $0) }
            }
            try open(copy, "numbered-\(wrong)") { env, space in
                let (walk, read) = try env.read { txn in
                    (try txn.walk(space, from: nil, below: nil, descending: false),
                     try Self.cursorEntries(txn, space, from: nil, descending: false))
                }
                #expect(walk == nil, "page numbered \(wrong)")
                #expect(read == all)
            }
        }
        // The file cut short below pages the walk reaches (past the main database's page, which LMDB reads itself).
        let mainPage = UInt64(records.max()! / 4096)
        let beyond = pages.filter { $0 > mainPage + 1 }
        try #require(!beyond.isEmpty, "no page of the walk lies past the main database's")
        for cut in [mainPage + 1, beyond.min()!, beyond.max()!] {
            try open(clean.prefix(Int(cut) * 4096), "cut-\(cut)") { env, space in
                // Forwards and backwards over everything, the walk reaches a page past the end; from a key, it may not.
                for (lower, descending) in [(nil, false), (nil, true), ([UInt8(200)], false)] as [([UInt8]?, Bool)] {
                    do {
                        try env.read { txn in
                            if let walk = try txn.walk(space, from: lower, below: nil, descending: descending) {
                                _ = try Self.entries(walk)
                            }
                        }
                        #expect(lower != nil, "cut at page \(cut): the whole walk ended")
                    } catch StorageError.damaged(let why) {
                        #expect(why.contains("page"), "\(why)")
                    }
                }
            }
        }
    }

    /// A space this process has not opened before, opened by the read itself: the walk finds it by that read's
    /// own list, and a later read by the process's.
    @Test func aSpaceOpenedInTheReadItselfIsWalked() throws {
        let dir = TemporaryDirectory()
        do {
            let env = try Self.environment(dir)
            _ = try Self.fill(env, seed: 3, count: 500)
            env.close()
        }
        let env = try Self.environment(dir)
        defer { env.close() }
        for _ in 0..<2 {
            let (walked, stepped) = try env.readAlone { txn in
                let space = try #require(try txn.openKeySpace(Self.name, create: false))
                let walk = try #require(try txn.walk(space, from: nil, below: nil, descending: false))
                return (try Self.entries(walk), try Self.cursorEntries(txn, space, from: nil, descending: false))
            }
            #expect(!walked.isEmpty && walked == stepped)
        }
    }

    @Test func anEmptySpaceWalksToNothingAndWritesHaveNoWalk() throws {
        let dir = TemporaryDirectory()
        let env = try Self.environment(dir)
        defer { env.close() }
        let space = try env.write { txn in try txn.openKeySpace(Self.name, create: true)! }
        let duplicates = try env.write { txn in try txn.openKeySpace("d", create: true, duplicateSort: true)! }
        try env.write { txn in
            _ = try txn.put(duplicates, [1], [2])
            #expect(try txn.walk(space, from: nil, below: nil, descending: false) == nil, "a write's pages are not in the map")
        }
        try env.read { txn in
            for (lower, descending) in [(nil, false), ([5], false), (nil, true)] as [([UInt8]?, Bool)] {
                let walk = try #require(try txn.walk(space, from: lower, below: nil, descending: descending))
                #expect(try walk.next() == nil)
            }
            #expect(try txn.walk(duplicates, from: nil, below: nil, descending: false) == nil, "a key's values: the cursor's")
        }
    }

    /// Damage to any page the walk stands on (a branch or a leaf): random bytes, its header, its table
    /// of offsets, zeros, or another page copied over it. Each walk ends or throws ``StorageError/damaged(_:)``.
    @Test func damageToThePagesOfAWalkIsAnErrorNeverACrash() throws {
        let dir = TemporaryDirectory()
        let path = dir.path("clean.mdb")
        var pages = Set<UInt64>()
        do {
            let env = try Self.environment(dir, "clean.mdb")
            let space = try Self.fill(env, seed: 9, count: 3_000)
            try env.read { txn in
                let walk = try #require(try txn.walk(space, from: nil, below: nil, descending: false) as? LMDBPageWalk)
                pages.formUnion(walk.pagesOnPath)
                while try walk.next() != nil { pages.formUnion(walk.pagesOnPath) }
            }
            env.close()
        }
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = 4096
        let ordered = pages.sorted()
        var rng = SeededGenerator(seed: 5)
        var (ended, refused) = (0, 0)
        for round in 0..<120 {
            var copy = clean
            let page = Int(ordered.randomElement(using: &rng)!)
            let base = page * size
            switch Int.random(in: 0..<6, using: &rng) {
            case 0:
                for _ in 0..<Int.random(in: 1...24, using: &rng) {
                    copy[base + Int.random(in: 0..<size, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            case 1: for offset in 8..<16 where Bool.random(using: &rng) { copy[base + offset] = UInt8.random(in: 0...255, using: &rng) }
            case 2: for offset in 16..<48 where Bool.random(using: &rng) { copy[base + offset] = UInt8.random(in: 0...255, using: &rng) }
            case 3: copy.replaceSubrange(base..<base + size, with: Data(count: size))
            case 4:
                let other = Int(ordered.randomElement(using: &rng)!) * size
                copy.replaceSubrange(base..<base + size, with: clean[other..<other + size])
            default:
                // A node's sizes: its value's, its flags (a large value's), its key's.
                for offset in 0..<8 where Bool.random(using: &rng) {
                    let node = Int(copy[base + 16]) | Int(copy[base + 17]) << 8
                    if node + offset < size { copy[base + node + offset] = UInt8.random(in: 0...255, using: &rng) }
                }
            }
            let damagedPath = dir.path("damaged-\(round).mdb")
            try copy.write(to: URL(fileURLWithPath: damagedPath))
            defer { for file in [damagedPath, damagedPath + "-lock"] { try? FileManager.default.removeItem(atPath: file) } }
            let env = try Self.environment(dir, "damaged-\(round).mdb")
            defer { env.close() }
            let space = try env.write { txn in try txn.openKeySpace(Self.name, create: false)! }
            for (lower, upper, descending) in [(nil, nil, false), ([UInt8(round)], [UInt8(200)], false), (nil, nil, true)]
                as [([UInt8]?, [UInt8]?, Bool)] {
                do {
                    try env.read { txn in
                        guard let walk = try txn.walk(space, from: lower, below: upper, descending: descending) else { return }
                        do {
                            _ = try Self.entries(walk)
                        } catch {
                            #expect(throws: StorageError.self, "a walk that met damage does not go on past it") {
                                try walk.next()
                            }
                            throw error
                        }
                    }
                    ended += 1
                } catch StorageError.damaged(let why) {
                    #expect(why.contains("page"), "\(why)")
                    refused += 1
                } catch {
                    Issue.record("round \(round): \(error)")
                }
            }
        }
        #expect(refused > 60, "\(refused) walks refused, \(ended) ended")
    }
}
