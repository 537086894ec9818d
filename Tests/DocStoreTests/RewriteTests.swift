import Foundation
import Testing
@testable import DocStore

/// Code that runs while a document is rewritten (an update's closure, a migration's step) may write through its
/// context, the document itself included: the rewrite then replaces the document as it is by then, and every index
/// entry stays right.
@Suite struct RewriteTests {
    private static func people(_ store: DocStore, count: Int) async throws -> [Person] {
        let people = (0..<count).map { Person(name: "P\($0)", age: $0 % 50, email: "a\($0)@x.org", tags: ["t\($0 % 3)"]) }
        try await store.insert(contentsOf: people)
        return people
    }

    /// A typed update whose closure changes the same document's unique email through the context (and, for some,
    /// deletes it): the closure's value is written over what it did, with the index entries of that value.
    @Test func anUpdateWhoseClosureWritesItsOwnDocumentKeepsTheIndexesRight() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = try await Self.people(store, count: 40)
        let changed = try await store.write { ctx in
            try Person.query().update(in: ctx) { p in
                let n = Int(p.name.dropFirst())!
                if n % 5 == 0 {
                    _ = try ctx.delete(Person.self, id: p.id)
                } else {
                    _ = try ctx.update("people", id: .uuid(p.id), [.set("email", .string("b\(n)@x.org")),
                                                                    .set("tags", ["u"])])
                }
                p.age += 100
            }
        }
        #expect(changed == people.count)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        let stored = try await Person.query().results(in: store)
        #expect(stored.count == people.count && stored.allSatisfy { $0.age >= 100 && $0.email?.hasPrefix("a") == true })
        #expect(try await Person.include(#Predicate { $0.email == "b1@x.org" }).count(in: store) == 0)
        #expect(try await Person.include(#Predicate { $0.email == "a1@x.org" }).count(in: store) == 1)
        #expect(try await Person.include(#Predicate { $0.tags.contains("u") }).count(in: store) == 0)
        // The email the closure set is free again; the one written back is taken.
        try await store.insert(Person(name: "new", age: 1, email: "b1@x.org"))
        await #expect(throws: DocStoreError.self) { try await store.insert(Person(name: "dup", age: 1, email: "a2@x.org")) }
    }

    /// A migration's step that writes through the context to the next document of its batch: that document's
    /// step is given it as it is when its turn comes (the email set before it stays), and the indexes stay right.
    @Test func aMigrationStepThatWritesOtherDocumentsKeepsTheIndexesRight() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let people = try await Self.people(store, count: 30)
        let ids = people.map(\.id)
        try await store.applyMigration("touch the next one") { m in
            try m.transformDocuments(in: "people") { document in
                guard case .uuid(let id)? = document[field: "id"], let i = ids.firstIndex(of: id) else { return document }
                let next = ids[(i + 1) % ids.count]
                _ = try m.context.update("people", id: .uuid(next), [.set("email", .string("c\(i)@x.org"))])
                return document.setting(.int(Int64(200 + i)), at: "age")
            }
        }
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(try await Person.include(#Predicate { $0.age >= 200 }).count(in: store) == people.count)
        let emails = Dictionary(uniqueKeysWithValues: try await Person.query().results(in: store).map { ($0.id, $0.email) })
        for (i, id) in ids.enumerated() {
            #expect(emails[id] == "c\((i + ids.count - 1) % ids.count)@x.org", "document \(i)")
        }
    }
}
