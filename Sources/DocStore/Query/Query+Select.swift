import Foundation

/// A query's results with only some of their fields: each read from the stored bytes where it lies, the rest of
/// the document never decoded. Missing fields are left out; a dotted path keeps its nesting (`address.city` gives
/// `{"address": {"city": ...}}`).
///
/// For example:
/// ```swift
/// struct NameAndAge: Decodable { var name: String; var age: Int }
/// let rows = try await Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age).results(in: store)
/// let typed = try await Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age)
///     .results(as: NameAndAge.self, in: store)
/// ```
public struct ProjectedQuery<Element: Sendable>: Sendable, CustomStringConvertible {
    let query: Query<Element>
    /// The fields each result keeps, in order.
    public let fields: [FieldPath]

    /// In the shell's words: `people.include(age > 90).select(name, age)`.
    public var description: String { "\(query).select(\(fields.map(\.description).joined(separator: ", ")))" }

    /// Each result's fields, as an object.
    public func results(in context: ReadContext) throws -> [DocumentValue] {
        try each(in: context) { $0 }
    }

    /// Each result's fields, decoded as `T` (a smaller type than the model: its properties are the selected
    /// fields).
    public func results<T: Decodable>(as type: T.Type, in context: ReadContext) throws -> [T] {
        try each(in: context) { value in
            do { return try value.decoded(as: T.self) } catch {
                throw DocStoreError(.decodingFailed, "the fields \(fields.map(\.description).joined(separator: ", ")) of "
                    + "collection '\(query.collection)' do not decode as \(String(reflecting: T.self)): \(error)",
                    collection: query.collection)
            }
        }
    }

    /// The first result's fields, or `nil`.
    public func first(in context: ReadContext) throws -> DocumentValue? {
        try ProjectedQuery(query: query[0..<1], fields: fields).results(in: context).first
    }

    private func each<T>(in context: ReadContext, _ convert: (DocumentValue) throws -> T) throws -> [T] {
        guard let executor = try query.executor(in: context) else { return [] }
        let paths = fields.map(CompiledPath.init)
        var results: [T] = []
        let walk = try Executor.Walk(executor, collectFirst: false, whole: true)
        while let projected = try walk.next({ id, raw -> DocumentValue in
            let reader = BinaryReader(raw)
            var value = DocumentValue.object([DocumentValue.Field]())
            do {
                let root = try reader.root()
                for path in paths {
                    guard let ref = try path.value(in: reader, from: root) else { continue }
                    value = value.setting(try DocumentValue(reader: reader, ref: ref), at: path.path)
                }
            } catch let error as MalformedDocument {
                throw DocStoreError(.corruptDocument, "document \(DocStore.hex(id)) of collection '\(query.collection)' "
                    + "is damaged: \(error)", collection: query.collection, underlying: error)
            }
            executor.statistics.value.returned += 1
            return value
        }) {
            results.append(try convert(projected))
        }
        return results
    }

    /// Each result's fields, as an object, in a read transaction of its own.
    public func results(in store: DocStore) async throws -> [DocumentValue] {
        try await store.read { try self.results(in: $0) }
    }

    /// Each result's fields decoded as `T`, in a read transaction of its own.
    public func results<T: Decodable & Sendable>(as type: T.Type, in store: DocStore) async throws -> [T] {
        try await store.read { try self.results(as: type, in: $0) }
    }

    /// The first result's fields, or `nil`.
    public func first(in store: DocStore) async throws -> DocumentValue? {
        try await store.read { try self.first(in: $0) }
    }
}

extension Query {
    /// The results with only the fields at `paths`.
    ///
    /// For example: `Query<DocumentValue>("people").include(filter).select("name", "address.city")`.
    public func select(_ paths: FieldPath...) -> ProjectedQuery<Element> { select(paths) }

    /// The results with only the fields at `paths`.
    public func select(_ paths: [FieldPath]) -> ProjectedQuery<Element> { ProjectedQuery(query: self, fields: paths) }
}

extension Query where Element: Document {
    /// The results with only the fields the key paths name.
    ///
    /// For example: `Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age)`.
    public func select(_ keyPaths: PartialKeyPath<Element>...) -> ProjectedQuery<Element> {
        var query = self
        var paths: [FieldPath] = []
        for keyPath in keyPaths {
            guard let path = TypeRegistry.fieldPath(keyPath, of: Element.self) else {
                if query.selection.problem == nil {
                    query.selection.problem = DocStoreError(.invalidSchema, "cannot select \(keyPath) of \(Element.self): "
                        + "it is not a stored field (a computed property, or a value the key path computes)",
                        collection: collection)
                }
                continue
            }
            paths.append(path)
        }
        return ProjectedQuery(query: query, fields: paths)
    }
}
