import Foundation

/// What ``DocStore/recover(from:to:)`` copied into the new store, and what it could not.
///
/// For example:
/// ```swift
/// let report = try await DocStore.recover(from: "damaged.db", to: "recovered.db")
/// print(report)   // per collection: documents copied and lost, indexes rebuilt; the damage met; the totals
/// ```
public struct RecoveryReport: Sendable, CustomStringConvertible {
    public struct Collection: Sendable {
        public let name: String
        /// Documents copied into the new store.
        public internal(set) var recovered = 0
        /// Documents found damaged (their bytes are not a document, or not the ones their checksum was made of).
        public internal(set) var damaged = 0
        /// Documents found in versions that differ on pages no tree of the newest commit reaches, none of which can
        /// be told to be the newest: none was copied.
        public internal(set) var conflicting = 0
        /// Recovered documents read from pages no tree reaches while the free list could not be read, or from the
        /// trees of an older commit when the newest could not be read: each may be an older version of a document
        /// whose newest version was lost, or one deleted since.
        public internal(set) var possiblyStale = 0
        /// Documents the damaged file counted but whose pages could not be read: `nil` when its count is lost too.
        public internal(set) var unreachable: Int?
        /// Indexes made again from the recovered documents.
        public internal(set) var indexes: [String] = []
        /// What went wrong for this collection: an index that could not be made again, a lost catalog entry.
        public internal(set) var notes: [String] = []

        /// Documents of the damaged file not in the new store, as far as can be known.
        public var lost: Int { damaged + conflicting + (unreachable ?? 0) }
    }

    public internal(set) var collections: [Collection] = []
    public internal(set) var savedFilters = 0
    /// Sound documents found on pages no tree reaches that could not be placed in one collection, and were left out.
    public internal(set) var unplaced = 0
    /// Why how many documents were lost cannot be known, when it cannot: the newest commit could not be read, say.
    public internal(set) var unknowns: [String] = []
    /// Whether documents were taken from pages that may be older copies: the free list could not be read whole, so
    /// documents deleted or replaced before the newest commit may be among those recovered.
    public var mayHoldStaleDocuments: Bool { collections.contains { $0.possiblyStale > 0 } }
    /// The damage met while reading the file: each page skipped, and why.
    public internal(set) var damage: [String] = []
    /// What `verify()` says of the new store.
    public internal(set) var verification: VerificationReport?

    /// Whether every document the newest readable commit of the damaged file counted was copied.
    public var lostNothing: Bool {
        unknowns.isEmpty && unplaced == 0 && !mayHoldStaleDocuments
            && collections.allSatisfy { $0.lost == 0 && $0.unreachable != nil }
    }

    public var description: String {
        var lines: [String] = []
        for c in collections {
            var line = "collection '\(c.name)': \(c.recovered) documents recovered"
            if c.damaged > 0 { line += ", \(c.damaged) damaged and lost" }
            if c.conflicting > 0 {
                line += ", \(c.conflicting) found in versions of which none is known to be the newest, and lost"
            }
            if let unreachable = c.unreachable {
                if unreachable > 0 { line += ", \(unreachable) on unreadable pages and lost" }
            } else {
                line += " (how many the file held is not known)"
            }
            if !c.indexes.isEmpty { line += "; indexes rebuilt: " + c.indexes.joined(separator: ", ") }
            lines.append(line)
            lines += c.notes.map { "  \($0)" }
        }
        if savedFilters > 0 { lines.append("\(savedFilters) saved filters recovered") }
        if unplaced > 0 {
            lines.append("\(unplaced) documents on pages no tree reaches could not be placed in one collection, and "
                + "were left out")
        }
        if !damage.isEmpty {
            lines.append("damage met (\(damage.count)):")
            lines += damage.prefix(20).map { "  \($0)" }
            if damage.count > 20 { lines.append("  ... and \(damage.count - 20) more") }
        }
        let recovered = collections.reduce(0) { $0 + $1.recovered }
        let stale = collections.reduce(0) { $0 + $1.possiblyStale }
        let staleNote = stale == 0 ? "" : "; \(stale) of them were read from pages no tree reaches while the free list "
            + "could not be read, or from an older commit's trees, and may be older versions of documents whose newest "
            + "version was lost, or documents deleted since"
        if unknowns.isEmpty && collections.allSatisfy({ $0.unreachable != nil }) {
            let lost = collections.reduce(0) { $0 + $1.lost }   // unplaced documents are among these, or older copies
            lines.append("\(recovered) documents recovered, \(lost) lost" + staleNote)
        } else {
            var reasons = unknowns
            let uncounted = collections.filter { $0.unreachable == nil }.map { "'\($0.name)'" }
            if reasons.isEmpty {
                reasons.append("the file's count of the documents of " + uncounted.joined(separator: ", ")
                    + " could not be read")
            }
            lines.append("\(recovered) documents recovered; how many were lost cannot be known because "
                + reasons.joined(separator: "; ") + staleNote)
        }
        if let verification { lines.append(verification.isClean ? "the new store verifies clean" : "\(verification)") }
        return lines.joined(separator: "\n")
    }
}

