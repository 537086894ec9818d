import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore

// The structural check reads a store's file without trusting it: a real store is clean, each kind of damage to a
// page that is in use is reported with its page, and no damage at all (random bytes, swapped, zeroed or truncated
// pages) can make it crash.

@Suite(.ownThreads) struct FileCheckTests {
    /// A closed store with several levels of pages, duplicate index keys in sub-databases, documents on overflow
    /// pages, and a free list.
    static func storeFile(people count: Int = 3_000) async throws -> (path: String, dir: TemporaryDirectory) {
        let (store, dir) = try await makeStore(options: reusingPages)
        let people = (0..<count).map { person($0) }
        try await store.insert(contentsOf: people)
        for person in people.prefix(count / 8) { try await store.delete(Person.self, id: person.id) }
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.pagesChecked > count / 30, "\(report)")
        await store.close()
        return (dir.path("store.db"), dir)
    }

    /// The options of the files damaged here: commits that sync (`.normal`), so that LMDB reuses each page two
    /// commits after it was freed, as these tests' counts of stale copies expect. (At `.full`, the write log keeps
    /// the pages its last checkpoint holds until the next one: more stale copies are left in free pages.)
    static var reusingPages: DocStore.Options {
        var options = DocStore.Options()
        options.durability = .normal
        return options
    }

    /// The `i`th person of ``storeFile(people:)``, with the id `id` (a new one by default). The first eighth are
    /// deleted once written.
    static func person(_ i: Int, id: UUID = UUID()) -> Person {
        Person(id: id, name: "P\(i)", age: i % 7, city: ["Oslo", "Bergen"][i % 2], email: "p\(i)@x.org",
               tags: i % 500 == 0 ? (0..<800).map { "tag\($0)-\(i)" } : ["t\(i % 13)"])
    }

    /// A branch page's key for a child raised above that child's first key, the page's keys still in order: a
    /// look-up of that first key would go to the page before, while a walk from the first key still finds it. The
    /// check compares every page's keys with the keys its parent has around it.
    @Test func aKeyBelowItsParentsKeyForItsPageIsFound() async throws {
        let (path, dir) = try await Self.storeFile(people: 1_500)
        defer { _ = dir }
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let findings = LMDBFileCheck.run(path: path)
        #expect(findings.problems.isEmpty)
        let root = try #require(findings.roots[Catalog.documentsSpace("people")])
        let page = Int(root) * findings.pageSize
        try #require(bytes[page + 10] & 0x01 != 0, "the documents' root is a branch page")
        // The second node (the first one's key is empty): its key follows the 8-byte node header. It is raised to
        // just below the third node's key, so above every key of its page but the last. (Raised by one only, it
        // could stay at or below the page's first key: a page whose first document was deleted keeps its key.)
        func node(_ index: Int) -> (key: Int, size: Int) {
            let at = page + Int(UInt16(bytes[page + 16 + 2 * index]) | UInt16(bytes[page + 17 + 2 * index]) << 8)
            return (at + 8, Int(UInt16(bytes[at + 6]) | UInt16(bytes[at + 7]) << 8))
        }
        let nodes = (Int(UInt16(bytes[page + 12]) | UInt16(bytes[page + 13]) << 8) - 16) / 2
        try #require(nodes >= 3)
        let (second, third) = (node(1), node(2))
        try #require(second.size == third.size)
        bytes[second.key..<(second.key + second.size)] = bytes[third.key..<(third.key + third.size)]
        var last = second.key + second.size - 1
        while bytes[last] == 0 {
            bytes[last] = 0xFF
            last -= 1
        }
        bytes[last] -= 1
        let damaged = dir.path("raised.db")
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))
        let problems = LMDBFileCheck.run(path: damaged).problems
        #expect(problems.contains { $0.message.contains("lies before the key its parent page has for it") }, "\(problems)")
    }

    @Test func aRealStoreIsClean() async throws {
        let (path, dir) = try await Self.storeFile()
        defer { _ = dir }
        let findings = LMDBFileCheck.run(path: path)
        #expect(findings.problems.isEmpty, "\(findings.problems)")
        #expect(findings.roots.keys.contains { $0.hasPrefix("idx") }, "\(findings.roots)")
    }

    /// Each damage to a page in use is found, and named with its page.
    @Test func damageToAPageInUseIsReported() async throws {
        let (path, dir) = try await Self.storeFile()
        defer { _ = dir }
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        let findings = LMDBFileCheck.run(path: path)
        let size = findings.pageSize
        let documents = try #require(findings.roots.first { $0.key.hasPrefix("doc") }?.value)
        let pages = clean.count / size
        func damaged(_ change: (inout Data) -> Void) throws -> [StorageDamage] {
            var copy = clean
            change(&copy)
            return LMDBFileCheck.run(data: copy).problems
        }
        let root = Int(documents) * size
        // The page says it is another page.
        #expect(try !damaged { $0[root] ^= 0x01 }.isEmpty)
        // A node's offset points outside the page.
        #expect(try !damaged { $0[root + 16] = 0xFF; $0[root + 17] = 0xFF }.isEmpty)
        // The free-space bounds are impossible.
        #expect(try !damaged { $0[root + 12] = 0xFF; $0[root + 13] = 0xFF; $0[root + 14] = 0; $0[root + 15] = 0 }.isEmpty)
        // Another page copied over it: its page number and contents are another's.
        #expect(try !damaged { $0.replaceSubrange(root..<(root + size), with: $0[(2 * size)..<(3 * size)]) }.isEmpty)
        // The page zeroed.
        #expect(try !damaged { $0.replaceSubrange(root..<(root + size), with: Data(count: size)) }.isEmpty)
        // The file cut short of the pages in use.
        #expect(try !damaged { $0.removeSubrange((pages / 2 * size)...) }.isEmpty)
        // Both meta pages damaged (their version; without the magic number the file is foreign, which LMDB refuses).
        #expect(try !damaged { $0[20] ^= 0xFF; $0[size + 20] ^= 0xFF }.isEmpty)
        // A child page number pointing past the end, and one pointing back up (a loop), in a branch page.
        let branch = try #require(Self.branchPage(in: clean, pageSize: size, from: findings.roots.values.sorted()))
        let node = Int(clean[branch + 16]) | Int(clean[branch + 17]) << 8
        #expect(try !damaged { $0[branch + node + 2] = 0xFF; $0[branch + node + 3] = 0xFF }.isEmpty, "past the end")
        #expect(try !damaged {
            let page = UInt64(branch / size)
            $0[branch + node] = UInt8(truncatingIfNeeded: page); $0[branch + node + 1] = UInt8(truncatingIfNeeded: page >> 8)
            $0[branch + node + 2] = UInt8(truncatingIfNeeded: page >> 16); $0[branch + node + 3] = UInt8(truncatingIfNeeded: page >> 24)
        }.isEmpty, "a loop")
        // A leaf page that also says it is a branch (LMDB would descend into it).
        let leaf = Self.firstLeaf(in: clean, pageSize: size, from: Int(documents))
        #expect(try !damaged { $0[leaf + 10] |= 0x01 }.isEmpty, "a page both branch and leaf")
        // A document's node saying it holds duplicates, in a database that has none: named as such, before anything
        // reads the document as duplicates.
        let first = Int(clean[leaf + 16]) | Int(clean[leaf + 17]) << 8
        let duplicates = try damaged { $0[leaf + first + 4] = 0x04 }
        #expect(duplicates.map(\.description).contains { $0.contains("flags 4") }, "\(duplicates)")
    }

    /// Every page but the meta pages is in a tree or listed free, once. A key space's record emptied (its pages
    /// then reachable from nowhere), a meta page listed as free, and a page listed free twice are each reported,
    /// where the check said the file was clean. And a file with no meta page is no clean store.
    @Test func pagesLostOrListedWronglyAreReported() async throws {
        let (path, dir) = try await Self.storeFile()
        defer { _ = dir }
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = LMDBFileCheck.run(path: path).pageSize
        #expect(LMDBFileCheck.run(data: clean).problems.isEmpty)
        func u64(_ d: Data, _ at: Int) -> Int { (0..<8).reduce(0) { $0 | Int(d[at + $1]) << (8 * $1) } }
        func put(_ d: inout Data, _ at: Int, _ value: UInt64) { for i in 0..<8 { d[at + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) } }
        let newest = u64(clean, 144) > u64(clean, size + 144) ? 0 : size
        func leafNodes(_ page: Int) -> [Int] {
            let base = page * size
            let count = (Int(clean[base + 12]) | Int(clean[base + 13]) << 8 - 16) / 2
            return (0..<count).map { base + (Int(clean[base + 16 + 2 * $0]) | Int(clean[base + 17 + 2 * $0]) << 8) }
        }
        // The documents' record in the main database (a leaf of names): emptied.
        let mainRoot = u64(clean, newest + 88 + 40)
        let record = try #require(leafNodes(mainRoot).first { node in
            let keySize = Int(clean[node + 6]) | Int(clean[node + 7]) << 8
            return String(decoding: clean[(node + 8)..<(node + 8 + keySize)], as: UTF8.self).hasPrefix("doc")
        }.map { $0 + 8 + (Int(clean[$0 + 6]) | Int(clean[$0 + 7]) << 8) })
        var emptied = clean
        emptied[record + 6] = 0; emptied[record + 7] = 0
        for field in stride(from: 8, to: 40, by: 8) { put(&emptied, record + field, 0) }
        put(&emptied, record + 40, .max)
        let lost = LMDBFileCheck.run(data: emptied).problems
        #expect(lost.contains { $0.message.contains("neither in use nor free") }, "\(lost)")
        // The free list's first entry: its first page made a meta page, then its second made its first.
        let freeRoot = u64(clean, newest + 40 + 40)
        let entry = try #require(leafNodes(freeRoot).first).advanced(by: 8 + 8)
        #expect(u64(clean, entry) >= 2, "the free-list entry holds \(u64(clean, entry)) pages")
        var meta = clean
        put(&meta, entry + 8, 1)
        #expect(LMDBFileCheck.run(data: meta).problems.contains { $0.message.contains("meta page 1 is listed as free") })
        var twice = clean
        put(&twice, entry + 16, UInt64(u64(clean, entry + 8)))
        #expect(LMDBFileCheck.run(data: twice).problems.contains { $0.message.contains("listed twice") })
        // No meta page: not a clean store.
        try Data(count: 8192).write(to: URL(fileURLWithPath: dir.path("zeros.db")))
        try Data().write(to: URL(fileURLWithPath: dir.path("empty.db")))
        for name in ["zeros.db", "empty.db"] {
            #expect(!DocStore.checkFile(at: dir.path(name)).isClean, "\(name)")
        }
        // A store with nothing in it (its two meta pages only) is one, and clean.
        let env = try LMDBEnvironment(path: dir.path("new.db"), configuration: .init(initialMapSize: 1 << 20,
            maximumMapSize: 1 << 24, maxDatabases: 8, maxReaders: 8))
        env.close()
        #expect(DocStore.checkFile(at: dir.path("new.db")).isClean)
    }

    /// The check before opening looks at the newest commit, the one LMDB opens: damage to a page that only the
    /// newest commit uses is found.
    @Test func theCheckBeforeOpeningReadsTheNewestCommit() async throws {
        let (path, dir) = try await Self.storeFile(people: 300)
        defer { _ = dir }
        let store = try await DocStore(path: path)
        try await store.insert(Person(name: "Late", age: 1, city: "Oslo", email: "late@x.org", tags: []))
        await store.close()
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = LMDBFileCheck.run(path: path).pageSize
        // Each meta page: its commit at byte 144 and the main database's root at byte 128 (LMDB's layout).
        func field(_ page: Int, _ offset: Int) -> Int {
            (0..<8).reduce(0) { $0 | Int(bytes[page * size + offset + $1]) << (8 * $1) }
        }
        let newest = field(0, 144) > field(1, 144) ? 0 : 1
        let root = field(newest, 128), older = field(1 - newest, 128)
        try #require(root != older)
        bytes.replaceSubrange(root * size..<(root + 1) * size, with: Data(count: size))
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(!LMDBFileCheck.run(path: path).problems.isEmpty)
        var options = DocStore.Options()
        options.checkFile = true
        _ = await expectError(.damagedFile, mentions: ["page \(root)"]) {
            _ = try await DocStore(path: path, options: options)
        }
        // Without the check, LMDB's own complaint on reading the page is an error that says the file is damaged.
        _ = await expectError(.damagedFile, mentions: ["damaged", "checkFile"]) {
            _ = try await DocStore(path: path)
        }
    }

    /// The first leaf page under the branch or leaf page `page`.
    static func firstLeaf(in data: Data, pageSize: Int, from page: Int) -> Int {
        var offset = page * pageSize
        while data[offset + 10] & 0x01 != 0 {   // a branch: follow its first child
            let node = offset + (Int(data[offset + 16]) | Int(data[offset + 17]) << 8)
            let child = (0..<6).reduce(0) { $0 | Int(data[node + $1]) << (8 * $1) }
            offset = child * pageSize
        }
        return offset
    }

    /// With `checkFile`, a damaged file is refused on opening, naming the page and the collection; a clean one opens.
    @Test func openingWithTheCheckRefusesADamagedFile() async throws {
        let (path, dir) = try await Self.storeFile()
        defer { _ = dir }
        var options = DocStore.Options()
        options.checkFile = true
        do {
            let store = try await DocStore(path: path, options: options)
            #expect(try await Person.query().count(in: store) == 3_000 - 3_000 / 8)
            await store.close()
        }
        let findings = LMDBFileCheck.run(path: path)
        let documents = try #require(findings.roots.first { $0.key.hasPrefix("doc") }?.value)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[Int(documents) * findings.pageSize + 16] = 0xFF   // a node offset outside the page
        bytes[Int(documents) * findings.pageSize + 17] = 0xFF
        try bytes.write(to: URL(fileURLWithPath: path))
        let error = await expectError(.damagedFile, mentions: ["page \(documents)", "collection 'people'"]) {
            _ = try await DocStore(path: path, options: options)
        }
        #expect(error?.message.contains("checkFile") == true, "\(error?.message ?? "")")
    }

    /// A store that another process writes all the while opens with the check, over and over: pages the writer
    /// reuses during a check are not taken for damage.
    @Test func aStoreWrittenByAnotherProcessOpensWithTheCheck() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("busy.db")
        let writer = CrashSafetyTests.quietWriter(["insert-people", path, "3000", "0"])
        try writer.run()
        defer { if writer.isRunning { kill(writer.processIdentifier, SIGKILL) }; writer.waitUntilExit() }
        var options = DocStore.Options()
        options.checkFile = true
        var opened = 0
        while writer.isRunning || opened == 0 {
            guard FileManager.default.fileExists(atPath: path) else { usleep(5_000); continue }
            let store = try await DocStore(path: path, options: options)
            let report = try await store.verify()
            #expect(report.isClean, "\(report)")
            await store.close()
            opened += 1
        }
        #expect(opened >= 3, "opened \(opened) times while the other process wrote")
    }

    /// Random damage to a store's file, opened with the check: each file is refused with an error, or opens and
    /// answers (or fails with an error) through counts, queries and `verify()`; none stops the process.
    @Test func aDamagedStoreOpenedWithTheCheckNeverCrashes() async throws {
        let (path, dir) = try await Self.storeFile(people: 600)
        defer { _ = dir }
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = LMDBFileCheck.run(path: path).pageSize
        var rng = SeededGenerator(seed: 77)
        var options = DocStore.Options()
        options.checkFile = true
        // The oracle: what the undamaged store answers.
        let original = try await DocStore(path: path)
        let everyone = try await Person.query().sortBy(\.name).results(in: original)
        await original.close()
        let olderInOslo = everyone.filter { $0.age > 3 && $0.city == "Oslo" }.map(\.id).sorted { $0.uuidString < $1.uuidString }
        var (refused, answered, reported) = (0, 0, 0)
        let cases = Self.cases(60)
        for round in 0..<cases {
            let copy = Self.damaged(clean, pageSize: size, from: 2, using: &rng)
            let damagedPath = dir.path("opened-\(round).db")
            try copy.write(to: URL(fileURLWithPath: damagedPath))
            do {
                let store = try await DocStore(path: damagedPath, options: options)
                let count = try? await Person.query().count(in: store)
                let found = try? await Person.include(#Predicate { $0.age > 3 && $0.city == "Oslo" }).results(in: store)
                let first = try? await Person.query().sortBy(\.name)[0..<20].results(in: store)
                let report = try? await store.verify()
                await store.close()
                answered += 1
                // Damage that verify() does not report changed nothing a query can see.
                if report?.isClean == true {
                    #expect(count == everyone.count, "round \(round)")
                    #expect(found?.map(\.id).sorted { $0.uuidString < $1.uuidString } == olderInOslo, "round \(round)")
                    #expect(first == Array(everyone.prefix(20)), "round \(round)")
                } else {
                    reported += 1
                }
            } catch let error as DocStoreError {
                #expect(!error.message.isEmpty)
                refused += 1
            } catch {
                Issue.record("round \(round): \(error)")
            }
            Self.remove(damagedPath)
        }
        Self.summarize("opened with the check: \(refused) refused, \(answered) answered (\(reported) of them reported "
            + "by verify()), of \(cases)")
        #expect(refused + answered == cases)
        #expect(refused > 0, "no damaged file was refused")
    }

    /// Removes a store's file and its lock file: removed before the system writes them out, the files of many
    /// rounds cost the disk nothing, and the other tests' commits do not wait behind them.
    static func remove(_ path: String) {
        for file in [path, path + "-lock"] { try? FileManager.default.removeItem(atPath: file) }
    }

    /// Prints what a longer run found, for its report; the suite's own runs print nothing.
    static func summarize(_ text: String) {
        if ProcessInfo.processInfo.environment["DOCSTORE_FUZZ_CASES"] != nil { print("fuzz: " + text) }
    }

    /// `count` cases, or as many as `DOCSTORE_FUZZ_CASES` asks for (a longer run than the suite's).
    static func cases(_ count: Int) -> Int {
        ProcessInfo.processInfo.environment["DOCSTORE_FUZZ_CASES"].flatMap { Int($0) } ?? count
    }

    /// A copy of a store's file with one page damaged, a page from `firstPage` on: random bytes, another page
    /// copied over it, zeroed, the file cut short there, or its header (page number, flags, bounds) changed.
    static func damaged(_ clean: Data, pageSize size: Int, from firstPage: Int, using rng: inout SeededGenerator) -> Data {
        var copy = clean
        let pages = clean.count / size
        let page = Int.random(in: firstPage..<pages, using: &rng)
        let range = page * size..<(page + 1) * size
        switch Int.random(in: 0..<5, using: &rng) {
        case 0:
            for _ in 0..<Int.random(in: 1...32, using: &rng) {
                copy[page * size + Int.random(in: 0..<size, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
        case 1:
            let other = Int.random(in: 0..<pages, using: &rng)
            copy.replaceSubrange(range, with: clean[(other * size)..<((other + 1) * size)])
        case 2: copy.replaceSubrange(range, with: Data(count: size))
        case 3: copy.removeSubrange((page * size + Int.random(in: 0..<size, using: &rng))...)
        default:
            for offset in 0..<16 where Bool.random(using: &rng) { copy[page * size + offset] = UInt8.random(in: 0...255, using: &rng) }
        }
        return copy
    }

    /// The offset of a branch page among the roots, if one is.
    private static func branchPage(in data: Data, pageSize: Int, from roots: [UInt64]) -> Int? {
        roots.map { Int($0) * pageSize }.first { $0 + pageSize <= data.count && data[$0 + 10] & 0x01 != 0 }
    }

    /// Random damage of every kind, a few hundred times from a fixed seed: the check never crashes, and reports
    /// most of it (damage inside a value that still parses is for checksums to find).
    @Test func randomDamageNeverCrashesTheCheck() async throws {
        let (path, dir) = try await Self.storeFile()
        defer { _ = dir }
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = LMDBFileCheck.run(path: path).pageSize
        var rng = SeededGenerator(seed: 42)
        var reported = 0
        let cases = Self.cases(300)
        for _ in 0..<cases {
            let copy = Self.damaged(clean, pageSize: size, from: 0, using: &rng)
            // Read from memory: thousands of damaged files written out would fill the disk's write-back, and every
            // commit of the tests beside this one would wait for it.
            if !LMDBFileCheck.run(data: copy).problems.isEmpty { reported += 1 }
        }
        Self.summarize("the check reported \(reported) of \(cases) damaged files")
        // Not every case is damage to a page in use: a free page or the unused end of a page may take it.
        #expect(reported > cases / 3, "\(reported) of \(cases) reported")
    }
}
