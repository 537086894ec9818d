import DocStore
import Foundation

/// The child's `catalog-on-cue PATH` mode, for the tests of catalog changes made by another process: it keeps the
/// store at PATH open and makes one change per line of standard input, each in its own transaction, answering
/// `ok` (or `error: ...`) on standard output once it has committed; at the end of its input it exits with status 0.
///
/// The changes:
/// - `create COLLECTION N TAG` — saves documents with ids 1...N, each `{"id": i, "n": i, "group": "g<i % 3>",
///   "tag": TAG}` (the collection is created when missing).
/// - `index COLLECTION NAME FIELD` — creates a regular index.
/// - `dropIndex COLLECTION NAME`
/// - `drop COLLECTION`
/// - `people N` — inserts N ``ChildPerson``s, a typed collection with indexes.
/// - `save COLLECTION ID FIELD TEXT` — saves `{"id": ID, FIELD: TEXT}`, ID an integer.
/// - `fields COLLECTION N NAME...` — saves documents with ids 1...N, each with the fields NAME... set to its id.
enum CatalogSteps {
    static func run(path: String) async -> Never {
        let store: DocStore
        do {
            store = try await openStore(path)
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter catalog-on-cue: \(error)\n".utf8))
            exit(1)
        }
        var number = 0
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            guard !words.isEmpty else { continue }
            do {
                try await apply(words, to: store, number: &number)
                FileHandle.standardOutput.write(Data("ok\n".utf8))
            } catch {
                FileHandle.standardOutput.write(Data("error: \(error)\n".utf8))
            }
        }
        await store.close()
        exit(0)
    }

    static func apply(_ words: [String], to store: DocStore, number: inout Int) async throws {
        switch (words[0], words.count) {
        case ("create", 4):
            guard let count = Int(words[2]), count > 0 else {
                throw Refusal("create COLLECTION N TAG: N is a number above 0")
            }
            let (collection, tag) = (words[1], words[3])
            try await store.write { ctx in
                for i in 1...count {
                    try ctx.save(.object([.init("id", .int(Int64(i))), .init("n", .int(Int64(i))),
                                          .init("group", .string("g\(i % 3)")), .init("tag", .string(tag))]),
                                 into: collection)
                }
            }
        case ("index", 4):
            let definition = IndexDefinition(name: words[2], kind: .regular, fields: [FieldPath(words[3])])
            let collection = words[1]
            try await store.write { try $0.createIndex(definition, in: collection) }
        case ("dropIndex", 3):
            let (collection, name) = (words[1], words[2])
            guard try await store.write({ try $0.dropIndex(name, from: collection) }) else {
                throw Refusal("no index \(name) in \(collection)")
            }
        case ("drop", 2):
            let collection = words[1]
            guard try await store.write({ try $0.dropCollection(collection) }) else {
                throw Refusal("no collection \(collection)")
            }
        case ("fields", let n) where n >= 4:
            guard let count = Int(words[2]), count > 0 else { throw Refusal("fields COLLECTION N NAME...: N above 0") }
            let (collection, names) = (words[1], Array(words[3...]))
            try await store.write { ctx in
                for i in 1...count {
                    try ctx.save(.object([.init("id", .int(Int64(i)))] + names.map { .init($0, .int(Int64(i))) }),
                                 into: collection)
                }
            }
        case ("save", 5):
            guard let id = Int64(words[2]) else { throw Refusal("save COLLECTION ID FIELD TEXT: ID is an integer") }
            let (collection, field, text) = (words[1], words[3], words[4])
            try await store.write { ctx in
                try ctx.save(.object([.init("id", .int(id)), .init(field, .string(text))]), into: collection)
            }
        case ("people", 2):
            guard let count = Int(words[1]) else { throw Refusal("people N: N is a number") }
            let people = (0..<count).map { _ in number += 1; return ChildPerson(number: number) }
            try await store.insert(contentsOf: people)
        default:
            throw Refusal("unknown change: \(words.joined(separator: " "))")
        }
    }

    struct Refusal: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
