import Synchronization

/// What DocStore learns about a ``Document`` type once per process, with no store needed: its schema, and the field
/// path each key path stands for. A query turns its `#Predicate`s and key paths into field paths here, when it is
/// built, so running it translates nothing.
enum TypeRegistry {
    /// Per type: its schema (or why it has none), and the key paths resolved so far.
    private final class Entry: @unchecked Sendable {
        // Read and written only under `entries`' lock.
        let schema: Result<ResolvedSchema, DocStoreError>
        let probe: Any?
        var paths: [AnyKeyPath: FieldPath?] = [:]

        init(schema: Result<ResolvedSchema, DocStoreError>, probe: Any?) {
            self.schema = schema
            self.probe = probe
        }
    }

    private static let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    private static func entry<T: Document>(_ type: T.Type, in entries: inout [ObjectIdentifier: Entry]) -> Entry {
        if let known = entries[ObjectIdentifier(type)] { return known }
        let schema: Result<ResolvedSchema, DocStoreError>
        do { schema = .success(try ResolvedSchema.resolve(type)) } catch let error as DocStoreError {
            schema = .failure(error)
        } catch {
            schema = .failure(DocStoreError(.invalidSchema, "\(String(reflecting: T.self)): \(error)"))
        }
        let made = Entry(schema: schema, probe: try? FieldPathProbe<T>())
        entries[ObjectIdentifier(type)] = made
        return made
    }

    /// The type's collection, id path and indexes as field paths.
    static func schema<T: Document>(_ type: T.Type) throws -> ResolvedSchema {
        try entries.withLock { entry(type, in: &$0).schema }.get()
    }

    /// The field path `keyPath` reads, or `nil` when it is not a stored field (a computed property, `.count`, ...).
    static func fieldPath<T: Document>(_ keyPath: AnyKeyPath, of type: T.Type) -> FieldPath? {
        entries.withLock { entries in
            let entry = entry(type, in: &entries)
            if let known = entry.paths[keyPath] { return known }
            var found: FieldPath?
            if let probe = entry.probe as? FieldPathProbe<T>, let partial = keyPath as? PartialKeyPath<T> {
                found = (try? probe.path(of: partial)) ?? nil
            }
            entry.paths.updateValue(found, forKey: keyPath)
            return found
        }
    }
}
