import Foundation
import Testing
@testable import DocStore

/// A fresh temporary directory per test, removed when the value is released.
final class TemporaryDirectory: @unchecked Sendable {
    // @unchecked: the path is immutable after init; deinit only removes the directory.
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("docstore-tests-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}


struct Person: Document, Equatable {
    var id: UUID
    var name: String
    var age: Int
    var city: String
    var email: String?
    var tags: [String]
    static let collection = "people"
    static let indexes: [IndexSpec<Person>] = [
        .index("age", \.age),
        .index("city_age", \.city, \.age),
        .unique("email", \.email),
        .multi("tags", \.tags),
    ]

    init(id: UUID = UUID(), name: String, age: Int, city: String = "Oslo", email: String? = nil, tags: [String] = []) {
        self.id = id
        self.name = name
        self.age = age
        self.city = city
        self.email = email
        self.tags = tags
    }
}

/// A person whose stored `age` is text: a valid document of the `people` collection that does not decode as
/// ``Person``.
extension Person {
    /// A computed property: the user's own code, which a predicate can only run on the decoded model.
    var nameLength: Int { name.count }
    var hasAnEmailStartingWithA: Bool { email?.first == "a" }
}

struct PersonWithTextAge: Document {
    var id: UUID
    var name: String
    var age: String
    var city: String
    var email: String?
    var tags: [String]
    static let collection = "people"
}

/// A small deterministic generator (SplitMix64), so a failing random test can be replayed from its seed.
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

/// One index entry as stored: the encoded key and the document's primary key.
struct IndexEntry: Hashable, Sendable {
    var key: [UInt8]
    var id: [UInt8]
}

extension DocStore {
    /// Every entry of index `name` of `T`'s collection, in key order.
    func entries<T: Document>(of type: T.Type, index name: String) throws -> [IndexEntry] {
        try withWrite { ctx in
            let handle = try ctx.scope.handle(for: type)
            guard let index = handle.indexes.first(where: { $0.definition.name == name }) else { return [] }
            return try ctx.txn.withCursor(index.database) { cursor in
                var out: [IndexEntry] = []
                var entry = try cursor.first()
                while let (key, value) = entry {
                    out.append(IndexEntry(key: Array(key), id: Array(value)))
                    entry = try cursor.next()
                }
                return out
            }
        }
    }

    /// Every document of `T`, in id order.
    func all<T: Document>(_ type: T.Type) throws -> [T] {
        try withRead { try T.query().results(in: $0) }
    }
}

func idKey(_ id: UUID) throws -> [UInt8] { try CollectionHandle.idKey(id, collection: "people") }

/// Runs `body`, which must throw a ``DocStoreError`` with `code` whose message contains every string of `mentions`.
/// Returns the error, for further checks.
@discardableResult
func expectError(
    _ code: DocStoreError.Code,
    mentions: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> DocStoreError? {
    let caught = await #expect(throws: DocStoreError.self, sourceLocation: sourceLocation) {
        try await body()
    }
    guard let caught else { return nil }
    #expect(caught.code == code, "expected \(code), got \(caught.code): \(caught.message)",
            sourceLocation: sourceLocation)
    for part in mentions {
        #expect(caught.message.contains(part), "the message should name \(part): \(caught.message)",
                sourceLocation: sourceLocation)
    }
    return caught
}


/// Every result left in a cursor.
func drained<Element>(_ cursor: QueryCursor<Element>) throws -> [Element] {
    var out: [Element] = []
    while let element = try cursor.next() { out.append(element) }
    return out
}

/// An engine whose writes each run their body twice: first in a transaction that is thrown away, as a write is run
/// again after the map grew, then for real. What a body keeps outside its transaction shows in the second run.
final class WritesTwice: StorageEngine {
    let engine: any StorageEngine

    init(_ engine: any StorageEngine) { self.engine = engine }

    func read<R>(_ body: (any StorageTransaction) throws -> R) throws -> R { try engine.read(body) }

    private struct ThrownAway: Error {}

    func write<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        do { _ = try engine.write { txn -> R in _ = try body(txn); throw ThrownAway() } } catch is ThrownAway {}
        return try engine.write(body)
    }

    func lastCommittedTransaction() throws -> Int { try engine.lastCommittedTransaction() }
    func close() { engine.close() }
    func flush() throws { try engine.flush() }
}
