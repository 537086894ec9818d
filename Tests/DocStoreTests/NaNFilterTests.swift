import Foundation
import Testing
@testable import DocStore

/// A `Filter` with NaN (as the shell's `score == nan` makes) answers as a scan evaluates it, whatever index the
/// field has: NaN equals nothing and orders with nothing, so only `!=` holds. The oracle is the same filter on a
/// collection of the same documents without indexes.
@Suite struct NaNFilterTests {
    @Test func aFilterWithNaNAnswersAlikeWithAndWithoutAnIndex() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let values: [DocumentValue] = [.double(.nan), .double(3), .int(3), .double(-1), .null, .string("x")]
        try await store.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "score", kind: .regular, fields: ["score"]), in: "indexed")
            try ctx.createIndex(IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]), in: "indexed")
            try ctx.createIndex(IndexDefinition(name: "u", kind: .unique, fields: ["u"]), in: "indexed")
            for (i, value) in values.enumerated() {
                let document: DocumentValue = ["id": .int(Int64(i)), "score": value, "tags": [value, .int(Int64(i))],
                                               "u": i == 0 ? .double(.nan) : .int(Int64(i))]
                try ctx.insert(document, into: "indexed")
                try ctx.insert(document, into: "plain")
            }
        }
        var filters: [(String, Filter)] = Filter.Comparison.allCases.flatMap { op in
            [("score \(op.rawValue) nan", Filter.compare("score", op, .double(.nan))),
             ("u \(op.rawValue) nan", Filter.compare("u", op, .double(.nan)))]
        }
        filters += [("tags contains nan", .contains("tags", .double(.nan))),
                    ("score in [nan]", .oneOf("score", [.double(.nan)])),
                    ("score in [nan, 3]", .oneOf("score", [.double(.nan), .int(3)]))]
        for (name, filter) in filters {
            let indexed = try await Query<DocumentValue>("indexed").include(filter).ids(in: store)
            let plain = try await Query<DocumentValue>("plain").include(filter).ids(in: store)
            #expect(indexed == plain, "\(name): \(indexed) with indexes, \(plain) without")
            let counted = try await Query<DocumentValue>("indexed").include(filter).count(in: store)
            #expect(counted == plain.count, "\(name): count")
        }
    }
}
