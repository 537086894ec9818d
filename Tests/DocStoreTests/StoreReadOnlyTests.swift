import Foundation
import Testing
@testable import DocStore

/// A type whose collection the store does not have.
private struct Gadget: Document {
    var id: Int
    var name: String
    static let collection = "gadgets"
}

/// The people, by a type that declares an index the catalog does not have.
private struct PersonByName: Document {
    var id: UUID
    var name: String
    static let collection = "people"
    static let indexes: [IndexSpec<PersonByName>] = [.index("by_name", \.name)]
}

private let ann = Person(name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: ["swift"])
private let bob = Person(name: "Bob", age: 17, city: "Bergen", email: "bob@example.com", tags: [])
private let cid = Person(name: "Cid", age: 30, city: "Oslo", email: nil, tags: ["lmdb"])

/// A store written and closed by a read-write ``DocStore``: typed people with their indexes, untyped notes with an
/// index, and a saved filter.
private func makeClosedStore(in dir: TemporaryDirectory) async throws -> String {
    let path = dir.path("store.db")
    let store = try await DocStore(path: path)
    try await store.insert(contentsOf: [ann, bob, cid])
    try await store.write { ctx in
        for i in 1...5 {
            try ctx.insert(.object([.init("id", .int(Int64(i))), .init("topic", .string(i % 2 == 0 ? "even" : "odd"))]),
                           into: "notes")
        }
        try ctx.createIndex(IndexDefinition(name: "by_topic", kind: .regular, fields: ["topic"]), in: "notes")
        try ctx.saveFilter(SavedFilter(name: "adults", query: Query("people").include(.compare("age", .greaterOrEqual, .int(18)))))
    }
    await store.close()
    return path
}

private func readOnlyOptions() -> DocStore.Options {
    var options = DocStore.Options()
    options.readOnly = true
    return options
}

/// The bytes of a file, to show that a read-only store left it as it was.
private func contents(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: path)) }

