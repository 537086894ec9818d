import Foundation
import Testing
@testable import DocStore

@Suite struct StoreDocumentsTests {
    @Test func insertedDocumentReadsBackEqual() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let ann = Person(name: "Ann", age: 41, city: "Bergen", email: "ann@example.com", tags: ["swift", "lmdb"])
        try await store.insert(ann)
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        #expect(try await store.get(Person.self, id: UUID()) == nil)
    }

    @Test func aLongArrayHasOneEntryPerDistinctElement() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        // 23 distinct values, repeated past the sixteenth element, and one first seen at the end.
        var ann = Person(name: "Ann", age: 41, email: "ann@example.com", tags: (0..<40).map { "t\($0 % 23)" } + ["last"])
        try await store.insert(ann)
        let id = try idKey(ann.id)
        func expected() -> Set<IndexEntry> { Set(ann.tags.map { IndexEntry(key: KeyEncoder.key(.string($0)), id: id) }) }
        #expect(try await store.entries(of: Person.self, index: "tags").count == 24)
        #expect(Set(try await store.entries(of: Person.self, index: "tags")) == expected())
        ann.tags = ann.tags.reversed() + ["t3", "new"]
        try await store.save(ann)
        #expect(try await store.entries(of: Person.self, index: "tags").count == 25)
        #expect(Set(try await store.entries(of: Person.self, index: "tags")) == expected())
    }

    @Test func saveReplacesTheDocumentAndItsIndexEntries() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var ann = Person(name: "Ann", age: 41, email: "ann@example.com", tags: ["a", "b"])
        try await store.insert(ann)
        ann.age = 42
        ann.email = "ann@example.org"
        ann.tags = ["b", "c"]
        try await store.save(ann)
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        let id = try idKey(ann.id)
        #expect(try await store.entries(of: Person.self, index: "age") == [IndexEntry(key: KeyEncoder.key(.int(42)), id: id)])
        #expect(try await store.entries(of: Person.self, index: "email")
                == [IndexEntry(key: KeyEncoder.key(.string("ann@example.org")), id: id)])
        #expect(Set(try await store.entries(of: Person.self, index: "tags"))
                == [IndexEntry(key: KeyEncoder.key(.string("b")), id: id), IndexEntry(key: KeyEncoder.key(.string("c")), id: id)])
        // The old unique value is free again.
        try await store.insert(Person(name: "Bob", age: 30, email: "ann@example.com"))
    }

    @Test func saveInsertsWhenTheIdIsNew() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let bob = Person(name: "Bob", age: 30)
        try await store.save(bob)
        #expect(try await store.get(Person.self, id: bob.id) == bob)
    }

    @Test func deleteRemovesTheDocumentAndEveryEntry() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com", tags: ["x"])
        try await store.insert(ann)
        #expect(try await store.delete(Person.self, id: ann.id))
        #expect(try await store.delete(Person.self, id: ann.id) == false)
        for index in ["age", "city_age", "email", "tags"] {
            #expect(try await store.entries(of: Person.self, index: index).isEmpty, "index \(index)")
        }
        #expect(try await Person.query().count(in: store) == 0)
    }

    @Test func uniqueIndexDoesNotIndexNil() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<20).map { Person(name: "P\($0)", age: $0) })
        #expect(try await Person.query().count(in: store) == 20)
        #expect(try await store.entries(of: Person.self, index: "email").isEmpty)
        // A regular index does index nil values, as null, so "== nil" can use it later.
        #expect(try await store.entries(of: Person.self, index: "age").count == 20)
    }

    @Test func multiIndexHasOneEntryPerDistinctElement() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let p = Person(name: "Ann", age: 1, tags: ["swift", "lmdb", "swift"])
        try await store.insert(p)
        try await store.insert(Person(name: "NoTags", age: 2, tags: []))
        let entries = try await store.entries(of: Person.self, index: "tags")
        #expect(entries.map(\.key) == [KeyEncoder.key(.string("lmdb")), KeyEncoder.key(.string("swift"))])
        #expect(entries.allSatisfy { $0.id == (try? idKey(p.id)) })
    }

    @Test func compoundIndexOrdersByEveryFieldInTurn() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: 7)
        let cities = ["Oslo", "Bergen", "Ålesund", "Tromsø", ""]
        let people = (0..<300).map { i in
            Person(name: "P\(i)", age: Int.random(in: -50...120, using: &rng), city: cities.randomElement(using: &rng) ?? "")
        }
        try await store.insert(contentsOf: people)
        let entries = try await store.entries(of: Person.self, index: "city_age")
        let byID = Dictionary(uniqueKeysWithValues: try people.map { (try idKey($0.id), $0) })
        let order = entries.compactMap { byID[$0.id] }
        #expect(order.count == people.count)
        for (a, b) in zip(order, order.dropFirst()) {
            #expect(a.city < b.city || (a.city == b.city && a.age <= b.age), "\(a.city),\(a.age) before \(b.city),\(b.age)")
        }
    }

    @Test func performCommitsEverythingOrNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        struct Stop: Error {}
        await #expect(throws: Stop.self) {
            try await store.write { ctx in
                try ctx.insert(Person(name: "A", age: 1))
                try ctx.insert(Person(name: "B", age: 2))
                throw Stop()
            }
        }
        #expect(try await Person.query().count(in: store) == 0)
        #expect(try await store.entries(of: Person.self, index: "age").isEmpty)

        let id = UUID()
        let n = try await store.write { ctx in
            try ctx.insert(Person(id: id, name: "A", age: 1))
            guard var p = try ctx.get(Person.self, id: id) else { return -1 }
            p.age += 1
            try ctx.save(p)
            return try Person.query().count(in: ctx)
        }
        #expect(n == 1)
        #expect(try await store.get(Person.self, id: id)?.age == 2)
    }

    @Test func insertContentsOfStoresNoneWhenOneFails() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let existing = Person(name: "X", age: 1)
        try await store.insert(existing)
        var batch = (0..<10).map { Person(name: "P\($0)", age: $0) }
        batch.insert(existing, at: 5)
        await #expect(throws: DocStoreError.self) { try await store.insert(contentsOf: batch) }
        #expect(try await Person.query().count(in: store) == 1)
        #expect(try await store.entries(of: Person.self, index: "age").count == 1)
    }

    @Test func collectionNameDefaultsToTheTypeName() async throws {
        struct Note: Document { var id: Int; var text: String }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(Note(id: 1, text: "hello"))
        try await store.insert(Person(name: "A", age: 1))
        let names = try await store.collections().map(\.name).sorted()
        #expect(names == ["Note", "people"])
    }

    @Test func documentsSurviveClosingAndReopening() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("reopen.db")
        let people = (0..<50).map { Person(name: "P\($0)", age: $0, email: "p\($0)@x") }
        do {
            let store = try await DocStore(path: path)
            try await store.insert(contentsOf: people)
            await store.close()
        }
        let store = try await DocStore(path: path)
        #expect(try await Person.query().count(in: store) == 50)
        for p in people { #expect(try await store.get(Person.self, id: p.id) == p) }
        #expect(try await store.verify().isClean)
    }

    /// Random inserts, saves and deletes, some of them conflicting, checked against a dictionary that applies the
    /// same rules: the store's documents and every index's entries match the model's after each step.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomWritesMatchAnInMemoryModel(seed: UInt64) async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: seed)
        var model: [UUID: Person] = [:]
        var ids: [UUID] = []
        let emails = (0..<15).map { "u\($0)@example.com" }
        let words = ["swift", "lmdb", "é", "e\u{301}", "", "zz"]
        func randomPerson(id: UUID) -> Person {
            Person(id: id, name: "N\(Int.random(in: 0..<100, using: &rng))", age: Int.random(in: -5...5, using: &rng),
                   city: ["Oslo", "Bergen"].randomElement(using: &rng) ?? "",
                   email: Bool.random(using: &rng) ? emails.randomElement(using: &rng) : nil,
                   tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in words.randomElement(using: &rng) ?? "" })
        }
        func conflicts(_ p: Person) -> Bool {
            guard let email = p.email else { return false }
            return model.values.contains { $0.id != p.id && $0.email == email }
        }
        for step in 0..<300 {
            let roll = Int.random(in: 0..<10, using: &rng)
            if roll < 4 || ids.isEmpty {
                let p = randomPerson(id: UUID())
                do {
                    try await store.insert(p)
                    #expect(!conflicts(p), "step \(step): insert should have conflicted")
                    model[p.id] = p
                    ids.append(p.id)
                } catch DocStoreError.uniqueViolation {
                    #expect(conflicts(p), "step \(step): unexpected conflict")
                }
            } else if roll < 8, let id = ids.randomElement(using: &rng) {
                let p = randomPerson(id: id)
                do {
                    try await store.save(p)
                    #expect(!conflicts(p), "step \(step): save should have conflicted")
                    model[id] = p
                    if !ids.contains(id) { ids.append(id) }
                } catch DocStoreError.uniqueViolation {
                    #expect(conflicts(p), "step \(step): unexpected conflict")
                }
            } else if let id = ids.randomElement(using: &rng) {
                let existed = try await store.delete(Person.self, id: id)
                #expect(existed == (model[id] != nil))
                model[id] = nil
            }
        }
        let stored = try await Person.query().results(in: store)
        #expect(Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) }) == model)
        #expect(try await Person.query().count(in: store) == model.count)
        let expectedAge = Set(try model.values.map { IndexEntry(key: KeyEncoder.key(.int(Int64($0.age))), id: try idKey($0.id)) })
        #expect(Set(try await store.entries(of: Person.self, index: "age")) == expectedAge)
        let expectedEmail = Set(try model.values.compactMap { p in
            try p.email.map { IndexEntry(key: KeyEncoder.key(.string($0)), id: try idKey(p.id)) }
        })
        #expect(Set(try await store.entries(of: Person.self, index: "email")) == expectedEmail)
        var expectedTags = Set<IndexEntry>()
        for p in model.values {
            for t in p.tags { expectedTags.insert(IndexEntry(key: KeyEncoder.key(.string(t)), id: try idKey(p.id))) }
        }
        #expect(Set(try await store.entries(of: Person.self, index: "tags")) == expectedTags)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }
}

