/// What ``DocStore/verify()`` found.
///
/// For example:
/// ```swift
/// let report = try await store.verify()
/// if !report.isClean { print(report) }   // one line per problem, naming collection, index and document
/// ```
public struct VerificationReport: Sendable, CustomStringConvertible {
    public struct Problem: Sendable, CustomStringConvertible {
        public enum Kind: String, Sendable {
            /// An index entry whose document does not exist.
            case entryWithoutDocument = "entry without document"
            /// An index entry that the document's current values do not produce.
            case staleEntry = "stale entry"
            /// A document missing one of the entries its values produce.
            case documentWithoutEntry = "document without entry"
            /// A document whose bytes are not a valid document.
            case corruptDocument = "corrupt document"
            /// A document that is valid but does not decode as the collection's Swift type.
            case undecodableDocument = "undecodable document"
            /// A page of the file that is not what the storage's structure needs (a page number past the end, a
            /// loop, a node outside its page, counts that disagree): found before anything is read through LMDB.
            case damagedFile = "damaged file"
        }
        public let kind: Kind
        public let collection: String
        public let index: String?
        /// The document's id as JSON text, or its key in hex when the document cannot be read.
        public let document: String
        public let detail: String

        public var description: String {
            if kind == .damagedFile { return "\(kind.rawValue): " + (collection.isEmpty ? "" : "collection '\(collection)', ") + detail }
            return "\(kind.rawValue): collection '\(collection)'" + (index.map { ", index '\($0)'" } ?? "")
                + ", document \(document)" + (detail.isEmpty ? "" : ": \(detail)")
        }
    }

    public internal(set) var problems: [Problem] = []
    /// Things worth knowing that are not damage: indexes kept in the catalog but no longer declared by a type.
    public internal(set) var notices: [String] = []
    public internal(set) var collectionsChecked = 0
    public internal(set) var documentsChecked = 0
    public internal(set) var entriesChecked = 0
    /// Pages of the file read by the structural check.
    public internal(set) var pagesChecked = 0
    /// Indexes whose entries were looked up one by one: their counts or sums differed from their documents', or a
    /// document could not be read.
    var indexesLookedUp = 0

    /// No problem found.
    public var isClean: Bool { problems.isEmpty }

    public var description: String {
        var lines = ["verified " + (pagesChecked > 0 ? "\(pagesChecked) pages, " : "") + "\(collectionsChecked) collections, \(documentsChecked) documents, "
            + "\(entriesChecked) index entries: " + (isClean ? "no problems" : "\(problems.count) problems")]
        lines += problems.map { "  \($0)" }
        lines += notices.map { "  note: \($0)" }
        return lines.joined(separator: "\n")
    }
}

extension DocStore {
    /// Reads the structure of the store file at `path` without opening it and without trusting it (as
    /// ``Options/checkFile`` does before opening): every page in use, with each page number, offset and length
    /// checked before use. The report holds ``VerificationReport/Problem/Kind-swift.enum/damagedFile`` problems and
    /// the pages read; documents and index entries are for ``verify()``.
    ///
    /// A file that another process writes meanwhile is looked at again when damage is seen while it changed, and
    /// reported clean if it never stood still.
    public static func checkFile(at path: String) -> VerificationReport {
        var (damage, pages) = FileStorage.check(path: path)
        if damage.isEmpty && pages == 0 && !FileStorage.holdsMetaPage(path) {
            // (No meta page holds LMDB's magic number: nothing was read, which is no clean store.)
            damage = [StorageDamage(page: nil, space: "", message: "'\(path)' is not a store's file: neither of its "
                + "first two pages is an LMDB meta page (the file is empty, cut short, wholly damaged, or another "
                + "kind of file)")]
        }
        var report = VerificationReport()
        report.pagesChecked = pages
        report.problems = damage.map(VerificationReport.Problem.init(damage:))
        if FileStorage.writeLogNeedsApplying(path: path) {
            report.notices.append("the machine stopped while the last commits were on their way to the disk: their "
                + "record is in \(path)-log, which an opening applies first, so the file's pages are not yet the "
                + "store's; open the store writable once, then check it")
        }
        return report
    }

