import Foundation
import Synchronization

/// An open collection: its catalog entry and the LMDB databases of its documents and indexes.
///
/// Handles are owned by the store actor and used only inside its transactions.
final class CollectionHandle {
    struct Index {
        let definition: IndexDefinition
        let database: KeySpace
        /// The definition's field paths, laid out for look-ups (``IndexKeys/keys(of:reader:root:)``).
        let paths: [CompiledPath]
        var isUnique: Bool { definition.kind == .unique }

        init(definition: IndexDefinition, database: KeySpace) {
            self.definition = definition
            self.database = database
            paths = definition.fields.map(CompiledPath.init)
        }
    }

    let info: CollectionInfo
    let documents: KeySpace
    let indexes: [Index]
    /// The latest catalog generation at which ``info`` was found to be the collection's catalog entry; `nil` until
    /// the store keeps the handle. At another generation the entry is read again, and the handle serves on if it is
    /// unchanged: its databases are opened by name, so a collection another process dropped and made again alike
    /// is read through the same handles.
    var checkedGeneration: UInt64?
    /// Whether a document is checked against its checksum before it is decoded (``DocStore/Options/checkChecksums``).
    let checksChecksums: Bool
    /// The plans of this collection's requests, by shape.
    let plans = PlanCache()
    /// The definitions of ``indexes``, as the planner reads them.
    let indexDefinitions: [IndexDefinition]

    /// The shape a document is written under, given its field names (``StoreCore/shapeID(for:in:)``); `nil` where
    /// documents are written in format 2.
    private let shapeID: ((BinaryFormat.Names, any StorageTransaction) throws -> UInt64?)?
    /// The salt of the store's shape ids (``DocumentShape/id(of:salt:)``).
    private let shapeSalt: UInt64

    init(info: CollectionInfo, documents: KeySpace, indexes: [Index], checksChecksums: Bool, shapeSalt: UInt64? = nil,
         shapeID: ((BinaryFormat.Names, any StorageTransaction) throws -> UInt64?)? = nil) {
        self.info = info
        self.documents = documents
        self.indexes = indexes
        self.indexDefinitions = indexes.map(\.definition)
        self.checksChecksums = checksChecksums
        self.shapeSalt = shapeSalt ?? 0
        self.shapeID = shapeSalt == nil ? nil : shapeID
    }

    /// A document as this collection stores it: in format 3 where the store writes shapes, else as it is (and as
    /// it is when its root is not an object, or malformed: the write then refuses it as before). `shapes` keeps the
    /// shapes found for the documents of one call, in one transaction: each is looked up in the catalog once.
    func storable(_ bytes: [UInt8], in txn: any StorageTransaction, shapes: inout [UInt64: UInt64?]) throws -> [UInt8] {
        guard let shapeID else { return bytes }
        if bytes.first == BinaryFormat.shapedVersion { return try recorded(bytes, in: txn, shapes: &shapes) }
        let shaped: [UInt8]?
        do {
            shaped = try bytes.withUnsafeBytes { raw in
                try BinaryFormat.shaped(raw, salt: shapeSalt) { names in
                    if let found = shapes[names.id],
                       found == nil || ShapeTable.shape(names.id)?._withUnsafeGuaranteedRef({ $0.hasNames(names.bytes) }) == true {
                        return found
                    }
                    let found = try shapeID(names, txn)
                    shapes[names.id] = found
                    return found
                }
            }
        } catch is MalformedDocument {
            return bytes
        }
        return shaped ?? bytes
    }

