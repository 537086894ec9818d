/// How a new store is filled from outside (a dump being restored, a damaged file being recovered): each collection
/// made as it was, keyed at its id path, without its indexes; its documents written in; then its indexes built
/// once over them; then the catalog's other records (saved filters, and the applied migrations, so that a store
/// built so is not migrated again). Restore and recover both build through it, each in its own transactions, and
/// each decides what a failure costs (a restore, everything; a recovery, the one document or index).
struct StoreBuilder {
    /// The collections begun, as they were, with the indexes they get at the end.
    private(set) var collections: [CollectionInfo] = []

    /// Makes collection `info.name` without its indexes, which `createIndex` adds once the documents are in.
    mutating func begin(_ info: CollectionInfo, in ctx: WriteContext) throws {
        _ = try ctx.scope.createCollection(CollectionInfo(name: info.name, idPath: info.idPath, indexes: []))
        collections.append(info)
    }

    /// Asks at once, on an engine with round trips, for what adding `documents` to a begun collection will read for
    /// its checks, so that ``add(_:to:replacing:in:encoded:)`` then waits for none of it: one round trip for them
    /// all. Returns each object's encoded bytes (`nil` for another value), for `add` to write.
    func readAhead(_ documents: [DocumentValue], to collection: String, in ctx: WriteContext) throws -> [[UInt8]?] {
        let encoded = documents.map { document -> [UInt8]? in
            guard case .object = document else { return nil }
            return document.encoded()
        }
        guard ctx.txn.prefersBatches, let handle = try ctx.scope.handle(named: collection) else { return encoded }
        try ctx.txn.prefetch(encoded.flatMap { bytes in bytes.flatMap { try? handle.checkedReads(of: $0) } ?? [] })
        return encoded
    }

    /// Writes a document into a begun collection, replacing one of the same id (a document without an id is given
    /// one) or (`replacing: false`) refusing it; `encoded`, its bytes when the caller has them already.
    func add(_ document: DocumentValue, to collection: String, replacing: Bool, in ctx: WriteContext,
             encoded: [UInt8]? = nil) throws {
        guard case .object = document else {
            throw DocStoreError(.invalidSchema, "the document is not an object", collection: collection)
        }
        // Replacing, as a recovery writes: a document without an id at the collection's id path is given one.
        if replacing { return try ctx.save(document, into: collection) }
        guard let handle = try ctx.scope.handle(named: collection) else {
            throw DocStoreError(.invalidSchema, "a document of '\(collection)', which the catalog lacks",
                                collection: collection)
        }
        try handle.write(encoded ?? document.encoded(), mode: .insert, in: ctx.txn)
    }
}