    /// Checks every collection: each document is valid, has the checksum it was written with (so that a changed
    /// byte inside a value is found), decodes as its Swift type (for types used with this store), and has every
    /// index entry its values produce; and every index entry belongs to a document that produces it (index entries
    /// have no checksum of their own: this comparison with the documents is their check).
    ///
    /// The entries are compared as wholes: the documents' entries and the index's own, each set counted and summed
    /// by a hash seeded afresh for each check, the index read once in key order. Only an index whose count or sum
    /// differs is looked at entry by entry, to name each document without its entry and each entry without its
    /// document. (Two different sets give the same sum by a chance of one in 2⁶⁴.)
    ///
    /// First it reads the file's structure without trusting it (every page number, offset and length checked before
    /// use): a damaged file is reported, with the page and what is wrong, and nothing more is read, so that
    /// `verify()` never goes through a damaged page into LMDB.
    ///
    /// It reads the whole store in one read transaction; writers are not blocked. A collection's documents are
    /// split among the store's scan threads (``Options/scanThreads``), and the report is the one a single thread
    /// makes. A cancelled task stops it with `CancellationError`.
    ///
    /// A store kept on a server (DocStorePostgres) has no file to read: there the structural check is the server's
    /// own (PostgreSQL's `amcheck`), and `verify()` checks the documents, the index entries and their counts.
    public func verify() throws -> VerificationReport {
        try checkOpen()
        var report = VerificationReport()
        if let file = core.file {
            let structure = try mapErrors { try file.read { file.checkStructure(holding: $0) } }
            report.pagesChecked = structure.pages
            guard structure.damage.isEmpty else {
                report.problems = structure.damage.map(VerificationReport.Problem.init(damage:))
                return report
            }
        }
        return try withRead { [report] context in
            var report = report
            for name in try context.collections().map(\.name) {
                guard let handle = try context.scope.handle(named: name) else { continue }
                report.collectionsChecked += 1
                let seed = UInt64.random(in: .min ... .max)
                let produced = try verifyDocuments(of: handle, in: context.txn, seed: seed, into: &report)
                for (i, index) in handle.indexes.enumerated() {
                    // The index holds exactly the entries the documents produce when it has as many, summed alike
                    // (``EntrySum``). Otherwise each entry is looked up, to name what is missing or extra.
                    if let sum = produced[i], try context.txn.entryCount(index.database) == sum.count,
                       try EntrySum(of: index.database, in: context.txn, seed: seed) == sum {
                        report.entriesChecked += sum.count
                    } else {
                        report.indexesLookedUp += 1
                        try findMissingEntries(of: index, in: handle, txn: context.txn, into: &report)
                        try verifyEntries(of: index, in: handle, txn: context.txn, into: &report)
                    }
                }
                let extras = core.withState { core.declared[name] }.map { StoreCore.undeclared(in: handle.info, by: $0) } ?? []
                for extra in extras {
                    report.notices.append("collection '\(name)' keeps \(extra), which its type no longer declares; "
                        + "dropIndex removes it")
                }
            }
            return report
        }
    }

