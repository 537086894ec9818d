extension CollectionHandle {
    /// The open index a plan names.
    func index(_ definition: IndexDefinition) throws -> Index {
        guard let found = indexes.first(where: { $0.definition == definition }) else {
            throw DocStoreError(.storage, "collection '\(name)' has no index \(definition) open", collection: name,
                                index: definition.name)
        }
        return found
    }

    /// The planner's view of this collection in one transaction.
    struct Statistics: CollectionStatistics {
        let handle: CollectionHandle
        let txn: any StorageTransaction

        var collection: String { handle.name }
        var idPath: FieldPath { handle.info.idPath }
        var indexes: [IndexDefinition] { handle.indexes.map(\.definition) }

        /// O(1) (`mdb_stat`).
        func documentCount() throws -> Int { try txn.entryCount(handle.documents) }

        func entryCount(of index: IndexDefinition) throws -> Int {
            try txn.entryCount(try handle.index(index).database)
        }

        /// A key's duplicates count at once (`mdb_cursor_count`), so the work is one step per distinct key.
        func entryCount(of index: IndexDefinition, in ranges: [KeyRange], countingAtMost limit: Int) throws
            -> (count: Int, capped: Bool) {
            var total = 0
            var steps = 0
            let index = try handle.index(index)
            if txn.prefersBatches {
                // Counted where the entries are, up to four entries a key: a bounded count on the server.
                let most = limit * 4
                for range in ranges {
                    total += try txn.entryCount(index.database, from: range.lower, below: range.upper,
                                                atMost: most - total)
                    if total >= most { return (total, true) }
                }
                return (total, false)
            }
            return try txn.withCursor(index.database) { cursor in
                for range in ranges {
                    var entry = try range.lower.withUnsafeBytes { try cursor.seek(atLeast: $0, below: range.upper) }
                    while let (key, _) = entry, range.contains(key) {
                        if index.isUnique {
                            total += 1
                            entry = try cursor.next()
                        } else {
                            total += try cursor.duplicateCount()
                            entry = try cursor.nextKey()
                        }
                        steps += 1
                        if steps >= limit { return (total, true) }
                    }
                }
                return (total, false)
            }
        }
    }
}
