import DocStore

/// The kinds of value a field holds, as seen in a collection's documents.
enum ValueKind: String, CaseIterable, Sendable, Comparable {
    case null, bool, number, string, date, uuid, bytes, array, object

    init(_ value: DocumentValue) {
        switch value {
        case .null: self = .null
        case .bool: self = .bool
        case .int, .uint, .double: self = .number
        case .string: self = .string
        case .date: self = .date
        case .uuid: self = .uuid
        case .bytes: self = .bytes
        case .array: self = .array
        case .object: self = .object
        }
    }

    static func < (a: ValueKind, b: ValueKind) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// The name in messages: "numbers", "strings".
    var plural: String {
        switch self {
        case .null: return "nil"
        case .bool: return "true/false values"
        case .number: return "numbers"
        case .string: return "strings"
        case .date: return "dates"
        case .uuid: return "UUIDs"
        case .bytes: return "bytes"
        case .array: return "arrays"
        case .object: return "objects"
        }
    }

    /// What a condition may do with a field of this kind.
    var comparators: [String] {
        switch self {
        case .null: return ["== nil", "!= nil"]
        case .bool: return ["==", "!=", "(alone: active)"]
        case .number, .date: return ["==", "!=", "<", "<=", ">", ">=", "in a..<b", "in [..]"]
        case .string: return ["==", "!=", "<", "<=", ">", ">=", "in [..]", "hasPrefix", "contains"]
        case .uuid, .bytes: return ["==", "!=", "in [..]"]
        case .array: return ["contains"]
        case .object: return ["(its fields, by dotted path)"]
        }
    }
}

/// The fields seen in a collection, with the kinds each holds: what `.fields` shows, what checks a condition's
/// comparisons, and what warns about a field no document has.
struct FieldStats: Sendable {
    struct Field: Sendable {
        var path: FieldPath
        var kinds: Set<ValueKind> = []
        /// For arrays: the kinds of their elements.
        var elementKinds: Set<ValueKind> = []
        var count = 0
    }

    /// The fields by path, in the order first seen.
    private(set) var fields: [Field] = []
    private var positions: [FieldPath: Int] = [:]
    /// Documents looked at, and documents in the collection.
    var sampled = 0
    var total = 0

    static let sampleLimit = 10_000

    subscript(path: FieldPath) -> Field? { positions[path].map { fields[$0] } }

    var paths: [FieldPath] { fields.map(\.path) }

    mutating func add(_ document: DocumentValue) {
        sampled += 1
        guard case .object(let top) = document else { return }
        add(top, under: [])
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
            fields[i].kinds.insert(ValueKind(field.value))
            fields[i].count += 1
            switch field.value {
            case .object(let inner): add(inner, under: prefix + [field.name])
            case .array(let elements):
                for e in elements { fields[i].elementKinds.insert(ValueKind(e)) }
            default: break
            }
        }
    }
}
