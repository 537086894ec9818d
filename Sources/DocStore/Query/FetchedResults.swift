/// A query's results decoded one at a time as a loop reaches them, inside a transaction.
///
/// Made by ``Query/fetchedResults(in:)``. Iterate it once, inside the closure that received the context.
public final class FetchedResults<T: Document>: Sequence, IteratorProtocol {
    private let context: ReadContext
    private let stream: ResultStream
    /// The error that ended the iteration early, if any (a document that does not decode, say).
    public private(set) var error: (any Error)?

    init(query: Query<T>, context: ReadContext) throws {
        self.context = context
        self.stream = try ResultStream(executor: try query.makeExecutor(in: context), context: context)
    }

    /// What iterating has taken so far.
    public var statistics: QueryStatistics { stream.executor.statistics.value }

    public func next() -> T? {
        guard error == nil else { return nil }
        do {
            try context.checkValid()
            guard let (id, raw) = try stream.next() else { return nil }
            return try stream.executor.decodeReturned(T.self, raw, id: id, in: context)
        } catch {
            self.error = error
            return nil
        }
    }
}

/// The matches of a plan one at a time, as stored bytes: what lazy results, typed or not, are made of.
final class ResultStream {
    let executor: Executor
    private var source: CandidateSource?
    private var sortedIDs: [[UInt8]]?
    private var position = 0
    private var skipped = 0
    private var produced = 0

    init(executor: Executor, context: ReadContext) throws {
        self.executor = executor
        // In a write transaction the loop may write: a document moved ahead of a live cursor would be met again
        // (saving each person one year older while walking by age would never end). There the matches are
        // collected first.
        if executor.plan.ordering == .natural && executor.plan.afterwards.isEmpty && !(context is WriteContext) {
            source = try executor.makeSource()
        } else {
            sortedIDs = WindowStep.apply(executor.plan.afterwards, to: try executor.orderedIDs())
        }
    }

    deinit { source?.close() }

    /// The next match: its primary key and its bytes, valid until the transaction writes or ends.
    func next() throws -> (id: [UInt8], document: UnsafeRawBufferPointer)? {
        if let ids = sortedIDs {
            while position < ids.count {
                position += 1
                if let raw = try executor.fetch(id: ids[position - 1]) { return (ids[position - 1], raw) }
            }
            return nil
        }
        guard let source else { return nil }
        if let limit = executor.plan.limit, produced >= limit { close(); return nil }
        while let candidate = try source.next() {
            guard try executor.matches(candidate) else { continue }
            if skipped < executor.plan.offset { skipped += 1; continue }
            produced += 1
            return (Array(candidate.id), candidate.document)
        }
        close()
        return nil
    }

    func close() {
        source?.close()
        source = nil
    }
}
