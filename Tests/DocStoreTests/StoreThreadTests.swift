import Foundation
import Synchronization
import Testing
import TestSupport
@testable import DocStore

/// The store's thread lends its turn to a write that finds it idle (on a store whose commits do not sync, or write one
/// record of the write log): the write runs on its caller's thread, and no job of the store's thread runs meanwhile,
/// so that the write is as alone as it would be there.
@Suite(.ownThreads) struct StoreThreadTests {
    /// An actor on a thread of its own, that notes when its jobs run.
    actor Probe {
        nonisolated let thread: StoreThread
        nonisolated var unownedExecutor: UnownedSerialExecutor { thread.asUnownedSerialExecutor() }
        private(set) var ran = 0

        init(thread: StoreThread) { self.thread = thread }

        func run() { ran += 1 }

        /// Holds the thread until `release` is signalled.
        func hold(_ entered: DispatchSemaphore, _ release: DispatchSemaphore) {
            entered.signal()
            release.wait()
        }
    }

    /// Waits (at most 30 s, a guard against a hang) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async {
        let deadline = Date().addingTimeInterval(30)
        while !condition() && Date() < deadline { try? await Task.sleep(for: .milliseconds(1)) }
    }

    /// Whether `thread` lends its turn now; a turn lent is given back at once, so that a test that finds it lent
    /// fails rather than hangs.
    static func lends(_ thread: StoreThread) -> Bool {
        guard thread.borrow() else { return false }
        thread.giveBack()
        return true
    }

    @Test func aBorrowedTurnKeepsJobsWaitingUntilItIsGivenBack() async throws {
        let thread = StoreThread(name: "probe")
        defer { thread.stop() }
        let probe = Probe(thread: thread)
        await Self.eventually { thread.borrow() }   // (the thread starts asleep once it has begun)
        #expect(!Self.lends(thread), "a second caller took a turn already taken")
        let job = Task(executorPreference: GrowingThreadPool.shared) { await probe.run() }
        await Self.eventually { thread.waitingJobs == 1 }
        try await Task.sleep(for: .milliseconds(50))
        #expect(thread.waitingJobs == 1, "a job ran while the turn was borrowed")
        thread.giveBack()
        await job.value
        #expect(await probe.ran == 1)
        await Self.eventually { thread.borrow() }
        thread.giveBack()
    }

    @Test func aThreadRunningOrHoldingJobsLendsNoTurn() async throws {
        let thread = StoreThread(name: "probe")
        defer { thread.stop() }
        let probe = Probe(thread: thread)
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holding = Task(executorPreference: GrowingThreadPool.shared) { await probe.hold(entered, release) }
        entered.wait()
        #expect(!Self.lends(thread), "a turn was lent while a job ran")
        let queued = Task(executorPreference: GrowingThreadPool.shared) { await probe.run() }
        await Self.eventually { thread.waitingJobs == 1 }
        #expect(!Self.lends(thread), "a turn was lent while jobs waited")
        release.signal()
        await holding.value
        await queued.value
        await Self.eventually { thread.borrow() }
        thread.giveBack()
        thread.stop()
        try await Task.sleep(for: .milliseconds(20))
        #expect(!Self.lends(thread), "a stopped thread lent its turn")
    }

    /// A read called from the main actor (a command-line tool's top-level code) runs on its thread: the library's
    /// `async` functions run on their caller's executor, with no hop to the shared pool and back, which cost such a
    /// caller tens of microseconds a query.
    @Test(.enabled(if: !engineIsServer)) @MainActor func readsFromTheMainActorRunOnItsThread() async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "main.db"))
        try await store.insert(Person(name: "a", age: 30))
        // (The main actor's jobs need not run on the process's main thread: the next test checks the executor.)
        let caller = pthread_self()
        let read = try await store.read { ctx in (pthread_self(), try Person.query().count(in: ctx)) }
        #expect(pthread_equal(read.0, caller) != 0, "a read from the main actor ran on another thread")
        #expect(read.1 == 1)
        // A query's own function reads the same way, and returns to the main actor.
        #expect(try await Person.query().first(in: store)?.name == "a")
        MainActor.assertIsolated()
    }

    /// The same in a real program, checked on the executor rather than the thread (a hop to the pool may go on on the
    /// thread that drains the main actor's queue, as it does under the test runner): a child's top-level code reads
    /// from the main actor, and each read's body runs isolated to it, or the child stops.
    @Test(.enabled(if: !engineIsServer)) func aProgramsReadFromTheMainActorStaysOnTheMainActor() async throws {
        let dir = TemporaryDirectory()
        let process = ChildProcess()
        process.executableURL = CrashSafetyTests.writerURL
        process.arguments = ["read-on-main", storeLocation(dir, "main.db")]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let complaint = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "the child failed: \(complaint)")
        #expect(printed == "read 1 child-1\n")
    }

    /// Many tasks write at once on a store whose map must grow several times, with commits that do not sync and
    /// with commits the write log records: some writes run on their callers' threads, the rest on the store's, and
    /// none overlaps another (LMDB lets the map grow only with no transaction of the process open). Every write is
    /// there, and the store is sound.
    @Test(.enabled(if: !engineIsServer),
          arguments: WriteLog.bootID.isEmpty ? [DocStore.Durability.off] : [.off, .full])
    func writesOnCallersThreadsAndOnTheStoresThreadLoseNothing(durability: DocStore.Durability) async throws {
        let dir = TemporaryDirectory()
        var options = DocStore.Options()
        options.initialMapSize = 256 << 10
        options.durability = durability
        let store = try await openStore(storeLocation(dir, "turns.db"), options: options)
        // One write at a time first, until one finds the store's thread idle: on a busy machine the writers below
        // may keep it busy throughout.
        var alone = 0
        while store.writesOnCallersThreads.load(ordering: .relaxed) == 0 && alone < 200 {
            try await store.insert(Person(name: "alone-\(alone)", age: 0))
            alone += 1
        }
        let tasks = 8, each = 60
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                group.addTask(executorPreference: GrowingThreadPool.shared) {
                    for i in 0..<each {
                        if i % 3 == 0 {
                            try await store.write { ctx in
                                try ctx.insert(Person(name: "w-\(t)-\(i)-" + String(repeating: "x", count: 700), age: i))
                            }
                        } else {
                            try await store.insert(Person(name: "i-\(t)-\(i)-" + String(repeating: "y", count: 700),
                                                          age: i, tags: ["t\(t)"]))
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(store.writesOnCallersThreads.load(ordering: .relaxed) > 0, "no write ran on its caller's thread")
        #expect(try await Person.query().count(in: store) == tasks * each + alone)
        #expect(try await Person.include(#Predicate { $0.tags.contains("t5") }).count(in: store) == each - each / 3)
        #expect(try await store.verify().isClean)
    }

    /// Writers go on committing while the shared pool is kept busy (a task per core computing without a break), at
    /// full durability, where a group commit first waits a moment for the writers the last group resumed: that wait
    /// is the store thread's own. (It was a `Task.sleep`, whose wake-up waits for a thread of the shared pool: the
    /// writers then stalled until the pool was free.)
    @Test(.enabled(if: !engineIsServer), .timeLimit(.minutes(1))) func groupsCommitWhileTheSharedPoolIsBusy()
        async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "busy.db"))
        #expect(store.commitsWait)
        let stop = Flag(), written = Counter()
        let busy = Self.keepTheSharedPoolBusy(until: stop)
        defer { stop.set() }
        let writers = (0..<4).map { t in
            Task(executorPreference: GrowingThreadPool.shared) {
                var i = 0
                while !stop.isSet {
                    try await store.insert(Person(name: "w-\(t)-\(i)", age: i % 90))
                    written.add()
                    i += 1
                }
            }
        }
        let waited = Self.block(atMost: 20_000) { written.value >= 200 }
        let during = written.value
        stop.set()
        for task in busy { _ = await task.value }
        for writer in writers { try await writer.value }
        #expect(during >= 200, "\(during) writes in \(waited) ms while the shared pool was busy")
        #expect(try await Person.query().count(in: store) == written.value)
    }

    /// An observer running on threads of its own hears another process's commits while the shared pool is kept
    /// busy: the observation's task runs on the store's reader threads, and the poll for other processes' commits
    /// waits on no thread of the shared pool. (Both waited for one: the observer heard none of 20 in 15 s.)
    @Test(.enabled(if: !engineIsServer), .timeLimit(.minutes(1)))
    func anObserverHearsAnotherProcessWhileTheSharedPoolIsBusy() async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "observed.db")
        let store = try await openStore(path)
        let seen = Counter(-1), stop = Flag()
        let observer = Task(executorPreference: GrowingThreadPool.shared) {
            for try await count in Person.query().observeCount(in: store) {
                seen.set(count)
                if count >= 20 { return }
            }
        }
        _ = Self.block(atMost: 10_000) { seen.value >= 0 }
        try #require(seen.value == 0, "the observation gave no first count")
        let busy = Self.keepTheSharedPoolBusy(until: stop)
        defer { stop.set() }
        let (writer, _, _) = try BackupTests.child(["insert-people", path, "20", "0"])
        writer.waitUntilExit()
        let waited = Self.block(atMost: 15_000) { seen.value >= 20 }
        let heard = seen.value
        stop.set()
        for task in busy { _ = await task.value }
        observer.cancel()
        #expect(writer.terminationStatus == 0)
        #expect(heard == 20, "the observer had \(heard) of the other process's 20 people after \(waited) ms")
    }

    /// A task per core on the shared pool, computing without a break until `stop` is set.
    static func keepTheSharedPoolBusy(until stop: Flag) -> [Task<Int, Never>] {
        (0..<ProcessInfo.processInfo.activeProcessorCount).map { _ in
            Task.detached {
                var spun = 0
                while !stop.isSet { spun &+= 1 }
                return spun
            }
        }
    }

    /// Blocks this thread (one of the test's own, not the shared pool's) until `done` or `milliseconds` have
    /// passed; returns the milliseconds waited.
    static func block(atMost milliseconds: Int, until done: () -> Bool) -> Int {
        var waited = 0
        while !done() && waited < milliseconds {
            usleep(10_000)
            waited += 10
        }
        return waited
    }

    final class Flag: Sendable {
        private let set_ = Atomic(false)
        var isSet: Bool { set_.load(ordering: .relaxed) }
        func set() { set_.store(true, ordering: .relaxed) }
    }

    final class Counter: Sendable {
        private let count = Atomic(0)
        init(_ start: Int = 0) { count.store(start, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
        func add() { count.add(1, ordering: .relaxed) }
        func set(_ value: Int) { count.store(value, ordering: .relaxed) }
    }

    /// A store closed while tasks write: every write either returned, and is in the store opened again, or was
    /// refused as closed; the close waits for a write running on its caller's thread.
    @Test(.enabled(if: !engineIsServer),
          arguments: WriteLog.bootID.isEmpty ? [DocStore.Durability.off] : [.off, .full])
    func closingWhileWritesRunKeepsEveryWriteThatReturned(durability: DocStore.Durability) async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "closing.db")
        var options = DocStore.Options()
        options.durability = durability
        let store = try await openStore(path, options: options)
        let written = Written()
        // One write at a time first, until one finds the store's thread idle: on a busy machine the writers below
        // may keep it busy throughout.
        var alone = 0
        while store.writesOnCallersThreads.load(ordering: .relaxed) == 0 && alone < 200 {
            try await store.insert(Person(name: "alone-\(alone)", age: 0))
            written.names.withLock { $0.append("alone-\(alone)") }
            alone += 1
        }
        let writers = (0..<4).map { t in
            Task(executorPreference: GrowingThreadPool.shared) { () -> DocStoreError.Code? in
                for i in 0..<100_000 {
                    let name = "c-\(t)-\(i)"
                    do {
                        try await store.insert(Person(name: name, age: i % 90))
                        written.names.withLock { $0.append(name) }
                    } catch {
                        return (error as? DocStoreError)?.code
                    }
                }
                return nil
            }
        }
        await StoreThreadTests.eventually { written.names.withLock { $0.count } >= alone + 200 }
        await store.close()
        for writer in writers { #expect(await writer.value == .closed) }
        #expect(store.writesOnCallersThreads.load(ordering: .relaxed) > 0, "no write ran on its caller's thread")
        let reopened = try await openStore(path)
        let names = Set(try await Person.query().results(in: reopened).map(\.name))
        let returned = written.names.withLock { $0 }
        #expect(returned.count >= 200)
        #expect(returned.allSatisfy(names.contains), "a write that returned is missing")
        #expect(try await reopened.verify().isClean)
    }
}

private final class Written: Sendable {
    let names = Mutex<[String]>([])
}
