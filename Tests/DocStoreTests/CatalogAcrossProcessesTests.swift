import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore

/// The child process in its `catalog-on-cue` mode: each catalog change is sent as a line, and ``make(_:)`` returns
/// once the child has committed it. The child keeps the store open the whole time, as a second shell would.
final class CatalogChild {
    private let process = ChildProcess()
    private let cues = Pipe()
    private let answers = Pipe()
    private let complaints = Pipe()
    private var unread: [UInt8] = []

    init(path: String) throws {
        process.executableURL = CrashSafetyTests.writerURL
        process.arguments = ["catalog-on-cue", path]
        process.standardInput = cues
        process.standardOutput = answers
        process.standardError = complaints
        try process.run()
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

    struct Failed: Error, CustomStringConvertible { var description: String }

    /// Sends one change and waits for the child's answer; the change is committed when this returns.
    ///
    /// The wait blocks its thread: the child answers as soon as it has committed, and a suspended task could
    /// resume after the test has moved on.
    func make(_ change: String) throws {
        try cues.fileHandleForWriting.write(contentsOf: Data((change + "\n").utf8))
        let answer = try nextLine()
        guard answer == "ok" else { throw Failed(description: "the child could not make '\(change)': \(answer)") }
    }

    private func nextLine() throws -> String {
        while true {
            if let end = unread.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: unread[..<end], as: UTF8.self)
                unread.removeSubrange(...end)
                return line
            }
            let data = answers.fileHandleForReading.availableData
            guard !data.isEmpty else {
                let complaint = String(decoding: complaints.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                throw Failed(description: "the child ended without answering: \(complaint)")
            }
            unread += data
        }
    }

