import Foundation
import Synchronization

/// Where the reads of a store kept in a file run: on the caller's thread while few reads run there, otherwise on
/// threads of the store's own. The same threads run the tasks of observations (as their task executor, on any
/// store), and their reads run there at once.
///
/// A read is synchronous: on the caller's thread it costs no hand-over to another thread (a wake-up, tens of
/// microseconds on a busy machine), which is most of a small read's time. But it holds that thread, and Swift's
/// cooperative pool has one per core: reads that filled it would keep every other task waiting, a write's caller
/// among them, whose commit is done but cannot return. So at most one read per core but one (and at least one) runs
/// on a caller's thread at a time; the others are handed to the store's reader threads, which run them side by side
/// while their callers wait without holding a thread.
final class ReaderThreads: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs`, `idle`, `threads` and `stopped` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [() -> Void] = []
    private var idle = 0
    private var threads = 0
    private var stopped = false
    private let name: String
    /// Reads running on their callers' threads now.
    private let inline = Atomic<Int>(0)
    /// The most reads on callers' threads at once.
    let inlineLimit = max(1, ProcessInfo.processInfo.activeProcessorCount - 1)
    /// The most reader threads.
    let threadLimit = max(4, ProcessInfo.processInfo.activeProcessorCount)

    init(name: String) { self.name = name }

    /// Takes a turn on the calling thread if fewer than ``inlineLimit`` reads run on callers' threads: `true`, and
    /// ``leaveInline()`` must follow once the read is done; `false` otherwise. (Not `async`, and nothing generic:
    /// the usual read costs no suspension point, and no type looked up at run time.)
    func enterInline() -> Bool {
        guard inline.add(1, ordering: .acquiringAndReleasing).newValue <= inlineLimit else {
            inline.subtract(1, ordering: .releasing)
            return false
        }
        return true
    }

    /// Ends a turn ``enterInline()`` took.
    func leaveInline() { inline.subtract(1, ordering: .releasing) }

    /// Whether the calling thread is one of these: a read there (an observation's) runs at once, holding no turn
    /// of the callers' threads.
    var runsTheCallingThread: Bool {
        pthread_getspecific(ReaderThreads.threadKey) == Unmanaged.passUnretained(self).toOpaque()
    }
    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `body` on the calling thread if fewer than ``inlineLimit`` reads run on callers' threads, else on a
    /// reader thread, while the caller waits.
    func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        if enterInline() {
            defer { leaveInline() }
            return try body()
        }
        let handed = Handed(body)
        return try await withCheckedThrowingContinuation { continuation in
            enqueue {
                // The body is let go of before the caller resumes: it may not outlive the call.
                let result = { () -> Result<R, any Error> in
                    guard let body = handed.take() else { return .failure(CancellationError()) }
                    return Result { try body() }
                }()
                continuation.resume(with: result)
            }
        }
    }

    /// A read's body on its way to a reader thread, taken once.
    private final class Handed<R>: @unchecked Sendable {
        // @unchecked: set once, taken once, by the one thread that runs it.
        private var body: (@Sendable () throws -> R)?
        init(_ body: @escaping @Sendable () throws -> R) { self.body = body }
        func take() -> (@Sendable () throws -> R)? {
            defer { body = nil }
            return body
        }
    }

    /// A job of a task that prefers these threads (an observation: see ``DocStore/observation(_:)``), run on one of
    /// them: what it waits for wakes it here, not on a thread of Swift's shared pool, which a busy process may
    /// have none of free for seconds.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        enqueue { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }

    private func enqueue(_ job: @escaping () -> Void) {
        condition.lock()
        jobs.append(job)
        let start = idle == 0 && threads < threadLimit
        if start { threads += 1 }
        condition.unlock()
        if start {
            let thread = Thread { [self] in work() }
            thread.name = name
            thread.start()
        } else {
            condition.signal()
        }
    }

    private func work() {
        pthread_setspecific(ReaderThreads.threadKey, Unmanaged.passUnretained(self).toOpaque())
        condition.lock()
        while true {
            while jobs.isEmpty && !stopped {
                idle += 1
                condition.wait()
                idle -= 1
            }
            guard !jobs.isEmpty else { break }   // stopped, and nothing left
            let job = jobs.removeFirst()
            condition.unlock()
            job()
            condition.lock()
        }
        threads -= 1
        condition.unlock()
    }

    /// Ends the threads once the reads queued so far have run. (A job queued later still runs, on a thread started
    /// for it, which then ends too.)
    func stop() {
        condition.lock()
        stopped = true
        condition.unlock()
        condition.broadcast()
    }
}
