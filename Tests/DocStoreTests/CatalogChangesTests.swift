import Foundation
import Testing
@testable import DocStore

// Changes to the catalog through the untyped API: indexes created and dropped, collections dropped, saved filters,
// and dry runs that rehearse any of them and leave the store as it was.

/// A member of collection `members`: an id, a name, an age, a city, a unique handle, and tags.
private func member(_ id: Int, age: Int?, city: String, handle: String?, tags: [String] = []) -> DocumentValue {
    var fields: [(String, DocumentValue)] = [("id", .int(Int64(id))), ("name", .string("member \(id)")), ("city", .string(city))]
    if let age { fields.append(("age", .int(Int64(age)))) }
    if let handle { fields.append(("handle", .string(handle))) }
    fields.append(("tags", .array(tags.map { .string($0) })))
    return .object(fields)
}

/// Sixty members: ages 20–39 (every third missing), three cities, handles unique where present.
private let members: [DocumentValue] = (0..<60).map { i in
    member(i, age: i % 3 == 2 ? nil : 20 + i % 20, city: ["Oslo", "Bergen", "\u{C5}s"][i % 3],
           handle: i % 4 == 0 ? nil : "h\(i)", tags: i % 2 == 0 ? ["even"] : ["odd", "x\(i % 5)"])
}

private func field(_ document: DocumentValue, _ name: String) -> DocumentValue? { document[field: name] }

private func ids(_ documents: [DocumentValue]) -> [Int64] {
    documents.compactMap { if case .int(let i)? = field($0, "id") { i } else { nil } }
}

private func insertMembers(into store: DocStore, collection: String = "members") async throws {
    try await store.write { ctx in
        for m in members { try ctx.insert(m, into: collection) }
    }
}

private let ageIndex = IndexDefinition(name: "by_age", kind: .regular, fields: ["age"])
private let cityAgeIndex = IndexDefinition(name: "by_city_age", kind: .regular, fields: ["city", "age"])
private let tagsIndex = IndexDefinition(name: "by_tag", kind: .multi, fields: ["tags"])
private let handleIndex = IndexDefinition(name: "by_handle", kind: .unique, fields: ["handle"])

/// Everything a store holds that these tests change: the catalog, the saved filters and every document.
private struct Snapshot: Sendable, Equatable {
    var collections: [CollectionInfo]
    var filters: [SavedFilter]
    var documents: [String: [DocumentValue]]
    var counts: [String: Int]
}

private func snapshot(_ store: DocStore) async throws -> Snapshot {
    try await store.read { ctx in
        let collections = try ctx.collections()
        var documents: [String: [DocumentValue]] = [:]
        var counts: [String: Int] = [:]
        for info in collections {
            documents[info.name] = try Query<DocumentValue>(info.name).results(in: ctx)
            counts[info.name] = try Query<DocumentValue>(info.name).count(in: ctx)
        }
        return Snapshot(collections: collections, filters: try ctx.savedFilters(), documents: documents, counts: counts)
    }
}

private struct RehearsalFailed: Error {}

@Suite struct CatalogChangesTests {
    // MARK: Indexes

    @Test func createIndexBuildsEntriesForTheDocumentsAlreadyThere() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        try await store.write { ctx in
            try ctx.createIndex(ageIndex, in: "members")
            try ctx.createIndex(cityAgeIndex, in: "members")
            try ctx.createIndex(tagsIndex, in: "members")
            try ctx.createIndex(handleIndex, in: "members")
        }
        let byAge = Query<DocumentValue>("members").include(.compare("age", .equal, .int(25)))
        let byCityAndAge = Query<DocumentValue>("members").include(.and([.compare("city", .equal, .string("Bergen")),
                                                                 .compare("age", .greaterOrEqual, .int(30))]))
        let byTag = Query<DocumentValue>("members").include(.contains("tags", .string("x3")))
        let byHandle = Query<DocumentValue>("members").include(.compare("handle", .equal, .string("h7")))
        let checks: [(Query<DocumentValue>, Set<String>, (DocumentValue) -> Bool)] = [
            (byAge, ["by_age"], { field($0, "age") == .int(25) }),
            (byCityAndAge, ["by_city_age"], { m in
                guard field(m, "city") == .string("Bergen"), case .int(let a)? = field(m, "age") else { return false }
                return a >= 30
            }),
            (byTag, ["by_tag"], { field($0, "tags").map { if case .array(let t) = $0 { t.contains(.string("x3")) } else { false } } ?? false }),
            (byHandle, ["by_handle"], { field($0, "handle") == .string("h7") }),
        ]
        for (query, allowed, predicate) in checks {
            let (plan, results) = try await store.read { ctx in (try query.explain(in: ctx), try query.results(in: ctx)) }
            let expected = members.filter(predicate)
            #expect(!expected.isEmpty, "\(query)")
            #expect(results == expected, "\(query)")
            #expect(plan.index.map(allowed.contains) == true, "\(query)\n\(plan.description)")
            #expect(plan.statistics.documentsRead == expected.count, "\(query)\n\(plan.description)")
        }
        let info = try #require(try await store.collections().first { $0.name == "members" })
        #expect(info.indexes == [ageIndex, cityAgeIndex, tagsIndex, handleIndex])

