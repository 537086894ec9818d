import Foundation
import Testing
@testable import DocStore

// An update of many documents makes their new bytes and index keys on several threads, a unit of documents at a
// time, and writes them in id order as they come (`Query.updateInSlices`). These tests check it against a plain
// computation: every document and every index as the same change applied in memory makes them, whether the change
// keeps a document's shape or not, across units, threads and slices; and an update that fails throws the error that
// going through the documents one by one would meet first, and writes nothing.

private struct Item: Document, Equatable {
    var id: Int
    var group: String
    var rank: Int
    var code: String
    var note: String?
    var tags: [String]

    static let collection = "items"
    static let indexes: [IndexSpec<Item>] = [
        .index("group", \.group),
        .index("group_rank", \.group, \.rank),
        .unique("code", \.code),
        .multi("tags", \.tags),
    ]
}

/// The change of round `r`: deterministic in the item, so that the model can make it too. It moves ranks, some
/// groups and codes (indexed), sets or clears the note (which changes the document's names), and adds a tag.
private func change(_ item: inout Item, round r: Int) {
    item.rank = (item.rank * 7 + r) % 1_000
    if item.id % 3 == r % 3 { item.group = "g\((item.id + r) % 5)" }
    if item.id % 4 == r % 4 { item.code = "c\(item.id)-\(r)" }
    if item.id % 5 == r % 5 { item.note = item.note == nil ? "n\(r)" : nil }
    if item.id % 6 == r % 6 { item.tags.append("t\(r % 7)") }
}

private struct Refused: Error, Equatable {
    let id: Int
}

private func items(_ count: Int, seed: UInt64) -> [Item] {
    var rng = SeededGenerator(seed: seed)
    return (1...count).map { id in
        Item(id: id, group: "g\(Int.random(in: 0..<5, using: &rng))", rank: Int.random(in: 0..<1_000, using: &rng),
             code: "c\(id)", note: Bool.random(using: &rng) ? "n" : nil,
             tags: (0..<Int.random(in: 0...2, using: &rng)).map { _ in "t\(Int.random(in: 0..<7, using: &rng))" })
    }
}

private func makeStore(with items: [Item]) async throws -> (DocStore, TemporaryDirectory) {
    let (store, dir) = try await makeStore()
    try await store.insert(contentsOf: items)
    return (store, dir)
}

@Suite struct UpdateInSlicesTests {
    /// Seeds and document counts: a few units, many units, and more than one slice of 8,192 documents.
    static let cases: [(UInt64, Int)] = [(0x511C_E001, 700), (0x511C_E002, 2_500), (0x511C_E003, 9_000)]

    @Test(arguments: cases)
    func updatesOfManyDocumentsLeaveWhatTheSameChangeMakesInMemory(seed: UInt64, count: Int) async throws {
        var model = items(count, seed: seed)
        let (store, dir) = try await makeStore(with: model)
        defer { _ = dir }
        var rng = SeededGenerator(seed: seed ^ 0xFFFF)
        for r in 0..<4 {
            // A filter through an index (planned as its walk), or none (every document).
            let group = "g\(Int.random(in: 0..<5, using: &rng))"
            let low = Int.random(in: 0..<500, using: &rng)
            let matches: (Item) -> Bool
            let matched: Int
            switch r % 3 {
            case 0:
                matches = { $0.group == group }
                matched = try await Item.include(#Predicate { $0.group == group }).update(in: store) { change(&$0, round: r) }
            case 1:
                matches = { $0.rank >= low }
                matched = try await Item.include(#Predicate { $0.rank >= low }).update(in: store) { change(&$0, round: r) }
            default:
                matches = { _ in true }
                matched = try await Item.query().update(in: store) { change(&$0, round: r) }
            }
            var expected = 0
            for i in model.indices where matches(model[i]) {
                change(&model[i], round: r)
                expected += 1
            }
            #expect(matched == expected, "round \(r): \(matched) matched, expected \(expected)")
            // The same through field changes, checked as the type: the ranks of one group, moved back.
            let moved = try await Item.include(#Predicate { $0.group == group })
                .update(in: store, increment: ["rank": .int(1)])
            for i in model.indices where model[i].group == group { model[i].rank += 1 }
            #expect(moved == model.filter { $0.group == group }.count)
            try await expectSame(store, model, "seed \(seed), round \(r)")
        }
    }

    /// An update that fails throws the first failure in id order, the change's or the write's, whichever thread met
    /// it, and leaves every document as it was.
    @Test func theFirstFailureInIDOrderIsTheOneThrownAndNothingIsWritten() async throws {
        let model = items(3_000, seed: 0x511C_E0F0)
        let (store, dir) = try await makeStore(with: model)
        defer { _ = dir }
        var rng = SeededGenerator(seed: 0x511C_E0F1)
        for attempt in 0..<6 {
            // Failures spread over the units, the first one anywhere.
            let failing = Set((0..<Int.random(in: 1...12, using: &rng)).map { _ in Int.random(in: 2...3_000, using: &rng) })
            let first = failing.min()!
            // Half the attempts also give an earlier or a later document the code document 1 holds.
            let taker = attempt % 2 == 0 ? nil : (attempt % 4 == 1 ? max(2, first - 1) : min(3_000, first + 1))
            let caught = await #expect(throws: (any Error).self) {
                _ = try await Item.include(#Predicate { $0.id >= 2 }).update(in: store) { item in
                    if item.id == taker { item.code = "c1" }
                    if failing.contains(item.id) { throw Refused(id: item.id) }
                    item.rank += 1
                }
            }
            if let taker, taker < first {
                #expect((caught as? DocStoreError)?.code == .uniqueViolation, "attempt \(attempt): \(String(describing: caught))")
            } else {
                #expect(caught as? Refused == Refused(id: first), "attempt \(attempt): \(String(describing: caught)), expected \(first)")
            }
            try await expectSame(store, model, "attempt \(attempt)")
        }
    }
}

/// Every document as `model` holds it, each index answering as the model, and `verify()` clean.
private func expectSame(_ store: DocStore, _ model: [Item], _ context: String,
                        sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let stored = try await Item.query().results(in: store)
    let differing = zip(stored, model).filter { $0 != $1 }.prefix(3)
    #expect(stored.count == model.count && differing.isEmpty, "\(context): \(Array(differing))", sourceLocation: sourceLocation)
    for g in 0..<5 {
        let group = "g\(g)"
        let byGroup = try await Item.include(#Predicate { $0.group == group }).ids(in: store)
        #expect(byGroup == model.filter { $0.group == group }.map(\.id), "\(context): group \(group)", sourceLocation: sourceLocation)
        let ranked = try await Item.include(#Predicate { $0.group == group && $0.rank < 300 }).ids(in: store)
        #expect(ranked == model.filter { $0.group == group && $0.rank < 300 }.map(\.id), "\(context): ranks of \(group)",
                sourceLocation: sourceLocation)
    }
    for t in 0..<7 {
        let tag = "t\(t)"
        let tagged = try await Item.include(#Predicate { $0.tags.contains(tag) }).ids(in: store)
        #expect(tagged == model.filter { $0.tags.contains(tag) }.map(\.id), "\(context): tag \(tag)", sourceLocation: sourceLocation)
    }
    for item in model.prefix(40) + model.suffix(40) {
        let code = item.code
        let found = try await Item.include(#Predicate { $0.code == code }).first(in: store)
        #expect(found?.id == item.id, "\(context): code \(code)", sourceLocation: sourceLocation)
    }
    let report = try await store.verify()
    #expect(report.isClean, "\(context): \(report)", sourceLocation: sourceLocation)
}