/// Reads every kind of thing a store holds, in a store opened read-only whose collections this process has not used.
private func expectEverythingReads(_ store: DocStore, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    #expect(try await store.collections().map(\.name) == ["notes", "people"], sourceLocation: sourceLocation)
    #expect(try await Person.query().count(in: store) == 3, sourceLocation: sourceLocation)
    #expect(try await store.get(Person.self, id: ann.id) == ann, sourceLocation: sourceLocation)
    let adults = Person.include(#Predicate { $0.age >= 18 }).sortBy(\.age)
    #expect(try await store.read { try adults.results(in: $0) } == [cid, ann], sourceLocation: sourceLocation)
    #expect(try await store.read { try adults.explain(in: $0) }.index == "age", sourceLocation: sourceLocation)
    let even = Query<DocumentValue>("notes").include(.compare("topic", .equal, .string("even")))
    let (ids, index) = try await store.read { ctx in
        (try even.results(in: ctx).compactMap { $0[field: "id"] }, try even.explain(in: ctx).index)
    }
    #expect(ids == [.int(2), .int(4)], sourceLocation: sourceLocation)
    #expect(index == "by_topic", sourceLocation: sourceLocation)
    #expect(try await store.read { try $0.savedFilters().map(\.name) } == ["adults"], sourceLocation: sourceLocation)
    // A transaction that only reads needs no write.
    #expect(try await store.write { try Query<DocumentValue>("notes").count(in: $0) } == 5, sourceLocation: sourceLocation)
    #expect(try await store.dryRun { try Person.query().count(in: $0) } == 3, sourceLocation: sourceLocation)
    let report = try await store.verify()
    #expect(report.isClean, "\(report)", sourceLocation: sourceLocation)
}

/// Tries every kind of change; each must be refused as read-only, naming what it would have changed.
private func expectEveryChangeRefused(_ store: DocStore, sourceLocation: SourceLocation = #_sourceLocation) async {
    let dave = Person(name: "Dave", age: 50)
    let note: DocumentValue = .object([.init("id", .int(9)), .init("topic", .string("new"))])
    func refused(_ mentions: [String], _ body: () async throws -> Void) async {
        await expectError(.readOnly, mentions: ["read-only"] + mentions, sourceLocation: sourceLocation, body)
    }
    await refused(["insert", "people"]) { try await store.insert(dave) }
    await refused(["save", "people"]) { try await store.save(ann) }
    await refused(["insert", "people"]) { try await store.insert(contentsOf: [dave]) }
    await refused(["delete", "people"]) { try await store.delete(Person.self, id: ann.id) }
    await refused(["drop index 'age' of 'people'"]) { try await store.dropIndex("age", from: "people") }
    await refused(["insert", "people"]) { try await store.write { try $0.insert(dave) } }
    await refused(["delete", "people"]) {
        _ = try await store.write { try Person.include(#Predicate { $0.age < 18 }).delete(in: $0) }
    }
    await refused(["insert", "people"]) {
        _ = try await store.write { ctx in
            try Person.include(#Predicate { $0.name == "Zed" }).findOrCreate(in: ctx) { dave }
        }
    }
    await refused(["insert", "notes"]) { try await store.write { try $0.insert(note, into: "notes") } }
    await refused(["save", "'brand_new'"]) { try await store.write { try $0.save(note, into: "brand_new") } }
    await refused(["delete", "notes"]) {
        _ = try await store.write { try $0.delete("notes", id: .int(1)) }
    }
    await refused(["delete documents from 'notes'"]) {
        _ = try await store.write { try Query<DocumentValue>("notes").delete(in: $0) }
    }
    await refused(["insert", "notes"]) {
        _ = try await store.write { try Query<DocumentValue>("notes").include(.compare("topic", .equal, .string("none")))
            .findOrCreate(in: $0) { note } }
    }
    await refused(["create index 'by_id' on 'notes'"]) {
        try await store.write { try $0.createIndex(IndexDefinition(name: "by_id", kind: .unique, fields: ["id"]),
                                                     in: "notes") }
    }
    await refused(["drop index 'by_topic' of 'notes'"]) {
        _ = try await store.write { try $0.dropIndex("by_topic", from: "notes") }
    }
    await refused(["drop collection 'notes'"]) { _ = try await store.write { try $0.dropCollection("notes") } }
    await refused(["filter 'kids'"]) {
        try await store.write { try $0.saveFilter(SavedFilter(name: "kids", query: Query("people").include(.compare("age", .less, .int(18))))) }
    }
    await refused(["saved filter 'adults'"]) { _ = try await store.write { try $0.deleteFilter(named: "adults") } }
    await refused(["insert", "notes"]) { _ = try await store.dryRun { try $0.insert(note, into: "notes") } }
    // Preparing what a type declares is a change; reading without it is not (a missing collection reads as empty,
    // a missing index is not used).
    await refused(["create collection 'gadgets'"]) { try await store.prepare(Gadget.self) }
    await refused(["build index 'by_name' of 'people'"]) { try await store.prepare(PersonByName.self) }
    #expect((try? await Gadget.query().count(in: store)) == 0, sourceLocation: sourceLocation)
    #expect((try? await PersonByName.query().count(in: store)) == 3, sourceLocation: sourceLocation)
    #expect((try? await PersonByName.query().explain(in: store))?.index == nil, sourceLocation: sourceLocation)
    await refused(["drop collection 'notes'"]) { try store.checkWritable("drop collection 'notes'") }
}

@Suite struct StoreReadOnlyTests {
    @Test func aStoreOpenedReadOnlyReadsWhatItHoldsAndRefusesEveryChange() async throws {
        let dir = TemporaryDirectory()
        let path = try await makeClosedStore(in: dir)
        let before = try contents(path)

        let store = try await DocStore(path: path, options: readOnlyOptions())
        #expect(store.isReadOnly)
        try await expectEverythingReads(store)
        await expectEveryChangeRefused(store)
        // Refusals leave the store usable.
        #expect(try await Person.query().count(in: store) == 3)
        await store.close()
        #expect(try contents(path) == before, "the read-only store changed its data file")

        // Opened read-write again, the store holds exactly what it held.
        let writable = try await DocStore(path: path)
        #expect(!writable.isReadOnly)
        try await expectEverythingReads(writable)
        try writable.checkWritable("anything")
        await writable.close()
    }

    @Test func openingReadOnlyNeedsAStoreAndCreatesNothing() async throws {
        let dir = TemporaryDirectory()
        let missing = dir.path("missing.db")
        await expectError(.cannotOpen, mentions: [missing, "read-only"]) {
            _ = try await DocStore(path: missing, options: readOnlyOptions())
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
        #expect(!FileManager.default.fileExists(atPath: missing + "-lock"))

        let empty = dir.path("empty.db")
        #expect(FileManager.default.createFile(atPath: empty, contents: nil))
        await expectError(.cannotOpen, mentions: [empty, "empty"]) {
            _ = try await DocStore(path: empty, options: readOnlyOptions())
        }
        #expect(try contents(empty).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: empty + "-lock"))

        let text = dir.path("text.db")
        try Data("not a store".utf8).write(to: URL(fileURLWithPath: text))
        await expectError(.notAStore, mentions: [text]) {
            _ = try await DocStore(path: text, options: readOnlyOptions())
        }
        #expect(try contents(text) == Data("not a store".utf8))
    }

    @Test func aReadOnlyStoreFollowsWhatAnotherProcessWrites() async throws {
        let dir = TemporaryDirectory()
        let path = try await makeClosedStore(in: dir)
        let store = try await DocStore(path: path, options: readOnlyOptions())
        try await expectEverythingReads(store)
        let child = try CatalogChild(path: path)
        for round in 0..<3 {
            // A collection new to this process, and an index new to it on a collection it has open.
            try child.make("create made\(round) \(round + 2) r\(round)")
            try child.make("index notes by_n\(round) n")
            #expect(try await store.read { try Query<DocumentValue>("made\(round)").count(in: $0) } == round + 2, "round \(round)")
            let indexes = try await store.collections().first { $0.name == "notes" }?.indexes.map(\.name)
            #expect(indexes == ["by_topic"] + (0...round).map { "by_n\($0)" }, "round \(round)")
        }
        try child.make("people 2")
        #expect(try await Person.query().count(in: store) == 5)
        #expect(try child.finish() == 0)
        await expectError(.readOnly, mentions: ["read-only"]) { try await store.insert(Person(name: "Eve", age: 1)) }
        await store.close()
    }

    /// The store's folder and files made read-only with chmod. Root writes regardless of permissions, so this runs
    /// only as another user; the tests above check the read-only option itself, whoever runs them.
    @Test(.enabled(if: getuid() != 0, "skipped when running as root, where chmod does not stop writes"))
    func aStoreInAFolderThisProcessMayNotWriteIsReadReadOnly() async throws {
        let dir = TemporaryDirectory()
        let path = try await makeClosedStore(in: dir)
        let lockPath = path + "-lock"
        let before = try contents(path)
        func setMode(_ mode: mode_t, _ file: String) { chmod(file, mode) }
        defer {
            setMode(0o755, dir.url.path)
            setMode(0o644, path)
            setMode(0o644, lockPath)
        }

        // The data file and its folder read-only; the lock file, made by the writer, still writable.
        setMode(0o444, path)
        setMode(0o555, dir.url.path)
        await expectError(.cannotOpen, mentions: [path, "read-only"]) { _ = try await DocStore(path: path) }
        var store = try await DocStore(path: path, options: readOnlyOptions())
        #expect(!store.isWithoutLockFile)
        try await expectEverythingReads(store)
        await expectEveryChangeRefused(store)
        await store.close()

        // The lock file read-only too: read without it, as no other process has the store open.
        setMode(0o444, lockPath)
        store = try await DocStore(path: path, options: readOnlyOptions())
        #expect(store.isWithoutLockFile, "opened without the lock file, and says so")
        try await expectEverythingReads(store)
        await expectEveryChangeRefused(store)
        await store.close()
        #expect(try contents(path) == before, "the read-only store changed its data file")

        // ... but not while another process has it open: its writes could change pages being read.
        setMode(0o644, lockPath)
        setMode(0o755, dir.url.path)
        setMode(0o644, path)
        let child = try CatalogChild(path: path)
        try child.make("create other 1 x")
        setMode(0o444, lockPath)
        await expectError(.cannotOpen, mentions: ["lock file", "another process"]) {
            _ = try await DocStore(path: path, options: readOnlyOptions())
        }
        #expect(try child.finish() == 0)
    }
}