    /// A document of format 3 (as the encoder writes one) as this collection stores it: as it is once its shape is
    /// recorded; else written again from format 2, under this store's id for its names (it was shaped for another
    /// store), or in format 2 (the store records no more shapes). One whose shape this process does not know is
    /// kept as it is, for the write to refuse.
    private func recorded(_ bytes: [UInt8], in txn: any StorageTransaction, shapes: inout [UInt64: UInt64?]) throws
        -> [UInt8] {
        guard let shapeID, bytes.count > BinaryFormat.shapedHeaderSize else { return bytes }
        let id = UInt64(littleEndian: bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 1, as: UInt64.self) })
        let found: UInt64?
        if let known = shapes[id] {
            found = known
        } else {
            guard let shape = ShapeTable.shape(id)?.takeUnretainedValue() else { return bytes }
            found = try shapeID(BinaryFormat.Names(bytes: (0..<shape.count).map { shape.name($0) }, id: id), txn)
            shapes[id] = found
        }
        guard found != id else { return bytes }
        return try storable(bytes.withUnsafeBytes { try BinaryFormat.unshaped($0) }, in: txn, shapes: &shapes)
    }

    /// ``storable(_:in:shapes:)`` for one document. `stored`, the document's present bytes when it replaces them:
    /// a document of format 3 under their shape is stored as it is, with no look-up (a shape a stored document
    /// names is recorded), as a patch of it or an encode of its model nearly always is.
    func storable(_ bytes: [UInt8], in txn: any StorageTransaction, replacing stored: [UInt8]? = nil) throws
        -> [UInt8] {
        if let stored, CollectionHandle.sameShape(bytes, stored) { return bytes }
        var shapes: [UInt64: UInt64?] = [:]
        return try storable(bytes, in: txn, shapes: &shapes)
    }

    /// Whether two documents are both in format 3 under one shape: the first is then stored as it is, its shape
    /// recorded already.
    static func sameShape(_ bytes: [UInt8], _ stored: [UInt8]) -> Bool {
        bytes.count > BinaryFormat.shapedHeaderSize && stored.count > BinaryFormat.shapedHeaderSize
            && bytes[0] == BinaryFormat.shapedVersion && stored[0] == BinaryFormat.shapedVersion
            && bytes[1...8].elementsEqual(stored[1...8])
    }

    var name: String { info.name }

    // MARK: Ids

    /// Thrown before a document is written whose id's key has another length than its collection keeps
    /// (``CollectionInfo/idWidth``): the write is run again once the collection keeps ids of any length
    /// (``TransactionScope/widenIDs(of:)``).
    struct IDWidthChange: Error, CustomStringConvertible {
        let collection: String
        var description: String {
            "collection '\(collection)' keeps its ids at one length in its indexes, and a write has an id of another "
                + "length: the write must run again once the collection keeps ids of any length"
        }

        /// The error when the write met it again once the collection was made to keep ids of any length.
        var stillMet: DocStoreError {
            DocStoreError(.storage, "\(self), and it met it again after that", collection: collection)
        }
    }

    /// The primary key of an id value.
    static func idKey<ID: Encodable>(_ id: ID, collection: @autoclosure () -> String) throws -> [UInt8] {
        // The commonest id types straight to their key (the encoded id's key, byte for byte), with no encoding.
        switch id {
        case let i as Int: return KeyEncoder.key(.int(Int64(i)))
        case let i as Int64: return KeyEncoder.key(.int(i))
        case let u as UUID: return KeyEncoder.key(.uuid(u))
        case let s as String: return try checkedIDKey(KeyEncoder.key(.string(s)), collection: collection())
        default: break
        }
        let bytes: [UInt8]
        do { bytes = try DocumentEncoder().encode(id) } catch {
            throw DocStoreError(.encodingFailed, "cannot encode id \(id) of collection '\(collection())': \(error)",
                                collection: collection())
        }
        return try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            return try checkedIDKey(KeyEncoder.key(try reader.root(), in: reader), collection: collection())
        }
    }

    /// An id's key, refused when LMDB could not store it.
    private static func checkedIDKey(_ key: [UInt8], collection: String) throws -> [UInt8] {
        guard key.count <= IndexKeys.maximumKeySize else {
            throw DocStoreError(.valueTooLarge, "an id of collection '\(collection)' is \(key.count) bytes "
                + "encoded; ids are limited to \(IndexKeys.maximumKeySize)", collection: collection)
        }
        return key
    }

    /// The primary key of the document whose root is `root`.
    func idKey(reader: BinaryReader, root: ValueRef) throws -> [UInt8] {
        guard let ref = try reader.value(atPath: info.idPath, from: root), ref.tag != BinaryFormat.Tag.null else {
            throw DocStoreError(.invalidSchema, "a document of collection '\(name)' has no id at '\(info.idPath)'",
                                collection: name)
        }
        let key = try CollectionHandle.checkedIDKey(KeyEncoder.key(ref, in: reader), collection: name)
        if let width = info.idWidth, key.count != width { throw IDWidthChange(collection: name) }
        return key
    }

    /// An id for a new document that has none: the next integer after the greatest number among the ids (1 when
    /// the collection is empty), or a new UUID string when no id is a number. Read in the write transaction that
    /// stores the document, so no other writer can choose it too.
    ///
    /// `hint` is the integer chosen after the last one this transaction gave: it is taken, after one look-up, when
    /// no id of the collection is a number as great, so that an import of many documents decodes no document.
    func newID(in txn: any StorageTransaction, hint: Int64?) throws -> DocumentValue {
        try txn.withCursor(documents) { cursor -> DocumentValue in
            if let hint {
                let entry = try cursor.seek(atLeast: KeyEncoder.key(.int(hint)))
                if entry.map({ $0.key.first != KeyEncoder.Kind.number }) ?? true { return .int(hint) }
            }
            // Numbers sort together, before every later kind: the greatest is the entry before the first key past them.
            let entry = try cursor.seek(atLeast: [KeyEncoder.Kind.number + 1]) != nil ? try cursor.previous()
                : try cursor.last()
            guard let (key, value) = entry, key.first == KeyEncoder.Kind.number else {
                return try txn.entryCount(documents) == 0 ? .int(1) : .string(UUID().uuidString.lowercased())
            }
            let greatest = try DocumentValue(encoded: Array(value))[path: info.idPath]
            let next: Int64?
            switch greatest {
            case .int(let i)?: next = i == .max ? nil : i + 1
            case .double(let d)? where abs(d) < 9.2e18: next = Int64(d.rounded(.down)) + 1
            default: next = nil   // past Int64's range: integers ran out
            }
            return next.map(DocumentValue.int) ?? .string(UUID().uuidString.lowercased())
        }
    }

    /// Bytes as hexadecimal, for messages: `0x01ff`.
    static func hex<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        "0x" + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// Text for an id in messages.
    static func describeID(_ idKey: [UInt8], in bytes: [UInt8]?, idPath: FieldPath) -> String {
        guard let bytes, let value = try? DocumentValue(encoded: bytes), let id = value[path: idPath] else {
            // A document that cannot be read is named by its key, which gives its id back for most kinds of id.
            if let id = KeyEncoder.exactValue(ofKey: idKey, numbers: true) { return id.plainJSON() }
            return "with key " + idKey.map { String($0, radix: 16) }.joined()
        }
        return id.plainJSON()
    }

    // MARK: Rewrites

    /// What a rewrite makes of a document.
    enum Rewrite {
        /// Leaves it as it is.
        case keep
        /// Writes these bytes in its place; nothing is written when they are the stored bytes.
        case replace([UInt8])
        /// Deletes it.
        case delete
    }

    /// Rewrites document `id` (whose bytes the caller may have read: `stored`) with what `change` makes of its
    /// bytes, keeping every index right; `false` when there is no such document. The one way an update and a
    /// migration change a stored document: new bytes are compared with the stored ones as bytes (`==` on values
    /// would call a NaN changed and -0.0 the same as 0), and must keep the document's id; `idChanged` makes the
    /// error when they do not, given how the new document is named (its id, or `nil` when it has none) and why.
    ///
    /// `change` may write (an update's closure and a migration's step may write through their context): the
    /// document may then have changed or gone, and the new bytes replace it as it is by then, its index entries
    /// with it.
    @discardableResult
    func rewrite(id: [UInt8], stored given: [UInt8]? = nil, in txn: any StorageTransaction,
                 idChanged: (_ newID: String?, _ why: String) -> DocStoreError,
                 _ change: (UnsafeRawBufferPointer) throws -> Rewrite) throws -> Bool {
        guard let stored = try given ?? txn.copiedValue(documents, id) else { return false }
        let changes = txn.changes
        let rewritten = try stored.withUnsafeBytes { try change($0) }
        let changedMeanwhile = txn.changes != changes
        let bytes: [UInt8]
        switch rewritten {
        case .keep: return true
        case .delete: return try delete(id: id, in: txn)
        case .replace(let new): bytes = try storable(new, in: txn, replacing: stored)
        }
        guard !bytes.withUnsafeBytes({ $0.sameBytes(as: stored) }) else { return true }
        let newID: [UInt8]
        do {
            newID = try bytes.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                return try idKey(reader: reader, root: try reader.root())
            }
        } catch let error as DocStoreError where error.code == .invalidSchema {
            throw idChanged(nil, error.message)
        } catch is IDWidthChange {
            // An id of another length than the collection's: not this document's.
            throw idChanged(CollectionHandle.describeID([], in: bytes, idPath: info.idPath), "")
        }
        guard newID == id else {
            throw idChanged(CollectionHandle.describeID(newID, in: bytes, idPath: info.idPath), "")
        }
        let current = changedMeanwhile ? try txn.copiedValue(documents, id) : stored
        try write(bytes, mode: .save, in: txn, stored: current)
        return true
    }

    // MARK: Writes

    enum WriteMode { case insert, save }

    /// A model encoded as a document of this collection; a failure names the type and the collection.
    func encoded<T: Encodable>(_ document: T, last: LastShape? = nil) throws -> [UInt8] {
        try CollectionHandle.encoded(document, for: name, shapedWith: shapeID == nil ? nil : shapeSalt, last: last)
    }

    /// Many models encoded, on every core when they are 2,048 or more; the first failure is thrown.
    static func encoded<T: Encodable & Sendable>(_ documents: [T], for collection: String, shapedWith salt: UInt64?)
        throws -> [[UInt8]] {
        try SlicedWork.results(documents.count, threads: ProcessInfo.processInfo.activeProcessorCount, unit: 1024,
                               least: 2048, start: LastShape.init) { last, i in
            try encoded(documents[i], for: collection, shapedWith: salt, last: last)
        }.map { try $0.get() }
    }

    /// A model encoded as a document of `collection`, which needs no transaction: a writer encodes on its own
    /// thread before the store's thread writes; in format 3 with the store's `salt` (``StoreCore/encodingSalt``),
    /// its shape recorded by the write. A failure names the type and the collection.
    static func encoded<T: Encodable>(_ document: T, for collection: String, shapedWith salt: UInt64?,
                                      last: LastShape? = nil) throws -> [UInt8] {
        do { return try DocumentEncoder().encode(document, shapedWith: salt, last: last) } catch {
            throw DocStoreError(.encodingFailed, "cannot encode a \(String(reflecting: T.self)) for collection "
                + "'\(collection)': \(error)", collection: collection)
        }
    }

    /// Writes an encoded document and its index entries. Throws, leaving the transaction to be aborted, on a
    /// duplicate id (insert) or a unique conflict. `stored`, when given, is the document's present bytes (read by
    /// the caller already), else they are read here.
    func write(_ bytes: [UInt8], mode: WriteMode, in txn: any StorageTransaction, stored: [UInt8]? = nil) throws {
        let bytes = try storable(bytes, in: txn, replacing: stored)
        try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            let root = try reader.root()
            let id = try idKey(reader: reader, root: root)
            if txn.prefersBatches && stored == nil {
                // What the checks below read, asked for at once (what is not already read ahead).
                try txn.prefetch(checkedReads(reader: reader, root: root, id: id))
            }
            let old: [UInt8]? = try stored ?? txn.copiedValue(documents, id)
            if old != nil && mode == .insert { throw duplicateID(reader, root) }
            let changes = try keyChanges(reader: reader, root: root, replacing: old)
            try apply(changes, bytes, id: id, new: old == nil, in: txn, prefetched: stored == nil)
        }
    }

    /// What writing a document changes in the indexes: per index, the keys to remove and to add, none where they
    /// are the same (a field the change left alone). `removed` is `nil` when the document it replaces is damaged:
    /// its entries are then found by walking the indexes, and every index gets its entries anew.
    struct KeyChanges {
        var removed: [[[UInt8]]]?
        var added: [[[UInt8]]]
    }

    /// The ``KeyChanges`` of writing the document `reader` reads over `old` (`nil`: a new document). Needs no
    /// transaction; throws when a key cannot be made (too long).
    private func keyChanges(reader: BinaryReader, root: ValueRef, replacing old: [UInt8]?) throws -> KeyChanges {
        // The indexes whose fields hold the same bytes as before keep their entries: their keys are not made.
        var kept = old.map { unchangedIndexes(from: $0, to: reader, root: root) }
            ?? Array(repeating: false, count: indexes.count)
        let storedKeys = try old.flatMap { try entries(ofStored: $0, skipping: kept) }
        let damaged = old != nil && storedKeys == nil
        if damaged { kept = Array(repeating: false, count: indexes.count) }
        let newKeys = try indexes.indices.map { i in
            kept[i] ? [] : try checkedKeys(for: indexes[i], reader: reader, root: root)
        }
        let oldKeys = storedKeys ?? Array(repeating: [], count: indexes.count)
        let removed = indexes.indices.map { CollectionHandle.keys(oldKeys[$0], notIn: newKeys[$0]) }
        return KeyChanges(removed: damaged ? nil : removed,
                          added: indexes.indices.map { CollectionHandle.keys(newKeys[$0], notIn: oldKeys[$0]) })
    }

    /// Writes document `bytes` (of id `id`, stored in this collection's form) with `changes` to its index entries:
    /// every unique key it adds is checked first, so that a refused write leaves nothing behind. `prefetched`: the
    /// holders of its unique keys were asked for already (``checkedReads(of:)``), on an engine with round trips.
    private func apply(_ changes: KeyChanges, _ bytes: [UInt8], id: [UInt8], new: Bool, in txn: any StorageTransaction,
                       prefetched: Bool) throws {
        if txn.prefersBatches && !prefetched {
            // The present document known, only the unique keys this write adds are checked: asked at once.
            try txn.prefetch(indexes.indices.filter { indexes[$0].isUnique }.flatMap { i in
                changes.added[i].map { (indexes[i].database, $0) }
            })
        }
        for (i, index) in indexes.enumerated() where index.isUnique {
            for key in changes.added[i] {
                if let holder = try txn.get(index.database, key), !holder.elementsEqual(id) {
                    throw try uniqueViolation(index, bytes)
                }
            }
        }
        try txn.changingAtomically {
            // A damaged document, whose keys cannot be read, may still be replaced.
            try removeEntries(changes.removed, of: id, in: txn)
            try putDocument(bytes, id: id, new: new, in: txn)
            for (i, index) in indexes.enumerated() {
                for key in changes.added[i] {
                    try addEntry(key, id: id, to: index, in: txn, checked: true) { "" }
                }
            }
        }
    }

    /// A stored document's replacement by `bytes`, worked out without the transaction (on any thread): its form and
    /// its index keys. `nil` unless it is the plain case: the same names as the stored document (no shape to record),
    /// the same id, bytes that differ, keys that can be made; the caller then writes it through
    /// ``update(id:stored:in:_:)``, which says what is wrong.
    struct Replacement {
        let id: [UInt8]
        let bytes: [UInt8]
        let changes: KeyChanges
    }

    func replacement(of stored: [UInt8], id: [UInt8], by bytes: [UInt8]) -> Replacement? {
        guard CollectionHandle.sameShape(bytes, stored), !bytes.elementsEqual(stored) else { return nil }
        return try? bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            let root = try reader.root()
            guard try idKey(reader: reader, root: root) == id else { return nil }
            let changes = try keyChanges(reader: reader, root: root, replacing: stored)
            return Replacement(id: id, bytes: bytes, changes: changes)
        }
    }

    /// Writes a ``Replacement`` worked out for this transaction's stored document.
    func write(_ replacement: Replacement, in txn: any StorageTransaction) throws {
        try apply(replacement.changes, replacement.bytes, id: replacement.id, new: false, in: txn, prefetched: false)
    }

    /// Inserts new documents, encoded, with their index entries: all of them, or none when one is refused.
    ///
    /// Every check comes first, against the store and within the batch (a duplicate id, a unique value taken, a key
    /// too long), so that a refused batch changes nothing. Then the documents go in in id order and each index's
    /// entries in key order, so that consecutive puts land on the same pages.
    func insert(batch: [[UInt8]], in txn: any StorageTransaction) throws {
        var shapes: [UInt64: UInt64?] = [:]
        let batch = try batch.map { try storable($0, in: txn, shapes: &shapes) }
        // Each document is checked against the store as it comes; its id and keys against the batch's others once
        // they are all in, sorted, where equal ones are neighbours. The error is the one checking them one by one
        // in order would meet first (``Refusal``).
        var ids = IDList()   // each document's, in the batch's order
        var keys = Array(repeating: IDList(), count: indexes.count)
        var owners = Array(repeating: [Int](), count: indexes.count)   // the document of each key
        var refusal: (at: Refusal, error: any Error)?
        // A document's id and keys, checked against the store's and kept for the checks among the batch's. `step`
        // is the check under way (for an error of the engine's own).
        var step = 0
        func check(_ d: Int, id: [UInt8], _ made: IDAndKeys) throws {
            step = 1
            if try txn.get(documents, id) != nil {
                refusal = (Refusal(document: d, step: 1), try duplicateID(batch[d]))
            }
            id.withUnsafeBytes { ids.append($0) }
            if refusal == nil, let failure = made.failure {
                // A key that cannot be made is met before any unique value is checked.
                refusal = (Refusal(document: d, step: failure.step), failure.error)
            }
            for (i, index) in indexes.enumerated() where i < made.keys.count && refusal == nil {
                step = Refusal.uniqueStep(i, of: indexes.count)
                for key in made.keys[i] {
                    if refusal == nil, index.isUnique, try txn.get(index.database, key) != nil {
                        refusal = (Refusal(document: d, step: step), try uniqueViolation(index, batch[d]))
                    }
                    key.withUnsafeBytes { keys[i].append($0) }
                    owners[i].append(d)
                }
            }
        }
        documents: for (d, bytes) in batch.enumerated() {
            let made = IDAndKeys(bytes, of: self)
            if let id = made.id {
                do { try check(d, id: id, made) } catch { refusal = (Refusal(document: d, step: step), error) }
            } else if let failure = made.failure {
                refusal = (Refusal(document: d, step: failure.step), failure.error)
            }
            if refusal != nil { break documents }
        }
        let order = ids.idOrder()
        if let twice = Refusal.repeated(ids, order, owners: nil, step: 1), twice < refusal?.at ?? twice.later {
            refusal = (twice, try duplicateID(batch[twice.document]))
        }
        var rank = [Int](repeating: 0, count: ids.count)   // each document's place in id order
        for (place, d) in order.enumerated() { rank[d] = place }
        // Each index's entries in key order, then in id order.
        let entryOrders = keys.indices.map { i in keys[i].idOrder(ranks: owners[i].map { rank[$0] }) }
        for (i, index) in indexes.enumerated() where index.isUnique {
            if let twice = Refusal.repeated(keys[i], entryOrders[i], owners: owners[i],
                                            step: Refusal.uniqueStep(i, of: indexes.count)),
               twice < refusal?.at ?? twice.later {
                refusal = (twice, try uniqueViolation(index, batch[twice.document]))
            }
        }
        if let refusal { throw refusal.error }
        try txn.changingAtomically {
            // The ids after the last one stored are appended, in order; those before it are put.
            let last = try lastID(in: txn)
            var appending = false
            for d in order {
                let id = ids[d]
                appending = appending || last.precedesInKeyOrder(id)
                if appending { try txn.append(documents, id, batch[d]) } else { try txn.put(documents, id, batch[d]) }
            }
            for (i, index) in indexes.enumerated() {
                let (keys, owners) = (keys[i], owners[i])
                try txn.putInOrder(index.database) { put in
                    for e in entryOrders[i] {
                        try keys.withID(e) { key in try ids.withID(owners[e]) { id in try put(key, id) } }
                    }
                }
            }
        }
    }

    /// Where checking a batch one document at a time (``write(_:mode:in:stored:)``) would refuse it: at which
    /// document, and at which step of it: 0 reading it and its id, 1 the id taken, then each index's keys made (an
    /// index's step is 2 and its position), then each unique index's values taken, in the indexes' order.
    private struct Refusal: Comparable {
        let document: Int
        let step: Int

        /// The step at which the values of unique index `i` (of `count`) are checked.
        static func uniqueStep(_ i: Int, of count: Int) -> Int { 2 + count + i }

        static func < (a: Refusal, b: Refusal) -> Bool { (a.document, a.step) < (b.document, b.step) }

        /// A refusal after this one, for comparing with none.
        var later: Refusal { Refusal(document: document + 1, step: 0) }

        /// The first document whose key (or id) an earlier document of the batch has too: among the keys in `order`
        /// (sorted, equal ones together), of documents `owners` (the positions themselves without it).
        static func repeated(_ keys: IDList, _ order: [Int], owners: [Int]?, step: Int) -> Refusal? {
            var first: Int?
            var run = 0
            while run < order.count {
                var end = run + 1
                while end < order.count && keys.same(order[run], order[end]) { end += 1 }
                if end - run > 1 {
                    // The second of them in the batch's order is refused.
                    let documents = order[run..<end].map { owners?[$0] ?? $0 }.sorted()
                    first = min(first ?? .max, documents[1])
                }
                run = end
            }
            return first.map { Refusal(document: $0, step: step) }
        }
    }

    /// A document's id and index keys, made from its bytes alone.
    private struct IDAndKeys {
        /// `nil` when the document could not be read or has no id that can be stored.
        var id: [UInt8]?
        /// Each index's keys, up to the first that could not be made.
        var keys: [[[UInt8]]] = []
        /// Why they could not all be made, and at which step (as ``Refusal`` counts them).
        var failure: (step: Int, error: any Error)?

        init(_ bytes: [UInt8], of handle: CollectionHandle) {
            bytes.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                do {
                    let root = try reader.root()
                    id = try handle.idKey(reader: reader, root: root)
                    for index in handle.indexes {
                        do {
                            keys.append(try handle.checkedKeys(for: index, reader: reader, root: root))
                        } catch {
                            failure = (2 + keys.count, error)
                            break
                        }
                    }
                } catch {
                    failure = (0, error)
                }
            }
        }
    }

    private func duplicateID(_ bytes: [UInt8]) throws -> DocStoreError {
        try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            return duplicateID(reader, try reader.root())
        }
    }

    private func uniqueViolation(_ index: Index, _ bytes: [UInt8]) throws -> DocStoreError {
        try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            return uniqueViolation(index, reader, try reader.root())
        }
    }

    /// The error for an id another document holds.
    private func duplicateID(_ reader: BinaryReader, _ root: ValueRef) -> DocStoreError {
        DocStoreError(.duplicateID, "collection '\(name)' already has a document with id "
            + "\(IndexKeys.describeValue(at: info.idPath, reader: reader, root: root))", collection: name)
    }

    /// The error for a unique value another document holds.
    private func uniqueViolation(_ index: Index, _ reader: BinaryReader, _ root: ValueRef) -> DocStoreError {
        uniqueViolation(index, IndexKeys.describe(index.definition, reader: reader, root: root))
    }

    /// Puts a document. A new one whose id orders after every stored id is appended, so that ids that count up
    /// (an integer sequence, time-ordered UUIDs) fill their pages rather than leave each half full. (Not on an
    /// engine with round trips, where finding the last id would cost one.)
    private func putDocument(_ bytes: [UInt8], id: [UInt8], new: Bool, in txn: any StorageTransaction) throws {
        if new && !txn.prefersBatches, try lastID(in: txn).precedesInKeyOrder(id) {
            try txn.append(documents, id, bytes)
        } else {
            try txn.put(documents, id, bytes)
        }
    }

    /// The greatest id stored (empty in an empty collection), which a new id must follow to be appended.
    private func lastID(in txn: any StorageTransaction) throws -> [UInt8] {
        try txn.withCursor(documents) { cursor in try cursor.last().map { Array($0.key) } ?? [] }
    }

    /// What writing the document `bytes` reads to check it, for an engine with round trips to ask for at once: the
    /// present document and the holders of its unique keys.
    func checkedReads(of bytes: [UInt8]) throws -> [(KeySpace, [UInt8])] {
        try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            let root = try reader.root()
            return checkedReads(reader: reader, root: root, id: try idKey(reader: reader, root: root))
        }
    }

    private func checkedReads(reader: BinaryReader, root: ValueRef, id: [UInt8]) -> [(KeySpace, [UInt8])] {
        var wanted: [(KeySpace, [UInt8])] = [(documents, id)]
        for index in indexes where index.isUnique {
            for key in (try? checkedKeys(for: index, reader: reader, root: root)) ?? [] {
                wanted.append((index.database, key))
            }
        }
        return wanted
    }

    /// The keys of `keys` that `other` lacks: a linear look-up for the one key of a regular or unique index, a set
    /// for many.
    private static func keys(_ keys: [[UInt8]], notIn other: [[UInt8]]) -> [[UInt8]] {
        if keys == other { return [] }
        if keys.count <= 4 && other.count <= 4 { return keys.filter { !other.contains($0) } }
        let otherSet = Set(other)
        return keys.filter { !otherSet.contains($0) }
    }

    /// The error for a value a unique index holds for another document: `value` is how the value reads.
    private func uniqueViolation(_ index: Index, _ value: String) -> DocStoreError {
        DocStoreError(.uniqueViolation, "unique index '\(index.definition.name)' of collection '\(name)' already has "
            + "\(value) for another document", collection: name, index: index.definition.name)
    }

    /// Removes one entry of document `id`; a unique entry only if this document holds it.
    func removeEntry(_ key: [UInt8], id: [UInt8], from index: Index, in txn: any StorageTransaction) throws {
        if index.isUnique {
            // (Copied on an engine that would otherwise keep the answer until the transaction ends.)
            let held = txn.prefersBatches ? try txn.copiedValue(index.database, key) == id
                : try txn.get(index.database, key)?.elementsEqual(id) ?? false
            if held {
                try txn.discard(index.database, key, value: nil)
            }
        } else {
            try txn.discard(index.database, key, value: id)
        }
    }

    /// Removes the entries of document `id` that `keys` holds, index by index; when they are not known (`nil`: its
    /// bytes are damaged), every entry that points at it, found by walking each index.
    private func removeEntries(_ keys: [[[UInt8]]]?, of id: [UInt8], in txn: any StorageTransaction) throws {
        for (i, index) in indexes.enumerated() {
            var doomed = keys?[i] ?? []
            if keys == nil {
                try txn.forEachEntry(in: index.database) { key, value in
                    if value.elementsEqual(id) { doomed.append(Array(key)) }
                }
            }
            for key in doomed { try removeEntry(key, id: id, from: index, in: txn) }
        }
    }

    /// Adds one index entry; for a unique index, fails when another document holds the key, unless the caller has
    /// `checked` that none does. The puts that refuse nothing need no answer, which an engine with round trips sends
    /// ahead.
    func addEntry(_ key: [UInt8], id: [UInt8], to index: Index, in txn: any StorageTransaction, checked: Bool = false,
                  describe: () -> String) throws {
        if checked || !index.isUnique {
            try txn.put(index.database, key, id)
        } else if try !txn.put(index.database, key, id, noOverwrite: true) {
            let holder = try txn.copiedValue(index.database, key)
            if holder != id { throw uniqueViolation(index, describe()) }
        }
    }

    /// On an engine with round trips, asks ahead for what deleting the documents `ids` reads: the documents, then
    /// the entries of their unique keys, each in one round trip where ``delete(id:in:)`` would make one for each.
    func readAhead(deleting ids: [[UInt8]], in txn: any StorageTransaction) throws {
        guard txn.prefersBatches else { return }
        try txn.prefetch(ids.map { (documents, $0) })
        guard indexes.contains(where: \.isUnique) else { return }
        var keys: [(KeySpace, [UInt8])] = []
        for id in ids {
            guard let stored = try txn.copiedValue(documents, id), let entries = try? entries(ofStored: stored) else {
                continue
            }
            for (i, index) in indexes.enumerated() where index.isUnique {
                keys += entries[i].map { (index.database, $0) }
            }
        }
        try txn.prefetch(keys)
    }

    /// Deletes the document with primary key `id` and its index entries; `false` when there is none.
    /// A document whose bytes are damaged is deleted too, its entries found by walking the indexes.
    @discardableResult
    func delete(id: [UInt8], in txn: any StorageTransaction) throws -> Bool {
        guard let old = try txn.copiedValue(documents, id) else { return false }
        try txn.changingAtomically {
            try removeEntries(try entries(ofStored: old), of: id, in: txn)
            try txn.discard(documents, id, value: nil)
        }
        return true
    }

    /// Refuses a unique index `definition` over documents that already share a key, and a key too long for any
    /// index, before anything is written: what ``build(_:in:checked:)`` would meet part way through, after the catalog
    /// named the index. So that a caller may catch the refusal and go on (make a plain index instead).
    func checkBuildable(_ definition: IndexDefinition, in txn: any StorageTransaction) throws {
        let index = Index(definition: definition, database: documents)   // (only its definition is read)
        var seen: Set<[UInt8]> = []
        try txn.forEachEntry(in: documents) { _, rawDocument in
            try Array(rawDocument).withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                let root = try reader.root()
                for key in try checkedKeys(for: index, reader: reader, root: root)
                where index.isUnique && !seen.insert(key).inserted {
                    throw uniqueViolation(index, reader, root)
                }
            }
        }
    }

    /// Fills an empty index from every document of the collection; `checked` when the caller has found no two
    /// documents with one key of a unique index (``checkBuildable(_:in:)``), so that its entries are put without
    /// asking whether each is there (on a server, without a round trip each).
    ///
    /// The cursor walks the documents database while entries go into the index database; writes to one named
    /// database leave another's pages and cursors alone, and each document is copied before its entries are added.
    func build(_ index: Index, in txn: any StorageTransaction, checked: Bool = false) throws {
        try txn.forEachEntry(in: documents) { rawID, rawDocument in
            let id = Array(rawID)
            try Array(rawDocument).withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                let root = try reader.root()
                for key in try checkedKeys(for: index, reader: reader, root: root) {
                    try addEntry(key, id: id, to: index, in: txn, checked: checked) {
                        IndexKeys.describe(index.definition, reader: reader, root: root)
                    }
                }
            }
        }
    }

    // MARK: Index keys

    /// The keys of one index for a document being written, refused when LMDB could not store one of them.
    private func checkedKeys(for index: Index, reader: BinaryReader, root: ValueRef) throws -> [[UInt8]] {
        let keys = try IndexKeys.keys(of: index, reader: reader, root: root)
        for key in keys where key.count > IndexKeys.maximumKeySize {
            throw DocStoreError(.valueTooLarge, "the value of \(IndexKeys.describe(index.definition, reader: reader, root: root).prefix(60))... "
                + "is \(key.count) bytes encoded, too long for index '\(index.definition.name)' of '\(name)' "
                + "(keys are limited to \(IndexKeys.maximumKeySize) bytes)",
                collection: name, index: index.definition.name)
        }
        return keys
    }

    /// Every index's keys for a stored document (none for the indexes `skipping` names), or `nil` when its bytes
    /// are damaged (its entries can then only be found by walking the indexes).
    private func entries(ofStored bytes: [UInt8], skipping: [Bool]? = nil) throws -> [[[UInt8]]]? {
        do {
            return try bytes.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                let root = try reader.root()
                return try indexes.indices.map { i in
                    skipping?[i] == true ? [] : try IndexKeys.keys(of: indexes[i], reader: reader, root: root)
                }
            }
        } catch is MalformedDocument {
            return nil
        }
    }

    /// Per index, whether every field it reads holds the same encoded bytes (or is missing) in the stored document
    /// `stored` and in the document `reader` reads: its keys are then the same, as a key is made from those bytes
    /// alone. A value's bytes say where it ends but not where it lies, so equal bytes are an equal value.
    private func unchangedIndexes(from stored: [UInt8], to reader: BinaryReader, root: ValueRef) -> [Bool] {
        stored.withUnsafeBytes { raw in
            let before = BinaryReader(raw)
            guard let beforeRoot = try? before.root() else { return Array(repeating: false, count: indexes.count) }
            func same(_ path: FieldPath) -> Bool {
                // A path that cannot be read is taken as changed: the keys are then made, and say what is wrong.
                let old: ValueRef?, new: ValueRef?
                do {
                    old = try before.value(atPath: path, from: beforeRoot)
                    new = try reader.value(atPath: path, from: root)
                } catch { return false }
                switch (old, new) {
                case (nil, nil): return true
                case let (old?, new?):
                    return old.tag == new.tag && UnsafeRawBufferPointer(rebasing: before.buffer[old.start..<old.end])
                        .sameBytes(as: UnsafeRawBufferPointer(rebasing: reader.buffer[new.start..<new.end]))
                default: return false
                }
            }
            return indexes.map { $0.definition.fields.allSatisfy(same) }
        }
    }
}
