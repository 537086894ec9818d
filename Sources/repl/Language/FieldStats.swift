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

/// The fields seen in a collection, with the kinds each holds (the store's ``FieldTally``, numbers of every kind
/// counted as one): what `.fields` shows, what checks a condition's comparisons, and what warns about a field no
/// document has.
struct FieldStats: Sendable {
    struct Field: Sendable {
        var path: FieldPath
        var kinds: Set<ValueKind>
        /// For arrays: the kinds of their elements.
        var elementKinds: Set<ValueKind>
        var count: Int
    }

    private var tally = FieldTally()
    /// Documents in the collection.
    var total = 0

    static let sampleLimit = 10_000

    /// Documents looked at.
    var sampled: Int { tally.documents }

    /// The fields, in the order first seen.
    var fields: [Field] { tally.fields.map(Field.init) }

    subscript(path: FieldPath) -> Field? { tally[path].map(Field.init) }

    var paths: [FieldPath] { tally.fields.map(\.path) }

    mutating func add(_ document: DocumentValue) { tally.add(document) }
}

extension FieldStats.Field {
    init(_ field: FieldTally.Field) {
        func kind(_ name: String) -> ValueKind { ValueKind(rawValue: name) ?? .number }   // int, double
        self.init(path: field.path, kinds: Set(field.kinds.keys.map(kind)),
                  elementKinds: Set(field.elementKinds.map(kind)), count: field.kinds.values.reduce(0, +))
    }
}