extension DocStore {
    /// Copies every document that can still be read from the store file at `damaged` into a new store at `path`,
    /// with the collections' catalog (id paths, indexes, saved filters), and reports what was lost.
    ///
    /// The damaged file is read without LMDB and without trusting it (as ``Options/checkFile`` reads it): a damaged
    /// page is skipped with what hangs from it, and each document is checked (its structure and its checksum)
    /// before it is copied. The newest commit is read, as far as the file goes when it was cut short; when that
    /// leaves documents out, the leaf pages no tree reaches are read too, and each is placed in the collection
    /// whose documents it holds (see ``RecoveryReport``). Index entries are not copied: the indexes are made again
    /// from the recovered documents. The new store is checked with ``verify()`` before this returns. The damaged
    /// file is not changed. A file whose write log holds commits from before a crash of the machine is refused: an
    /// opening applies them.
    ///
    /// - Throws: ``DocStoreError/Code/alreadyExists`` when `path` exists, ``DocStoreError/Code/notAStore`` when
    ///   `damaged` is not a store's file (or cannot be read).
    @concurrent public static func recover(from damaged: String, to path: String) async throws -> RecoveryReport {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw DocStoreError(.alreadyExists, "cannot recover into \(path): it exists; recovery makes a new store")
        }
        if FileStorage.writeLogNeedsApplying(path: damaged) {
            throw DocStoreError(.cannotOpen, "cannot recover \(damaged) yet: the machine stopped while its last "
                + "commits were on their way to the disk, and their record is in \(damaged)-log, which the file's "
                + "pages do not hold yet; open the store writable once (that applies it), and recover only if that "
                + "fails (with the log moved away, recovery then reads the file as the disk left it)")
        }
        let documentsPrefix = Catalog.documentsSpace("")
        guard let salvage = FileStorage.salvage(path: damaged, spaces: {
            $0 == Catalog.spaceName || $0.hasPrefix(documentsPrefix)
        }) else {
            throw DocStoreError(.notAStore, "cannot recover \(damaged): it cannot be read, or is not a DocStore store")
        }
        var report = RecoveryReport()
        var damage = salvage.damage
        if let cut = salvage.cutShort {
            report.damage.append("the file has \(cut.pages) pages, but its newest commit names pages up to "
                + "\(cut.lastPage): it was cut short (or that meta page is damaged)")
            // Pages past the end, counted by where they were missed rather than named one by one.
            var missed: [String: Int] = [:]
            damage.removeAll { item in
                guard item.message.hasSuffix(FileStorage.pastTheLastPage(cut.pages)) else { return false }
                missed[item.space, default: 0] += 1
                return true
            }
            let more = salvage.damage.count >= 100 ? " or more" : ""   // the reading stops noting damage at 100
            for (space, count) in missed.sorted(by: { $0.key < $1.key }) {
                report.damage.append("\(Catalog.describe(space: space)): \(count)\(more) of its pages "
                    + (count == 1 && more.isEmpty ? "lies" : "lie") + " past the end of the file")
            }
        }
        report.damage += damage.map(Catalog.describe)

