/// One transaction's view of the catalog: finds (and, in a write transaction, creates or updates) the open
/// collection for a type, and hands what it opened to the ``StoreCore`` once the transaction has ended well.
///
/// A handle the store keeps serves as long as its collection's catalog entry is the one it was opened with: when
/// the catalog's generation has moved (another process, or a change of ours), the entry of each collection is read
/// again when the collection is next used, and only a collection whose entry changed is opened again. A collection
/// new to this process is opened in the transaction that meets it, a read one included: LMDB keeps a database
/// opened in a read transaction once that transaction commits, which the environment then does.
///
/// Reading never writes: a read finds collections and indexes as the catalog has them. A Swift type's collection
/// and declared indexes are made by its first write, or by ``DocStore/prepare(_:)``.
final class TransactionScope {
    let core: StoreCore
    let txn: any StorageTransaction
    /// The catalog's generation when the transaction began.
    let startGeneration: UInt64
    /// Collections opened (or made, or changed) in this transaction.
    private var handles: [String: CollectionHandle] = [:]
    private var declared: [String: ResolvedSchema] = [:]
    private var checkers: [String: (UnsafeRawBufferPointer) throws -> Void] = [:]
    /// Swift types checked against their collection's catalog entry in this transaction, with the handle.
    private var synced: [ObjectIdentifier: CollectionHandle] = [:]
    private(set) var touchedCatalog = false
    private var dropped: Set<String> = []

    /// The catalog as this transaction sees it.
    var catalog: Catalog { core.catalog(txn) }

    /// The store's ``StoreCore/keySpaceEpoch`` when the transaction began.
    private let epoch: UInt64
    /// The store's ``StoreCore/keySpacesOpenedAt`` when the transaction began.
    let keySpacesOpenedAtStart: UInt64?

    /// `nested`: the transaction is a group's nested one, which sees the writes of the group before it.
    init(core: StoreCore, txn: any StorageTransaction, nested: Bool = false) throws {
        self.core = core
        self.txn = txn
        let state = core.stateAtStart()
        (epoch, keySpacesOpenedAtStart) = (state.epoch, state.keySpacesOpenedAt)
        self.startGeneration = try core.catalog(txn).generation()
        try core.loadShapes(in: txn, generation: startGeneration, committedView: txn.isReadOnly || !nested,
                            loadedAt: state.shapesLoadedAt)
    }

    /// The collection of a Swift type as the catalog has it, for reading: `nil` when there is none yet. Indexes the
    /// type declares that the catalog lacks are simply not used.
    func handleForReading<T: Document>(_ type: T.Type) throws -> CollectionHandle? {
        // The collection kept open and synced with the type, found by name without copying the type's schema.
        if let name = TypeRegistry.collection(type) {
            if handles.isEmpty && synced.isEmpty && dropped.isEmpty {
                // (A read's usual case: the handle kept, checked at this generation and synced, under one lock.)
                let kept = core.withState { () -> CollectionHandle? in
                    guard let h = core.handles[name], h.checkedGeneration == startGeneration,
                          core.synced[ObjectIdentifier(type)] === h else { return nil }
                    return h
                }
                if let kept { return kept }
            }
            if let open = try current(name), isSynced(ObjectIdentifier(type), with: open) { return open }
        }
        let schema = try TypeRegistry.schema(type)
        guard let handle = try handle(named: schema.collection) else { return nil }
        if handle.info.idPath != schema.idPath {
            // Its ids are elsewhere: a look-up by the type's id, or an id read from its documents, would be wrong.
            guard try txn.entryCount(handle.documents) > 0 else { return nil }
            throw StoreCore.idPathMismatch(handle.info, schema)
        }
        // When the catalog has all the type declares, the type is synced with the handle, as a write would find
        // it: the next read takes the path above, in a process that only reads too.
        if StoreCore.missing(in: handle.info, for: schema) == nil {
            record(type, schema, handle)
        } else {
            remember(type, schema)
        }
        return handle
    }

    /// The open collection of a Swift type, its schema synced with the catalog: for a write, which creates the
    /// collection and builds the indexes the type declares when they are missing.
    func handle<T: Document>(for type: T.Type) throws -> CollectionHandle {
        let schema = try TypeRegistry.schema(type)
        let typeID = ObjectIdentifier(type)
        let open = try current(schema.collection)
        if let open, isSynced(typeID, with: open) { return open }
        let stored = try open.map(\.info) ?? core.readInfo(schema.collection, in: txn)
        let needed = StoreCore.missing(in: stored, for: schema)
        if let stored, needed == nil {
            // The catalog has all the type declares: no write is needed, whatever the transaction.
            let handle = try open ?? opened(stored)
            record(type, schema, handle)
            return handle
        }
        guard !txn.isReadOnly else {
            throw core.readOnlyRefusal(needed ?? "sync collection '\(schema.collection)'", collection: schema.collection)
        }
        // Set first: a sync that fails midway may already have dropped (and so closed) a database handle.
        touchedCatalog = true
        // (Each change of the catalog below is several calls: one that fails halfway leaves the transaction unable
        // to commit, whatever the caller does with the error, rather than a catalog naming a half-built index.)
        var synced: CollectionHandle?
        try txn.changingAtomically { synced = try core.sync(schema, in: txn) }
        guard let handle = synced else { throw DocStoreError(.storage, "collection '\(schema.collection)' was not synced") }
        handles[schema.collection] = handle
        record(type, schema, handle)
        return handle
    }

