import Foundation
import Synchronization
import Testing
import TestSupport
@testable import DocStore

/// `observe(requests:)` sends a request's value only while that request is the current one, and moving to the next
/// request waits for a send in progress: a replaced request's late value can never overwrite the new one's.
@Suite(.ownThreads) struct RequestGenerationTests {
    @Test func movingToTheNextRequestWaitsForASendInProgress() {
        let generation = RequestGeneration()
        let first = generation.next()
        let events = Mutex<[String]>([])
        let moved = DispatchSemaphore(value: 0)
        let mover = WatchedThread()
        let hasMoved = Atomic(false)
        generation.ifCurrent(first) {
            Thread {
                mover.isCurrent()
                _ = generation.next()
                hasMoved.store(true, ordering: .releasing)
                events.withLock { $0.append("moved") }
                moved.signal()
            }.start()
            // The other thread waits for this send to be done, or, were it not held back, moves.
            let waited = mover.waitUntilWaitingForLock { hasMoved.load(ordering: .acquiring) }
            #expect(waited, "the other thread neither waited nor moved")
            events.withLock { $0.append("sent") }
        }
        moved.wait()
        #expect(events.withLock { $0 } == ["sent", "moved"])
        var late = false
        generation.ifCurrent(first) { late = true }
        #expect(!late, "a replaced request's value was sent")
        var current = false
        generation.ifCurrent(first + 1) { current = true }
        #expect(current)
    }
}
