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
        a.record == b.record && a.query.output == b.query.output
    }

    init(_ record: FilterRecord) {
        self.init(name: record.name, query: Query(record.collection))
        query.selection = record.selection
        legacyText = record.legacyText
    }

    var record: FilterRecord {
        FilterRecord(name: name, collection: collection, selection: query.selection, legacyText: legacyText)
    }

    /// The record a dump keeps, and the filter it holds.
    var stored: DocumentValue { get throws { try record.stored } }
    init(stored value: DocumentValue) throws { self.init(try FilterRecord(stored: value)) }
}

extension ReadContext {
    /// The saved filters, by name.
    public func savedFilters() throws -> [SavedFilter] { try catalog.filters().map(SavedFilter.init) }

    /// The saved filter named `name`, or `nil`.
    public func savedFilter(named name: String) throws -> SavedFilter? {
        try catalog.filter(named: name).map(SavedFilter.init)
    }
}

extension WriteContext {
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
        try scope.catalog.setFilter(filter.record)
    }

    /// Removes a saved filter. Returns whether there was one.
    @discardableResult
    public func deleteFilter(named name: String) throws -> Bool {
        try checkWritable("delete the saved filter '\(name)'")
        return try scope.catalog.removeFilter(named: name)
    }
}
