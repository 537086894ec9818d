import Foundation

/// The thread a ``DocStore``'s actor runs on: a serial executor of its own, so that LMDB's work (a commit's syncs,
/// an index build, a verify) never holds a thread of Swift's cooperative pool, which has one per core.
///
/// Jobs run one at a time in the order they came. The thread ends when the store is released. (Reads of a store
/// kept in a file do not come here: they run on their callers' threads, beside the jobs.)
///
/// While the thread sleeps with nothing to run, a caller may take its turn instead (``borrow()``): it runs its work
/// on its own thread, as a job would, and jobs that come meanwhile wait until it gives the turn back. A lone write
/// so costs no hop to this thread and back, which is a third of a write's time when it does not sync (see
/// ``DocStore/write(_:)`` for when a write does).
final class StoreThread: SerialExecutor, @unchecked Sendable {
    // @unchecked: `jobs`, `next`, `sleeping`, `borrowed`, `awaitingJobs` and `stopped` are guarded by `condition`.
    private let condition = MonotonicCondition()
    private var jobs: [UnownedJob] = []
    /// The first job of `jobs` not yet taken.
    private var next = 0
    private var sleeping = false
    /// A caller holds the thread's turn: no job runs until it gives it back.
    private var borrowed = false
    /// A job waits for others to come (``waitForJobs(_:upTo:)``).
    private var awaitingJobs = false
    private var stopped = false

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        let wake = (sleeping && !borrowed) || awaitingJobs   // (else woken when the turn is given back)
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

    /// Called from a job: waits until `count` jobs wait to run behind it, or `duration` has passed; returns how many
    /// wait. The wait is the thread's own, where a `Task.sleep` would be woken by a thread of Swift's shared pool,
    /// which a busy process may have none of free for a long while.
    func waitForJobs(_ count: Int, upTo duration: Duration) -> Int {
        let deadline = MonotonicCondition.now() + duration.nanoseconds
        condition.lock()
        defer { condition.unlock() }
        awaitingJobs = true
        while jobs.count - next < count && !stopped && condition.wait(until: deadline) {}
        awaitingJobs = false
        return jobs.count - next
    }

    /// Takes the thread's turn for work run on the caller's thread, when the thread sleeps with no job to run (and
    /// no other caller has it): `true`, and then the caller must ``giveBack()``. Until then no job runs, so the work
    /// is as alone as a job. `false` when the thread is busy: the work should be a job, to wait its turn in order.
    func borrow() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard sleeping && !borrowed && !stopped && next == jobs.count else { return false }
        borrowed = true
        return true
    }

    /// Gives back the turn ``borrow()`` took: the jobs that came meanwhile run.
    func giveBack() {
        condition.lock()
        borrowed = false
        let wake = next < jobs.count || stopped
        condition.unlock()
        if wake { condition.signal() }
    }

    /// Ends the thread once the jobs queued so far have run. It may be called on the thread itself.
    func stop() {
        condition.lock()
        stopped = true
        condition.unlock()
        condition.signal()
    }

    private func run() {
        while true {
            condition.lock()
            while borrowed || (next == jobs.count && !stopped) {
                if next == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    next = 0
                }
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
            job.runSynchronously(on: asUnownedSerialExecutor())
        }
    }
}
