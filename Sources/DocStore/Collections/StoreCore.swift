import Foundation

/// The state behind a ``DocStore`` actor: the environment, the catalog, and the open collections.
///
/// Owned by the actor and used only on it, inside synchronous transactions.
final class StoreCore {
    /// The newest format this build reads. 2: documents end with a checksum (format 1 stores open, and are marked
    /// 2 when opened for writing). 3: documents of a file may leave their field names to a shape the catalog
    /// records (``DocumentShape``). 4: the indexes of a collection of a file whose ids all have one length keep a
    /// key's ids side by side at that length (``CollectionInfo/idWidth``), which a build of format 3 would not keep
    /// to.
    static let formatVersion: UInt8 = 4

    /// The format this store's writes need older builds to read: 4 in a file, 2 on a server (which writes no
    /// shapes and keeps no ids at one length, and so stays readable by builds of format 2).
    var writtenFormat: UInt8 { file != nil ? 4 : 2 }

    /// The storage, opened in ``openEnvironment(path:options:)``.
    let env: any StorageEngine
    /// The same engine, for what only a store kept in a file has (copies, pages, the structural check); `nil` for
    /// an engine of another kind.
    let file: (any FileStorageEngine)?
    let path: String
    /// Opened with ``DocStore/Options/readOnly``: every change is refused.
    let isReadOnly: Bool
    /// How far full scans are split among threads (``DocStore/Options/scanThreads``).
    let scan: ScanSettings
    /// ``DocStore/Options/checkChecksums``.
    let checksChecksums: Bool
    /// Guards ``handles``, ``synced``, ``typeCheckers``, ``declared`` and each handle's
    /// ``CollectionHandle/checkedGeneration``: reads use them on their callers' threads, beside the writer.
    private let state = NSLock()
    /// Open collections. Each serves while the collection's catalog entry is the one it was opened with; see
    /// ``CollectionHandle/checkedGeneration``.
    var handles: [String: CollectionHandle] = [:]
    /// Swift types whose schema has been checked against their collection's catalog entry, with the handle they
    /// were checked with: the check holds while that handle is the collection's.
    var synced: [ObjectIdentifier: CollectionHandle] = [:]
    /// Per collection, a check that a stored document decodes into the Swift type last used with it.
    var typeCheckers: [String: (UnsafeRawBufferPointer) throws -> Void] = [:]
    /// Per collection, the schema of the Swift type last used with it, for reports.
    var declared: [String: ResolvedSchema] = [:]
    /// Collections a write of this process found ids of another length for (``TransactionScope/widenIDs(of:)``):
    /// made again by this process (by the write that met the id, run again, say), they keep ids of any length.
    /// Guarded as ``handles`` is.
    var idsOfAnyLength: Set<String> = []
    /// The catalog generation at which every key space the catalog names was open in this process (guarded as
    /// ``handles`` is): a read of that generation runs beside others, as it need open none; `nil` until a read
    /// has opened them.
    var keySpacesOpenedAt: UInt64?
    /// Moved (guarded as ``handles`` is) each time a write that ran alone ends: a read that began before publishes
    /// neither its collections nor the key spaces it opened, as some may have been closed since.
    var keySpaceEpoch: UInt64 = 0
    private(set) var meta = KeySpace(number: 0)
    /// The generation whose shapes are all in ``ShapeTable`` (guarded as ``handles`` is); `nil` until a
    /// transaction loads them.
    private var shapesLoadedAt: UInt64?
    /// The shapes the catalog records, as of ``shapesLoadedAt`` (guarded as ``handles`` is): a write of a document
    /// of one of them writes no record.
    private var recordedShapes: Set<UInt64> = []
    /// How many shapes the catalog records, as the last load counted them and the writes since made them (guarded
    /// as ``handles`` is; more than there are after a write that aborted, until the next load).
    private var shapeCount = 0
    /// The most shapes a store records: documents of further shapes are written in format 2 (a collection of
    /// documents whose fields are keys of a dictionary would otherwise record a shape for nearly each).
    static let shapeLimit = 1_024
    /// The salt of the store's shape ids, read (or made) when the store opens; `nil` in a store that has none and
    /// writes none (one opened read-only, or on a server).
    private(set) var shapeSalt: UInt64?
    /// Run when the core goes, after the engine is closed: the store's observers end there.
    var onRelease: (() -> Void)?

