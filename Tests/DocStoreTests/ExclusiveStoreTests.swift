import Foundation
import Testing
import TestSupport
@testable import DocStore

/// A store opened exclusively (`DocStore.Options.exclusive`): no other process opens the file meanwhile, and at
/// `.off` its commits change pages in place (`MDB_WRITEMAP`), the file as long as the map. Group commits and crashes
/// in that mode are covered by ``GroupCommitTests`` and ``CrashSafetyTests`` (their `inPlace` and `off-exclusive`
/// cases).
@Suite(.ownThreads) struct ExclusiveStoreTests {
    /// The child process `hold PATH exclusive|shared`: what it printed first (`opened`, or `refused` and why), with
    /// the child still holding the store open until `release` is called.
    static func hold(_ path: String, exclusive: Bool) throws -> (firstLine: String, release: () -> Void) {
        let process = ChildProcess()
        process.executableURL = CrashSafetyTests.writerURL
        process.arguments = ["hold", path, exclusive ? "exclusive" : "shared"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !text.contains("\n") {
            let data = output.fileHandleForReading.availableData   // blocks until the child prints, or ends
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        return (text.split(separator: "\n").first.map(String.init) ?? "", {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        })
    }

    @Test func anExclusiveStoreKeepsOtherProcessesOutAndIsKeptOutByThem() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("alone.db")
        var exclusive = DocStore.Options()
        exclusive.exclusive = true
        do {
            let store = try await DocStore(path: path, options: exclusive)
            try await store.insert(Person(name: "Ann", age: 30))
            let (line, release) = try Self.hold(path, exclusive: false)
            release()
            #expect(line.hasPrefix("refused") && line.contains("exclusively"), "\(line)")
            await store.close()
        }
        // Another process has it open: an exclusive opening here is refused, and takes nothing from that process.
        let (line, release) = try Self.hold(path, exclusive: false)
        #expect(line == "opened", "\(line)")
        do {
            _ = try await DocStore(path: path, options: exclusive)
            Issue.record("an exclusive opening succeeded while another process had the store open")
        } catch let error as DocStoreError {
            #expect(error.code == .alreadyOpen && error.message.contains("another process has it open"), "\(error)")
        }
        let shared = try await DocStore(path: path)
        #expect(try await Person.query().count(in: shared) == 1)
        await shared.close()
        release()
        // Once it has closed, the exclusive opening is the one that keeps others out.
        let store = try await DocStore(path: path, options: exclusive)
        let (again, releaseAgain) = try Self.hold(path, exclusive: true)
        releaseAgain()
        #expect(again.hasPrefix("refused"), "\(again)")
        await store.close()
    }

    /// The file of a store written in place grows with its map, by half of what is in use at a time, rather than
    /// doubling; it opens again in either mode with nothing lost, and an opening never makes it shorter.
    @Test func aFileWrittenInPlaceGrowsInStepsAndOpensEitherWay() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("inplace.db")
        var options = DocStore.Options()
        (options.exclusive, options.durability) = (true, .off)
        var rng = SeededGenerator(seed: 7)
        var expected: [UUID: Person] = [:]
        let store = try await DocStore(path: path, options: options)
        #expect(await store.writesInPlace())
        for round in 0..<30 {
            let batch = (0..<200).map { i in
                Person(name: "p\(round)-\(i)-" + String(repeating: "n", count: Int.random(in: 0..<400, using: &rng)),
                       age: Int.random(in: 0..<90, using: &rng), email: "p\(round)-\(i)@example.com",
                       tags: ["t\(i % 7)"])
            }
            try await store.insert(contentsOf: batch)
            for person in batch { expected[person.id] = person }
            // Single writes, and deletes that free pages.
            for person in batch.prefix(5) {
                var changed = person
                changed.age += 1
                try await store.save(changed)
                expected[person.id] = changed
            }
            for person in batch.suffix(20) {
                try await store.delete(Person.self, id: person.id)
                expected[person.id] = nil
            }
            // (Checked after each round: right after a step, the file is longest for what it holds.)
            let length = try Self.length(path)
            let committed = try #require(LMDBFileCheck.run(path: path, metaOnly: true).committedSize)
            #expect(length >= committed)
            #expect(length <= LMDBEnvironment.inPlaceMapSize(for: committed) + (1 << 20),
                    "round \(round): the file is \(length) bytes for \(committed) in use")
        }
        #expect(try await store.verify().isClean)
        await store.close()

