import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore

// The structural check reads a store's file without trusting it: a real store is clean, each kind of damage to a
// page that is in use is reported with its page, and no damage at all (random bytes, swapped, zeroed or truncated
// pages) can make it crash.

@Suite struct FileCheckTests {
    /// A closed store with several levels of pages, duplicate index keys in sub-databases, documents on overflow
    /// pages, and a free list.
    private static func storeFile() async throws -> (path: String, dir: TemporaryDirectory) {
        let (store, dir) = try await makeStore()
        var people: [Person] = []
        for i in 0..<3_000 {
            people.append(Person(name: "P\(i)", age: i % 7, city: ["Oslo", "Bergen"][i % 2], email: "p\(i)@x.org",
                                 tags: i % 500 == 0 ? (0..<800).map { "tag\($0)-\(i)" } : ["t\(i % 13)"]))
        }
        try await store.insert(contentsOf: people)
        for person in people.prefix(400) { try await store.delete(Person.self, id: person.id) }
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.pagesChecked > 100, "\(report)")
        await store.close()
        return (dir.path("store.db"), dir)
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
            let damagedPath = dir.path("damaged.db")
            try copy.write(to: URL(fileURLWithPath: damagedPath))
            return LMDBFileCheck.run(path: damagedPath).problems
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
    }

    /// With `checkFile`, a damaged file is refused on opening, naming the page and the collection; a clean one opens.
    @Test func openingWithTheCheckRefusesADamagedFile() async throws {
        let (path, dir) = try await Self.storeFile()
        defer { _ = dir }
        var options = DocStore.Options()
        options.checkFile = true
        do {
            let store = try await DocStore(path: path, options: options)
            #expect(try await Person.query().count(in: store) == 2_600)
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
    @Test(.ownThreads) func aStoreWrittenByAnotherProcessOpensWithTheCheck() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("busy.db")
        let writer = Process()
        writer.executableURL = CrashSafetyTests.writerURL
        writer.arguments = ["insert-people", path, "3000", "0"]
        writer.standardOutput = FileHandle.nullDevice
        writer.standardError = FileHandle.nullDevice
        try writer.run()
        defer { if writer.isRunning { kill(writer.processIdentifier, SIGKILL) }; writer.waitUntilExit() }
        var options = DocStore.Options()
        options.checkFile = true
        var opened = 0
        while writer.isRunning || opened == 0 {
            guard FileManager.default.fileExists(atPath: path) else { usleep(5_000); continue }
            let store = try await DocStore(path: path, options: options)
            #expect(try await store.verify().isClean)
            await store.close()
            opened += 1
        }
        #expect(opened >= 3, "opened \(opened) times while the other process wrote")
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
        let pages = clean.count / size
        var rng = SeededGenerator(seed: 42)
        var reported = 0
        let cases = 300
        for _ in 0..<cases {
            var copy = clean
            let page = Int.random(in: 0..<pages, using: &rng)
            switch Int.random(in: 0..<5, using: &rng) {
            case 0:
                for _ in 0..<Int.random(in: 1...32, using: &rng) {
                    copy[page * size + Int.random(in: 0..<size, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            case 1:
                let other = Int.random(in: 0..<pages, using: &rng)
                copy.replaceSubrange(page * size..<(page + 1) * size, with: clean[(other * size)..<((other + 1) * size)])
            case 2: copy.replaceSubrange(page * size..<(page + 1) * size, with: Data(count: size))
            case 3: copy.removeSubrange((page * size + Int.random(in: 0..<size, using: &rng))...)
            default:
                // The header: page number, flags, bounds.
                for offset in 0..<16 where Bool.random(using: &rng) { copy[page * size + offset] = UInt8.random(in: 0...255, using: &rng) }
            }
            let damagedPath = dir.path("fuzz.db")
            try copy.write(to: URL(fileURLWithPath: damagedPath))
            if !LMDBFileCheck.run(path: damagedPath).problems.isEmpty { reported += 1 }
        }
        // Not every case is damage to a page in use: a free page or the unused end of a page may take it.
        #expect(reported > cases / 3, "\(reported) of \(cases) reported")
    }
}
