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
        try await store.write { try $0.saveFilter(SavedFilter(name: "adults", query: Query("people").include(.compare("age", .greaterOrEqual, .int(3))))) }
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

    /// Writes `data` as a damaged file in `dir`, recovers and checks it as ``recoverAndCheck(_:into:originals:deleted:sourceLocation:)``
    /// does, and removes both files.
    private static func recoverAndCheck(_ data: Data, in dir: TemporaryDirectory, originals: [UUID: Person], deleted: Int,
                                        sourceLocation: SourceLocation = #_sourceLocation) async throws -> RecoveryReport {
        let damaged = dir.path("damaged.db"), recovered = dir.path("recovered.db")
        try data.write(to: URL(fileURLWithPath: damaged))
        defer { for path in [damaged, recovered] { FileCheckTests.remove(path) } }
        return try await recoverAndCheck(damaged, into: recovered, originals: originals, deleted: deleted,
                                         sourceLocation: sourceLocation)
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
    /// Deletes `collection`'s catalog entry in the closed store at `path`, through the engine alone, then runs
    /// `also` in the same transaction with its documents' key space.
    private static func forget(_ collection: String, at path: String,
                               also: (any StorageTransaction, KeySpace) throws -> Void = { _, _ in }) throws {
        let configuration = FileStorage.Configuration(initialMapSize: 1 << 24, maximumMapSize: 1 << 30, maxDatabases: 64,
                                                      maxReaders: 126)
        let engine = try LMDBEnvironment(path: path, configuration: configuration)
        defer { engine.close() }
        try engine.write { txn in
            let meta = try #require(try txn.openKeySpace(Catalog.spaceName, create: false))
            try Catalog(space: meta, txn: txn, path: path).removeCollection(collection)
            try also(txn, try #require(try txn.openKeySpace(Catalog.documentsSpace(collection), create: false)))
        }
    }

    /// A model whose ids are stored at `sku`.
    private struct Item: Document, Equatable {
        var id: String
        var name: String
        static let collection = "items"
        enum CodingKeys: String, CodingKey { case id = "sku", name }
    }

    /// A collection whose catalog entry is lost, its ids stored at `sku`: the recovery finds them there (the field
    /// that gives each document's key), so each document comes back as it was, under its own id.
    @Test func aCollectionThatLostItsCatalogEntryKeepsItsIds() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("items.db")
        let items = (0..<120).map { Item(id: "sku-\($0)", name: "item \($0)") }
        do {
            let store = try await DocStore(path: path)
            try await store.insert(contentsOf: items)
            await store.close()
        }
        try Self.forget(Item.collection, at: path)
        let report = try await DocStore.recover(from: path, to: dir.path("recovered.db"))
        let collection = try #require(report.collections.first { $0.name == Item.collection })
        #expect(collection.recovered == items.count && collection.lost == 0, "\(report)")
        #expect(collection.notes.contains { $0.contains("found at 'sku'") }, "\(report)")
        let recovered = try await DocStore(path: dir.path("recovered.db"))
        #expect(try await Item.query().results(in: recovered).sorted { $0.name < $1.name } == items.sorted { $0.name < $1.name })
        #expect(try await Query<DocumentValue>(Item.collection).results(in: recovered).allSatisfy { $0[field: "id"] == nil })
        #expect(try await recovered.verify().isClean)
        await recovered.close()
    }

    /// A collection that lost its catalog entry, whose documents' keys no field gives (as if written by something
    /// else), and that hold one `id`: saved under it, they replace each other, and the report counts the ones
    /// replaced as damaged, not as recovered.
    @Test func documentsThatReplaceEachOtherInARecoveryAreNotCountedRecovered() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("odd.db")
        do {
            let store = try await DocStore(path: path)
            try await store.write { ctx in
                for i in 0..<10 { try ctx.insert(["id": .int(Int64(i)), "name": .string("n\(i)")], into: "odd") }
            }
            await store.close()
        }
        try Self.forget("odd", at: path) { txn, documents in
            for i in 0..<10 {
                let document: DocumentValue = ["id": .int(99), "name": .string("n\(i)")]
                try txn.put(documents, KeyEncoder.key(.int(Int64(i))), document.encoded())
            }
        }
        let report = try await DocStore.recover(from: path, to: dir.path("recovered.db"))
        let collection = try #require(report.collections.first { $0.name == "odd" })
        #expect(collection.recovered == 1 && collection.damaged == 9, "\(report)")
        #expect(collection.notes.contains { $0.contains("replaced") }, "\(report)")
        #expect(!report.lostNothing)
    }

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
        for _ in 0..<cases {
            let copy = FileCheckTests.damaged(clean, pageSize: size, from: 2, using: &rng)
            let report = try await Self.recoverAndCheck(copy, in: dir, originals: originals, deleted: 600 / 8)
            recoveredTotal += report.collections.first { $0.name == "people" }?.recovered ?? 0
        }
        FileCheckTests.summarize("recovered \(recoveredTotal) of \(cases * originals.count) documents from \(cases) damaged files")
        #expect(recoveredTotal > cases * originals.count / 2, "most documents come back: \(recoveredTotal)")
    }

    // MARK: Files cut short

    /// Saves `count` documents with the ids 1... into `collection` of the store at `path` (replacing those it has),
    /// `perCommit` a commit, each made by `document(i)` with its id set; returns them by id.
    private static func write(_ count: Int, into collection: String, at path: String, perCommit: Int = 1_000,
                              _ document: @escaping @Sendable (Int) -> [DocumentValue.Field]) async throws
        -> [Int64: DocumentValue] {
        let store = try await DocStore(path: path, options: FileCheckTests.reusingPages)
        var written: [Int64: DocumentValue] = [:]
        for start in stride(from: 0, to: count, by: perCommit) {
            let batch = (start..<min(start + perCommit, count)).map { i in
                DocumentValue.object([.init("id", .int(Int64(i + 1)))] + document(i))
            }
            try await store.write { ctx in
                for value in batch { try ctx.save(value, into: collection) }
            }
            for value in batch { if let id = lookup(value, "id"), case .int(let n) = id { written[n] = value } }
        }
        await store.close()
        return written
    }

    private static func person(_ i: Int) -> [DocumentValue.Field] {
        [.init("name", .string("P\(i)")), .init("age", .int(Int64(i % 90)))]
    }

    private static func plane(_ i: Int) -> [DocumentValue.Field] {
        [.init("model", .string("M\(i)")), .init("seats", .int(Int64(i % 300)))]
    }

    /// The last page each meta page of the file names.
    private static func lastPages(of data: Data, pageSize: Int) -> [Int] {
        (0...1).map { meta in (0..<8).reduce(0) { $0 | Int(data[meta * pageSize + 136 + $1]) << (8 * $1) } }
    }

    /// The documents of the recovered store at `path`, collection by collection, each checked against the ones
    /// written (the oracle): every recovered document is one of them, unchanged.
    private static func recoveredDocuments(at path: String, written: [String: [Int64: DocumentValue]],
                                           sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: Int] {
        let store = try await DocStore(path: path)
        var counts: [String: Int] = [:]
        for (collection, originals) in written {
            let documents = try await Query<DocumentValue>(collection).results(in: store)
            for document in documents {
                guard let id = lookup(document, "id"), case .int(let n) = id else {
                    Issue.record("\(document.json()) has no id", sourceLocation: sourceLocation)
                    continue
                }
                #expect(originals[n].map(normalized) == normalized(document), "\(document.json()) is not an original",
                        sourceLocation: sourceLocation)
            }
            counts[collection] = documents.count
        }
        #expect(try await store.verify().isClean, sourceLocation: sourceLocation)
        await store.close()
        return counts
    }

    /// A file cut short to its size before its last commit, which created a collection of 3,322 documents: the
    /// newest commit's catalog is still in the file (LMDB wrote it on a page it reused), its new collection's
    /// pages mostly are not. The report names that collection and counts what it lost; it never says nothing was
    /// lost.
    @Test func aCollectionTheLastCommitCreatedIsReportedWhenTheFileIsCutShort() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let people = try await Self.write(3_000, into: "people", at: path, Self.person)
        let before = try Data(contentsOf: URL(fileURLWithPath: path)).count
        let planes = try await Self.write(3_322, into: "planes", at: path, Self.plane)
        let damaged = dir.path("cut.db")
        try Data(contentsOf: URL(fileURLWithPath: path)).prefix(before).write(to: URL(fileURLWithPath: damaged))

        let report = try await DocStore.recover(from: damaged, to: dir.path("new.db"))
        #expect(!report.lostNothing, "\(report)")
        let counts = try await Self.recoveredDocuments(at: dir.path("new.db"),
                                                       written: ["people": people, "planes": planes])
        let recoveredPlanes = try #require(report.collections.first { $0.name == "planes" }, "\(report)")
        #expect(recoveredPlanes.recovered == counts["planes"], "\(report)")
        #expect(recoveredPlanes.recovered < 3_322, "\(report)")
        // The newest commit's count of the collection was read: what it lost is known.
        #expect(recoveredPlanes.unreachable.map { $0 + recoveredPlanes.recovered } == 3_322, "\(report)")
        #expect(report.collections.first { $0.name == "people" }?.recovered == 3_000, "\(report)")
        #expect(counts["people"] == 3_000)
        let lost = 3_322 - recoveredPlanes.recovered
        #expect(report.description.contains("collection 'planes': \(recoveredPlanes.recovered) documents recovered, "
                                            + "\(lost) on unreadable pages and lost"), "\(report)")
        #expect(report.description.contains("\(3_000 + recoveredPlanes.recovered) documents recovered, \(lost) lost"),
                "\(report)")
        #expect(report.description.contains("cut short"), "\(report)")
    }

    /// `people`, saved twice over (the second time in one commit, which frees every page of the first), then
    /// `planes`, created by the last commit; the file cut short to its size before that commit, and the roots of
    /// `planes`' tree and of the free list zeroed where they are still there. Pages of older copies of `people` are keyed as `planes`' would be
    /// (integers at `id`), and fit where `planes`' tree could not be read (anywhere): they are told by their fields
    /// to be `people`'s, whose tree was read whole, and are left out; `planes` gets only its own documents.
    @Test func olderPagesOfACompleteCollectionAreNotTakenForAnother() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        _ = try await Self.write(6_000, into: "people", at: path, Self.person)
        let people = try await Self.write(6_000, into: "people", at: path, perCommit: 6_000) { i in
            [.init("name", .string("P\(i)")), .init("age", .int(Int64(i % 90 + 1)))]
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path)).count
        let planes = try await Self.write(1_500, into: "planes", at: path, Self.plane)
        let roots = LMDBFileCheck.run(path: path).roots
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(before)
        for space in [Catalog.documentsSpace("planes"), "free list"] {
            let root = Int(try #require(roots[space]))
            if (root + 1) * 4096 <= bytes.count {
                bytes.replaceSubrange(root * 4096..<(root + 1) * 4096, with: Data(count: 4096))
            }
        }
        let damaged = dir.path("cut.db")
        try bytes.write(to: URL(fileURLWithPath: damaged))

        let report = try await DocStore.recover(from: damaged, to: dir.path("new.db"))
        let counts = try await Self.recoveredDocuments(at: dir.path("new.db"),
                                                       written: ["people": people, "planes": planes])
        #expect(counts["people"] == 6_000, "\(report)")
        #expect(report.collections.first { $0.name == "planes" }?.recovered == counts["planes"], "\(report)")
        #expect(!report.lostNothing, "\(report)")
    }

    /// Two collections of 30,000 and 3,000 small documents, the file cut to 60% of its size: both meta pages name
    /// pages past the end. The leaves left in the file are read; they hold most documents, since nearly every page
    /// of such a store is a leaf of documents (there are no indexes) and they fill the file from its start: at least
    /// half of the 33,000 come back, each one as written, and the report's counts of lost documents are exact.
    @Test func mostDocumentsOfAFileCutTo60PercentComeBack() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let people = try await Self.write(30_000, into: "people", at: path, Self.person)
        let planes = try await Self.write(3_000, into: "planes", at: path, Self.plane)
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        let kept = whole.count / pageSize * 6 / 10
        #expect(Self.lastPages(of: whole, pageSize: pageSize).allSatisfy { $0 >= kept })
        let damaged = dir.path("cut.db")
        try whole.prefix(kept * pageSize).write(to: URL(fileURLWithPath: damaged))

        let report = try await DocStore.recover(from: damaged, to: dir.path("new.db"))
        #expect(report.verification?.isClean == true, "\(report)")
        #expect(!report.lostNothing, "\(report)")
        let counts = try await Self.recoveredDocuments(at: dir.path("new.db"),
                                                       written: ["people": people, "planes": planes])
        let total = counts.values.reduce(0, +)
        FileCheckTests.summarize("recovered \(total) of 33,000 documents from a file cut to 60%: \(counts)")
        #expect(total >= 33_000 / 2, "\(report)")
        for (name, written) in [("people", 30_000), ("planes", 3_000)] {
            let collection = try #require(report.collections.first { $0.name == name }, "\(report)")
            #expect(collection.recovered == counts[name], "\(report)")
            #expect(collection.lost == written - collection.recovered, "\(report)")
            #expect(collection.unreachable != nil, "\(report)")
        }
        #expect(report.description.contains("\(total) documents recovered, \(33_000 - total) lost"), "\(report)")
    }

    /// Documents saved four times over, a commit for each thousand, the file cut short at several lengths. LMDB's
    /// pages do not record the commit that wrote them, so a page cut off from the tree may be an older copy: each
    /// recovered document is one of the versions written, every one that is not the newest is among those the report
    /// says may be older versions, and the report never says nothing was lost. With the tree's root gone too,
    /// versions of one document that differ are met, and none of them is taken.
    @Test func documentsReadFromPagesNoTreeReachesAreCountedAsPossiblyOlder() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        for version in 0..<4 {
            for start in stride(from: 0, to: 6_000, by: 1_000) {
                try await store.write { ctx in
                    for i in start..<(start + 1_000) {
                        try ctx.save(.object([.init("id", .int(Int64(i + 1))), .init("name", .string("P\(i)")),
                                              .init("version", .int(Int64(version)))]), into: "people")
                    }
                }
            }
        }
        await store.close()
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let root = Int(try #require(LMDBFileCheck.run(path: path).roots[Catalog.documentsSpace("people")]))
        for (tenths, withoutRoot) in [(9, false), (7, false), (5, false), (3, false), (9, true)] {
            let cut = dir.path("cut-\(tenths)-\(withoutRoot).db")
            var bytes = whole.prefix(whole.count / 4096 * tenths / 10 * 4096)
            if withoutRoot, (root + 1) * 4096 <= bytes.count {
                bytes.replaceSubrange(root * 4096..<(root + 1) * 4096, with: Data(count: 4096))
            }
            try bytes.write(to: URL(fileURLWithPath: cut))
            let report = try await DocStore.recover(from: cut, to: cut + ".new")
            let recovered = try await DocStore(path: cut + ".new")
            let documents = try await Query<DocumentValue>("people").results(in: recovered)
            await recovered.close()
            var older = 0
            for document in documents {
                guard case .int(let id)? = lookup(document, "id"), case .int(let version)? = lookup(document, "version"),
                      (1...6_000).contains(id), (0...3).contains(version) else {
                    Issue.record("\(document.json()) was never written")
                    continue
                }
                #expect(lookup(document, "name") == .string("P\(id - 1)"), "\(document.json())")
                if version != 3 { older += 1 }
            }
            let people = try #require(report.collections.first { $0.name == "people" }, "\(report)")
            #expect(people.recovered == documents.count, "\(report)")
            #expect(older <= people.possiblyStale, "\(older) older versions; \(report)")
            #expect(!report.lostNothing, "\(report)")
            if withoutRoot {
                // Every page is cut off: copies of one document in different versions are met, and none is taken.
                #expect(people.conflicting > 0, "\(report)")
                #expect(people.recovered + people.lost == 6_000, "\(report)")
            }
        }
    }

    /// A file cut to 60%, then lied to: a page whose bounds are impossible, a node sent to an overflow page past
    /// the end, an overflow page counting more pages than the file has, a branch whose child is itself, a page
    /// saying it is another; then random damage of every kind. Recovery refuses each lie, never stops the process,
    /// and copies only documents that are the originals (or deleted ones, where the report says they may be).
    @Test func liesInAFileCutShortAreRefused() async throws {
        let (path, dir) = try await FileCheckTests.storeFile(people: 2_000)
        defer { _ = dir }
        let originals = try await Self.originals(at: path)
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let size = LMDBFileCheck.run(path: path).pageSize
        let cut = whole.prefix(whole.count / size * 6 / 10 * size)
        let pages = cut.count / size
        func flags(_ data: Data, _ page: Int) -> UInt8 { data[page * size + 10] }
        func put(_ value: UInt64, bytes: Int, at offset: Int, in data: inout Data) {
            for i in 0..<bytes { data[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
        }
        func firstNode(_ data: Data, _ page: Int) -> Int {
            page * size + (Int(data[page * size + 16]) | Int(data[page * size + 17]) << 8)
        }
        /// Whether the page holds a node whose key and 8 bytes after it lie inside the page (a leaf page no tree
        /// uses any more may hold anything).
        func holdsANode(_ data: Data, _ page: Int) -> Bool {
            let lower = Int(data[page * size + 12]) | Int(data[page * size + 13]) << 8
            let node = firstNode(data, page)
            guard lower > 16, node >= page * size + 18, node + 8 <= (page + 1) * size else { return false }
            return node + 8 + (Int(data[node + 6]) | Int(data[node + 7]) << 8) + 8 <= (page + 1) * size
        }
        // The leaves lied about are taken from the middle of the file: the first pages may be the only ones left that
        // name the store's collections (its catalog's and main database's newest pages may lie past the cut), and
        // without them no document can be placed in a collection.
        let leaves = Array((2..<pages).filter { flags(cut, $0) == 0x02 && holdsANode(cut, $0) }.dropFirst(8))
        let branches = (2..<pages).filter { flags(cut, $0) == 0x01 }
        let overflows = (2..<pages).filter { flags(cut, $0) & 0x04 != 0 }
        try #require(leaves.count > 10 && !branches.isEmpty && !overflows.isEmpty)
        var lies: [(String, Data)] = []
        var copy = cut
        for page in leaves.prefix(5) { put(0xFFFF_0002, bytes: 4, at: page * size + 12, in: &copy) }
        lies.append(("impossible bounds", copy))
        copy = cut
        for page in leaves.suffix(5) {
            let node = firstNode(copy, page)
            let keySize = Int(copy[node + 6]) | Int(copy[node + 7]) << 8
            put(1, bytes: 2, at: node + 4, in: &copy)
            put(UInt64(pages + 7), bytes: 8, at: node + 8 + keySize, in: &copy)
        }
        lies.append(("an overflow page past the end", copy))
        copy = cut
        for page in overflows { put(0x7FFF_FFFF, bytes: 4, at: page * size + 12, in: &copy) }
        lies.append(("overflow pages past the end", copy))
        copy = cut
        for page in branches {
            let node = firstNode(copy, page)
            put(UInt64(page), bytes: 6, at: node, in: &copy)
        }
        lies.append(("a branch whose child is itself", copy))
        copy = cut
        for page in leaves.prefix(20) { put(UInt64(page + 1), bytes: 8, at: page * size, in: &copy) }
        lies.append(("pages saying they are others", copy))
        var rng = SeededGenerator(seed: 60)
        for round in 0..<FileCheckTests.cases(15) {
            lies.append(("random damage \(round)", FileCheckTests.damaged(Data(cut), pageSize: size, from: 2, using: &rng)))
        }
        for (lie, data) in lies {
            let report = try await Self.recoverAndCheck(data, in: dir, originals: originals, deleted: 2_000 / 8)
            // Where the ids fall (they are random) decides whether the cut took documents or only index pages:
            // "nothing was lost" is said only where every document came back.
            let recovered = report.collections.first { $0.name == "people" }?.recovered ?? 0
            if report.lostNothing { #expect(recovered >= originals.count, "\(lie): \(report)") }
            if !lie.hasPrefix("random") {   // the rest of the file still holds documents of its tree
                #expect((report.collections.first { $0.name == "people" }?.recovered ?? 0) > 0, "\(lie): \(report)")
            }
        }
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
