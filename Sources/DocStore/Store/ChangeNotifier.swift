import Dispatch
import Synchronization

/// Tells observers that the store may have changed: at once after a commit in this process, and, for commits of
/// other processes, when a poll of LMDB's last transaction id sees it move.
///
/// Each observer gets an `AsyncStream` that holds at most one pending signal: any number of commits while an
/// observer is busy come to it as one, so a slow observer is never buried and its memory stays bounded.
final class ChangeNotifier: Sendable {
    /// How often commits of other processes are looked for, while anyone observes.
    static let pollInterval: Duration = .milliseconds(50)

    private struct State {
        var subscribers: [Int: AsyncStream<Void>.Continuation] = [:]
        var nextID = 0
        var poller: Task<Void, Never>?
        var lastSeen: Int?
    }

    private let state = Mutex(State())

    /// A stream of change signals for one observer, polling `store` for other processes' commits while any stream
    /// is open.
    func subscribe(_ store: DocStore) -> (id: Int, signals: AsyncStream<Void>) {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> Int in
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = continuation
            if state.poller == nil {
                // Holds neither the store nor the notifier between polls: releasing the store ends it.
                state.poller = Task(executorPreference: store.readers) { [weak self, weak store] in
                    while !Task.isCancelled {
                        await ChangeNotifier.pause()
                        guard !Task.isCancelled, let notifier = self, let alive = store else { return }
                        await notifier.poll(alive)
                    }
                }
            }
            return id
        }
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        return (id, stream)
    }

    /// An observer has read the state as of commit `snapshot`. If a later commit has been seen meanwhile (by the
    /// poller, or a commit here), the observer is signalled again, so no commit between its read and the next poll
    /// is missed.
    func observed(snapshot: Int, by id: Int) {
        let behind = state.withLock { state -> AsyncStream<Void>.Continuation? in
            guard let seen = state.lastSeen else {
                state.lastSeen = snapshot
                return nil
            }
            return seen > snapshot ? state.subscribers[id] : nil
        }
        behind?.yield()
    }

    private func unsubscribe(_ id: Int) {
        let poller = state.withLock { state -> Task<Void, Never>? in
            state.subscribers[id] = nil
            guard state.subscribers.isEmpty else { return nil }
            defer { state.poller = nil; state.lastSeen = nil }
            return state.poller
        }
        poller?.cancel()
    }

    /// Signals every observer. Called after each commit of this process.
    func notify(lastCommitted: Int? = nil) {
        let subscribers = state.withLock { state -> [AsyncStream<Void>.Continuation] in
            if let lastCommitted { state.lastSeen = lastCommitted }
            return Array(state.subscribers.values)
        }
        for s in subscribers { s.yield() }
    }

    /// Whether anyone observes (a commit then reads the transaction id for the poller).
    var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    /// How many observers are subscribed. For tests.
    var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Whether the poller for other processes' commits is running. For tests.
    var isPolling: Bool { state.withLock { $0.poller != nil } }

    /// Finishes every observer's stream: the store closed or was released.
    func finishAll() {
        let subscribers = state.withLock { state -> [AsyncStream<Void>.Continuation] in
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for s in subscribers { s.finish() }
    }

    /// Waits ``pollInterval``, woken by a timer of its own: a `Task.sleep` is woken by a thread of Swift's shared
    /// pool, which a busy process may have none of free for seconds, and the poll would wait with it.
    private static func pause() async {
        await withCheckedContinuation { (resumed: CheckedContinuation<Void, Never>) in
            timers.asyncAfter(deadline: .now() + .nanoseconds(pollInterval.nanoseconds)) { resumed.resume() }
        }
    }
    private static let timers = DispatchQueue(label: "DocStore observation polls")

    /// Looks once for a commit of another process, and signals every observer when there was one.
    private func poll(_ store: DocStore) async {
        guard let id = try? await store.lastCommittedTransaction() else { return }
        let moved = state.withLock { state -> Bool in
            defer { state.lastSeen = id }
            return state.lastSeen != nil && state.lastSeen != id
        }
        if moved { notify() }
    }
}