    /// Takes over an open engine and prepares its catalog (a new file becomes a store); closes the engine when
    /// that fails.
    init(path: String, engine: any StorageEngine, file: (any FileStorageEngine)?, isReadOnly: Bool,
         checksChecksums: Bool, scan: ScanSettings) throws {
        self.path = path
        self.isReadOnly = isReadOnly
        self.checksChecksums = checksChecksums
        self.scan = scan
        self.env = engine
        self.file = file
        file?.onKeySpacesClosed = { [weak self] in self?.keySpacesClosed() }
        do {
            if isReadOnly {
                // (Alone: the catalog's key space is opened here, which a read beside others may not do.)
                if let file { try file.readAlone { txn in try self.prepareCatalog(in: txn) } } else {
                    try env.read { txn in try self.prepareCatalog(in: txn) }
                }
            } else {
                try env.write { txn in try self.prepareCatalog(in: txn) }
            }
        } catch {
            env.close()
            switch error {
            case StorageError.damaged(let why): throw StoreCore.damagedFile(path, why)
            case let error as StorageError:
                throw DocStoreError(.cannotOpen, "cannot open a store at \(path): \(error)", underlying: error)
            default: throw error
            }
        }
    }

    /// The error for a file the storage found damaged while reading it without the structural check.
    static func damagedFile(_ path: String, _ why: String) -> DocStoreError {
        DocStoreError(.damagedFile, "\(path) is damaged: \(why); DocStore.verify() (or `docstore --check`) names the "
            + "damaged pages, and DocStore.Options.checkFile refuses such a file before it is read")
    }

    /// The store was released (nothing else holds its core): closes the file, then ends every observation, so that
    /// an observer that sees its observation end can open the file again.
    deinit {
        env.close()
        onRelease?()
    }

    /// The engine as a file, for `what` (a backup, a check), or an error saying only a store kept in a file has it.
    func fileEngine(for what: String) throws -> any FileStorageEngine {
        guard let file else {
            throw DocStoreError(.storage, "\(what) needs a store kept in a file, and \(path) is kept on a server: "
                + "there, copies, space and structure are the server's own (for PostgreSQL: pg_dump or "
                + "pg_basebackup, VACUUM FULL, pg_amcheck)")
        }
        return file
    }

    /// Checks that the file is a DocStore store of a known format, or makes it one if it is new.
    private func prepareCatalog(in txn: any StorageTransaction) throws {
        if let meta = try txn.openKeySpace(Catalog.spaceName, create: false) {
            self.meta = meta
            guard let format = try catalog(txn).format() else {
                throw DocStoreError(.notAStore, "\(path) is not a DocStore store: its catalog has no format version")
            }
            guard format <= StoreCore.formatVersion else {
                throw DocStoreError(.formatTooNew, "\(path) was written in DocStore format \(format); this build "
                    + "reads format \(StoreCore.formatVersion) and older: open it with a newer DocStore")
            }
            // A store that will hold documents of a newer format says so to older builds.
            if format < writtenFormat, !isReadOnly {
                try catalog(txn).setFormat(writtenFormat)
            }
            shapeSalt = try catalog(txn).shapeSalt()
            // A salt is made only for a store that records no shape yet: with its record lost, a new salt would
            // refuse every recorded shape. Such a store reads its shapes unsalted and writes format 2.
            if shapeSalt == nil, writesShapes, try catalog(txn).shapes().records == 0 {
                shapeSalt = UInt64.random(in: 1...UInt64.max)
                try catalog(txn).setShapeSalt(shapeSalt!)
            }
        } else {
            if isReadOnly {
                throw DocStoreError(.readOnly, "cannot make \(path) a DocStore store: it has no DocStore catalog yet, "
                    + "and the store was opened read-only")
            }
            guard let main = try txn.openKeySpace(nil, create: false) else {
                throw DocStoreError(.notAStore, "\(path) has no main database")
            }
            let names: [String] = try txn.withCursor(main) { cursor in
                var names: [String] = []
                var entry = try cursor.first()
                while let (key, _) = entry, names.count < 5 {
                    names.append(String(decoding: key, as: UTF8.self))
                    entry = try cursor.next()
                }
                return names
            }
            guard names.isEmpty else {
                throw DocStoreError(.notAStore, "\(path) is an LMDB environment of another program, not a DocStore "
                    + "store: it holds \(names.map { "'\($0)'" }.joined(separator: ", ")) and no DocStore catalog; "
                    + "nothing was changed")
            }
            guard let meta = try txn.openKeySpace(Catalog.spaceName, create: true) else {
                throw DocStoreError(.storage, "cannot create the catalog in \(path)")
            }
            self.meta = meta
            try catalog(txn).setFormat(writtenFormat)
            try catalog(txn).setGeneration(0)
            if writesShapes {
                shapeSalt = UInt64.random(in: 1...UInt64.max)
                try catalog(txn).setShapeSalt(shapeSalt!)
            }
        }
    }

