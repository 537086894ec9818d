import Foundation

/// What ``DocStore/recover(from:to:)`` copied into the new store, and what it could not.
///
/// For example:
/// ```swift
/// let report = try await DocStore.recover(from: "damaged.db", to: "recovered.db")
/// print(report)   // per collection: documents copied and lost, indexes rebuilt; then the damage met
/// ```
public struct RecoveryReport: Sendable, CustomStringConvertible {
    public struct Collection: Sendable {
        public let name: String
        /// Documents copied into the new store.
        public internal(set) var recovered = 0
        /// Documents found damaged (their bytes are not a document, or not the ones their checksum was made of).
        public internal(set) var damaged = 0
        /// Documents the damaged file counted but whose pages could not be read: `nil` when its count is lost too.
        public internal(set) var unreachable: Int?
        /// Indexes made again from the recovered documents.
        public internal(set) var indexes: [String] = []
        /// What went wrong for this collection: an index that could not be made again, a lost catalog entry.
        public internal(set) var notes: [String] = []

        /// Documents of the damaged file not in the new store, as far as can be known.
        public var lost: Int { damaged + (unreachable ?? 0) }
    }

    public internal(set) var collections: [Collection] = []
    public internal(set) var savedFilters = 0
    /// The damage met while reading the file: each page skipped, and why.
    public internal(set) var damage: [String] = []
    /// What `verify()` says of the new store.
    public internal(set) var verification: VerificationReport?

    /// Whether every document the damaged file counted was copied.
    public var lostNothing: Bool { collections.allSatisfy { $0.lost == 0 && $0.unreachable != nil } }

