import Foundation
import Synchronization
import Testing
@testable import DocStore

// MARK: Helpers of this suite

/// The number of entries in one index of `Person`, read inside a transaction.
private func faultPersonIndexCount(_ store: DocStore, _ name: String) async throws -> Int? {
    try await store.write { ctx in
        let handle = try ctx.scope.handle(for: Person.self)
        guard let index = handle.indexes.first(where: { $0.definition.name == name }) else { return nil }
        return try ctx.txn.entryCount(index.database)
    }
}

/// Deterministic bytes that are not a document store.
private func faultGarbage(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}


/// Carries a context out of the `perform` closure that received it, which the API forbids, to check that using it
/// afterwards throws.
private final class FaultContextBox: @unchecked Sendable {
    // @unchecked: written once inside the `perform` closure on the store's actor, read only after `perform`
    // returned; the test never touches it from two tasks at once.
    var context: WriteContext?
}

/// Set once, read by tasks that loop until it is.
private final class StopFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}

@Suite struct StoreFaultTests {
    // MARK: Opening

    @Test func folderUnderProcIsCannotOpen() async throws {
        let path = "/proc/docstore-\(UUID().uuidString).db"
        await expectError(.cannotOpen, mentions: [path]) {
            _ = try await DocStore(path: path)
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-lock"))
    }

    @Test func folderWithoutWritePermissionIsCannotOpen() async throws {
        let dir = TemporaryDirectory()
        let locked = dir.path("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: true)
        #expect(chmod(locked, 0o500) == 0)
        defer { _ = chmod(locked, 0o700) }
        let path = locked + "/store.db"
        if geteuid() != 0 {
            await expectError(.cannotOpen, mentions: [path]) {
                _ = try await DocStore(path: path)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: locked).isEmpty)
        } else {
            // root ignores the mode bits; only check that opening does not crash, and close what opened.
            if let store = try? await DocStore(path: path) { await store.close() }
        }
    }

    @Test func missingParentFolderIsCannotOpen() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("no-such-folder/store.db")
        await expectError(.cannotOpen, mentions: [path]) {
            _ = try await DocStore(path: path)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("no-such-folder")))
    }

    @Test func pathThatIsADirectoryIsCannotOpen() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("a-folder")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: path + "/inside.txt"))
        await expectError(.cannotOpen, mentions: [path, "directory"]) {
            _ = try await DocStore(path: path)
        }
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(try FileManager.default.contentsOfDirectory(atPath: path) == ["inside.txt"])
        #expect(!FileManager.default.fileExists(atPath: path + "-lock"))
    }

    @Test(arguments: [19, 4096, 20_000], writeModes)
    func fileOfGarbageIsNotAStoreAndIsLeftAlone(size: Int, mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("garbage.bin")
        let bytes = faultGarbage(count: size, seed: UInt64(size))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        await expectError(.notAStore, mentions: [path]) {
            _ = try await DocStore(path: path, options: mode.options())
        }
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(after == Data(bytes), "the file must not be changed")
        #expect(!FileManager.default.fileExists(atPath: path + "-lock"), "no lock file may be left behind")
        // A second attempt meets the same file, and says the same.
        await expectError(.notAStore) { _ = try await DocStore(path: path) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(bytes))
    }

    @Test(arguments: writeModes) func lmdbEnvironmentOfAnotherProgramIsNotAStore(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("other.mdb")
        let configuration = LMDBEnvironment.Configuration(initialMapSize: 1 << 20, maximumMapSize: 1 << 20,
                                                      maxDatabases: 8, maxReaders: 16)
        do {
            let env = try LMDBEnvironment(path: path, configuration: configuration)
            try env.write { txn in
                guard let db = try txn.openKeySpace("other", create: true) else { throw StorageError.failed("no key space") }
                try txn.put(db, Array("key".utf8), Array("their value".utf8))
            }
            env.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        let error = await expectError(.notAStore, mentions: [path, "'other'"]) {
            _ = try await DocStore(path: path, options: mode.options())
        }
        #expect(error?.message.contains("another program") == true, "\(error?.message ?? "")")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the other program's file must not change")

        let env = try LMDBEnvironment(path: path, configuration: configuration)
        defer { env.close() }
        let (value, catalogExists) = try env.readAlone { txn -> ([UInt8]?, Bool) in
            guard let db = try txn.openKeySpace("other", create: false) else { return (nil, false) }
            let value = try txn.get(db, Array("key".utf8)).map { Array($0) }
            return (value, try txn.openKeySpace(Catalog.spaceName, create: false) != nil)
        }
        #expect(value == Array("their value".utf8))
        #expect(!catalogExists, "DocStore must not add its catalog to another program's environment")
    }

    @Test func catalogOfANewerFormatIsFormatTooNew() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com")
        do {
            let store = try await DocStore(path: path)
            try await store.insert(ann)
            try await store.write { ctx in
                _ = try ctx.txn.put(ctx.scope.core.meta, Array("format".utf8), [StoreCore.formatVersion + 1])
            }
            await store.close()
        }
        await expectError(.formatTooNew, mentions: [path, "format \(StoreCore.formatVersion + 1)"]) {
            _ = try await DocStore(path: path)
        }
        #expect(FileManager.default.fileExists(atPath: path), "the store file must still be there")

        // Nothing was lost: put the format back as this build knows it, and the document is there.
        do {
            let env = try LMDBEnvironment(path: path, configuration: .init(initialMapSize: 1 << 20, maximumMapSize: 1 << 30,
                                                                       maxDatabases: 64, maxReaders: 16))
            let format = try env.readAlone { txn -> [UInt8]? in
                guard let meta = try txn.openKeySpace(Catalog.spaceName, create: false) else { return nil }
                return try txn.get(meta, Array("format".utf8)).map { Array($0) }
            }
            #expect(format == [StoreCore.formatVersion + 1], "opening must not rewrite the newer format")
            try env.write { txn in
                guard let meta = try txn.openKeySpace(Catalog.spaceName, create: false) else { throw StorageError.failed("no key space") }
                try txn.put(meta, Array("format".utf8), [StoreCore.formatVersion])
            }
            env.close()
        }
        let store = try await DocStore(path: path)
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        #expect(try await store.verify().isClean)
    }

    // MARK: Reading

    @Test func storedDocumentThatNoLongerDecodesIsDecodingFailed() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ann = Person(name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: ["x"])
        try await store.insert(ann)

        let error = await expectError(.decodingFailed, mentions: ["people", ann.id.uuidString, "age"]) {
            _ = try await store.get(PersonWithTextAge.self, id: ann.id)
        }
        #expect(error?.message.contains("'age'") == true)
        #expect(error?.collection == "people")
        #expect((error?.underlying as? DecodingFailure)?.field == "age")

        // Reading every document says the same, through a context.
        await expectError(.decodingFailed, mentions: ["people", "age"]) {
            _ = try await store.write { ctx in try PersonWithTextAge.query().results(in: ctx).count }
        }
        // Nothing was lost: the document still reads as the type that wrote it.
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        #expect(try await Person.query().count(in: store) == 1)
    }

    // MARK: Map size

    @Test func writePastTheMaximumMapSizeIsStoreFullAndWritesNothing() async throws {
        var options = DocStore.Options()
        options.initialMapSize = 256 << 10
        options.maximumMapSize = 1 << 20
        let (store, dir) = try await makeStore(options: options)
        _ = dir

        var committed = 0
        var failedBatch: [Person] = []
        var failure: (any Error)?
        var serial = 0
        for _ in 0..<2_000 {
            let batch = (0..<20).map { _ -> Person in
                serial += 1
                return Person(name: String(repeating: "n", count: 300) + "\(serial)", age: serial % 90,
                              city: ["Oslo", "Bergen", "Tromsø"][serial % 3], email: "p\(serial)@example.com",
                              tags: ["t\(serial % 7)", "u\(serial % 5)"])
            }
            do {
                try await store.insert(contentsOf: batch)
                committed += batch.count
            } catch {
                failure = error
                failedBatch = batch
                break
            }
        }
        let error = try #require(failure as? DocStoreError, "the map never filled: \(String(describing: failure))")
        #expect(error.code == .storeFull, "\(error)")
        #expect(error.message.contains("maximumMapSize"), "\(error.message)")
        #expect(error.message.contains("nothing was written"), "\(error.message)")
        #expect(committed > 0)

        #expect(try await Person.query().count(in: store) == committed)
        for person in failedBatch {
            #expect(try await store.get(Person.self, id: person.id) == nil)
        }
        #expect(try await faultPersonIndexCount(store, "email") == committed)
        #expect(try await faultPersonIndexCount(store, "age") == committed)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.documentsChecked == committed)
        let usage = try await store.spaceUsage()
        #expect(usage.mapBytes <= 1 << 20)
    }

    @Test func mapGrowsByItselfUpToWhatTheDataNeeds() async throws {
        var options = DocStore.Options()
        options.initialMapSize = 128 << 10
        let (store, dir) = try await makeStore(options: options)
        _ = dir
        let before = try await store.spaceUsage().mapBytes
        #expect(before <= 128 << 10)

        var ids: [UUID] = []
        for batch in 0..<20 {
            let people = (0..<50).map { i in
                Person(name: String(repeating: "\(i % 10)", count: 5_000), age: batch * 50 + i,
                       email: "g\(batch)-\(i)@example.com", tags: ["batch\(batch)"])
            }
            ids += people.map(\.id)
            try await store.insert(contentsOf: people)
        }
        #expect(try await Person.query().count(in: store) == 1_000)
        let after = try await store.spaceUsage()
        #expect(after.mapBytes > before)
        #expect(after.mapBytes >= 5_000_000)
        #expect(after.pages * after.pageSize <= after.mapBytes)
        #expect(try await store.get(Person.self, id: ids[0])?.name.count == 5_000)
        #expect(try await store.get(Person.self, id: ids[999])?.age == 999)
        #expect(try await store.verify().isClean)
    }

    /// Another process grows the file past this one's map (it opens the store with a larger map, and commits a
    /// thousand times) while this one reads from four tasks and writes from a fifth: each read and write adopts the
    /// new size (LMDB's `MDB_MAP_RESIZED`), none fails, and the store verifies.
    @Test func readsAndWritesGoOnWhileAnotherProcessGrowsTheMap() async throws {
        var options = DocStore.Options()
        options.initialMapSize = 256 << 10
        let dir = TemporaryDirectory()
        let path = dir.path("grown.db")
        let store = try await DocStore(path: path, options: options)
        try await store.insert(contentsOf: (0..<50).map { Person(name: "p\($0)", age: $0) })
        let before = try await store.spaceUsage().mapBytes
        let stop = StopFlag()
        let loops = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var reads = 0
                        while !stop.isSet {
                            let count = try await Person.include(#Predicate { $0.age >= 10 }).count(in: store)
                            #expect(count >= 40)
                            reads += 1
                        }
                        return reads
                    }
                }
                group.addTask {
                    var writes = 0
                    while !stop.isSet {
                        try await store.insert(Person(name: "w\(writes)", age: 100))
                        writes += 1
                    }
                    return writes
                }
                return try await group.reduce(0, +)
            }
        }
        let writer = CrashSafetyTests.quietWriter(["insert-people", path, "1000", "0"])
        try writer.run()
        while writer.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        try await Task.sleep(for: .milliseconds(100))
        stop.set()
        let done = try await loops.value
        #expect(done > 0 && writer.terminationStatus == 0)
        let usage = try await store.spaceUsage()
        #expect(usage.fileBytes > before && usage.fileBytes <= usage.mapBytes, "\(usage)")
        #expect(try await store.verify().isClean)
        await store.close()
    }

    /// More reads at once than LMDB's reader table has slots: each waits for one, none fails.
    @Test func readsWaitForAFreeSlotOfTheReaderTable() async throws {
        var options = DocStore.Options()
        options.maxReaders = 2
        let (store, dir) = try await makeStore(options: options)
        defer { _ = dir }
        try await store.insert(contentsOf: (0..<300).map { Person(name: "p\($0)", age: $0 % 90) })
        let counts = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<12 {
                group.addTask {
                    var counts: [Int] = []
                    for _ in 0..<30 { counts.append(try await Person.include(#Predicate { $0.age >= 45 }).count(in: store)) }
                    return counts
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(counts.count == 360 && Set(counts) == [(0..<300).filter { $0 % 90 >= 45 }.count], "\(Set(counts))")
    }

    // MARK: Lifetime

    @Test func openingTheSamePathTwiceIsAlreadyOpen() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        let ann = Person(name: "Ann", age: 41)
        try await store.insert(ann)

        await expectError(.alreadyOpen, mentions: [path]) { _ = try await DocStore(path: path) }
        // The same file by another spelling of its path is the same store.
        await expectError(.alreadyOpen) { _ = try await DocStore(path: dir.url.path + "/./store.db") }

        // The first instance is undisturbed.
        let bob = Person(name: "Bob", age: 30)
        try await store.insert(bob)
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        #expect(try await Person.query().count(in: store) == 2)
        await store.close()

        let again = try await DocStore(path: path)
        #expect(try await Person.query().count(in: again) == 2)
        #expect(try await again.get(Person.self, id: bob.id) == bob)
        await again.close()
    }

    @Test func everyCallAfterCloseIsClosedAndThePathOpensAgain() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com")
        try await store.insert(ann)
        await store.close()
        await store.close()   // closing twice does nothing

        let mentions = [path, "closed"]
        await expectError(.closed, mentions: mentions) { try await store.insert(Person(name: "Bob", age: 3)) }
        await expectError(.closed, mentions: mentions) { try await store.save(ann) }
        await expectError(.closed, mentions: mentions) { try await store.insert(contentsOf: [Person(name: "C", age: 1)]) }
        await expectError(.closed, mentions: mentions) { _ = try await store.get(Person.self, id: ann.id) }
        await expectError(.closed, mentions: mentions) { _ = try await Person.query().count(in: store) }
        await expectError(.closed, mentions: mentions) { try await store.delete(Person.self, id: ann.id) }
        await expectError(.closed, mentions: mentions) { try await store.write { ctx in _ = try Person.query().count(in: ctx) } }
        await expectError(.closed, mentions: mentions) { _ = try await store.collections() }
        await expectError(.closed, mentions: mentions) { _ = try await store.verify() }
        await expectError(.closed, mentions: mentions) { _ = try await store.spaceUsage() }
        await expectError(.closed, mentions: mentions) { _ = try await store.undeclaredIndexes(of: Person.self) }
        await expectError(.closed, mentions: mentions) { try await store.dropIndex("age", from: "people") }

        let again = try await DocStore(path: path)
        #expect(try await again.get(Person.self, id: ann.id) == ann)
        #expect(try await Person.query().count(in: again) == 1)
        #expect(try await again.verify().isClean)
    }

    // MARK: Writing

    @Test func uniqueConflictIsUniqueViolationNamingCollectionIndexAndValue() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com")
        try await store.insert(ann)

        let copycat = Person(name: "Eve", age: 22, email: "ann@example.com")
        let error = await expectError(.uniqueViolation, mentions: ["people", "email", "ann@example.com"]) {
            try await store.insert(copycat)
        }
        #expect(error?.collection == "people")
        #expect(error?.index == "email")
        #expect(try await store.get(Person.self, id: copycat.id) == nil)

        // save of another document to a held value fails too, and leaves that document as it was.
        let bob = Person(name: "Bob", age: 30, email: "bob@example.com")
        try await store.insert(bob)
        var bobTakesAnn = bob
        bobTakesAnn.email = "ann@example.com"
        await expectError(.uniqueViolation, mentions: ["people", "email", "ann@example.com"]) {
            try await store.save(bobTakesAnn)
        }
        #expect(try await store.get(Person.self, id: bob.id) == bob)

        // A document keeping its own value is no conflict.
        var olderAnn = ann
        olderAnn.age = 42
        try await store.save(olderAnn)
        #expect(try await store.get(Person.self, id: ann.id) == olderAnn)

        #expect(try await Person.query().count(in: store) == 2)
        #expect(try await faultPersonIndexCount(store, "email") == 2)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func oneUniqueConflictInABatchStoresNoneOfIt() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com")
        try await store.insert(ann)

        let withExisting = [
            Person(name: "A", age: 1, email: "a@example.com"),
            Person(name: "B", age: 2, email: nil),
            Person(name: "C", age: 3, email: "ann@example.com"),
            Person(name: "D", age: 4, email: "d@example.com"),
        ]
        await expectError(.uniqueViolation, mentions: ["people", "email", "ann@example.com"]) {
            try await store.insert(contentsOf: withExisting)
        }
        let withinBatch = [
            Person(name: "E", age: 5, email: "same@example.com"),
            Person(name: "F", age: 6, email: "same@example.com"),
        ]
        await expectError(.uniqueViolation, mentions: ["people", "email", "same@example.com"]) {
            try await store.insert(contentsOf: withinBatch)
        }
        for person in withExisting + withinBatch {
            #expect(try await store.get(Person.self, id: person.id) == nil, "\(person.name) must not be stored")
        }
        #expect(try await Person.query().count(in: store) == 1)
        #expect(try await faultPersonIndexCount(store, "email") == 1)
        #expect(try await faultPersonIndexCount(store, "age") == 1)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func nilEmailsNeverConflict() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let people = (0..<6).map { Person(name: "n\($0)", age: $0, email: nil) }
            + [Person(name: "x", age: 9, email: "x@example.com"), Person(name: "y", age: 9, email: "y@example.com")]
        try await store.insert(contentsOf: people)
        try await store.insert(Person(name: "late", age: 1, email: nil))
        try await store.save(Person(name: "saved", age: 1, email: nil))
        #expect(try await Person.query().count(in: store) == 10)
        #expect(try await faultPersonIndexCount(store, "email") == 2)
        #expect(try await store.verify().isClean)
    }

    @Test func insertingAnExistingIdIsDuplicateIDAndSaveReplaces() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ann = Person(name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: ["a"])
        try await store.insert(ann)

        var changed = ann
        changed.name = "Ann B."
        changed.age = 50
        changed.city = "Bergen"
        changed.tags = ["b", "c"]
        let error = await expectError(.duplicateID, mentions: ["people", ann.id.uuidString]) {
            try await store.insert(changed)
        }
        #expect(error?.collection == "people")
        #expect(try await store.get(Person.self, id: ann.id) == ann, "a failed insert must not replace")

        // The same id twice in one batch: none of the batch is stored.
        let twin = Person(name: "Twin", age: 3)
        let other = Person(name: "Other", age: 4)
        await expectError(.duplicateID, mentions: ["people", twin.id.uuidString]) {
            try await store.insert(contentsOf: [other, twin, twin])
        }
        #expect(try await store.get(Person.self, id: other.id) == nil)
        #expect(try await store.get(Person.self, id: twin.id) == nil)

        try await store.save(changed)
        #expect(try await store.get(Person.self, id: ann.id) == changed)
        #expect(try await Person.query().count(in: store) == 1)
        #expect(try await faultPersonIndexCount(store, "tags") == 2)
        #expect(try await faultPersonIndexCount(store, "age") == 1)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func valueTooLongForAnIndexKeyIsValueTooLargeAndWritesNothing() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let long = String(repeating: "x", count: 600)

        await expectError(.valueTooLarge, mentions: ["city_age", "people"]) {
            try await store.insert(Person(name: "Long city", age: 1, city: long))
        }
        await expectError(.valueTooLarge, mentions: ["email", "people"]) {
            try await store.insert(Person(name: "Long email", age: 1, email: long))
        }
        await expectError(.valueTooLarge, mentions: ["tags", "people"]) {
            try await store.insert(Person(name: "Long tag", age: 1, tags: ["short", long]))
        }
        #expect(try await Person.query().count(in: store) == 0)
        for name in ["age", "city_age", "email", "tags"] {
            #expect(try await faultPersonIndexCount(store, name) == 0, "index \(name)")
        }

        // Replacing a document with one that has a too-long value keeps the old one.
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com", tags: ["a"])
        try await store.insert(ann)
        var spoiled = ann
        spoiled.city = long
        await expectError(.valueTooLarge, mentions: ["city_age"]) { try await store.save(spoiled) }
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        // A long value in a field that no index uses is fine.
        try await store.insert(Person(name: long, age: 2))
        #expect(try await Person.query().count(in: store) == 2)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    @Test func contextUsedAfterPerformReturnedIsTransactionExpired() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ann = Person(name: "Ann", age: 41)
        try await store.insert(ann)

        let box = FaultContextBox()
        try await store.write { ctx in box.context = ctx }
        let context = try #require(box.context)

        let mentions = ["transaction has ended"]
        await expectError(.transactionExpired, mentions: mentions) { _ = try Person.query().count(in: context) }
        await expectError(.transactionExpired, mentions: mentions) { _ = try context.get(Person.self, id: ann.id) }
        await expectError(.transactionExpired, mentions: mentions) { _ = try Person.query().results(in: context) }
        await expectError(.transactionExpired, mentions: mentions) { try context.insert(Person(name: "Late", age: 1)) }
        await expectError(.transactionExpired, mentions: mentions) { try context.save(ann) }
        await expectError(.transactionExpired, mentions: mentions) { try context.delete(Person.self, id: ann.id) }

        // The store is unharmed, and none of the late writes happened.
        #expect(try await Person.query().count(in: store) == 1)
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        try await store.insert(Person(name: "Bob", age: 30))
        #expect(try await Person.query().count(in: store) == 2)
    }

    @Test func catchPatternMatchesByCode() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        try await store.insert(Person(name: "Ann", age: 41, email: "ann@example.com"))

        var matched = ""
        do {
            try await store.insert(Person(name: "Eve", age: 22, email: "ann@example.com"))
            matched = "nothing thrown"
        } catch DocStoreError.duplicateID {
            matched = "duplicateID"
        } catch DocStoreError.uniqueViolation {
            matched = "uniqueViolation"
        } catch {
            matched = "other: \(error)"
        }
        #expect(matched == "uniqueViolation")

        #expect(DocStoreError.uniqueViolation ~= DocStoreError(.uniqueViolation, "x"))
        #expect(!(DocStoreError.duplicateID ~= DocStoreError(.uniqueViolation, "x")))
        #expect(!(DocStoreError.uniqueViolation ~= CocoaError(.fileNoSuchFile)))
    }
}
