import Foundation
@testable import DocStore

/// A fresh temporary directory per test, removed when the value is released.
final class TemporaryDirectory: @unchecked Sendable {
    // @unchecked: the path is immutable after init; deinit only removes the directory.
    let url: URL

    init() {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("docstore-tests-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Opens a new store in a fresh temporary directory. Keep the directory alive as long as the store.
func makeStore(options: DocStore.Options = .init()) async throws -> (DocStore, TemporaryDirectory) {
    let dir = TemporaryDirectory()
    return (try await DocStore(path: dir.path("store.db"), options: options), dir)
}

struct Person: Document, Equatable {
    var id: UUID
    var name: String
    var age: Int
    var city: String
    var email: String?
    var tags: [String]
    static let collection = "people"
    static let indexes: [IndexSpec<Person>] = [
        .index("age", \.age),
        .index("city_age", \.city, \.age),
        .unique("email", \.email),
        .multi("tags", \.tags),
    ]

    init(id: UUID = UUID(), name: String, age: Int, city: String = "Oslo", email: String? = nil, tags: [String] = []) {
        self.id = id
        self.name = name
        self.age = age
        self.city = city
        self.email = email
        self.tags = tags
    }
}
