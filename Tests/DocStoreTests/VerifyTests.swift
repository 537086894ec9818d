import Foundation
import Testing
@testable import DocStore

// MARK: Helpers of this suite


/// Damage done on purpose, through the raw transaction of a `perform` closure.
private enum VerifyDamage {
    struct SetupFailed: Error, CustomStringConvertible {
        var description: String
    }

    static func index(_ handle: CollectionHandle, _ name: String) throws -> CollectionHandle.Index {
        guard let index = handle.indexes.first(where: { $0.definition.name == name }) else {
            throw SetupFailed(description: "no index \(name) in \(handle.name)")
        }
        return index
    }

    /// The entries `index` holds for a document with these encoded bytes.
    static func keys(of bytes: [UInt8], for index: CollectionHandle.Index) throws -> [[UInt8]] {
        try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            return try IndexKeys.keys(of: index, reader: reader, root: try reader.root())
        }
    }

    static func keys(of person: Person, for index: CollectionHandle.Index) throws -> [[UInt8]] {
        try keys(of: try DocumentEncoder().encode(person), for: index)
    }

    /// `person` with every indexed value changed: another age, city, email and the tags given.
    static func elsewhere(_ person: Person, tags: [String]) -> Person {
        var changed = person
        changed.age = 77
        changed.city = "Tromsø"
        changed.email = "stale@example.com"
        changed.tags = tags
        return changed
    }

    static func personID(_ id: UUID) throws -> [UInt8] {
        try CollectionHandle.idKey(id, collection: Person.collection)
    }
}

/// A generator with a fixed seed, so a failing run can be repeated.
private struct VerifySeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One index entry, as a pair of key and primary key.
private struct VerifyEntry: Hashable, Sendable {
    var key: [UInt8]
    var id: [UInt8]
}

/// An index's entries as stored, against those computed from the documents that should be there.
private struct VerifyIndexComparison: Sendable {
    var stored: [VerifyEntry]
    var expected: Set<VerifyEntry>
    var entryCount: Int
}

private func verifyStandardPeople() -> (ann: Person, bob: Person, cat: Person) {
    (Person(name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: ["swift", "lmdb"]),
     Person(name: "Bob", age: 30, city: "Bergen", email: nil, tags: ["swift"]),
     Person(name: "Cat", age: 41, city: "Oslo", email: "cat@example.com", tags: []))
}