/// A model whose encoding fails for one value, to see which failure a batch encoded in slices reports.
private struct Numbered: Document {
    var id: Int
    var label: String

    struct Refused: Error, CustomStringConvertible {
        var id: Int
        var description: String { "number \(id) is refused" }
    }

    func encode(to encoder: any Encoder) throws {
        if label == "refuse" { throw Refused(id: id) }
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(label, forKey: .label)
    }
}

@Suite struct BatchInsertTests {
    /// Large enough to be encoded in slices on every core: a slice boundary at the half on two cores, at each quarter
    /// on four (refused documents are placed at both).
    static let count = 9_001

    @Test func aLargeBatchReadsBackInItsOrder() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let all = (0..<Self.count).map { Numbered(id: $0, label: "n\($0 * 7919 % Self.count)") }
        // Into an empty collection, after the last id (both appended at the end), then before the first id.
        try await store.insert(contentsOf: all[3_000..<6_000].shuffled())
        try await store.insert(contentsOf: all[6_000...].shuffled())
        try await store.insert(contentsOf: all[..<3_000].shuffled())
        #expect(try await store.verify().isClean)
        let stored = try await store.read { try Numbered.query().results(in: $0) }
        #expect(stored.map(\.id) == all.map(\.id))
        #expect(stored.map(\.label) == all.map(\.label))
    }

    @Test(arguments: [0, 2_249, 2_250, 4_500, 9_000])
    func aBatchWithADocumentThatCannotBeEncodedWritesNothingAndNamesTheFirst(refused: Int) async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var all = (0..<Self.count).map { Numbered(id: $0, label: "n") }
        all[refused].label = "refuse"
        if refused + 3_000 < Self.count { all[refused + 3_000].label = "refuse" }
        await expectError(.encodingFailed, mentions: ["number \(refused) is refused"]) {
            try await store.insert(contentsOf: all)
        }
        #expect(try await store.read { try Numbered.query().count(in: $0) } == 0)
    }
}

