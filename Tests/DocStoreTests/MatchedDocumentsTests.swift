// A change asked about is made only to the documents asked about, as they were: MatchedDocuments against an
// in-memory record of what changed, and against another process's commit.

import DocStore
import Foundation
import TestSupport
import Testing

@Suite struct MatchedDocumentsTests {
    /// What became of a document between taking the matches and checking them, in the words of the error.
    private enum Fate: String { case changed = "was changed", gone = "was deleted", left = "no longer matches",
                                     joined = "matches now" }

    @Test(arguments: [false, true])
    func theCheckFailsExactlyWhenAMatchChangedAndNamesEachOne(indexed: Bool) async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        var rng = SeededGenerator(seed: indexed ? 11 : 12)
        func document(_ id: Int) -> DocumentValue {
            .object([("id", .int(Int64(id))), ("k", .int(Int64.random(in: 0..<10, using: &rng))),
                     ("v", .int(Int64.random(in: 0..<3, using: &rng)))])
        }
        var model: [Int: DocumentValue] = [:]
        for id in 1...60 { model[id] = document(id) }
        let initial = model
        try await store.write { ctx in
            if indexed { try ctx.createIndex(IndexDefinition(name: "k", kind: .regular, fields: ["k"]), in: "things") }
            for id in initial.keys.sorted() { try ctx.insert(initial[id]!, into: "things") }
        }
        let query = Query<DocumentValue>("things").include(.compare("k", .less, .int(5)))
        func matches(_ m: [Int: DocumentValue]) -> [Int: DocumentValue] {
            m.filter { if case .int(let k)? = $0.value[field: "k"] { k < 5 } else { false } }
        }
        var next = 61
        for round in 0..<40 {
            let matched = try await store.read { try query.matchedDocuments(in: $0) }
            #expect(Set(matched.ids) == Set(matches(model).keys.map { DocumentValue.int(Int64($0)) }))
            let before = matches(model)
            // Up to four edits of random documents: a rewrite (maybe to the same value), a delete, an insert.
            var edits: [(Int, DocumentValue?)] = []
            for _ in 0..<Int.random(in: 0...4, using: &rng) {
                switch Int.random(in: 0..<4, using: &rng) {
                case 0:
                    edits.append((next, document(next)))
                    next += 1
                case 1:
                    if let id = model.keys.randomElement(using: &rng) { edits.append((id, nil)) }
                default:
                    if let id = model.keys.randomElement(using: &rng) {
                        edits.append((id, Bool.random(using: &rng) ? model[id]! : document(id)))
                    }
                }
            }
            for (id, value) in edits { model[id] = value }
            let applied = edits
            try await store.write { ctx in
                for (id, value) in applied {
                    if let value { try ctx.save(value, into: "things") } else { try ctx.delete("things", id: .int(Int64(id))) }
                }
            }
            let after = matches(model)
            var expected: [Int: Fate] = [:]
            for (id, value) in before where after[id] != value {
                expected[id] = after[id] != nil ? .changed : model[id] == nil ? .gone : .left
            }
            for id in after.keys where before[id] == nil { expected[id] = .joined }
            do {
                try await store.write { ctx in
                    try matched.requireUnchanged(in: ctx)
                    try ctx.insert(.object([("marker", .int(Int64(round)))]), into: "markers")
                }
                #expect(expected.isEmpty, "round \(round): the check passed, but \(expected) changed")
            } catch let error as DocStoreError where error.code == .changedSinceRead {
                #expect(!expected.isEmpty, "round \(round): the check failed, but nothing changed: \(error)")
                for (id, fate) in expected {
                    #expect(error.message.contains("id \(id) \(fate.rawValue)") || error.message.contains(", \(id) \(fate.rawValue)"),
                            "round \(round): \(error)")
                }
                #expect(error.message.hasPrefix("\(expected.count) document\(expected.count == 1 ? "" : "s") of 'things'"),
                        "\(error)")
                // Nothing of the failed write was kept.
                let marked = try await Query<DocumentValue>("markers").include(.compare("marker", .equal, .int(Int64(round))))
                    .count(in: store)
                #expect(marked == 0)
            }
        }
    }

    @Test func theDocumentsASaveWouldReplaceAreCheckedToo() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        try await store.write { ctx in
            try ctx.insert(.object([("id", .int(1)), ("name", .string("A"))]), into: "c")
        }
        let ids: [DocumentValue] = [.int(1), .int(2)]
        let replaced = try await store.read { try $0.matchedDocuments("c", ids: ids) }
        #expect(replaced.ids == [.int(1)])
        try await store.write { try $0.insert(.object([("id", .int(2))]), into: "c") }
        await #expect(throws: DocStoreError.self) {
            try await store.write { try replaced.requireUnchanged(in: $0) }
        }
        do {
            try await store.write { try replaced.requireUnchanged(in: $0) }
        } catch {
            #expect("\(error)" == "1 document of 'c' changed since it was read: id 2 matches now")
        }
    }

    @Test func aCommitOfAnotherProcessBetweenTheCountAndTheChangeFailsTheChangeAndWritesNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        try await store.write { ctx in
            for (id, name) in [(1, "Titanic"), (2, "Titanic"), (3, "Titanic"), (5, "Titanic"), (6, "Avatar")] {
                try ctx.insert(.object([("id", .int(Int64(id))), ("name", .string(name))]), into: "films")
            }
        }
        let titanic = Query<DocumentValue>("films").include(.compare("name", .equal, .string("Titanic")))
        let matched = try await store.read { try titanic.matchedDocuments(in: $0) }
        #expect(matched.ids == [.int(1), .int(2), .int(3), .int(5)])

        let child = ChildProcess()
        child.executableURL = ObservationTests.writerURL
        child.arguments = ["edit-films", dir.path("store.db")]
        try child.run()
        child.waitUntilExit()
        try #require(child.terminationStatus == 0)

        do {
            try await store.write { ctx in
                try matched.requireUnchanged(in: ctx)
                for id in matched.ids { try ctx.delete("films", id: id) }
            }
            Issue.record("the change was made over the other process's commit")
        } catch let error as DocStoreError {
            #expect(error.code == .changedSinceRead)
            #expect(error.message == "4 documents of 'films' changed since the 4 were read: id 1 no longer matches, "
                + "2 was changed, 3 was deleted, 4 matches now", "\(error)")
        }
        // The other process's commit is all there, and nothing was deleted.
        #expect(try await Query<DocumentValue>("films").count(in: store) == 5)
        #expect(try await store.read { try $0.get("films", id: .int(2)) }?[field: "dir"] == .string("B"))
        // Taken again, the matches are the documents as they are now, and the change goes through.
        let again = try await store.read { try titanic.matchedDocuments(in: $0) }
        try await store.write { ctx in
            try again.requireUnchanged(in: ctx)
            for id in again.ids { try ctx.delete("films", id: id) }
        }
        #expect(try await Query<DocumentValue>("films").count(in: store) == 2)
    }
}
