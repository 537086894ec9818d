import Foundation

/// A ``Document`` type's collection, id path and indexes, with every key path turned into a field path.
struct ResolvedSchema: Sendable {
    let collection: String
    let typeName: String
    let idPath: FieldPath
    let indexes: [IndexDefinition]
    /// The length of every id's key, when the id's type gives it one (``CollectionInfo/idWidth``).
    var idWidth: Int? = nil

    static func resolve<T: Document>(_ type: T.Type) throws -> ResolvedSchema {
        let collection = T.collection
        let typeName = String(reflecting: T.self)
        func invalid(_ message: String, underlying: (any Error & Sendable)? = nil) -> DocStoreError {
            DocStoreError(.invalidSchema, message, collection: collection, underlying: underlying)
        }
        guard !collection.isEmpty else { throw invalid("\(typeName) has an empty collection name") }

        var probe: FieldPathProbe<T>?
        var probeError: (any Error)?
        do { probe = try FieldPathProbe<T>() } catch { probeError = error }

        func derive(_ keyPath: PartialKeyPath<T>, for what: String) throws -> FieldPath {
            guard let probe else {
                throw invalid("cannot find the field of \(keyPath) for \(what) of \(typeName): the type could not be "
                    + "decoded with probe values (\(probeError.map { "\($0)" } ?? "unknown reason")); "
                    + "name the path with .field(keyPath, path: \"...\")")
            }
            guard let path = try probe.path(of: keyPath) else {
                throw invalid("cannot find the field of \(keyPath) for \(what) of \(typeName): it is not a stored "
                    + "field of a kind the probe recognizes (a computed property, or a custom Codable type); "
                    + "name the path with .field(keyPath, path: \"...\")")
            }
            return path
        }

        let idPath = try derive(\T.id, for: "the id")
        var seen = Set<String>()
        var indexes: [IndexDefinition] = []
        for spec in T.indexes {
            guard !spec.name.isEmpty else { throw invalid("\(typeName) declares an index with an empty name") }
            guard seen.insert(spec.name).inserted else {
                throw invalid("\(typeName) declares two indexes named '\(spec.name)'")
            }
            guard !spec.fields.isEmpty else { throw invalid("index '\(spec.name)' of \(typeName) names no field") }
            if spec.kind == .multi && spec.fields.count != 1 {
                throw invalid("multi-value index '\(spec.name)' of \(typeName) must name exactly one array field")
            }
            var paths: [FieldPath] = []
            for field in spec.fields {
                if let path = field.path {
                    guard !path.components.contains(where: \.isEmpty) else {
                        throw invalid("index '\(spec.name)' of \(typeName) has an invalid path '\(path)'")
                    }
                    paths.append(path)
                } else if let keyPath = field.keyPath {
                    paths.append(try derive(keyPath, for: "index '\(spec.name)'"))
                }
            }
            indexes.append(IndexDefinition(name: spec.name, kind: spec.kind, fields: paths))
        }
        return ResolvedSchema(collection: collection, typeName: typeName, idPath: idPath, indexes: indexes,
                              idWidth: idWidth(of: T.ID.self))
    }

    /// The length of the key of every value of `type`, when it has one: integers of every width (a key of 10
    /// bytes, which `Int` and `UInt64` keep only within ±2^53, and lengthen past it) and UUIDs (17 bytes).
    static func idWidth(of type: Any.Type) -> Int? {
        switch type {
        case is Int.Type, is Int64.Type, is Int32.Type, is Int16.Type, is Int8.Type,
             is UInt.Type, is UInt64.Type, is UInt32.Type, is UInt16.Type, is UInt8.Type:
            return KeyEncoder.key(.int(0)).count
        case is UUID.Type: return KeyEncoder.key(.uuid(UUID())).count
        default: return nil
        }
    }
}
