import Foundation
import Synchronization
import Testing
import TestSupport

/// Tests that block their thread run on threads of their own: more of them block at once than the shared pool has
/// threads, and each is still running.
@Suite(.ownThreads) struct OwnThreadsTests {
    @Test func moreBlockedTasksThanCoresAllRunAtOnce() async {
        let width = ProcessInfo.processInfo.activeProcessorCount + 2
        let arrived = Arrivals()
        let everyone = DispatchSemaphore(value: 0)
        let met = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<width {
                group.addTask {
                    // Blocks until all have arrived: on a pool of `activeProcessorCount` threads, the last never would.
                    if arrived.count.withLock({ $0 += 1; return $0 }) == width {
                        for _ in 0..<width { everyone.signal() }
                    }
                    return everyone.wait(timeout: .now() + 30) == .success
                }
            }
            return await group.allSatisfy { $0 }
        }
        #expect(met, "fewer than \(width) tasks ran at once")
    }
}

private final class Arrivals: Sendable {
    let count = Mutex(0)
}
