extension Query {
    /// The results now, then again after each commit that changes them (by this process or another).
    ///
    /// For example:
    /// ```swift
    /// for try await adults in Person.include(#Predicate { $0.age >= 18 }).sortBy(\.name).observe(in: store) {
    ///     render(adults)
    /// }
    /// ```
    /// A commit that leaves the results equal (a write to another collection, or to documents the query does
    /// not return) sends nothing. A consumer slower than the commits gets the latest results, never a backlog.
    /// The observation ends when the consuming task is cancelled or the store is closed or released (it holds the
    /// store only while it reads); errors (a document that no longer decodes) end it with that error.
    public func observe(in store: DocStore) -> AsyncThrowingStream<[Element], Error> {
        store.observation { ctx, previous -> ([UInt8], [Element]?) in
            var fingerprint: [UInt8] = []
            let executor = try self.executor(in: ctx)
            guard let executor, self.output == .documents else {
                // What is computed, compared as the encoded rows.
                let rows = try self.computedRows(executor)
                for row in rows { Fingerprint.append(DocumentValue.array(row.values + [row.result]).encoded(), to: &fingerprint) }
                if let previous, previous.fingerprint == fingerprint { return (fingerprint, nil) }
                return (fingerprint, try rows.map { try self.kind.row($0.values, $0.result) })
            }
            // Each document's bytes are valid only during its call (a walk on a server lets go of what it left):
            // they are decoded from the fingerprint, which holds a copy of each.
            var documents: [(id: [UInt8], bytes: Range<Int>)] = []
            try executor.walk { id, raw in
                let start = fingerprint.count + Fingerprint.lengthSize
                Fingerprint.append(raw, to: &fingerprint)
                documents.append((Array(id), start..<start + raw.count))
                return true
            }
            if let previous, previous.fingerprint == fingerprint { return (fingerprint, nil) }
            let decode = self.decoder(executor)
            return (fingerprint, try fingerprint.withUnsafeBytes { copies in
                try documents.map { document in
                    try document.id.withUnsafeBytes { try decode($0, UnsafeRawBufferPointer(rebasing: copies[document.bytes])) }
                }
            })
        }
    }

    /// The number of results now, then again after each commit that changes it. It ends as the results'
    /// observation does.
    ///
    /// For example: `for try await n in Person.query().observeCount(in: store) { print(n) }`.
    public func observeCount(in store: DocStore) -> AsyncThrowingStream<Int, Error> {
        store.observation { ctx, _ -> ([UInt8], Int?) in
            let n = try self.count(in: ctx)
            return (Fingerprint.of(n), n)
        }
    }
}

/// What an observer compares: the stored bytes of the results, each with its length, so that equal fingerprints
/// mean equal results.
enum Fingerprint {
    static func append(_ raw: [UInt8], to fingerprint: inout [UInt8]) { raw.withUnsafeBytes { append($0, to: &fingerprint) } }

    /// The bytes of the length before each value's.
    static let lengthSize = MemoryLayout<UInt32>.size

    static func append(_ raw: UnsafeRawBufferPointer, to fingerprint: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(raw.count).littleEndian) { fingerprint.append(contentsOf: $0) }
        fingerprint.append(contentsOf: raw)
    }

    static func of(_ n: Int) -> [UInt8] { withUnsafeBytes(of: n.littleEndian) { Array($0) } }
}
