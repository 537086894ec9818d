/// How an index treats its values.
public enum IndexKind: String, Sendable, Codable, Hashable {
    /// One entry per document; a missing or nil value is indexed as null, first in order.
    case regular = "index"
    /// One entry per document, and no two documents may share a key. A key with a nil part is not indexed,
    /// so any number of documents may lack the value.
    case unique
    /// One entry per distinct element of an array field (an array's elements: `tags`). A value that is not an
    /// array is indexed as one element; an empty, missing or nil array adds no entry.
    case multi
}

/// One secondary index of a ``Document`` type, declared with key paths.
///
/// The first argument is the index's name, unique within the collection. For example:
/// ```swift
/// static let indexes: [IndexSpec<Person>] = [
///     .index("age", \.age),                    // single field
///     .index("city_age", \.city, \.age),       // compound: city, then age
///     .unique("email", \.email),               // nil emails are not indexed
///     .multi("tags", \.tags),                  // one entry per tag
///     .index("status", .field(\.status, path: "status")),   // a field whose path cannot be derived
/// ]
/// ```
/// DocStore derives each key path's field path (`city`, `address.zip`) by decoding a probe instance of the type,
/// which works for synthesized `Codable`. Where a type codes a field in its own way, name the path with
/// ``IndexField/field(_:path:)``; where neither works, the store says so when it opens the collection.
public struct IndexSpec<Root: Document>: Sendable {
    public let name: String
    public let kind: IndexKind
    public let fields: [IndexField<Root>]

    public init(name: String, kind: IndexKind, fields: [IndexField<Root>]) {
        self.name = name
        self.kind = kind
        self.fields = fields
    }

    /// An index on one field, or a compound index on several, in the order given.
    public static func index<each Value>(_ name: String,
                                         _ keyPaths: repeat KeyPath<Root, each Value> & Sendable) -> IndexSpec {
        IndexSpec(name: name, kind: .regular, fields: IndexSpec.fields(repeat each keyPaths))
    }

    /// A unique index on one field, or on a combination of fields.
    public static func unique<each Value>(_ name: String,
                                          _ keyPaths: repeat KeyPath<Root, each Value> & Sendable) -> IndexSpec {
        IndexSpec(name: name, kind: .unique, fields: IndexSpec.fields(repeat each keyPaths))
    }

    /// An index with one entry per element of an array field.
    public static func multi<Value: Sequence>(_ name: String, _ keyPath: KeyPath<Root, Value> & Sendable) -> IndexSpec {
        IndexSpec(name: name, kind: .multi, fields: [IndexField(keyPath: keyPath, path: nil)])
    }

    /// An index with one entry per element of an optional array field.
    public static func multi<Value: Sequence>(_ name: String, _ keyPath: KeyPath<Root, Value?> & Sendable) -> IndexSpec {
        IndexSpec(name: name, kind: .multi, fields: [IndexField(keyPath: keyPath, path: nil)])
    }

    /// An index whose fields are given as ``IndexField`` values, for fields whose path must be named.
    public static func index(_ name: String, _ fields: IndexField<Root>...) -> IndexSpec {
        IndexSpec(name: name, kind: .regular, fields: fields)
    }

    /// A unique index whose fields are given as ``IndexField`` values.
    public static func unique(_ name: String, _ fields: IndexField<Root>...) -> IndexSpec {
        IndexSpec(name: name, kind: .unique, fields: fields)
    }

    /// A multi-value index on a field given as an ``IndexField``.
    public static func multi(_ name: String, _ field: IndexField<Root>) -> IndexSpec {
        IndexSpec(name: name, kind: .multi, fields: [field])
    }

    private static func fields<each Value>(_ keyPaths: repeat KeyPath<Root, each Value> & Sendable) -> [IndexField<Root>] {
        var fields: [IndexField<Root>] = []
        for keyPath in repeat each keyPaths {
            fields.append(IndexField(keyPath: keyPath, path: nil))
        }
        return fields
    }
}

/// A field of an index: a key path whose field path DocStore derives, or a key path with its path named.
public struct IndexField<Root>: Sendable {
    let keyPath: (PartialKeyPath<Root> & Sendable)?
    let path: FieldPath?

    init(keyPath: (PartialKeyPath<Root> & Sendable)?, path: FieldPath?) {
        self.keyPath = keyPath
        self.path = path
    }

    /// A field whose path in the encoded document is given, for a type with custom `Codable` code.
    ///
    /// For example, `.field(\.status, path: "state")` where `status` is encoded under the key `state`.
    public static func field<Value>(_ keyPath: KeyPath<Root, Value> & Sendable, path: FieldPath) -> IndexField {
        IndexField(keyPath: keyPath, path: path)
    }

    /// A field known only by its path.
    public static func path(_ path: FieldPath) -> IndexField {
        IndexField(keyPath: nil, path: path)
    }
}
