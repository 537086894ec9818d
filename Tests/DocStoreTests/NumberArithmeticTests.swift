import Foundation
import Testing
@testable import DocStore

/// Numbers are added in three places: an `increment` update, a `+` in a computed condition, and the `sum`
/// aggregate (from the documents, and from an index's keys). Over random pairs of numbers of every kind and range:
/// an increment and a `+` give what Swift gives (a `Double` on either side adds as Doubles; integers add exactly, a
/// sum past `Int64.max` of an unsigned number staying unsigned), the two sums agree with each other, and with the
/// increment wherever no `Double` is involved (a sum read from index keys cannot tell `3` from `3.0`).
@Suite struct NumberArithmeticTests {
    static func number(using rng: inout SeededGenerator) -> DocumentValue {
        switch Int.random(in: 0..<12, using: &rng) {
        case 0: return .int(Int64.random(in: -1000...1000, using: &rng))
        case 1: return .int(Int64.max - Int64.random(in: 0...3, using: &rng))
        case 2: return .int(Int64.min + Int64.random(in: 0...3, using: &rng))
        case 3: return .uint(UInt64(Int64.max) + UInt64.random(in: 1...1000, using: &rng))
        case 4: return .uint(UInt64.max - UInt64.random(in: 0...3, using: &rng))
        case 5: return .double(Double(Int.random(in: -1000...1000, using: &rng)))
        case 6: return .double(Double(Int.random(in: -1000...1000, using: &rng)) + 0.25)
        case 7: return .double([0x1p62, 0x1p63, -0x1p63, 0x1p64 - 2048, 0x1p64, 0x1p53 + 2].randomElement(using: &rng)!)
        case 8: return .double(.nan)
        case 9: return .double(Bool.random(using: &rng) ? .infinity : -.infinity)
        case 10: return .double(Bool.random(using: &rng) ? 1e300 : -1e300)
        default: return .int(Int64.random(in: .min ... .max, using: &rng))
        }
    }

    /// The same value of the same kind (NaN being itself); `nil` is an overflow.
    static func same(_ a: DocumentValue?, _ b: DocumentValue?) -> Bool {
        if case .double(let x)? = a, case .double(let y)? = b { return x.bitPattern == y.bitPattern || (x.isNaN && y.isNaN) }
        return a == b
    }

    /// `a + b` as Swift computes it, over the kinds a document holds; `nil` for an overflow.
    static func swiftSum(_ a: DocumentValue, _ b: DocumentValue) -> DocumentValue? {
        func parts(_ v: DocumentValue) -> (Int128?, Double) {
            switch v {
            case .int(let i): (Int128(i), Double(i))
            case .uint(let u): (Int128(u), Double(u))
            case .double(let d): (nil, d)
            default: (nil, .nan)
            }
        }
        let (x, dx) = parts(a), (y, dy) = parts(b)
        guard let x, let y else { return .double(dx + dy) }
        let sum = x + y
        if let i = Int64(exactly: sum) { return .int(i) }
        if x > Int128(Int64.max) || y > Int128(Int64.max), let u = UInt64(exactly: sum) { return .uint(u) }
        return nil
    }

    @Test func incrementPlusAndSumAgreeOnRandomPairs() async throws {
        var options = DocStore.Options()
        options.durability = .off
        let (store, dir) = try await makeStore(options: options)
        defer { _ = dir }
        var rng = SeededGenerator(seed: 0x5EED_ADD5)
        let pairs = (0..<300).map { _ in (Self.number(using: &rng), Self.number(using: &rng)) }
        try await store.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "pair_v", kind: .regular, fields: ["pair", "v"]), in: "indexed")
            for (i, (a, b)) in pairs.enumerated() {
                for collection in ["scanned", "indexed"] {
                    for v in [a, b] { try ctx.insert(.object([("pair", .int(Int64(i))), ("v", v)]), into: collection) }
                }
                try ctx.insert(.object([("id", .int(Int64(i))), ("v", a)]), into: "updated")
            }
        }
        let fromIndex = try await Query<DocumentValue>("indexed").include(.compare("pair", .equal, .int(0)))
            .aggregate(.sum("v")).explain(in: store)
        #expect("\(fromIndex)".contains("pair_v"), "the sum is not read from the index: \(fromIndex)")
        for (i, (a, b)) in pairs.enumerated() {
            let expression = ValueExpression.Number(a)!.applying(.add, ValueExpression.Number(b)!)?.value
            var sums: [String: DocumentValue?] = [:]
            for collection in ["scanned", "indexed"] {
                let q = Query<DocumentValue>(collection).include(.compare("pair", .equal, .int(Int64(i))))
                do { sums[collection] = try await q.aggregate(.sum("v")).value(in: store) } catch let error as DocStoreError {
                    #expect(error.code == .overflow, "\(a) + \(b): \(error)")
                    sums[collection] = .some(nil)
                }
            }
            let updated: DocumentValue?
            let one = Query<DocumentValue>("updated").include(.compare("id", .equal, .int(Int64(i))))
            do {
                _ = try await one.update(in: store, [.increment("v", b)])
                updated = try await one.first(in: store)?[field: "v"]
            } catch let error as DocStoreError {
                #expect(error.code == .overflow, "\(a) + \(b): \(error)")
                updated = nil
            }
            #expect(Self.same(expression, updated), "\(a) + \(b): a condition's + gives \(String(describing: expression)), an increment \(String(describing: updated))")
            #expect(Self.same(Self.swiftSum(a, b), updated), "\(a) + \(b): Swift gives \(String(describing: Self.swiftSum(a, b))), an increment \(String(describing: updated))")
            #expect(Self.same(sums["scanned"]!, sums["indexed"]!), "\(a) + \(b): sum gives \(String(describing: sums["scanned"]!)), from an index \(String(describing: sums["indexed"]!))")
            var integers = true
            for v in [a, b] { if case .double = v { integers = false } }
            if integers {
                #expect(Self.same(sums["scanned"]!, updated), "\(a) + \(b): sum gives \(String(describing: sums["scanned"]!)), an increment \(String(describing: updated))")
            }
        }
    }
}