        // The catalog: collections by name, and saved filters.
        var catalog = RecoveredCatalog(entries: salvage.databases[Catalog.spaceName] ?? [])
        DocStore.learnShapes(from: (salvage.databases[Catalog.spaceName] ?? []) + salvage.loosePages.flatMap(\.entries))
        var names = Set(catalog.infos.keys)
            .union(salvage.databases.keys.compactMap(Catalog.collectionName(ofKeySpace:)))
        var namedOnLoosePages = Set<String>()
        if !salvage.readNewest {
            if let newest = salvage.newestCommit, let read = salvage.readCommit {
                report.unknowns.append("the newest commit (transaction \(newest)) could not be read, only the one "
                    + "before it (transaction \(read)): what the newest added, changed or deleted is not known")
            } else {
                report.unknowns.append("no commit's catalog could be read: which collections the store had, and how "
                    + "many documents they held, is not known")
            }
            // The newest catalog is lost: collections named on pages no tree reaches (catalog entries, records of
            // databases) are looked for too.
            var loose = RecoveredCatalog(entries: salvage.loosePages.flatMap(\.entries))
            for (name, info) in loose.infos where catalog.infos[name] == nil { catalog.infos[name] = info }
            if catalog.filters.isEmpty { swap(&catalog.filters, &loose.filters) }
            let looseSpaces = salvage.loosePages.flatMap(\.databaseNames).filter { $0.hasPrefix(documentsPrefix) }
            let looseNames = Set(loose.infos.keys).union(looseSpaces.compactMap(Catalog.collectionName(ofKeySpace:)))
            for name in looseNames.subtracting(names).sorted() {
                names.insert(name)
                namedOnLoosePages.insert(name)
            }
        }

