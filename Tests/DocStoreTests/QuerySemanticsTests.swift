import Foundation
import Testing
@testable import DocStore

extension Person {
    /// A computed property: not a stored field, so nothing can be sorted by it.
    fileprivate var querySemanticsNameLength: Int { name.count }
}

/// The documented meanings of the query words (see the doc comment on ``Query``), each on a small example whose
/// answer is worked out by hand below.
///
/// The ten people, with ids 1...10 (id order is the order of the numbers), inserted in a scrambled order:
///
/// | id | name | age | city   | email | tags          |
/// |----|------|-----|--------|-------|---------------|
/// | 1  | Ann  | 30  | Oslo   | ann@x | swift         |
/// | 2  | Bob  | 25  | Bergen | nil   |               |
/// | 3  | Cid  | 30  | Oslo   | cid@x | lmdb          |
/// | 4  | Dag  | 41  | Bergen | nil   | swift, lmdb   |
/// | 5  | Eva  | 25  | Oslo   | eva@x |               |
/// | 6  | Fay  | 19  | Tromsø | fay@x | swift         |
/// | 7  | Gro  | 30  | Bergen | nil   |               |
/// | 8  | Hal  | 52  | Oslo   | hal@x |               |
/// | 9  | Ida  | 19  | Oslo   | ida@x | lmdb          |
/// | 10 | Jon  | 41  | Tromsø | jon@x |               |
///
/// By age, ties by id: 6, 9 (19) · 2, 5 (25) · 1, 3, 7 (30) · 4, 10 (41) · 8 (52).
@Suite struct QuerySemanticsTests {
    static func id(_ n: Int) -> UUID {
        let hex = String(n, radix: 16, uppercase: true)
        return UUID(uuidString: "00000000-0000-0000-0000-" + String(repeating: "0", count: 12 - hex.count) + hex)!
    }

    static let people: [Person] = [
        Person(id: id(1), name: "Ann", age: 30, city: "Oslo", email: "ann@x", tags: ["swift"]),
        Person(id: id(2), name: "Bob", age: 25, city: "Bergen", email: nil, tags: []),
        Person(id: id(3), name: "Cid", age: 30, city: "Oslo", email: "cid@x", tags: ["lmdb"]),
        Person(id: id(4), name: "Dag", age: 41, city: "Bergen", email: nil, tags: ["swift", "lmdb"]),
        Person(id: id(5), name: "Eva", age: 25, city: "Oslo", email: "eva@x", tags: []),
        Person(id: id(6), name: "Fay", age: 19, city: "Tromsø", email: "fay@x", tags: ["swift"]),
        Person(id: id(7), name: "Gro", age: 30, city: "Bergen", email: nil, tags: []),
        Person(id: id(8), name: "Hal", age: 52, city: "Oslo", email: "hal@x", tags: []),
        Person(id: id(9), name: "Ida", age: 19, city: "Oslo", email: "ida@x", tags: ["lmdb"]),
        Person(id: id(10), name: "Jon", age: 41, city: "Tromsø", email: "jon@x", tags: []),
    ]

    /// The age order worked out by hand (see the table).
    static let byAge = [6, 9, 2, 5, 1, 3, 7, 4, 10, 8]

    /// A store with the ten people, inserted in the order 7, 2, 10, 4, 1, 9, 5, 3, 8, 6.
    static func tenPeople() async throws -> (DocStore, TemporaryDirectory) {
        let (store, dir) = try await makeStore()
        try await store.insert(contentsOf: [7, 2, 10, 4, 1, 9, 5, 3, 8, 6].map { people[$0 - 1] })
        return (store, dir)
    }

    /// The numbers of the people, by id.
    static func numbers(_ found: [Person]) -> [Int] {
        found.map { p in people.firstIndex { $0.id == p.id }.map { $0 + 1 } ?? -1 }
    }

    static func number(_ found: Person?) -> Int? { found.map { numbers([$0])[0] } }

    // MARK: first and last

