/// An error from DocStore, saying what went wrong and naming the collection, index, document and field involved.
///
/// Match on the ``code`` to react, and show the ``description`` to a person. For example:
/// ```swift
/// do {
///     try await store.insert(person)
/// } catch DocStoreError.uniqueViolation {
///     print("someone already has that email")
/// } catch {
///     print(error)   // the message names the collection, index and value
/// }
/// ```
public struct DocStoreError: Error, Sendable, CustomStringConvertible {
    /// What kind of error this is. New codes may be added; match the ones you handle.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: String, Sendable {
            case uniqueViolation, duplicateID, storeFull, notAStore, formatTooNew, cannotOpen, alreadyOpen
            case decodingFailed, encodingFailed, corruptDocument, invalidSchema, valueTooLarge
            case transactionExpired, closed, storage, alreadyExists, readOnly, damagedFile, overflow, invalidUpdate
            case migrationFailed, changedSinceRead, commitOutcomeUnknown
        }
        let kind: Kind
        public var description: String { kind.rawValue }

        /// A unique index already holds the value for another document.
        public static let uniqueViolation = Code(kind: .uniqueViolation)
        /// The connection to a store's server was lost while a transaction committed, and whether it committed
        /// cannot be known: read the store before making the change again (running it again blindly may make it
        /// twice).
        public static let commitOutcomeUnknown = Code(kind: .commitOutcomeUnknown)
        /// A named thing (an index, a saved filter) already exists under that name.
        public static let alreadyExists = Code(kind: .alreadyExists)
        /// A document with the same id already exists (from `insert`; `save` replaces instead).
        public static let duplicateID = Code(kind: .duplicateID)
        /// The store reached its maximum map size; nothing was written.
        public static let storeFull = Code(kind: .storeFull)
        /// The file is not a DocStore store: not LMDB at all, or an LMDB environment of another program.
        public static let notAStore = Code(kind: .notAStore)
        /// The store was written by a newer DocStore, in a format this build does not know.
        public static let formatTooNew = Code(kind: .formatTooNew)
        /// The store could not be opened or created at its path (permissions, a missing folder, a directory).
        public static let cannotOpen = Code(kind: .cannotOpen)
        /// This process has the store open already; share that ``DocStore`` instead.
        public static let alreadyOpen = Code(kind: .alreadyOpen)
        /// A stored document does not decode into the requested type.
        public static let decodingFailed = Code(kind: .decodingFailed)
        /// A value could not be encoded as a document.
        public static let encodingFailed = Code(kind: .encodingFailed)
        /// Stored bytes are not a valid document.
        public static let corruptDocument = Code(kind: .corruptDocument)
        /// A type's index declarations cannot be used (a key path that names no stored field, say).
        public static let invalidSchema = Code(kind: .invalidSchema)
        /// An id or index key is longer than LMDB allows.
        public static let valueTooLarge = Code(kind: .valueTooLarge)
        /// A context was used after the `read` or `write` closure that received it had returned.
        public static let transactionExpired = Code(kind: .transactionExpired)
        /// The store was closed.
        public static let closed = Code(kind: .closed)
        /// The storage engine reported an error; ``DocStoreError/underlying`` is its error.
        public static let storage = Code(kind: .storage)
        /// The store was opened with ``DocStore/Options/readOnly`` and the call would change it; the message says
        /// what was refused. Nothing was written.
        public static let readOnly = Code(kind: .readOnly)
        /// The file's structure is damaged (found by ``DocStore/Options/checkFile`` when opening): the message
        /// names the page and what is wrong. Nothing was read through the damaged page.
        public static let damagedFile = Code(kind: .damagedFile)
        /// An integer result does not fit in 64 bits (a `sum`, or an `increment` of an update); nothing was changed.
        public static let overflow = Code(kind: .overflow)
        /// An update cannot be applied to a document as it is (an increment of a string, a push onto a value that
        /// is not an array, a change of the id); the message names the document and field. Nothing was changed.
        public static let invalidUpdate = Code(kind: .invalidUpdate)
        /// A migration could not be applied: a value it could not convert, a step it may not take (changing an id,
        /// removing an indexed field), or its body threw. The message names the migration, the step and the
        /// document; ``DocStoreError/underlying`` is the error met. Nothing of the migration was written.
        public static let migrationFailed = Code(kind: .migrationFailed)
        /// Documents read earlier are not as they were: a change was asked about (or kept pending) for documents
        /// that another writer has since changed, deleted or made match (``MatchedDocuments``). The message names
        /// them; nothing was written.
        public static let changedSinceRead = Code(kind: .changedSinceRead)
    }

    public let code: Code
    /// A sentence for a person, naming what is involved.
    public let message: String
    public let collection: String?
    public let index: String?
    /// The error DocStore met underneath, if any: the storage engine's error, a `DecodingError`, ...
    public let underlying: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, collection: String? = nil, index: String? = nil,
                underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.collection = collection
        self.index = index
        self.underlying = underlying
    }

    public var description: String { message }

    public static let uniqueViolation = Code.uniqueViolation
    public static let alreadyExists = Code.alreadyExists
    public static let duplicateID = Code.duplicateID
    public static let storeFull = Code.storeFull
    public static let notAStore = Code.notAStore
    public static let formatTooNew = Code.formatTooNew
    public static let cannotOpen = Code.cannotOpen
    public static let alreadyOpen = Code.alreadyOpen
    public static let decodingFailed = Code.decodingFailed
    public static let encodingFailed = Code.encodingFailed
    public static let corruptDocument = Code.corruptDocument
    public static let invalidSchema = Code.invalidSchema
    public static let valueTooLarge = Code.valueTooLarge
    public static let transactionExpired = Code.transactionExpired
    public static let closed = Code.closed
    public static let storage = Code.storage
    public static let readOnly = Code.readOnly
    public static let damagedFile = Code.damagedFile
    public static let overflow = Code.overflow
    public static let invalidUpdate = Code.invalidUpdate
    public static let migrationFailed = Code.migrationFailed
    public static let changedSinceRead = Code.changedSinceRead
}

extension DocStoreError.Code {
    /// Lets `catch DocStoreError.uniqueViolation` match any error with that code.
    public static func ~= (code: DocStoreError.Code, error: any Error) -> Bool {
        (error as? DocStoreError)?.code == code
    }
}