        var gathered = DocStore.gather(names: names.sorted(), infos: catalog.infos, from: salvage, into: &report)
        for i in gathered.indices where namedOnLoosePages.contains(gathered[i].collection.name) {
            gathered[i].collection.notes.append("named only on a page no tree reaches (an older copy of the catalog, "
                + "perhaps): it may have been dropped or renamed since")
        }
        let store = try await DocStore(path: path)
        do {
            try await store.copy(gathered, catalog: catalog, into: &report)
            report.verification = try await store.verify()
        } catch {
            await store.close()
            throw error
        }
        await store.close()
        return report
    }

    /// The catalog read from entries of the store's own database: collections by name, saved filters, and the
    /// migrations the store had applied (a recovered store is not migrated again).
    private struct RecoveredCatalog {
        var infos: [String: CollectionInfo] = [:]
        var filters: [SavedFilter] = []
        var migrations: [AppliedMigration] = []
        var knownMigrations: [String]?
        /// The shapes of documents of format 3 found, and the salt of their ids.
        var shapes: [(id: UInt64, names: [String])] = []
        var salt: UInt64?

        init(entries: [(key: [UInt8], value: [UInt8])]) {
            for (key, value) in entries {
                switch Catalog.Record(key: key) {
                case .collection:
                    if let info = try? DocumentDecoder().decode(CollectionInfo.self, from: value) { infos[info.name] = info }
                case .filter:
                    if let filter = try? SavedFilter(stored: DocumentValue(encoded: value)) { filters.append(filter) }
                case .migration:
                    if let record = try? DocumentDecoder().decode(AppliedMigration.self, from: value) {
                        migrations.append(record)
                    }
                case .knownMigrations:
                    knownMigrations = try? DocumentDecoder().decode([String].self, from: value)
                case .shape(let id):
                    // (Its checksum checked: without the salt, nothing else vouches for a record.)
                    if (try? value.withUnsafeBytes { try BinaryReader($0).checkChecksum() }) == true,
                       let names = try? DocumentDecoder().decode([String].self, from: value) {
                        shapes.append((id, names))
                    }
                case .shapeSalt:
                    // (The first found: the catalog's entries come before those of pages no tree reaches.)
                    if salt == nil, value.count == 8 {
                        salt = UInt64(littleEndian: value.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
                    }
                case .format, .generation, nil:
                    break
                }
            }
        }
    }

    /// Makes the shapes of `entries` (the catalog's, and those of pages no tree reaches: a shape's record vouches
    /// for itself, its id being its names' hash under the store's salt) known to the process, so that documents of
    /// format 3 read. With the salt's record lost, a record's own checksum vouches for it (the first of an id wins:
    /// the catalog's before those of pages no tree reaches).
    private static func learnShapes(from entries: [(key: [UInt8], value: [UInt8])]) {
        let found = RecoveredCatalog(entries: entries)
        for (id, names) in found.shapes where found.salt.map({ DocumentShape.id(of: names, salt: $0) == id }) ?? true {
            _ = ShapeTable.add(id, names)
        }
    }

    /// One collection's documents, gathered from the file before they are copied.
    private struct Gathered {
        var collection: RecoveryReport.Collection
        var documents: [DocumentValue]
        /// Each document's key in the file, in the same order.
        var keys: [[UInt8]] = []
    }

    /// Where the ids of a collection whose catalog entry was lost are: the top-level field whose value gives the key
    /// of every document (of up to 1,000 of them) it was stored under, `id` first; `nil` when no field does.
    private static func idPath(of documents: [DocumentValue], keys: [[UInt8]]) -> FieldPath? {
        var candidates: [String]?
        for (document, key) in zip(documents, keys).prefix(1_000) {
            guard case .object(let fields) = document else { return nil }
            let giving = fields.filter { KeyEncoder.key($0.value) == key }.map(\.name)
            candidates = candidates.map { $0.filter(giving.contains) } ?? giving
            if candidates?.isEmpty == true { return nil }
        }
        guard let candidates else { return nil }
        return FieldPath(components: [candidates.contains("id") ? "id" : candidates[0]])
    }

    /// A document read from the file: its key, its bytes, whether it lies on a page the newest commit's tree
    /// reaches (which makes it the newest version of its key), and whether it lies on a page no tree reaches.
    private struct Found {
        var key: [UInt8], value: [UInt8], newest: Bool, loose: Bool
    }

    /// The documents of each collection of `names`: those its tree holds, and, when that is fewer than it had (or
    /// how many it had is not known), those of the loose pages placed in it. Where several versions of one key are
    /// found, the one the newest commit's tree holds wins; versions found elsewhere that differ cannot be ordered
    /// (LMDB 0.9's pages do not record the transaction that wrote them), and none of them is taken.
    private static func gather(names: [String], infos: [String: CollectionInfo], from salvage: FileStorage.Salvage,
                               into report: inout RecoveryReport) -> [Gathered] {
        var gathered: [String: Gathered] = [:]
        var losing: [String] = []
        var fields: [String: Set<String>] = [:]
        for name in names {
            let space = Catalog.documentsSpace(name)
            var collection = RecoveryReport.Collection(name: name)
            if infos[name] == nil {
                collection.notes.append("its catalog entry was lost: its indexes (if it had any) are not made again")
            }
            let entries = salvage.databases[space]
            if entries == nil { collection.notes.append("the tree of its documents could not be found") }
            // Its count in the commit read; only the newest commit's says what was lost.
            var missing: Int?
            if let entries, let recorded = salvage.recordedEntries[space], recorded >= UInt64(entries.count) {
                missing = Int(recorded) - entries.count
            }
            if salvage.readNewest { collection.unreachable = missing }
            if missing != 0 { losing.append(name) }
            gathered[name] = Gathered(collection: collection, documents: [])
        }
        // The fields each collection's documents have, to tell apart collections a page fits equally by its keys.
        for name in names where names.count > 1 && !losing.isEmpty {
            for entry in salvage.databases[Catalog.documentsSpace(name)] ?? [] {
                if case .object(let members)? = try? DocumentValue(encoded: entry.value) {
                    fields[name, default: []].formUnion(members.map(\.name))
                }
            }
        }
        var holes: [String: [FileStorage.KeyInterval]] = [:]
        for name in names { holes[name] = salvage.holes[Catalog.documentsSpace(name)] }
        let (placed, olderCopies) = place(salvage.loosePages, among: names, losing: Set(losing), infos: infos,
                                          fields: fields, holes: holes, into: &report)
        for name in names {
            guard var entry = gathered[name] else { continue }
            let space = Catalog.documentsSpace(name)
            var found = (salvage.databases[space] ?? []).map {
                Found(key: $0.key, value: $0.value, newest: salvage.readNewest, loose: false)
            }
            let fromTree = found.count
            found += placed[name] ?? []
            if let count = olderCopies[name] {
                entry.collection.notes.append("\(count) documents on pages no tree reaches were left out as older "
                    + "copies: keys of their pages lie where the collection's tree was read")
            }
            // One version a key: the one the newest commit's tree holds, else the only one found; versions found
            // elsewhere that differ cannot be ordered, and none of them is taken.
            var chosen: [[UInt8]: Found] = [:], conflicting = Set<[UInt8]>(), order: [[UInt8]] = []
            for item in found {
                guard let earlier = chosen[item.key] else {
                    chosen[item.key] = item
                    order.append(item.key)
                    continue
                }
                if earlier.newest || earlier.value == item.value { continue }
                if item.newest { chosen[item.key] = item } else { conflicting.insert(item.key) }
            }
            let added = order.count - fromTree
            if added > 0 {
                entry.collection.notes.append("\(added) documents found on pages "
                    + (salvage.readNewest ? "cut off from the collection's tree" : "no tree reaches"))
            }
            entry.collection.conflicting = conflicting.count
            var shapesLost = 0
            for key in order where !conflicting.contains(key) {
                guard let item = chosen[key] else { continue }
                do {
                    _ = try item.value.withUnsafeBytes { try BinaryReader($0).checkChecksum() }
                    entry.documents.append(try DocumentValue(encoded: item.value))
                    entry.keys.append(key)
                    // A document of an older commit's tree may have changed in the newest; one of a loose page may
                    // be an older copy unless the free list's pages were left out.
                    if !salvage.readNewest || (item.loose && !salvage.freePagesLeftOut) {
                        entry.collection.possiblyStale += 1
                    }
                } catch {
                    entry.collection.damaged += 1
                    if item.value.first == BinaryFormat.shapedVersion, item.value.count > 9,
                       (try? item.value.withUnsafeBytes { try BinaryReader($0).checkChecksum() }) == true,
                       ShapeTable.shape(UInt64(littleEndian: item.value.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 1, as: UInt64.self) })) == nil {
                        shapesLost += 1
                    }
                }
            }
            if shapesLost > 0 {
                entry.collection.notes.append("\(shapesLost) of the damaged documents are sound, but the names of their "
                    + "fields (their shape) were lost with the catalog: their values could not be named")
            }
            if let unreachable = entry.collection.unreachable {
                entry.collection.unreachable = max(0, unreachable - added)
            }
            gathered[name] = entry
        }
        return names.compactMap { gathered[$0] }
    }

    /// The sound documents of the loose pages placed in collections of `losing`, page by page (a leaf page belongs to
    /// one database). The collection a page belongs to is told by what it holds, among all of `names`: each of its
    /// documents must be keyed by its own id at that collection's id path; where that fits several collections, it
    /// is the one whose documents read from its tree have every field the page's documents have, else the only one
    /// none were read from. A page that fits none is not a page of a collection's documents (an index's, the
    /// catalog's); one that fits several equally is left out and counted (``RecoveryReport/unplaced``). A page of a
    /// collection that lost nothing is an older copy of one of its pages, and left out. A document whose checksum
    /// fails, or that has none, is never placed (it may be an old copy of one found elsewhere; when it is not, the
    /// collection's count says it was lost).
    ///
    /// Where a collection's tree was read, a page of its documents cut off from it holds keys of one place the tree
    /// could not be read (one of its `holes`: what a missing page below a branch holds). A page with keys elsewhere
    /// is an older copy of a page, whose documents were replaced or deleted since: it is left out, and counted
    /// (`olderCopies`).
    private static func place(_ pages: [FileStorage.LoosePage], among names: [String], losing: Set<String>,
                              infos: [String: CollectionInfo], fields: [String: Set<String>],
                              holes: [String: [FileStorage.KeyInterval]], into report: inout RecoveryReport)
        -> (documents: [String: [Found]], olderCopies: [String: Int]) {
        var documents: [String: [Found]] = [:], olderCopies: [String: Int] = [:]
        guard !losing.isEmpty else { return ([:], [:]) }
        for page in pages {
            var sound: [(key: [UInt8], value: [UInt8])] = [], pageFields = Set<String>(), keyed = names
            for (key, value) in page.entries {
                let fits = value.withUnsafeBytes { raw -> [String]? in
                    let reader = BinaryReader(raw)
                    guard (try? reader.checkChecksum()) == true, let root = try? reader.root() else { return nil }
                    return keyed.filter { name in
                        guard let id = try? reader.value(atPath: infos[name]?.idPath ?? "id", from: root) else { return false }
                        return (try? KeyEncoder.key(id, in: reader)) == key
                    }
                }
                guard let fits, case .object(let members)? = try? DocumentValue(encoded: value) else { continue }
                keyed = fits
                pageFields.formUnion(members.map(\.name))
                sound.append((key, value))
            }
            guard !sound.isEmpty, !keyed.isEmpty else { continue }
            let matching = keyed.filter { fields[$0].map { pageFields.isSubset(of: $0) } ?? false }
            let unread = keyed.filter { fields[$0] == nil }
            let owner = keyed.count == 1 ? keyed[0]
                : matching.count == 1 ? matching[0]
                : matching.isEmpty && unread.count == 1 ? unread[0] : nil
            guard let owner else {
                report.unplaced += sound.count
                continue
            }
            guard losing.contains(owner) else { continue }
            // A hole is a range of keys: it holds them all when it holds the first and the last.
            let first = sound.map(\.key).min { $0.lexicographicallyPrecedes($1) } ?? []
            let last = sound.map(\.key).max { $0.lexicographicallyPrecedes($1) } ?? []
            if let holes = holes[owner], !holes.contains(where: { $0.contains(first) && $0.contains(last) }) {
                olderCopies[owner, default: 0] += sound.count
                continue
            }
            documents[owner, default: []] += sound.map { Found(key: $0.key, value: $0.value, newest: false, loose: true) }
        }
        return (documents, olderCopies)
    }

    /// Copies the gathered collections into this new store: catalog entries, documents, then indexes.
    private func copy(_ gathered: [Gathered], catalog: RecoveredCatalog, into report: inout RecoveryReport) throws {
        var builder = StoreBuilder()
        for entry in gathered {
            let name = entry.collection.name
            guard (try? Catalog.validateName(name, what: "collection")) != nil else {
                report.damage.append("a collection named \(name.debugDescription), which cannot be a name, was skipped")
                continue
            }
            var collection = entry.collection
            let info: CollectionInfo
            if let kept = catalog.infos[name] {
                info = kept
            } else if let found = Self.idPath(of: entry.documents, keys: entry.keys) {
                info = CollectionInfo(name: name, idPath: found, indexes: [])
                collection.notes.append("its ids were found at '\(found)': the field that gives each document's key")
            } else {
                info = CollectionInfo(name: name, idPath: "id", indexes: [])
                if !entry.documents.isEmpty {
                    collection.notes.append("no field gives its documents' keys: its ids are taken to be at 'id'")
                }
            }
            // The collection as it was (its ids where they were), then its documents in batches.
            try withWrite { ctx in try builder.begin(info, in: ctx) }
            for start in stride(from: 0, to: entry.documents.count, by: 5_000) {
                let batch = Array(entry.documents[start..<min(start + 5_000, entry.documents.count)])
                let (saved, failures) = try withWrite { ctx in
                    var saved = 0, failures: [String] = []
                    for document in batch {
                        do {
                            try builder.add(document, to: name, replacing: true, in: ctx)
                            saved += 1
                        } catch let error as DocStoreError where error.code != .storeFull {
                            failures.append(error.message)
                        }
                    }
                    return (saved, failures)
                }
                collection.recovered += saved
                collection.damaged += failures.count
                collection.notes += failures.prefix(5).map { "a document not copied: \($0)" }
            }
            // Documents saved under one id replace each other: what the new collection holds is what was recovered.
            let held = try withRead { try Query<DocumentValue>(name).count(in: $0) }
            if held < collection.recovered {
                collection.notes.append("\(collection.recovered - held) documents had the id of another at "
                    + "'\(info.idPath)' and were replaced by it")
                collection.damaged += collection.recovered - held
                collection.recovered = held
            }
            for definition in info.indexes {
                do {
                    try withWrite { try $0.createIndex(definition, in: name) }
                    collection.indexes.append(definition.name)
                } catch let error as DocStoreError {
                    collection.notes.append("index '\(definition.name)' not made again: \(error.message)")
                }
            }
            report.collections.append(collection)
        }
        for filter in catalog.filters where (try? withWrite({ try $0.saveFilter(filter) })) != nil {
            report.savedFilters += 1
        }
        try withWrite { ctx in
            for migration in catalog.migrations { try ctx.scope.catalog.setMigration(migration) }
            if let known = catalog.knownMigrations { try ctx.scope.catalog.setKnownMigrations(known) }
        }
    }
}