        for exclusive in [false, true] {
            var reopening = DocStore.Options()
            reopening.exclusive = exclusive
            let before = try Self.length(path)
            let reopened = try await DocStore(path: path, options: reopening)
            #expect(try Self.length(path) >= before)
            let stored = try await Person.query().results(in: reopened)
            #expect(Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) }) == expected)
            #expect(try await Person.include(#Predicate { $0.tags.contains("t3") }).count(in: reopened)
                    == expected.values.filter { $0.tags.contains("t3") }.count)
            #expect(try await reopened.verify().isClean)
            await reopened.close()
        }
    }

    /// One write far larger than the store meets a full map again and again: each time the map grows by half of
    /// itself, not by a step of its own size, so that the write runs again a few times rather than once a MiB.
    @Test func aWriteFarLargerThanTheMapGrowsItByHalves() async throws {
        let dir = TemporaryDirectory()
        var options = DocStore.Options()
        (options.exclusive, options.durability) = (true, .off)
        let store = try await DocStore(path: dir.path("large.db"), options: options)
        #expect(await store.writesInPlace())
        try await store.insert(Person(name: "first", age: 0))
        let people = (0..<3_000).map { Person(name: String(repeating: "w", count: 8_000) + "\($0)", age: $0 % 80) }
        try await store.insert(contentsOf: people)
        let growths = await store.mapGrowths()
        #expect(growths >= 3 && growths <= 12, "\(growths) growths for about 24 MiB")
        #expect(try await Person.query().count(in: store) == 3_001)
        #expect(try await Person.include(#Predicate { $0.age == 7 }).count(in: store) == 38)
        #expect(try await store.verify().isClean)
        await store.close()
    }

    /// At `.periodic`, a thread syncs the map written in place every millisecond while commits make it grow: no sync
    /// meets the map while it is set to another size (a flush would then report the failed sync), and closing stops
    /// that thread even while it waits to sync.
    @Test func aMapWrittenInPlaceIsSyncedWhileItGrows() async throws {
        let dir = TemporaryDirectory()
        var options = DocStore.Options()
        (options.exclusive, options.durability) = (true, .periodic(milliseconds: 1))
        for round in 0..<3 {
            let store = try await DocStore(path: dir.path("periodic-\(round).db"), options: options)
            for batch in 0..<30 {
                try await store.insert(contentsOf: (0..<100).map {
                    Person(name: String(repeating: "n", count: 600) + "\(batch)-\($0)", age: $0, tags: ["t\(batch)"])
                })
                try await store.flush()
            }
            #expect(try await Person.query().count(in: store) == 3_000)
            #expect(try await store.verify().isClean)
            await store.close()
        }
    }

    /// Leaves the file at `path` shorter than its last commit says, as a file whose last pages are free and were
    /// never written is: a large value is written and deleted, and the file then cut before the first of its last
    /// pages that the structural check finds free (the check of the shorter file is clean).
    static func shortenByAFreedTail(_ path: String) throws {
        var configuration = LMDBEnvironment.Configuration(initialMapSize: 64 << 20, maximumMapSize: 64 << 20,
                                                          maxDatabases: 64, maxReaders: 16)
        configuration.sync = .none   // (no write log, whose pin would keep every freed page from being taken again)
        let env = try LMDBEnvironment(path: path, configuration: configuration)
        let key = Array("big".utf8)
        // Then small commits: they take the large value's pages, and free the pages at the end that the earlier
        // ones wrote.
        for step in 0..<8 {
            try env.write { txn in
                guard let db = try txn.openKeySpace("scratch", create: true) else {
                    throw StorageError.failed("no space")
                }
                switch step {
                case 0: try txn.put(db, key, [UInt8](repeating: 7, count: 1 << 20))
                case 1: _ = try txn.delete(db, key, value: nil)
                default: try txn.put(db, Array("small".utf8), [UInt8(step)])
                }
            }
        }
        env.close()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        var cut = bytes.count
        while cut > 4096 * 4, LMDBFileCheck.run(data: bytes.prefix(cut - 4096)).problems.isEmpty { cut -= 4096 }
        try #require(cut < bytes.count, "no page at the file's end is free")
        try bytes.prefix(cut).write(to: URL(fileURLWithPath: path))
        let committed = try #require(LMDBFileCheck.run(path: path, metaOnly: true).committedSize)
        try #require(committed > (try length(path)), "the file is not shorter than its last commit")
    }

    /// A store's file shorter than its last commit says is lengthened to it by an opening that writes in place
    /// (which maps the whole of it); another program's file is opened as it is, refused, and left unchanged.
    @Test func aShortFileIsLengthenedOnlyIfItIsAStores() async throws {
        let dir = TemporaryDirectory()
        var options = DocStore.Options()
        (options.exclusive, options.durability) = (true, .off)

        let other = dir.path("other.mdb")
        do {
            let env = try LMDBEnvironment(path: other, configuration: .init(initialMapSize: 1 << 20,
                                          maximumMapSize: 1 << 20, maxDatabases: 8, maxReaders: 16))
            try env.write { txn in
                guard let db = try txn.openKeySpace("other", create: true) else { throw StorageError.failed("no space") }
                try txn.put(db, Array("key".utf8), Array("their value".utf8))
            }
            env.close()
        }
        try Self.shortenByAFreedTail(other)
        let before = try Data(contentsOf: URL(fileURLWithPath: other))
        do {
            _ = try await DocStore(path: other, options: options)
            Issue.record("another program's file opened as a store")
        } catch let error as DocStoreError {
            #expect(error.code == .notAStore, "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: other)) == before, "another program's file changed")

        let path = dir.path("short.db")
        let people = (0..<300).map { Person(name: "p\($0)", age: $0 % 50, email: "p\($0)@example.com") }
        do {
            let store = try await DocStore(path: path)
            try await store.insert(contentsOf: people)
            await store.close()
        }
        try Self.shortenByAFreedTail(path)
        let store = try await DocStore(path: path, options: options)
        let committed = try #require(LMDBFileCheck.run(path: path, metaOnly: true).committedSize)
        #expect(try Self.length(path) >= committed)
        try await store.insert(Person(name: "after", age: 1))
        #expect(try await Person.query().count(in: store) == 301)
        #expect(try await Person.include(#Predicate { $0.age == 7 }).count(in: store) == 6)
        #expect(try await store.verify().isClean)
        await store.close()
    }

    static func length(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
    }
}

extension DocStore {
    /// Whether the store's commits change the file's pages in place (`MDB_WRITEMAP`).
    func writesInPlace() -> Bool { (core.env as? LMDBEnvironment)?.writesInPlace ?? false }

    /// How many times the store's map has grown since it opened.
    func mapGrowths() -> Int { (core.env as? LMDBEnvironment)?.mapGrowths ?? 0 }
}