    /// Whether the type was checked against the catalog entry `handle` carries, here or by the store.
    private func isSynced(_ type: ObjectIdentifier, with handle: CollectionHandle) -> Bool {
        (synced[type] ?? core.withState { core.synced[type] }) === handle
    }

    /// Notes that `type` was checked against the catalog entry `handle` carries.
    private func record<T: Document>(_ type: T.Type, _ schema: ResolvedSchema, _ handle: CollectionHandle) {
        synced[ObjectIdentifier(type)] = handle
        remember(type, schema)
    }

    /// Notes `type` as the Swift type of its collection, for `verify()`'s reports and decoding checks.
    private func remember<T: Document>(_ type: T.Type, _ schema: ResolvedSchema) {
        declared[schema.collection] = schema
        checkers[schema.collection] = { raw in _ = try DocumentDecoder().decode(T.self, from: raw) }
    }

    /// The open collection named `name` as the catalog describes it, or `nil` when there is no such collection.
    /// With `create`, in a write transaction, a missing collection is created with its ids at `id` and no index.
    func handle(named name: String, create: Bool = false) throws -> CollectionHandle? {
        if let h = try current(name) { return h }
        if let stored = try core.readInfo(name, in: txn) { return try opened(stored) }
        guard create else { return nil }
        guard !txn.isReadOnly else { throw core.readOnlyRefusal("create collection '\(name)'", collection: name) }
        return try createCollection(CollectionInfo(name: name, idPath: "id", indexes: []))
    }

    /// Records a new collection as `info` describes it (its indexes empty, to be built), and opens it.
    func createCollection(_ info: CollectionInfo) throws -> CollectionHandle {
        try Catalog.validateName(info.name, what: "collection")
        if try core.readInfo(info.name, in: txn) != nil {
            throw DocStoreError(.alreadyExists, "collection '\(info.name)' exists already", collection: info.name)
        }
        touchedCatalog = true   // a key space opened here is closed if the transaction aborts
        try catalog.setCollection(info)
        return try opened(info)
    }

    /// Opens the databases of a collection as its catalog entry describes them, for this transaction.
    private func opened(_ info: CollectionInfo) throws -> CollectionHandle {
        let handle = try core.openHandle(info, in: txn)
        handles[info.name] = handle
        return handle
    }

    /// The collection as opened in this transaction, or as the store has it open when its catalog entry is still
    /// the one the store opened it with; `nil` when it must be opened (again) from the catalog.
    private func current(_ collection: String) throws -> CollectionHandle? {
        if let h = handles[collection] { return h }
        guard !dropped.contains(collection) else { return nil }
        let (kept, checked) = core.withState { () -> (CollectionHandle?, Bool) in
            let h = core.handles[collection]
            return (h, h?.checkedGeneration == startGeneration)
        }
        guard let h = kept else { return nil }
        if checked { return h }
        // The catalog moved since the handle was checked. This transaction has changed no collection outside
        // `handles` and `dropped`, so the entry read here is the entry at `startGeneration`.
        guard try core.readInfo(collection, in: txn) == h.info else { return nil }
        core.withState { h.checkedGeneration = startGeneration }
        return h
    }

    func dropIndex(_ name: String, from collection: String) throws -> Bool {
        touchedCatalog = true   // first: a dropped key space is closed even if the transaction then aborts
        var removed = false
        try txn.changingAtomically { removed = try core.dropIndex(name, from: collection, in: txn) }
        if removed {
            handles[collection] = nil
            dropped.insert(collection)
        }
        return removed
    }

    /// Makes `collection` keep ids of any length (``CollectionInfo/idWidth``): each index that holds several ids per
    /// key is deleted and built again from the documents. What a write does first when it meets an id of another
    /// length (``IDWidthChange``).
    func widenIDs(of collection: String) throws {
        // Should the write that met the id make the collection again (it made it, dropped and made it, or renamed
        // another to its name, and did not commit), it is made to keep ids of any length.
        core.withState { _ = core.idsOfAnyLength.insert(collection) }
        guard var info = try core.readInfo(collection, in: txn), info.idWidth != nil else { return }
        touchedCatalog = true   // first: a dropped key space is closed even if the transaction then aborts
        try txn.changingAtomically {
            for definition in info.indexes where !definition.isUnique {
                try catalog.dropIndexSpace(info, definition)
            }
            info.idWidth = nil
            try catalog.setCollection(info)
            let reopened = try core.openHandle(info, in: txn)
            for index in reopened.indexes where !index.definition.isUnique { try reopened.build(index, in: txn) }
        }
        handles[collection] = nil
        dropped.insert(collection)
    }

