import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore

/// Documents written without their Swift type and without an id get one from the store, in the write transaction
/// that stores them: never one another writer has, in this process or another.
@Suite(.ownThreads) struct ChosenIDTests {
    @Test func aDocumentWithoutAnIDGetsTheNextIntegerOrAUUIDString() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let first = try await store.write { try $0.insertAndFetch(.object([("name", .string("A"))]), into: "c") }
        #expect(first == .object([("id", .int(1)), ("name", .string("A"))]))
        try await store.write { try $0.insert(.object([("id", .int(41)), ("name", .string("B"))]), into: "c") }
        let third = try await store.write { try $0.saveAndFetch(.object([("id", .null), ("name", .string("C"))]), into: "c") }
        #expect(third[field: "id"] == .int(42))
        // A number that is not an integer, and strings, sort around the integers: the next integer follows the
        // greatest number whatever else the collection holds.
        try await store.write { ctx in
            try ctx.insert(.object([("id", .double(99.5))]), into: "c")
            try ctx.insert(.object([("id", .string("zz"))]), into: "c")
        }
        let fourth = try await store.write { try $0.insertAndFetch(.object([("x", .int(1))]), into: "c") }
        #expect(fourth[field: "id"] == .int(100))
        // Ids that are not numbers: a new UUID string.
        try await store.write { try $0.insert(.object([("id", .string("ann"))]), into: "names") }
        let named = try await store.write { try $0.insertAndFetch(.object([("x", .int(1))]), into: "names") }
        guard case .string(let text)? = named[field: "id"] else {
            Issue.record("expected a string id, got \(named)")
            return
        }
        #expect(UUID(uuidString: text) != nil, "\(text)")
        // Past the greatest Int64, integers ran out: a UUID string too.
        try await store.write { try $0.insert(.object([("id", .int(.max))]), into: "full") }
        let past = try await store.write { try $0.insertAndFetch(.object([("x", .int(1))]), into: "full") }
        if case .string? = past[field: "id"] {} else { Issue.record("expected a string id, got \(past)") }
        #expect(try await store.verify().isClean)
    }

    /// Within one transaction, ids given are remembered, and an id written meanwhile is never given again.
    @Test func oneTransactionGivesIDsAfterThoseItWrites() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ids = try await store.write { ctx -> [DocumentValue] in
            var ids: [DocumentValue] = []
            func add(_ fields: [(String, DocumentValue)], save: Bool = false) throws {
                let doc = DocumentValue.object(fields)
                let stored = save ? try ctx.saveAndFetch(doc, into: "c") : try ctx.insertAndFetch(doc, into: "c")
                ids.append(stored[field: "id"] ?? .null)
            }
            try add([("n", .int(0))])
            try add([("n", .int(1))])
            try add([("id", .int(10)), ("n", .int(2))])
            try add([("n", .int(3))], save: true)
            try add([("id", .double(20.5)), ("n", .int(4))], save: true)
            try add([("n", .int(5))], save: true)
            try add([("id", .string("s")), ("n", .int(6))])
            try add([("n", .int(7))])
            return ids
        }
        #expect(ids == [.int(1), .int(2), .int(10), .int(11), .double(20.5), .int(21), .string("s"), .int(22)])
        let count = try await store.read { try Query<DocumentValue>("c").count(in: $0) }
        #expect(count == 8, "a document was replaced by one given the same id")
    }

    /// Two processes and this one insert documents without ids into one collection at once, one commit each:
    /// every document is there once, and no two have the same id.
    @Test func writersInSeveralProcessesNeverChooseTheSameID() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("ids.db")
        let store = try await DocStore(path: path)
        try await store.write { try $0.insert(.object([("writer", .string("seed"))]), into: "shared") }
        let perWriter = 150
        let children = try ["a", "b"].map { tag -> (ChildProcess, Pipe) in
            let process = ChildProcess()
            process.executableURL = CrashSafetyTests.writerURL
            process.arguments = ["insert-untyped", path, "shared", "\(perWriter)", tag]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.standardError
            try process.run()
            return (process, output)
        }
        for n in 0..<perWriter {
            try await store.write { try $0.insert(.object([("writer", .string("parent")), ("n", .int(Int64(n)))]), into: "shared") }
        }
        for (process, output) in children {
            let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            #expect(printed.split(separator: "\n").count == perWriter, "\(printed)")
        }
        let documents = try await store.read { try Query<DocumentValue>("shared").results(in: $0) }
        #expect(documents.count == 1 + 3 * perWriter)
        let ids = documents.compactMap { $0[field: "id"] }
        #expect(Set(ids).count == documents.count, "two documents share an id")
        #expect(Set(ids) == Set((1...Int64(1 + 3 * perWriter)).map(DocumentValue.int)))
        for writer in ["a", "b", "parent"] {
            let ns = documents.filter { $0[field: "writer"] == .string(writer) }.compactMap { $0[field: "n"] }
            #expect(Set(ns) == Set((0..<Int64(perWriter)).map(DocumentValue.int)), "writer \(writer)")
        }
        await store.close()
    }

    @Test func aCollectionAndASavedFilterCannotShareAName() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        try await store.write { try $0.saveFilter(SavedFilter(name: "adults", query: Query("people"))) }
        await #expect(throws: DocStoreError.self) {
            try await store.write { try $0.insert(.object([("id", .int(1))]), into: "adults") }
        }
        do {
            try await store.write { try $0.insert(.object([("id", .int(1))]), into: "adults") }
        } catch let error as DocStoreError {
            #expect(error.code == .alreadyExists)
            #expect(error.message.contains("a saved filter has that name"), "\(error.message)")
        }
        await #expect(throws: DocStoreError.self) {
            try await store.write { try $0.createIndex(IndexDefinition(name: "x", kind: .regular, fields: ["x"]), in: "adults") }
        }
        try await store.write { try $0.insert(.object([("id", .int(1))]), into: "people") }
        do {
            try await store.write { try $0.saveFilter(SavedFilter(name: "people", query: Query("people"))) }
            Issue.record("a filter took a collection's name")
        } catch let error as DocStoreError {
            #expect(error.code == .alreadyExists)
        }
        #expect(try await store.read { try $0.collections().map(\.name) } == ["people"])
    }
}
