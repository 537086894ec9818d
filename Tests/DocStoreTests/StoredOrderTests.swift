// Comparisons on values whose stored form does not order (or equal) as the type's own `<` (or `==`) says: a
// `Decimal`, kept as an object of its parts, and an enum that ranks its cases apart from its raw values' order. Each
// predicate's answer is checked against Foundation's own `Predicate.evaluate` on the same documents, with indexes on
// the fields; an enum whose `<` is its raw values' order is still planned on its index.

import DocStore
import Foundation
import Testing

/// Ranked as declared, which is not its raw values' order ("high" < "low" < "medium").
enum Urgency: String, Codable, Sendable, CaseIterable, Comparable {
    case low, medium, high
    static func < (a: Urgency, b: Urgency) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// Ordered by its raw values, as the store orders them.
enum Shelf: String, Codable, Sendable, CaseIterable, Comparable {
    case alpha, beta, gamma
    static func < (a: Shelf, b: Shelf) -> Bool { a.rawValue < b.rawValue }
}

struct Ware: Document, Equatable {
    var id: Int
    var price: Decimal
    var urgency: Urgency
    var shelf: Shelf
    static let collection = "wares"
    static let indexes: [IndexSpec<Ware>] = [
        .index("urgency", \.urgency), .index("shelf", \.shelf),
    ]
}

@Suite struct StoredOrderTests {
    static let prices = ["0.5", "0.50", "-3", "-0.25", "12.25", "100", "7", "0.001", "-100.5"].map { Decimal(string: $0)! }

    @Test func comparisonsOfValuesStoredOutOfTheirOrderAgreeWithFoundation() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        var rng = SeededGenerator(seed: 31)
        let wares = (0..<300).map { i in
            Ware(id: i, price: Self.prices.randomElement(using: &rng)!, urgency: Urgency.allCases.randomElement(using: &rng)!,
                 shelf: Shelf.allCases.randomElement(using: &rng)!)
        }
        try await store.insert(contentsOf: wares)
        var predicates: [(String, Predicate<Ware>)] = []
        for c in Self.prices {
            predicates.append(("price < \(c)", #Predicate<Ware> { $0.price < c }))
            predicates.append(("price >= \(c)", #Predicate<Ware> { $0.price >= c }))
            predicates.append(("price == \(c)", #Predicate<Ware> { $0.price == c }))
            predicates.append(("price != \(c)", #Predicate<Ware> { $0.price != c }))
        }
        let pair = [Self.prices[0], Self.prices[2]]
        predicates.append(("[0.5, -3].contains(price)", #Predicate<Ware> { pair.contains($0.price) }))
        let low = Decimal(-1), high = Decimal(10)
        predicates.append(("-1...10 contains price", #Predicate<Ware> { (low...high).contains($0.price) }))
        for u in Urgency.allCases {
            predicates.append(("urgency < \(u)", #Predicate<Ware> { $0.urgency < u }))
            predicates.append(("urgency >= \(u)", #Predicate<Ware> { $0.urgency >= u }))
            predicates.append(("urgency == \(u)", #Predicate<Ware> { $0.urgency == u }))
        }
        let medium = Urgency.medium, top = Urgency.high
        predicates.append(("medium...high contains urgency", #Predicate<Ware> { (medium...top).contains($0.urgency) }))
        for s in Shelf.allCases {
            predicates.append(("shelf > \(s)", #Predicate<Ware> { $0.shelf > s }))
        }
        for (name, predicate) in predicates {
            let expected = try wares.filter { try predicate.evaluate($0) }.map(\.id).sorted()
            let found = try await Ware.include(predicate).results(in: store).map(\.id).sorted()
            #expect(found == expected, "\(name): \(found.count) found, \(expected.count) expected")
        }
        // An enum whose `<` is its raw values' order is still read from its index.
        let beta = Shelf.beta
        let explained = try await Ware.include(#Predicate { $0.shelf > beta }).explain(in: store)
        #expect(explained.index == "shelf", "\(explained)")
        await store.close()
    }
}

/// A model whose coding key holds a dot: one field named `contact.email`, not `email` inside `contact`.
struct Subscriber: Document, Equatable {
    var id: Int
    var email: String
    var tier: Int
    enum CodingKeys: String, CodingKey { case id, email = "contact.email", tier }
    static let collection = "subscribers"
    static let indexes: [IndexSpec<Subscriber>] = [.unique("email", \.email), .index("tier_email", \.tier, \.email)]
}

@Suite struct DottedNameTests {
    /// A field whose name holds a dot keeps its index through the catalog (read again by a new opening) and
    /// through a dump and its restore: the name was written joined by dots and read back as two names, so that the
    /// index named a field no document has.
    @Test func anIndexOnANameWithADotSurvivesReopeningAndADump() async throws {
        let dir = TemporaryDirectory()
        let location = storeLocation(dir, "dotted")
        let subscribers = (0..<60).map { Subscriber(id: $0, email: "s\($0)@example.com", tier: $0 % 3) }
        do {
            let store = try await openStore(location)
            try await store.insert(contentsOf: subscribers)
            await store.close()
        }
        func check(_ store: DocStore, _ what: String) async throws {
            let email = "s17@example.com"
            let query = Subscriber.include(#Predicate { $0.email == email })
            #expect(try await query.results(in: store) == [subscribers[17]], "\(what)")
            #expect(try await query.explain(in: store).index == "email", "\(what)")
            #expect(try await Subscriber.include(#Predicate { $0.tier == 1 && $0.email >= "s5" }).count(in: store)
                == subscribers.filter { $0.tier == 1 && $0.email >= "s5" }.count, "\(what)")
            let report = try await store.verify()
            #expect(report.isClean, "\(what): \(report)")
            await expectError(.uniqueViolation) {
                try await store.insert(Subscriber(id: 99, email: "s3@example.com", tier: 0))
            }
        }
        let reopened = try await openStore(location)
        try await check(reopened, "reopened")
        if !engineIsServer {
            try await reopened.dump(to: dir.path("dotted.ndjson"))
            let restored = try await DocStore(path: dir.path("restored.db"))
            try await restored.restore(from: dir.path("dotted.ndjson"))
            try await check(restored, "restored")
            await restored.close()
        }
        await reopened.close()
    }
}
