// Enums as model fields: String- and Int-raw-value enums, optional ones and ones inside nested structs, used as
// index fields, group keys, sort keys, projections and planned predicates, checked against the documents in memory.

import DocStore
import Foundation
import Testing

enum Airport: String, Codable, Sendable, Hashable {
    case EWR, JFK, LGA
}

enum Level: Int, Codable, Sendable, Hashable, CaseIterable {
    case low = 1, mid = 2, high = 3
}

struct Leg: Codable, Sendable, Equatable {
    var from: Airport
    var level: Level?
}

struct Flight: Document, Equatable {
    var id: Int
    var origin: Airport
    var dest: Airport?
    var level: Level
    var time: Int
    var leg: Leg
    var stops: [Airport]
    static let collection = "flights"
    static let indexes: [IndexSpec<Flight>] = [
        .unique("origin_time", \.origin, \.time),
        .index("dest", \.dest),
        .index("level", \.level),
        .index("leg_from", \.leg.from),
        .multi("stops", \.stops),
    ]
}

@Suite struct EnumFieldTests {
    static let airports: [Airport] = [.EWR, .JFK, .LGA]

    static func flights(_ n: Int, seed: UInt64) -> [Flight] {
        var rng = SeededGenerator(seed: seed)
        return (0..<n).map { i in
            Flight(id: i + 1, origin: airports.randomElement(using: &rng)!,
                   dest: Bool.random(using: &rng) ? airports.randomElement(using: &rng) : nil,
                   level: Level.allCases.randomElement(using: &rng)!, time: i,
                   leg: Leg(from: airports.randomElement(using: &rng)!,
                            level: Bool.random(using: &rng) ? Level.allCases.randomElement(using: &rng) : nil),
                   stops: (0..<Int.random(in: 0...2, using: &rng)).map { _ in airports.randomElement(using: &rng)! })
        }
    }

    static func populated() async throws -> (DocStore, TemporaryDirectory, [Flight]) {
        let (store, dir) = try await makeStore()
        let flights = flights(600, seed: 7)
        try await store.insert(contentsOf: flights)
        return (store, dir, flights)
    }

