import Foundation
import Synchronization

/// The thread a ``DocStore``'s actor runs on: a serial executor of its own, so that LMDB's work (a commit's syncs,
/// an index build, a verify) never holds a thread of Swift's cooperative pool, which has one per core.
///
/// Jobs run one at a time in the order they came, each while the thread holds ``running``. A caller that finds the
/// store idle may take that lock itself and run a read on its own thread (``runIfIdle(_:)``): what a default actor
/// does when a task calls it while it is idle, and what spares a read two hand-overs between threads, each a
/// wake-up that costs tens of microseconds on a busy machine. Holding the lock, the caller is the only one using
/// the store's state, as a job would be. The thread ends when the store is released.
final class StoreThread: SerialExecutor, @unchecked Sendable {
    // @unchecked: `jobs`, `next`, `sleeping` and `stopped` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    /// The first job of `jobs` not yet taken.
    private var next = 0
    private var sleeping = false
    private var stopped = false
    /// Held while a job runs, or while a caller runs a read in its stead.
    private let running = Mutex(())
    /// The thread's `pthread_t`, once it runs: a job never takes ``running`` a second time.
    private let identity = Atomic<UInt>(0)

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        let wake = sleeping
        condition.unlock()
        if wake { condition.signal() }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// How many jobs wait to run: called from a job, whether others came meanwhile.
    var waitingJobs: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count - next
    }

    /// Ends the thread once the jobs queued so far have run. It may be called on the thread itself.
    func stop() {
        condition.lock()
        stopped = true
        condition.unlock()
        condition.signal()
    }

    /// Runs `body` on the calling thread if no job runs now (and none starts until it returns), and says whether it
    /// did. `body` may use the actor's state as a job would: it must not wait for the store.
    func runIfIdle(_ body: () throws -> Void) rethrows -> Bool {
        guard identity.load(ordering: .acquiring) != UInt(pthread_self()) else { return false }
        return try running.withLockIfAvailable { _ in try body() } != nil
    }

    private func run() {
        identity.store(UInt(pthread_self()), ordering: .releasing)
        while true {
            condition.lock()
            while next == jobs.count && !stopped {
                jobs.removeAll(keepingCapacity: true)
                next = 0
                sleeping = true
                condition.wait()
                sleeping = false
            }
            guard next < jobs.count else {   // stopped, and nothing left to run
                condition.unlock()
                return
            }
            let job = jobs[next]
            next += 1
            if next >= 1024 && next * 2 >= jobs.count {   // under steady load the queue never empties
                jobs.removeFirst(next)
                next = 0
            }
            condition.unlock()
            running.withLock { _ in job.runSynchronously(on: asUnownedSerialExecutor()) }
        }
    }
}
