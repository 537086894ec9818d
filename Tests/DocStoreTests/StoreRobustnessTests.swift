import Foundation
import Testing
@testable import DocStore

private struct Gadget: Document {
    var id: Int
    var score: Int
    static let collection = "gadgets"
    static let indexes: [IndexSpec<Gadget>] = [.index("score", \.score)]
}

/// The same collection, where "score" becomes unique: a change that fails on duplicate scores.
private struct GadgetUniqueScore: Document {
    var id: Int
    var score: Int
    static let collection = "gadgets"
    static let indexes: [IndexSpec<GadgetUniqueScore>] = [.unique("score", \.score)]
}

private struct Note: Document {
    var id: String
    var text: String
}

private indirect enum Chain: Codable, Sendable {
    case end
    case link(Chain)
}

private struct Tree: Codable, Sendable, Equatable {
    var replies: [Tree]
}

private struct Thread: Document, Equatable {
    var id: Int
    var tree: Tree
    static let collection = "threads"
}

/// A type that holds itself twice over, in arrays, and a class that does through optionals: a probe that followed
/// each into itself would make 2^depth values.
private struct Category: Codable, Sendable, Equatable {
    var name: String
    var children: [Category]
    var related: [Category]
}

private final class Node: Codable, @unchecked Sendable, Equatable {
    var label: String
    var left: Node?
    var right: Node?
    init(label: String, left: Node? = nil, right: Node? = nil) { (self.label, self.left, self.right) = (label, left, right) }
    static func == (a: Node, b: Node) -> Bool { a.label == b.label && a.left == b.left && a.right == b.right }
}

private struct Catalogue: Document, Equatable {
    var id: Int
    var title: String
    var root: Category
    var tree: Node
    static let collection = "catalogues"
    static let indexes: [IndexSpec<Catalogue>] = [.index("title", \.title), .index("root_name", \.root.name)]
}

private struct ChainDocument: Document {
    var id: Int
    var chain: Chain
}

private struct Limits: Document {
    var id: Int
    var hasLimit: Bool
    var cap: Double
    var effectiveLimit: Double { hasLimit ? cap : .infinity }
    static let indexes: [IndexSpec<Limits>] = [.index("limit", \.effectiveLimit)]
}

