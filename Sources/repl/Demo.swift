import DocStore
import Foundation

/// The store `docstore --demo` opens: people with the fields and indexes the README's examples use.
enum Demo {
    static let cities = ["Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø", "Copenhagen", "Stockholm", "Helsinki"]
    static let firstNames = ["Ann", "Bo", "Cai", "Dag", "Eva", "Finn", "Gro", "Hans", "Ida", "Jill", "Kari", "Lars",
                             "Mia", "Nils", "Ola", "Pia", "Rolf", "Siri", "Tor", "Una", "Vera", "Åse", "Øystein"]
    static let lastNames = ["Berg", "Dahl", "Eriksen", "Hansen", "Johansen", "Larsen", "Moe", "Nilsen", "Olsen",
                            "Strand", "Lie", "Haugen"]
    static let tags = ["swift", "rust", "go", "python", "lmdb", "sqlite", "linux", "cycling", "chess", "music"]

    /// Creates the demo store in a new temporary folder and returns its path.
    static func create(count: Int = 1_000) async throws -> String {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("docstore-demo-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("demo.db").path
        let store = try await DocStore(path: path)
        let people = (1...count).map(person)
        try await store.perform { ctx in
            for p in people { try ctx.insert(p, into: "people") }
            try ctx.createIndex(IndexDefinition(name: "age", kind: .regular, fields: ["age"]), in: "people")
            try ctx.createIndex(IndexDefinition(name: "city_age", kind: .regular, fields: ["city", "age"]),
                                in: "people")
            try ctx.createIndex(IndexDefinition(name: "email", kind: .unique, fields: ["email"]), in: "people")
            try ctx.createIndex(IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]), in: "people")
        }
        await store.close()
        return path
    }

    /// Person number `n`, the same on every run.
    static func person(_ n: Int) -> DocumentValue {
        var seed = UInt64(n) &* 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            seed ^= seed >> 33
            seed = seed &* 0xFF51_AFD7_ED55_8CCD
            seed ^= seed >> 29
            return Int(seed % UInt64(bound))
        }
        let first = firstNames[next(firstNames.count)]
        let last = lastNames[next(lastNames.count)]
        let city = cities[next(cities.count)]
        var personTags: [DocumentValue] = []
        for _ in 0..<next(4) {
            let t = DocumentValue.string(tags[next(tags.count)])
            if !personTags.contains(t) { personTags.append(t) }
        }
        let created = Date(timeIntervalSince1970: 1_600_000_000 + Double(next(120_000_000)))
        var fields: [(String, DocumentValue)] = [
            ("id", .int(Int64(n))),
            ("name", .string("\(first) \(last)")),
            ("age", .int(Int64(next(90) + 1))),
            ("city", .string(city)),
            ("email", next(5) == 0 ? .null : .string("\(first.lowercased()).\(last.lowercased())\(n)@example.com")),
            ("active", .bool(next(3) != 0)),
            ("score", .double(Double(next(10_000)) / 100)),
            ("tags", .array(personTags)),
            ("createdAt", .date(created)),
            ("address", .object([("street", .string("\(last)veien \(next(200) + 1)")),
                                 ("zip", .string(String(format: "%04d", next(9000) + 1000))),
                                 ("country", .string(["Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø"]
                                    .contains(city) ? "NO" : "other"))])),
        ]
        if n % 7 == 0 { fields.removeAll { $0.0 == "email" } }
        return .object(fields)
    }
}
