// Text compared ignoring case (Filter.equalIgnoringCase, hasPrefixIgnoringCase, containsIgnoringCase), against the
// documents in memory compared with their ASCII letters lowered.

import DocStore
import Foundation
import Testing

@Suite struct CaseInsensitiveTextTests {
    /// ASCII lowering, independent of the folding the store uses.
    static func lowered(_ s: String) -> String {
        String(s.unicodeScalars.map { c in
            ("A"..."Z").contains(c) ? Character(Unicode.Scalar(c.value + 32)!) : Character(c)
        })
    }

    @Test(arguments: [false, true])
    func textTestsIgnoringCaseMatchALoweredComparison(indexed: Bool) async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        var rng = SeededGenerator(seed: indexed ? 31 : 32)
        let letters = Array("aAbBnN ")
        func word() -> String { String((0..<Int.random(in: 0...5, using: &rng)).map { _ in letters.randomElement(using: &rng)! }) }
        var names: [Int: DocumentValue] = [:]
        try await store.write { ctx in
            if indexed { try ctx.createIndex(IndexDefinition(name: "name", kind: .regular, fields: ["name"]), in: "people") }
        }
        for id in 1...300 {
            // Mostly text; sometimes a number, nil, or no field at all.
            let value: DocumentValue? = switch id % 10 {
            case 0: .int(Int64(id))
            case 1: .null
            case 2: nil
            default: .string(word())
            }
            names[id] = value
        }
        let all = names
        try await store.write { ctx in
            for id in 1...300 {
                var fields: [(String, DocumentValue)] = [("id", .int(Int64(id)))]
                if let v = all[id] { fields.append(("name", v)) }
                try ctx.insert(.object(fields), into: "people")
            }
        }
        for _ in 0..<60 {
            let search = word()
            let key = Self.lowered(search)
            for (filter, test) in [(Filter.equalIgnoringCase("name", search), { (s: String) in s == key }),
                                   (.hasPrefixIgnoringCase("name", search), { $0.hasPrefix(key) }),
                                   (.containsIgnoringCase("name", search), { key.isEmpty || $0.contains(key) })] {
                let expected = names.keys.sorted().filter { id in
                    if case .string(let s)? = names[id] { test(Self.lowered(s)) } else { false }
                }
                let query = Query<DocumentValue>("people").include(filter)
                let found = try await query.ids(in: store)
                #expect(found == expected.map { .int(Int64($0)) }, "\(filter)")
                #expect(try await query.count(in: store) == expected.count)
                let excluded = try await Query<DocumentValue>("people").exclude(filter).count(in: store)
                #expect(excluded == 300 - expected.count, "\(filter)")
            }
        }
        let explained = try await Query<DocumentValue>("people").include(.containsIgnoringCase("name", "An")).explain(in: store)
        #expect(explained.description.contains(#"name contains "an", ignoring case"#), "\(explained)")
    }

    @Test func lettersBeyondASCIIFoldToo() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        try await store.write { ctx in
            for (id, city) in ["Ærøskøbing", "ÆRØSKØBING", "Zürich", "ZÜRICH", "Oslo"].enumerated() {
                try ctx.insert(.object([("id", .int(Int64(id))), ("city", .string(city))]), into: "places")
            }
        }
        let places = Query<DocumentValue>("places")
        #expect(try await places.include(.equalIgnoringCase("city", "ærøskøbing")).count(in: store) == 2)
        #expect(try await places.include(.hasPrefixIgnoringCase("city", "zü")).count(in: store) == 2)
        #expect(try await places.include(.containsIgnoringCase("city", "SL")).count(in: store) == 1)
    }
}