@Suite struct StoreRobustnessTests {
    @Test func aCatalogChangeThatFailsLeavesTheStoreUsable() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: [Gadget(id: 1, score: 5), Gadget(id: 2, score: 5)])
        await expectError(.uniqueViolation, mentions: ["score"]) { try await store.prepare(GadgetUniqueScore.self) }
        // The failed rebuild dropped and recreated databases inside an aborted transaction: nothing of it may linger.
        try await store.insert(Gadget(id: 3, score: 7))
        try await store.write { try $0.insert(.object([("id", .int(4)), ("text", .string("x"))]), into: "other") }
        try await store.insert(Gadget(id: 5, score: 9))
        #expect(try await Gadget.query().count(in: store) == 4)
        #expect(try await store.entries(of: Gadget.self, index: "score").count == 4)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func aRefusedWriteCaughtInsidePerformLeavesNothingHalfDone() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com")
        var bob = Person(name: "Bob", age: 30, email: "bob@example.com")
        try await store.insert(contentsOf: [ann, bob])
        bob.email = "ann@example.com"
        bob.age = 31
        let stolen = bob
        try await store.write { ctx in
            do { try ctx.save(stolen) } catch DocStoreError.uniqueViolation { /* carry on */ }
            try ctx.insert(Person(name: "Cy", age: 7))
        }
        #expect(try await store.get(Person.self, id: bob.id)?.email == "bob@example.com", "Bob must be unchanged")
        #expect(try await Person.query().count(in: store) == 3)
        try await store.delete(Person.self, id: bob.id)
        // Ann's email is still enforced.
        await expectError(.uniqueViolation) { try await store.insert(Person(name: "Dup", age: 1, email: "ann@example.com")) }
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func aDamagedDocumentCanBeReplacedOrDeleted() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com", tags: ["a"])
        let bob = Person(name: "Bob", age: 30, email: "bob@example.com")
        try await store.insert(contentsOf: [ann, bob])
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            for person in [ann, bob] {
                try ctx.txn.put(handle.documents, try CollectionHandle.idKey(person.id, collection: "people"), [1, 0x0E, 0xFF])
            }
        }
        #expect(try await store.verify().problems.contains { $0.kind == .corruptDocument })
        try await store.save(ann)
        #expect(try await store.delete(Person.self, id: bob.id))
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func documentsNestedBeyondTheLimitAreRefusedNotFatal() async throws {
        var bytes: [UInt8] = [BinaryFormat.version]
        let depth = 100_000
        for level in 0..<depth {
            bytes.append(BinaryFormat.Tag.array)
            let length = UInt32((depth - level - 1) * 9 + 1)
            withUnsafeBytes(of: length.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: UInt32(1).littleEndian) { bytes.append(contentsOf: $0) }
        }
        bytes.append(BinaryFormat.Tag.null)
        #expect(throws: DocStoreError.self) { _ = try DocumentValue(encoded: bytes) }

        // A document no reader would read back is refused when written (it was stored, and then every read of it,
        // its collection's dump and verify() failed); one just within the limit reads back and dumps.
        var chain = Chain.end
        for _ in 0..<300 { chain = .link(chain) }
        #expect(throws: (any Error).self) { _ = try DocumentEncoder().encode(ChainDocument(id: 1, chain: chain)) }
        func nested(_ levels: Int) -> Thread {
            var tree = Tree(replies: [])
            for _ in 1..<levels { tree = Tree(replies: [tree]) }
            return Thread(id: levels, tree: tree)
        }
        let (store, dir) = try await makeStore()
        await expectError(.encodingFailed, mentions: ["deeper than"]) { try await store.insert(nested(300)) }
        // Two containers a level (the tree's object and its replies' array), and the root: 127 levels are 255.
        try await store.insert(nested(127))
        await expectError(.encodingFailed) { try await store.insert(nested(128)) }
        #expect(try await store.get(Thread.self, id: 127) == nested(127))
        #expect(try await Thread.query().count(in: store) == 1)
        #expect(try await store.verify().isClean)
        if !engineIsServer { try await store.dump(to: dir.path("chains.ndjson")) }
        await store.close()
    }

    /// Types that hold themselves several times over are probed in bounded time and space, and their fields are
    /// indexed and queried like any other.
    @Test func aModelThatHoldsItselfTwiceIsProbedAndQueried() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let leaf = Category(name: "leaf", children: [], related: [])
        let catalogues = (0..<20).map { i in
            Catalogue(id: i, title: "t\(i % 4)",
                      root: Category(name: "c\(i % 3)", children: [leaf, leaf], related: [leaf]),
                      tree: Node(label: "n\(i)", left: Node(label: "l"), right: Node(label: "r", right: Node(label: "rr"))))
        }
        try await store.insert(contentsOf: catalogues)
        let query = Catalogue.include(#Predicate { $0.root.name == "c1" && $0.title == "t2" })
        #expect(try await query.results(in: store).map(\.id) == catalogues.filter { $0.root.name == "c1" && $0.title == "t2" }.map(\.id))
        #expect(try await query.explain(in: store).index != nil)
        #expect(try await store.get(Catalogue.self, id: 7) == catalogues[7])
        #expect(try await store.verify().isClean)
    }

    @Test func aComputedPropertyThatIsInfiniteIsRefusedNotFatal() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        await expectError(.invalidSchema, mentions: ["limit"]) { try await store.insert(Limits(id: 1, hasLimit: false, cap: 3)) }
    }

    @Test func anIdTooLongForLMDBIsValueTooLarge() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let long = String(repeating: "x", count: 600)
        await expectError(.valueTooLarge) { _ = try await store.get(Note.self, id: long) }
        await expectError(.valueTooLarge) { try await store.insert(Note(id: long, text: "")) }
        #expect(try await Note.query().count(in: store) == 0)
    }
}

/// An element that takes its array's super encoder and writes nothing through it (a base class with nothing to
/// encode), then an element written plainly.
private struct SilentSuper: Encodable {
    func encode(to encoder: any Encoder) throws {
        var list = encoder.unkeyedContainer()
        _ = list.superEncoder()
        try list.encode(7)
    }
}

private struct HoldsSilentSuper: Encodable {
    var id = 1
    var list = SilentSuper()
}

@Suite struct SuperEncoderTests {
    /// An array's super encoder that is never written through leaves no slot: the array holds what was written and
    /// reads back, where its count said one element more than it held and every read of the document failed.
    @Test func anUnusedSuperEncoderOfAnArrayLeavesADocumentThatReads() throws {
        let bytes = try DocumentEncoder().encode(HoldsSilentSuper())
        let value = try DocumentValue(encoded: bytes)
        #expect(value[path: "list"] == .array([.int(7)]), "\(value)")
    }
}
