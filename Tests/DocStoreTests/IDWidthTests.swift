import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore

/// A model keyed by integers, whose keys are 10 bytes within ±2^53 and 18 beyond.
struct Ledger: Document, Equatable {
    var id: Int64
    var owner: String
    var balance: Int
    var tags: [String]
    static let collection = "ledgers"
    static let indexes: [IndexSpec<Ledger>] = [
        .index("owner", \.owner),
        .index("owner_balance", \.owner, \.balance),
        .multi("tags", \.tags),
        .unique("balance", \.balance),
    ]
}

/// A collection whose ids all have one length keeps its indexes' ids side by side (`MDB_DUPFIXED`); an id of another
/// length makes it keep ids of any length first. Checked against the documents kept in memory.
@Suite(.ownThreads) struct IDWidthTests {
    /// The index spaces of `accounts` that keep their values at one size, by index name.
    static func fixedSpaces(_ store: DocStore) async throws -> [String: Bool] {
        try await store.read { ctx in
            guard let handle = try ctx.scope.handle(named: Ledger.collection),
                  let txn = ctx.txn as? LMDBTransaction else { return [:] }
            var fixed: [String: Bool] = [:]
            for index in handle.indexes {
                fixed[index.definition.name] = try txn.flags(of: index.database) & LMDBFlags.fixedSizeDuplicates != 0
            }
            return fixed
        }
    }

    static func idWidth(_ store: DocStore) async throws -> Int? {
        try await store.read { ctx in try ctx.scope.core.readInfo(Ledger.collection, in: ctx.txn)?.idWidth }
    }

