import Foundation
import Synchronization
import Testing

/// Runs each test of a suite on threads of its own instead of the shared cooperative pool.
///
/// A test that waits for a child process, a pipe or a semaphore blocks the thread it runs on. The cooperative pool
/// has one thread per core (two here), so two such tests stop every other test, whose clocks keep running: a
/// patient wait elsewhere then times out for a reason that has nothing to do with what it checks. With this trait,
/// a blocking test takes a thread from a pool that grows instead.
///
/// Child tasks (`async let`, task groups) run on these threads too; a task started with a plain `Task { }` does
/// not, and stalls whenever the shared pool is blocked: start it with
/// `Task(executorPreference: GrowingThreadPool.shared) { }`.
public struct OwnThreads: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil else { return try await function() }
        try await withTaskExecutorPreference(GrowingThreadPool.shared) { try await function() }
    }
}

extension Trait where Self == OwnThreads {
    /// The test runs on threads of its own: it may block them.
    public static var ownThreads: Self { OwnThreads() }
}

/// A task executor whose jobs run on plain threads: an idle one when there is one, a new one when every thread is
/// busy (or blocked). Threads are kept for later jobs and never end; a test process makes few.
public final class GrowingThreadPool: TaskExecutor {
    public static let shared = GrowingThreadPool()

    private struct State {
        var jobs: [UnownedJob] = []
        var idle = 0
    }
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let wakeIdle = state.withLock { state in
            state.jobs.append(job)
            guard state.idle > 0 else { return false }
            state.idle -= 1
            return true
        }
        if wakeIdle { wake.signal() } else { Thread { self.work() }.start() }
    }

    private func work() {
        while true {
            if let job = state.withLock({ $0.jobs.isEmpty ? nil : $0.jobs.removeFirst() }) {
                job.runSynchronously(on: asUnownedTaskExecutor())
            } else {
                state.withLock { $0.idle += 1 }
                wake.wait()
            }
        }
    }
}