    @Test func firstAndLastOfAnUnsortedQueryAreTheSmallestAndGreatestID() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        #expect(Self.numbers(try await Person.query().results(in: store)) == Array(1...10))
        #expect(Self.number(try await Person.query().first(in: store)) == 1)
        #expect(Self.number(try await Person.query().last(in: store)) == 10)   // not 6, the last inserted
        let bergen = Person.include(#Predicate { $0.city == "Bergen" })   // 2, 4, 7
        #expect(Self.number(try await bergen.first(in: store)) == 2)
        #expect(Self.number(try await bergen.last(in: store)) == 7)
        #expect(try await Person.include(#Predicate { $0.age > 100 }).first(in: store) == nil)
        #expect(try await Person.include(#Predicate { $0.age > 100 }).last(in: store) == nil)
    }

    @Test func firstAndLastOfASortedQueryFollowTheSort() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let q = Person.sortBy(\.age)
        #expect(Self.numbers(try await q.results(in: store)) == Self.byAge)
        #expect(Self.number(try await q.first(in: store)) == 6)
        #expect(Self.number(try await q.last(in: store)) == 8)
        // Ties: the first of the 30-year-olds is 1, the last 7.
        let thirty = Person.include(#Predicate { $0.age == 30 }).sortBy(\.age)
        #expect(Self.number(try await thirty.first(in: store)) == 1)
        #expect(Self.number(try await thirty.last(in: store)) == 7)
        // By name descending: Jon first, Ann last.
        let names = Person.sortBy(\.name, order: .reverse)
        #expect(Self.number(try await names.first(in: store)) == 10)
        #expect(Self.number(try await names.last(in: store)) == 1)
    }

