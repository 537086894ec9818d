import Foundation
import Testing
@testable import DocStore

/// Every request is one `Query`, whatever it answers: documents, fields, groups or an aggregate of every match. The
/// common verbs work on each, against what Swift computes from the same documents.
@Suite struct RequestTests {
    static func people() -> [Person] {
        (0..<120).map { i in
            Person(name: "P\(i % 13)", age: (i * 7) % 61, city: ["Oslo", "Bergen", "Troms\u{F8}", "Alta"][i % 4],
                   email: i % 3 == 0 ? nil : "p\(i)@x", tags: [])
        }
    }

    @Test func groupsReadByEveryVerb() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = Self.people()
        try await store.insert(contentsOf: people)
        let counts = Dictionary(grouping: people, by: \.city).mapValues(\.count)
        let byKey = counts.sorted { $0.key < $1.key }
        let byValue = counts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }

        let groups = Person.query().groupBy(\.city)
        let all = try await groups.results(in: store)
        #expect(all.map(\.key) == byKey.map(\.key) && all.map(\.value) == byKey.map(\.value))
        #expect(try await groups.count(in: store) == counts.count)
        #expect(try await groups.first(in: store)?.key == byKey.first?.key)
        #expect(try await groups.last(in: store)?.key == byKey.last?.key)
        #expect(try await groups.any(in: store)?.key == byKey.first?.key)
        #expect(try await groups.reverse().results(in: store).map(\.key) == byKey.reversed().map(\.key))
        let top = groups.sortBy(.value, order: .reverse)[0..<2]
        #expect(try await top.results(in: store).map(\.key) == byValue.prefix(2).map(\.key))
        #expect(try await top.reverse().results(in: store).map(\.key) == byValue.prefix(2).reversed().map(\.key))
        #expect(try await top.last(in: store)?.key == byValue[1].key)
        #expect(try await top.count(in: store) == 2)
        #expect("\(top)" == "people.groupBy(city).count().sortBy(value, .reverse)[0..<2]")

        let cursor = try await store.read { ctx in
            let cursor = try groups.cursor(in: ctx)
            var keys: [String] = []
            while let group = try cursor.next() { keys.append(group.key) }
            return keys
        }
        #expect(cursor == byKey.map(\.key))

        // As values: the fields grouped by at their paths, the aggregate named as written.
        let rows = try await groups.decoded(as: DocumentValue.self).results(in: store)
        #expect(rows.first == .object([("city", .string(byKey[0].key)), ("count()", .int(Int64(byKey[0].value)))]))
    }

    @Test func aggregatesOfEveryMatchHaveOneValue() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = Self.people()
        try await store.insert(contentsOf: people)
        let adults = Person.include(#Predicate { $0.age >= 18 })
        let matching = people.filter { $0.age >= 18 }
        #expect(try await adults.aggregate(.sum(\.age)).value(in: store) == matching.map(\.age).reduce(0, +))
        #expect(try await adults.aggregate(.max(\.age)).value(in: store) == matching.map(\.age).max())
        #expect(try await adults.aggregate(.count).value(in: store) == matching.count)
        #expect(try await adults.aggregate(.count).results(in: store) == [matching.count])
        #expect(try await adults.count(in: store) == matching.count)
        let none = Person.include(#Predicate { $0.age > 1000 })
        #expect(try await none.aggregate(.average(\.age)).value(in: store) == nil)
        #expect(try await none.aggregate(.sum(\.age)).value(in: store) == 0)
        // A slice of the one result that leaves it out has no value.
        await expectError(.invalidSchema) { _ = try await adults.aggregate(.count)[1..<2].value(in: store) }
        #expect("\(adults.aggregate(.count))".hasSuffix(".count()"))
    }

    @Test func fieldsAreARequestOfTheirOwn() async throws {
        struct NameAndAge: Decodable, Equatable { var name: String; var age: Int }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = Self.people()
        try await store.insert(contentsOf: people)
        let q = Person.include(#Predicate { $0.age > 50 }).sortBy(\.age).sortBy(\.name)
        let expected = people.filter { $0.age > 50 }.sorted { ($0.age, $0.name, $0.id.uuidString) < ($1.age, $1.name, $1.id.uuidString) }
        let typed = try await q.select(\.name, \.age).decoded(as: NameAndAge.self).results(in: store)
        #expect(typed.map(\.age) == expected.map(\.age) && typed.map(\.name) == expected.map(\.name))
        #expect(try await q.select(\.name).count(in: store) == expected.count)
        #expect(try await q.select(\.name).last(in: store) == .object([("name", .string(expected.last!.name))]))
        let explanation = try await q.select(\.name).explain(in: store)
        #expect(explanation.statistics.returned == expected.count && explanation.statistics.documentsDecoded == 0)
        // A request of fields or groups changes no document.
        await expectError(.invalidSchema) { _ = try await q.select(\.name).delete(in: store) }
        await expectError(.invalidSchema) { _ = try await Person.query().groupBy(\.city).delete(in: store) }
        await expectError(.invalidSchema) { _ = try await q.select(\.name).update(in: store, set: ["age": .string("x")]) }
        await expectError(.invalidSchema) {
            _ = try await Query<DocumentValue>("people").distinct("city").update(in: store, [.set("city", .string("x"))])
        }
        #expect(try await Person.query().count(in: store) == people.count)
        #expect(try await Person.query().results(in: store).count == people.count)   // every one still decodes
    }

    /// Reversing groups sorted by their aggregate flips the order of ties too: `reverse().first` is `last`.
    @Test func reversedGroupsOfEqualValuesComeLastFirst() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            for (i, city) in ["A", "B", "B", "C", "C"].enumerated() {
                try ctx.insert(.object([("id", .int(Int64(i))), ("city", .string(city))]), into: "t")
            }
        }
        let byValue = Query<DocumentValue>("t").groupBy("city").sortBy(.value)
        let keys = try await byValue.results(in: store).map { $0.key }
        #expect(keys == [[.string("A")], [.string("B")], [.string("C")]])
        #expect(try await byValue.last(in: store)?.key == [.string("C")])
        #expect(try await byValue.reverse().results(in: store).map { $0.key } == keys.reversed())
        #expect(try await byValue.reverse().reverse().results(in: store).map { $0.key } == keys)
    }

    @Test func observingGroupsFollowsTheirValue() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(Person(name: "A", age: 30, city: "Oslo"))
        var values = Person.query().groupBy(\.city).observe(in: store).makeAsyncIterator()
        #expect(try await values.next()?.map(\.value) == [1])
        try await store.insert(Person(name: "B", age: 40, city: "Bergen"))
        #expect(try await values.next()?.map(\.key) == ["Bergen", "Oslo"])
    }

    /// The plan records how an aggregate is computed: the planner chooses it with the access, and `explain` reads it.
    @Test func thePlanHoldsTheAggregatesAccess() async throws {
        let (store, dir, _) = try await QueryPlanTests.populatedStore()
        defer { _ = dir }
        let plans = try await store.read { ctx in
            (try Person.query().aggregate(.max(\.age)).plan(in: ctx), try Person.query().groupBy(\.city).plan(in: ctx),
             try Person.query().aggregate(.count).plan(in: ctx),
             try Query<DocumentValue>("nowhere").aggregate(.sum("x")).plan(in: ctx))
        }
        guard case .indexKeys(let index, _, firstOnly: true, _)? = plans.0.aggregateAccess else {
            Issue.record("max(age): \(String(describing: plans.0.aggregateAccess))")
            return
        }
        #expect(index.fields == ["age"])
        #expect(plans.1.grouping?.by == ["city"])
        #expect(plans.2.aggregateAccess == .counting(afterwards: []))
        #expect(plans.3.access == .noCollection && plans.3.aggregateAccess == .matches(reading: []))
    }
}
