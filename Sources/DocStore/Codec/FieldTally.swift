/// The kinds of value each field holds across documents added one at a time (what ``DocStore/fieldKinds(of:)``
/// counts, and the shell's `.fields` shows), by path into nested objects; of an array, the kinds of its elements.
/// Kinds are named as ``FieldKinds/fields`` names them.
public struct FieldTally: Sendable {
    public struct Field: Sendable {
        public let path: FieldPath
        /// How many documents hold each kind of value at the path.
        public internal(set) var kinds: [String: Int] = [:]
        /// For arrays: the kinds of their elements.
        public internal(set) var elementKinds: Set<String> = []
    }

    /// The fields, in the order first seen.
    public private(set) var fields: [Field] = []
    private var positions: [FieldPath: Int] = [:]
    /// The documents added.
    public private(set) var documents = 0

    public init() {}

    public subscript(path: FieldPath) -> Field? { positions[path].map { fields[$0] } }

    /// The fields by their dotted paths (`address.city`).
    public var dotted: [String: [String: Int]] {
        Dictionary(fields.map { ($0.path.components.joined(separator: "."), $0.kinds) }, uniquingKeysWith: { a, b in
            a.merging(b, uniquingKeysWith: +)
        })
    }

    public mutating func add(_ document: DocumentValue) {
        documents += 1
        if case .object(let top) = document { add(top, under: []) }
    }

    private mutating func add(_ object: [DocumentValue.Field], under prefix: [String]) {
        for field in object {
            let path = FieldPath(components: prefix + [field.name])
            let i: Int
            if let p = positions[path] { i = p } else {
                i = fields.count
                positions[path] = i
                fields.append(Field(path: path))
            }
            fields[i].kinds[Self.kind(field.value), default: 0] += 1
            switch field.value {
            case .object(let inner): add(inner, under: path.components)
            case .array(let elements): for e in elements { fields[i].elementKinds.insert(Self.kind(e)) }
            default: break
            }
        }
    }

    static func kind(_ value: DocumentValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "bool"
        case .int, .uint: "int"
        case .double: "double"
        case .string: "string"
        case .bytes: "bytes"
        case .date: "date"
        case .uuid: "uuid"
        case .array: "array"
        case .object: "object"
        }
    }
}