    /// Ends the child's input, waits for it to exit, and returns its exit status.
    func finish() throws -> Int32 {
        try cues.fileHandleForWriting.close()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// A process that has a store open follows the catalog changes another process makes: every read below is made
/// once, and must answer on that first try.
@Suite(.ownThreads) struct CatalogAcrossProcessesTests {
    /// Every collection with its number of documents, in one read transaction, as the shell's `.collections` reads.
    static func listing(_ store: DocStore) async throws -> [String: Int] {
        let rows = try await store.read { ctx in try ctx.collections().map { ($0.name, try Query<DocumentValue>($0.name).count(in: ctx)) } }
        return Dictionary(uniqueKeysWithValues: rows)
    }

    /// The ids of the documents of `collection` whose `field` is `value`, and the index the plan reads.
    static func matches(_ collection: String, _ field: FieldPath, _ value: DocumentValue,
                        in store: DocStore) async throws -> (ids: [DocumentValue], index: String?) {
        let query = Query<DocumentValue>(collection).include(.compare(field, .equal, value))
        return try await store.read { ctx in
            (try query.results(in: ctx).compactMap { $0[field: "id"] }, try query.explain(in: ctx).index)
        }
    }

    /// Opens a store in which this process has made and read collections `own0` ... `own5` (3 documents each).
    static func storeWithOwnCollections() async throws -> (DocStore, TemporaryDirectory, [String: Int]) {
        let (store, dir) = try await makeStore()
        try await store.write { ctx in
            for c in 0..<6 {
                for i in 1...3 { try ctx.save(.object([.init("id", .int(Int64(i))), .init("n", .int(Int64(i)))]),
                                              into: "own\(c)") }
            }
        }
        let own = Dictionary(uniqueKeysWithValues: (0..<6).map { ("own\($0)", 3) })
        #expect(try await listing(store) == own)
        return (store, dir, own)
    }

    static func ints(_ values: [Int]) -> [DocumentValue] { values.map { .int(Int64($0)) } }

    @Test func collectionsAndIndexesAnotherProcessCreatesAreReadOnTheFirstTry() async throws {
        let (store, dir, own) = try await Self.storeWithOwnCollections()
        defer { _ = dir }
        let child = try CatalogChild(path: store.path)
        var expected = own
        for round in 0..<4 {
            let plain = "new\(round)", indexed = "indexed\(round)"
            try child.make("create \(plain) \(5 + round) r\(round)")
            try child.make("create \(indexed) 9 r\(round)")
            try child.make("index \(indexed) by_group group")
            expected[plain] = 5 + round
            expected[indexed] = 9

            #expect(try await Self.listing(store) == expected, "round \(round)")
            #expect(try await store.read { try Query<DocumentValue>(plain).count(in: $0) } == 5 + round, "round \(round)")
            let infos = try await store.collections()
            #expect(infos.first { $0.name == indexed }?.indexes.map(\.name) == ["by_group"], "round \(round)")
            let (ids, index) = try await Self.matches(indexed, "group", .string("g1"), in: store)
            #expect(ids == Self.ints([1, 4, 7]), "round \(round)")
            #expect(index == "by_group", "round \(round): the index the other process made is not used")
        }
        // A typed collection with indexes, made by the other process: this process's type finds them all there.
        try child.make("people 4")
        #expect(try await Person.query().count(in: store) == 4)
        let adults = try await store.read { try Person.include(#Predicate { $0.age >= 18 }).sortBy(\.age).count(in: $0) }
        #expect(adults == 4)
        #expect(try child.finish() == 0)
        #expect(try await store.verify().isClean)
    }

    @Test func aCollectionAnotherProcessDropsAndMakesAgainIsReadAsItIsNow() async throws {
        let (store, dir, own) = try await Self.storeWithOwnCollections()
        defer { _ = dir }
        let child = try CatalogChild(path: store.path)
        try child.make("create shared 6 first")
        var expected = own
        expected["shared"] = 6
        #expect(try await Self.listing(store) == expected)

        for round in 0..<3 {
            // Made again alike (same catalog entry), with other documents.
            let count = 4 + round
            try child.make("drop shared")
            try child.make("create shared \(count) r\(round)")
            expected["shared"] = count
            #expect(try await Self.listing(store) == expected, "round \(round)")
            let tags = try await store.read { ctx in try Query<DocumentValue>("shared").results(in: ctx).compactMap { $0[field: "tag"] } }
            #expect(tags == Array(repeating: .string("r\(round)"), count: count), "round \(round)")
            let (ids, _) = try await Self.matches("shared", "tag", .string("r\(round)"), in: store)
            #expect(ids == Self.ints(Array(1...count)), "round \(round)")
        }

        // Made again with an index.
        try child.make("drop shared")
        try child.make("create shared 9 indexed")
        try child.make("index shared by_group group")
        expected["shared"] = 9
        #expect(try await Self.listing(store) == expected)
        let (ids, index) = try await Self.matches("shared", "group", .string("g2"), in: store)
        #expect(ids == Self.ints([2, 5, 8]))
        #expect(index == "by_group")

        // Dropped for good.
        try child.make("drop shared")
        expected["shared"] = nil
        #expect(try await Self.listing(store) == expected)
        #expect(try await store.read { try Query<DocumentValue>("shared").count(in: $0) } == 0)
        #expect(try await Self.matches("shared", "group", .string("g2"), in: store).ids == [])
        #expect(try child.finish() == 0)
        #expect(try await store.verify().isClean)
    }

    /// A read opens the collections it meets; one that throws afterwards leaves them open and right.
    @Test func aReadThatThrowsAfterOpeningCollectionsLeavesThemUsable() async throws {
        struct Stop: Error {}
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let writer = try await DocStore(path: path)
        try await writer.insert(contentsOf: [Person(name: "Ann", age: 41), Person(name: "Bob", age: 17)])
        try await writer.write { ctx in
            for i in 1...9 {
                try ctx.insert(.object([.init("id", .int(Int64(i))), .init("group", .string("g\(i % 3)"))]),
                               into: "items")
            }
            try ctx.createIndex(IndexDefinition(name: "by_group", kind: .regular, fields: ["group"]), in: "items")
        }
        await writer.close()

        // Opened again: every collection is new to this store.
        let store = try await DocStore(path: path)
        await #expect(throws: Stop.self) {
            try await store.read { ctx in
                _ = try Query<DocumentValue>("items").count(in: ctx)
                _ = try Person.query().count(in: ctx)
                throw Stop()
            }
        }
        let (ids, index) = try await Self.matches("items", "group", .string("g1"), in: store)
        #expect(ids == Self.ints([1, 4, 7]))
        #expect(index == "by_group")
        #expect(try await Person.query().count(in: store) == 2)
        try await store.insert(Person(name: "Cid", age: 30))
        try await store.write { try $0.insert(.object([.init("id", .int(10)), .init("group", .string("g1"))]),
                                                into: "items") }
        #expect(try await Self.matches("items", "group", .string("g1"), in: store).ids == Self.ints([1, 4, 7, 10]))
        #expect(try await store.verify().isClean)
    }

    @Test func anIndexAnotherProcessAddsOrDropsIsUsedOrLeftOnTheFirstTry() async throws {
        let (store, dir, own) = try await Self.storeWithOwnCollections()
        defer { _ = dir }
        try await store.write { ctx in
            for i in 1...12 {
                try ctx.save(.object([.init("id", .int(Int64(i))), .init("group", .string("g\(i % 3)"))]), into: "items")
            }
        }
        var expected = own
        expected["items"] = 12
        #expect(try await Self.listing(store) == expected)
        #expect(try await Self.matches("items", "group", .string("g0"), in: store).index == nil)

        let child = try CatalogChild(path: store.path)
        for round in 0..<3 {
            try child.make("index items by_group group")
            #expect(try await Self.listing(store) == expected, "round \(round)")
            var (ids, index) = try await Self.matches("items", "group", .string("g0"), in: store)
            #expect(ids == Self.ints(Array(stride(from: 3, through: expected["items"]!, by: 3))), "round \(round)")
            #expect(index == "by_group", "round \(round)")

            // This process's writes keep the other process's index.
            let next = expected["items"]! + 1
            try await store.write { ctx in
                try ctx.save(.object([.init("id", .int(Int64(next))), .init("group", .string("g\(next % 3)"))]),
                             into: "items")
            }
            expected["items"] = next
            #expect(try await store.verify().isClean, "round \(round)")

            try child.make("dropIndex items by_group")
            #expect(try await Self.listing(store) == expected, "round \(round)")
            (ids, index) = try await Self.matches("items", "group", .string("g0"), in: store)
            #expect(ids == Self.ints(Array(stride(from: 3, through: next, by: 3))), "round \(round)")
            #expect(index == nil, "round \(round): the index the other process dropped is still used")
        }
        #expect(try child.finish() == 0)
        #expect(try await store.verify().isClean)
    }
}
