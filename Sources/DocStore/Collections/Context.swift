import Foundation

/// Reads inside one transaction of a ``DocStore``, synchronously, on the store's actor.
///
/// A context is valid only inside the closure that received it; using it afterwards throws
/// ``DocStoreError/Code/transactionExpired``.
public class ReadContext {
    let scope: TransactionScope
    private(set) var isValid = true

    init(scope: TransactionScope) { self.scope = scope }

    func invalidate() { isValid = false }

    var txn: any StorageTransaction { scope.txn }

    /// The commit this context reads: in a read, the number of the last write committed to the store (by any
    /// process) when the read began; in a write, the number its commit will have. Two reads with the same number
    /// see the same documents, so a tool that keeps what it worked out from them (a summary of their fields, say)
    /// may keep it for as long as the number stays the same.
    public var commitNumber: Int { scope.txn.id }

    func checkValid() throws {
        guard isValid, scope.txn.isValid else {
            throw DocStoreError(.transactionExpired, "this context's transaction has ended: use a context only inside "
                + "the closure that received it")
        }
    }

    /// The document of type `T` with `id`, or `nil` when there is none (or no collection yet).
    ///
    /// For example:
    /// ```swift
    /// let ann = try await store.read { ctx in try ctx.get(Person.self, id: annID) }
    /// ```
    /// - Throws: ``DocStoreError/Code/decodingFailed`` naming the collection, id and field when the stored
    ///   document does not decode as `T`.
    public func get<T: Document>(_ type: T.Type, id: T.ID) throws -> T? {
        guard let (raw, handle) = try stored(type, id: id) else { return nil }
        return try ModelKind.of(type).decode(raw, from: handle) { "\(id)" }
    }

    /// The stored bytes of the document with `id`, and the document decoded, or `nil`: what an observer compares.
    func getWithBytes<T: Document>(_ type: T.Type, id: T.ID) throws -> ([UInt8], () throws -> T)? {
        guard let (raw, handle) = try stored(type, id: id) else { return nil }
        let bytes = Array(raw)
        let kind = ModelKind.of(type)
        return (bytes, { try bytes.withUnsafeBytes { try kind.decode($0, from: handle) { "\(id)" } } })
    }

    private func stored<T: Document>(_ type: T.Type, id: T.ID) throws
        -> (UnsafeRawBufferPointer, CollectionHandle)? {
        try checkValid()
        // The id is checked first: an id no document could have is an error, whether or not there is a collection.
        let key = try CollectionHandle.idKey(id, collection: (try? TypeRegistry.schema(type).collection) ?? "\(type)")
        guard let handle = try scope.handleForReading(type) else { return nil }
        return try txn.get(handle.documents, key).map { ($0, handle) }
    }
}

/// Reads and writes inside one write transaction of a ``DocStore``: everything done through it commits together
/// when the `write` closure returns, or not at all when it throws.
///
/// For example:
/// ```swift
/// let n = try await store.write { ctx in
///     guard var p = try ctx.get(Person.self, id: id) else { return 0 }
///     p.age += 1
///     try ctx.save(p)
///     return try Person.query().count(in: ctx)
/// }
/// ```
public final class WriteContext: ReadContext {
    /// For each collection, the integer id after the last one this transaction gave a document without an id.
    var nextIDs: [String: Int64] = [:]

    /// Checks the context, and refuses a change on a store opened read-only, saying that `what` was refused.
    /// (`what` and `collection` are worked out only for the refusal, after the context is checked.)
    func checkWritable(_ what: @autoclosure () throws -> String, collection: @autoclosure () throws -> String? = nil,
                       index: String? = nil) throws {
        try checkValid()
        if scope.core.isReadOnly {
            throw scope.core.readOnlyRefusal(try what(), collection: try collection(), index: index)
        }
    }

    /// The collection of a Swift type, for messages.
    func collection<T: Document>(of type: T.Type) throws -> String { try TypeRegistry.schema(type).collection }

    /// Inserts a new document and its index entries.
    ///
    /// - Throws: ``DocStoreError/Code/duplicateID`` when a document with the same id exists,
    ///   ``DocStoreError/Code/uniqueViolation`` when a unique index already holds one of its values.
    public func insert<T: Document>(_ document: T) throws {
        try write(try CollectionHandle.encoded(document, for: collection(of: T.self), shapedWith: scope.core.encodingSalt),
                  as: T.self, mode: .insert)
    }

    /// Inserts a document, or replaces the one with the same id, updating its index entries.
    ///
    /// - Throws: ``DocStoreError/Code/uniqueViolation`` when a unique index holds one of its values for another document.
    public func save<T: Document>(_ document: T) throws {
        try write(try CollectionHandle.encoded(document, for: collection(of: T.self), shapedWith: scope.core.encodingSalt),
                  as: T.self, mode: .save)
    }

