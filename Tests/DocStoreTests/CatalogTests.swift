import Foundation
import Testing
@testable import DocStore

// MARK: Models of this suite

/// Items as first written: no index.
private struct CatalogItemPlain: Document, Equatable {
    var id: Int
    var name: String
    var score: Int
    var tags: [String]
    var code: String?
    static let collection = "catalog_items"
}

/// The same collection, with indexes declared later.
private struct CatalogItemIndexed: Document {
    var id: Int
    var name: String
    var score: Int
    var tags: [String]
    var code: String?
    static let collection = "catalog_items"
    static let indexes: [IndexSpec<CatalogItemIndexed>] = [
        .index("score", \.score),
        .multi("tags", \.tags),
        .unique("code", \.code),
    ]
}

/// Index "score" now on another field.
private struct CatalogItemScoreByName: Document {
    var id: Int
    var name: String
    var score: Int
    var tags: [String]
    var code: String?
    static let collection = "catalog_items"
    static let indexes: [IndexSpec<CatalogItemScoreByName>] = [
        .index("score", \.name),
        .multi("tags", \.tags),
        .unique("code", \.code),
    ]
}

/// Index "score" now of another kind.
private struct CatalogItemScoreUnique: Document {
    var id: Int
    var name: String
    var score: Int
    var tags: [String]
    var code: String?
    static let collection = "catalog_items"
    static let indexes: [IndexSpec<CatalogItemScoreUnique>] = [
        .unique("score", \.score),
        .multi("tags", \.tags),
        .unique("code", \.code),
    ]
}

/// Index "tags" no longer declared.
private struct CatalogItemWithoutTags: Document {
    var id: Int
    var name: String
    var score: Int
    var tags: [String]
    var code: String?
    static let collection = "catalog_items"
    static let indexes: [IndexSpec<CatalogItemWithoutTags>] = [
        .index("score", \.score),
        .unique("code", \.code),
    ]
}

private struct CatalogAddress: Codable, Sendable, Equatable {
    var street: String
    var zip: String
}

/// Fields of many kinds, one key renamed by CodingKeys.
private struct CatalogPlace: Document, Equatable {
    var id: UUID
    var address: CatalogAddress
    var city: String
    var isOpen: Bool
    var isVerified: Bool
    var openedAt: Date
    var ownerID: UUID
    var rating: Double
    var nickname: String?
    var labels: [String]

    enum CodingKeys: String, CodingKey {
        case id, address
        case city = "town"
        case isOpen, isVerified, openedAt, ownerID, rating, nickname, labels
    }

    static let collection = "catalog_places"
    static let indexes: [IndexSpec<CatalogPlace>] = [
        .index("zip", \.address.zip),
        .index("city", \.city),
        .index("open", \.isOpen),
        .index("verified", \.isVerified),
        .index("opened", \.openedAt),
        .unique("owner", \.ownerID),
        .index("rating", \.rating),
        .index("nickname", \.nickname),
        .multi("labels", \.labels),
        .index("zip_rating", \.address.zip, \.rating),
    ]
}

private enum CatalogStatus: String, Codable, Sendable {
    case open, closed
}

/// An enum field, its path named.
private struct CatalogTicket: Document, Equatable {
    var id: UUID
    var title: String
    var status: CatalogStatus
    static let collection = "catalog_tickets"
    static let indexes: [IndexSpec<CatalogTicket>] = [
        .index("by_state", .field(\.status, path: "status")),
    ]
}

/// An enum field, its path not named.
private struct CatalogTicketUnnamed: Document {
    var id: UUID
    var title: String
    var status: CatalogStatus
    static let collection = "catalog_tickets_unnamed"
    static let indexes: [IndexSpec<CatalogTicketUnnamed>] = [
        .index("by_state", \.status),
    ]
}

private enum CatalogPhase: String, Codable, Sendable, CaseIterable {
    case draft, published
}

/// A `CaseIterable` enum field, whose type the probe can build; its path named.
private struct CatalogArticle: Document, Equatable {
    var id: UUID
    var phase: CatalogPhase
    static let collection = "catalog_articles"
    static let indexes: [IndexSpec<CatalogArticle>] = [
        .index("by_phase", .field(\.phase, path: "phase")),
    ]
}

