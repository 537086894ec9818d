import Foundation
import Testing
@testable import DocStore

@Suite struct SmokeTests {
    @Test func insertGetCountDelete() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ann = Person(name: "Ann", age: 41, email: "ann@example.com", tags: ["swift", "lmdb"])
        try await store.insert(ann)
        #expect(try await store.get(Person.self, id: ann.id) == ann)
        #expect(try await store.count(Person.self) == 1)
        #expect(try await store.delete(Person.self, id: ann.id))
        #expect(try await store.get(Person.self, id: ann.id) == nil)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }
}
