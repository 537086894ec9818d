extension ReadContext {
    /// The catalog, once the context is checked.
    var catalog: Catalog {
        get throws {
            try checkValid()
            return scope.catalog
        }
    }

    /// The collections in the catalog, with their indexes.
    public func collections() throws -> [CollectionInfo] { try catalog.collections() }
}

extension WriteContext {
    /// Adds an index to a collection (created when missing) and builds it from the documents already there.
    ///
    /// For example:
    /// ```swift
    /// try await store.write { try $0.createIndex(IndexDefinition(name: "age", kind: .regular, fields: ["age"]), in: "people") }
    /// ```
    /// - Throws: ``DocStoreError/Code/alreadyExists`` when the collection has an index of that name;
    ///   ``DocStoreError/Code/uniqueViolation`` when a unique index meets a value twice (nothing is created).
    public func createIndex(_ definition: IndexDefinition, in collection: String) throws {
        try checkWritable("create index '\(definition.name)' on '\(collection)'", collection: collection,
                          index: definition.name)
        try scope.createIndex(definition, in: collection)
    }

    /// Deletes an index and its entries. Returns whether there was one.
    @discardableResult
    public func dropIndex(_ name: String, from collection: String) throws -> Bool {
        try checkWritable("drop index '\(name)' of '\(collection)'", collection: collection, index: name)
        return try scope.dropIndex(name, from: collection)
    }

    /// Deletes a collection with its documents and indexes. Returns whether there was one.
    @discardableResult
    public func dropCollection(_ collection: String) throws -> Bool {
        try checkWritable("drop collection '\(collection)'", collection: collection)
        return try scope.dropCollection(collection)
    }
}
