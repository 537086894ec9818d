import Foundation
import Synchronization
import Testing
import TestSupport
@testable import DocStore

/// Reads of a store kept in a file run on their callers' threads, beside each other and beside the writer. Each
/// test holds a read open until something that would wait for it has happened: if it waited, the read gives up
/// after 30 seconds and the test fails (a deadlock guard, not a measure of time).
@Suite(.ownThreads) struct ReadsSideBySideTests {
    static func store(_ n: Int = 200) async throws -> (DocStore, TemporaryDirectory) {
        let (store, dir) = try await makeStore()
        try await store.insert(contentsOf: (0..<n).map {
            Person(id: UUID(), name: "p\($0)", age: $0 % 90, city: "c\($0 % 7)", email: nil, tags: [])
        })
        return (store, dir)
    }

    @Test func aReadWaitsForNoOtherRead() async throws {
        let (store, dir) = try await Self.store()
        defer { _ = dir }
        let inside = Shared()
        let bothIn = DispatchSemaphore(value: 0)
        // Each read counts the documents, then stays open until the other is open too.
        let met = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    try await store.read { ctx in
                        _ = try Person.query().count(in: ctx)
                        if inside.count.withLock({ $0 += 1; return $0 }) == 2 { bothIn.signal(); bothIn.signal() }
                        return bothIn.wait(timeout: .now() + 30) == .success
                    }
                }
            }
            return try await group.reduce(true) { $0 && $1 }
        }
        #expect(met, "the two reads were never open at once")
    }

    @Test func aWriteWaitsForNoRead() async throws {
        let (store, dir) = try await Self.store()
        defer { _ = dir }
        let readOpen = DispatchSemaphore(value: 0)
        let written = DispatchSemaphore(value: 0)
        async let reader: (Int, Bool) = store.read { ctx in
            let before = try Person.query().count(in: ctx)
            readOpen.signal()
            // The write commits while this read is open; the read still sees the commit it began with.
            let committed = written.wait(timeout: .now() + 30) == .success
            return (before == (try Person.query().count(in: ctx)) ? before : -1, committed)
        }
        #expect(readOpen.wait(timeout: .now() + 30) == .success)
        try await store.insert(Person(id: UUID(), name: "new", age: 1, city: "x", email: nil, tags: []))
        written.signal()
        let (seen, committed) = try await reader
        #expect(committed, "the write waited for the read")
        #expect(seen == 200, "the read saw another commit than the one it began with")
        #expect(try await Person.query().count(in: store) == 201)
    }

    /// A write that deletes an index runs alone; when it then throws, the deleted database's handle is closed all the
    /// same, and the reads after it open what they need again.
    @Test func aWriteThatDeletesAnIndexAndThrowsLeavesEveryReadWorking() async throws {
        let (store, dir) = try await Self.store()
        defer { _ = dir }
        struct Refused: Error {}
        let young = try await Person.include(#Predicate { $0.age < 45 }).count(in: store)
        await #expect(throws: Refused.self) {
            try await store.write { ctx -> Void in
                _ = try ctx.dropIndex("age", from: "people")
                throw Refused()
            }
        }
        #expect(try await Person.include(#Predicate { $0.age < 45 }).count(in: store) == young)
        let plan = try await Person.include(#Predicate { $0.age < 45 }).explain(in: store)
        #expect(plan.index == "age", "\(plan)")
        #expect(try await store.verify().isClean)
    }

    /// Many readers and a writer at once, with collections and indexes made, dropped and rebuilt meanwhile (which
    /// run alone), and every answer checked against what the read's own snapshot holds.
    @Test func readsBesideWritesThatChangeTheCatalogAnswerRightAndNeverFail() async throws {
        let (store, dir) = try await Self.store(500)
        defer { _ = dir }
        let shared = Shared()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for reader in 0..<4 {
                group.addTask {
                    var round = 0
                    while !shared.stop.load(ordering: .acquiring) {
                        round += 1
                        do {
                            let (total, byAge, byCity) = try await store.read { ctx in
                                (try Person.query().count(in: ctx),
                                 try Person.include(#Predicate { $0.age < 45 }).count(in: ctx)
                                    + Person.include(#Predicate { $0.age >= 45 }).count(in: ctx),
                                 try Person.query().groupBy(\.city).results(in: ctx).reduce(0) { $0 + $1.value })
                            }
                            if total != byAge || total != byCity {
                                shared.failures.withLock { $0.append("reader \(reader), round \(round): \(total) / \(byAge) / \(byCity)") }
                            }
                            let others = try await Query<DocumentValue>("extra").count(in: store)
                            if others < 0 { shared.failures.withLock { $0.append("negative count") } }
                        } catch {
                            shared.failures.withLock { $0.append("reader \(reader), round \(round): \(error)") }
                        }
                    }
                }
            }
            group.addTask {
                defer { shared.stop.store(true, ordering: .releasing) }
                for round in 0..<40 {
                    try await store.insert(contentsOf: (0..<20).map {
                        Person(id: UUID(), name: "w\(round)-\($0)", age: $0 * 4, city: "c\($0 % 5)", email: nil, tags: [])
                    })
                    try await store.write { ctx in
                        try ctx.insert(.object([("id", .int(Int64(round))), ("v", .int(Int64(round)))]), into: "extra")
                    }
                    if round % 3 == 0 {
                        try await store.write { ctx in try ctx.createIndex(.init(name: "v", kind: .regular, fields: ["v"]), in: "extra") }
                        _ = try await store.dropIndex("v", from: "extra")
                    }
                    if round % 4 == 1 {
                        try await store.write { ctx in _ = try ctx.dropCollection("extra") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let found = shared.failures.withLock { $0 }
        #expect(found.isEmpty, "\(found.count) wrong or failed reads; the first: \(found.first ?? "")")
        #expect(try await store.verify().isClean)
    }
}

private final class Shared: Sendable {
    let count = Mutex(0)
    let stop = Atomic<Bool>(false)
    let failures = Mutex<[String]>([])
}