/// A `CaseIterable` enum field, its path not named.
private struct CatalogArticleUnnamed: Document {
    var id: UUID
    var phase: CatalogPhase
    static let collection = "catalog_articles_unnamed"
    static let indexes: [IndexSpec<CatalogArticleUnnamed>] = [
        .index("by_phase", \.phase),
    ]
}

/// An index on a computed property.
private struct CatalogShouting: Document {
    var id: UUID
    var name: String
    var loudName: String { name.uppercased() }
    static let collection = "catalog_shouting"
    static let indexes: [IndexSpec<CatalogShouting>] = [
        .index("by_loud_name", \.loudName),
    ]
}

/// An index on a computed integer, whose value is one more than a stored integer.
private struct CatalogAging: Document {
    var id: UUID
    var age: Int
    var score: Int
    var nextAge: Int { age + 1 }
    static let collection = "catalog_aging"
    static let indexes: [IndexSpec<CatalogAging>] = [
        .index("by_next_age", \.nextAge),
    ]
}

/// Two indexes with one name.
private struct CatalogTwice: Document {
    var id: UUID
    var a: Int
    var b: Int
    static let collection = "catalog_twice"
    static let indexes: [IndexSpec<CatalogTwice>] = [
        .index("dup", \.a),
        .index("dup", \.b),
    ]
}

/// No `collection`: named after the type.
private struct CatalogDefaultNamed: Document {
    var id: UUID
    var value: Int
}

/// `collection` given.
private struct CatalogRenamed: Document {
    var id: UUID
    var value: Int
    static let collection = "catalog_renamed_things"
}

// MARK: Helpers of this suite

/// The entry count of the index `name` of `T`'s collection, as `T` opens it; `nil` when it has no such index.
private func catalogIndexCount<T: Document>(_ store: DocStore, _ type: T.Type, _ name: String) async throws -> Int? {
    try await store.write { ctx in
        let handle = try ctx.scope.handle(for: T.self)
        guard let i = handle.indexes.firstIndex(where: { $0.definition.name == name }) else { return nil }
        return try ctx.txn.entryCount(handle.indexes[i].database)
    }
}

/// The entry count of the index `name` of the collection `collection`, opened as the catalog describes it.
private func catalogIndexCount(_ store: DocStore, collection: String, _ name: String) async throws -> Int? {
    try await store.write { ctx in
        guard let handle = try ctx.scope.handle(named: collection),
              let index = handle.indexes.first(where: { $0.definition.name == name }) else { return nil }
        return try ctx.txn.entryCount(index.database)
    }
}

/// Whether the entries of index `name` are exactly those computed from the stored documents by the index's
/// current definition.
private func catalogIndexMatchesDocuments<T: Document>(_ store: DocStore, _ type: T.Type, _ name: String) async throws -> Bool {
    try await store.write { ctx in
        let handle = try ctx.scope.handle(for: T.self)
        guard let index = handle.indexes.first(where: { $0.definition.name == name }) else { return false }
        var expected: [[UInt8]] = []
        try ctx.txn.withCursor(handle.documents) { cursor in
            var entry = try cursor.first()
            while let (key, value) = entry {
                let reader = BinaryReader(value)
                for indexKey in try IndexKeys.keys(of: index, reader: reader, root: try reader.root()) {
                    expected.append(indexKey + [0xFF] + Array(key))
                }
                entry = try cursor.next()
            }
        }
        var actual: [[UInt8]] = []
        try ctx.txn.withCursor(index.database) { cursor in
            var entry = try cursor.first()
            while let (key, value) = entry {
                actual.append(Array(key) + [0xFF] + Array(value))
                entry = try cursor.next()
            }
        }
        return expected.sorted { $0.lexicographicallyPrecedes($1) } == actual.sorted { $0.lexicographicallyPrecedes($1) }
    }
}

private func catalogItems(_ count: Int) -> [CatalogItemPlain] {
    (0..<count).map { i in
        CatalogItemPlain(id: i, name: "item \(i)", score: i * 10,
                         tags: i % 3 == 0 ? [] : ["t\(i % 4)", "all"], code: i % 2 == 0 ? "C\(i)" : nil)
    }
}

