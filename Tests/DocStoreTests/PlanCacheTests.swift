import Foundation
import Testing
@testable import DocStore

/// A document with two indexed fields whose best index depends on the values a request compares them with.
struct CachedPlanItem: Document, Equatable {
    var id: Int
    var city: String
    var age: Int
    static let collection = "plan_cache_items"
    static let indexes: [IndexSpec<CachedPlanItem>] = [.index("city", \.city), .index("age", \.age)]
}

/// The plans requests of a repeated shape take from their collection's plan cache: which access they keep, and
/// when they are planned again. (The oracle suites check their answers: `requestsOfOneShapeWithOtherValues...`.)
@Suite struct PlanCacheTests {
    /// One document in `rare`, 999 in `common` with ages 0 to 99 in turn.
    static func store() async throws -> (DocStore, TemporaryDirectory, [CachedPlanItem]) {
        let (store, dir) = try await makeStore()
        let items = [CachedPlanItem(id: 0, city: "rare", age: 50)]
            + (1..<1_000).map { CachedPlanItem(id: $0, city: "common", age: $0 % 100) }
        try await store.insert(contentsOf: items)
        return (store, dir, items)
    }

    static func query(city: String, minimumAge: Int) -> Query<CachedPlanItem> {
        CachedPlanItem.include(#Predicate { $0.city == city && $0.age >= minimumAge })
    }

    /// The plan a request runs with, and the ids it answers.
    static func planAndIDs(_ q: Query<CachedPlanItem>, in store: DocStore) async throws -> (Plan, [Int]) {
        try await store.read { ctx in (try #require(try q.executor(in: ctx)).plan, try q.ids(in: ctx)) }
    }

    static func indexName(_ plan: Plan) -> String? {
        if case .index(let scan) = plan.access { return scan.primary ? "ids" : scan.index.name }
        return nil
    }

    /// `id == v` is planned without weighing anything: the plan must be the one weighing every access makes, and
    /// its answer what `get` reads, for ids present and absent, of other kinds, and ids that need a document read.
    @Test func aLookUpByIDIsPlannedAsWeighingEveryAccessWouldBe() async throws {
        let (store, dir, _) = try await Self.store()
        defer { _ = dir }
        try await store.read { ctx in
            for id in [0, 1, 500, 999, 1_000, -1, Int.max, Int.min, 1 << 53, (1 << 53) + 1] {
                for q in [CachedPlanItem.include(#Predicate { $0.id == id }),
                          CachedPlanItem.include(#Predicate { $0.id == id }).reverse(),
                          CachedPlanItem.include(#Predicate { $0.id == id })[0..<1]] {
                    let fast = try #require(try q.executor(in: ctx)).plan
                    var weighed = try #require(try q.executor(in: ctx, fresh: true)).plan
                    weighed.considered = []
                    #expect(fast == weighed, "id \(id)")
                    #expect(try q.results(in: ctx) == (try ctx.get(CachedPlanItem.self, id: id)).map { [$0] } ?? [],
                            "id \(id)")
                    #expect(try q.count(in: ctx) == (try ctx.get(CachedPlanItem.self, id: id) == nil ? 0 : 1))
                }
                // Read with one `get` when nothing else is asked: slices that begin past the document, or are
                // empty, or are reversed, must answer as the plan does.
                let held = (try ctx.get(CachedPlanItem.self, id: id)).map { [$0] } ?? []
                let base = CachedPlanItem.include(#Predicate { $0.id == id })
                for window in [0..<1, 0..<5, 1..<2, 0..<0, 2..<4, 1..<1] {
                    let expected = Array(held[min(window.lowerBound, held.count)..<min(window.upperBound, held.count)])
                    #expect(try base[window].results(in: ctx) == expected, "id \(id), \(window)")
                    #expect(try base.reverse()[window].results(in: ctx) == expected, "id \(id), \(window)")
                    #expect(try base[window].reverse().results(in: ctx) == expected, "id \(id), \(window)")
                    #expect(try base[window][0..<1].results(in: ctx) == Array(expected.prefix(1)), "id \(id), \(window)")
                }
                #expect(try base.first(in: ctx) == held.first && base.last(in: ctx) == held.first
                        && base.any(in: ctx) == held.first, "id \(id)")
            }
        }
        // Ids of another kind (UUIDs, 17-byte keys), in a collection with more indexes.
        let (people, peopleDir) = try await makeStore()
        defer { _ = peopleDir }
        let persons = (0..<50).map { Person(name: "p\($0)", age: $0, email: "p\($0)@example.com") }
        try await people.insert(contentsOf: persons)
        try await people.read { ctx in
            for id in [persons[0].id, persons[49].id, UUID()] {
                let q = Person.include(#Predicate { $0.id == id })
                let fast = try #require(try q.executor(in: ctx)).plan
                var weighed = try #require(try q.executor(in: ctx, fresh: true)).plan
                weighed.considered = []
                #expect(fast == weighed, "id \(id)")
                #expect(try q.results(in: ctx) == (try ctx.get(Person.self, id: id)).map { [$0] } ?? [])
            }
        }
        // An empty collection reads nothing, whichever the plan.
        let (empty, emptyDir) = try await makeStore()
        defer { _ = emptyDir }
        #expect(try await CachedPlanItem.include(#Predicate { $0.id == 3 }).results(in: empty).isEmpty)
    }

    @Test func aCachedScanThatGrewIsPlannedAgainAndOneThatDidNotIsReused() async throws {
        let (store, dir, items) = try await Self.store()
        defer { _ = dir }
        func expected(_ city: String, _ age: Int) -> [Int] {
            items.filter { $0.city == city && $0.age >= age }.map(\.id)
        }

        // The one `rare` document: the city index, weighed against the age index.
        let (first, firstIDs) = try await Self.planAndIDs(Self.query(city: "rare", minimumAge: 0), in: store)
        #expect(Self.indexName(first) == "city")
        #expect(!first.considered.isEmpty, "planned from scratch")
        #expect(firstIDs == expected("rare", 0))

        // The same shape on `common` and a narrow age: the city index would now read 999 entries, far more than
        // when it was chosen, so the request is weighed again and takes the age index.
        let (second, secondIDs) = try await Self.planAndIDs(Self.query(city: "common", minimumAge: 99), in: store)
        #expect(Self.indexName(second) == "age", "\(QueryExplanation(plan: second, statistics: .init()))")
        #expect(!second.considered.isEmpty, "planned again")
        #expect(secondIDs == expected("common", 99))

        // Another narrow age: the age index, rebuilt for its value with no other index weighed.
        let (third, thirdIDs) = try await Self.planAndIDs(Self.query(city: "rare", minimumAge: 98), in: store)
        #expect(Self.indexName(third) == "age")
        #expect(third.considered.isEmpty, "taken from the cache")
        #expect(thirdIDs == expected("rare", 98))

        // `explain` always weighs every access, to show them.
        let explained = try await Self.query(city: "rare", minimumAge: 98).explain(in: store)
        #expect(explained.plan.considered.count == 3, "\(explained)")
    }

    @Test func aRepeatedRequestKeepsItsPlanUntilTheCollectionGrowsByMoreThanAnEighth() async throws {
        let (store, dir, _) = try await Self.store()
        defer { _ = dir }
        let q = Self.query(city: "rare", minimumAge: 0)
        let shape = RequestShape(selection: q.selection, output: q.output)
        func kept() async throws -> Int? {
            try await store.read { ctx in
                try ctx.scope.handleForReading(CachedPlanItem.self)?.plans.entry(shape)?.plan.plan.documentCount
            }
        }
        _ = try await q.ids(in: store)
        #expect(try await kept() == 1_000)

        // A few more documents: the plan is kept, and says how many documents there are now.
        try await store.insert(contentsOf: (1_000..<1_100).map { CachedPlanItem(id: $0, city: "common", age: 1) })
        let (plan, _) = try await Self.planAndIDs(q, in: store)
        #expect(plan.documentCount == 1_100)
        #expect(try await kept() == 1_000)

        // Past an eighth more, the request is planned again, and its new plan kept.
        try await store.insert(contentsOf: (1_100..<1_200).map { CachedPlanItem(id: $0, city: "common", age: 1) })
        _ = try await q.ids(in: store)
        #expect(try await kept() == 1_200)
    }

    @Test func requestsOfOtherShapesAreKeptApart() {
        func shape(_ q: Query<CachedPlanItem>) -> RequestShape { RequestShape(selection: q.selection, output: q.output) }
        let a = shape(Self.query(city: "x", minimumAge: 1))
        #expect(a == shape(Self.query(city: "y", minimumAge: 7)))
        #expect(a.hashValue == shape(Self.query(city: "y", minimumAge: 7)).hashValue)
        #expect(a != shape(CachedPlanItem.include(#Predicate { $0.city == "x" && $0.age > 1 })))
        #expect(a != shape(CachedPlanItem.include(#Predicate { $0.age >= 1 && $0.city == "x" })))
        #expect(a != shape(Self.query(city: "x", minimumAge: 1).sortBy(\.age)))
        #expect(a != shape(Self.query(city: "x", minimumAge: 1)[0..<10]))
        // A slice ending within the same power of two weighs a limited walk alike.
        #expect(shape(Self.query(city: "x", minimumAge: 1)[0..<10]) == shape(Self.query(city: "x", minimumAge: 1)[3..<12]))
        #expect(shape(Self.query(city: "x", minimumAge: 1)[0..<10]) != shape(Self.query(city: "x", minimumAge: 1)[0..<100]))
        let untyped = Query<DocumentValue>("plan_cache_items")
        #expect(shape(untyped.include(.compare("age", .equal, .int(3))).decoded(as: CachedPlanItem.self))
            != shape(untyped.include(.compare("age", .equal, .null)).decoded(as: CachedPlanItem.self)),
            "nil is not another value: a unique index holds none")
    }
}