        // Later writes keep the new indexes: a unique handle is now enforced.
        await expectError(.uniqueViolation) {
            try await store.write { try $0.insert(member(100, age: 1, city: "Oslo", handle: "h7"), into: "members") }
        }
        try await store.write { try $0.insert(member(101, age: 25, city: "Oslo", handle: "new"), into: "members") }
        let ages = try await store.read { try byAge.results(in: $0) }
        #expect(ids(ages) == ids(members.filter { field($0, "age") == .int(25) }) + [101])
        let verification = try await store.verify()
        #expect(verification.isClean, "\(verification)")
    }

    @Test func createIndexOnAMissingCollectionCreatesItEmpty() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { try $0.createIndex(ageIndex, in: "later") }
        let info = try #require(try await store.collections().first { $0.name == "later" })
        #expect(info.indexes == [ageIndex])
        #expect(info.idPath == "id")
        // Enough documents that the planner prefers the index to a full scan.
        try await store.write { ctx in
            for i in 0..<10 { try ctx.insert(member(i, age: 20 + i, city: "Oslo", handle: nil), into: "later") }
        }
        let plan = try await store.read { try Query<DocumentValue>("later").include(.compare("age", .equal, .int(25))).explain(in: $0) }
        #expect(plan.index == "by_age")
        #expect(plan.statistics.returned == 1)
    }

    @Test func createIndexRefusesANameTheCollectionAlreadyHas() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        try await store.write { try $0.createIndex(ageIndex, in: "members") }
        // The same name for the same index, or for another index.
        await expectError(.alreadyExists, mentions: ["by_age"]) {
            try await store.write { try $0.createIndex(ageIndex, in: "members") }
        }
        await expectError(.alreadyExists, mentions: ["by_age"]) {
            try await store.write {
                try $0.createIndex(IndexDefinition(name: "by_age", kind: .unique, fields: ["handle"]), in: "members")
            }
        }
        let info = try #require(try await store.collections().first { $0.name == "members" })
        #expect(info.indexes == [ageIndex])
        // Another collection may use the name.
        try await store.write { try $0.createIndex(ageIndex, in: "others") }
    }

    @Test func aUniqueIndexOverDuplicateValuesFailsAndLeavesNoIndex() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        let before = try await snapshot(store)
        // Every city is shared by twenty members.
        let uniqueCity = IndexDefinition(name: "by_city", kind: .unique, fields: ["city"])
        await expectError(.uniqueViolation) {
            try await store.write { try $0.createIndex(uniqueCity, in: "members") }
        }
        #expect(try await snapshot(store) == before)
        let query = Query<DocumentValue>("members").include(.compare("city", .equal, .string("Oslo")))
        let (plan, results) = try await store.read { ctx in (try query.explain(in: ctx), try query.results(in: ctx)) }
        #expect(plan.index == nil, "\(plan.description)")
        #expect(results == members.filter { field($0, "city") == .string("Oslo") })
        // Nothing enforces it, and the name is free for an index that fits.
        try await store.write { try $0.insert(member(200, age: 1, city: "Oslo", handle: nil), into: "members") }
        try await store.write {
            try $0.createIndex(IndexDefinition(name: "by_city", kind: .regular, fields: ["city"]), in: "members")
        }
        let indexed = try await store.read { ctx in (try query.explain(in: ctx).index, try query.count(in: ctx)) }
        #expect(indexed.0 == "by_city")
        #expect(indexed.1 == 21)
        let verification = try await store.verify()
        #expect(verification.isClean, "\(verification)")
    }

    @Test func dropIndexRemovesTheIndexAndQueriesStillAnswer() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            try ctx.createIndex(ageIndex, in: "members")
            try ctx.createIndex(tagsIndex, in: "members")
        }
        try await insertMembers(into: store)
        let query = Query<DocumentValue>("members").include(.compare("age", .less, .int(23))).sortBy("age")
        let expected = try await store.read { try query.results(in: $0) }
        #expect(try await store.read { try query.explain(in: $0).index } == "by_age")

        let dropped = try await store.write { try $0.dropIndex("by_age", from: "members") }
        #expect(dropped)
        let (again, unknown, noCollection) = try await store.write { ctx in
            (try ctx.dropIndex("by_age", from: "members"), try ctx.dropIndex("no_such_index", from: "members"),
             try ctx.dropIndex("by_age", from: "no_such_collection"))
        }
        #expect(!again && !unknown && !noCollection)
        let info = try #require(try await store.collections().first { $0.name == "members" })
        #expect(info.indexes == [tagsIndex])
        let (plan, results, tagged) = try await store.read { ctx in
            (try query.explain(in: ctx), try query.results(in: ctx),
             try Query<DocumentValue>("members").include(.contains("tags", .string("even"))).explain(in: ctx))
        }
        #expect(plan.index == nil, "\(plan.description)")
        #expect(results == expected)
        #expect(tagged.index == "by_tag")
        #expect(tagged.statistics.returned == 30)

        // Dropped and made again: built afresh from the documents.
        try await store.write { try $0.createIndex(ageIndex, in: "members") }
        let rebuilt = try await store.read { ctx in (try query.explain(in: ctx).index, try query.results(in: ctx)) }
        #expect(rebuilt.0 == "by_age")
        #expect(rebuilt.1 == expected)
    }

    // MARK: Collections

    @Test func dropCollectionRemovesDocumentsIndexesAndCatalogEntry() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            try ctx.createIndex(ageIndex, in: "members")
            try ctx.createIndex(handleIndex, in: "members")
        }
        try await insertMembers(into: store)
        try await insertMembers(into: store, collection: "kept")
        let query = Query<DocumentValue>("members").include(.compare("age", .equal, .int(25)))

        let dropped = try await store.write { try $0.dropCollection("members") }
        #expect(dropped)
        #expect(try await store.write { try $0.dropCollection("members") } == false)
        #expect(try await store.write { try $0.dropCollection("never was") } == false)
        let names = try await store.collections().map(\.name)
        #expect(names == ["kept"])
        let (count, documents, results, plan, old) = try await store.read { ctx in
            (try Query<DocumentValue>("members").count(in: ctx), try Query<DocumentValue>("members").results(in: ctx), try query.results(in: ctx),
             try query.explain(in: ctx), try ctx.get("members", id: .int(5)))
        }
        #expect(count == 0 && documents.isEmpty && results.isEmpty && plan.index == nil && plan.statistics.returned == 0 && old == nil)

        // A new insert starts a fresh collection: no old documents, no old indexes, no old unique values.
        try await store.write { try $0.insert(member(7, age: 25, city: "Oslo", handle: "h7"), into: "members") }
        let info = try #require(try await store.collections().first { $0.name == "members" })
        #expect(info.indexes.isEmpty)
        let fresh = try await store.read { ctx in
            (try Query<DocumentValue>("members").results(in: ctx), try query.results(in: ctx), try query.explain(in: ctx).index)
        }
        #expect(ids(fresh.0) == [7])
        #expect(ids(fresh.1) == [7])
        #expect(fresh.2 == nil)
        // An index made again is built from the new documents only (a few more, so that the index is worth using).
        try await store.write { ctx in
            for i in 1000..<1010 { try ctx.insert(member(i, age: 50, city: "Oslo", handle: nil), into: "members") }
            try ctx.createIndex(ageIndex, in: "members")
        }
        let reindexed = try await store.read { ctx in (try query.results(in: ctx), try query.explain(in: ctx).index) }
        #expect(ids(reindexed.0) == [7])
        #expect(reindexed.1 == "by_age")
        // The other collection is untouched.
        #expect(try await store.read { try Query<DocumentValue>("kept").results(in: $0) } == members)
        let verification = try await store.verify()
        #expect(verification.isClean, "\(verification)")
    }

    @Test func severalCatalogChangesInOneTransactionCommitTogether() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        try await store.write { try $0.createIndex(ageIndex, in: "members") }
        let young = Query<DocumentValue>("members").include(.compare("age", .less, .int(24)))
        let inside = try await store.write { ctx -> (String?, Int, [Int64], Int) in
            // An index dropped and made again under the same name, on another field.
            try ctx.dropIndex("by_age", from: "members")
            try ctx.createIndex(IndexDefinition(name: "by_age", kind: .regular, fields: ["city"]), in: "members")
            try ctx.createIndex(IndexDefinition(name: "real_age", kind: .regular, fields: ["age"]), in: "members")
            let plan = try young.explain(in: ctx)
            // A collection dropped and filled again.
            try ctx.dropCollection("members")
            try ctx.createIndex(tagsIndex, in: "members")
            try ctx.insert(member(1, age: 21, city: "Oslo", handle: nil, tags: ["even"]), into: "members")
            try ctx.insert(member(2, age: 30, city: "Oslo", handle: nil, tags: ["odd"]), into: "members")
            return (plan.index, plan.statistics.returned, ids(try young.results(in: ctx)),
                    try Query<DocumentValue>("members").include(.contains("tags", .string("even"))).count(in: ctx))
        }
        #expect(inside.0 == "real_age")
        #expect(inside.1 == members.filter { if case .int(let a)? = field($0, "age") { a < 24 } else { false } }.count)
        #expect(inside.2 == [1])
        #expect(inside.3 == 1)
        let info = try #require(try await store.collections().first { $0.name == "members" })
        #expect(info.indexes == [tagsIndex])
        let after = try await store.read { ctx in
            (try Query<DocumentValue>("members").results(in: ctx).count, ids(try young.results(in: ctx)),
             try Query<DocumentValue>("members").include(.contains("tags", .string("odd"))).results(in: ctx).count)
        }
        #expect(after.0 == 2)
        #expect(after.1 == [1])
        #expect(after.2 == 1)
        let verification = try await store.verify()
        #expect(verification.isClean, "\(verification)")
    }

    // MARK: Saved filters

    @Test func savedFiltersRoundTripInNameOrder() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let filters = [
            SavedFilter(name: "zeta", query: Query("members").include(.compare("age", .greaterOrEqual, .int(30)))),
            SavedFilter(name: "alpha", query: Query("members").sortBy("name")[0..<10]),
            SavedFilter(name: "Beta", query: Query("other")),
            SavedFilter(name: "\u{FC}ber", query: Query("members").include(.compare("city", .equal, .string("\u{C5}s")))),
            SavedFilter(name: "mid dle", query: Query("members")),
        ]
        try await store.write { ctx in for f in filters { try ctx.saveFilter(f) } }
        let (all, one, none) = try await store.read { ctx in
            (try ctx.savedFilters(), try ctx.savedFilter(named: "alpha"), try ctx.savedFilter(named: "gamma"))
        }
        #expect(all.map(\.name) == ["Beta", "alpha", "mid dle", "zeta", "\u{FC}ber"])
        #expect(all == filters.sorted { $0.name < $1.name })
        #expect(one == filters[1])
        #expect(none == nil)
    }

    @Test func savingAFilterUnderATakenNameIsRefused() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let original = SavedFilter(name: "adults", query: Query("members").include(.compare("age", .greaterOrEqual, .int(18))))
        try await store.write { try $0.saveFilter(original) }
        await expectError(.alreadyExists, mentions: ["adults"]) {
            try await store.write {
                try $0.saveFilter(SavedFilter(name: "adults", query: Query("other")))
            }
        }
        #expect(try await store.read { try $0.savedFilters() } == [original])
        // Replacing is delete, then save.
        let replacement = SavedFilter(name: "adults", query: Query("members").include(.compare("age", .greaterOrEqual, .int(21))))
        try await store.write { ctx in
            #expect(try ctx.deleteFilter(named: "adults"))
            try ctx.saveFilter(replacement)
        }
        #expect(try await store.read { try $0.savedFilters() } == [replacement])
    }

    @Test func deleteFilterSaysWhetherThereWasOne() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            try ctx.saveFilter(SavedFilter(name: "a", query: Query("c")))
            try ctx.saveFilter(SavedFilter(name: "b", query: Query("c")))
        }
        let results = try await store.write { ctx in
            (try ctx.deleteFilter(named: "nope"), try ctx.deleteFilter(named: "a"), try ctx.deleteFilter(named: "a"))
        }
        #expect(results == (false, true, false))
        #expect(try await store.read { try $0.savedFilters().map(\.name) } == ["b"])
    }

    @Test func savedFiltersAreNeverCollections() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        // A filter cannot take a collection's name (a query by that name would find the filter).
        await expectError(.alreadyExists) {
            try await store.write { try $0.saveFilter(SavedFilter(name: "members", query: Query("members"))) }
        }
        // One that names a collection that does not exist is only a filter.
        try await store.write { try $0.saveFilter(SavedFilter(name: "ghost", query: Query("ghost"))) }
        let (names, ghostCount, ghostPlan, filters) = try await store.read { ctx in
            (try ctx.collections().map(\.name), try Query<DocumentValue>("ghost").count(in: ctx),
             try Query<DocumentValue>("ghost").explain(in: ctx), try ctx.savedFilters().map(\.name))
        }
        #expect(names == ["members"])
        #expect(ghostCount == 0 && ghostPlan.description.contains("no such collection"))
        #expect(filters == ["ghost"])
        // Nor can a collection take a filter's name.
        await expectError(.alreadyExists) {
            try await store.write { try $0.insert(.object([("id", .int(1))]), into: "ghost") }
        }
        // Once the collection is dropped, its name is free for a filter.
        #expect(try await store.write { try $0.dropCollection("members") })
        try await store.write { try $0.saveFilter(SavedFilter(name: "members", query: Query("members"))) }
        let after = try await store.read { ctx in (try ctx.collections().map(\.name), try ctx.savedFilters().map(\.name)) }
        #expect(after.0.isEmpty)
        #expect(after.1 == ["ghost", "members"])
    }

    @Test func aSavedFilterIsKeptAsAStructuredRequestInAFixedForm() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        let query = Query<DocumentValue>("members").include(.compare("age", .greaterOrEqual, .int(30)))
            .exclude(.hasPrefix("city", "B")).include(.compare(.field("age") * .literal(.int(2)), .less, .literal(.int(70))))
            .sortBy("name").reverse()[1..<4]
        let filter = SavedFilter(name: "older", query: query)
        try await store.write { try $0.saveFilter(filter) }
        // The form is a format: these names and shapes are what stores hold.
        let stored = try filter.stored.json()
        #expect(stored == #"{"name":"older","collection":"members","selection":{"conditions":["#
            + #"["compare",["age"],">=",30],["not",["startsWith",["city"],"B"]],["falseOnStop",["test",["arithmetic","*","#
            + #"["field",["age"]],["constant",2]],"<",["constant",70]]]],"sort":[[["name"],true]],"idDescending":true,"#
            + #""window":[1,4,[]]}}"#)
        let (read, results, expected) = try await store.read { ctx in
            (try ctx.savedFilter(named: "older"), try ctx.savedFilter(named: "older")?.query.results(in: ctx),
             try query.results(in: ctx))
        }
        #expect(read == filter)
        #expect(results == expected && results?.count == 3)
        #expect(read?.query.description == #"members.include(age >= 30).exclude(city.starts(with: "B"))"#
            + #".include((age * 2) < 70).sortBy(name).reverse()[1..<4]"#)
    }

    @Test func aFilterKeptAsTextByAnOlderBuildReadsBack() throws {
        let old: DocumentValue = .object([("name", "adults"), ("collection", "members"),
                                          ("text", "members.include(age >= 18)")])
        let filter = try SavedFilter(stored: DocumentValue(encoded: old.encoded()))
        #expect(filter.name == "adults" && filter.collection == "members")
        #expect(filter.legacyText == "members.include(age >= 18)")
        #expect(try filter.stored == old)
        for damaged: DocumentValue in [.object([("name", "x")]), .object([("name", "x"), ("collection", "c")]),
                                       .object([("name", "x"), ("collection", "c"), ("selection", ["and"])]),
                                       .object([("name", "x"), ("collection", "c"),
                                                ("selection", ["conditions": [["compare", ["a"], "=>", 1]]])])] {
            #expect(throws: DocStoreError.self) { try SavedFilter(stored: damaged) }
        }
    }

    @Test func aFilterThatCannotBeKeptIsRefusedNamingWhy() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let groups = Query<DocumentValue>("members").groupBy(["city"], .count).decoded(as: DocumentValue.self)
        await expectError(.encodingFailed, mentions: ["which documents"]) {
            try await store.write { try $0.saveFilter(SavedFilter(name: "g", query: groups)) }
        }
        // A part of a predicate that Foundation evaluates on the decoded model cannot be kept without the model.
        let typed = Person.query().include(#Predicate { $0.hasAnEmailStartingWithA }).decoded(as: DocumentValue.self)
        await expectError(.encodingFailed, mentions: ["Foundation"]) {
            try await store.write { try $0.saveFilter(SavedFilter(name: "t", query: typed)) }
        }
        #expect(try await store.read { try $0.savedFilters() }.isEmpty)
    }

    @Test func invalidFilterNamesAreRefused() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        for name in ["", "a\u{1F}b", "a\u{0}b"] {
            await expectError(.invalidSchema) {
                try await store.write { try $0.saveFilter(SavedFilter(name: name, query: Query("c"))) }
            }
        }
        #expect(try await store.read { try $0.savedFilters() }.isEmpty)
    }

    // MARK: Persistence

    @Test func catalogChangesSurviveClosingAndReopening() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        var store = try await DocStore(path: path)
        try await insertMembers(into: store)
        try await insertMembers(into: store, collection: "doomed")
        try await store.write { ctx in
            try ctx.createIndex(ageIndex, in: "members")
            try ctx.createIndex(tagsIndex, in: "members")
            try ctx.createIndex(cityAgeIndex, in: "members")
            try ctx.dropIndex("by_tag", from: "members")
            try ctx.createIndex(handleIndex, in: "doomed")
            try ctx.dropCollection("doomed")
            try ctx.saveFilter(SavedFilter(name: "young", query: Query("members").include(.compare("age", .less, .int(25)))))
            try ctx.saveFilter(SavedFilter(name: "gone", query: Query("members")))
            try ctx.deleteFilter(named: "gone")
        }
        let before = try await snapshot(store)
        await store.close()

        store = try await DocStore(path: path)
        let after = try await snapshot(store)
        #expect(after == before)
        #expect(after.collections.map(\.name) == ["members"])
        #expect(after.collections.first?.indexes == [ageIndex, cityAgeIndex])
        #expect(after.filters == [SavedFilter(name: "young", query: Query("members").include(.compare("age", .less, .int(25))))])
        let query = Query<DocumentValue>("members").include(.compare("age", .equal, .int(25)))
        let (plan, results) = try await store.read { ctx in (try query.explain(in: ctx), try query.results(in: ctx)) }
        #expect(plan.index == "by_age")
        #expect(results == members.filter { field($0, "age") == .int(25) })
        #expect(try await store.read { try Query<DocumentValue>("doomed").count(in: $0) } == 0)
        let verification = try await store.verify()
        #expect(verification.isClean, "\(verification)")
        await store.close()
    }

    // MARK: Dry runs

    @Test func aDryRunReturnsItsResultAndSeesItsOwnWrites() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        let before = try await snapshot(store)
        let (countInside, found, deleted, left) = try await store.dryRun { ctx in
            try ctx.insert(member(500, age: 99, city: "Oslo", handle: "h500"), into: "members")
            let count = try Query<DocumentValue>("members").count(in: ctx)
            let found = try ctx.get("members", id: .int(500))
            let deleted = try Query<DocumentValue>("members").include(.compare("city", .equal, .string("Oslo"))).delete(in: ctx)
            return (count, found, deleted, try Query<DocumentValue>("members").count(in: ctx))
        }
        #expect(countInside == members.count + 1)
        #expect(found == member(500, age: 99, city: "Oslo", handle: "h500"))
        #expect(deleted == 21)
        #expect(left == members.count + 1 - 21)
        #expect(try await snapshot(store) == before)
        #expect(try await store.read { try $0.get("members", id: .int(500)) } == nil)
    }

    @Test func aDryRunLeavesTheCatalogAsItWas() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        try await insertMembers(into: store, collection: "second")
        try await store.write { ctx in
            try ctx.createIndex(tagsIndex, in: "members")
            try ctx.saveFilter(SavedFilter(name: "kept", query: Query("members")))
        }
        let before = try await snapshot(store)
        let byAge = Query<DocumentValue>("members").include(.compare("age", .equal, .int(25)))
        let byTag = Query<DocumentValue>("members").include(.contains("tags", .string("even")))

        let inside = try await store.dryRun { ctx -> [String?] in
            try ctx.createIndex(ageIndex, in: "members")
            try ctx.dropIndex("by_tag", from: "members")
            try ctx.dropCollection("second")
            try ctx.createIndex(handleIndex, in: "brand new")
            try ctx.insert(member(1, age: 1, city: "Oslo", handle: "h1"), into: "brand new")
            try ctx.saveFilter(SavedFilter(name: "rehearsed", query: Query("members")))
            #expect(try ctx.deleteFilter(named: "kept"))
            return [try byAge.explain(in: ctx).index, try byTag.explain(in: ctx).index,
                    try ctx.collections().map(\.name).joined(separator: ","),
                    try ctx.savedFilters().map(\.name).joined(separator: ",")]
        }
        #expect(inside == ["by_age", nil, "brand new,members", "rehearsed"])

        #expect(try await snapshot(store) == before)
        // Queries plan with the indexes the store really has, and answer from the documents it really holds.
        let (agePlan, tagPlan, ages, second) = try await store.read { ctx in
            (try byAge.explain(in: ctx), try byTag.explain(in: ctx), try byAge.results(in: ctx),
             try Query<DocumentValue>("second").count(in: ctx))
        }
        #expect(agePlan.index == nil, "\(agePlan.description)")
        #expect(tagPlan.index == "by_tag", "\(tagPlan.description)")
        #expect(tagPlan.statistics.returned == 30)
        #expect(ages == members.filter { field($0, "age") == .int(25) })
        #expect(second == members.count)
        // Writes after the rehearsal work as if it never happened.
        try await store.write { ctx in
            try ctx.createIndex(ageIndex, in: "members")
            try ctx.insert(member(600, age: 25, city: "Oslo", handle: nil), into: "members")
        }
        let final = try await store.read { ctx in (try byAge.explain(in: ctx).index, try byAge.count(in: ctx)) }
        #expect(final.0 == "by_age")
        #expect(final.1 == members.filter { field($0, "age") == .int(25) }.count + 1)
        let verification = try await store.verify()
        #expect(verification.isClean, "\(verification)")
    }

    @Test func anErrorInADryRunPropagatesAndChangesNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await insertMembers(into: store)
        try await store.write { try $0.createIndex(handleIndex, in: "members") }
        let before = try await snapshot(store)

        await #expect(throws: RehearsalFailed.self) {
            try await store.dryRun { ctx -> Int in
                try ctx.insert(member(700, age: 1, city: "Oslo", handle: "h700"), into: "members")
                try ctx.createIndex(ageIndex, in: "members")
                try ctx.saveFilter(SavedFilter(name: "f", query: Query("members")))
                throw RehearsalFailed()
            }
        }
        #expect(try await snapshot(store) == before)

        // An error of the store's own, midway through.
        await expectError(.uniqueViolation) {
            _ = try await store.dryRun { ctx -> Int in
                try ctx.dropCollection("members")
                try ctx.insert(member(1, age: 1, city: "Oslo", handle: "same"), into: "members")
                try ctx.createIndex(handleIndex, in: "members")
                try ctx.insert(member(2, age: 1, city: "Oslo", handle: "same"), into: "members")
                return 0
            }
        }
        #expect(try await snapshot(store) == before)
        let plan = try await store.read {
            try Query<DocumentValue>("members").include(.compare("handle", .equal, .string("h7"))).explain(in: $0)
        }
        #expect(plan.index == "by_handle")
        #expect(plan.statistics.returned == 1)
    }
}
