import Glibc

/// A mutex and a condition whose timed waits run by the monotonic clock: a wall clock set back (a time server's
/// step, a virtual machine resumed) does not stretch them.
final class MonotonicCondition: @unchecked Sendable {
    // @unchecked: the pthread objects are made to be shared between threads.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func signal() { pthread_cond_signal(cond) }
    func wait() { pthread_cond_wait(cond, mutex) }

    /// Waits until signalled or `deadline` (``now()``'s nanoseconds) has passed: `false` once it has.
    func wait(until deadline: Int) -> Bool {
        guard deadline > MonotonicCondition.now() else { return false }
        var time = timespec(tv_sec: deadline / 1_000_000_000, tv_nsec: deadline % 1_000_000_000)
        return pthread_cond_timedwait(cond, mutex, &time) != ETIMEDOUT
    }

    /// The monotonic clock, in nanoseconds.
    static func now() -> Int {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return time.tv_sec * 1_000_000_000 + time.tv_nsec
    }
}

extension Duration {
    /// The whole nanoseconds of the duration.
    var nanoseconds: Int { Int(components.seconds) * 1_000_000_000 + Int(components.attoseconds / 1_000_000_000) }
}
