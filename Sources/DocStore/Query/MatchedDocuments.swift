/// The documents a query (or a list of ids) named at one moment, each with a digest of its stored bytes: what a
/// person was asked about before a change.
///
/// A tool that counts what a change will touch, asks, and changes it later (the shell's `delete()`, `update(...)`
/// and `save`, or a change kept pending until `commit`) takes the documents when it asks, and checks them with
/// ``requireUnchanged(in:)`` inside the write transaction that makes the change. If a writer, in this process or
/// another, changed, deleted or added one of them meanwhile, the check throws
/// ``DocStoreError/Code/changedSinceRead`` naming those documents, and the transaction writes nothing:
///
/// ```swift
/// let stale = Query<DocumentValue>("people").include(.compare("age", .greater, .int(90)))
/// let matched = try await store.read { try stale.matchedDocuments(in: $0) }
/// guard ask("Delete \(matched.count) documents?") else { return }
/// try await store.write { ctx in
///     try matched.requireUnchanged(in: ctx)          // or nothing is deleted
///     for id in matched.ids { try ctx.delete("people", id: id) }
/// }
/// ```
///
/// The digests are seeded for this process: a value compares only within the process that made it.
public struct MatchedDocuments: Sendable {
    /// The collection the documents are in.
    public let collection: String
    /// The documents' ids, in the query's order.
    public let ids: [DocumentValue]
    /// Each document's primary key, and the digest of its stored bytes.
    let entries: [Entry]
    /// Takes the same documents again in another transaction.
    private let retake: @Sendable (ReadContext) throws -> MatchedDocuments

    struct Entry: Hashable, Sendable {
        var key: [UInt8]
        var digest: Int
    }

    /// How many documents there are.
    public var count: Int { ids.count }
    /// Whether there are none.
    public var isEmpty: Bool { ids.isEmpty }

    /// Whether `other` names the same documents, with the same bytes (in any order).
    public func isUnchanged(comparedTo other: MatchedDocuments) -> Bool {
        entries.count == other.entries.count && Set(entries) == Set(other.entries)
    }

    /// Throws ``DocStoreError/Code/changedSinceRead`` when the documents named now, in `context`, are not these
    /// ones with these bytes: one changed or was deleted, one no longer matches, or another matches now. The
    /// message names them (the first ten) and says what became of each.
    public func requireUnchanged(in context: ReadContext) throws {
        let now = try retake(context)
        if isUnchanged(comparedTo: now) { return }
        let before = Dictionary(entries.map { ($0.key, $0.digest) }, uniquingKeysWith: { a, _ in a })
        let after = Dictionary(now.entries.map { ($0.key, $0.digest) }, uniquingKeysWith: { a, _ in a })
        let handle = try context.scope.handle(named: collection)
        var what: [String] = []
        for (entry, id) in zip(entries, ids) where after[entry.key] != entry.digest {
            if after[entry.key] != nil {
                what.append("\(id.json()) was changed")
            } else if let handle, try context.txn.get(handle.documents, entry.key) != nil {
                what.append("\(id.json()) no longer matches")
            } else {
                what.append("\(id.json()) was deleted")
            }
        }
        for (entry, id) in zip(now.entries, now.ids) where before[entry.key] == nil {
            what.append("\(id.json()) matches now")
        }
        let n = what.count
        let shown = what.prefix(10).joined(separator: ", ") + (n > 10 ? ", and \(n - 10) more" : "")
        let read = count == 0 ? "they were read (none was there then)" : count == 1 ? "it was read" : "the \(count) were read"
        throw DocStoreError(.changedSinceRead, "\(n) document\(n == 1 ? "" : "s") of '\(collection)' changed since "
            + "\(read): id \(shown)", collection: collection)
    }

    /// The documents `gather` hands over, each with its key, as the walk finds them.
    fileprivate init(collection: String, idPath: FieldPath?,
                     retake: @escaping @Sendable (ReadContext) throws -> MatchedDocuments,
                     gather: (_ add: (_ key: UnsafeRawBufferPointer, _ document: UnsafeRawBufferPointer) throws -> Void)
                        throws -> Void) throws {
        self.collection = collection
        self.retake = retake
        var ids: [DocumentValue] = []
        var entries: [Entry] = []
        let idPath = idPath ?? "id"
        try gather { key, document in
            let keyBytes = Array(key)
            var hasher = Hasher()
            hasher.combine(bytes: document)
            entries.append(Entry(key: keyBytes, digest: hasher.finalize()))
            ids.append(try Self.id(key: keyBytes, document: document, idPath: idPath, collection: collection))
        }
        self.ids = ids
        self.entries = entries
    }

    /// A document's id: given back by its key when the key holds it exactly, else read from the document.
    private static func id(key: [UInt8], document: UnsafeRawBufferPointer, idPath: FieldPath,
                           collection: String) throws -> DocumentValue {
        if let id = KeyEncoder.exactValue(ofKey: key, numbers: false) { return id }
        let reader = BinaryReader(document)
        guard let ref = try reader.value(atPath: idPath, from: try reader.root()) else {
            throw DocStoreError(.corruptDocument, "a document of '\(collection)' has no id at '\(idPath)'",
                                collection: collection)
        }
        return try DocumentValue(reader: reader, ref: ref)
    }
}

extension Query {
    /// The documents this query matches now, in its order, with a digest of each one's bytes: to check, with
    /// ``MatchedDocuments/requireUnchanged(in:)``, in the transaction that changes them, that they are still the
    /// ones counted.
    public func matchedDocuments(in context: ReadContext) throws -> MatchedDocuments {
        let executor = try documents.executor(in: context)
        return try MatchedDocuments(collection: collection, idPath: executor?.handle.info.idPath,
                                    retake: { try self.matchedDocuments(in: $0) }) { add in
            try executor?.walk { try add($0, $1); return true }
        }
    }
}

extension ReadContext {
    /// Those of `ids` that collection `collection` holds now, in the order given, with a digest of each one's
    /// bytes: the documents a save would replace, to check with ``MatchedDocuments/requireUnchanged(in:)``
    /// before it replaces them.
    public func matchedDocuments(_ collection: String, ids: [DocumentValue]) throws -> MatchedDocuments {
        try checkValid()
        let handle = try scope.handle(named: collection)
        return try MatchedDocuments(collection: collection, idPath: handle?.info.idPath,
                                    retake: { try $0.matchedDocuments(collection, ids: ids) }) { add in
            for id in ids {
                let key = KeyEncoder.key(id)
                guard let handle, let raw = try self.txn.get(handle.documents, key) else { continue }
                try key.withUnsafeBytes { try add($0, raw) }
            }
        }
    }
}
