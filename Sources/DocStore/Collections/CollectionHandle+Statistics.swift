extension CollectionHandle {
    /// The open index a plan names.
    func index(_ definition: IndexDefinition) throws -> Index {
        guard let found = indexes.first(where: { $0.definition == definition }) else {
            throw DocStoreError(.storage, "collection '\(name)' has no index \(definition) open", collection: name,
                                index: definition.name)
        }
        return found
    }

    /// The key space a scan walks: the index's, or the documents' own for the ids.
    func space(of scan: IndexScan) throws -> KeySpace {
        scan.primary ? documents : try index(scan.index).database
    }

    /// The planner's view of this collection in one transaction.
    struct Statistics: CollectionStatistics {
        let handle: CollectionHandle
        let txn: any StorageTransaction

        var collection: String { handle.name }
        var idPath: FieldPath { handle.info.idPath }
        var indexes: [IndexDefinition] { handle.indexDefinitions }

        /// O(1) (`mdb_stat`).
        func documentCount() throws -> Int { try txn.entryCount(handle.documents) }

        func entryCount(of scan: IndexScan) throws -> Int { try txn.entryCount(try handle.space(of: scan)) }

        /// On an engine with round trips, every range counted where the entries are, in one round trip, up to four
        /// entries a key; otherwise by the cursor, a key's duplicates at once (`mdb_cursor_count`), so that the work
        /// is one step per distinct key.
        func entryCounts(of scans: [IndexScan], countingAtMost limit: Int) throws -> [(count: Int, capped: Bool)] {
            guard txn.prefersBatches else { return try scans.map { try entryCount(of: $0, countingAtMost: limit) } }
            let most = limit * 4
            var asked: [(space: KeySpace, lower: [UInt8], upper: [UInt8]?)] = []
            for scan in scans {
                let space = try handle.space(of: scan)
                asked += scan.ranges.map { (space, $0.lower, $0.upper) }
            }
            var counts = try txn.entryCounts(asked, atMost: most)[...]
            return scans.map { scan in
                let total = counts.prefix(scan.ranges.count).reduce(0, +)
                counts = counts.dropFirst(scan.ranges.count)
                return (min(total, most), total >= most)
            }
        }

        private func entryCount(of scan: IndexScan, countingAtMost limit: Int) throws -> (count: Int, capped: Bool) {
            var total = 0
            var steps = 0
            let space = try handle.space(of: scan)
            let oneEntryAKey = scan.primary || scan.index.isUnique
            return try txn.withCursor(space) { cursor in
                for range in scan.ranges {
                    var entry = try range.lower.withUnsafeBytes { try cursor.seek(atLeast: $0, below: range.upper) }
                    while let (key, _) = entry, range.contains(key) {
                        if oneEntryAKey {
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