    /// Checks each document. Returns, per index, the sum of the entries the documents produce, or `nil` when a
    /// document could not be read.
    private func verifyDocuments(of handle: CollectionHandle, in txn: any StorageTransaction, seed: UInt64,
                                 into report: inout VerificationReport) throws -> [EntrySum?] {
        let checker = core.withState { core.typeCheckers[handle.name] }
        let indexes = handle.indexes
        let shapes = indexes.map { ($0.definition.kind, $0.paths) }
        // A document of format 3 is read with its shape wherever this process met it; its record must also be in
        // the catalog, for the processes that meet it there.
        let recorded = Set(try core.catalog(txn).shapes().shapes.map(\.id))
        /// One document's checks, on whichever thread runs them.
        let check = { (tally: inout DocumentTally, rawKey: UnsafeRawBufferPointer, rawValue: UnsafeRawBufferPointer) throws in
            tally.checked += 1
            // Stopped like a long query (a shell's Ctrl-C); only the caller's own thread is in its task.
            if tally.checked & 4095 == 0 && WriteCancellation.isCancelled { throw CancellationError() }
            func problem(_ kind: VerificationReport.Problem.Kind, index: String? = nil, _ detail: String) {
                tally.problems.append(.init(kind: kind, collection: handle.name, index: index,
                    document: CollectionHandle.describeID(Array(rawKey), in: Array(rawValue), idPath: handle.info.idPath),
                    detail: detail))
            }
            do {
                let reader = BinaryReader(rawValue)
                let root = try reader.root()
                if try !reader.checkChecksum() { tally.unchecked += 1 }
                if root.tag == BinaryFormat.Tag.shaped {
                    let id = reader.load(UInt64.self, at: root.start)
                    if !recorded.contains(id) {
                        problem(.corruptDocument, "its shape \(Catalog.hex(id)) is not recorded in the catalog: another "
                            + "process cannot read it")
                    }
                }
                try DocumentValue.check(reader: reader, ref: root)
                for (i, (kind, paths)) in shapes.enumerated() where tally.produced[i] != nil {
                    try IndexKeys.forEachKey(kind: kind, paths: paths, reader: reader, root: root,
                                             encoder: &tally.encoder) {
                        tally.produced[i]?.add(key: $0, value: rawKey, seed: seed)
                    }
                }
            } catch let error as MalformedDocument {
                problem(.corruptDocument, "\(error)")
                tally.produced = tally.produced.map { _ in nil }   // its entries cannot be known
            }
            if let checker {
                do {
                    try checker(rawValue)
                } catch let error as DecodingError {
                    let (field, reason) = DecodingFailure.describe(error)
                    problem(.undecodableDocument, "field '\(field)': \(reason)")
                } catch where error is MalformedDocument || (error as? DocStoreError)?.code == .corruptDocument {
                    // reported above
                }
            }
        }
        // Split among the scan's threads like a full scan (each part in id order, the parts in turn), or alone.
        var tally = DocumentTally(indexes: indexes.count)
        let start = { DocumentTally(indexes: indexes.count) }
        if let parts = try ParallelScan(txn: txn, documents: handle.documents, settings: core.scan).run(
            residual: { Residual(.constant(true), handle: handle, statistics: $0) }, statistics: StatisticsBox(),
            start: start, add: { try check(&$0, $1.id, $1.document) }) {
            for part in parts { tally.add(part) }
        } else {
            try txn.forEachEntry(in: handle.documents) { try check(&tally, $0, $1) }
        }
        report.documentsChecked += tally.checked
        report.problems += tally.problems
        if tally.unchecked > 0 {
            report.notices.append("collection '\(handle.name)' has \(tally.unchecked) documents written before documents "
                + "had checksums: only their structure was checked (each gets one when it is saved again)")
        }
        return tally.produced
    }

    /// What the documents of a collection (or one thread's share of them) gave ``verifyDocuments(of:in:seed:into:)``.
    private struct DocumentTally {
        var checked = 0
        /// Documents without a checksum.
        var unchecked = 0
        var problems: [VerificationReport.Problem] = []
        /// Per index, the entries the documents produce; `nil` once a document could not be read.
        var produced: [EntrySum?]
        /// Room for a document's keys, kept from one to the next.
        var encoder = KeyEncoder(capacity: 64)

        init(indexes: Int) { produced = Array(repeating: EntrySum(), count: indexes) }

        mutating func add(_ other: DocumentTally) {
            checked += other.checked
            unchecked += other.unchecked
            problems += other.problems
            produced = zip(produced, other.produced).map { a, b in a.flatMap { a in b.map { a + $0 } } }
        }
    }

