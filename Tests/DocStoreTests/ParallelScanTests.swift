import Foundation
import Testing
@testable import DocStore

// A full scan split among threads gives what one thread gives: the same matches, in the same order, counted the
// same, with a plain in-memory computation as the oracle; and a damaged document, or a commit in between, is
// handled as on one thread.

private struct Reading: Document, Equatable {
    var id: Int
    var sensor: String
    var value: Double
    var level: Int?
    static let collection = "readings"
}

private struct Tagged: Document, Equatable {
    var id: String
    var n: Int
    static let collection = "tagged"
}

@Suite struct ParallelScanTests {
    /// A store whose scans split from a few hundred documents on, with `threads` threads.
    private static func store(threads: Int) async throws -> (DocStore, TemporaryDirectory) {
        var options = DocStore.Options()
        options.scanThreads = threads
        options.documentsPerScanThread = 200
        return try await makeStore(options: options)
    }

    /// A store splitting its scans between two threads, holding 2,000 readings.
    private static func loaded(seed: UInt64) async throws -> (DocStore, TemporaryDirectory, [Reading]) {
        var rng = SeededGenerator(seed: seed)
        let models = readings(2_000, using: &rng)
        let (store, dir) = try await store(threads: 2)
        try await store.insert(contentsOf: models)
        return (store, dir, models)
    }

    private static func readings(_ count: Int, using rng: inout SeededGenerator) -> [Reading] {
        // Ids spread unevenly (dense, then sparse, negatives too), so that the ranges cut by value are uneven.
        var ids = Set<Int>()
        while ids.count < count {
            ids.insert(Bool.random(using: &rng) ? Int.random(in: -50...2_000, using: &rng)
                                                : Int.random(in: -1_000_000_000...1_000_000_000_000, using: &rng))
        }
        return ids.map { id in
            Reading(id: id, sensor: ["a", "b", "c", "d"].randomElement(using: &rng)!,
                    value: Double(Int.random(in: -1_000...1_000, using: &rng)) / 8,
                    level: Bool.random(using: &rng) ? nil : Int.random(in: 0...9, using: &rng))
        }
    }