    /// Adds an index to a collection (created when missing) and builds its entries from the documents.
    func createIndex(_ definition: IndexDefinition, in collection: String) throws {
        try Catalog.validateName(definition.name, what: "index")
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
        // Refused before anything is written when it can be (duplicates under a unique index, a key too long): the
        // caller may then catch the error and go on.
        try existing.checkBuildable(definition, in: txn)
        touchedCatalog = true
        var info = existing.info
        info.indexes.append(definition)
        // (A build that fails (a unique index over duplicates) after the catalog names the index leaves the
        // transaction unable to commit, whatever the caller does with the error.)
        var reopened: CollectionHandle?
        try txn.changingAtomically {
            try catalog.setCollection(info)
            let handle = try core.openHandle(info, in: txn)
            for index in handle.indexes where index.definition == definition {
                try handle.build(index, in: txn, checked: true)
            }
            reopened = handle
        }
        handles[collection] = reopened
    }

    /// Deletes a collection: its documents, its indexes and its catalog entry. Returns whether there was one.
    func dropCollection(_ collection: String) throws -> Bool {
        guard let info = try core.readInfo(collection, in: txn) else { return false }
        touchedCatalog = true   // first: dropped key spaces are closed even if the transaction then aborts
        try txn.changingAtomically {
            for definition in info.indexes { try catalog.dropIndexSpace(info, definition) }
            if let documents = try txn.openKeySpace(Catalog.documentsSpace(collection), create: false) {
                try txn.drop(documents, delete: true)
            }
            try catalog.removeCollection(collection)
        }
        handles[collection] = nil
        dropped.insert(collection)
        return true
    }

    /// Moves a collection to a new name: its documents and index entries are copied as they are into the new
    /// name's databases, the old ones are deleted, and saved filters that read it read the new name. Nothing happens
    /// when there is no collection `name`.
    func renameCollection(_ name: String, to newName: String) throws {
        guard let info = try core.readInfo(name, in: txn), name != newName else { return }
        try Catalog.validateName(newName, what: "collection")
        if try core.readInfo(newName, in: txn) != nil {
            throw DocStoreError(.alreadyExists, "cannot rename collection '\(name)' to '\(newName)': a collection "
                + "has that name", collection: newName)
        }
        guard let source = try handle(named: name) else { return }
        touchedCatalog = true
        let anyLength = core.withState { core.idsOfAnyLength.contains(newName) }
        let moved = CollectionInfo(name: newName, idPath: info.idPath, indexes: info.indexes,
                                   idWidth: anyLength ? nil : info.idWidth)
        try txn.changingAtomically {
            try catalog.setCollection(moved)
            let target = try core.openHandle(moved, in: txn)
            try txn.forEachEntry(in: source.documents) { key, value in
                try txn.put(target.documents, key, value, noOverwrite: false, noDuplicate: false)
            }
            for (from, to) in zip(source.indexes, target.indexes) {
                try txn.forEachEntry(in: from.database) { key, value in
                    try txn.put(to.database, key, value, noOverwrite: false, noDuplicate: false)
                }
            }
            handles[newName] = target
            _ = try dropCollection(name)
            for var filter in try catalog.filters(skippingDamaged: true) where filter.collection == name {
                filter.collection = newName
                try catalog.setFilter(filter)
            }
        }
    }

    /// After a successful commit: the collections opened here become the store's.
    func committed(endGeneration: UInt64) {
        core.withState {
            // The handles this transaction left alone, right at its start, are right at its end: it changed no
            // collection outside `handles` and `dropped`.
            for handle in core.handles.values where handle.checkedGeneration == startGeneration {
                handle.checkedGeneration = endGeneration
            }
            for name in dropped { core.handles[name] = nil }
            publish(checkedAt: endGeneration)
        }
    }

    /// After a read transaction, whether its body returned or threw: the collections it opened become the store's,
    /// once LMDB has kept their databases.
    func readEnded() {
        guard !txn.opensKeySpaces || txn.keptKeySpaces else { return }
        // (Most reads find every collection open and checked: nothing to hand over, and no lock to take.)
        guard !handles.isEmpty || !synced.isEmpty || !declared.isEmpty || !checkers.isEmpty else { return }
        // (Not when a write that ran alone ended since it began: what it opened may have been closed.)
        core.withState { if core.keySpaceEpoch == epoch { publish(checkedAt: startGeneration) } }
    }

    /// Called holding the core's state (``StoreCore/withState(_:)``).
    private func publish(checkedAt generation: UInt64) {
        for (name, handle) in handles {
            handle.checkedGeneration = generation
            core.handles[name] = handle
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