    /// Names each document missing an entry of `index` (looked up one by one: the sums of the index and of the
    /// documents differed).
    private func findMissingEntries(of index: CollectionHandle.Index, in handle: CollectionHandle,
                                    txn: any StorageTransaction, into report: inout VerificationReport) throws {
        try txn.withPassingCursor(index.database) { cursor in
            var checked = 0
            try txn.forEachEntry(in: handle.documents) { rawKey, rawValue in
                checked += 1
                if checked & 4095 == 0 && WriteCancellation.isCancelled { throw CancellationError() }
                let id = Array(rawKey)
                // A document that cannot be read, or fails its checksum or its structure, was reported by the
                // documents' check; keys made from its bytes would name entries it never had.
                let reader = BinaryReader(rawValue)
                guard let root = try? reader.root(), (try? reader.checkChecksum()) != nil,
                      (try? DocumentValue.check(reader: reader, ref: root)) != nil,
                      let keys = try? IndexKeys.keys(of: index, reader: reader, root: root) else { return }
                for key in keys {
                    let present = try index.isUnique
                        ? txn.copiedValue(index.database, key) == id
                        : cursor.contains(key: key, value: id)
                    if !present {
                        report.problems.append(.init(kind: .documentWithoutEntry, collection: handle.name,
                            index: index.definition.name,
                            document: CollectionHandle.describeID(id, in: Array(rawValue), idPath: handle.info.idPath),
                            detail: "no entry for \(IndexKeys.describe(index.definition, reader: reader, root: root))"))
                    }
                }
            }
        }
    }

    private func verifyEntries(of index: CollectionHandle.Index, in handle: CollectionHandle, txn: any StorageTransaction,
                               into report: inout VerificationReport) throws {
        // A document's keys, worked out once however many entries it has (an array of 800 tags has 800).
        var keysOf: [[UInt8]: Set<[UInt8]>] = [:]
        try txn.forEachEntry(in: index.database) { rawKey, rawValue in
            report.entriesChecked += 1
            if report.entriesChecked & 4095 == 0 && WriteCancellation.isCancelled { throw CancellationError() }
            let key = Array(rawKey)
            let id = Array(rawValue)
            guard let document = try txn.copiedValue(handle.documents, id) else {
                report.problems.append(.init(kind: .entryWithoutDocument, collection: handle.name,
                    index: index.definition.name, document: CollectionHandle.hex(id),
                    detail: "entry \(CollectionHandle.hex(key))"))
                return
            }
            let produced = keysOf[id] ?? Set((try? document.withUnsafeBytes { raw -> [[UInt8]] in
                let reader = BinaryReader(raw)
                return try IndexKeys.keys(of: index, reader: reader, root: try reader.root())
            }) ?? [])
            keysOf[id] = produced
            guard !produced.contains(key) else { return }
            report.problems.append(.init(kind: .staleEntry, collection: handle.name, index: index.definition.name,
                document: CollectionHandle.describeID(id, in: document, idPath: handle.info.idPath),
                detail: "entry \(CollectionHandle.hex(key)) does not match the document's values"))
        }
    }
}

/// A set of index entries as one count and one sum: each entry (key and value) hashed with a seed drawn for the
/// check, the hashes added. Two sets that differ give different sums but for a chance of 2⁻⁶⁴, whatever differs and
/// wherever, so an index is compared with its documents by one walk in key order, with no look-up per entry.
struct EntrySum: Equatable {
    var count = 0
    var sum: UInt64 = 0

    init() {}

    /// The sum of every entry of `space`.
    init(of space: KeySpace, in txn: any StorageTransaction, seed: UInt64) throws {
        try txn.forEachEntry(in: space) {
            add(key: $0, value: $1, seed: seed)
            if count & 4095 == 0 && WriteCancellation.isCancelled { throw CancellationError() }
        }
    }

    mutating func add(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, seed: UInt64) {
        var hasher = Hasher()
        hasher.combine(seed)
        hasher.combine(key.count)   // so that bytes moved from the key to the value change the hash
        hasher.combine(bytes: key)
        hasher.combine(bytes: value)
        count += 1
        sum &+= UInt64(UInt(bitPattern: hasher.finalize()))
    }

    mutating func add(key: [UInt8], value: UnsafeRawBufferPointer, seed: UInt64) {
        key.withUnsafeBytes { add(key: $0, value: value, seed: seed) }
    }

    static func + (a: EntrySum, b: EntrySum) -> EntrySum {
        var total = a
        total.count += b.count
        total.sum &+= b.sum
        return total
    }
}

extension VerificationReport.Problem {
    /// Damage the structural check found, named by collection where its key space is one's.
    init(damage: StorageDamage) {
        self.init(kind: .damagedFile, collection: Catalog.collectionName(ofKeySpace: damage.space) ?? "", index: nil,
                  document: "", detail: Catalog.describe(damage))
    }
}
