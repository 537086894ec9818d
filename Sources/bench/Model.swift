import Foundation

/// The documents every peer stores: people with the fields the scenarios query, made by a seeded generator so that
/// every peer and every run get the same ones.
struct BenchPerson: Codable, Sendable, Equatable {
    struct Address: Codable, Sendable, Equatable {
        var street: String
        var city: String
        var zip: String
    }

    var id: Int64
    var name: String
    var email: String
    var age: Int           // 0..<100: one value holds 1% of the people
    var city: String       // 1,000 cities: one holds 0.1%
    var score: Double      // 0..<100, unindexed
    var active: Bool
    var tags: [String]     // 1 to 3 of 50 tags
    var createdAt: Date
    var address: Address
    var bonus: Int?        // nil for ~40%, else -50...200, drawn after every other field
}

/// SplitMix64: small, fast, and the same on every machine.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

enum People {
    static let cityCount = 1_000
    static let tagCount = 50
    static func city(_ i: Int) -> String { "city\(i)" }
    static func tag(_ i: Int) -> String { "tag\(i)" }

    /// `count` people with ids 1...count, the same for a given count on every run.
    static func make(_ count: Int, seed: UInt64 = 42) -> [BenchPerson] {
        var random = SeededGenerator(seed: seed)
        let first = ["Ann", "Bo", "Cai", "Dag", "Eva", "Finn", "Gro", "Hans", "Ida", "Jill", "Kari", "Lars"]
        let last = ["Berg", "Dahl", "Hansen", "Larsen", "Moe", "Nilsen", "Olsen", "Strand"]
        var people: [BenchPerson] = (1...max(1, count)).prefix(count).map { i in
            let cityIndex = Int.random(in: 0..<cityCount, using: &random)
            var tags: [String] = []
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let t = tag(Int.random(in: 0..<tagCount, using: &random))
                if !tags.contains(t) { tags.append(t) }
            }
            let name = "\(first[Int.random(in: 0..<first.count, using: &random)]) "
                + "\(last[Int.random(in: 0..<last.count, using: &random)])"
            return BenchPerson(
                id: Int64(i), name: name, email: "person\(i)@example.com",
                age: Int.random(in: 0..<100, using: &random), city: city(cityIndex),
                score: Double(Int.random(in: 0..<1_000_000, using: &random)) / 10_000,
                active: Bool.random(using: &random), tags: tags,
                createdAt: Date(timeIntervalSince1970: 1_600_000_000 + Double(Int.random(in: 0..<100_000_000, using: &random))),
                address: .init(street: "Street \(Int.random(in: 1...500, using: &random))", city: city(cityIndex),
                               zip: String(format: "%04d", Int.random(in: 0..<10_000, using: &random))))
        }
        // Drawn after every person's other fields, so that those keep the values they had before bonus existed.
        for i in people.indices where Int.random(in: 0..<5, using: &random) >= 2 {
            people[i].bonus = Int.random(in: -50...200, using: &random)
        }
        return people
    }
}