/// Expected entry counts of `CatalogItemIndexed`'s indexes over `items`.
private func catalogExpectedCounts(_ items: [CatalogItemPlain]) -> (score: Int, tags: Int, code: Int) {
    (items.count, items.reduce(0) { $0 + Set($1.tags).count }, items.filter { $0.code != nil }.count)
}

@discardableResult
private func catalogExpect(
    _ code: DocStoreError.Code,
    mentions: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> DocStoreError? {
    let caught = await #expect(throws: DocStoreError.self, sourceLocation: sourceLocation) { try await body() }
    guard let caught else { return nil }
    #expect(caught.code == code, "expected \(code), got \(caught.code): \(caught.message)", sourceLocation: sourceLocation)
    for part in mentions {
        #expect(caught.message.contains(part), "the message should name \(part): \(caught.message)",
                sourceLocation: sourceLocation)
    }
    return caught
}

@Suite struct CatalogTests {
    // MARK: Indexes over existing documents

    @Test func indexDeclaredLaterIsBuiltOverExistingDocumentsAfterReopening() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let items = catalogItems(30)
        do {
            let store = try await DocStore(path: path)
            try await store.insert(contentsOf: items)
            await store.close()
        }
        let store = try await DocStore(path: path)
        let expected = catalogExpectedCounts(items)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "score") == expected.score)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "tags") == expected.tags)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "code") == expected.code)
        for name in ["score", "tags", "code"] {
            #expect(try await catalogIndexMatchesDocuments(store, CatalogItemIndexed.self, name), "index \(name)")
        }
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")

        // The new indexes are maintained from here on.
        try await store.insert(CatalogItemIndexed(id: 1_000, name: "new", score: 5, tags: ["x", "y"], code: "NEW"))
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "tags") == expected.tags + 2)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "code") == expected.code + 1)
        #expect(try await store.verify().isClean)
    }

    @Test func indexDeclaredLaterIsBuiltWhenTheNewTypeIsUsedInTheSameStore() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let items = catalogItems(12)
        try await store.insert(contentsOf: items)
        #expect(try await CatalogItemPlain.query().count(in: store) == 12)

        let expected = catalogExpectedCounts(items)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "score") == expected.score)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "tags") == expected.tags)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "code") == expected.code)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(try await store.undeclaredIndexes(of: CatalogItemIndexed.self).isEmpty)
    }

    @Test func changedDefinitionIsRebuilt() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let items = catalogItems(10).map {
            CatalogItemIndexed(id: $0.id, name: $0.name, score: $0.score, tags: $0.tags, code: $0.code)
        }
        var store = try await DocStore(path: path)
        try await store.insert(contentsOf: items)
        #expect(try await catalogIndexMatchesDocuments(store, CatalogItemIndexed.self, "score"))
        await store.close()

        // Same name, another field.
        store = try await DocStore(path: path)
        #expect(try await catalogIndexCount(store, CatalogItemScoreByName.self, "score") == 10)
        #expect(try await catalogIndexMatchesDocuments(store, CatalogItemScoreByName.self, "score"))
        var info = try #require(try await store.collections().first { $0.name == "catalog_items" })
        #expect(info.indexes.first { $0.name == "score" } == IndexDefinition(name: "score", kind: .regular, fields: ["name"]))
        var report = try await store.verify()
        #expect(report.isClean, "\(report)")
        await store.close()

        // Same name, another kind.
        store = try await DocStore(path: path)
        #expect(try await catalogIndexCount(store, CatalogItemScoreUnique.self, "score") == 10)
        #expect(try await catalogIndexMatchesDocuments(store, CatalogItemScoreUnique.self, "score"))
        info = try #require(try await store.collections().first { $0.name == "catalog_items" })
        #expect(info.indexes.first { $0.name == "score" } == IndexDefinition(name: "score", kind: .unique, fields: ["score"]))
        report = try await store.verify()
        #expect(report.isClean, "\(report)")
        // The rebuilt unique index is enforced.
        await catalogExpect(.uniqueViolation, mentions: ["score", "catalog_items"]) {
            try await store.insert(CatalogItemScoreUnique(id: 99, name: "dup", score: 30, tags: [], code: nil))
        }
        #expect(try await CatalogItemScoreUnique.query().count(in: store) == 10)
    }

    @Test func changeToUniqueOverDuplicatesFailsAndKeepsTheOldIndex() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let items = (0..<6).map { CatalogItemIndexed(id: $0, name: "i\($0)", score: $0 % 2, tags: [], code: nil) }
        var store = try await DocStore(path: path)
        try await store.insert(contentsOf: items)
        await store.close()

        store = try await DocStore(path: path)
        await catalogExpect(.uniqueViolation, mentions: ["score", "catalog_items"]) {
            try await store.prepare(CatalogItemScoreUnique.self)
        }
        let info = try #require(try await store.collections().first { $0.name == "catalog_items" })
        #expect(info.indexes.first { $0.name == "score" } == IndexDefinition(name: "score", kind: .regular, fields: ["score"]))
        #expect(try await CatalogItemIndexed.query().count(in: store) == 6)
        #expect(try await catalogIndexCount(store, CatalogItemIndexed.self, "score") == 6)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func undeclaredIndexIsKeptMaintainedReportedAndDropped() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let items = catalogItems(9).map {
            CatalogItemIndexed(id: $0.id, name: $0.name, score: $0.score, tags: $0.tags, code: $0.code)
        }
        var store = try await DocStore(path: path)
        try await store.insert(contentsOf: items)
        let tagsBefore = try #require(try await catalogIndexCount(store, CatalogItemIndexed.self, "tags"))
        await store.close()

        store = try await DocStore(path: path)
        try await store.insert(CatalogItemWithoutTags(id: 100, name: "late", score: 1, tags: ["p", "q", "p"], code: "L"))
        let undeclared = try await store.undeclaredIndexes(of: CatalogItemWithoutTags.self)
        #expect(undeclared == [IndexDefinition(name: "tags", kind: .multi, fields: ["tags"])])

        // Kept and maintained: the new document's two distinct tags are in it.
        #expect(try await catalogIndexCount(store, collection: "catalog_items", "tags") == tagsBefore + 2)
        try await store.delete(CatalogItemWithoutTags.self, id: 100)
        #expect(try await catalogIndexCount(store, collection: "catalog_items", "tags") == tagsBefore)
        try await store.save(CatalogItemWithoutTags(id: 101, name: "later", score: 2, tags: ["r"], code: nil))
        #expect(try await catalogIndexCount(store, collection: "catalog_items", "tags") == tagsBefore + 1)

        _ = try await CatalogItemWithoutTags.query().count(in: store)
        var report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.notices.count == 1, "\(report)")
        #expect(report.notices.first?.contains("catalog_items") == true, "\(report.notices)")
        #expect(report.notices.first?.contains("tags") == true, "\(report.notices)")

        #expect(try await store.dropIndex("tags", from: "catalog_items"))
        #expect(try await !store.dropIndex("tags", from: "catalog_items"))
        #expect(try await !store.dropIndex("tags", from: "no_such_collection"))
        let info = try #require(try await store.collections().first { $0.name == "catalog_items" })
        #expect(info.indexes.map(\.name) == ["score", "code"])
        report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.notices.isEmpty, "the dropped index must not be reported any more: \(report.notices)")
        #expect(try await store.undeclaredIndexes(of: CatalogItemWithoutTags.self).isEmpty)
        #expect(try await CatalogItemWithoutTags.query().count(in: store) == 10)
        try await store.insert(CatalogItemWithoutTags(id: 102, name: "after", score: 3, tags: ["s"], code: nil))
        #expect(try await CatalogItemWithoutTags.query().count(in: store) == 11)
    }

    // MARK: The catalog as tools see it

    @Test func collectionsDescribeNamesIdPathsAndIndexesAndSurviveReopening() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        do {
            let store = try await DocStore(path: path)
            try await store.insert(Person(name: "Ann", age: 41))
            try await store.insert(CatalogItemIndexed(id: 1, name: "one", score: 1, tags: [], code: nil))
            await store.close()
        }
        let expected = [
            CollectionInfo(name: "catalog_items", idPath: "id", indexes: [
                IndexDefinition(name: "score", kind: .regular, fields: ["score"]),
                IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]),
                IndexDefinition(name: "code", kind: .unique, fields: ["code"]),
            ], idWidth: 10),   // integer ids
            CollectionInfo(name: "people", idPath: "id", indexes: [
                IndexDefinition(name: "age", kind: .regular, fields: ["age"]),
                IndexDefinition(name: "city_age", kind: .regular, fields: ["city", "age"]),
                IndexDefinition(name: "email", kind: .unique, fields: ["email"]),
                IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]),
            ], idWidth: 17),   // UUIDs
        ]
        // Reopened, and no Swift type used: what a tool sees.
        var store = try await DocStore(path: path)
        var infos = try await store.collections().sorted { $0.name < $1.name }
        #expect(infos == expected)
        let people = try #require(infos.last)
        #expect(people.indexes.map(\.description) == ["index age(age)", "index city_age(city, age)",
                                                      "unique email(email)", "multi tags(tags)"])
        #expect(people.indexes.map { $0.kind.rawValue } == ["index", "index", "unique", "multi"])
        await store.close()

        store = try await DocStore(path: path)
        infos = try await store.collections().sorted { $0.name < $1.name }
        #expect(infos == expected)
    }

    // MARK: Field paths derived from key paths

    @Test func fieldPathsAreDerivedFromKeyPaths() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        var places: [CatalogPlace] = []
        for i in 0..<5 {
            let address = CatalogAddress(street: "Main \(i)", zip: "0\(i)50")
            let opened = Date(timeIntervalSince1970: Double(i) * 86_400)
            let nickname: String? = i == 3 ? nil : "nick\(i)"
            let labels: [String] = i == 0 ? [] : ["l\(i)", "common"]
            places.append(CatalogPlace(id: UUID(), address: address, city: "Town \(i % 2)", isOpen: i % 2 == 0,
                                       isVerified: i < 2, openedAt: opened, ownerID: UUID(), rating: Double(i) / 2,
                                       nickname: nickname, labels: labels))
        }
        try await store.insert(contentsOf: places)
        let info = try #require(try await store.collections().first { $0.name == "catalog_places" })
        #expect(info.idPath == "id")
        let fields = Dictionary(uniqueKeysWithValues: info.indexes.map { ($0.name, $0.fields.map(\.description)) })
        #expect(fields["zip"] == ["address.zip"])
        #expect(fields["city"] == ["town"])
        #expect(fields["open"] == ["isOpen"])
        #expect(fields["verified"] == ["isVerified"])
        #expect(fields["opened"] == ["openedAt"])
        #expect(fields["owner"] == ["ownerID"])
        #expect(fields["rating"] == ["rating"])
        #expect(fields["nickname"] == ["nickname"])
        #expect(fields["labels"] == ["labels"])
        #expect(fields["zip_rating"] == ["address.zip", "rating"])

        for definition in info.indexes {
            #expect(try await catalogIndexMatchesDocuments(store, CatalogPlace.self, definition.name), "\(definition)")
        }
        #expect(try await catalogIndexCount(store, CatalogPlace.self, "labels") == 8)
        #expect(try await catalogIndexCount(store, CatalogPlace.self, "nickname") == 5)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(try await store.get(CatalogPlace.self, id: places[3].id) == places[3])
    }

    @Test func enumFieldWithANamedPathWorks() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let tickets = [
            CatalogTicket(id: UUID(), title: "a", status: .open),
            CatalogTicket(id: UUID(), title: "b", status: .closed),
            CatalogTicket(id: UUID(), title: "c", status: .open),
        ]
        try await store.insert(contentsOf: tickets)
        #expect(try await store.get(CatalogTicket.self, id: tickets[1].id) == tickets[1])
        let info = try #require(try await store.collections().first { $0.name == "catalog_tickets" })
        #expect(info.indexes == [IndexDefinition(name: "by_state", kind: .regular, fields: ["status"])])
        #expect(try await catalogIndexCount(store, CatalogTicket.self, "by_state") == 3)
        #expect(try await catalogIndexMatchesDocuments(store, CatalogTicket.self, "by_state"))
        #expect(try await store.verify().isClean)
    }

    @Test func enumFieldByItsKeyPathAloneWorks() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let tickets = [CatalogTicketUnnamed(id: UUID(), title: "a", status: .open),
                       CatalogTicketUnnamed(id: UUID(), title: "b", status: .closed)]
        try await store.insert(contentsOf: tickets)
        let info = try #require(try await store.collections().first { $0.name == "catalog_tickets_unnamed" })
        #expect(info.indexes == [IndexDefinition(name: "by_state", kind: .regular, fields: ["status"])])
        #expect(try await catalogIndexCount(store, CatalogTicketUnnamed.self, "by_state") == 2)
        #expect(try await catalogIndexMatchesDocuments(store, CatalogTicketUnnamed.self, "by_state"))
    }

    @Test func caseIterableEnumFieldWithANamedPathWorks() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let articles = [CatalogArticle(id: UUID(), phase: .draft), CatalogArticle(id: UUID(), phase: .published)]
        try await store.insert(contentsOf: articles)
        #expect(try await store.get(CatalogArticle.self, id: articles[1].id) == articles[1])
        let info = try #require(try await store.collections().first { $0.name == "catalog_articles" })
        #expect(info.indexes == [IndexDefinition(name: "by_phase", kind: .regular, fields: ["phase"])])
        #expect(try await catalogIndexMatchesDocuments(store, CatalogArticle.self, "by_phase"))
        #expect(try await store.verify().isClean)
    }

    @Test func caseIterableEnumFieldByItsKeyPathAloneWorks() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        try await store.insert(contentsOf: [CatalogArticleUnnamed(id: UUID(), phase: .draft),
                                            CatalogArticleUnnamed(id: UUID(), phase: .published)])
        let info = try #require(try await store.collections().first { $0.name == "catalog_articles_unnamed" })
        #expect(info.indexes == [IndexDefinition(name: "by_phase", kind: .regular, fields: ["phase"])])
        #expect(try await catalogIndexMatchesDocuments(store, CatalogArticleUnnamed.self, "by_phase"))
    }

    @Test func computedPropertyIsInvalidSchemaNamingTheIndex() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        await catalogExpect(.invalidSchema, mentions: ["by_loud_name", ".field("]) {
            try await store.insert(CatalogShouting(id: UUID(), name: "ann"))
        }
        // At every use, not only the first.
        await catalogExpect(.invalidSchema, mentions: ["by_loud_name"]) {
            _ = try await CatalogShouting.query().count(in: store)
        }
        #expect(try await store.collections().isEmpty)
    }

    @Test func computedIntegerPropertyIsNotMistakenForAStoredField() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        // `nextAge` is age + 1, a value the probe may also have handed to another integer field.
        await catalogExpect(.invalidSchema, mentions: ["by_next_age", ".field("]) {
            try await store.insert(CatalogAging(id: UUID(), age: 30, score: 7))
        }
        let info = try await store.collections().first { $0.name == "catalog_aging" }
        #expect(info == nil, "the index was recorded as \(String(describing: info?.indexes))")
    }

    @Test func twoIndexesWithOneNameAreInvalidSchema() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        await catalogExpect(.invalidSchema, mentions: ["'dup'", "two indexes"]) {
            try await store.insert(CatalogTwice(id: UUID(), a: 1, b: 2))
        }
        #expect(try await store.collections().isEmpty)
    }

    // MARK: Collection names

    @Test func defaultCollectionNameIsTheTypeNameAndCanBeOverridden() async throws {
        #expect(CatalogDefaultNamed.collection == "CatalogDefaultNamed")
        #expect(CatalogRenamed.collection == "catalog_renamed_things")
        let (store, dir) = try await makeStore()
        _ = dir
        try await store.insert(CatalogDefaultNamed(id: UUID(), value: 1))
        try await store.insert(CatalogRenamed(id: UUID(), value: 2))
        let names = Set(try await store.collections().map(\.name))
        #expect(names == ["CatalogDefaultNamed", "catalog_renamed_things"])
        #expect(try await CatalogDefaultNamed.query().count(in: store) == 1)
        #expect(try await CatalogRenamed.query().count(in: store) == 1)
    }
}
