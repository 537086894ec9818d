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
        }
        let length = try Self.length(path)
        let committed = try #require(LMDBFileCheck.run(path: path, metaOnly: true).committedSize)
        #expect(length >= committed)
        #expect(length <= LMDBEnvironment.inPlaceMapSize(for: committed) + (1 << 20),
                "the file is \(length) bytes for \(committed) in use")
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

    static func length(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
    }
}
