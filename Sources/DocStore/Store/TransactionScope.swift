/// One transaction's view of the catalog: finds (and, in a write transaction, creates or updates) the open
/// collection for a type, and hands its changes to the ``StoreCore`` only once the transaction has committed.
final class TransactionScope {
    /// Thrown in a read transaction that needs a collection opened or its schema synced first; the store does that
    /// in a write transaction and runs the read again.
    struct NeedsSync: Error {
        var collection: String
        /// Opens the collection in a write transaction's scope.
        var sync: @Sendable (TransactionScope) throws -> Void
    }

    let core: StoreCore
    let txn: Transaction
    let startGeneration: UInt64
    private var handles: [String: CollectionHandle] = [:]
    private var declared: [String: ResolvedSchema] = [:]
    private var checkers: [String: (UnsafeRawBufferPointer) throws -> Void] = [:]
    private var synced: [ObjectIdentifier: String] = [:]
    private(set) var touchedCatalog = false
    private var dropped: Set<String> = []
    /// Collections whose catalog entry this transaction changed: other types synced with them sync again.
    private var changedCollections: Set<String> = []

    init(core: StoreCore, txn: Transaction) throws {
        self.core = core
        self.txn = txn
        self.startGeneration = try core.readGeneration(in: txn)
        if startGeneration != core.generation {
            // Another process (or an aborted change of ours) moved the catalog: reopen collections as they come.
            core.forgetCollections()
            core.generation = startGeneration
        }
    }

    /// The open collection of a Swift type, its schema synced with the catalog.
    func handle<T: Document>(for type: T.Type) throws -> CollectionHandle {
        let schema = try core.schema(type)
        let typeID = ObjectIdentifier(type)
        if synced[typeID] != nil || (core.synced[typeID] != nil && !dropped.contains(schema.collection)),
           let h = current(schema.collection) {
            return h
        }
        guard !txn.isReadOnly else {
            throw NeedsSync(collection: schema.collection) { _ = try $0.handle(for: type) }
        }
        // Set first: a sync that fails midway may already have dropped (and so closed) a database handle.
        touchedCatalog = true
        let (handle, changed) = try core.sync(schema, in: txn)
        if changed { changedCollections.insert(schema.collection) }
        handles[schema.collection] = handle
        synced[typeID] = schema.collection
        declared[schema.collection] = schema
        checkers[schema.collection] = { raw in _ = try DocumentDecoder().decode(T.self, from: raw) }
        return handle
    }

    /// The open collection named `name` as the catalog describes it, or `nil` when there is no such collection.
    /// With `create`, in a write transaction, a missing collection is created with its ids at `id` and no index.
    func handle(named name: String, create: Bool = false) throws -> CollectionHandle? {
        if let h = current(name) { return h }
        let stored = try core.readInfo(name, in: txn)
        guard stored != nil || create else { return nil }
        guard !txn.isReadOnly else {
            throw NeedsSync(collection: name) { _ = try $0.handle(named: name, create: create) }
        }
        touchedCatalog = true   // a handle opened here is closed by LMDB if the transaction aborts
        let handle = try core.openHandle(try stored ?? createCollection(name), in: txn)
        handles[name] = handle
        return handle
    }

    /// Records a new collection, keyed by its field `id`, with no index.
    private func createCollection(_ name: String) throws -> CollectionInfo {
        try StoreCore.validateName(name, what: "collection")
        let info = CollectionInfo(name: name, idPath: "id", indexes: [])
        try core.writeInfo(info, in: txn)
        try core.bumpGeneration(in: txn)
        return info
    }

    /// The collection as opened in this transaction, or as the store had it open before.
    private func current(_ collection: String) -> CollectionHandle? {
        if let h = handles[collection] { return h }
        return dropped.contains(collection) ? nil : core.handles[collection]
    }

    func dropIndex(_ name: String, from collection: String) throws -> Bool {
        touchedCatalog = true   // first: mdb_drop closes the handle even if the transaction then aborts
        let removed = try core.dropIndex(name, from: collection, in: txn)
        if removed {
            handles[collection] = nil
            synced = synced.filter { $0.value != collection }
            dropped.insert(collection)
        }
        return removed
    }

    /// Adds an index to a collection (created when missing) and builds its entries from the documents.
    func createIndex(_ definition: IndexDefinition, in collection: String) throws {
        try StoreCore.validateName(definition.name, what: "index")
        guard let existing = try handle(named: collection, create: true) else { return }
        if let same = existing.info.indexes.first(where: { $0.name == definition.name }) {
            throw DocStoreError(.alreadyExists, "collection '\(collection)' already has an index named "
                + "'\(definition.name)' (\(same)); drop it first to change it", collection: collection,
                index: definition.name)
        }
        guard !definition.fields.isEmpty else {
            throw DocStoreError(.invalidSchema, "index '\(definition.name)' names no field", collection: collection,
                                index: definition.name)
        }
        if definition.kind == .multi && definition.fields.count != 1 {
            throw DocStoreError(.invalidSchema, "multi-value index '\(definition.name)' must name exactly one field "
                + "(it indexes each element of an array)", collection: collection, index: definition.name)
        }
        touchedCatalog = true
        var info = existing.info
        info.indexes.append(definition)
        try core.writeInfo(info, in: txn)
        try core.bumpGeneration(in: txn)
        let reopened = try core.openHandle(info, in: txn)
        for index in reopened.indexes where index.definition == definition { try reopened.build(index, in: txn) }
        handles[collection] = reopened
        changedCollections.insert(collection)
    }

    /// Deletes a collection: its documents, its indexes and its catalog entry. Returns whether there was one.
    func dropCollection(_ collection: String) throws -> Bool {
        guard let info = try core.readInfo(collection, in: txn) else { return false }
        touchedCatalog = true   // first: mdb_drop closes handles even if the transaction then aborts
        for definition in info.indexes {
            if let db = try txn.openDatabase(StoreCore.indexName(collection, definition), create: false,
                                             duplicateSort: definition.kind != .unique) {
                try txn.drop(db, delete: true)
            }
        }
        if let documents = try txn.openDatabase(StoreCore.documentsName(collection), create: false) {
            try txn.drop(documents, delete: true)
        }
        _ = try txn.delete(core.meta, StoreCore.catalogKey(collection))
        try core.bumpGeneration(in: txn)
        handles[collection] = nil
        synced = synced.filter { $0.value != collection }
        dropped.insert(collection)
        return true
    }

    /// After a successful commit: the collections opened here become the store's.
    func committed(endGeneration: UInt64) {
        for name in dropped.union(changedCollections) {
            if dropped.contains(name) { core.handles[name] = nil }
            core.synced = core.synced.filter { $0.value != name }
        }
        core.generation = endGeneration
        for (name, handle) in handles {
            if core.handles[name] !== handle {
                // The collection was opened again here (its indexes may have changed): types synced before
                // keep their sync, and use this handle, which carries every index in the catalog.
                core.handles[name] = handle
            }
        }
        core.synced.merge(synced) { _, new in new }
        core.declared.merge(declared) { _, new in new }
        core.typeCheckers.merge(checkers) { _, new in new }
    }

    /// After an abort: databases opened or dropped here may be closed, so every open collection is forgotten.
    func aborted() {
        if touchedCatalog { core.forgetCollections() }
    }
}