    public var description: String {
        var lines: [String] = []
        for c in collections {
            var line = "collection '\(c.name)': \(c.recovered) documents recovered"
            if c.damaged > 0 { line += ", \(c.damaged) damaged and lost" }
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
        if !damage.isEmpty {
            lines.append("damage met (\(damage.count)):")
            lines += damage.prefix(20).map { "  \($0)" }
            if damage.count > 20 { lines.append("  ... and \(damage.count - 20) more") }
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
    /// before it is copied. Index entries are not copied: the indexes are made again from the recovered documents.
    /// The new store is checked with ``verify()`` before this returns. The damaged file is not changed.
    ///
    /// - Throws: ``DocStoreError/Code/alreadyExists`` when `path` exists, ``DocStoreError/Code/notAStore`` when
    ///   `damaged` is not a store's file (or cannot be read).
    public static func recover(from damaged: String, to path: String) async throws -> RecoveryReport {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw DocStoreError(.alreadyExists, "cannot recover into \(path): it exists; recovery makes a new store")
        }
        let documentsPrefix = StoreCore.documentsName("")
        guard let salvage = LMDBFileCheck.salvage(path: damaged, databases: {
            $0 == StoreCore.metaName || $0.hasPrefix(documentsPrefix)
        }) else {
            throw DocStoreError(.notAStore, "cannot recover \(damaged): it cannot be read, or is not a DocStore store")
        }
        var report = RecoveryReport()
        report.damage = salvage.damage.map(StoreCore.describe)

        // The catalog: collections by name, and saved filters.
        var infos: [String: CollectionInfo] = [:]
        var filters: [SavedFilter] = []
        var migrations: [(key: [UInt8], value: [UInt8])] = []
        let collectionPrefix = StoreCore.catalogKey(""), filterPrefix = StoreCore.filterKey("")
        for (key, value) in salvage.databases[StoreCore.metaName] ?? [] {
            if key.starts(with: collectionPrefix) {
                if let info = try? DocumentDecoder().decode(CollectionInfo.self, from: value) { infos[info.name] = info }
            } else if key.starts(with: filterPrefix) {
                if let filter = try? DocumentDecoder().decode(SavedFilter.self, from: value) { filters.append(filter) }
            } else if key.starts(with: StoreCore.migrationKey("")) || key == StoreCore.knownMigrationsKey {
                // The migrations the store had applied: a recovered store is not migrated again.
                migrations.append((key, value))
            }
        }
        var names = Set(infos.keys)
        for space in salvage.databases.keys {
            if let name = StoreCore.collectionName(ofKeySpace: space) { names.insert(name) }
        }

        let store = try await DocStore(path: path)
        do {
            try await store.copy(names: names.sorted(), infos: infos, filters: filters, from: salvage, into: &report)
            try await store.write { [migrations] ctx in
                for (key, value) in migrations { try ctx.txn.put(ctx.scope.core.meta, key, value) }
            }
            report.verification = try await store.verify()
        } catch {
            await store.close()
            throw error
        }
        await store.close()
        return report
    }

    /// Copies the collections `names` of `salvage` into this new store: catalog entries, documents, then indexes.
    private func copy(names: [String], infos: [String: CollectionInfo], filters: [SavedFilter],
                      from salvage: LMDBFileCheck.Salvage, into report: inout RecoveryReport) throws {
        let orphans = DocStore.attribute(salvage.orphans, among: names, infos: infos, salvage: salvage,
                                         into: &report)
        for name in names {
            guard (try? StoreCore.validateName(name, what: "collection")) != nil else {
                report.damage.append("a collection named \(name.debugDescription), which cannot be a name, was skipped")
                continue
            }
            var collection = RecoveryReport.Collection(name: name)
            let info = infos[name] ?? CollectionInfo(name: name, idPath: "id", indexes: [])
            if infos[name] == nil {
                collection.notes.append("its catalog entry was lost: its ids are taken to be at 'id', and its "
                    + "indexes (if it had any) are not made again")
            }
            let space = StoreCore.documentsName(name)
            var entries = salvage.databases[space] ?? []
            if salvage.databases[space] == nil { collection.notes.append("its documents could not be found") }
            let found = entries.count
            if let extra = orphans[name], !extra.isEmpty {
                let known = Set(entries.map(\.key))
                let added = extra.filter { !known.contains($0.key) }
                entries += added
                collection.notes.append("\(added.count) documents found on pages cut off from the collection's tree")
            }
            var documents: [DocumentValue] = []
            for (_, value) in entries {
                do {
                    _ = try value.withUnsafeBytes { try BinaryReader($0).checkChecksum() }
                    documents.append(try DocumentValue(encoded: value))
                } catch {
                    collection.damaged += 1
                }
            }
            if let recorded = salvage.recordedEntries[space], recorded >= UInt64(found), salvage.databases[space] != nil {
                collection.unreachable = max(0, Int(recorded) - entries.count)
            }
            // The collection as it was (its ids where they were), then its documents in batches.
            try withWrite { ctx in
                try ctx.scope.core.writeInfo(CollectionInfo(name: name, idPath: info.idPath, indexes: []), in: ctx.txn)
            }
            var start = 0
            while start < documents.count {
                let batch = Array(documents[start..<min(start + 5_000, documents.count)])
                start += batch.count
                let (saved, failures) = try withWrite { ctx in
                    var saved = 0, failures: [String] = []
                    for document in batch {
                        do {
                            try ctx.save(document, into: name)
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
        for filter in filters where (try? withWrite({ try $0.saveFilter(filter) })) != nil {
            report.savedFilters += 1
        }
    }

    /// The entries of pages no tree reaches that are sound documents of one collection: of one whose tree lost
    /// documents, and whose id (at that collection's id path) is the entry's key. Entries that fit none, or several,
    /// are counted in the report's damage.
    private static func attribute(_ orphans: [(key: [UInt8], value: [UInt8])], among names: [String],
                                  infos: [String: CollectionInfo], salvage: LMDBFileCheck.Salvage,
                                  into report: inout RecoveryReport) -> [String: [(key: [UInt8], value: [UInt8])]] {
        let losing = names.filter { name in
            let space = StoreCore.documentsName(name)
            return (salvage.recordedEntries[space] ?? 0) > UInt64(salvage.databases[space]?.count ?? 0)
        }
        var byCollection: [String: [(key: [UInt8], value: [UInt8])]] = [:]
        var unplaced = 0
        for orphan in orphans {
            // A sound document (index entries, catalog entries and the like are not), keyed by its own id.
            let owners = orphan.value.withUnsafeBytes { raw -> [String]? in
                let reader = BinaryReader(raw)
                guard (try? reader.checkChecksum()) != nil, let root = try? reader.root() else { return nil }
                return losing.filter { name in
                    guard let id = try? reader.value(atPath: infos[name]?.idPath ?? "id", from: root) else { return false }
                    return (try? KeyEncoder.key(id, in: reader)) == orphan.key
                }
            }
            guard let owners else { continue }
            if owners.count == 1 { byCollection[owners[0], default: []].append(orphan) } else { unplaced += 1 }
        }
        if unplaced > 0 {
            report.damage.append("\(unplaced) documents on pages no tree reaches could not be placed in one collection "
                + "that lost documents, and were left out")
        }
        return byCollection
    }
}