    /// Inserts several documents: all of them, or none when one is refused (a duplicate id, a unique value taken,
    /// within the batch or by a stored document); the error names the first. Within `write`, they commit together
    /// with everything else.
    public func insert<S: Sequence>(contentsOf documents: S) throws where S.Element: Document {
        let collection = try collection(of: S.Element.self)
        try insert(encoded: CollectionHandle.encoded(Array(documents), for: collection,
                                                    shapedWith: scope.core.encodingSalt), as: S.Element.self)
    }

    /// Inserts documents encoded already (by the caller of ``DocStore/insert(contentsOf:)``, on its own thread).
    func insert<T: Document>(encoded documents: [[UInt8]], as type: T.Type) throws {
        guard !documents.isEmpty else { return }
        try checkWritable("insert documents into '\(try collection(of: type))'", collection: try collection(of: type))
        let handle = try scope.handle(for: type)
        guard txn.prefersBatches else { return try handle.insert(batch: documents, in: txn) }
        // On an engine with round trips, 512 at a time, and what checking those reads asked for at once; in a
        // transaction of its own, so that a refused document leaves none of the batch, as on a file.
        try txn.nested { txn in
            for start in stride(from: 0, to: documents.count, by: 512) {
                let batch = documents[start..<min(documents.count, start + 512)]
                try txn.prefetch(batch.flatMap { (try? handle.checkedReads(of: $0)) ?? [] })
                for bytes in batch { try handle.write(bytes, mode: .insert, in: txn) }
            }
        }
    }

    /// Deletes the document of type `T` with `id` and its index entries. Returns whether there was one.
    @discardableResult
    public func delete<T: Document>(_ type: T.Type, id: T.ID) throws -> Bool {
        try checkWritable("delete a document from '\(try collection(of: type))'", collection: try collection(of: type))
        let handle = try scope.handle(for: type)
        return try handle.delete(id: try CollectionHandle.idKey(id, collection: handle.name), in: txn)
    }

    /// What writing `bytes` as a `T` reads for its checks (its id, its unique keys); none while `T`'s collection is
    /// not open in the store's catalog.
    func checkedReads<T: Document>(_ bytes: [UInt8], as type: T.Type) throws -> [(KeySpace, [UInt8])] {
        try scope.handleForReading(type)?.checkedReads(of: bytes) ?? []
    }

    /// Writes a document of type `T`, encoded already (by ``CollectionHandle/encoded(_:for:shapedWith:)``).
    func write<T: Document>(_ bytes: [UInt8], as type: T.Type, mode: CollectionHandle.WriteMode) throws {
        try checkWritable("\(mode == .insert ? "insert" : "save") a document into '\(try collection(of: T.self))'",
                          collection: try collection(of: T.self))
        try scope.handle(for: T.self).write(bytes, mode: mode, in: txn)
    }
}

/// Where and why a document failed to decode.
public struct DecodingFailure: Error, Sendable, CustomStringConvertible {
    /// The dotted path of the field (`address.zip`, `tags.2`), or `(document)` for the whole document.
    public let field: String
    public let reason: String
    public var description: String { "field '\(field)': \(reason)" }

    /// A failure to decode document `id` of `collection` as `type`, as the error a caller sees.
    static func named(_ error: any Error, type: String, collection: String, id: () -> String) -> any Error {
        switch error {
        case let error as DecodingError:
            let (field, reason) = describe(error)
            return DocStoreError(.decodingFailed, "document \(id()) of collection '\(collection)' does not decode as "
                + "\(type): field '\(field)': \(reason)",
                collection: collection, underlying: DecodingFailure(field: field, reason: reason))
        case let error as DocStoreError:
            return DocStoreError(error.code, "document \(id()) of collection '\(collection)': \(error.message)",
                                 collection: collection, underlying: error.underlying)
        case let error as MalformedDocument:
            return DocStoreError(.corruptDocument, "document \(id()) of collection '\(collection)' is damaged: \(error)",
                                 collection: collection)
        default:
            return error
        }
    }

    static func describe(_ error: DecodingError) -> (field: String, reason: String) {
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty ? "(document)" : keys.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(_, let c): return (path(c.codingPath), c.debugDescription)
        case .valueNotFound(_, let c): return (path(c.codingPath), c.debugDescription)
        case .keyNotFound(let key, let c): return (path(c.codingPath + [key]), "missing")
        case .dataCorrupted(let c): return (path(c.codingPath), c.debugDescription)
        @unknown default: return ("(document)", "\(error)")
        }
    }
}
