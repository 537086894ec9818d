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

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}
