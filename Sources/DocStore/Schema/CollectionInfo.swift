/// An index as the store records it: by field paths, so tools without the Swift type maintain it too.
public struct IndexDefinition: Codable, Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var kind: IndexKind
    /// The fields of the key, in order.
    public var fields: [FieldPath]

    public init(name: String, kind: IndexKind, fields: [FieldPath]) {
        self.name = name
        self.kind = kind
        self.fields = fields
    }

    /// For example `unique email(email)` or `index city_age(city, age)`.
    public var description: String {
        "\(kind.rawValue) \(name)(\(fields.map(\.description).joined(separator: ", ")))"
    }

    /// Same kind and fields: an index that need not be rebuilt.
    func hasSameShape(as other: IndexDefinition) -> Bool { kind == other.kind && fields == other.fields }
}

/// A collection as the store records it in its catalog.
public struct CollectionInfo: Codable, Sendable, Hashable {
    /// The collection's name.
    public var name: String
    /// The path of the document's id field (usually `id`).
    public var idPath: FieldPath
    /// Every index the store maintains for the collection, declared by the current type or not.
    public var indexes: [IndexDefinition]
    /// The length in bytes of every id's key, when the collection keeps its ids at one length (integers within
    /// ±2^53, UUIDs): its indexes then keep their ids side by side at that length, without a node each
    /// (`MDB_DUPFIXED`). `nil` for ids of any length. A write of an id of another length first makes the
    /// collection's indexes keep ids of any length, then runs again.
    public var idWidth: Int?

    public init(name: String, idPath: FieldPath, indexes: [IndexDefinition], idWidth: Int? = nil) {
        self.name = name
        self.idPath = idPath
        self.indexes = indexes
        self.idWidth = idWidth
    }
}

extension IndexDefinition {
    /// A unique index holds one document per key, and no key with a nil part.
    var isUnique: Bool { kind == .unique }
}
