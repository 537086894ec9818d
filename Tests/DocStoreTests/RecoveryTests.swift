import Foundation
import Testing
import TestSupport
@testable import DocStore

// `DocStore.recover(from:to:)` copies what can be read of a damaged store into a new one. The oracle is the store
// before the damage: every recovered document is one of the originals, unchanged; the recovered, damaged and
// unreachable documents add up to the originals; the new store verifies clean and keeps the catalog.

@Suite(.ownThreads) struct RecoveryTests {
    /// The originals, by id, of a store made by `FileCheckTests.storeFile`, with a saved filter added.
    private static func originals(at path: String) async throws -> [UUID: Person] {
        let store = try await DocStore(path: path)
        try await store.write { try $0.saveFilter(SavedFilter(name: "adults", collection: "people", text: "people.include(age >= 3)")) }
        let people = try await Person.query().results(in: store)
        await store.close()
        return Dictionary(uniqueKeysWithValues: people.map { ($0.id, $0) })
    }

    /// Recovers `damaged` into a new store and checks it against the originals; returns the report. Where the report
    /// says recovered documents may be stale copies (the free list of a file cut short is lost), a person the store
    /// deleted may come back too: one of the first `deleted` people of ``FileCheckTests/storeFile(people:)``.
    @discardableResult
    private static func recoverAndCheck(_ damaged: String, into path: String, originals: [UUID: Person], deleted: Int = 0,
                                        sourceLocation: SourceLocation = #_sourceLocation) async throws -> RecoveryReport {
        let report = try await DocStore.recover(from: damaged, to: path)
        #expect(report.verification?.isClean == true, "\(report)", sourceLocation: sourceLocation)
        let store = try await DocStore(path: path)
        let recovered = try await Person.query().results(in: store)
        for person in recovered where originals[person.id] != person {
            let stale = report.mayHoldStaleDocuments && originals[person.id] == nil
                && (0..<deleted).contains { person == FileCheckTests.person($0, id: person.id) }
            #expect(stale, "\(person) is not an original", sourceLocation: sourceLocation)
        }
        #expect(Set(recovered.map(\.id)).count == recovered.count, sourceLocation: sourceLocation)
        if let people = report.collections.first(where: { $0.name == "people" }) {
            #expect(people.recovered == recovered.count, "\(report)", sourceLocation: sourceLocation)
            if let unreachable = people.unreachable {
                #expect(people.recovered + people.damaged + unreachable == originals.count, "\(report)",
                        sourceLocation: sourceLocation)
            }
        }
        #expect(try await store.verify().isClean, sourceLocation: sourceLocation)
        await store.close()
        return report
    }

    @Test func anUndamagedStoreComesBackWhole() async throws {
        let (path, dir) = try await FileCheckTests.storeFile(people: 1_000)
        defer { _ = dir }
        let originals = try await Self.originals(at: path)
        let report = try await Self.recoverAndCheck(path, into: dir.path("new.db"), originals: originals)
        #expect(report.lostNothing, "\(report)")
        #expect(report.damage.isEmpty, "\(report)")
        #expect(report.savedFilters == 1)
        let store = try await DocStore(path: dir.path("new.db"))
        #expect(try await Person.query().count(in: store) == originals.count)
        let (indexes, filters) = try await store.read { ctx in
            (try ctx.collections().first { $0.name == "people" }?.indexes.map(\.name).sorted(), try ctx.savedFilters().map(\.name))
        }
        #expect(indexes == ["age", "city_age", "email", "tags"])
        #expect(filters == ["adults"])
        // Queries planned onto the rebuilt indexes answer as before.
        #expect(try await Person.include(#Predicate { $0.age == 3 }).count(in: store)
                == originals.values.filter { $0.age == 3 }.count)
        await store.close()
        // The new store is never written over.
        _ = await expectError(.alreadyExists, mentions: ["new.db"]) {
            _ = try await DocStore.recover(from: path, to: dir.path("new.db"))
        }
    }

    /// A zeroed page of documents loses exactly its documents; a document whose bytes changed (its checksum no
    /// longer matches) is not copied; everything else comes back.
    @Test func aDamagedPageLosesOnlyItsDocuments() async throws {
        let (path, dir) = try await FileCheckTests.storeFile(people: 2_000)
        defer { _ = dir }
        let originals = try await Self.originals(at: path)
        let findings = LMDBFileCheck.run(path: path)
        let size = findings.pageSize
        let documents = try #require(findings.roots.first { $0.key.hasPrefix("doc") }?.value)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let leaf = FileCheckTests.firstLeaf(in: bytes, pageSize: size, from: Int(documents))
        let onPage = ((Int(bytes[leaf + 12]) | Int(bytes[leaf + 13]) << 8) - 16) / 2
        bytes.replaceSubrange(leaf..<(leaf + size), with: Data(count: size))
        // A changed letter in the email of the first document on the last page of documents: it still parses.
        let last = Self.lastLeaf(in: bytes, pageSize: size, from: Int(documents))
        let node = last + (Int(bytes[last + 16]) | Int(bytes[last + 17]) << 8)
        let dataStart = node + 8 + (Int(bytes[node + 6]) | Int(bytes[node + 7]) << 8)
        let dataSize = Int(bytes[node]) | Int(bytes[node + 1]) << 8
        let at = try #require(bytes.range(of: Data("@x.org".utf8), in: dataStart..<(dataStart + dataSize))?.lowerBound)
        bytes[at + 1] = UInt8(ascii: "y")
        let damaged = dir.path("damaged.db")
        try bytes.write(to: URL(fileURLWithPath: damaged))

        let report = try await Self.recoverAndCheck(damaged, into: dir.path("new.db"), originals: originals)
        let people = try #require(report.collections.first { $0.name == "people" })
        #expect(people.unreachable == onPage, "\(report)")
        #expect(people.damaged == 1, "\(report)")
        #expect(people.recovered == originals.count - onPage - people.damaged, "\(report)")
        #expect(!report.damage.isEmpty && !report.lostNothing, "\(report)")
        #expect(report.description.contains("\(onPage) on unreadable pages"), "\(report)")
    }

    /// A damaged branch page cuts its leaves off the tree: they are found by reading every page that no tree reaches
    /// and the free list does not hold, and every document comes back.
    @Test func leavesBelowADamagedBranchComeBack() async throws {
        let (path, dir) = try await FileCheckTests.storeFile(people: 2_000)
        defer { _ = dir }
        let originals = try await Self.originals(at: path)
        let findings = LMDBFileCheck.run(path: path)
        let size = findings.pageSize
        let root = Int(try #require(findings.roots.first { $0.key.hasPrefix("doc") }?.value))
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        try #require(bytes[root * size + 10] & 0x01 != 0, "the documents' root is a branch page")
        bytes.replaceSubrange(root * size..<(root + 1) * size, with: Data(count: size))
        let damaged = dir.path("damaged.db")
        try bytes.write(to: URL(fileURLWithPath: damaged))

        let report = try await Self.recoverAndCheck(damaged, into: dir.path("new.db"), originals: originals)
        let people = try #require(report.collections.first { $0.name == "people" })
        #expect(people.recovered == originals.count, "\(report)")
        #expect(people.unreachable == 0 && people.damaged == 0, "\(report)")
        #expect(people.notes.contains { $0.contains("cut off") }, "\(report)")
    }

    /// Random damage of every kind: recovery never stops the process, copies only documents that are the
    /// originals (or, from a file cut short whose free list is lost, deleted ones, as the report then says), and
    /// leaves a store that verifies clean.
    @Test func randomDamageRecoversOnlySoundDocuments() async throws {
        let (path, dir) = try await FileCheckTests.storeFile(people: 600)
        defer { _ = dir }
        let originals = try await Self.originals(at: path)
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = LMDBFileCheck.run(path: path).pageSize
        var rng = SeededGenerator(seed: 2_024)
        var recoveredTotal = 0
        let cases = FileCheckTests.cases(25)
        for round in 0..<cases {
            let copy = FileCheckTests.damaged(clean, pageSize: size, from: 2, using: &rng)
            let damaged = dir.path("damaged-\(round).db")
            try copy.write(to: URL(fileURLWithPath: damaged))
            let report = try await Self.recoverAndCheck(damaged, into: dir.path("new-\(round).db"), originals: originals,
                                                        deleted: 600 / 8)
            recoveredTotal += report.collections.first { $0.name == "people" }?.recovered ?? 0
            for path in [damaged, dir.path("new-\(round).db")] { FileCheckTests.remove(path) }
        }
        FileCheckTests.summarize("recovered \(recoveredTotal) of \(cases * originals.count) documents from \(cases) damaged files")
        #expect(recoveredTotal > cases * originals.count / 2, "most documents come back: \(recoveredTotal)")
    }

    /// The last leaf page under the branch or leaf page `page`.
    static func lastLeaf(in data: Data, pageSize: Int, from page: Int) -> Int {
        var offset = page * pageSize
        while data[offset + 10] & 0x01 != 0 {   // a branch: follow its last child
            let count = ((Int(data[offset + 12]) | Int(data[offset + 13]) << 8) - 16) / 2
            let pointer = offset + 16 + 2 * (count - 1)
            let node = offset + (Int(data[pointer]) | Int(data[pointer + 1]) << 8)
            offset = (0..<6).reduce(0) { $0 | Int(data[node + $1]) << (8 * $1) } * pageSize
        }
        return offset
    }
}
