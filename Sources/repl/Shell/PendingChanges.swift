import DocStore

/// Changes made after `begin` and not yet committed: the shell shows them in every query it runs, while other
/// readers and processes still see the committed state.
///
/// Nothing is written until `commit`, which applies them all in one transaction or none of them. Queries in
/// between run in a transaction that applies the changes and is then rolled back.
struct PendingChanges: Sendable {
    struct Change: Sendable {
        /// What it does, for `.status`: "insert 1 document into people".
        var summary: String
        /// Applies the change; returns what it chose that was not known before, such as the ids it gave
        /// ("ids 3380, 3381"), or `nil`.
        var apply: @Sendable (WriteContext) throws -> String?
    }

    private(set) var changes: [Change] = []
    /// Whether a transaction is open (`begin` without `commit` or `rollback`).
    var isOpen = false

    var count: Int { changes.count }
    var isEmpty: Bool { changes.isEmpty }

    mutating func append(_ change: Change) { changes.append(change) }

    mutating func close() {
        changes = []
        isOpen = false
    }

    /// Applies every change, in order, in `context`; returns, for each change that chose something (the ids of
    /// documents that had none), its summary and what it chose. A change that fails is named (``Failed``).
    var replay: @Sendable (WriteContext) throws -> [String] {
        let all = changes
        return { ctx in
            var chosen: [String] = []
            for change in all {
                do {
                    if let outcome = try change.apply(ctx) { chosen.append("\(change.summary): \(outcome)") }
                } catch let error as DocStoreError {
                    throw Failed(summary: change.summary, underlying: error)
                }
            }
            return chosen
        }
    }

    /// A pending change that failed when replayed, with what it met.
    struct Failed: Error, CustomStringConvertible {
        var summary: String
        var underlying: DocStoreError
        /// Whether the change was confirmed for documents that have changed since.
        var changedSinceRead: Bool { underlying.code == .changedSinceRead }
        var description: String { underlying.description }
    }
}
