import Foundation
import Testing
@testable import DocStore

// A predicate's `contains`, `contains(where:)`, `allSatisfy` and `filter` on a field are tested where the value lies
// only when the document keeps it as an array. `Data` is kept as bytes, not as an array of them: on it (whose
// predicates go to Foundation, as the key-path probe does not resolve a `Data` field), as on an array of bytes, each
// predicate must answer as Foundation's `Predicate.evaluate` does on the decoded model.

private struct Blob: Document, Equatable {
    var id: Int
    var payload: Data
    var bytes: [UInt8]

    static let collection = "blobs"
    static let indexes: [IndexSpec<Blob>] = [.multi("bytes", \.bytes)]
}

@Suite struct SequenceFieldTests {
    @Test func dataFieldsAnswerAsFoundationDoes() async throws {
        var rng = SeededGenerator(seed: 0x5E0_F1E1D)
        let models = (1...80).map { id in
            let payload = (0..<Int.random(in: 0...4, using: &rng)).map { _ in UInt8.random(in: 0...9, using: &rng) }
            return Blob(id: id, payload: Data(payload), bytes: payload)
        }
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: models)
        let five: UInt8 = 5
        let predicates: [(String, Predicate<Blob>)] = [
            ("payload.contains(5)", #Predicate { $0.payload.contains(five) }),
            ("payload.contains { > 5 }", #Predicate { $0.payload.contains { $0 > five } }),
            ("payload.allSatisfy { > 5 }", #Predicate { $0.payload.allSatisfy { $0 > five } }),
            ("payload.filter { > 5 }.count > 1", #Predicate { $0.payload.filter { $0 > five }.count > 1 }),
            ("bytes.contains(5)", #Predicate { $0.bytes.contains(five) }),
            ("bytes.allSatisfy { > 5 }", #Predicate { $0.bytes.allSatisfy { $0 > five } }),
        ]
        for (name, predicate) in predicates {
            let expected = models.filter { (try? predicate.evaluate($0)) ?? false }.map(\.id)
            let found = try await Blob.include(predicate).results(in: store).map(\.id)
            #expect(found == expected, "\(name): found \(found), expected \(expected)")
            #expect(!expected.isEmpty && expected.count < models.count, "\(name) tells the documents apart")
        }
    }
}
