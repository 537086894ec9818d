/// A query's results decoded one at a time as a loop reaches them, inside a transaction.
///
/// Made by ``Query/fetchedResults(in:)``. Iterate it once, inside the closure that received the context.
public final class FetchedResults<T: Document>: Sequence, IteratorProtocol {
    private let context: ReadContext
    private let executor: Executor
    private var source: CandidateSource?
    private var sortedIDs: [[UInt8]]?
    private var position = 0
    private var skipped = 0
    private var produced = 0
    /// The error that ended the iteration early, if any (a document that does not decode, say).
    public private(set) var error: (any Error)?

    init(query: Query<T>, context: ReadContext) throws {
        self.context = context
        self.executor = try query.makeExecutor(in: context)
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

    /// What iterating has taken so far.
    public var statistics: QueryStatistics { executor.statistics.value }

    public func next() -> T? {
        guard error == nil else { return nil }
        do {
            try context.checkValid()
            return try advance()
        } catch {
            self.error = error
            return nil
        }
    }

    private func advance() throws -> T? {
        if let ids = sortedIDs {
            while position < ids.count {
                position += 1
                if let document = try executor.fetchReturned(T.self, id: ids[position - 1], in: context) {
                    return document
                }
            }
            return nil
        }
        guard let source else { return nil }
        if let limit = executor.plan.limit, produced >= limit { source.close(); return nil }
        while let candidate = try source.next() {
            guard try executor.matches(candidate) else { continue }
            if skipped < executor.plan.offset { skipped += 1; continue }
            produced += 1
            return try executor.decodeReturned(T.self, candidate.document, id: Array(candidate.id), in: context)
        }
        source.close()
        return nil
    }
}
