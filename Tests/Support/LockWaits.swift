import Foundation
import Synchronization

/// A thread whose waits for a lock a test watches, read from the kernel: for a test that must act while another
/// thread is blocked on a lock the test holds, rather than after a time that is hoped to be long enough.
///
/// A `Mutex` that is taken makes the thread that wants it wait in the kernel, in a `futex` call that locks
/// (`FUTEX_LOCK_PI`); `/proc/self/task/<id>/syscall` names the call a blocked thread is in.
public final class WatchedThread: Sendable {
    private let id = Atomic<Int32>(0)

    public init() {}

    /// Makes the calling thread the one watched: call it on that thread, just before it takes the lock.
    public func isCurrent() {
        // "/proc/thread-self" links to "<process>/task/<thread>".
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        id.store(link.split(separator: "/").last.flatMap { Int32($0) } ?? 0, ordering: .releasing)
    }

    /// The number of the `futex` system call.
    #if arch(x86_64)
    private static let futex = 202
    #elseif arch(arm64)
    private static let futex = 98
    #endif

    /// Whether the watched thread is blocked taking a lock.
    public var isWaitingForLock: Bool {
        let thread = id.load(ordering: .acquiring)
        guard thread != 0,
              let text = try? String(contentsOfFile: "/proc/self/task/\(thread)/syscall", encoding: .utf8)
        else { return false }
        let fields = text.split(separator: " ")
        guard fields.count > 2, Int(fields[0]) == Self.futex,
              let op = Int(fields[2].dropFirst(2), radix: 16) else { return false }
        let command = op & 127   // without FUTEX_PRIVATE_FLAG
        return command == 6 || command == 13   // FUTEX_LOCK_PI, FUTEX_LOCK_PI2
    }

    /// Waits until the watched thread is blocked taking a lock, or until `instead` is true (what happens when
    /// nothing holds the thread back); `false` when neither came within `limit` seconds.
    public func waitUntilWaitingForLock(limit: Double = 60, instead: () -> Bool = { false }) -> Bool {
        let deadline = Date().addingTimeInterval(limit)
        while Date() < deadline {
            if instead() || isWaitingForLock { return true }
            usleep(200)
        }
        return false
    }
}
