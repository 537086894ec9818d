import Foundation
import Testing
import TestSupport
@testable import DocStore

/// A store in a file writes its documents in format 3: their field names are shapes the catalog records once.
/// What another process, an aborted write or a refused write in a group leaves must still be readable everywhere:
/// every document's shape is in the catalog (``DocStore/verify()`` checks it).
@Suite(.ownThreads) struct ShapedStoreTests {
    /// A field name no other test uses, so that this process has never met a shape that holds it.
    private static func newName() -> String { "f" + UUID().uuidString.prefix(8).lowercased() }

    private static func shapeRecords(_ store: DocStore) async throws -> [UInt64: [String]] {
        try await store.read { ctx in
            Dictionary(uniqueKeysWithValues: try ctx.scope.core.catalog(ctx.txn).shapes().shapes.map { ($0.id, $0.names) })
        }
    }

    @Test func documentsAreWrittenUnderTheirShapeAndReadBack() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = (0..<200).map { Person(name: "P\($0)", age: $0 % 90, email: "p\($0)@x.org", tags: ["t\($0 % 3)"]) }
        try await store.insert(contentsOf: people)
        let raw = try await store.read { ctx in
            let handle = try #require(try ctx.scope.handleForReading(Person.self))
            var firsts = Set<UInt8>(), sizes = 0, named = 0
            try ctx.txn.forEachEntry(in: handle.documents) { _, value in
                firsts.insert(value[0])
                sizes += value.count
                named += try DocumentValue(encoded: Array(value)).encoded().count
            }
            return (firsts, sizes, named)
        }
        #expect(raw.0 == [BinaryFormat.shapedVersion])
        #expect(raw.1 < raw.2, "the documents are not smaller without their names: \(raw.1) against \(raw.2)")
        #expect(try await Person.query().sortBy(\.email).results(in: store) == people.sorted { $0.email! < $1.email! })
        #expect(try await Person.include(#Predicate { $0.age == 7 }).results(in: store).map(\.name).sorted()
                == people.filter { $0.age == 7 }.map(\.name).sorted())
        let shapes = try await Self.shapeRecords(store)
        #expect(shapes.count == 1 && shapes.values.first?.contains("email") == true, "\(shapes)")
        #expect(try await store.verify().isClean)
    }

    /// An update keeps a document's bytes in its shape when its names stay (patched where they lie, or encoded
    /// again), and records the new shape when they change: a typed closure that sets a field that was `nil`, and
    /// field changes that set a field the document lacks.
    @Test func anUpdateThatChangesADocumentsNamesRecordsItsNewShape() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<30).map { Person(name: "P\($0)", age: $0) })
        #expect(try await Self.shapeRecords(store).count == 1)
        // Names kept: a field change patched in place, and a closure's.
        try await Person.include(#Predicate { $0.age < 10 }).update(in: store, set: ["city": .string("Bergen")])
        try await Person.include(#Predicate { $0.age >= 20 }).update(in: store) { $0.age += 1 }
        #expect(try await Self.shapeRecords(store).count == 1)
        // Names changed: `email` was nil, so its key was left out.
        try await Person.include(#Predicate { $0.age < 15 }).update(in: store) { $0.email = "\($0.name)@x.org" }
        let untyped = Query<DocumentValue>("people").include(.compare("age", .greaterOrEqual, .int(15)))
        try await untyped.update(in: store, set: [FieldPath(Self.newName()): .int(1)])
        let shapes = try await Self.shapeRecords(store)
        let stored = try await store.read { ctx in
            let handle = try #require(try ctx.scope.handleForReading(Person.self))
            var ids: [UInt64] = []
            try ctx.txn.forEachEntry(in: handle.documents) { _, value in
                #expect(value[0] == BinaryFormat.shapedVersion)
                ids.append(UInt64(littleEndian: value.loadUnaligned(fromByteOffset: 1, as: UInt64.self)))
            }
            return ids
        }
        // (Two shapes stored, one per change of names, and the first one's record kept.)
        #expect(Set(stored).count == 2 && shapes.count == 3 && Set(stored).isSubset(of: shapes.keys),
                "\(Set(stored)) against \(shapes)")
        #expect(try await Person.include(#Predicate { $0.age < 15 }).results(in: store).allSatisfy { $0.email != nil })
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func aShapeAnotherProcessRecordsIsReadOnTheFirstTry() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { try $0.save(.object([.init("id", .int(0)), .init("a", .int(0))]), into: "things") }
        #expect(try await Query<DocumentValue>("things").count(in: store) == 1)
        let (b, c) = (Self.newName(), Self.newName())
        let child = try CatalogChild(path: store.path)
        try child.make("fields things 3 \(b) \(c)")
        let read = try await store.read { try Query<DocumentValue>("things").sortBy("id").results(in: $0) }
        #expect(read.map { $0[field: b] } == [nil, .int(1), .int(2), .int(3)], "\(read)")
        #expect(read.last?[field: c] == .int(3))
        #expect(try child.finish() == 0)
        #expect(try await store.verify().isClean)
    }

    @Test func theShapeOfAnAbortedWriteIsRecordedByTheNextOne() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        struct Abort: Error {}
        let name = Self.newName()
        do {
            try await store.write { ctx in
                try ctx.save(.object([.init("id", .int(1)), .init(name, .int(1))]), into: "things")
                throw Abort()
            }
        } catch is Abort {}
        // This process knows the shape; the catalog does not, and the next write must record it.
        #expect(try await Self.shapeRecords(store).values.contains { $0.contains(name) } == false)
        try await store.write { try $0.save(.object([.init("id", .int(2)), .init(name, .int(2))]), into: "things") }
        #expect(try await Self.shapeRecords(store).values.contains { $0 == ["id", name] })
        #expect(try await store.verify().isClean)
    }

    /// Writers in one group commit, some refused by a unique index (their part of the transaction is undone, with
    /// any shape record it wrote): every document written has its shape recorded.
    @Test func refusedWritesInAGroupLeaveEveryShapeRecorded() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { try $0.createIndex(IndexDefinition(name: "u", kind: .unique, fields: ["u"]), in: "things") }
        let names = (0..<12).map { _ in Self.newName() }
        let refused = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var refused = 0
                    for i in 0..<30 {
                        let id = task * 1_000 + i
                        let extra = names[(task * 7 + i) % names.count]
                        do {
                            try await store.write { ctx in
                                try ctx.save(.object([.init("id", .int(Int64(id))), .init("u", .int(Int64(id % 97))),
                                                      .init(extra, .int(1))]), into: "things")
                            }
                        } catch let error as DocStoreError where error.code == .uniqueViolation {
                            refused += 1
                        }
                    }
                    return refused
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(refused > 0)
        #expect(try await Query<DocumentValue>("things").count(in: store) == 240 - refused)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    /// Documents whose fields are a dictionary's keys make a shape each: past the store's limit, the rest are
    /// written in format 2, and every one reads back.
    @Test func pastItsLimitOfShapesAStoreWritesNamesInTheDocuments() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let prefix = Self.newName()
        let count = StoreCore.shapeLimit + 40
        try await store.write { ctx in
            for i in 0..<count {
                try ctx.save(.object([.init("id", .int(Int64(i))), .init("\(prefix)_\(i)", .int(Int64(i)))]), into: "things")
            }
            // The store's models are no longer encoded in format 3 (their new shapes would only fill the process's
            // table); one that was, of one shape more, is written in format 2 too.
            #expect(ctx.scope.core.encodingSalt == nil)
            let handle = try #require(try ctx.scope.handle(named: "things"))
            let bytes = try DocumentEncoder().encode(["id": count - 1, "\(prefix)_\(count - 1)": count - 1],
                                                     shapedWith: ctx.scope.core.shapeSalt)
            #expect(bytes.first == BinaryFormat.shapedVersion)
            try handle.write(bytes, mode: .save, in: ctx.txn)
        }
        let formats = try await store.read { ctx in
            let handle = try #require(try ctx.scope.handle(named: "things"))
            var formats: [UInt8: Int] = [:]
            try ctx.txn.forEachEntry(in: handle.documents) { _, value in formats[value[0], default: 0] += 1 }
            return formats
        }
        #expect(formats[BinaryFormat.shapedVersion] == StoreCore.shapeLimit && formats[BinaryFormat.version] == 40, "\(formats)")
        let read = try await store.read { try Query<DocumentValue>("things").sortBy("id").results(in: $0) }
        #expect(read.count == count && read.enumerated().allSatisfy { $1[field: "\(prefix)_\($0)"] == .int(Int64($0)) })
        #expect(try await store.verify().isClean)
    }

    /// A model encoded in format 3 for another store (another salt, so another id for the same names) is written
    /// under this store's id, its shape recorded.
    @Test func aDocumentShapedForAnotherStoreIsWrittenUnderThisStoresShape() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let person = Person(name: "Other", age: 3, email: "o@x.org", tags: ["t"])
        let salt = try #require(store.core.encodingSalt)
        let foreign = try DocumentEncoder().encode(person, shapedWith: salt ^ 0x5EED)
        #expect(foreign.first == BinaryFormat.shapedVersion)
        try await store.write { try $0.write(foreign, as: Person.self, mode: .insert) }
        let stored = try await store.read { ctx in
            let handle = try #require(try ctx.scope.handleForReading(Person.self))
            var stored: [[UInt8]] = []
            try ctx.txn.forEachEntry(in: handle.documents) { _, value in stored.append(Array(value)) }
            return stored
        }
        #expect(stored == [try DocumentEncoder().encode(person, shapedWith: salt)])
        #expect(try await store.get(Person.self, id: person.id) == person)
        #expect(Set(try await Self.shapeRecords(store).keys) == [UInt64(littleEndian: stored[0].withUnsafeBytes {
            $0.loadUnaligned(fromByteOffset: 1, as: UInt64.self)
        })])
        #expect(try await store.verify().isClean)
    }

    /// A store whose documents are of format 2 (as an older build wrote them): a compaction writes each again in
    /// format 3, batch after batch, with the same index entries; every document reads back and the store verifies.
    @Test func aCompactionWritesEveryDocumentInTheCurrentFormat() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("old.db")
        var store: DocStore? = try await DocStore(path: path)
        let people = (0..<500).map { Person(name: "P\($0)", age: $0 % 90, email: $0 % 3 == 0 ? nil : "p\($0)@x.org") }
        try await store!.insert(contentsOf: people)
        try await store!.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            var older: [([UInt8], [UInt8])] = []
            try ctx.txn.forEachEntry(in: handle.documents) { key, value in
                older.append((Array(key), try DocumentValue(encoded: Array(value)).encoded()))
            }
            for (key, value) in older { try ctx.txn.put(handle.documents, key, value) }
        }
        await store!.close()
        store = nil
        let configuration = FileStorage.Configuration(initialMapSize: 1 << 24, maximumMapSize: 1 << 30, maxDatabases: 64,
                                                      maxReaders: 126)
        _ = try FileStorage.compact(path: path, configuration: configuration) { engine in
            try StoreCore.writeInCurrentFormat(in: engine, path: path, batch: 7)
        }
        let reopened = try await DocStore(path: path)
        let formats = try await reopened.read { ctx in
            let handle = try #require(try ctx.scope.handleForReading(Person.self))
            var formats: [UInt8: Int] = [:]
            try ctx.txn.forEachEntry(in: handle.documents) { _, value in formats[value[0], default: 0] += 1 }
            return formats
        }
        #expect(formats == [BinaryFormat.shapedVersion: 500], "\(formats)")
        #expect(try await Person.query().sortBy(\.name).results(in: reopened) == people.sorted { $0.name < $1.name })
        #expect(try await Person.include(#Predicate { $0.age == 7 }).count(in: reopened) == people.filter { $0.age == 7 }.count)
        let report = try await reopened.verify()
        #expect(report.isClean, "\(report)")
        await reopened.close()
    }

    /// A store of format 2 whose documents are written again in format 3 by transactions each run twice, the first
    /// run thrown away (as a write is run again after the map grew): each shape a document names is recorded.
    /// Another document, damaged inside a value, is left as it is, for `verify()` to report, not sealed with a
    /// checksum of its damage.
    @Test func writingInTheCurrentFormatRecordsEachShapeAndLeavesADamagedDocument() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("old.db")
        let prefix = Self.newName()
        var store: DocStore? = try await DocStore(path: path)
        let damaged: [UInt8] = try await store!.write { ctx in
            for i in 0..<60 {
                try ctx.save(.object([.init("id", .int(Int64(i))), .init("\(prefix)_\(i % 20)", .string("value \(i)"))]),
                             into: "things")
            }
            let handle = try #require(try ctx.scope.handle(named: "things"))
            var older: [([UInt8], [UInt8])] = []
            // Written again in format 2 under names no shape records yet, as an older build would have left them.
            try ctx.txn.forEachEntry(in: handle.documents) { key, value in
                guard case .int(let i)? = try DocumentValue(encoded: Array(value))[field: "id"] else { return }
                let document: DocumentValue = .object([.init("id", .int(i)), .init("\(prefix)_old_\(i % 20)", .string("value \(i)"))])
                older.append((Array(key), document.encoded()))
            }
            // One value's letter changed where it lies: the document still reads, but its checksum disagrees.
            var (key, bytes) = older[7]
            let at = try #require(bytes.indices.first { bytes[$0...].starts(with: Array("value 7".utf8)) })
            bytes[at] = UInt8(ascii: "V")
            older[7] = (key, bytes)
            for (key, value) in older { try ctx.txn.put(handle.documents, key, value) }
            return key
        }
        await store!.close()
        store = nil
        let configuration = FileStorage.Configuration(initialMapSize: 1 << 24, maximumMapSize: 1 << 30, maxDatabases: 64,
                                                      maxReaders: 126)
        _ = try FileStorage.compact(path: path, configuration: configuration) { engine in
            try StoreCore.writeInCurrentFormat(in: WritesTwice(engine), path: path, batch: 7)
        }
        let reopened = try await DocStore(path: path)
        let (formats, unrecorded, kept) = try await reopened.read { ctx in
            let handle = try #require(try ctx.scope.handle(named: "things"))
            let recorded = Set(try ctx.scope.core.catalog(ctx.txn).shapes().shapes.map(\.id))
            var formats: [UInt8: Int] = [:], unrecorded: [UInt64] = [], kept: [UInt8]?
            try ctx.txn.forEachEntry(in: handle.documents) { key, value in
                formats[value[0], default: 0] += 1
                if key.sameBytes(as: damaged) { kept = Array(value) }
                if value[0] == BinaryFormat.shapedVersion {
                    let id = value.loadUnaligned(fromByteOffset: 1, as: UInt64.self)
                    if !recorded.contains(id) { unrecorded.append(id) }
                }
            }
            return (formats, unrecorded, kept)
        }
        #expect(formats == [BinaryFormat.shapedVersion: 59, BinaryFormat.version: 1], "\(formats)")
        #expect(unrecorded.isEmpty, "\(unrecorded.count) documents name shapes the catalog does not record")
        #expect(kept?.first == BinaryFormat.version)
        let report = try await reopened.verify()
        #expect(!report.isClean && "\(report)".contains("checksum"), "\(report)")
        await reopened.close()
    }

    /// A store that records shapes but lost its salt's record: opening it makes no new salt (one would refuse every
    /// recorded shape), and neither may a compaction, which writes older documents in the current format. The
    /// documents are written by another process, so that this one knows their shapes only from the catalog.
    @Test func aCompactionOfAStoreThatLostItsSaltKeepsItsShapes() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("saltless.db")
        let writer = CrashSafetyTests.quietWriter(["insert-people", path, "60", "0"])
        try writer.run()
        writer.waitUntilExit()
        #expect(writer.terminationStatus == 0)
        // The salt's record deleted through the engine alone: no store of this process loads the shapes first.
        let configuration = FileStorage.Configuration(initialMapSize: 1 << 24, maximumMapSize: 1 << 30, maxDatabases: 64,
                                                      maxReaders: 126)
        let engine = try LMDBEnvironment(path: path, configuration: configuration)
        try engine.write { txn in
            let catalog = try #require(try txn.openKeySpace(Catalog.spaceName, create: false))
            #expect(try txn.delete(catalog, Catalog.Record.shapeSalt.key))
        }
        engine.close()
        _ = try await DocStore.compact(path: path)
        let store = try await DocStore(path: path)
        let people = try await Query<DocumentValue>("people").sortBy("name").results(in: store)
        #expect(people.count == 60 && people.allSatisfy { $0[field: "age"] != nil }, "\(people.prefix(3))")
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        await store.close()
    }

    /// Two stores with the same names: their shapes have ids of their own (salted per store), and both read.
    @Test func twoStoresWithTheSameNamesHaveShapesOfTheirOwn() async throws {
        let (first, dir1) = try await makeStore()
        let (second, dir2) = try await makeStore()
        defer { _ = (dir1, dir2) }
        let name = Self.newName()
        for store in [first, second] {
            try await store.write { try $0.save(.object([.init("id", .int(1)), .init(name, .int(1))]), into: "things") }
        }
        let ids = try await [first, second].asyncMap { Set(try await Self.shapeRecords($0).keys) }
        #expect(ids[0].count == 1 && ids[1].count == 1 && ids[0] != ids[1])
        for store in [first, second] {
            #expect(try await Query<DocumentValue>("things").results(in: store).first?[field: name] == .int(1))
        }
    }
}

private extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