    /// Opens every key space the catalog names, as `txn` sees it: for a read that may open them (one that runs
    /// alone), so that the reads after it need open none.
    func openEveryKeySpace(in txn: any StorageTransaction) throws {
        for info in try catalog(txn).collections() {
            _ = try txn.openKeySpace(Catalog.documentsSpace(info.name), create: false)
            for index in info.indexes {
                _ = try txn.openIndexSpace(info, index, create: false)
            }
        }
    }

    /// Opens every key space the catalog names, in a read that runs alone, and notes the generation it did so at;
    /// whether it could (a damaged catalog entry stops it).
    func openEveryKeySpace(_ file: any FileStorageEngine) -> Bool {
        var done: (generation: UInt64, epoch: UInt64, txn: any StorageTransaction)?
        _ = try? file.readAlone { txn in
            let epoch = withState { keySpaceEpoch }
            let generation = try catalog(txn).generation()
            try openEveryKeySpace(in: txn)
            done = (generation, epoch, txn)
        }
        guard let done, !done.txn.opensKeySpaces || done.txn.keptKeySpaces else { return false }
        return withState {
            guard keySpaceEpoch == done.epoch else { return false }
            keySpacesOpenedAt = done.generation
            return true
        }
    }

    /// The catalog as `txn` sees it.
    func catalog(_ txn: any StorageTransaction) -> Catalog { Catalog(space: meta, txn: txn, path: path) }

    // MARK: Shapes

    /// Whether documents are written in format 3: in a file (a server's store writes format 2, which needs no
    /// catalog to read).
    var writesShapes: Bool { file != nil && !isReadOnly }

    /// The salt a model is encoded with before a write (``CollectionHandle/encoded(_:for:shapedWith:)``): the
    /// store's where it writes shapes. Set when the store opens, and read from any thread after.
    /// None once the store records as many shapes as it may: a model's new shape would then only take a slot of
    /// the process's table for nothing (the write keeps its names).
    var encodingSalt: UInt64? { writesShapes && withState({ shapeCount < StoreCore.shapeLimit }) ? shapeSalt : nil }

    /// What a transaction reads of the core's state as it begins, under one lock: ``keySpaceEpoch``,
    /// ``keySpacesOpenedAt``, and the generation whose shapes are loaded.
    func stateAtStart() -> (epoch: UInt64, keySpacesOpenedAt: UInt64?, shapesLoadedAt: UInt64?) {
        withState { (keySpaceEpoch, keySpacesOpenedAt, shapesLoadedAt) }
    }

    /// Puts the shapes the catalog records at `generation` (`txn`'s) into ``ShapeTable``, unless a transaction of
    /// that generation or a later one did (`loadedAt`: that generation, as ``stateAtStart()`` read it): before any
    /// of `txn`'s documents is read. A record whose id is not its names' (damaged, or of another store), or that the
    /// process cannot hold beside the shapes it has (it is full, or holds other names under that id), is left out:
    /// the documents of that shape then fail alone, naming it.
    ///
    /// Only a transaction that sees nothing but committed data (a read, or a write before it changed anything:
    /// not a group's nested write, which sees the writes before it) takes what it loads as recorded
    /// (``shapeID(for:in:)`` then writes no record).
    func loadShapes(in txn: any StorageTransaction, generation: UInt64, committedView: Bool, loadedAt: UInt64?)
        throws {
        guard file != nil, loadedAt.map({ $0 < generation }) ?? true else { return }
        // (No salt: its record was lost, and each record is taken as it is.)
        let salt = try shapeSalt ?? catalog(txn).shapeSalt()
        var ids: [UInt64] = []
        // (Those known recorded are in the table already: their records are counted, not read again.)
        let (found, records) = try catalog(txn).shapes(besides: withState { recordedShapes })
        for (id, names) in found {
            guard salt.map({ DocumentShape.id(of: names, salt: $0) == id }) ?? true,
                  ShapeTable.add(id, names)?.names == names else { continue }
            ids.append(id)
        }
        guard committedView else { return }
        withState {
            guard shapesLoadedAt.map({ $0 < generation }) ?? true else { return }
            shapesLoadedAt = generation
            recordedShapes.formUnion(ids)
            shapeCount = records
        }
    }

