import Foundation
import Testing
@testable import DocStore

private struct Account: Document, Equatable {
    var id: Int
    var tenant: String
    var email: String?
    static let indexes: [IndexSpec<Account>] = [.unique("tenant_email", \.tenant, \.email)]
}

/// A batch insert's outcome when it inserted: what the store then held.
private struct Inserted: Error { let held: [Int] }

private struct Member: Document, Equatable {
    var id: Int
    var handle: String
    var badge: Int?
    var teams: [String]
    var level: Int
    static let indexes: [IndexSpec<Member>] = [.unique("handle", \.handle), .multi("teams", \.teams), .index("level", \.level),
                                               .unique("badge", \.badge)]
}

private struct Note: Document, Equatable {
    var id: Int
    var text: String
    var tags: [String]
}

@Suite struct QueryEdgeCaseTests {
    /// A sort whose keys are of several lengths, on either side of 16 bytes (a missing badge and a small integer
    /// id make 11 bytes, a badge and an id 20), split among threads: every ordering, reversed or sliced, is the
    /// oracle's (nil first, ties in id order).
    @Test func sortsOfKeysOfSeveralLengthsFollowTheOracle() async throws {
        var options = DocStore.Options()
        options.scanThreads = 2
        options.documentsPerScanThread = 50
        let (store, dir) = try await makeStore(options: options)
        defer { _ = dir }
        // Badges are unique (their index is), a quarter of them missing; levels repeat, so ties fall to the badge.
        let badges = Array(-300..<300).shuffled()
        let members = (0..<400).map { i in
            Member(id: i * 7 - 1_000, handle: "h\(i)", badge: Int.random(in: 0..<4) == 0 ? nil : badges[i],
                   teams: [], level: Int.random(in: 0..<3))
        }
        try await store.insert(contentsOf: members)
        func ascending(_ a: Member, _ b: Member) -> Bool {
            switch (a.badge, b.badge) {
            case (nil, nil): return a.id < b.id
            case (nil, _): return true
            case (_, nil): return false
            case let (x?, y?): return x != y ? x < y : a.id < b.id
            }
        }
        let sorted = members.sorted(by: ascending)
        #expect(try await Member.sortBy(\.badge).results(in: store).map(\.id) == sorted.map(\.id))
        #expect(try await Member.sortBy(\.badge).reverse().results(in: store).map(\.id) == sorted.reversed().map(\.id))
        let byLevel = members.sorted { $0.level != $1.level ? $0.level > $1.level : ascending($0, $1) }
        #expect(try await Member.sortBy(\.level, order: .reverse).sortBy(\.badge).results(in: store).map(\.id)
            == byLevel.map(\.id))
        #expect(try await Member.sortBy(\.badge)[37..<301].results(in: store).map(\.id) == sorted[37..<301].map(\.id))
    }

    /// A document saved several times in one write is what the last save made, with the index entries of that
    /// version only, however an engine gathers the writes before sending them.
    @Test func theLastOfSeveralSavesInOneWriteWins() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            for round in 0..<3 {
                for id in 0..<20 { try ctx.save(Account(id: id, tenant: "t\(round)", email: "e\(id)-\(round)")) }
            }
        }
        let all = try await Account.query().results(in: store)
        #expect(all == (0..<20).map { Account(id: $0, tenant: "t2", email: "e\($0)-2") })
        #expect(try await Account.include(#Predicate { $0.tenant == "t1" }).count(in: store) == 0)
        #expect(try await Account.include(#Predicate { $0.tenant == "t2" && $0.email == "e7-2" }).results(in: store)
                    .map(\.id) == [7])
        #expect(try await store.verify().isClean)
    }

    /// An insert of many documents checks each against those before it in the same call, across the batches an
    /// engine with round trips reads ahead in: a repeated id or unique value refuses the whole insert, and nothing
    /// of it stays.
    @Test func aBatchInsertRefusesARepeatedIDOrUniqueValueWithinItself() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let base = (0..<1_200).map { Account(id: $0, tenant: "t\($0 % 7)", email: "m\($0)@x") }
        try await store.insert(contentsOf: base[..<10])
        var repeatedID = Array(base[10...])
        repeatedID[900].id = 100   // 100 was inserted earlier in the same call, in another batch of 512
        await #expect(throws: DocStoreError.self) { try await store.insert(contentsOf: repeatedID) }
        var repeatedEmail = Array(base[10...])
        repeatedEmail[1000].email = repeatedEmail[999].email   // in the same batch
        repeatedEmail[1000].tenant = repeatedEmail[999].tenant
        do {
            try await store.insert(contentsOf: repeatedEmail)
            Issue.record("a repeated unique value was inserted")
        } catch let error as DocStoreError {
            #expect(error.code == .uniqueViolation)
        }
        #expect(try await Account.query().count(in: store) == 10)
        try await store.insert(contentsOf: base[10...])
        #expect(try await Account.query().count(in: store) == 1_200)
        #expect(try await store.verify().isClean)
    }

    /// A batch insert refuses with the error that inserting its documents one at a time meets first (the same code
    /// and message), or inserts them all, as one at a time does: random batches with repeated ids and unique
    /// values, within the batch and against the store, keys too long to store, and none. (On a server a batch is
    /// inserted one document at a time already: there the test holds the two ways of calling to one answer.)
    @Test func aBatchInsertRefusesWithTheErrorOneAtATimeMeetsFirst() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: 0xBA7C_4)
        func member(_ id: Int) -> Member {
            Member(id: id, handle: "h\(Int.random(in: 0..<400, using: &rng))",
                   badge: Bool.random(using: &rng) ? nil : Int.random(in: 0..<400, using: &rng),
                   teams: (0..<Int.random(in: 0...3, using: &rng)).map { _ in "t\(Int.random(in: 0..<5, using: &rng))" },
                   level: Int.random(in: 0..<4, using: &rng))
        }
        // Stored already: ids 0..<20 with handles and badges of their own.
        try await store.insert(contentsOf: (0..<20).map { Member(id: $0, handle: "s\($0)", badge: 1_000 + $0, teams: [], level: 0) })
        struct Rollback: Error {}
        // What the write met; when it inserted, what the store then held (counted, and looked up by each index).
        func outcome(_ body: @escaping @Sendable (WriteContext) throws -> Void) async -> String {
            do {
                try await store.write { ctx in
                    try body(ctx)
                    let held = try [Member.query().count(in: ctx), Member.include(#Predicate { $0.level == 2 }).count(in: ctx),
                                    Member.include(#Predicate { $0.teams.contains("t1") }).count(in: ctx),
                                    Member.include(#Predicate { $0.handle >= "h2" }).count(in: ctx),
                                    Member.include(#Predicate { $0.badge != nil }).count(in: ctx)]
                    throw Inserted(held: held)
                }
            } catch let inserted as Inserted {
                return "inserted, holding \(inserted.held)"
            } catch let error as DocStoreError {
                return "\(error.code): \(error.message)"
            } catch {
                return "\(error)"
            }
            return "committed"
        }
        var refused = 0
        for trial in 0..<120 {
            let size = Int.random(in: 1...40, using: &rng)
            var batch = (0..<size).map { _ in member(Int.random(in: 0..<(trial % 3 == 0 ? 60 : 6_000), using: &rng)) }
            if trial % 4 == 1 { batch[Int.random(in: 0..<size, using: &rng)].handle = "s\(Int.random(in: 0..<20, using: &rng))" }
            if trial % 5 == 2 { batch[Int.random(in: 0..<size, using: &rng)].badge = 1_000 + Int.random(in: 0..<20, using: &rng) }
            // A team too long for a key: its index comes after the handle's, whose values are checked after every
            // index's keys are made.
            if trial % 7 == 3 { batch[Int.random(in: 0..<size, using: &rng)].teams.append(String(repeating: "t", count: 600)) }
            let members = batch
            let oneByOne = await outcome { ctx in for m in members { try ctx.insert(m) } }
            let together = await outcome { ctx in try ctx.insert(contentsOf: members) }
            #expect(together == oneByOne, "trial \(trial): \(members.map(\.id))")
            if !oneByOne.hasPrefix("inserted") { refused += 1 }
        }
        #expect(refused > 30 && refused < 110, "\(refused) of 120 batches refused")
        // A document whose handle is taken (by the store, or by the document before it) and one of whose teams is
        // too long for a key: the key is met first.
        let long = String(repeating: "t", count: 600)
        for taken in ["s3", "h-first"] {
            let members = [Member(id: 300_000, handle: "h-first", badge: nil, teams: [], level: 0),
                           Member(id: 300_001, handle: taken, badge: nil, teams: ["t1", long], level: 0)]
            let oneByOne = await outcome { ctx in for m in members { try ctx.insert(m) } }
            #expect(oneByOne.hasPrefix("valueTooLarge"))
            #expect(await outcome { ctx in try ctx.insert(contentsOf: members) } == oneByOne)
        }
        // Batches large enough that their keys are made on several threads, each with a problem or two (or none)
        // put where the threads' parts meet or anywhere.
        for trial in 0..<(engineIsServer ? 1 : 8) {
            var batch = (0..<4_500).map { Member(id: 100_000 + $0, handle: "b\($0)", badge: nil, teams: ["t\($0 % 3)"], level: $0 % 4) }
            for _ in 0..<(trial % 3) {
                let at = Bool.random(using: &rng) ? Int.random(in: 2_240...2_260, using: &rng) : Int.random(in: 1..<4_500, using: &rng)
                let earlier = Int.random(in: 0..<at, using: &rng)
                switch Int.random(in: 0..<5, using: &rng) {
                case 0: batch[at].id = batch[earlier].id
                case 1: batch[at].handle = batch[earlier].handle
                case 2: (batch[at].badge, batch[earlier].badge) = (7, 7)
                case 3: batch[at].handle = String(repeating: "x", count: 3_000)   // too long for a key
                default: batch[at].id = Int.random(in: 0..<20, using: &rng)        // stored already
                }
            }
            let members = batch
            let oneByOne = await outcome { ctx in for m in members { try ctx.insert(m) } }
            let together = await outcome { ctx in try ctx.insert(contentsOf: members) }
            #expect(together == oneByOne, "large trial \(trial)")
        }
        // One large batch committed: every document and index entry is where it should be.
        let large = (0..<5_000).map { Member(id: 200_000 + $0, handle: "c\($0)", badge: $0 % 2 == 0 ? 5_000 + $0 : nil,
                                            teams: ["t\($0 % 4)", "u"], level: $0 % 3) }
        try await store.insert(contentsOf: large.reversed())
        #expect(try await Member.query().count(in: store) == 5_020)
        #expect(try await Member.include(#Predicate { $0.level == 1 }).ids(in: store) == large.filter { $0.level == 1 }.map(\.id))
        #expect(try await Member.include(#Predicate { $0.teams.contains("t3") }).count(in: store) == 1_250)
        #expect(try await store.verify().isClean)
    }

    @Test func aCompoundUniqueIndexDoesNotHideDocumentsWithANilPart() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let accounts = [Account(id: 1, tenant: "acme", email: "a@acme"), Account(id: 2, tenant: "acme", email: nil),
                        Account(id: 3, tenant: "acme", email: nil), Account(id: 4, tenant: "zeta", email: "z@zeta")]
        try await store.insert(contentsOf: accounts)
        #expect(try await Account.include(#Predicate { $0.tenant == "acme" }).results(in: store).map(\.id) == [1, 2, 3])
        #expect(try await Account.include(#Predicate { $0.tenant == "acme" && $0.email == nil }).results(in: store)
                    .map(\.id) == [2, 3])
        #expect(try await Account.include(#Predicate { $0.tenant > "a" }).sortBy(\.tenant).sortBy(\.email)
                    .results(in: store).map(\.id) == [2, 3, 1, 4])
        // With nil excluded in every field, the unique index does answer.
        let exact = Account.include(#Predicate { $0.tenant == "acme" && $0.email == "a@acme" })
        #expect(try await exact.results(in: store).map(\.id) == [1])
        #expect(try await exact.explain(in: store).index == "tenant_email")
    }

    @Test func aKeyPathIntoAnArrayElementIsNotTakenForTheArray() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let notes = [Note(id: 1, text: "a", tags: ["red", "blue"]), Note(id: 2, text: "b", tags: ["blue", "red"]),
                     Note(id: 3, text: "c", tags: [])]
        try await store.insert(contentsOf: notes)
        let firstRed = Note.include(#Predicate { $0.tags.first == "red" })
        #expect(try await firstRed.results(in: store).map(\.id) == [1])
        #expect(try await firstRed.explain(in: store).decodesForFilter)
        await expectError(.invalidSchema) { _ = try await Note.sortBy(\.tags.first).results(in: store) }
    }

    @Test func savingWhileIteratingTerminatesAndVisitsEachDocumentOnce() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<50).map { Person(name: "P\($0)", age: $0 % 7) })
        let visited = try await store.write { ctx in
            var seen = 0
            let people = try Person.sortBy(\.age).cursor(in: ctx)
            while var person = try people.next() {
                person.age += 100
                try ctx.save(person)
                seen += 1
            }
            return seen
        }
        #expect(visited == 50)
        #expect(try await Person.include(#Predicate { $0.age >= 100 }).count(in: store) == 50)
    }

    /// A walk sees the changes its own transaction makes to the documents ahead of it, on every engine: a cursor in
    /// a write transaction gathers its ids first and reads each document when it is reached, so an engine that
    /// reads documents ahead in batches never hands on one read before a write.
    @Test func aWalkSeesItsTransactionsChangesToDocumentsAheadOfIt() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<400).map { Person(name: "P\($0)", age: $0) })
        let walk = Person.include(#Predicate { $0.age < 40 })
        #expect(try await walk.explain(in: store).description.contains("index"))
        let names = try await store.write { ctx in
            var names: [String] = []
            let people = try walk.cursor(in: ctx)
            while let person = try people.next() {
                if names.isEmpty {
                    // Every other match, ahead of the walk, changes now.
                    for var other in try walk.results(in: ctx) where other.id != person.id {
                        other.name = "changed"
                        try ctx.save(other)
                    }
                }
                names.append(person.name)
            }
            return names
        }
        #expect(names.count == 40)
        #expect(names.dropFirst().allSatisfy { $0 == "changed" }, "\(names)")
    }

    @Test func aPrefixEndingInCarriageReturnDoesNotSplitALineBreak() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let notes = [Note(id: 1, text: "a\r\nb", tags: []), Note(id: 2, text: "a\rb", tags: [])]
        try await store.insert(contentsOf: notes)
        let prefix = "a\r"
        let expected = notes.filter { $0.text.starts(with: prefix) }.map(\.id)
        #expect(try await Note.include(#Predicate { $0.text.starts(with: prefix) }).results(in: store).map(\.id) == expected)
    }

    @Test func queriesInALongTransactionDoNotCollectCursors() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<20).map { Person(name: "P\($0)", age: $0) })
        let open = try await store.read { ctx in
            for age in 0..<500 { _ = try Person.include(#Predicate { $0.age == age }).results(in: ctx) }
            return (ctx.txn as? LMDBTransaction)?.openCursorCount ?? 0   // another engine keeps no cursors open
        }
        #expect(open == 0)
    }

    @Test func predicateConstantsReadDirectlyEqualWhatTheEncoderMakesOfThem() throws {
        var random = SystemRandomNumberGenerator()
        var constants: [Any] = [0, 1, -1, Int.min, Int.max, "", "a", "Zürich", "e\u{301}", "\u{0}x", true, false,
                                0.0, -0.0, 1.5, -Double.infinity, Double.infinity, Double.nan, Double.leastNonzeroMagnitude, Double.greatestFiniteMagnitude]
        for _ in 0..<200 {
            constants.append(Int.random(in: .min ... .max, using: &random))
            constants.append(Double(bitPattern: UInt64.random(in: 0 ... .max, using: &random)))
            constants.append(String((0..<Int.random(in: 0...8)).map { _ in Character(UnicodeScalar(UInt8.random(in: 32...126))) }))
        }
        for constant in constants {
            let encodable = try #require(constant as? any Encodable)
            let encoded = try DocumentValue(encoded: DocumentEncoder().encode(encodable))
            let direct = try #require(DocumentValue(constant: constant))
            // Compared by their keys, which tell NaNs and the zeros apart exactly as the store does.
            #expect(KeyEncoder.key(direct) == KeyEncoder.key(encoded), "\(constant)")
            #expect(String(describing: direct) == String(describing: encoded), "\(constant)")
        }
    }
}
