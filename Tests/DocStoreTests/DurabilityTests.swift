import CLMDB
import Foundation
import Testing
@testable import DocStore

@Suite struct DurabilityTests {
    static let levels: [DocStore.Durability] = [.full, .normal, .off, .periodic(milliseconds: 5)]


    /// Each level opens the file with its sync flags, and what it wrote is there when the store is opened again.
    @Test(arguments: levels)
    func eachLevelOpensWithItsFlagsAndKeepsItsWrites(durability: DocStore.Durability) async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        var options = DocStore.Options()
        options.durability = durability
        let store = try await DocStore(path: path, options: options)
        let flags = await store.syncState().flags
        switch durability {
        case .full:
            // A commit waits for its record in the write log, not for LMDB's syncs.
            #expect(flags & LMDBFlags.noSync != 0 && FileManager.default.fileExists(atPath: path + "-log"))
        case .normal: #expect(flags & LMDBFlags.noMetaSync != 0 && flags & LMDBFlags.noSync == 0)
        case .off, .periodic: #expect(flags & LMDBFlags.noSync != 0)
        }
        for i in 0..<50 { try await store.insert(Person(name: "p\(i)", age: i)) }
        try await store.flush()
        await store.close()
        await #expect(throws: DocStoreError.self) { try await store.flush() }
        let again = try await DocStore(path: path)
        #expect(try await Person.query().count(in: again) == 50)
        #expect(try await again.verify().isClean)
    }

    /// `periodic` syncs the file from a thread of its own, and stops when the store closes.
    @Test func periodicSyncsInTheBackgroundUntilClosed() async throws {
        var options = DocStore.Options()
        options.durability = .periodic(milliseconds: 2)
        let (store, dir) = try await makeStore(options: options)
        defer { _ = dir }
        try await store.insert(Person(name: "Ann", age: 40))
        var waited = 0
        while await store.syncState().flushes == 0 && waited < 5_000 {
            try await Task.sleep(for: .milliseconds(5))
            waited += 5
        }
        #expect(await store.syncState().flushes > 0, "no background sync in \(waited) ms")
        await store.close()
        #expect(await store.syncState().flushes == 0, "the flush thread outlived the store")
    }

    /// A sync of the flush thread's that fails (a disk error in writing back) is reported by the next `flush()`,
    /// though that flush's own sync succeeds (as on Linux, where the failed pages are left clean); then it is told.
    @Test func aBackgroundSyncThatFailedIsReportedByTheNextFlush() async throws {
        var options = DocStore.Options()
        options.durability = .periodic(milliseconds: 2)
        let (store, dir) = try await makeStore(options: options)
        defer { _ = dir }
        let flusher = try #require(await store.flushThread())
        flusher.syncing { _ in EIO }
        try await store.insert(Person(name: "Ann", age: 40))
        let start = await store.syncState().flushes
        var waited = 0
        while await store.syncState().flushes < start + 2 && waited < 5_000 {
            try await Task.sleep(for: .milliseconds(5))
            waited += 5
        }
        flusher.syncing { mdb_env_sync($0, 1) }
        // (A sync the thread began with the failing stand-in ends before two more are done.)
        let switched = await store.syncState().flushes
        waited = 0
        while await store.syncState().flushes < switched + 2 && waited < 5_000 {
            try await Task.sleep(for: .milliseconds(5))
            waited += 5
        }
        await expectError(.storage, mentions: ["at an interval failed", "may not be on disk"]) { try await store.flush() }
        try await store.flush()
        await store.close()
    }

    /// A store opened read-only ignores the durability: it writes nothing, so it syncs nothing.
    @Test func aReadOnlyStoreSyncsNothing() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let writer = try await DocStore(path: path)
        try await writer.insert(Person(name: "Ann", age: 40))
        await writer.close()
        var options = DocStore.Options()
        options.readOnly = true
        options.durability = .periodic(milliseconds: 1)
        let reader = try await DocStore(path: path, options: options)
        #expect(await !reader.syncState().flushThread, "a read-only store started a flush thread")
        try await reader.flush()
        #expect(try await Person.query().count(in: reader) == 1)
        await reader.close()
        // The same options, writable: the thread is there.
        options.readOnly = false
        let writable = try await DocStore(path: path, options: options)
        #expect(await writable.syncState().flushThread)
        await writable.close()
    }
}

extension DocStore {
    /// The flags the file was opened with, whether it has a background flush thread, and that thread's syncs so far.
    func syncState() -> (flags: UInt32, flushThread: Bool, flushes: Int) {
        let environment = core.env as? LMDBEnvironment
        return (environment?.openFlags ?? 0, environment?.flusher != nil, environment?.flushesDone ?? 0)
    }

    /// The thread that syncs the file at an interval, if the store has one.
    func flushThread() -> LMDBEnvironment.Flusher? { (core.env as? LMDBEnvironment)?.flusher }
}
