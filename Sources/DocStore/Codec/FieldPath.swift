/// A dotted path to a field inside a document: `age`, `address.city`.
///
/// For example:
/// ```swift
/// let path = FieldPath("address.city")
/// print(path.components)   // ["address", "city"]
/// ```
public struct FieldPath: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral, Codable {
    /// The field names from the document's root inward.
    public let components: [String]
    let utf8Components: [[UInt8]]

    public init(_ dotted: String) {
        self.init(components: dotted.split(separator: ".", omittingEmptySubsequences: false).map(String.init))
    }

    public init(components: [String]) {
        self.components = components
        self.utf8Components = components.map { Array($0.utf8) }
    }

    public init(stringLiteral value: String) { self.init(value) }

    /// The path as written: names joined by dots.
    public var description: String { components.joined(separator: ".") }

    public static func == (a: FieldPath, b: FieldPath) -> Bool { a.components == b.components }
    public func hash(into hasher: inout Hasher) { hasher.combine(components) }

    /// Its names joined by dots, as written; or, when a name holds a dot itself (a `CodingKeys` case
    /// `email = "contact.email"`), the names one by one, which the dots would split apart.
    public init(from decoder: any Decoder) throws {
        if let names = try? decoder.singleValueContainer().decode([String].self) {
            self.init(components: names)
        } else {
            self.init(try decoder.singleValueContainer().decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if hasDottedName { try c.encode(components) } else { try c.encode(description) }
    }

    /// Whether a name holds a dot, so that the dotted text would be read back as other names.
    var hasDottedName: Bool { components.contains { $0.contains(".") } }

    /// The path as a dump writes it: as ``encode(to:)`` does.
    var dumped: DocumentValue {
        hasDottedName ? .array(components.map(DocumentValue.string)) : .string(description)
    }

    /// A path as a dump wrote it (``dumped``); `nil` when `value` is no path.
    init?(dumped value: DocumentValue) {
        switch value {
        case .string(let text): self.init(text)
        case .array(let names):
            var components: [String] = []
            for name in names {
                guard case .string(let text) = name else { return nil }
                components.append(text)
            }
            self.init(components: components)
        default: return nil
        }
    }
}
