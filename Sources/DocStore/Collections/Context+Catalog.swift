/// A request kept by name in a store's catalog: which documents of a collection, and in what order. The shell's
/// `.save` writes one and its `.filters` lists them; a query used by name starts from it.
///
/// For example:
/// ```swift
/// let adults = SavedFilter(name: "adults",
///                          query: Query<DocumentValue>("people").include(.compare("age", .greaterOrEqual, .int(18))))
/// try await store.write { try $0.saveFilter(adults) }
/// let n = try await store.read { try $0.savedFilter(named: "adults")?.query.count(in: $0) }
/// ```
public struct SavedFilter: Sendable, Equatable {
    /// The name it is used by: `adults.count()`.
    public var name: String
    /// The documents it selects, in their order: conditions, sorts and a slice, without the type it was written
    /// with (`decoded(as:)` gives it one).
    public var query: Query<DocumentValue>
    /// A filter kept as the shell's text by an older build: its steps, read by the shell onto ``collection``.
    package var legacyText: String?

    /// The collection the query reads.
    public var collection: String { query.collection }

    public init(name: String, query: Query<DocumentValue>) {
        self.name = name
        self.query = query
    }

    /// The same name, and the same documents in the same order.
    public static func == (a: SavedFilter, b: SavedFilter) -> Bool {
        a.name == b.name && a.collection == b.collection && a.legacyText == b.legacyText
            && a.query.selection == b.query.selection && a.query.output == b.query.output
    }

    /// The record the catalog and a dump keep: the name, the collection and the stored selection (or the text).
    var stored: DocumentValue {
        get throws {
            var fields: [(String, DocumentValue)] = [("name", .string(name)), ("collection", .string(collection))]
            if let legacyText { fields.append(("text", .string(legacyText))) } else {
                fields.append(("selection", try query.selection.stored()))
            }
            return .object(fields)
        }
    }

    /// The filter a catalog record holds.
    init(record: UnsafeRawBufferPointer) throws { try self.init(stored: DocumentValue(encoded: Array(record))) }

    init(stored value: DocumentValue) throws {
        guard case .string(let name)? = value[field: "name"], case .string(let collection)? = value[field: "collection"]
        else { throw DocStoreError(.corruptDocument, "a saved filter's record has no name or no collection") }
        self.init(name: name, query: Query(collection))
        if case .string(let text)? = value[field: "text"] {
            legacyText = text
        } else {
            query.selection = try Selection(stored: value[field: "selection"] ?? .null)
        }
    }
}

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

    /// The saved filters, by name.
    public func savedFilters() throws -> [SavedFilter] { try catalog.filters() }

    /// The saved filter named `name`, or `nil`.
    public func savedFilter(named name: String) throws -> SavedFilter? { try catalog.filter(named: name) }
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
        guard case .documents = filter.query.output else {
            throw DocStoreError(.encodingFailed, "a saved filter keeps which documents and in what order; "
                + "\(filter.query) answers something else of them", collection: filter.collection)
        }
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

