/// A model that DocStore keeps: `Codable`, `Sendable` and `Identifiable`.
///
/// A collection holds the documents of one type; its name defaults to the type's name. Indexes are declared
/// with key paths, and DocStore finds the field each one stands for, so no field name is written twice.
///
/// For example:
/// ```swift
/// struct Person: Document {
///     var id: UUID
///     var name: String
///     var age: Int
///     var city: String
///     var email: String?
///     var tags: [String]
///     static let collection = "people"
///     static let indexes: [IndexSpec<Person>] = [
///         .index("age", \.age),
///         .index("city_age", \.city, \.age),
///         .unique("email", \.email),
///         .multi("tags", \.tags),
///     ]
/// }
/// ```
public protocol Document: Codable, Sendable, Identifiable where ID: Codable & Hashable & Sendable {
    /// The collection's name in the store. Defaults to the type's name.
    static var collection: String { get }
    /// The secondary indexes DocStore maintains for this type. Defaults to none.
    static var indexes: [IndexSpec<Self>] { get }
}

extension Document {
    public static var collection: String { String(describing: Self.self) }
    public static var indexes: [IndexSpec<Self>] { [] }
}
