import Synchronization

/// What DocStore learns about a ``Document`` type once per process, with no store needed: its schema, and the field
/// path each key path stands for. A query turns its `#Predicate`s and key paths into field paths here, when it is
/// built, so running it translates nothing.
enum TypeRegistry {
    /// Per type: its schema (or why it has none), and the key paths resolved so far.
    private final class Entry: @unchecked Sendable {
        // `paths` and `kind` are read and written only under `entries`' lock; the rest never changes.
        let schema: Result<ResolvedSchema, DocStoreError>
        /// The schema's collection, read apart: every query built names it.
        let collection: String?
        let probe: Any?
        /// What the type's queries decode their results with, made once (see ``collectionAndKind(_:make:)``).
        var kind: AnyObject?
        var paths: [AnyKeyPath: FieldPath?] = [:]

        init(schema: Result<ResolvedSchema, DocStoreError>, probe: Any?) {
            self.schema = schema
            self.collection = try? schema.get().collection
            self.probe = probe
        }
    }

    private static let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    /// The type's entry, made outside the lock (making it runs the type's own code: `init(from:)`, `indexes`),
    /// which is held only to look up and to record.
    private static func entry<T: Document>(_ type: T.Type) -> Entry {
        if let known = entries.withLock({ $0[ObjectIdentifier(type)] }) { return known }
        let schema: Result<ResolvedSchema, DocStoreError>
        do { schema = .success(try ResolvedSchema.resolve(type)) } catch let error as DocStoreError {
            schema = .failure(error)
        } catch {
            schema = .failure(DocStoreError(.invalidSchema, "\(String(reflecting: T.self)): \(error)"))
        }
        let made = Entry(schema: schema, probe: try? FieldPathProbe<T>())
        return entries.withLock { entries in
            if let first = entries[ObjectIdentifier(type)] { return first }   // another thread made it meanwhile
            entries[ObjectIdentifier(type)] = made
            return made
        }
    }

    /// The type's collection, id path and indexes as field paths.
    static func schema<T: Document>(_ type: T.Type) throws -> ResolvedSchema {
        try entry(type).schema.get()
    }

    /// The type's collection, `nil` when the type has no valid schema.
    static func collection<T: Document>(_ type: T.Type) -> String? { entry(type).collection }

    /// The type's collection, and what its queries decode their results with: made by `make` the first time, then
    /// kept (every `make` must make the same kind of object). A query holds it, where making one per query cost
    /// a tenth of a query's time.
    static func collectionAndKind<T: Document>(_ type: T.Type, make: () -> AnyObject) -> (collection: String?, kind: AnyObject) {
        // (Found under the lock that finds the entry. An `AtomicLazyReference` here cost a query 3% of its time:
        // its `load` looks its own type up on every call.)
        if let known = entries.withLock({ $0[ObjectIdentifier(type)].flatMap { e in e.kind.map { (e.collection, $0) } } }) {
            return known
        }
        let entry = entry(type), made = make()   // made outside the lock: it runs the type's own code
        return entries.withLock { _ in
            if entry.kind == nil { entry.kind = made }
            return (entry.collection, entry.kind ?? made)
        }
    }

    /// The field path `keyPath` reads, or `nil` when it is not a stored field (a computed property, `.count`, ...).
    static func fieldPath<T: Document>(_ keyPath: AnyKeyPath, of type: T.Type) -> FieldPath? {
        let id = ObjectIdentifier(keyPath), root = ObjectIdentifier(type)
        if let seen = resolved.withLock({ $0[id].map { ($0.root, $0.path) } }), seen.0 == root { return seen.1 }
        let found = resolve(keyPath, of: type)
        resolved.withLock { resolved in
            if resolved.count >= 1_024 { resolved.removeAll() }   // (key paths made at run time, one per call)
            resolved[id] = Resolved(keyPath: keyPath, root: root, path: found)
        }
        return found
    }

    /// Key paths resolved so far, by the identity of the key path object: one written in the source is made once
    /// and kept by the runtime, so that a query built again looks it up by a pointer rather than by hashing its
    /// components. Each is kept with its answer, so that no other key path can take its address meanwhile.
    private static let resolved = Mutex<[ObjectIdentifier: Resolved]>([:])

    /// A key path and what it reads (@unchecked: a key path object never changes).
    private struct Resolved: @unchecked Sendable {
        let keyPath: AnyKeyPath
        let root: ObjectIdentifier
        let path: FieldPath?
    }

    private static func resolve<T: Document>(_ keyPath: AnyKeyPath, of type: T.Type) -> FieldPath? {
        let entry = entry(type)
        if let known = entries.withLock({ _ in entry.paths[keyPath] }) { return known }
        // Reading the key path on the probe runs the type's code (a computed property): outside the lock.
        var found: FieldPath?
        if let probe = entry.probe as? FieldPathProbe<T>, let partial = keyPath as? PartialKeyPath<T> {
            found = (try? probe.path(of: partial)) ?? nil
        }
        entries.withLock { _ in _ = entry.paths.updateValue(found, forKey: keyPath) }
        return found
    }
}
