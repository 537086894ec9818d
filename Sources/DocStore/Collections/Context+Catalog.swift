/// A query kept by name in a store's catalog, as text: what the REPL's `.save` writes and its `.filters` lists.
///
/// The store keeps the text as given; the tool that saved it parses it again when it is used.
public struct SavedFilter: Codable, Sendable, Hashable {
    /// The name it is used by: `adults.count()`.
    public var name: String
    /// The collection the query reads.
    public var collection: String
    /// The query as written: `people.include(age >= 18)`.
    public var text: String

    public init(name: String, collection: String, text: String) {
        self.name = name
        self.collection = collection
        self.text = text
    }
}

extension ReadContext {
    /// The collections in the catalog, with their indexes.
    public func collections() throws -> [CollectionInfo] {
        try checkValid()
        return try scope.catalog.collections()
    }

    /// The saved filters, by name.
    public func savedFilters() throws -> [SavedFilter] {
        try checkValid()
        return try scope.catalog.filters()
    }

    /// The saved filter named `name`, or `nil`.
    public func savedFilter(named name: String) throws -> SavedFilter? {
        try checkValid()
        return try scope.catalog.filter(named: name)
    }
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

    /// Keeps a filter in the catalog under its name.
    ///
    /// - Throws: ``DocStoreError/Code/alreadyExists`` when a filter or a collection of that name exists.
    public func saveFilter(_ filter: SavedFilter) throws {
        try checkWritable("save the filter '\(filter.name)'")
        try Catalog.validateName(filter.name, what: "filter")
        if try savedFilter(named: filter.name) != nil {
            throw DocStoreError(.alreadyExists, "a saved filter named '\(filter.name)' already exists; delete it "
                + "first to replace it")
        }
        if try scope.catalog.collection(filter.name) != nil {
            throw DocStoreError(.alreadyExists, "cannot save a filter named '\(filter.name)': a collection has that "
                + "name; choose another", collection: filter.name)
        }
        try scope.catalog.setFilter(filter)
    }

    /// Removes a saved filter. Returns whether there was one.
    @discardableResult
    public func deleteFilter(named name: String) throws -> Bool {
        try checkWritable("delete the saved filter '\(name)'")
        return try scope.catalog.removeFilter(named: name)
    }
}

