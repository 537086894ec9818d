import Foundation

/// What a request's elements are, and how they are made: a stored document decoded (a ``Document`` type, or
/// ``DocumentValue``s), or a computed row converted (some fields of a document, a group, an aggregate). How the
/// collection is opened for them, and how one is inserted (for `findOrCreate`).
///
/// A class, so that a query, which holds one and is copied at each refinement, copies one reference rather than each
/// closure.
final class ElementKind<Element: Sendable>: Sendable {
    let decodeRaw: @Sendable (UnsafeRawBufferPointer) throws -> Element
    /// A computed row as an element: a group's values and its aggregate; for fields, or an aggregate of every match,
    /// no values.
    let row: @Sendable (_ values: [DocumentValue], _ value: DocumentValue) throws -> Element
    /// The collection as the catalog has it, for reading; `nil` when there is none. Never a write.
    let openForReading: @Sendable (TransactionScope, String) throws -> CollectionHandle?
    /// The collection for a change: a type's collection is synced with what it declares first.
    let openForWriting: @Sendable (TransactionScope, String) throws -> CollectionHandle?
    /// Inserts an element; returns it as stored. `nil`: elements that are not documents.
    let insert: (@Sendable (WriteContext, Element, String) throws -> Element)?

    init(decodeRaw: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Element = { _ in
             throw DocStoreError(.invalidSchema, "a request of fields or groups has no stored documents to decode")
         },
         row: @escaping @Sendable ([DocumentValue], DocumentValue) throws -> Element,
         openForReading: @escaping @Sendable (TransactionScope, String) throws -> CollectionHandle? = {
             try $0.handle(named: $1)
         },
         openForWriting: @escaping @Sendable (TransactionScope, String) throws -> CollectionHandle? = {
             try $0.handle(named: $1)
         },
         insert: (@Sendable (WriteContext, Element, String) throws -> Element)? = nil) {
        (self.decodeRaw, self.row) = (decodeRaw, row)
        (self.openForReading, self.openForWriting, self.insert) = (openForReading, openForWriting, insert)
    }

    static var documentValue: ElementKind<DocumentValue> {
        ElementKind<DocumentValue>(decodeRaw: { try DocumentValue(encoded: Array($0)) },
                                   row: { _, value in value },
                                   insert: { context, document, collection in try context.insertAndFetch(document, into: collection) })
    }

    fileprivate static func making<T: Document>(_ type: T.Type) -> ElementKind<T> {
        ElementKind<T>(
            decodeRaw: { try DocumentDecoder().decode(T.self, from: $0) },
            row: { _, value in try value.decoded(as: T.self) },
            openForReading: { scope, _ in try scope.handleForReading(T.self) },
            openForWriting: { scope, _ in try scope.handle(for: T.self) },
            insert: { context, document, _ in try context.insert(document); return document })
    }

    /// Elements made from computed rows by `row`.
    static func rows(_ row: @escaping @Sendable ([DocumentValue], DocumentValue) throws -> Element) -> ElementKind {
        ElementKind(row: row)
    }

    /// `kind`'s elements, the collection opened as this kind opens it (a type's collection as the type declares it).
    func opening<T>(as kind: ElementKind<T>) -> ElementKind<T> {
        ElementKind<T>(decodeRaw: kind.decodeRaw, row: kind.row, openForReading: openForReading,
                       openForWriting: openForWriting, insert: kind.insert)
    }

    /// Computed rows made into elements by `row`, the collection opened as this kind opens it: `opening(as:
    /// .rows(row))` in one step.
    func opening<T>(rows row: @escaping @Sendable ([DocumentValue], DocumentValue) throws -> T) -> ElementKind<T> {
        ElementKind<T>(row: row, openForReading: openForReading,
                       openForWriting: openForWriting)
    }

    /// The type, for messages.
    func typeName() -> String { Element.self == DocumentValue.self ? "DocumentValue" : String(reflecting: Element.self) }

    /// Decodes a stored document of `handle`'s collection (checking its checksum first if the store asks for it); a
    /// failure names the collection, the document and the field.
    func decode(_ raw: UnsafeRawBufferPointer, from handle: CollectionHandle, id: () -> String) throws -> Element {
        do {
            if handle.checksChecksums { try BinaryReader(raw).checkChecksum() }
            return try decodeRaw(raw)
        } catch {
            throw DecodingFailure.named(error, type: typeName(), collection: handle.name, id: id)
        }
    }

    /// ``decode(_:from:id:)``, a failure naming the document by its primary key `key`.
    func decode(_ raw: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, from handle: CollectionHandle) throws
        -> Element {
        try decode(raw, from: handle) { CollectionHandle.describeID(Array(key), in: Array(raw), idPath: handle.info.idPath) }
    }

    /// ``decode(_:from:id:)``, a failure naming the document by its primary key `key`.
    func decode(_ raw: UnsafeRawBufferPointer, key: [UInt8], from handle: CollectionHandle) throws -> Element {
        try decode(raw, from: handle) { CollectionHandle.describeID(key, in: Array(raw), idPath: handle.info.idPath) }
    }
}

/// The kind of each ``Document`` type's documents, decoded as it: made once per type (``TypeRegistry``). Not static
/// members of ``ElementKind``: calling one of a generic class looks up the class's metadata for the type, each time.
enum ModelKind {
    static func of<T: Document>(_ type: T.Type) -> ElementKind<T> { withCollection(type).kind }

    /// ``of(_:)``, and the type's collection (`nil` without a valid schema), in one look-up.
    static func withCollection<T: Document>(_ type: T.Type) -> (collection: String?, kind: ElementKind<T>) {
        let (collection, kind) = TypeRegistry.collectionAndKind(type) { ElementKind<T>.making(type) }
        return (collection, unsafeDowncast(kind, to: ElementKind<T>.self))
    }
}