    /// The id of the shape a document with the field names `names` is written under in `txn`, its record added to
    /// the catalog when the catalog has none; `nil` to write the document in format 2 (a name that is not UTF-8,
    /// the store's or the process's shapes all taken, another shape of the same id, an id that is not the names'
    /// in this store).
    func shapeID(for names: BinaryFormat.Names, in txn: any StorageTransaction) throws -> UInt64? {
        let strings: [String]
        if let known = ShapeTable.shape(names.id)?.takeUnretainedValue() {
            guard known.hasNames(names.bytes) else { return nil }
            if withState({ recordedShapes.contains(names.id) }) { return names.id }
            strings = known.names
        } else {
            guard let valid = names.strings else { return nil }
            strings = valid
        }
        // (A document shaped for another store names its shape by that store's id.)
        guard let salt = shapeSalt, DocumentShape.id(of: names.bytes, salt: salt) == names.id else { return nil }
        let catalog = catalog(txn)
        // Recorded already (by this transaction, or one committed since the shapes were loaded), or not yet.
        if let recorded = try catalog.shape(names.id) {
            guard recorded == strings, ShapeTable.add(names.id, strings)?.names == strings else { return nil }
            return names.id
        }
        guard withState({ shapeCount < StoreCore.shapeLimit }),
              ShapeTable.add(names.id, strings)?.names == strings else { return nil }
        try catalog.setShape(names.id, names: strings)
        withState { shapeCount += 1 }
        return names.id
    }

    func readInfo(_ collection: String, in txn: any StorageTransaction) throws -> CollectionInfo? {
        try catalog(txn).collection(collection)
    }

    // MARK: Opening collections

    /// Opens the databases of a collection as the catalog describes it.
    func openHandle(_ info: CollectionInfo, in txn: any StorageTransaction) throws -> CollectionHandle {
        guard let documents = try txn.openKeySpace(Catalog.documentsSpace(info.name), create: !txn.isReadOnly) else {
            throw DocStoreError(.corruptDocument, "collection '\(info.name)' is in the catalog but its documents "
                + "are missing", collection: info.name)
        }
        var indexes: [CollectionHandle.Index] = []
        for definition in info.indexes {
            guard let db = try txn.openIndexSpace(info, definition, create: !txn.isReadOnly) else {
                throw DocStoreError(.corruptDocument, "index '\(definition.name)' of '\(info.name)' is in the catalog "
                    + "but its entries are missing", collection: info.name, index: definition.name)
            }
            indexes.append(.init(definition: definition, database: db))
        }
        return CollectionHandle(info: info, documents: documents, indexes: indexes, checksChecksums: checksChecksums,
                                shapeSalt: writesShapes ? shapeSalt : nil,
                                shapeID: writesShapes ? { [unowned self] in try shapeID(for: $0, in: $1) } : nil)
    }

    /// Brings the catalog in line with a Swift type's schema, inside a write transaction: creates the collection,
    /// builds indexes that are declared but missing, rebuilds those whose definition changed, and keeps (and
    /// reports) those no longer declared. Returns the open collection.
    func sync(_ schema: ResolvedSchema, in txn: any StorageTransaction) throws -> CollectionHandle {
        try Catalog.validateName(schema.collection, what: "collection")
        for index in schema.indexes { try Catalog.validateName(index.name, what: "index") }
        let existing = try readInfo(schema.collection, in: txn)
        // A new collection of a file keeps its indexes' ids at the length its type's ids have, if they have one.
        let anyLength = file == nil || withState { idsOfAnyLength.contains(schema.collection) }
        var info = existing ?? CollectionInfo(name: schema.collection, idPath: schema.idPath, indexes: [],
                                              idWidth: anyLength ? nil : schema.idWidth)
        var changed = existing == nil
        guard let documents = try txn.openKeySpace(Catalog.documentsSpace(schema.collection), create: true) else {
            throw DocStoreError(.storage, "cannot create collection '\(schema.collection)'")
        }
        if info.idPath != schema.idPath {
            guard try txn.entryCount(documents) == 0 else { throw StoreCore.idPathMismatch(info, schema) }
            info.idPath = schema.idPath
            changed = true
        }
        var toBuild: [IndexDefinition] = []
        for declared in schema.indexes {
            let i = info.indexes.firstIndex { $0.name == declared.name }
            if let i, info.indexes[i].hasSameShape(as: declared) { continue }
            if let i {
                try catalog(txn).dropIndexSpace(info, info.indexes[i])
                info.indexes[i] = declared
            } else {
                info.indexes.append(declared)
            }
            toBuild.append(declared)
        }
        if changed || !toBuild.isEmpty { try catalog(txn).setCollection(info) }
        let handle = try openHandle(info, in: txn)
        for index in handle.indexes where toBuild.contains(index.definition) {
            try handle.build(index, in: txn)
        }
        return handle
    }