    @Test(arguments: [2, 3, 5])
    func aSplitScanGivesWhatOneThreadGives(threads: Int) async throws {
        var rng = SeededGenerator(seed: UInt64(threads))
        let models = Self.readings(3_000, using: &rng)
        let (store, dir) = try await Self.store(threads: threads)
        defer { _ = dir }
        try await store.insert(contentsOf: models)
        let byID = models.sorted { $0.id < $1.id }
        // With nothing to check, a sort still reads every document: it is split too.
        let top = models.sorted { $0.value != $1.value ? $0.value < $1.value : $0.id < $1.id }
        #expect(try await Reading.query().sortBy(\.value)[0..<30].results(in: store) == Array(top.prefix(30)))
        #expect(try await Reading.query().sortBy(\.value).results(in: store) == top)
        for round in 0..<12 {
            let (x, s, l) = (Double(Int.random(in: -120...120, using: &rng)), ["a", "b", "c"].randomElement(using: &rng)!,
                             Int.random(in: 0...9, using: &rng))
            let predicate = round % 3 == 0 ? #Predicate<Reading> { $0.value > x }
                : round % 3 == 1 ? #Predicate<Reading> { $0.sensor == s || ($0.level ?? 0) > l }
                : #Predicate<Reading> { $0.value * 2 < x && $0.level != nil }
            let matching = byID.filter { (try? predicate.evaluate($0)) ?? false }
            let query = Reading.include(predicate)
            let label = "round \(round), \(threads) threads"

            #expect(try await query.ids(in: store) == matching.map(\.id), "\(label): ids")
            #expect(try await query.results(in: store) == matching, "\(label): results")
            #expect(try await query.count(in: store) == matching.count, "\(label): count")
            #expect(try await query.sortBy(\.id, order: .reverse).results(in: store) == matching.reversed(),
                    "\(label): id descending")
            // Sorted by a field, the id breaking ties: all, and the first few (a top-k kept per range, then merged).
            let byValue = matching.sorted { $0.value != $1.value ? $0.value > $1.value : $0.id < $1.id }
            #expect(try await query.sortBy(\.value, order: .reverse).results(in: store) == byValue, "\(label): sorted")
            #expect(try await query.sortBy(\.value, order: .reverse)[3..<40].results(in: store) == Array(byValue.dropFirst(3).prefix(37)),
                    "\(label): top-k")
            // A window on the natural order scans on one thread, and stops early.
            #expect(try await query[5..<25].ids(in: store) == Array(matching.dropFirst(5).prefix(20).map(\.id)), "\(label): window")
            #expect(try await query[5..<25].count(in: store) == min(20, max(0, matching.count - 5)), "\(label): window count")
            try await store.read { ctx in
                var seen: [Int] = []
                let cursor = try query.cursor(in: ctx)
                while let reading = try cursor.next() { seen.append(reading.id) }
                #expect(seen == matching.map(\.id), "\(label): cursor")
            }
        }
    }

    /// Every document is read once, whichever thread reads it.
    @Test func aSplitScanCountsEachDocumentOnce() async throws {
        let (store, dir, models) = try await Self.loaded(seed: 11)
        defer { _ = dir }
        let query = Reading.include(#Predicate { $0.value > 0 })
        for explained in [try await query.explain(in: store), try await query.aggregate(.count).explain(in: store)] {
            let explanation = explained
            #expect(explanation.statistics.entriesScanned == models.count, "\(explanation)")
            #expect(explanation.statistics.documentsRead == models.count, "\(explanation)")
            #expect(explanation.statistics.returned == models.filter { $0.value > 0 }.count, "\(explanation)")
        }
    }

    /// String ids whose common prefix is long, and ids that are prefixes of others, are cut and read whole.
    @Test func stringIDsAreCutInOrder() async throws {
        var rng = SeededGenerator(seed: 3)
        var ids = Set<String>()
        while ids.count < 1_500 {
            let tail = (0..<Int.random(in: 0...12, using: &rng)).map { _ in ["a", "z", "\u{0}", "é", "0"].randomElement(using: &rng)! }
            ids.insert("customer/0000000" + tail.joined())
        }
        let models = ids.map { Tagged(id: $0, n: Int.random(in: 0...9, using: &rng)) }
        let (store, dir) = try await Self.store(threads: 2)
        defer { _ = dir }
        try await store.insert(contentsOf: models)
        let n = 4
        let expected = try await store.read { ctx in try Tagged.query().ids(in: ctx) }.filter { id in
            models.first { $0.id == id }!.n > n
        }
        #expect(try await Tagged.include(#Predicate { $0.n > n }).ids(in: store) == expected)
        #expect(try await Tagged.include(#Predicate { $0.n > n }).count(in: store) == expected.count)
    }

    /// The cuts between two keys increase, lie between them, and fall back to none where there is no room.
    @Test func cutsLieBetweenTheirEnds() {
        var rng = SeededGenerator(seed: 8)
        for _ in 0..<2_000 {
            func key() -> [UInt8] {
                let length = Int.random(in: 0...12, using: &rng)
                return (0..<length).map { _ in [0, 1, 0x7F, 0x80, 0xFF].randomElement(using: &rng)! }
            }
            var (a, b) = (key(), key())
            if b.lexicographicallyPrecedes(a) { swap(&a, &b) }
            let parts = Int.random(in: 1...20, using: &rng)
            let cuts = ParallelScan.cuts(from: a, to: b, parts: parts)
            #expect(cuts.count < parts)
            var previous = a
            for cut in cuts {
                #expect(previous.lexicographicallyPrecedes(cut), "\(a) \(b) \(cuts)")
                #expect(!b.lexicographicallyPrecedes(cut), "\(a) \(b) \(cuts)")
                previous = cut
            }
        }
    }

    /// A damaged document in any range stops the scan with an error naming it; the process goes on.
    @Test func aDamagedDocumentStopsASplitScanWithAClearError() async throws {
        let (store, dir, models) = try await Self.loaded(seed: 5)
        defer { _ = dir }
        let damaged = models.map(\.id).sorted()[1_700]   // in a range the helper thread is likely to read
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Reading.self)
            try ctx.txn.put(handle.documents, try CollectionHandle.idKey(damaged, collection: "readings"), [1, 0x0E, 0xFF])
        }
        let error = await expectError(.corruptDocument) {
            _ = try await Reading.include(#Predicate { $0.value > 1000 }).count(in: store)
        }
        #expect(error?.message.contains("damaged") == true, "\(error?.message ?? "")")
        let intact = models.first { $0.id != damaged }!
        #expect(try await store.get(Reading.self, id: intact.id) == intact, "the store goes on answering")
    }

    /// A second reader sees the same commit as the first, or none is given: a commit in between refuses it.
    @Test func aTwinSeesTheSameCommitOrIsNotMade() throws {
        let dir = TemporaryDirectory()
        let env = try LMDBEnvironment(path: dir.path("twins.mdb"), configuration: .init(
            initialMapSize: 1 << 20, maximumMapSize: 1 << 24, maxDatabases: 4, maxReaders: 8))
        defer { env.close() }
        let space = try env.write { txn in try txn.openKeySpace("s", create: true)! }
        try env.write { txn in _ = try txn.put(space, [1], [1]) }
        try env.read { txn in
            let twin = try #require(txn.twin())
            defer { twin.end() }
            #expect(twin.id == txn.id)
            #expect(try twin.get(space, [1]).map(Array.init) == [1])
        }
        try env.read { txn in
            try env.write { writer in _ = try writer.put(space, [2], [2]) }
            #expect(txn.twin() == nil, "a commit came between: the twin would see more")
            #expect(try txn.get(space, [2]) == nil)
        }
        try env.write { txn in #expect(txn.twin() == nil, "a write transaction has no twin") }
    }
}