@Suite struct VerifyTests {
    @Test func cleanStoreVerifiesClean() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.problems.isEmpty)
        #expect(report.collectionsChecked == 1)
        #expect(report.documentsChecked == 3)
        // age 3 + city_age 3 + email 2 + tags 3
        #expect(report.entriesChecked == 11)
        #expect(report.indexesLookedUp == 0, "a clean index is compared by its sum, not entry by entry")
    }

    @Test(arguments: ["age", "city_age", "email", "tags"])
    func deletedIndexEntryIsDocumentWithoutEntry(indexName: String) async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let ann = people.ann
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            let index = try VerifyDamage.index(handle, indexName)
            let id = try VerifyDamage.personID(ann.id)
            let keys = try VerifyDamage.keys(of: ann, for: index)
            guard let key = keys.first else { throw VerifyDamage.SetupFailed(description: "no key") }
            guard try ctx.txn.delete(index.database, key, value: index.isUnique ? nil : id) else {
                throw VerifyDamage.SetupFailed(description: "the entry was not there")
            }
        }
        let report = try await store.verify()
        #expect(!report.isClean)
        #expect(report.problems.count == 1, "\(report)")
        let problem = try #require(report.problems.first)
        #expect(problem.kind == .documentWithoutEntry)
        #expect(problem.collection == "people")
        #expect(problem.index == indexName)
        #expect(problem.document.contains(ann.id.uuidString), "\(problem)")
        #expect(problem.description.contains("document without entry"))
        #expect(report.indexesLookedUp == 1, "only the damaged index is looked up entry by entry")
    }

    @Test(arguments: ["age", "city_age", "email", "tags"])
    func entryPointingAtAMissingDocumentIsEntryWithoutDocument(indexName: String) async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let ghost = Person(name: "Ghost", age: 99, city: "Nowhere", email: "ghost@example.com", tags: ["boo"])
        let ghostKey = try VerifyDamage.personID(ghost.id)
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            let index = try VerifyDamage.index(handle, indexName)
            let keys = try VerifyDamage.keys(of: ghost, for: index)
            guard keys.count == 1 else { throw VerifyDamage.SetupFailed(description: "expected one key") }
            try ctx.txn.put(index.database, keys[0], ghostKey)
        }
        let report = try await store.verify()
        #expect(report.problems.count == 1, "\(report)")
        let problem = try #require(report.problems.first)
        #expect(problem.kind == .entryWithoutDocument)
        #expect(problem.collection == "people")
        #expect(problem.index == indexName)
        let hex = "0x" + ghostKey.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        #expect(problem.document == hex, "\(problem)")
    }

    @Test func deletedDocumentLeavesEveryEntryWithoutDocument() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let ann = people.ann
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            guard try ctx.txn.delete(handle.documents, try VerifyDamage.personID(ann.id)) else {
                throw VerifyDamage.SetupFailed(description: "no document")
            }
        }
        let report = try await store.verify()
        // age, city_age, email, and two tags
        #expect(report.problems.count == 5, "\(report)")
        #expect(report.problems.allSatisfy { $0.kind == .entryWithoutDocument })
        #expect(Set(report.problems.compactMap(\.index)) == ["age", "city_age", "email", "tags"])
        #expect(report.documentsChecked == 2)
    }

    /// An entry whose key changed: the index holds as many entries as the documents produce, one of them wrong.
    /// Both the missing entry and the stale one are reported (the count alone would hide them).
    @Test(arguments: ["age", "city_age", "email", "tags"])
    func anEntryWithAChangedKeyIsMissingAndStale(indexName: String) async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let ann = people.ann
        let changed = VerifyDamage.elsewhere(ann, tags: ["stale"] + ann.tags.dropFirst())
        try await store.write { [changed] ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            let index = try VerifyDamage.index(handle, indexName)
            let id = try VerifyDamage.personID(ann.id)
            let real = try VerifyDamage.keys(of: ann, for: index), wrong = try VerifyDamage.keys(of: changed, for: index)
            guard let gone = real.first(where: { !wrong.contains($0) }), let added = wrong.first(where: { !real.contains($0) }) else {
                throw VerifyDamage.SetupFailed(description: "no key to change")
            }
            let entries = try ctx.txn.entryCount(index.database)
            _ = try ctx.txn.delete(index.database, gone, value: index.isUnique ? nil : id)
            try ctx.txn.put(index.database, added, id)
            guard try ctx.txn.entryCount(index.database) == entries else {
                throw VerifyDamage.SetupFailed(description: "the entry count changed")
            }
        }
        let report = try await store.verify()
        #expect(Set(report.problems.map(\.kind)) == [.documentWithoutEntry, .staleEntry], "\(report)")
        #expect(report.problems.allSatisfy { $0.index == indexName && $0.document.contains(ann.id.uuidString) }, "\(report)")
    }

    /// Two entries whose documents were swapped: the index holds the same keys, as many of them, each pointing at
    /// the other document. Comparing keys or counts alone would find nothing.
    @Test(arguments: ["age", "city_age", "email", "tags"])
    func entriesPointingAtEachOthersDocumentsAreFound(indexName: String) async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        // Two people whose every indexed value differs.
        let dan = Person(name: "Dan", age: 25, city: "Bodø", email: "dan@example.com", tags: ["kotlin"])
        let eve = Person(name: "Eve", age: 52, city: "Tromsø", email: "eve@example.com", tags: ["rust"])
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat, dan, eve])
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            let index = try VerifyDamage.index(handle, indexName)
            let danID = try VerifyDamage.personID(dan.id), eveID = try VerifyDamage.personID(eve.id)
            let danKeys = try VerifyDamage.keys(of: dan, for: index), eveKeys = try VerifyDamage.keys(of: eve, for: index)
            guard let danKey = danKeys.first(where: { !eveKeys.contains($0) }),
                  let eveKey = eveKeys.first(where: { !danKeys.contains($0) }) else {
                throw VerifyDamage.SetupFailed(description: "no keys to swap")
            }
            let entries = try ctx.txn.entryCount(index.database)
            _ = try ctx.txn.delete(index.database, danKey, value: index.isUnique ? nil : danID)
            _ = try ctx.txn.delete(index.database, eveKey, value: index.isUnique ? nil : eveID)
            try ctx.txn.put(index.database, danKey, eveID)
            try ctx.txn.put(index.database, eveKey, danID)
            guard try ctx.txn.entryCount(index.database) == entries else {
                throw VerifyDamage.SetupFailed(description: "the entry count changed")
            }
        }
        let report = try await store.verify()
        #expect(Set(report.problems.map(\.kind)) == [.documentWithoutEntry, .staleEntry], "\(report)")
        for person in [dan, eve] {
            #expect(report.problems.filter { $0.document.contains(person.id.uuidString) }.count == 2, "\(report)")
        }
        #expect(report.problems.allSatisfy { $0.index == indexName }, "\(report)")
    }

    @Test(arguments: ["age", "city_age", "email", "tags"])
    func entryTheDocumentDoesNotProduceIsStaleEntry(indexName: String) async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let ann = people.ann
        let changed = VerifyDamage.elsewhere(ann, tags: ["stale"])
        let stale = changed
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            let index = try VerifyDamage.index(handle, indexName)
            let keys = try VerifyDamage.keys(of: stale, for: index)
            guard keys.count == 1 else { throw VerifyDamage.SetupFailed(description: "expected one key") }
            try ctx.txn.put(index.database, keys[0], try VerifyDamage.personID(ann.id))
        }
        let report = try await store.verify()
        #expect(report.problems.count == 1, "\(report)")
        let problem = try #require(report.problems.first)
        #expect(problem.kind == .staleEntry)
        #expect(problem.collection == "people")
        #expect(problem.index == indexName)
        #expect(problem.document.contains(ann.id.uuidString), "\(problem)")
    }

    @Test(arguments: [
        [0xDE, 0xAD, 0xBE, 0xEF] as [UInt8],
        [0x01],
        [0x01, 0x0E, 0xFF, 0xFF, 0xFF, 0x7F, 0x00, 0x00, 0x00, 0x00],
        [0x01, 0x09, 0x05, 0x61],
        [0x01, 0x00, 0x00],
    ])
    func documentOfGarbageBytesIsCorruptDocument(garbage: [UInt8]) async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let victim = UUID()
        let victimKey = try VerifyDamage.personID(victim)
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            try ctx.txn.put(handle.documents, victimKey, garbage)
        }
        let report = try await store.verify()
        #expect(report.problems.count == 1, "\(report)")
        let problem = try #require(report.problems.first)
        #expect(problem.kind == .corruptDocument)
        #expect(problem.collection == "people")
        #expect(problem.index == nil)
        #expect(!problem.document.isEmpty)
        #expect(report.documentsChecked == 4)

        // Reading it says so too, and names the collection.
        let error = await #expect(throws: DocStoreError.self) { _ = try await store.get(Person.self, id: victim) }
        #expect(error?.code == .corruptDocument, "\(String(describing: error))")
        #expect(error?.message.contains("people") == true)
    }

    @Test func existingDocumentOverwrittenWithGarbageIsReported() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let ann = people.ann
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            try ctx.txn.put(handle.documents, try VerifyDamage.personID(ann.id), [0x01, 0x42, 0x42])
        }
        let report = try await store.verify()
        #expect(report.problems.filter { $0.kind == .corruptDocument }.count == 1, "\(report)")
        // Its entries no longer match anything the (unreadable) document produces.
        #expect(report.problems.contains { $0.kind == .staleEntry || $0.kind == .entryWithoutDocument }, "\(report)")
    }

    @Test func validDocumentThatDoesNotDecodeIsUndecodableDocument() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let odd = PersonWithTextAge(id: UUID(), name: "Odd", age: "forty", city: "Oslo", email: "odd@example.com",
                                      tags: ["odd"])
        let bytes = try DocumentEncoder().encode(odd)
        let oddKey = try VerifyDamage.personID(odd.id)
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            try ctx.txn.put(handle.documents, oddKey, bytes)
            // Its index entries too, so that the only damage is the type.
            for index in handle.indexes {
                for key in try VerifyDamage.keys(of: bytes, for: index) {
                    try ctx.txn.put(index.database, key, oddKey)
                }
            }
        }
        let report = try await store.verify()
        #expect(report.problems.count == 1, "\(report)")
        let problem = try #require(report.problems.first)
        #expect(problem.kind == .undecodableDocument)
        #expect(problem.collection == "people")
        #expect(problem.document.contains(odd.id.uuidString), "\(problem)")
        #expect(problem.detail.contains("age"), "\(problem)")
    }

    @Test func severalKindsOfDamageAreAllReported() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = verifyStandardPeople()
        try await store.insert(contentsOf: [people.ann, people.bob, people.cat])
        let ann = people.ann, bob = people.bob
        let garbageKey = try VerifyDamage.personID(UUID())
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            let age = try VerifyDamage.index(handle, "age")
            let tags = try VerifyDamage.index(handle, "tags")
            let annKey = try VerifyDamage.personID(ann.id)
            try ctx.txn.delete(age.database, try VerifyDamage.keys(of: ann, for: age)[0], value: annKey)
            var other = bob
            other.tags = ["rust"]
            try ctx.txn.put(tags.database, try VerifyDamage.keys(of: other, for: tags)[0], try VerifyDamage.personID(bob.id))
            try ctx.txn.put(handle.documents, garbageKey, [0xFF])
        }
        let report = try await store.verify()
        let kinds = report.problems.map(\.kind)
        #expect(kinds.count == 3, "\(report)")
        #expect(kinds.contains(.documentWithoutEntry))
        #expect(kinds.contains(.staleEntry))
        #expect(kinds.contains(.corruptDocument))
        #expect(report.description.contains("3 problems"), "\(report)")
    }

    /// `verify()` splits a collection's documents among the scan's threads, each summing the index entries its
    /// share produces: the report must be the one a single thread makes, problem for problem and in the same order.
    @Test(.enabled(if: !engineIsServer, "a file's scan threads"))
    func damageFoundOnTwoThreadsIsTheDamageFoundOnOne() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        func open(threads: Int) async throws -> DocStore {
            var options = DocStore.Options()
            options.scanThreads = threads
            options.documentsPerScanThread = 50
            return try await DocStore(path: path, options: options)
        }
        var rng = VerifySeededGenerator(state: 2)
        let cities = ["Oslo", "Bergen", "Tromsø"], tags = ["a", "b", "c", "d"]
        let people = (0..<900).map { i in
            Person(id: UUID(uuid: (UInt8(i >> 8), UInt8(i & 255), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
                   name: "p\(i)", age: Int.random(in: 0..<90, using: &rng), city: cities.randomElement(using: &rng)!,
                   email: Bool.random(using: &rng) ? "p\(i)@example.com" : nil,
                   tags: tags.filter { _ in Bool.random(using: &rng) })
        }
        do {
            let store = try await open(threads: 2)
            try await store.insert(contentsOf: people)
            // Damage spread over the ids: entries removed, documents overwritten with garbage, and one that no
            // longer decodes.
            try await store.write { ctx in
                let handle = try ctx.scope.handle(for: Person.self)
                for (n, person) in people.enumerated() where n % 97 == 5 {
                    let index = handle.indexes[n % handle.indexes.count]
                    for key in try VerifyDamage.keys(of: person, for: index) {
                        try ctx.txn.delete(index.database, key, value: try VerifyDamage.personID(person.id))
                    }
                }
                for person in [people[40], people[444], people[899]] {
                    try ctx.txn.put(handle.documents, try VerifyDamage.personID(person.id), [0x01, 0x42])
                }
                let odd = PersonWithTextAge(id: people[600].id, name: "Odd", age: "forty", city: "Oslo", email: nil,
                                            tags: [])
                try ctx.txn.put(handle.documents, try VerifyDamage.personID(odd.id), try DocumentEncoder().encode(odd))
            }
            // The documents are many enough to split, and the store's transactions can have twins: the check below
            // runs on two threads.
            let splits = try await store.read { ctx in
                let handle = try #require(try ctx.scope.handleForReading(Person.self))
                return try ParallelScan(txn: ctx.txn, documents: handle.documents,
                                        settings: ScanSettings(threads: 2, documentsPerThread: 50))
                    .run(residual: { Residual(.constant(true), handle: handle, statistics: $0) },
                         statistics: StatisticsBox(), start: { 0 }, add: { count, _ in count += 1 }) != nil
            }
            #expect(splits)
            let split = try await store.verify()
            await store.close()
            let reopened = try await open(threads: 1)
            _ = try await Person.query().count(in: reopened)   // (a type checks its documents once the store has met it)
            let alone = try await reopened.verify()
            #expect(split.description == alone.description)
            #expect(split.problems.map(\.description) == alone.problems.map(\.description))
            #expect(split.documentsChecked == people.count && split.entriesChecked == alone.entriesChecked)
            let kinds = Set(split.problems.map(\.kind))
            #expect(kinds.isSuperset(of: [.documentWithoutEntry, .corruptDocument, .undecodableDocument]), "\(split)")
        }
    }

    // MARK: Random operations against an oracle

    @Test func randomOperationsLeaveAStoreThatVerifiesCleanAndMatchesAnOracle() async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "store.db")
        var store = try await openStore(path)
        var rng = VerifySeededGenerator(state: 0xD0C5_7012)
        var oracle: [UUID: Person] = [:]
        let cities = ["Oslo", "Bergen", "Tromsø", "Bodø"]
        let tagPool = ["a", "b", "c", "d", "e"]

        func randomID() -> UUID {
            let a = rng.next(), b = rng.next()
            var bytes = [UInt8](repeating: 0, count: 16)
            for i in 0..<8 {
                bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * UInt64(i)))
                bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * UInt64(i)))
            }
            return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                               bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        }
        func randomPerson(id: UUID? = nil) -> Person {
            let id = id ?? randomID()
            let email: String? = Int.random(in: 0..<3, using: &rng) == 0 ? nil : "u\(Int.random(in: 0..<40, using: &rng))@x.org"
            let tagCount = Int.random(in: 0...4, using: &rng)
            let tags = (0..<tagCount).map { _ in tagPool.randomElement(using: &rng)! }
            return Person(id: id, name: "p\(Int.random(in: 0..<1_000, using: &rng))", age: Int.random(in: 0..<60, using: &rng),
                          city: cities.randomElement(using: &rng)!, email: email, tags: tags)
        }
        /// Whether another document than `id` in the oracle holds `email`.
        func emailTaken(_ email: String?, by other: UUID, in people: [UUID: Person]) -> Bool {
            guard let email else { return false }
            return people.values.contains { $0.email == email && $0.id != other }
        }

        var outcomes: [String: Int] = [:]
        for step in 0..<600 {
            let existing = oracle.keys.sorted { $0.uuidString < $1.uuidString }
            let roll = Int.random(in: 0..<100, using: &rng)
            if roll < 35 || existing.isEmpty {
                let person = randomPerson()
                do {
                    try await store.insert(person)
                    #expect(!emailTaken(person.email, by: person.id, in: oracle), "step \(step): insert should conflict")
                    oracle[person.id] = person
                    outcomes["insert", default: 0] += 1
                } catch let error as DocStoreError where error.code == .uniqueViolation {
                    #expect(emailTaken(person.email, by: person.id, in: oracle), "step \(step): \(error)")
                    outcomes["conflict", default: 0] += 1
                }
            } else if roll < 60 {
                let id = existing.randomElement(using: &rng)!
                let person = randomPerson(id: id)
                do {
                    try await store.save(person)
                    #expect(!emailTaken(person.email, by: id, in: oracle), "step \(step): save should conflict")
                    oracle[id] = person
                    outcomes["save", default: 0] += 1
                } catch let error as DocStoreError where error.code == .uniqueViolation {
                    #expect(emailTaken(person.email, by: id, in: oracle), "step \(step): \(error)")
                    outcomes["conflict", default: 0] += 1
                }
            } else if roll < 75 {
                let id = existing.randomElement(using: &rng)!
                #expect(try await store.delete(Person.self, id: id), "step \(step)")
                oracle[id] = nil
                outcomes["delete", default: 0] += 1
            } else if roll < 80 {
                let id = existing.randomElement(using: &rng)!
                let twin = randomPerson(id: id)
                let current = store
                let error = await #expect(throws: DocStoreError.self) { try await current.insert(twin) }
                #expect(error?.code == .duplicateID, "step \(step)")
                #expect(try await store.delete(Person.self, id: randomID()) == false)
                outcomes["duplicate", default: 0] += 1
            } else if roll < 92 {
                // Several steps in one transaction; when one fails, none of them happens.
                let batch = (0..<Int.random(in: 1...4, using: &rng)).map { _ in randomPerson() }
                let victim = existing.randomElement(using: &rng)!
                var next = oracle
                var conflict = false
                for person in batch {
                    if emailTaken(person.email, by: person.id, in: next) { conflict = true; break }
                    next[person.id] = person
                }
                next[victim] = nil
                do {
                    try await store.write { ctx in
                        try ctx.insert(contentsOf: batch)
                        try ctx.delete(Person.self, id: victim)
                    }
                    #expect(!conflict, "step \(step): the batch should conflict")
                    oracle = next
                    outcomes["batch", default: 0] += 1
                } catch let error as DocStoreError where error.code == .uniqueViolation {
                    #expect(conflict, "step \(step): \(error)")
                    outcomes["failed batch", default: 0] += 1
                }
            } else if roll < 95 {
                await store.close()
                store = try await openStore(path)
                outcomes["reopen", default: 0] += 1
            } else {
                #expect(try await Person.query().count(in: store) == oracle.count, "step \(step)")
            }
        }
        #expect(outcomes["conflict", default: 0] > 0, "\(outcomes)")
        #expect(outcomes["failed batch", default: 0] > 0, "\(outcomes)")
        #expect(oracle.count > 10, "\(outcomes)")

        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.documentsChecked == oracle.count)
        #expect(report.indexesLookedUp == 0)

        #expect(try await Person.query().count(in: store) == oracle.count)
        let stored = try await store.write { ctx in try Person.query().results(in: ctx) }
        #expect(Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) }) == oracle)

        let survivors = Array(oracle.values)
        let comparisons = try await store.write { ctx -> [String: VerifyIndexComparison] in
            let handle = try ctx.scope.handle(for: Person.self)
            var result: [String: VerifyIndexComparison] = [:]
            for index in handle.indexes {
                var expected = Set<VerifyEntry>()
                for person in survivors {
                    let id = try VerifyDamage.personID(person.id)
                    for key in try VerifyDamage.keys(of: person, for: index) {
                        expected.insert(VerifyEntry(key: key, id: id))
                    }
                }
                var stored: [VerifyEntry] = []
                try ctx.txn.withCursor(index.database) { cursor in
                    var entry = try cursor.first()
                    while let (key, value) = entry {
                        stored.append(VerifyEntry(key: Array(key), id: Array(value)))
                        entry = try cursor.next()
                    }
                }
                result[index.definition.name] = VerifyIndexComparison(stored: stored, expected: expected,
                                                                     entryCount: try ctx.txn.entryCount(index.database))
            }
            return result
        }
        #expect(Set(comparisons.keys) == ["age", "city_age", "email", "tags"])
        let expectedCounts = [
            "age": oracle.count,
            "city_age": oracle.count,
            "email": oracle.values.filter { $0.email != nil }.count,
            "tags": oracle.values.reduce(0) { $0 + Set($1.tags).count },
        ]
        for (name, comparison) in comparisons {
            #expect(comparison.entryCount == expectedCounts[name], "index \(name)")
            #expect(comparison.stored.count == comparison.entryCount, "index \(name)")
            #expect(Set(comparison.stored) == comparison.expected, "index \(name)")
        }
        await store.close()
    }
}