    @Test func lastOfASliceIsTheLastOfTheSliceNotOfEverything() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let q = Person.sortBy(\.age)
        #expect(Self.number(try await q[0..<5].last(in: store)) == 1)    // the fifth: 6, 9, 2, 5, 1
        #expect(Self.number(try await q[0..<5].first(in: store)) == 6)
        #expect(Self.number(try await q[3..<6].first(in: store)) == 5)
        #expect(Self.number(try await q[3..<6].last(in: store)) == 3)
        #expect(Self.number(try await q[8..<50].last(in: store)) == 8)   // the last of fewer
        #expect(Self.number(try await Person.query()[0..<3].last(in: store)) == 3)
    }

    // MARK: Slices

    @Test func slicesPastTheEndHoldWhatThereIs() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let q = Person.sortBy(\.age)
        #expect(Self.numbers(try await q[8..<20].results(in: store)) == [10, 8])
        #expect(try await q[10..<20].results(in: store).isEmpty)
        #expect(try await q[20..<30].results(in: store).isEmpty)
        #expect(try await q[20..<30].first(in: store) == nil)
        #expect(try await q[20..<30].last(in: store) == nil)
        #expect(try await q[20..<30].count(in: store) == 0)
        #expect(Self.numbers(try await q[-3..<2].results(in: store)) == [6, 9])   // negative bounds count as 0
    }

    @Test func anEmptySliceHoldsNothing() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        // In index order (the walk streams), unsorted (id order), and sorted outside an index.
        for q in [Person.sortBy(\.age), Person.query(), Person.sortBy(\.name)] {
            #expect(try await q[4..<4].results(in: store).isEmpty)
            #expect(try await q[2..<8][6..<9].results(in: store).isEmpty)   // q[8..<8]
            #expect(try await q[4..<4].first(in: store) == nil)
            #expect(try await q[4..<4].last(in: store) == nil)
            #expect(try await q[4..<4].count(in: store) == 0)
            let streamed = try await store.read { try drained(q[4..<4].cursor(in: $0)) }
            #expect(streamed.isEmpty)
        }
        // Deleting an empty slice deletes nothing (each on a fresh store, so one failure does not hide another).
        for q in [Person.sortBy(\.age), Person.query(), Person.sortBy(\.name)] {
            let (fresh, freshDir) = try await Self.tenPeople()
            defer { _ = freshDir }
            #expect(try await q[4..<4].delete(in: fresh) == 0)
            #expect(try await Person.query().count(in: fresh) == 10)
        }
    }

    @Test func sliceOfASliceNarrowsIt() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let q = Person.sortBy(\.age)
        #expect(Self.numbers(try await q[2..<8].results(in: store)) == [2, 5, 1, 3, 7, 4])
        #expect(Self.numbers(try await q[2..<8][1..<3].results(in: store)) == [5, 1])        // q[3..<5]
        #expect(Self.numbers(try await q[2..<8][4..<10].results(in: store)) == [7, 4])       // cut at the slice's end
        #expect(Self.numbers(try await q[2..<8][1..<5][1..<2].results(in: store)) == [1])
        #expect(Self.numbers(try await q[7..<20][1..<2].results(in: store)) == [10])
        #expect(try await q[7..<20][5..<9].results(in: store).isEmpty)   // q has 10 results: q[12..<16] is empty
    }

    // MARK: reverse()

    @Test func reverseFlipsEveryOrderingIncludingTheIDTieBreak() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        // Ages descending, ties by id descending: exactly the forward order backwards.
        #expect(Self.numbers(try await Person.sortBy(\.age).reverse().results(in: store))
            == [8, 10, 4, 7, 3, 1, 5, 2, 9, 6])
        // A descending sort, not reversed, keeps ties in ascending id order.
        #expect(Self.numbers(try await Person.sortBy(\.age, order: .reverse).results(in: store))
            == [8, 4, 10, 1, 3, 7, 2, 5, 6, 9])
        // Unsorted: descending id order.
        #expect(Self.numbers(try await Person.query().reverse().results(in: store)) == Array((1...10).reversed()))
        // Two keys, one reversed: age up, name down within an age; reverse() flips both.
        let twoKeys = Person.sortBy(\.age).sortBy(\.name, order: .reverse)
        #expect(Self.numbers(try await twoKeys.results(in: store)) == [9, 6, 5, 2, 7, 3, 1, 10, 4, 8])
        #expect(Self.numbers(try await twoKeys.reverse().results(in: store)) == [8, 4, 10, 1, 3, 7, 2, 5, 6, 9])
        // A compound index's order (city, then age, then id), and its reverse.
        let cityAge = Person.sortBy(\.city).sortBy(\.age)
        #expect(Self.numbers(try await cityAge.results(in: store)) == [2, 7, 4, 9, 5, 1, 3, 8, 6, 10])
        #expect(Self.numbers(try await cityAge.reverse().results(in: store)) == [10, 6, 8, 3, 1, 5, 9, 4, 7, 2])
        // q.reverse().first is q.last, and reversing twice changes nothing.
        #expect(Self.number(try await Person.sortBy(\.age).reverse().first(in: store)) == 8)
        #expect(Self.number(try await Person.sortBy(\.age).reverse().last(in: store)) == 6)
        #expect(Self.numbers(try await Person.sortBy(\.age).reverse().reverse().results(in: store)) == Self.byAge)
        // Slicing a reversed query takes from the reversed order.
        #expect(Self.numbers(try await Person.sortBy(\.age).reverse()[0..<3].results(in: store)) == [8, 10, 4])
    }

    @Test func descendingSortOnAnIndexedFieldKeepsTiesInIDOrder() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        // Under 45, oldest first, ties by ascending id: 4, 10 (41) · 1, 3, 7 (30) · 2, 5 (25) · 6, 9 (19).
        let q = Person.include(#Predicate { $0.age < 45 }).sortBy(\.age, order: .reverse)
        #expect(Self.numbers(try await q.results(in: store)) == [4, 10, 1, 3, 7, 2, 5, 6, 9])
        #expect(Self.number(try await q.first(in: store)) == 4)
        #expect(Self.number(try await q.last(in: store)) == 9)
        #expect(Self.numbers(try await q.reverse().results(in: store)) == [9, 6, 5, 2, 7, 3, 1, 10, 4])
        // 30 or more: 8 (52) · 4, 10 (41) · 1, 3, 7 (30).
        let older = Person.include(#Predicate { $0.age >= 30 }).sortBy(\.age, order: .reverse)
        #expect(Self.numbers(try await older.results(in: store)) == [8, 4, 10, 1, 3, 7])
        #expect(Self.numbers(try await older.reverse().results(in: store)) == [7, 3, 1, 10, 4, 8])
    }

    @Test func reverseOnASlicedQueryReversesTheSlice() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let q = Person.sortBy(\.age)
        #expect(Self.numbers(try await q[0..<5].reverse().results(in: store)) == [1, 5, 2, 9, 6])
        #expect(Self.number(try await q[0..<5].reverse().first(in: store)) == 1)
        #expect(Self.number(try await q[0..<5].reverse().last(in: store)) == 6)
        #expect(Self.numbers(try await q[2..<8].reverse().results(in: store)) == [4, 7, 3, 1, 5, 2])
        #expect(Self.numbers(try await q[2..<8].reverse()[1..<3].results(in: store)) == [7, 3])
        #expect(Self.numbers(try await q[2..<8].reverse().reverse().results(in: store)) == [2, 5, 1, 3, 7, 4])
        #expect(try await q[2..<8].reverse().count(in: store) == 6)
        #expect(Self.numbers(try await Person.query()[0..<3].reverse().results(in: store)) == [3, 2, 1])
    }

    // MARK: any and count

    @Test func anyReturnsOneOfTheResults() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let tromso = try await Person.include(#Predicate { $0.city == "Tromsø" }).any(in: store)
        #expect([6, 10].contains(Self.number(tromso) ?? -1))
        #expect(try await Person.include(#Predicate { $0.age > 100 }).any(in: store) == nil)
        #expect(try await Person.query().any(in: store) != nil)
        let sortedTromso = try await Person.include(#Predicate { $0.city == "Tromsø" }).sortBy(\.name).any(in: store)
        #expect([6, 10].contains(Self.number(sortedTromso) ?? -1))
    }

    @Test func anyOfASlicedSortedQueryIsInTheSlice() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        // The youngest person's slice holds only 6 (Fay); the oldest's only 8 (Hal).
        #expect(Self.number(try await Person.sortBy(\.age)[0..<1].any(in: store)) == 6)
        #expect(Self.number(try await Person.sortBy(\.age)[9..<10].any(in: store)) == 8)
        let twoYoungest = try await Person.sortBy(\.age)[0..<2].any(in: store)
        #expect([6, 9].contains(Self.number(twoYoungest) ?? -1))
        #expect(Self.number(try await Person.sortBy(\.name, order: .reverse)[0..<1].any(in: store)) == 10)
    }

    @Test func countOfASliceCountsWithinTheSlice() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        #expect(try await Person.query().count(in: store) == 10)
        #expect(try await Person.sortBy(\.age)[3..<7].count(in: store) == 4)
        #expect(try await Person.sortBy(\.age)[8..<20].count(in: store) == 2)
        let thirtyPlus = Person.include(#Predicate { $0.age >= 30 })     // 1, 3, 4, 7, 8, 10
        #expect(try await thirtyPlus.count(in: store) == 6)
        #expect(try await thirtyPlus[1..<10].count(in: store) == 5)
        #expect(try await thirtyPlus[2..<4].count(in: store) == 2)
        // A condition evaluated on the decoded document: all ten names have three letters.
        #expect(try await Person.include(#Predicate { $0.name.count == 3 })[4..<8].count(in: store) == 4)
        #expect(try await Person.include(#Predicate { $0.name.count == 3 })[8..<12].count(in: store) == 2)
    }

    // MARK: Starters

    @Test func startersOnTheTypeMatchQueryRefinements() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        #expect(Self.numbers(try await Person.query().results(in: store)) == Array(1...10))
        #expect(Self.numbers(try await Person.include(#Predicate { $0.age >= 25 })
            .exclude(#Predicate { $0.city == "Oslo" }).results(in: store)) == [2, 4, 7, 10])
        #expect(Self.numbers(try await Person.exclude(#Predicate { $0.city == "Oslo" }).results(in: store))
            == [2, 4, 6, 7, 10])
        #expect(Self.numbers(try await Person.sortBy(\.age).results(in: store)) == Self.byAge)
        #expect(Self.numbers(try await Person.sortBy(\.email).results(in: store))
            == Self.numbers(try await Query<Person>().sortBy(\.email).results(in: store)))
        // Conditions added in any order all hold.
        let a = Person.exclude(#Predicate { $0.city == "Oslo" }).include(#Predicate { $0.age >= 25 })
        let b = Query<Person>().include(#Predicate { $0.age >= 25 }).exclude(#Predicate { $0.city == "Oslo" })
        #expect(Self.numbers(try await a.results(in: store)) == Self.numbers(try await b.results(in: store)))
        #expect(Self.numbers(try await Person.include(#Predicate { $0.tags.contains("swift") })
            .include(#Predicate { $0.tags.contains("lmdb") }).results(in: store)) == [4])
    }

    // MARK: delete

    @Test func deleteReturnsTheNumberDeletedAndRemovesIndexEntries() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let thirty = Person.include(#Predicate { $0.age == 30 })    // 1, 3, 7
        #expect(try await thirty.delete(in: store) == 3)
        #expect(try await thirty.delete(in: store) == 0)
        #expect(Self.numbers(try await Person.query().results(in: store)) == [2, 4, 5, 6, 8, 9, 10])
        #expect(try await store.verify().isClean)
        let gone = try Set([1, 3, 7].map { try idKey(Self.id($0)) })
        for index in ["age", "city_age", "email", "tags"] {
            let entries = try await store.entries(of: Person.self, index: index)
            #expect(!entries.isEmpty)
            #expect(entries.allSatisfy { !gone.contains($0.id) }, "index \(index) still names a deleted document")
        }
        // Deleted documents are found by no index.
        #expect(try await Person.include(#Predicate { $0.email == "ann@x" }).count(in: store) == 0)
        #expect(try await Person.include(#Predicate { $0.tags.contains("swift") }).count(in: store) == 2)   // 4, 6
    }

    @Test func deleteOfASliceDeletesExactlyThatSlice() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        #expect(try await Person.sortBy(\.age)[2..<5].delete(in: store) == 3)        // 2, 5, 1
        #expect(Self.numbers(try await Person.query().results(in: store)) == [3, 4, 6, 7, 8, 9, 10])
        #expect(try await store.verify().isClean)
        // A reversed slice is the same set: the two youngest left are 6 and 9.
        #expect(try await Person.sortBy(\.age)[0..<2].reverse().delete(in: store) == 2)
        #expect(Self.numbers(try await Person.query().results(in: store)) == [3, 4, 7, 8, 10])
        // An unsorted slice, in id order: 4 and 7.
        #expect(try await Person.query()[1..<3].delete(in: store) == 2)
        #expect(Self.numbers(try await Person.query().results(in: store)) == [3, 8, 10])
        // A slice past the end deletes nothing.
        #expect(try await Person.query()[5..<9].delete(in: store) == 0)
        #expect(try await store.verify().isClean)
    }

    // MARK: cursor

    @Test func aCursorDecodesOnlyWhatIsIterated() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<1_000).map { i in
            Person(id: Self.id(1_000 + i), name: "Many \(i)", age: 60 + i % 30, city: "Bodø")
        })

        let (unsorted, unsortedStats, unsortedError) = try await store.read { ctx in
            let fetched = try Person.query().cursor(in: ctx)
            var taken: [Person] = []
            while let person = try fetched.next() {
                taken.append(person)
                if taken.count == 3 { break }
            }
            return (taken, fetched.statistics, true)
        }
        #expect(Self.numbers(unsorted) == [1, 2, 3])
        #expect(unsortedStats.documentsDecoded == 3)
        #expect(unsortedStats.returned == 3)
        #expect(unsortedStats.entriesScanned < 10)
        #expect(unsortedError)

        // In an index's order, also streamed.
        let (byAge, byAgeStats) = try await store.read { ctx in
            let fetched = try Person.sortBy(\.age).cursor(in: ctx)
            let taken = [try fetched.next(), try fetched.next(), try fetched.next()].compactMap { $0 }
            return (taken, fetched.statistics)
        }
        #expect(Self.numbers(byAge) == [6, 9, 2])
        #expect(byAgeStats.documentsDecoded == 3)

        // Sorted outside an index: only the taken ones are decoded too.
        let (byName, byNameStats) = try await store.read { ctx in
            let fetched = try Person.include(#Predicate { $0.age < 60 }).sortBy(\.name).cursor(in: ctx)
            let taken = [try fetched.next(), try fetched.next(), try fetched.next()].compactMap { $0 }
            return (taken, fetched.statistics)
        }
        #expect(Self.numbers(byName) == [1, 2, 3])   // Ann, Bob, Cid
        #expect(byNameStats.documentsDecoded == 3)

        // Iterated to the end, they are the query's results; a reversed slice too.
        let (all, slice, errorFree) = try await store.read { ctx in
            let all = try drained(try Person.include(#Predicate { $0.age < 60 }).cursor(in: ctx))
            let slice = try drained(try Person.sortBy(\.age)[2..<8].reverse().cursor(in: ctx))
            return (all, slice, true)
        }
        #expect(Self.numbers(all) == Array(1...10))
        #expect(Self.numbers(slice) == [4, 7, 3, 1, 5, 2])
        #expect(errorFree)
    }

    // MARK: findOrCreate

    @Test func findOrCreateFindsAnExistingDocumentOrCreatesOne() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        // Found: Ann exists; nothing is created.
        let ann = try await Person.include(#Predicate { $0.name == "Ann" }).findOrCreate(in: store) {
            Person(id: Self.id(99), name: "Ann", age: 99)
        }
        #expect(ann.id == Self.id(1))
        #expect(ann.age == 30)
        #expect(try await Person.query().count(in: store) == 10)

        // Found, sorted: the 30-year-olds by name descending are Gro, Cid, Ann.
        let gro = try await Person.include(#Predicate { $0.age == 30 }).sortBy(\.name, order: .reverse)
            .findOrCreate(in: store) { Person(id: Self.id(98), name: "New", age: 30) }
        #expect(gro.id == Self.id(7))

        // Created, then found.
        let kim = Person.include(#Predicate { $0.name == "Kim" })
        let created = try await kim.findOrCreate(in: store) { Person(id: Self.id(11), name: "Kim", age: 33) }
        #expect(created.id == Self.id(11))
        #expect(try await Person.query().count(in: store) == 11)
        let found = try await kim.findOrCreate(in: store) { Person(id: Self.id(12), name: "Kim", age: 34) }
        #expect(found.id == Self.id(11))
        #expect(found.age == 33)
        #expect(try await Person.query().count(in: store) == 11)
        #expect(try await store.get(Person.self, id: Self.id(12)) == nil)

        // Inside a transaction: the closure runs only when nothing is found.
        let (calls, lee, leeAgain) = try await store.write { ctx in
            var calls = 0
            let leeQuery = Person.include(#Predicate { $0.name == "Lee" })
            let first = try leeQuery.findOrCreate(in: ctx) { calls += 1; return Person(id: Self.id(13), name: "Lee", age: 40) }
            let second = try leeQuery.findOrCreate(in: ctx) { calls += 1; return Person(id: Self.id(14), name: "Lee", age: 41) }
            return (calls, first, second)
        }
        #expect(calls == 1)
        #expect(lee.id == Self.id(13))
        #expect(leeAgain.id == Self.id(13))
        #expect(try await Person.query().count(in: store) == 12)
        #expect(try await store.verify().isClean)
    }

    // MARK: In the store, in a context

    @Test func resultsAreTheSameInTheStoreAndInAContext() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        let queries: [Query<Person>] = [
            Person.query(),
            Person.sortBy(\.age),
            Person.sortBy(\.age).reverse()[1..<4],
            Person.include(#Predicate { $0.city == "Oslo" }).sortBy(\.name, order: .reverse),
            Person.include(#Predicate { $0.tags.contains("swift") || $0.age == 25 }),
            Person.exclude(#Predicate { $0.name.count == 3 }),
            Person.sortBy(\.email)[0..<4].reverse(),
        ]
        for q in queries {
            let inStore = try await q.results(in: store)
            let inRead = try await store.read { try q.results(in: $0) }
            let inWrite = try await store.write { try q.results(in: $0) }
            #expect(inStore == inRead)
            #expect(inStore == inWrite)
            #expect(try await q.first(in: store) == store.read { try q.first(in: $0) })
            #expect(try await q.last(in: store) == store.read { try q.last(in: $0) })
            #expect(try await q.count(in: store) == store.read { try q.count(in: $0) })
            #expect(try await q.count(in: store) == inStore.count)
        }
    }

    // MARK: Sorting by an optional field, or by no field

    @Test func sortingByAnOptionalFieldPutsNilFirstAndLastAfterReverse() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        // nil: 2, 4, 7; then ann, cid, eva, fay, hal, ida, jon.
        #expect(Self.numbers(try await Person.sortBy(\.email).results(in: store)) == [2, 4, 7, 1, 3, 5, 6, 8, 9, 10])
        #expect(Self.numbers(try await Person.sortBy(\.email).reverse().results(in: store))
            == [10, 9, 8, 6, 5, 3, 1, 7, 4, 2])
        #expect(Self.numbers(try await Person.sortBy(\.email, order: .reverse).results(in: store))
            == [10, 9, 8, 6, 5, 3, 1, 2, 4, 7])
        #expect(Self.numbers(try await Person.sortBy(\.email)[0..<4].results(in: store)) == [2, 4, 7, 1])
        #expect(Self.number(try await Person.sortBy(\.email).first(in: store)) == 2)
        #expect(Self.number(try await Person.sortBy(\.email).last(in: store)) == 10)
        #expect(Self.number(try await Person.sortBy(\.email).reverse().last(in: store)) == 2)
    }

    @Test func sortingByAComputedPropertyIsAnInvalidSchemaError() async throws {
        let (store, dir) = try await Self.tenPeople()
        defer { _ = dir }
        await expectError(.invalidSchema, mentions: ["cannot sort", "computed property"]) {
            _ = try await Person.sortBy(\.querySemanticsNameLength).results(in: store)
        }
        await expectError(.invalidSchema, mentions: ["cannot sort"]) {
            _ = try await Person.sortBy(\.name.count)[0..<3].first(in: store)
        }
        await expectError(.invalidSchema, mentions: ["cannot sort"]) {
            _ = try await Person.sortBy(\.age).sortBy(\.querySemanticsNameLength).explain(in: store)
        }
        await expectError(.invalidSchema, mentions: ["cannot sort"]) {
            _ = try await store.read { try Person.sortBy(\.querySemanticsNameLength).cursor(in: $0).statistics }
        }
        // An aggregate of one is refused alike, whether its request had a problem already or not.
        await expectError(.invalidSchema, mentions: ["cannot take the max of", "computed property"]) {
            _ = try await Person.query().aggregate(.max(\.querySemanticsNameLength)).value(in: store)
        }
        await expectError(.invalidSchema, mentions: ["cannot sort"]) {
            _ = try await Person.sortBy(\.querySemanticsNameLength).aggregate(.min(\.querySemanticsNameLength))
                .value(in: store)
        }
        // Nothing was changed by the failed queries.
        #expect(try await Person.query().count(in: store) == 10)
    }
}