extension BatchInsertTests {
    /// Random batches, some with an id or a unique email taken (by a stored document or within the batch), against
    /// a plain model: a batch goes in whole or not at all, and every index holds exactly the entries of the stored
    /// documents.
    @Test(arguments: [UInt64(1), 2, 3])
    func batchesGoInWholeOrNotAtAllAndKeepEveryIndexRight(seed: UInt64) async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: seed)
        var model: [UUID: Person] = [:]
        var refused = 0
        for round in 0..<30 {
            let size = Int.random(in: 1...(round % 5 == 0 ? 600 : 40), using: &rng)
            var batch = (0..<size).map { _ -> Person in
                let reuse = !model.isEmpty && Int.random(in: 0..<400, using: &rng) == 0
                let id = reuse ? model.keys.randomElement(using: &rng)! : UUID()
                let email = Int.random(in: 0..<3, using: &rng) == 0 ? "p\(Int.random(in: 0..<5_000, using: &rng))" : nil
                return Person(id: id, name: "n", age: Int.random(in: 0..<90, using: &rng),
                              city: ["Oslo", "Bergen", "Tromsø"].randomElement(using: &rng)!, email: email,
                              tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in "t\(Int.random(in: 0..<6, using: &rng))" })
            }
            if Int.random(in: 0..<8, using: &rng) == 0 {   // an id twice within the batch
                var twin = batch.randomElement(using: &rng)!
                twin.email = nil
                batch.insert(twin, at: Int.random(in: 0...batch.count, using: &rng))
            }
            var ids = Set(model.keys)
            var emails = Set(model.values.compactMap(\.email))
            let clean = batch.allSatisfy { ids.insert($0.id).inserted && ($0.email.map { emails.insert($0).inserted } ?? true) }
            do {
                try await store.insert(contentsOf: batch)
                #expect(clean, "a batch with a taken id or email went in")
                for p in batch { model[p.id] = p }
            } catch let error as DocStoreError {
                #expect(!clean, "a clean batch was refused: \(error)")
                #expect(error.code == .duplicateID || error.code == .uniqueViolation)
                refused += 1
            }
            let stored = try await store.read { try Person.query().results(in: $0) }
            #expect(Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) }) == model)
        }
        #expect(refused > 0)
        let emails = try await store.entries(of: Person.self, index: "email")
        #expect(emails.count == model.values.filter { $0.email != nil }.count)
        #expect(try await store.entries(of: Person.self, index: "age").count == model.count)
        #expect(try await store.entries(of: Person.self, index: "tags").count
                == model.values.reduce(0) { $0 + Set($1.tags).count })
        #expect(try await store.verify().isClean)
    }
}
