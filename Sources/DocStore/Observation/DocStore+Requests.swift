import Synchronization

/// A read described as a value: its parameters (an ordering, a minimum age) are its stored properties, and two
/// requests with the same parameters are equal. Observing a request follows its value as the store changes;
/// observing a sequence of requests follows the latest one, as a view model that swaps a parameter expects.
///
/// For example:
/// ```swift
/// struct AdultsRequest: StoreRequest {
///     var minimumAge = 18
///     var byName = true
///     func fetch(_ ctx: ReadContext) throws -> [String] {
///         let age = minimumAge
///         let q = Person.include(#Predicate { $0.age >= age })
///         return try (byName ? q.sortBy(\.name) : q.sortBy(\.age)).results(in: ctx).map(\.name)
///     }
/// }
/// for try await names in store.observe(AdultsRequest()) { print(names) }
/// ```
public protocol StoreRequest: Equatable, Sendable {
    associatedtype Value: Sendable & Equatable
    /// Reads the request's value, in a read transaction.
    func fetch(_ context: ReadContext) throws -> Value
}

extension DocStore {
    /// The request's value now, then again after each commit that changes it (by this process or another); a
    /// commit that leaves it equal sends nothing. Values coalesce to the latest for a slow consumer. It ends when the
    /// consuming task is cancelled or the store closes or is released.
    public nonisolated func observe<R: StoreRequest>(_ request: R) -> AsyncThrowingStream<R.Value, Error> {
        observation { ctx, previous -> ([UInt8], R.Value?) in
            let value = try request.fetch(ctx)
            guard let previous else { return (Fingerprint.of(0), value) }
            if previous.value == value { return (previous.fingerprint, nil) }
            // A new fingerprint for each new value: the previous one's counter, plus one.
            let counter = previous.fingerprint.withUnsafeBytes { $0.loadUnaligned(as: Int.self) }
            return (Fingerprint.of(counter &+ 1), value)
        }
    }

    /// Follows the latest of a sequence of requests: each request that differs from the one before starts a new
    /// observation, whose first value comes at once; an equal request changes nothing. Values of a request that has
    /// been replaced are never sent. It ends when the consuming task is cancelled, or when the store closes or is
    /// released while a request is followed: the store is held only to start each request's observation, not while
    /// waiting for the next request.
    ///
    /// For example, a view model whose ordering changes:
    /// ```swift
    /// let (requests, next) = AsyncStream.makeStream(of: AdultsRequest.self)
    /// next.yield(AdultsRequest(byName: true))
    /// Task { for try await names in store.observe(requests: requests) { show(names) } }
    /// next.yield(AdultsRequest(byName: false))   // the names again, by age, once
    /// ```
    public nonisolated func observe<R: StoreRequest, S: AsyncSequence & Sendable>(requests: S)
        -> AsyncThrowingStream<R.Value, Error> where S.Element == R {
        let (stream, continuation) = AsyncThrowingStream<R.Value, Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let generation = RequestGeneration()
        // (On the store's reader threads, as every observation: see ``observation(_:)``.)
        let readers = self.readers
        let task = Task(executorPreference: readers) { [weak self] in
            var current: R?
            var inner: Task<Void, Never>?
            defer { inner?.cancel() }
            do {
                for try await request in requests {
                    guard request != current else { continue }
                    // The store is held only to start the observation: released, it ends the stream.
                    guard !Task.isCancelled, let values = self?.observe(request) else { break }
                    current = request
                    // The next request is current before the previous one's observation stops: the end of that
                    // observation does not end the stream.
                    let mine = generation.next()
                    inner = Task(executorPreference: readers) {
                        do {
                            for try await value in values {
                                generation.ifCurrent(mine) { continuation.yield(value) }
                            }
                            // The current request's observation ended by itself: the store closed or was released.
                            generation.ifCurrent(mine) { continuation.finish() }
                        } catch {
                            generation.ifCurrent(mine) { continuation.finish(throwing: error) }
                        }
                    }
                    if let inner { generation.follow(inner) }
                }
                // The requests ended: the last one is followed until the consumer stops.
                let last = inner
                await withTaskCancellationHandler { await last?.value } onCancel: { last?.cancel() }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        // (The current request's observation is stopped too: the task that follows the requests may be waiting on a
        // sequence that does not end when cancelled, and would not reach its own cancel of it.)
        continuation.onTermination = { _ in
            task.cancel()
            generation.stop()
        }
        return stream
    }
}

/// Which request of a sequence is being followed: values of an earlier one are dropped.
///
/// Checking that a request is still the current one and sending its value happen under one lock, and so does moving
/// to the next request: a value of a replaced request is sent before the move or never, so it can never arrive
/// after (and overwrite) the first value of the request that replaced it.
final class RequestGeneration: Sendable {
    private let value = Mutex<Int>(0)
    /// The current request's observation, and whether the whole has stopped.
    private let following = Mutex<(task: Task<Void, Never>?, stopped: Bool)>((nil, false))

    /// Makes `task` the current request's observation, stopping the one before (and `task` itself, once stopped).
    func follow(_ task: Task<Void, Never>) {
        let (previous, stopped) = following.withLock { state in
            defer { if !state.stopped { state.task = task } }
            return (state.task, state.stopped)
        }
        previous?.cancel()
        if stopped { task.cancel() }
    }

    /// Stops the current request's observation, and every later one.
    func stop() {
        following.withLock { state in
            state.stopped = true
            return state.task
        }?.cancel()
    }

    /// Moves to the next request; returns its number.
    func next() -> Int { value.withLock { $0 += 1; return $0 } }

    /// Runs `send` if request `mine` is still the current one, with no move to the next one meanwhile.
    func ifCurrent(_ mine: Int, _ send: () -> Void) {
        value.withLock { if $0 == mine { send() } }
    }
}
