import Foundation

/// The store's catalog, as one transaction sees it: the key space that records the store's format and
/// generation, its collections, saved filters and applied migrations, and the names of the key spaces that hold
/// each collection's documents and indexes. The only code that knows how these are laid out.
struct Catalog {
    /// The catalog's own key space.
    static let spaceName = KeySpace.catalogName
    /// Joins the parts of a record's key and of a key space's name; no name may contain it.
    static let separator: Character = "\u{1F}"

    let space: KeySpace
    let txn: any StorageTransaction
    /// The store's path, for messages.
    let path: String

    /// The key of ``Record/generation``, which every transaction reads as it begins.
    static let generationKey = Array("generation".utf8)

    /// A record of the catalog, by what it describes.
    enum Record: Equatable {
        case format, generation, knownMigrations
        /// The salt of the store's shape ids (``DocumentShape/id(of:salt:)``), eight bytes.
        case shapeSalt
        case collection(String), filter(String), migration(String)
        /// The names of a shape of documents of format 3, by its id (``DocumentShape/id(of:)``).
        case shape(UInt64)

        var key: [UInt8] {
            switch self {
            case .format: Array("format".utf8)
            case .generation: Catalog.generationKey
            case .knownMigrations: Array("migrations-known".utf8)
            case .shapeSalt: Array("shape-salt".utf8)
            case .collection(let name): Catalog.key("collection", name)
            case .filter(let name): Catalog.key("filter", name)
            case .migration(let name): Catalog.key("migration", name)
            case .shape(let id): Catalog.key("shape", Catalog.hex(id))
            }
        }

        /// The record a stored key is; `nil` for a key of no kind this build knows.
        init?(key: [UInt8]) {
            let parts = String(decoding: key, as: UTF8.self)
                .split(separator: Catalog.separator, maxSplits: 1, omittingEmptySubsequences: false)
            switch (parts[0], parts.count == 2 ? String(parts[1]) : nil) {
            case ("format", nil): self = .format
            case ("generation", nil): self = .generation
            case ("migrations-known", nil): self = .knownMigrations
            case ("shape-salt", nil): self = .shapeSalt
            case ("collection", let name?): self = .collection(name)
            case ("filter", let name?): self = .filter(name)
            case ("migration", let name?): self = .migration(name)
            case ("shape", let hex?):
                guard hex.utf8.count == 16, let id = UInt64(hex, radix: 16) else { return nil }
                self = .shape(id)
            default: return nil
            }
        }
    }

    private static func key(_ kind: String, _ name: String) -> [UInt8] { Array((kind + String(separator) + name).utf8) }

