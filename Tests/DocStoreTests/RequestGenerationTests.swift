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
        generation.ifCurrent(first) {
            Thread {
                _ = generation.next()
                events.withLock { $0.append("moved") }
                moved.signal()
            }.start()
            // Time for the other thread to move, were it not held back until this send is done.
            usleep(50_000)
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
