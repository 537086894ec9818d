import Foundation
import Testing
@testable import DocStore

/// A reading with a floating-point value, for conditions on `Double` (NaN).
struct QueryPlanReading: Document, Equatable {
    var id: Int
    var value: Double
    static let collection = "query_plan_readings"
    static let indexes: [IndexSpec<QueryPlanReading>] = [.index("value", \.value)]
}

/// Which plan a query gets, read through `explain`, on stores of a few thousand documents; every plan's results
/// are also checked against the same filter and order computed in Swift over the inserted documents.
@Suite struct QueryPlanTests {
    static let documentCount = 3_000
    static let names = ["Al", "Bo", "Eve", "Anna", "Bjørn", "Kari", "Ola", "Ingrid"]
    static let cities = ["Oslo", "Bergen", "Tromsø", "Bergenhus"]

    /// A UUID from two random words, so that id order is unrelated to every other field.
    static func randomUUID(_ rng: inout SeededGenerator) -> UUID {
        func hex(_ value: UInt64, _ digits: Int) -> String {
            let s = String(value, radix: 16, uppercase: true)
            return String(repeating: "0", count: max(0, digits - s.count)) + s
        }
        let a = rng.next(), b = rng.next()
        return UUID(uuidString: "\(hex(a >> 32, 8))-\(hex((a >> 16) & 0xFFFF, 4))-\(hex(a & 0xFFFF, 4))-"
            + "\(hex(b >> 48, 4))-\(hex(b & 0xFFFF_FFFF_FFFF, 12))")!
    }

    static func people() -> [Person] {
        var rng = SeededGenerator(seed: 0x5EED_0F91A2)
        return (0..<documentCount).map { i in
            var tags = i % 7 == 0 ? ["swift", "lmdb"] : ["lmdb"]
            if i % 13 == 0 { tags.append("rare") }
            if i % 17 == 0 { tags.append("sw") }
            let email: String? = i % 3 == 0 ? nil : (i % 2 == 0 ? "a\(i)@x" : "p\(i)@x")
            return Person(id: randomUUID(&rng), name: names[i % names.count], age: Int(rng.next() % 70),
                          city: cities[i % cities.count], email: email, tags: tags)
        }
    }

    /// A new store holding ``people()``, inserted in one transaction.
    static func populatedStore() async throws -> (DocStore, TemporaryDirectory, [Person]) {
        let (store, dir) = try await makeStore()
        let people = people()
        try await store.insert(contentsOf: people)
        return (store, dir, people)
    }

    /// Documents in id order (the order of an unsorted query).
    static func byID(_ people: [Person]) -> [Person] { people.sorted { $0.id.uuidString < $1.id.uuidString } }

    /// Sorted by age, ties by id; both flipped when `descending`.
    static func byAge(_ people: [Person], descending: Bool = false) -> [Person] {
        people.sorted { a, b in
            if a.age != b.age { return descending ? a.age > b.age : a.age < b.age }
            return descending ? a.id.uuidString > b.id.uuidString : a.id.uuidString < b.id.uuidString
        }
    }

    /// What `count` takes, read from the counting executor itself.
    static func countStatistics(_ query: Query<Person>, in store: DocStore) async throws -> (Int, QueryStatistics) {
        try await store.read { ctx in
            guard let executor = try query.counting.executor(in: ctx) else { return (0, QueryStatistics()) }
            let count = try executor.count()
            return (count, executor.statistics.value)
        }
    }

    // MARK: The ids