    /// Every index's answer, in the store and in memory: ids, in id order.
    static func checkIndexes(_ store: DocStore, _ kept: [Int64: Ledger], _ note: String) async throws {
        let ordered = kept.values.sorted { $0.id < $1.id }
        for owner in ["ann", "bob", "cy", "dee"] {
            let ids = try await Ledger.include(#Predicate { $0.owner == owner }).ids(in: store)
            #expect(ids == ordered.filter { $0.owner == owner }.map(\.id), "\(note): owner \(owner)")
            let low = try await Ledger.include(#Predicate { $0.owner == owner && $0.balance < 500 }).ids(in: store)
            #expect(low == ordered.filter { $0.owner == owner && $0.balance < 500 }.map(\.id), "\(note): \(owner) < 500")
        }
        for tag in ["red", "green", "blue"] {
            let ids = try await Ledger.include(#Predicate { $0.tags.contains(tag) }).ids(in: store)
            #expect(ids == ordered.filter { $0.tags.contains(tag) }.map(\.id), "\(note): tag \(tag)")
        }
        #expect(try await Ledger.query().count(in: store) == kept.count, "\(note): count")
        let report = try await store.verify()
        #expect(report.isClean, "\(note): \(report)")
    }

    static func account(_ id: Int64, _ g: inout SeededGenerator, balance: Int) -> Ledger {
        let owners = ["ann", "bob", "cy", "dee"], tags = ["red", "green", "blue"]
        return Ledger(id: id, owner: owners[Int.random(in: 0..<4, using: &g)], balance: balance,
                       tags: tags.filter { _ in Bool.random(using: &g) })
    }

    /// An id past 2^53 (18 bytes as a key) arriving by each way a document is written: alone, in a batch, among
    /// writes of several tasks committed together, in a write closure, and without the type.
    @Test(arguments: ["insert", "batch", "tasks", "closure", "untyped"])
    func anIdOfAnotherLengthWidensTheIndexesAndLosesNothing(_ way: String) async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("ids.db")
        let store = try await DocStore(path: path)
        var g = SeededGenerator(seed: 0x1D5 &+ UInt64(way.utf8.reduce(0) { $0 &* 31 &+ Int($1) }))
        var kept: [Int64: Ledger] = [:]
        var balance = 0
        func next(_ id: Int64) -> Ledger {
            balance += 1
            return IDWidthTests.account(id, &g, balance: balance)
        }
        // Small ids first, by batches and one by one, with updates and deletes among them.
        let first = (1...600).map { next(Int64($0)) }
        try await store.insert(contentsOf: first)
        for a in first { kept[a.id] = a }
        for id in stride(from: Int64(3), to: 600, by: 7) {
            var a = kept[id]!
            a.owner = "dee"
            try await store.save(a)
            kept[id] = a
        }
        for id in stride(from: Int64(5), to: 600, by: 11) {
            #expect(try await store.delete(Ledger.self, id: id))
            kept[id] = nil
        }
        #expect(try await IDWidthTests.idWidth(store) == 10)
        #expect(try await IDWidthTests.fixedSpaces(store) == ["owner": true, "owner_balance": true, "tags": true,
                                                                "balance": false])
        try await IDWidthTests.checkIndexes(store, kept, "\(way), before")

        // Ids past 2^53, and beside them small ones again.
        let long: [Ledger] = [next(1 << 60), next(-(1 << 55)), next(Int64.max), next(700), next((1 << 53) + 1)]
        switch way {
        case "insert":
            for a in long { try await store.insert(a) }
        case "batch":
            try await store.insert(contentsOf: long)
        case "tasks":
            try await withThrowingTaskGroup(of: Void.self) { group in
                for a in long { group.addTask { try await store.insert(a) } }
                for i in 0..<16 {
                    let a = next(Int64(5_000 + i))
                    kept[a.id] = a
                    group.addTask { try await store.insert(a) }
                }
                try await group.waitForAll()
            }
        case "closure":
            try await store.write { ctx in
                for a in long { try ctx.save(a) }
                var moved = try #require(try ctx.get(Ledger.self, id: 10))
                moved.tags = ["red"]
                try ctx.save(moved)
            }
            kept[10]?.tags = ["red"]
        default:
            try await store.write { ctx in
                for a in long {
                    try ctx.insert(.object([
                        ("id", .int(a.id)), ("owner", .string(a.owner)), ("balance", .int(Int64(a.balance))),
                        ("tags", .array(a.tags.map { .string($0) })),
                    ]), into: Ledger.collection)
                }
            }
        }
        for a in long { kept[a.id] = a }
        #expect(try await IDWidthTests.idWidth(store) == nil)
        #expect(try await IDWidthTests.fixedSpaces(store) == ["owner": false, "owner_balance": false, "tags": false,
                                                                "balance": false])
        try await IDWidthTests.checkIndexes(store, kept, "\(way), after")
        #expect(try await store.get(Ledger.self, id: Int64.max) == kept[Int64.max])

        // More writes of both lengths, then the file as another process opens it.
        let more = (0..<200).map { n -> Ledger in
            let id: Int64 = n % 2 == 0 ? Int64(2_000 + n) : (1 << 58) + Int64(n)
            return next(id)
        }
        try await store.insert(contentsOf: more)
        for a in more { kept[a.id] = a }
        try await IDWidthTests.checkIndexes(store, kept, "\(way), more")
        await store.close()
        #expect(DocStore.checkFile(at: path).isClean)
        let reopened = try await DocStore(path: path)
        try await IDWidthTests.checkIndexes(reopened, kept, "\(way), reopened")
        await reopened.close()
    }

    /// Batches whose ids interleave with those before them (put), and batches past them (appended where they sort
    /// after a key's ids): every index answers as the documents do, and a compaction keeps the indexes' layout. (How
    /// full the appended pages come out is the bench's to measure.)
    @Test func idsInOrderAndACompactionKeepTheLayout() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("ids.db")
        var store = try await DocStore(path: path)
        var g = SeededGenerator(seed: 0xF1ED)
        var kept: [Int64: Ledger] = [:]
        var balance = 0
        // Batches whose ids interleave with those before them, and batches past them.
        for round in 0..<6 {
            let ids = round % 2 == 0 ? (0..<1_500).map { Int64(round * 10_000 + $0 * 2) }
                                     : (0..<1_500).map { Int64((round - 1) * 10_000 + $0 * 2 + 1) }
            let batch = ids.shuffled(using: &g).map { id -> Ledger in
                balance += 1
                return IDWidthTests.account(id, &g, balance: balance)
            }
            try await store.insert(contentsOf: batch)
            for a in batch { kept[a.id] = a }
        }
        try await IDWidthTests.checkIndexes(store, kept, "loaded")
        await store.close()
        _ = try await DocStore.compact(path: path)
        #expect(DocStore.checkFile(at: path).isClean)
        store = try await DocStore(path: path)
        #expect(try await IDWidthTests.fixedSpaces(store) == ["owner": true, "owner_balance": true, "tags": true,
                                                              "balance": false])
        try await IDWidthTests.checkIndexes(store, kept, "compacted")
        await store.close()
    }

    /// A collection of string ids, and one made without a type, keep ids of any length from the start.
    @Test func idsOfAnyLengthAreKeptAsTheyCome() async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("ids.db"))
        try await store.write { ctx in
            try ctx.insert(.object([("id", .string("a")), ("n", .int(1))]), into: "loose")
            try ctx.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "loose")
            try ctx.insert(.object([("id", .string("bbbbbbbbbbbbbbbbbbbb")), ("n", .int(1))]), into: "loose")
            try ctx.insert(.object([("id", .int(7)), ("n", .int(1))]), into: "loose")
        }
        #expect(try await store.read { try $0.scope.core.readInfo("loose", in: $0.txn)?.idWidth } == nil)
        let ids = try await Query<DocumentValue>("loose").include(.compare("n", .equal, .int(1))).ids(in: store)
        #expect(ids == [.int(7), .string("a"), .string("bbbbbbbbbbbbbbbbbbbb")])
        #expect(try await store.verify().isClean)
    }

    /// Another process meets the long id: it builds the indexes again, and this process, whose open collection
    /// still has the indexes it deleted, writes and reads them as they are now.
    @Test func anotherProcessWideningTheIdsIsFollowed() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("ids.db")
        let store = try await DocStore(path: path)
        var g = SeededGenerator(seed: 0x2B)
        let first = (1...300).map { IDWidthTests.account(Int64($0), &g, balance: $0) }
        try await store.insert(contentsOf: first)
        var annIDs = first.filter { $0.owner == "ann" }.map(\.id)
        #expect(try await Ledger.include(#Predicate { $0.owner == "ann" }).ids(in: store) == annIDs)
        #expect(try await IDWidthTests.idWidth(store) == 10)

        let child = try CatalogChild(path: path)
        // (2^60 + 1 is not a Double: its key is 18 bytes.)
        let long: Int64 = (1 << 60) + 1
        try child.make("save ledgers \(long) owner ann")
        #expect(try child.finish() == 0)
        annIDs.append(long)
        #expect(try await IDWidthTests.idWidth(store) == nil)
        #expect(try await Ledger.include(#Predicate { $0.owner == "ann" }).ids(in: store) == annIDs)

        // This process's writes, of both lengths, go into the indexes the other process made: the other process's
        // document made whole, and two new ones.
        let mine = [IDWidthTests.account(long, &g, balance: 303), IDWidthTests.account(301, &g, balance: 301),
                    IDWidthTests.account(-(1 << 58) - 1, &g, balance: 302)]
        for var a in mine {
            a.owner = "ann"
            try await store.save(a)
        }
        annIDs = [-(1 << 58) - 1] + annIDs.dropLast() + [301, long]
        #expect(try await Ledger.include(#Predicate { $0.owner == "ann" }).ids(in: store) == annIDs)
        #expect(try await IDWidthTests.fixedSpaces(store)["owner"] == false)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        await store.close()
        #expect(DocStore.checkFile(at: path).isClean)
    }

    /// A write that makes the collection again (dropped and made, or renamed to its name) before it meets the long
    /// id runs again with the collection made to keep ids of any length; so does a dry run.
    @Test func aCollectionMadeAgainInTheWriteThatMeetsTheIdKeepsIdsOfAnyLength() async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("ids.db"))
        var g = SeededGenerator(seed: 0xA6A1)
        let small = (1...50).map { IDWidthTests.account(Int64($0), &g, balance: $0) }
        let long = IDWidthTests.account(Int64.max, &g, balance: 51)
        try await store.insert(contentsOf: small)
        try await store.write { ctx in
            _ = try ctx.dropCollection(Ledger.collection)
            try ctx.insert(contentsOf: small)
            try ctx.insert(long)
        }
        var kept = Dictionary(uniqueKeysWithValues: (small + [long]).map { ($0.id, $0) })
        #expect(try await IDWidthTests.idWidth(store) == nil)
        try await IDWidthTests.checkIndexes(store, kept, "dropped and made")

        await store.close()

        // A dry run that meets the long id: the collection is made to keep ids of any length (that much commits),
        // and the run itself leaves nothing.
        let other = try await DocStore(path: dir.path("dry.db"))
        try await other.insert(contentsOf: small)
        let counted = try await other.dryRun { ctx in
            try ctx.insert(long)
            return try Ledger.include(#Predicate { $0.owner == long.owner }).count(in: ctx)
        }
        #expect(counted == small.filter { $0.owner == long.owner }.count + 1)
        #expect(try await IDWidthTests.idWidth(other) == nil)
        kept[long.id] = nil
        try await IDWidthTests.checkIndexes(other, kept, "after a dry run")
        await other.close()
    }

    /// The structural check reads the pages of ids kept side by side: ids out of order, or a page of another width
    /// than its tree's, are damage it names.
    @Test func theFileCheckReadsIdsKeptSideBySide() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("ids.db")
        let store = try await DocStore(path: path)
        var g = SeededGenerator(seed: 0xC4EC)
        // One owner for all: the owner index's one key holds every id, in a tree of its own.
        let all = (1...3_000).map { n -> Ledger in
            var a = IDWidthTests.account(Int64(n), &g, balance: n)
            a.owner = "ann"
            return a
        }
        try await store.insert(contentsOf: all)
        await store.close()
        #expect(DocStore.checkFile(at: path).isClean)
        let clean = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = Int(getpagesize())
        // Pages of fixed-size keys in a tree (LMDB's P_LEAF | P_LEAF2 at offset 10), written once: all in use.
        let pages = (0..<(clean.count / pageSize)).filter { p in
            clean[p * pageSize + 10] == 0x22 && clean[p * pageSize + 11] == 0
        }
        #expect(pages.count >= 4)
        for page in pages.prefix(4) {
            let keys = page * pageSize + 16
            var swapped = clean
            swapped.replaceSubrange(keys..<(keys + 20), with: clean[(keys + 10)..<(keys + 20)] + clean[keys..<(keys + 10)])
            try swapped.write(to: URL(fileURLWithPath: path))
            let unordered = DocStore.checkFile(at: path)
            #expect(!unordered.isClean && "\(unordered)".contains("out of order"), "page \(page): \(unordered)")

            var narrowed = clean
            narrowed[page * pageSize + 8] = 9
            try narrowed.write(to: URL(fileURLWithPath: path))
            let narrow = DocStore.checkFile(at: path)
            #expect(!narrow.isClean && "\(narrow)".contains("keys of 9 bytes"), "page \(page): \(narrow)")
        }
    }

    /// A write that puts ids into a collection's indexes one by one, drops it, and writes it again puts them into the
    /// new indexes (the cursor kept for an index's puts goes with the index).
    @Test func putsAfterTheIndexesAreDroppedGoIntoTheNewOnes() async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("ids.db"))
        var g = SeededGenerator(seed: 0xD20B)
        let before = (1...40).map { IDWidthTests.account(Int64($0), &g, balance: $0) }
        let after = (1...60).map { IDWidthTests.account(Int64(1_000 - $0), &g, balance: 100 + $0) }
        let middle = IDWidthTests.account(500, &g, balance: 500)
        try await store.insert(contentsOf: before)
        try await store.write { ctx in
            for a in before.prefix(5) { try ctx.save(a) }
            try ctx.insert(middle)
            _ = try ctx.dropCollection(Ledger.collection)
            _ = try ctx.dropCollection("other")
            try ctx.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "other")
            for n in 1...30 { try ctx.insert(.object([("id", .int(Int64(n))), ("n", .int(Int64(n % 3)))]), into: "other") }
            for a in after { try ctx.save(a) }
        }
        try await IDWidthTests.checkIndexes(store, Dictionary(uniqueKeysWithValues: after.map { ($0.id, $0) }), "again")
        let ids = try await Query<DocumentValue>("other").include(.compare("n", .equal, .int(1))).ids(in: store)
        #expect(ids == stride(from: 1, through: 30, by: 3).map { .int(Int64($0)) })
    }

    /// An update that would give a document an id of another length is refused as any change of an id is, and
    /// leaves the collection keeping ids of one length (it widened them first, then refused); a write that meets
    /// such an id keeps ids of any length, with its document.
    @Test func anUpdateThatWouldChangeAnIdsLengthIsRefusedAndWidensNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var g = SeededGenerator(seed: 5)
        try await store.insert(contentsOf: (1...20).map { Self.account(Int64($0), &g, balance: $0) })
        let width = try await Self.idWidth(store)
        #expect(width != nil)
        await expectError(.invalidUpdate, mentions: ["may not change a document's id", "three"]) {
            try await Query<DocumentValue>(Ledger.collection).include(.compare("id", .equal, 3))
                .update(in: store, set: ["id": .string("three")])
        }
        #expect(try await Self.idWidth(store) == width)
        #expect(try await Ledger.query().count(in: store) == 20)
        let long = Self.account(Int64.max, &g, balance: 51)
        try await store.insert(long)
        #expect(try await Self.idWidth(store) == nil)
        #expect(try await Ledger.query().count(in: store) == 21)
        #expect(try await store.verify().isClean)
    }
}
