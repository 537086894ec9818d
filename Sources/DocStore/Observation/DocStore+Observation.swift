/// A document as an observer sees it.
public enum ObservedDocument<T: Document>: Sendable {
    /// The document, as it is now.
    case existing(T)
    /// It was deleted; `last` is what it was.
    case gone(last: T)
    /// There is no such document (and there was none since the observation began).
    case missing

    /// The document, when it exists.
    public var document: T? { if case .existing(let d) = self { d } else { nil } }
}

extension DocStore {
    /// The id of the last commit, by any process.
    func lastCommittedTransaction() throws -> Int {
        try checkOpen()
        return try core.env.lastCommittedTransaction()
    }

    /// Follows a document: its state at once, then again after each commit that changes it. It ends when the
    /// consuming task is cancelled or the store closes or is released.
    ///
    /// For example:
    /// ```swift
    /// for try await state in store.observe(Person.self, id: ann.id) {
    ///     switch state {
    ///     case .existing(let p): print("now", p.name)
    ///     case .gone(let last): print(last.name, "was deleted")
    ///     case .missing: print("no such person")
    ///     }
    /// }
    /// ```
    public nonisolated func observe<T: Document>(_ type: T.Type, id: T.ID) -> AsyncThrowingStream<ObservedDocument<T>, Error> {
        observation { ctx, previous -> ([UInt8], ObservedDocument<T>?) in
            guard let (raw, document) = try ctx.getWithBytes(type, id: id) else {
                switch previous?.value {
                case .existing(let last)?, .gone(let last)?: return ([], .gone(last: last))
                default: return ([], .missing)
                }
            }
            return raw == previous?.fingerprint ? (raw, nil) : (raw, .existing(try document()))
        }
    }

    /// The engine of every observation: `compute` runs in a read transaction at once and after each commit; its
    /// fingerprint says whether the answer changed, and a value is sent only when it did (`compute` may skip
    /// making the value when the fingerprint equals the previous one: it returns `nil` then).
    ///
    /// The stream holds at most one value: a slow consumer gets the latest one, never a backlog. It ends when the
    /// consuming task is cancelled or the store closes or is released (an observer holds the store only while it
    /// reads), and carries `compute`'s errors.
    ///
    /// The observation's task runs on the store's reader threads (``ReaderThreads`` as its task executor), not on
    /// Swift's shared pool: an observer whose own task does not run there (the main actor, threads of its own)
    /// hears every commit while the pool is kept busy, which took seconds before.
    nonisolated func observation<Value: Sendable>(
        _ compute: @escaping @Sendable (ReadContext, _ previous: (fingerprint: [UInt8], value: Value)?) throws
            -> ([UInt8], Value?)
    ) -> AsyncThrowingStream<Value, Error> {
        let (stream, continuation) = AsyncThrowingStream<Value, Error>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // Subscribed before the first read: a commit after that read is always signalled.
        let (subscriber, signals) = changes.subscribe(self)
        let task = Task(executorPreference: readers) { [changes, weak self] in
            var previous: (fingerprint: [UInt8], value: Value)?
            var readOnce = false
            do {
                var iterator = signals.makeAsyncIterator()
                repeat {
                    try Task.checkCancellation()
                    let last = previous
                    // The store is held for the read only. Once it is released, the signals end when its file
                    // has been closed.
                    guard let read = try await self?.read({ ctx in
                        let (f, v) = try compute(ctx, last)
                        return (f, v, ctx.txn.id)
                    }) else { continue }
                    let (fingerprint, value, snapshot) = read
                    readOnce = true
                    changes.observed(snapshot: snapshot, by: subscriber)
                    if let value, previous == nil || fingerprint != previous?.fingerprint {
                        previous = (fingerprint, value)
                        continuation.yield(value)
                    }
                } while await iterator.next() != nil
                continuation.finish()
            } catch is CancellationError {
                continuation.finish()
            } catch let error as DocStoreError where error.code == .closed && readOnce {
                // A read woken by the last commit, run as the store closed: the observation simply ends. (One begun
                // on a closed store says so.)
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
