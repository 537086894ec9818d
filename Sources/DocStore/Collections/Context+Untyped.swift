/// Documents without their Swift type: what tools such as the REPL, import and export use.
///
/// Writes go through the same code as typed writes, driven by the catalog, so every index the collection has is
/// maintained, and a document written here decodes as the Swift type when its fields fit.
extension ReadContext {
    /// The document of collection `collection` whose id is `id`, or `nil` (also when there is no such collection).
    ///
    /// For example:
    /// ```swift
    /// let ann = try await store.read { ctx in try ctx.get("people", id: .string("ann")) }
    /// print(ann?.json() ?? "none")
    /// ```
    public func get(_ collection: String, id: DocumentValue) throws -> DocumentValue? {
        try checkValid()
        guard let handle = try scope.handle(named: collection),
              let raw = try txn.get(handle.documents, KeyEncoder.key(id)) else { return nil }
        return try ElementKind<DocumentValue>.documentValue.decode(raw, from: handle) { id.json() }
    }
}

extension WriteContext {
    /// Inserts a document, an object holding its id at the collection's id path, with its index entries. A
    /// missing collection is created, keyed by the field `id`.
    ///
    /// A document without an id (or with a `nil` one) is given one here, inside the write transaction, so that two
    /// writers, in this process or another, never choose the same: the next integer after the greatest number the
    /// collection has as an id (1 in an empty collection), or a new UUID string when its ids are not numbers.
    /// ``insertAndFetch(_:into:)`` returns the document as stored, with the id it was given.
    ///
    /// - Throws: ``DocStoreError/Code/duplicateID``, ``DocStoreError/Code/uniqueViolation``.
    public func insert(_ document: DocumentValue, into collection: String) throws {
        _ = try write(document, into: collection, mode: .insert)
    }

    /// Inserts a document as ``insert(_:into:)`` does, and returns it as stored: with the id it was given, when it
    /// had none.
    public func insertAndFetch(_ document: DocumentValue, into collection: String) throws -> DocumentValue {
        try write(document, into: collection, mode: .insert)
    }

    /// Inserts a document or replaces the one with the same id, updating its index entries. A document without an
    /// id is new, and is given one as ``insert(_:into:)`` gives it.
    public func save(_ document: DocumentValue, into collection: String) throws {
        _ = try write(document, into: collection, mode: .save)
    }

    /// Saves a document as ``save(_:into:)`` does, and returns it as stored: with the id it was given, when it had
    /// none.
    public func saveAndFetch(_ document: DocumentValue, into collection: String) throws -> DocumentValue {
        try write(document, into: collection, mode: .save)
    }

    /// Deletes the document of collection `collection` whose id is `id`, and its index entries. Returns whether
    /// there was one.
    @discardableResult
    public func delete(_ collection: String, id: DocumentValue) throws -> Bool {
        try checkWritable("delete a document from '\(collection)'", collection: collection)
        guard let handle = try scope.handle(named: collection) else { return false }
        return try handle.delete(id: KeyEncoder.key(id), in: txn)
    }

    private func write(_ document: DocumentValue, into collection: String,
                       mode: CollectionHandle.WriteMode) throws -> DocumentValue {
        try checkWritable("\(mode == .insert ? "insert" : "save") a document into '\(collection)'",
                          collection: collection)
        guard case .object = document else {
            throw DocStoreError(.encodingFailed, "a document of collection '\(collection)' must be an object, "
                + "not \(document.json())", collection: collection)
        }
        guard let handle = try scope.handle(named: collection, create: true) else { return document }
        var stored = document
        let idPath = handle.info.idPath
        if stored[path: idPath] == nil || stored[path: idPath] == .null {
            let id = try handle.newID(in: txn, hint: nextIDs[collection])
            if case .int(let i) = id, i < .max { nextIDs[collection] = i + 1 } else { nextIDs[collection] = nil }
            stored = stored.setting(id, at: idPath, first: true)
        }
        try handle.write(stored.encoded(), mode: mode, in: txn)
        return stored
    }
}