    /// A condition on the id is planned on the documents' own keys: a look-up reads one document, a list of ids one
    /// look-up each, a range of ids only the documents in it, all in id order with no sort.
    /// A look-up by the value of a unique index of one field reads its one entry and its document, whole or its
    /// first, and answers as the people in memory do, and as the planned request does; inside a write, it sees the
    /// write's own changes.
    @Test func lookUpsByAUniqueValueAnswerAsThePeopleInMemory() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        var rng = SeededGenerator(seed: 0xE3A1)
        let emails = people.compactMap(\.email)
        var asked = (0..<60).map { _ in emails[Int(rng.next() % UInt64(emails.count))] }
        // Missing ones, and neighbours of present ones in the index's order.
        asked += ["a4@x", "a4@", "a4@xx", "p5@x", "", "zz@x", "A4@x"]
        for email in asked {
            let expected = people.filter { $0.email == email }.map(\.id)
            let query = Person.include(#Predicate { $0.email == email })
            #expect(try await query.first(in: store)?.id == expected.first, "first, \(email)")
            #expect(try await query.results(in: store).map(\.id) == expected, "results, \(email)")
            #expect(try await query[1..<2].results(in: store).isEmpty)
            // The same request through the planner: a sort makes it one.
            #expect(try await query.sortBy(\.age).results(in: store).map(\.id) == expected)
        }
        // Inside a write: a changed value is found by its new value only, a deleted document no more.
        let (changed, deleted) = (people.first { $0.email == "a2@x" }!, people.first { $0.email == "p7@x" }!)
        try await store.write { ctx in
            var moved = changed
            moved.email = "moved@x"
            try ctx.save(moved)
            _ = try ctx.delete(Person.self, id: deleted.id)
            #expect(try Person.include(#Predicate { $0.email == "a2@x" }).first(in: ctx) == nil)
            #expect(try Person.include(#Predicate { $0.email == "moved@x" }).first(in: ctx)?.id == changed.id)
            #expect(try Person.include(#Predicate { $0.email == "p7@x" }).results(in: ctx).isEmpty)
        }
        #expect(try await Person.include(#Predicate { $0.email == "moved@x" }).findOrCreate(in: store) {
            Person(name: "x", age: 1, email: "moved@x")
        }.id == changed.id)
    }

    @Test func conditionsOnTheIDAreKeyLookUpsAndRangesInIDOrder() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let sorted = Self.byID(people)
        let target = people[1234].id

        let one = Person.include(#Predicate { $0.id == target })
        let explained = try await one.explain(in: store)
        #expect(explained.readsByID)
        #expect(explained.index == nil)
        #expect(explained.statistics.entriesScanned == 1)
        #expect(explained.statistics.documentsRead == 1)
        #expect(explained.description.contains("access:   the documents by id, no index: id == "))
        #expect(try await one.results(in: store).map(\.id) == [target])
        #expect(try await one.first(in: store)?.id == target)
        // Its slices, its last, and an id that is not there, read by the same look-up.
        #expect(try await one[1..<2].first(in: store)?.id == nil)
        #expect(try await one[0..<0].results(in: store).isEmpty)
        #expect(try await one[0..<3][0..<1].first(in: store)?.id == target)
        #expect(try await one.last(in: store)?.id == target)
        let absent = UUID()
        #expect(try await Person.include(#Predicate { $0.id == absent }).first(in: store)?.id == nil)
        #expect(try await Person.include(#Predicate { $0.id == absent }).results(in: store).isEmpty)

        // A list, given out of order and with an id that is not there: one look-up each, the results in id order
        // (descending after a reverse).
        let missing = UUID()
        let listed = [people[7].id, missing, people[3].id, people[2000].id]
        let inList = Person.include(#Predicate { listed.contains($0.id) })
        let listPlan = try await inList.explain(in: store)
        #expect(listPlan.readsByID)
        #expect(listPlan.statistics.documentsRead == 3)
        #expect(!listPlan.usesTopK)
        let wanted = sorted.filter { listed.contains($0.id) }.map(\.id)
        #expect(try await inList.results(in: store).map(\.id) == wanted)
        #expect(try await inList.reverse().results(in: store).map(\.id) == wanted.reversed())
        #expect(try await inList.count(in: store) == 3)

        // A range with a limit stops after the limit; sorted by the id itself, the walk gives the order.
        let (low, high) = (sorted[100].id, sorted[900].id)
        let range = Person.include(#Predicate { $0.id > low && $0.id <= high })
        let inRange = sorted.filter { $0.id.uuidString > low.uuidString && $0.id.uuidString <= high.uuidString }
        #expect(inRange.count == 800)
        #expect(try await range.results(in: store).map(\.id) == inRange.map(\.id))
        let page = try await range.sortBy(\.id, order: .reverse)[0..<5].explain(in: store)
        #expect(page.readsByID)
        #expect(!page.usesTopK)
        #expect(page.statistics.documentsRead == 5)
        #expect(try await range.sortBy(\.id, order: .reverse)[0..<5].results(in: store).map(\.id)
            == inRange.reversed().prefix(5).map(\.id))
        // Counted in the keys, no document read.
        let (count, counting) = try await Self.countStatistics(range, in: store)
        #expect(count == 800)
        #expect(counting.documentsRead == 0)

        // Beside an index: the narrower access wins, and the rest is checked on each document.
        let both = Person.include(#Predicate { $0.id == target && $0.age >= 0 })
        #expect(try await both.explain(in: store).readsByID)
        let either = Person.include(#Predicate { $0.id == target || $0.email == "a4@x" })
        let union = try await either.explain(in: store)
        #expect(union.statistics.documentsRead == 2)
        #expect(Set(try await either.results(in: store).map(\.id)) == [target, people[4].id])
    }

    // MARK: Index scans

    /// A query's description names its constants as its language writes them: a UUID as its text, a date as
    /// `date("...")`, an unsigned integer as digits.
    @Test func aQueryDescriptionWritesConstantsAsTheLanguageDoes() {
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        let q = Query<DocumentValue>("c").include(.oneOf("ref", [.uuid(id), .uint(UInt64.max)]))
            .include(.compare("at", .less, .date(Date(timeIntervalSince1970: 0))))
        #expect(q.description == #"c.include(["E621E1F8-C36C-495A-93FC-0C247A3E6E5F", 18446744073709551615].contains(ref))"#
            + #".include(at < date("1970-01-01T00:00:00.000Z"))"#)
    }

    @Test func indexedEqualityUsesItsIndexAndReadsOnlyTheMatchingEntries() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let query = Person.include(#Predicate { $0.age == 30 })
        let expected = Self.byID(people.filter { $0.age == 30 })
        #expect(expected.count > 10)

        let explanation = try await query.explain(in: store)
        #expect(explanation.index == "age")
        #expect(!explanation.decodesForFilter)
        #expect(explanation.statistics.entriesScanned == expected.count)
        #expect(explanation.statistics.documentsRead == expected.count)
        #expect(explanation.statistics.returned == expected.count)
        #expect(try await query.results(in: store).map(\.id) == expected.map(\.id))

        // A unique index: one entry, one document.
        let email = Person.include(#Predicate { $0.email == "a4@x" })
        let unique = try await email.explain(in: store)
        #expect(unique.index == "email")
        #expect(unique.statistics.entriesScanned == 1)
        #expect(unique.statistics.returned == 1)
        #expect(try await email.results(in: store).map(\.id) == [people[4].id])
    }

    @Test func sortByAnIndexedFieldWithALimitReadsOnlyLimitEntries() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }

        let ascending = try await Person.sortBy(\.age)[0..<10].explain(in: store)
        #expect(ascending.index == "age")
        #expect(ascending.orderFromIndex)
        #expect(!ascending.usesTopK)
        #expect(ascending.statistics.entriesScanned == 10)
        #expect(ascending.statistics.documentsDecoded == 10)
        #expect(try await Person.sortBy(\.age)[0..<10].results(in: store).map(\.id)
            == Self.byAge(people).prefix(10).map(\.id))

        // reverse() flips the walk: the oldest first, ties in descending id order.
        let reversed = Person.sortBy(\.age).reverse()[0..<10]
        let descending = try await reversed.explain(in: store)
        #expect(descending.index == "age")
        #expect(descending.orderFromIndex)
        #expect(!descending.usesTopK)
        #expect(descending.statistics.entriesScanned == 10)
        #expect(try await reversed.results(in: store).map(\.id)
            == Self.byAge(people, descending: true).prefix(10).map(\.id))

        // An offset is walked over too: [10..<20] reads 20 entries and returns 10.
        let page = Person.sortBy(\.age)[10..<20]
        let paged = try await page.explain(in: store)
        #expect(paged.orderFromIndex)
        #expect(paged.statistics.entriesScanned == 20)
        #expect(paged.statistics.returned == 10)
        #expect(try await page.results(in: store).map(\.id) == Array(Self.byAge(people)[10..<20]).map(\.id))
    }

    @Test func descendingSortOnAnIndexedFieldKeepsTiesInAscendingIDOrderAndMissesNoEntry() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        // Keys walked from the last to the first, each key's documents from the first id to the last.
        let descendingAgeAscendingID = people.sorted { a, b in
            a.age != b.age ? a.age > b.age : a.id.uuidString < b.id.uuidString
        }
        let oldest = Person.sortBy(\.age, order: .reverse)[0..<10]
        let oldestPlan = try await oldest.explain(in: store)
        #expect(oldestPlan.index == "age")
        #expect(oldestPlan.orderFromIndex)
        #expect(oldestPlan.statistics.entriesScanned == 10)
        #expect(try await oldest.results(in: store).map(\.id) == descendingAgeAscendingID.prefix(10).map(\.id))
        #expect(try await Person.sortBy(\.age, order: .reverse).results(in: store).map(\.id)
            == descendingAgeAscendingID.map(\.id))

        // With a bound on the key.
        let under30 = Person.include(#Predicate { $0.age < 30 }).sortBy(\.age, order: .reverse)
        #expect(try await under30.explain(in: store).orderFromIndex)
        #expect(try await under30.results(in: store).map(\.id)
            == descendingAgeAscendingID.filter { $0.age < 30 }.map(\.id))

        // Its reverse: keys ascending, each key's documents from the last id to the first.
        let flipped = Person.include(#Predicate { $0.age >= 30 }).sortBy(\.age, order: .reverse).reverse()
        #expect(try await flipped.explain(in: store).orderFromIndex)
        #expect(try await flipped.results(in: store).map(\.id)
            == descendingAgeAscendingID.filter { $0.age >= 30 }.reversed().map(\.id))
    }

    @Test func equalityOnTheFirstFieldOfACompoundIndexAndSortOnTheSecondWithALimitWalksOnlyTheLimit() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let bergen = people.filter { $0.city == "Bergen" }

        // Equality + sort + limit: the walk stops after the limit.
        let youngest = Person.include(#Predicate { $0.city == "Bergen" }).sortBy(\.age)[0..<10]
        let first = try await youngest.explain(in: store)
        #expect(first.index == "city_age")
        #expect(first.orderFromIndex)
        #expect(!first.usesTopK)
        #expect(first.statistics.entriesScanned == 10)
        #expect(try await youngest.results(in: store).map(\.id) == Self.byAge(bergen).prefix(10).map(\.id))
        #expect(try await youngest.results(in: store).allSatisfy { $0.city == "Bergen" })   // not "Bergenhus"

        // Reversed: the oldest in Bergen, still ten entries.
        let oldest = Person.include(#Predicate { $0.city == "Bergen" }).sortBy(\.age).reverse()[0..<10]
        let last = try await oldest.explain(in: store)
        #expect(last.index == "city_age")
        #expect(last.orderFromIndex)
        #expect(last.statistics.entriesScanned == 10)
        #expect(try await oldest.results(in: store).map(\.id)
            == Self.byAge(bergen, descending: true).prefix(10).map(\.id))

        // Equality + range + limit: five entries of the range.
        let range = Person.include(#Predicate { $0.city == "Bergen" && $0.age >= 20 && $0.age < 30 }).sortBy(\.age)[0..<5]
        let firstFive = try await range.explain(in: store)
        #expect(firstFive.index == "city_age")
        #expect(firstFive.orderFromIndex)
        #expect(firstFive.statistics.entriesScanned == 5)
        #expect(try await range.results(in: store).map(\.id)
            == Self.byAge(bergen.filter { $0.age >= 20 && $0.age < 30 }).prefix(5).map(\.id))
    }

    @Test func equalityOnTheFirstFieldOfACompoundIndexAndARangeOnTheSecondWalksExactlyTheRangeInOrder() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let bergen = people.filter { $0.city == "Bergen" }

        // Equality + range on the second field: exactly the entries in the range, in order, nothing left to check.
        let range = Person.include(#Predicate { $0.city == "Bergen" && $0.age >= 20 && $0.age < 30 }).sortBy(\.age)
        let expected = Self.byAge(bergen.filter { $0.age >= 20 && $0.age < 30 })
        #expect(expected.count > 10)
        let ranged = try await range.explain(in: store)
        #expect(ranged.index == "city_age")
        #expect(ranged.orderFromIndex)
        #expect(!ranged.decodesForFilter)
        #expect(ranged.statistics.entriesScanned == expected.count)
        #expect(ranged.lines.contains { $0.contains("residual: none") })
        #expect(try await range.results(in: store).map(\.id) == expected.map(\.id))

        // The same, reversed.
        let reversed = try await range.reverse().explain(in: store)
        #expect(reversed.index == "city_age")
        #expect(reversed.orderFromIndex)
        #expect(reversed.statistics.entriesScanned == expected.count)
        #expect(try await range.reverse().results(in: store).map(\.id) == expected.reversed().map(\.id))

        // Equality on both fields, in an unsorted query, is a point look-up of the compound key.
        let point = Person.include(#Predicate { $0.age == 25 && $0.city == "Bergen" })
        let pointExpected = Self.byID(bergen.filter { $0.age == 25 })
        let pointPlan = try await point.explain(in: store)
        #expect(pointPlan.index == "city_age")
        #expect(pointPlan.statistics.entriesScanned == pointExpected.count)
        #expect(try await point.results(in: store).map(\.id) == pointExpected.map(\.id))
    }

    @Test func unindexedSortWithALimitUsesTopKAndDecodesOnlyTheLimit() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let byName = people.sorted { a, b in a.name != b.name ? a.name < b.name : a.id.uuidString < b.id.uuidString }

        let query = Person.sortBy(\.name)[0..<10]
        let explanation = try await query.explain(in: store)
        #expect(explanation.usesTopK)
        #expect(!explanation.orderFromIndex)
        #expect(explanation.index == nil)
        #expect(explanation.statistics.entriesScanned == Self.documentCount)
        #expect(explanation.statistics.documentsDecoded == 10)
        #expect(explanation.statistics.returned == 10)
        #expect(try await query.results(in: store).map(\.id) == byName.prefix(10).map(\.id))

        // With an offset, the heap keeps offset + limit sort keys but only the slice is decoded.
        let page = Person.sortBy(\.name)[25..<35]
        let paged = try await page.explain(in: store)
        #expect(paged.usesTopK)
        #expect(paged.statistics.documentsDecoded == 10)
        #expect(try await page.results(in: store).map(\.id) == Array(byName[25..<35]).map(\.id))
    }

    @Test func arrayContainsUsesTheMultiIndex() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let rare = Person.include(#Predicate { $0.tags.contains("rare") })
        let expected = Self.byID(people.filter { $0.tags.contains("rare") })
        let explanation = try await rare.explain(in: store)
        #expect(explanation.index == "tags")
        #expect(explanation.statistics.entriesScanned == expected.count)
        #expect(try await rare.results(in: store).map(\.id) == expected.map(\.id))

        // "sw" is a prefix of "swift" but a different element.
        let sw = Person.include(#Predicate { $0.tags.contains("sw") })
        let expectedSW = Self.byID(people.filter { $0.tags.contains("sw") })
        let swPlan = try await sw.explain(in: store)
        #expect(swPlan.index == "tags")
        #expect(swPlan.statistics.entriesScanned == expectedSW.count)
        #expect(try await sw.results(in: store).map(\.id) == expectedSW.map(\.id))
    }

    @Test func valuesContainFieldUsesOneRangePerValue() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let query = Person.include(#Predicate { [20, 30, 40].contains($0.age) })
        let expected = Self.byID(people.filter { [20, 30, 40].contains($0.age) })
        let explanation = try await query.explain(in: store)
        #expect(explanation.index == "age")
        #expect(explanation.lines.contains { $0.contains("index age") && $0.contains("3 key ranges") })
        #expect(explanation.statistics.entriesScanned == expected.count)
        #expect(try await query.results(in: store).map(\.id) == expected.map(\.id))
        let ranges = try await store.read { ctx -> Int in
            guard case .index(let scan) = try query.plan(in: ctx).access else { return -1 }
            return scan.ranges.count
        }
        #expect(ranges == 3)

        // Several values on the first field of a compound index and one on the second: a point per combination.
        let compound = Person.include(#Predicate { ["Oslo", "Bergen"].contains($0.city) && $0.age == 30 })
        let expectedCompound = Self.byID(people.filter { ["Oslo", "Bergen"].contains($0.city) && $0.age == 30 })
        let compoundPlan = try await compound.explain(in: store)
        #expect(compoundPlan.index == "city_age")
        #expect(compoundPlan.lines.contains { $0.contains("2 key ranges") })
        #expect(compoundPlan.statistics.entriesScanned == expectedCompound.count)
        #expect(try await compound.results(in: store).map(\.id) == expectedCompound.map(\.id))
    }

    @Test func orOfTwoIndexedConditionsUsesAUnionAndReturnsEachDocumentOnce() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let query = Person.include(#Predicate { $0.age == 21 || $0.tags.contains("rare") })
        let byAge = people.filter { $0.age == 21 }
        let rare = people.filter { $0.tags.contains("rare") }
        let expected = Self.byID(people.filter { $0.age == 21 || $0.tags.contains("rare") })
        #expect(expected.count < byAge.count + rare.count, "the data should have documents matching both branches")

        let explanation = try await query.explain(in: store)
        #expect(explanation.lines.contains { $0.contains("union of 2 index scans") })
        #expect(explanation.index == "age")
        #expect(explanation.statistics.entriesScanned == byAge.count + rare.count)
        #expect(explanation.statistics.documentsRead == expected.count)
        #expect(explanation.statistics.returned == expected.count)
        let results = try await query.results(in: store)
        #expect(Set(results.map(\.id)).count == results.count)
        #expect(results.map(\.id) == expected.map(\.id))
        #expect(try await query.count(in: store) == expected.count)
    }

    // MARK: Counting

    @Test func countOfAnIndexAnswerablePredicateDecodesNoDocument() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }

        // Equality on a non-unique index: counted from the index's duplicates, no document read.
        let (age, ageStats) = try await Self.countStatistics(Person.include(#Predicate { $0.age == 30 }), in: store)
        #expect(age == people.filter { $0.age == 30 }.count)
        #expect(ageStats.documentsDecoded == 0)
        #expect(ageStats.documentsRead == 0)

        let (tags, tagStats) = try await Self.countStatistics(Person.include(#Predicate { $0.tags.contains("swift") }),
                                                              in: store)
        #expect(tags == people.filter { $0.tags.contains("swift") }.count)
        #expect(tagStats.documentsDecoded == 0)
        #expect(tagStats.documentsRead == 0)

        let (compound, compoundStats) = try await Self.countStatistics(
            Person.include(#Predicate { $0.city == "Bergen" && $0.age >= 20 }), in: store)
        #expect(compound == people.filter { $0.city == "Bergen" && $0.age >= 20 }.count)
        #expect(compoundStats.documentsDecoded == 0)
        #expect(compoundStats.documentsRead == 0)

        // An `||` whose branches the indexes answer whole: the union's entries, each id counted once.
        let (either, eitherStats) = try await Self.countStatistics(
            Person.include(#Predicate { $0.age == 21 || $0.tags.contains("rare") }), in: store)
        #expect(either == people.filter { $0.age == 21 || $0.tags.contains("rare") }.count)
        #expect(eitherStats.documentsRead == 0)
        let (sameField, sameFieldStats) = try await Self.countStatistics(
            Person.include(#Predicate { $0.city == "Oslo" || $0.city == "Bergen" }), in: store)
        #expect(sameField == people.filter { $0.city == "Oslo" || $0.city == "Bergen" }.count)
        #expect(sameFieldStats.documentsRead == 0)

        let (several, severalStats) = try await Self.countStatistics(
            Person.include(#Predicate { [20, 30].contains($0.age) }), in: store)
        #expect(several == people.filter { [20, 30].contains($0.age) }.count)
        #expect(severalStats.documentsDecoded == 0)

        let (unique, uniqueStats) = try await Self.countStatistics(Person.include(#Predicate { $0.email == "p5@x" }),
                                                                   in: store)
        #expect(unique == 1)
        #expect(uniqueStats.documentsDecoded == 0)

        // A residual on a plain field is evaluated on the encoded bytes: read, not decoded.
        let (residual, residualStats) = try await Self.countStatistics(
            Person.include(#Predicate { $0.age == 30 && $0.name == "Anna" }), in: store)
        #expect(residual == people.filter { $0.age == 30 && $0.name == "Anna" }.count)
        #expect(residualStats.documentsDecoded == 0)

        // The public count agrees.
        #expect(try await Person.include(#Predicate { $0.age == 30 }).count(in: store) == age)
        #expect(try await Person.include(#Predicate { $0.tags.contains("swift") }).count(in: store) == tags)
    }

    // MARK: Conditions the translator cannot read

    @Test func untranslatableConditionIsEvaluatedOnTheDecodedDocumentWhileTheRestUsesAnIndex() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }

        let long = Person.include(#Predicate { $0.age == 30 && $0.nameLength > 3 })
        let expected = Self.byID(people.filter { $0.age == 30 && $0.nameLength > 3 })
        #expect(!expected.isEmpty)
        let explanation = try await long.explain(in: store)
        #expect(explanation.index == "age")
        #expect(explanation.decodesForFilter)
        #expect(explanation.lines.contains { $0.contains("residual:") && $0.contains("needs the decoded document") })
        #expect(explanation.statistics.entriesScanned == people.filter { $0.age == 30 }.count)
        #expect(try await long.results(in: store).map(\.id) == expected.map(\.id))

        let startsWithA = Person.include(#Predicate {
            $0.tags.contains("swift") && $0.hasAnEmailStartingWithA
        })
        let expectedA = Self.byID(people.filter { $0.tags.contains("swift") && $0.email?.starts(with: "a") == true })
        #expect(!expectedA.isEmpty)
        let aPlan = try await startsWithA.explain(in: store)
        #expect(aPlan.index == "tags")
        #expect(aPlan.decodesForFilter)
        #expect(aPlan.description.contains("needs the decoded document"))
        #expect(try await startsWithA.results(in: store).map(\.id) == expectedA.map(\.id))
        #expect(try await startsWithA.count(in: store) == expectedA.count)

        // Alone, it is a full scan, still correct; and excluded, it is negated correctly.
        let alone = Person.include(#Predicate { $0.nameLength > 3 })
        let alonePlan = try await alone.explain(in: store)
        #expect(alonePlan.index == nil)
        #expect(alonePlan.decodesForFilter)
        #expect(try await alone.results(in: store).map(\.id)
            == Self.byID(people.filter { $0.nameLength > 3 }).map(\.id))
        let excluded = Person.include(#Predicate { $0.age < 10 }).exclude(#Predicate { $0.nameLength > 3 })
        let excludedPlan = try await excluded.explain(in: store)
        #expect(excludedPlan.index == "age")
        #expect(excludedPlan.decodesForFilter)
        #expect(try await excluded.results(in: store).map(\.id)
            == Self.byID(people.filter { $0.age < 10 && !($0.nameLength > 3) }).map(\.id))
    }

    // MARK: Filters that are always false

    @Test func alwaysFalseFilterScansNothing() async throws {
        let (store, dir, _) = try await Self.populatedStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<500).map { QueryPlanReading(id: $0, value: Double($0) / 4) })

        // A captured NaN (a literal `.nan` would draw the compiler's "always false" warning).
        let notANumber = Double.nan
        let nan = QueryPlanReading.include(#Predicate { $0.value == notANumber })
        let nanPlan = try await nan.explain(in: store)
        #expect(nanPlan.index == nil)
        #expect(nanPlan.lines.contains { $0.contains("always false") })
        #expect(nanPlan.statistics.entriesScanned == 0)
        #expect(nanPlan.statistics.documentsRead == 0)
        #expect(try await nan.results(in: store).isEmpty)
        #expect(try await nan.count(in: store) == 0)

        // Everything is not NaN.
        #expect(try await QueryPlanReading.include(#Predicate { $0.value != notANumber }).count(in: store) == 500)

        let never = Person.include(#Predicate { _ in false })
        let neverPlan = try await never.explain(in: store)
        #expect(neverPlan.lines.contains { $0.contains("always false") })
        #expect(neverPlan.statistics.entriesScanned == 0)
        #expect(neverPlan.statistics.documentsRead == 0)
        #expect(try await never.sortBy(\.name)[0..<10].results(in: store).isEmpty)

        let contradiction = Person.include(#Predicate { $0.age > 10 && false })
        let contradictionPlan = try await contradiction.explain(in: store)
        #expect(contradictionPlan.statistics.entriesScanned == 0)
        #expect(try await contradiction.first(in: store) == nil)
    }

    // MARK: The explanation's text

    @Test func explainTextNamesIndexBoundsResidualOrderSliceAndWhatRunningTook() async throws {
        let (store, dir, people) = try await Self.populatedStore()
        defer { _ = dir }
        let query = Person.include(#Predicate { $0.age >= 20 && $0.age < 40 && $0.nameLength > 3 })
            .sortBy(\.age)[5..<15]
        let expected = Self.byAge(people.filter { $0.age >= 20 && $0.age < 40 && $0.nameLength > 3 })
        let explanation = try await query.explain(in: store)
        let text = explanation.description
        #expect(text == explanation.lines.joined(separator: "\n"))
        #expect(text.contains("people (\(Self.documentCount) documents)"))

        func line(_ label: String) -> String {
            explanation.lines.first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(label) } ?? ""
        }
        let access = line("access:")
        #expect(access.contains("index age"))
        #expect(access.contains("age >= 20"))
        #expect(access.contains("age < 40"))

        let residual = line("residual:")
        #expect(residual.contains("decoded document"))
        #expect(!residual.contains("none"))

        let order = line("order:")
        #expect(order.contains("age ascending"))
        #expect(order.contains("from the index"))

        let slice = line("slice:")
        #expect(slice.contains("offset 5, limit 10"))

        let stats = explanation.statistics
        #expect(stats.returned == 10)
        let ran = line("ran:")
        #expect(ran.contains("\(stats.entriesScanned) entries scanned"))
        #expect(ran.contains("10 returned"))
        #expect(try await query.results(in: store).map(\.id) == Array(expected[5..<15]).map(\.id))

        // A full scan with a top-k sort says so.
        let topK = try await Person.sortBy(\.name)[0..<7].explain(in: store)
        #expect(topK.lines.contains { $0.contains("full scan") })
        #expect(topK.lines.contains { $0.contains("top-7 heap") })
        #expect(topK.lines.contains { $0.contains("offset 0, limit 7") })
        #expect(topK.lines.last?.contains("\(Self.documentCount) entries scanned") == true)
        #expect(topK.lines.last?.contains("7 returned") == true)
    }
}
