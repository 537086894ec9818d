/// Values written as Swift literals: `["city": "Bergen", "age": 41, "tags": ["a", "b"]]` is an object whose fields
/// keep the order written, and prints as its JSON.
///
/// For example:
/// ```swift
/// try await people.update(in: store, set: ["city": "Bergen", "score": 9.5])
/// let ann: DocumentValue = ["id": 1, "name": "Ann", "tags": ["swift"]]
/// ```
extension DocumentValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: DocumentValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, DocumentValue)...) { self = .object(elements) }

    /// The value as JSON (``json(pretty:)``).
    public var description: String { json() }
}