    /// The error for a type whose id is not where its collection keys its documents.
    static func idPathMismatch(_ info: CollectionInfo, _ schema: ResolvedSchema) -> DocStoreError {
        DocStoreError(.invalidSchema, "collection '\(schema.collection)' keys its documents by '\(info.idPath)', but "
            + "\(schema.typeName) keeps its id at '\(schema.idPath)'", collection: schema.collection)
    }

    /// Removes an index from the catalog and deletes its entries.
    func dropIndex(_ name: String, from collection: String, in txn: any StorageTransaction) throws -> Bool {
        guard var info = try readInfo(collection, in: txn),
              let i = info.indexes.firstIndex(where: { $0.name == name }) else { return false }
        let definition = info.indexes.remove(at: i)
        try catalog(txn).dropIndexSpace(info, definition)
        try catalog(txn).setCollection(info)
        return true
    }

    /// Indexes of `info` that `schema` does not declare.
    static func undeclared(in info: CollectionInfo, by schema: ResolvedSchema) -> [IndexDefinition] {
        info.indexes.filter { stored in !schema.indexes.contains { $0.name == stored.name } }
    }

    /// What a write would have to change for the catalog entry `info` to serve `schema`'s type, or `nil` when it
    /// serves it as it is: the collection exists, keyed at the type's id path, with every index the type declares
    /// in the shape it declares. What ``sync(_:in:)`` would change, in words.
    static func missing(in info: CollectionInfo?, for schema: ResolvedSchema) -> String? {
        guard let info else { return "create collection '\(schema.collection)' for \(schema.typeName)" }
        if info.idPath != schema.idPath {
            return "key collection '\(schema.collection)' by '\(schema.idPath)' for \(schema.typeName)"
        }
        let lacking = schema.indexes.filter { declared in
            !info.indexes.contains { $0.name == declared.name && $0.hasSameShape(as: declared) }
        }
        guard !lacking.isEmpty else { return nil }
        return "build index\(lacking.count == 1 ? "" : "es") "
            + lacking.map { "'\($0.name)'" }.joined(separator: ", ")
            + " of '\(schema.collection)', which \(schema.typeName) declares"
    }

    /// The error for a change refused because the store was opened read-only; `what` says what was refused.
    func readOnlyRefusal(_ what: String, collection: String? = nil, index: String? = nil) -> DocStoreError {
        DocStoreError(.readOnly, "cannot \(what): the store at \(path) was opened read-only",
                      collection: collection, index: index)
    }

    /// Forgets every open collection; each is reopened, and each type's schema synced again, on next use.
    func forgetCollections() {
        withState {
            handles = [:]
            synced = [:]
        }
    }

    /// A write that ran alone (it deleted a key space, closed at once whether it commits or not) ends: every open
    /// collection is forgotten, the next read opens every key space again, alone, and the reads that began before
    /// publish nothing.
    func keySpacesClosed() {
        withState {
            handles = [:]
            synced = [:]
            keySpacesOpenedAt = nil
            keySpaceEpoch &+= 1
        }
    }

    /// Runs `body` holding the collections' state: it must not wait for anything else.
    func withState<R>(_ body: () throws -> R) rethrows -> R {
        state.lock()
        defer { state.unlock() }
        return try body()
    }
}

/// How far a full scan is split among threads.
struct ScanSettings: Sendable {
    /// The most threads a scan uses (``DocStore/Options/scanThreads``); 1 turns splitting off.
    var threads: Int
    /// The fewest documents a thread is given: below this, starting it costs more than it saves.
    var documentsPerThread = 16_384

    static let off = ScanSettings(threads: 1)
}