    /// An id as 16 hexadecimal digits.
    static func hex(_ id: UInt64) -> String {
        let digits = String(id, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    // MARK: Format and generation

    func format() throws -> UInt8? {
        guard let raw = try txn.get(space, Record.format.key), raw.count == 1 else { return nil }
        return raw[0]
    }

    func setFormat(_ format: UInt8) throws { try txn.put(space, Record.format.key, [format]) }

    /// A number every change of the catalog moves: open collections check it to know they are still right.
    func generation() throws -> UInt64 {
        guard let raw = try Catalog.generationKey.withUnsafeBytes({ try txn.get(space, $0) }), raw.count == 8 else {
            return 0
        }
        return UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
    }

    func bumpGeneration() throws { try setGeneration(try generation() &+ 1) }

    func setGeneration(_ generation: UInt64) throws {
        try txn.put(space, Record.generation.key, withUnsafeBytes(of: generation.littleEndian) { Array($0) })
    }

    // MARK: Collections

    func collection(_ name: String) throws -> CollectionInfo? {
        try decoded(Catalog.decoding(CollectionInfo.self), .collection(name),
                    what: "the catalog entry of collection '\(name)'",
                    collection: name)
    }

    /// Records a collection, and moves the generation. A new collection may not take a saved filter's name: both
    /// are used by name in queries, and the filter would hide it.
    func setCollection(_ info: CollectionInfo) throws {
        let key = Record.collection(info.name).key
        if try txn.get(space, key) == nil, try txn.get(space, Record.filter(info.name).key) != nil {
            throw DocStoreError(.alreadyExists, "cannot create collection '\(info.name)': a saved filter has that name; "
                + "delete the filter or choose another name", collection: info.name)
        }
        try txn.put(space, key, try DocumentEncoder().encode(info))
        try bumpGeneration()
    }

    /// Forgets a collection, and moves the generation.
    func removeCollection(_ name: String) throws {
        _ = try txn.delete(space, Record.collection(name).key)
        try bumpGeneration()
    }

    /// Every collection, by name.
    func collections() throws -> [CollectionInfo] {
        try all(Catalog.decoding(CollectionInfo.self), { if case .collection(let name) = $0 { name } else { nil } },
                what: { "the catalog entry of collection '\($0)'" }, namesCollections: true)
    }

    // MARK: Saved filters

    /// The saved filters, by name; a damaged one throws, or (`skippingDamaged`) is left out.
    func filters(skippingDamaged: Bool = false) throws -> [FilterRecord] {
        try all(FilterRecord.init(record:),
                { if case .filter(let name) = $0 { name } else { nil } },
                what: { "the saved filter '\($0)' in the catalog" }, skippingDamaged: skippingDamaged)
    }

    func filter(named name: String) throws -> FilterRecord? {
        try decoded(FilterRecord.init(record:), .filter(name),
                    what: "the saved filter '\(name)' in the catalog")
    }

    func setFilter(_ filter: FilterRecord) throws {
        try txn.put(space, Record.filter(filter.name).key, try filter.stored.encoded())
    }

    func removeFilter(named name: String) throws -> Bool { try txn.delete(space, Record.filter(name).key) }

    // MARK: Migrations

    /// The applied migrations, in the order they were applied.
    func migrations() throws -> [AppliedMigration] {
        try all(Catalog.decoding(AppliedMigration.self), { if case .migration(let name) = $0 { name } else { nil } },
                what: { "the record of the migration '\($0)' in the catalog" }).sorted { $0.position < $1.position }
    }

    func migration(named name: String) throws -> AppliedMigration? {
        try decoded(Catalog.decoding(AppliedMigration.self), .migration(name),
                    what: "the record of the migration '\(name)' in the catalog")
    }

    func setMigration(_ record: AppliedMigration) throws {
        try txn.put(space, Record.migration(record.name).key, try DocumentEncoder().encode(record))
    }

    func removeMigration(named name: String) throws { _ = try txn.delete(space, Record.migration(name).key) }

    /// The names the last migrator to run had registered, or `nil` when none has run (or its record is damaged).
    func knownMigrations() throws -> [String]? {
        guard let raw = try txn.get(space, Record.knownMigrations.key) else { return nil }
        return try? DocumentDecoder().decode([String].self, from: raw)
    }

    /// Records the names a migrator registered.
    func setKnownMigrations(_ names: [String]) throws {
        try txn.put(space, Record.knownMigrations.key, try DocumentEncoder().encode(names))
    }

    // MARK: Shapes

    /// The salt of the store's shape ids, or `nil` when it has none yet.
    func shapeSalt() throws -> UInt64? {
        guard let raw = try txn.get(space, Record.shapeSalt.key), raw.count == 8 else { return nil }
        return UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
    }

    func setShapeSalt(_ salt: UInt64) throws {
        try txn.put(space, Record.shapeSalt.key, withUnsafeBytes(of: salt.littleEndian) { Array($0) })
    }

    /// The names of the shape `id`, or `nil` when the catalog has no such shape.
    func shape(_ id: UInt64) throws -> [String]? {
        try decoded(Catalog.decoding([String].self), .shape(id), what: "the names of shape \(Catalog.hex(id))")
    }

    /// Records a shape, and moves the generation: the reads that begin after the commit load it
    /// (``StoreCore/loadShapes(in:generation:committedView:loadedAt:)``).
    func setShape(_ id: UInt64, names: [String]) throws {
        try txn.put(space, Record.shape(id).key, try DocumentEncoder().encode(names))
        try bumpGeneration()
    }

    /// Every shape but those of `known`, by id (and how many records there are, `known`'s too); a damaged record is
    /// left out (its documents then say that their shape is not recorded).
    func shapes(besides known: Set<UInt64> = []) throws -> (shapes: [(id: UInt64, names: [String])], records: Int) {
        var out: [(UInt64, [String])] = []
        var records = 0
        try txn.forEachEntry(in: space) { key, value in
            guard case .shape(let id)? = Record(key: Array(key)) else { return }
            records += 1
            guard !known.contains(id), let names = try? DocumentDecoder().decode([String].self, from: value) else { return }
            out.append((id, names))
        }
        return (out, records)
    }

    // MARK: Reading records

    /// How a record of type `T` is read.
    private static func decoding<T: Decodable>(_ type: T.Type) -> (UnsafeRawBufferPointer) throws -> T {
        { try DocumentDecoder().decode(T.self, from: $0) }
    }

    private func decoded<T>(_ decode: (UnsafeRawBufferPointer) throws -> T, _ record: Record, what: String,
                            collection: String? = nil) throws -> T? {
        guard let raw = try txn.get(space, record.key) else { return nil }
        return try self.decode(decode, raw, what: what, collection: collection)
    }

    private func decode<T>(_ decode: (UnsafeRawBufferPointer) throws -> T, _ raw: UnsafeRawBufferPointer,
                           what: String, collection: String? = nil) throws -> T {
        do {
            return try decode(raw)
        } catch {
            throw DocStoreError(.corruptDocument, "\(what) in \(path) is damaged: \(error)", collection: collection)
        }
    }

    /// The records `pick` names, decoded as the walk over the catalog meets them, in key order; `what` names one in
    /// an error (with the collection it is, for `namesCollections`), and `skippingDamaged` leaves a damaged one out
    /// instead.
    private func all<T>(_ decode: (UnsafeRawBufferPointer) throws -> T, _ pick: (Record) -> String?,
                        what: (String) -> String, namesCollections: Bool = false,
                        skippingDamaged: Bool = false) throws -> [T] {
        var out: [T] = []
        try txn.forEachEntry(in: space) { key, value in
            guard let record = Record(key: Array(key)), let name = pick(record) else { return }
            do {
                out.append(try self.decode(decode, value, what: what(name),
                                      collection: namesCollections ? name : nil))
            } catch where skippingDamaged {}
        }
        return out
    }

    // MARK: Key spaces

    /// The key space of a collection's documents.
    static func documentsSpace(_ collection: String) -> String { "doc" + String(separator) + collection }

    /// The key space of an index. Its kind is part of the name, and whether it keeps its ids at one length
    /// (``CollectionInfo/idWidth``): a kind or layout changed (by this process or another) means a space of another
    /// name, never a handle still open with the old flags (LMDB refuses a handle whose database another process
    /// made again with other flags).
    static func indexSpace(_ collection: CollectionInfo, _ index: IndexDefinition) -> String {
        "idx" + String(separator) + collection.name + String(separator) + index.name + String(separator)
            + index.kind.rawValue + (keepsFixedIDs(collection, index) ? String(separator) + "fixed" : "")
    }

    /// Whether the key space of `index` keeps its ids at one length: an index of several ids per key, of a
    /// collection whose ids have one length.
    static func keepsFixedIDs(_ collection: CollectionInfo, _ index: IndexDefinition) -> Bool {
        !index.isUnique && collection.idWidth != nil
    }

    /// The collection a key space belongs to (its documents or one of its indexes); `nil` for any other.
    static func collectionName(ofKeySpace name: String) -> String? {
        let parts = name.split(separator: separator, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "doc" || parts[0] == "idx" else { return nil }
        return String(parts[1])
    }

    /// A key space in the store's words: the collection it belongs to, the catalog, or its own name.
    static func describe(space: String) -> String {
        collectionName(ofKeySpace: space).map { "collection '\($0)'" } ?? (space == spaceName ? "the catalog" : space)
    }

    /// Damage found in the file, in the store's words: the collection whose key space it is in.
    static func describe(_ damage: StorageDamage) -> String {
        let place = describe(space: damage.space)
        return (damage.page.map { "page \($0)" } ?? "the file") + (place.isEmpty ? "" : " (\(place))") + ": \(damage.message)"
    }

    /// Deletes an index's key space, with its entries, if it exists.
    func dropIndexSpace(_ collection: CollectionInfo, _ index: IndexDefinition) throws {
        if let space = try txn.openIndexSpace(collection, index, create: false) {
            try txn.drop(space, delete: true)
        }
    }

    /// A name for a collection, index or filter: non-empty, without the separator or NUL.
    static func validateName(_ name: String, what: String) throws {
        guard !name.isEmpty, !name.contains(separator), !name.contains("\0") else {
            throw DocStoreError(.invalidSchema, "invalid \(what) name '\(name)': it must be non-empty and contain "
                + "no NUL or U+001F character")
        }
    }
}

/// A migration a store has applied, as it recorded it.
public struct AppliedMigration: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The migration's name.
    public var name: String
    /// 1 for the first migration the store applied, 2 for the next, ...
    public var position: Int
    /// When it was applied.
    public var appliedAt: Date
    /// Its steps, in words: `rename field people.name to fullName`.
    public var steps: [String]

    public var description: String { "\(position). \(name)" + (steps.isEmpty ? "" : ": " + steps.joined(separator: "; ")) }
}

/// A saved filter as the catalog and a dump keep it: its name, its collection, and its selection in stored form (or
/// the shell's text an older build kept). `SavedFilter` is its public form.
struct FilterRecord: Equatable {
    var name: String
    var collection: String
    var selection = Selection()
    var legacyText: String?

    init(name: String, collection: String, selection: Selection = Selection(), legacyText: String? = nil) {
        self.name = name
        self.collection = collection
        self.selection = selection
        self.legacyText = legacyText
    }

    var stored: DocumentValue {
        get throws {
            var fields: [(String, DocumentValue)] = [("name", .string(name)), ("collection", .string(collection))]
            if let legacyText { fields.append(("text", .string(legacyText))) } else {
                fields.append(("selection", try selection.stored()))
            }
            return .object(fields)
        }
    }

    init(record: UnsafeRawBufferPointer) throws { try self.init(stored: DocumentValue(encoded: Array(record))) }

    init(stored value: DocumentValue) throws {
        guard case .string(let name)? = value[field: "name"], case .string(let collection)? = value[field: "collection"]
        else { throw DocStoreError(.corruptDocument, "a saved filter's record has no name or no collection") }
        self.init(name: name, collection: collection)
        if case .string(let text)? = value[field: "text"] {
            legacyText = text
        } else {
            selection = try Selection(stored: value[field: "selection"] ?? .null)
        }
    }
}

extension StorageTransaction {
    /// Opens the key space of `index` of `collection`: a key's ids side by side at one length when the collection
    /// keeps its ids at one (``CollectionInfo/idWidth``), for an index that holds several ids per key.
    func openIndexSpace(_ collection: CollectionInfo, _ index: IndexDefinition, create: Bool) throws -> KeySpace? {
        try openKeySpace(Catalog.indexSpace(collection, index), create: create, duplicateSort: !index.isUnique,
                         fixedSizeValues: Catalog.keepsFixedIDs(collection, index))
    }
}