    @Test func enumKeyPathsAreStoredFieldsEverywhere() async throws {
        let (store, dir, flights) = try await Self.populated()
        defer { withExtendedLifetime(dir) {} }
        // The unique index on (origin, time) holds: a second flight at the same origin and time is refused.
        var twin = flights[0]
        twin.id = 10_000
        await #expect(throws: DocStoreError.self) { try await store.insert(twin) }

        // Groups, distinct values, sorting and projection by the enums' stored raw values.
        let groups = try await Flight.query().groupBy(\.origin).results(in: store)
        #expect(groups.map(\.key) == [.EWR, .JFK, .LGA])
        for g in groups { #expect(g.value == flights.filter { $0.origin == g.key }.count) }
        #expect(try await Flight.query().distinct(\.dest).results(in: store) == Self.airports.filter { a in
            flights.contains { $0.dest == a } })
        #expect(try await Flight.query().distinct(\.level).results(in: store) == Level.allCases)
        #expect(try await Flight.query().distinct(\.leg.from).results(in: store) == Self.airports)
        let sorted = try await Flight.query().sortBy(\.origin).sortBy(\.level, order: .reverse).results(in: store)
        #expect(sorted.map(\.id) == flights.sorted {
            ($0.origin.rawValue, -$0.level.rawValue, $0.id) < ($1.origin.rawValue, -$1.level.rawValue, $1.id)
        }.map(\.id))
        let byDest = try await Flight.query().sortBy(\.dest).results(in: store)
        #expect(byDest.map(\.id) == flights.sorted {
            ($0.dest?.rawValue ?? "", $0.id) < ($1.dest?.rawValue ?? "", $1.id)
        }.map(\.id))
        let projected = try await Flight.include(#Predicate { $0.time < 5 }).select(\.origin, \.leg.level).results(in: store)
        #expect(projected.map { $0[path: "origin"] } == flights.prefix(5).map { .string($0.origin.rawValue) })
        #expect(projected.map { $0[path: "leg.level"] ?? .null }
                == flights.prefix(5).map { $0.leg.level.map { .int(Int64($0.rawValue)) } ?? .null })
    }

    @Test func predicatesOnEnumFieldsArePlannedOntoTheirIndexes() async throws {
        let (store, dir, flights) = try await Self.populated()
        defer { withExtendedLifetime(dir) {} }
        for airport in Self.airports {
            let a = airport
            let raw = airport.rawValue
            let optional: Airport? = airport
            let cases: [(Query<Flight>, [Flight], String)] = [
                (Flight.include(#Predicate { $0.origin == a && $0.time < 300 }),
                 flights.filter { $0.origin == a && $0.time < 300 }, "origin_time"),
                // (A unique index leaves out documents with a nil field, so a query must rule nil out to use it.)
                (Flight.include(#Predicate { $0.origin.rawValue == raw && $0.time >= 0 }), flights.filter { $0.origin == a },
                 "origin_time"),
                (Flight.include(#Predicate { $0.dest == optional }), flights.filter { $0.dest == a }, "dest"),
                (Flight.include(#Predicate { $0.leg.from == a }), flights.filter { $0.leg.from == a }, "leg_from"),
                (Flight.include(#Predicate { $0.stops.contains(a) }), flights.filter { $0.stops.contains(a) }, "stops"),
            ]
            for (query, expected, index) in cases {
                let explained = try await query.explain(in: store)
                #expect(explained.index == index, "\(query): \(explained)")
                #expect(explained.statistics.documentsRead == expected.count, "\(explained)")
                #expect(try await query.results(in: store).map(\.id) == expected.map(\.id))
            }
        }
        // `!= nil` is the index's keys after nil's: counted without reading a document.
        let withDest = Flight.include(#Predicate { $0.dest != nil })
        let counted = try await store.read { try withDest.aggregate(.count).explain(in: $0) }
        #expect(counted.index == "dest" && counted.statistics.documentsRead == 0, "\(counted)")
        #expect(!counted.description.contains("order:"), "\(counted)")
        #expect(try await withDest.count(in: store) == flights.filter { $0.dest != nil }.count)
        #expect(try await withDest.results(in: store).map(\.id) == flights.filter { $0.dest != nil }.map(\.id))
        let byID = try await Flight.include(#Predicate { $0.time < 3 }).sortBy(\.id, order: .reverse).explain(in: store)
        #expect(byID.description.contains("order:    id descending;"), "\(byID)")
        let mid = Level.mid
        let atLeastMid = Flight.include(#Predicate { $0.level.rawValue >= 2 })
        #expect(try await atLeastMid.explain(in: store).index == "level")
        #expect(try await atLeastMid.results(in: store).map(\.id) == flights.filter { $0.level.rawValue >= 2 }.map(\.id))
        let isMid = Flight.include(#Predicate { $0.level == mid })
        #expect(try await isMid.explain(in: store).index == "level")
        #expect(try await isMid.count(in: store) == flights.filter { $0.level == .mid }.count)
    }
}

@Suite struct TypedFieldChangeTests {
    @Test func aFieldChangeOnATypedQueryMustLeaveDocumentsOfTheType() async throws {
        let (store, dir, flights) = try await EnumFieldTests.populated()
        defer { withExtendedLifetime(dir) {} }
        let early = Flight.include(#Predicate { $0.time < 10 })
        for changes in [[FieldChange.set("origin", .string("lost"))], [.set("time", .string("noon"))], [.unset("level")],
                        [.set("leg.from", .int(3))], [.push("stops", .string("XXX"))]] {
            do {
                try await early.update(in: store, changes)
                Issue.record("\(changes) was written")
            } catch let error as DocStoreError {
                #expect(error.code == .invalidUpdate, "\(error)")
                #expect(error.message.contains("on a query of") && error.message.contains("Flight"), "\(error)")
            }
        }
        // Nothing was written, and every document still decodes.
        #expect(try await Flight.query().results(in: store) == flights)
        // A change the type takes is made.
        #expect(try await early.update(in: store, [.set("origin", .string("JFK")), .set("leg.level", .null)]) == 10)
        #expect(try await early.results(in: store).allSatisfy { $0.origin == .JFK && $0.leg.level == nil })
    }
}

@Suite struct CaughtRefusalTests {
    @Test func aCaughtRefusalOfAnUpdateLeavesTheTransactionAsBeforeAsARefusedInsertDoes() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        try await store.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "code", kind: .unique, fields: ["code"]), in: "c")
            for (i, n) in [DocumentValue.int(1), .int(2), .string("x"), .int(4)].enumerated() {
                try ctx.insert(.object([("id", .int(Int64(i + 1))), ("n", n), ("code", .string("c\(i)"))]), into: "c")
            }
        }
        let all = Query<DocumentValue>("c")
        let before = try await all.results(in: store)
        try await store.write { ctx in
            try ctx.insert(.object([("id", .int(10)), ("n", .int(0)), ("code", .string("marker"))]), into: "c")
            // The first two documents take the increment, the third refuses it: the whole update is undone.
            expect(code: .invalidUpdate) { try all.update(in: ctx, [.increment("n", .int(1))]) }
            // So is one whose second document takes a code the first already holds.
            expect(code: .uniqueViolation) {
                try all.include(.compare("id", .lessOrEqual, .int(2))).update(in: ctx, [.set("code", .string("same"))])
            }
            expect(code: .uniqueViolation) {
                try ctx.insert(.object([("id", .int(11)), ("code", .string("c0"))]), into: "c")
            }
            expect(code: .invalidUpdate) {
                try ctx.update("c", id: .int(3), [.set("code", .string("fine")), .increment("n", .int(1))])
            }
        }
        // The marker committed; every refused change left nothing behind.
        let after = try await all.results(in: store)
        #expect(Array(after.prefix(4)) == before)
        #expect(after.count == 5)
        #expect(try await store.verify().isClean)
    }
}

/// Expects `body` to throw a ``DocStoreError`` with `code`.
private func expect(code: DocStoreError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("no error was thrown; expected \(code)", sourceLocation: sourceLocation)
    } catch {
        #expect((error as? DocStoreError)?.code == code, "\(error)", sourceLocation: sourceLocation)
    }
}

@Suite struct UntypedAnswerTests {
    @Test func literalsDescriptionsAndDecodingOfUntypedValues() async throws {
        let ann: DocumentValue = ["id": 1, "name": "Ann", "score": 9.5, "active": true, "tags": ["a", "b"]]
        #expect(ann == .object([("id", .int(1)), ("name", .string("Ann")), ("score", .double(9.5)), ("active", .bool(true)),
                                ("tags", .array([.string("a"), .string("b")]))]))
        #expect("\(ann)" == #"{"id":1,"name":"Ann","score":9.5,"active":true,"tags":["a","b"]}"#)
        #expect(try DocumentValue.string("JFK").decoded(as: Airport.self) == .JFK)
        #expect(try DocumentValue.int(2).decoded(as: Level.self) == .mid)

        let (store, dir, flights) = try await EnumFieldTests.populated()
        defer { withExtendedLifetime(dir) {} }
        let groups = try await Query<DocumentValue>("flights").groupBy("origin", "level").results(in: store)
        #expect("\(groups[0].key)" == #"["EWR", 1]"#)
        let typed = try groups.map { (try $0.key[0].decoded(as: Airport.self), try $0.key[1].decoded(as: Level.self), $0.value) }
        for (origin, level, count) in typed {
            #expect(count == flights.filter { $0.origin == origin && $0.level == level }.count)
        }
        // Field changes written as literals.
        #expect(try await Query<DocumentValue>("flights").include(.compare("time", .less, 3))
            .update(in: store, set: ["origin": "LGA"]) == 3)
        #expect(try await Flight.include(#Predicate { $0.time < 3 }).results(in: store).allSatisfy { $0.origin == .LGA })
    }
}

@Suite struct TypedGroupPairTests {
    @Test func groupsByTwoKeyPathsHavePairsForKeys() async throws {
        let (store, dir, flights) = try await EnumFieldTests.populated()
        defer { withExtendedLifetime(dir) {} }
        let groups = try await Flight.query().groupBy(\.origin, \.dest).results(in: store)
        var expected: [String: Int] = [:]
        for f in flights { expected["\(f.origin)/\(f.dest.map { "\($0)" } ?? "nil")", default: 0] += 1 }
        #expect(groups.count == expected.count)
        for g in groups { #expect(g.value == expected["\(g.key.0)/\(g.key.1.map { "\($0)" } ?? "nil")"]) }
        // Key order: by origin, then dest with nil first.
        #expect(groups.first.map { $0.key.0 == .EWR && $0.key.1 == nil } == true)
        let averages = try await Flight.query().groupBy(\.origin, \.level, .average(\.time)).results(in: store)
        #expect(averages.count == 9)
    }
}

/// Key paths that read an enum without being its field: a computed property, or the struct that holds it.
struct Booking: Document, Equatable {
    var id: Int
    var origin: Airport
    var leg: Leg
    var fromNewark: Bool { origin == .EWR }
    var label: String { origin.rawValue.lowercased() }
    static let collection = "bookings"
}

@Suite struct EnumProbeTests {
    @Test func computedPropertiesReadingAnEnumAreNotItsField() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        let bookings = (1...30).map { Booking(id: $0, origin: EnumFieldTests.airports[$0 % 3],
                                              leg: Leg(from: EnumFieldTests.airports[($0 / 3) % 3], level: nil)) }
        try await store.insert(contentsOf: bookings)
        // Evaluated on the decoded documents, and right.
        let newark = try await Booking.include(#Predicate { $0.fromNewark }).results(in: store)
        #expect(newark == bookings.filter(\.fromNewark))
        let label = try await Booking.include(#Predicate { $0.label == "jfk" }).results(in: store)
        #expect(label == bookings.filter { $0.label == "jfk" })
        // Not stored fields: refused, as for any computed property.
        await #expect(throws: DocStoreError.self) { try await Booking.query().groupBy(\.label).results(in: store) }
        await #expect(throws: DocStoreError.self) { try await Booking.query().distinct(\.fromNewark).results(in: store) }
        // The enum inside the struct is a field; the struct key path is not an enum's.
        #expect(try await Booking.query().distinct(\.leg.from).results(in: store) == EnumFieldTests.airports)
    }

    @Test func anUpdateClosureMayReadThroughTheContext() async throws {
        let (store, dir, flights) = try await EnumFieldTests.populated()
        defer { withExtendedLifetime(dir) {} }
        let changed = try await store.write { ctx in
            try Flight.include(#Predicate { $0.time < 5 }).update(in: ctx) { flight in
                flight.time += try Flight.query().count(in: ctx) * 1_000
            }
        }
        #expect(changed == 5)
        #expect(try await Flight.include(#Predicate { $0.time >= 600_000 }).count(in: store) == 5)
        _ = flights
    }
}
