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
