import Foundation
import Testing
import TestSupport
@testable import DocStore

// Every stored document ends with a CRC-32C of its other bytes: damage that still parses is found by `verify()`, and
// by reads when the store asks for it; documents written before checksums keep reading.

@Suite struct ChecksumTests {
    /// The plain definition, one bit at a time.
    private static func bitwise(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 0 ? crc >> 1 : (crc >> 1) ^ 0x82F6_3B78 }
        }
        return ~crc
    }

    /// Changes the first byte of `text` in `person`'s stored bytes to `byte`, behind the store's back.
    private static func damage(_ person: Person, at text: String, to byte: Character, in store: DocStore) async throws {
        try await store.write { ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            let key = try CollectionHandle.idKey(person.id, collection: "people")
            var bytes = try #require(try ctx.txn.get(handle.documents, key).map { Array($0) })
            let found = Array(text.utf8)
            let at = try #require(bytes.indices.first { Array(bytes[$0...].prefix(found.count)) == found })
            bytes[at] = try #require(byte.asciiValue)
            try ctx.txn.put(handle.documents, key, bytes)
        }
    }

    @Test func theChecksumIsCRC32C() {
        #expect(Array("123456789".utf8).withUnsafeBytes { CRC32C.checksum($0) } == 0xE306_9283)
        var rng = SeededGenerator(seed: 41)
        for count in 0..<70 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            #expect(bytes.withUnsafeBytes { CRC32C.checksum($0) } == Self.bitwise(bytes), "\(count) bytes")
        }
    }

    /// Every single flipped bit of a document is found, wherever it falls.
    @Test func everyFlippedBitIsFound() throws {
        let person = Person(name: "Ann Lee", age: 41, city: "Bergen", email: "ann@x.org", tags: ["a", "bc"])
        let bytes = try DocumentEncoder().encode(person)
        #expect(bytes.first == BinaryFormat.version)
        #expect(try bytes.withUnsafeBytes { try BinaryReader($0).checkChecksum() })
        for bit in 0..<(bytes.count * 8) {
            var damaged = bytes
            damaged[bit / 8] ^= 1 << (bit % 8)
            let found = damaged.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                return (try? reader.root()) == nil || (try? reader.checkChecksum()) == nil
            }
            #expect(found, "bit \(bit) of \(bytes.count * 8)")
        }
    }

    /// A byte changed inside a string: the document still parses. `verify()` names it; a read with
    /// `checkChecksums` refuses it, naming the document; a read without gives the changed value.
    @Test func damageThatParsesIsFound() async throws {
        var options = DocStore.Options()
        options.checkChecksums = true
        let (store, dir) = try await makeStore()
        let ann = Person(name: "Zebulon Quist", age: 30, city: "Oslo")
        try await store.insert(contentsOf: [ann, Person(name: "Bo", age: 20)])
        try await Self.damage(ann, at: "Quist", to: "R", in: store)
        let report = try await store.verify()
        #expect(report.problems.count == 1, "\(report)")
        let problem = try #require(report.problems.first)
        #expect(problem.kind == .corruptDocument)
        #expect(problem.document.contains(ann.id.uuidString), "\(problem)")
        #expect(problem.detail.contains("checksum"), "\(problem)")
        let read = try await store.get(Person.self, id: ann.id)
        #expect(read?.name == "Zebulon Ruist", "\(String(describing: read))")
        await store.close()

        let checked = try await DocStore(path: dir.path("store.db"), options: options)
        let error = await expectError(.corruptDocument, mentions: ["people", ann.id.uuidString, "checksum"]) {
            _ = try await checked.get(Person.self, id: ann.id)
        }
        #expect(error != nil)
        _ = await expectError(.corruptDocument, mentions: ["checksum"]) {
            _ = try await Person.query().sortBy(\.name).results(in: checked)
        }
        _ = await expectError(.corruptDocument, mentions: ["checksum"]) {
            _ = try await checked.read { try $0.get("people", id: .uuid(ann.id)) }
        }
        // The sound document still reads.
        #expect(try await Person.include(#Predicate { $0.age < 25 }).results(in: checked).map(\.name) == ["Bo"])
    }

    /// A byte changed inside an indexed value: the document fails its checksum, and the index's entry for the old
    /// value is stale. Nothing is said of an entry for the changed value: it was never the document's.
    @Test func damageInAnIndexedValueNamesTheDocumentAndTheStaleEntryOnly() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        let ann = Person(name: "Ann", age: 30, city: "Trondheim")
        try await store.insert(contentsOf: [ann, Person(name: "Bo", age: 20, city: "Oslo")])
        try await Self.damage(ann, at: "Trondheim", to: "S", in: store)
        let report = try await store.verify()
        #expect(Set(report.problems.map(\.kind)) == [.corruptDocument, .staleEntry], "\(report)")
        #expect(report.problems.allSatisfy { $0.document.contains(ann.id.uuidString) }, "\(report)")
        #expect(report.problems.filter { $0.kind == .staleEntry }.map(\.index) == ["city_age"], "\(report)")
    }

    /// A store of the format before checksums: its documents read and verify (with a notice), a document saved
    /// again gets a checksum, and the store is marked with the new format when opened for writing.
    @Test func documentsWithoutAChecksumStillRead() async throws {
        var options = DocStore.Options()
        options.checkChecksums = true
        let (store, dir) = try await makeStore(options: options)
        var people = (0..<5).map { Person(name: "P\($0)", age: $0, email: "p\($0)@x.org", tags: ["t"]) }
        try await store.insert(contentsOf: people)
        try await store.write { [people] ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            for person in people {
                let key = try CollectionHandle.idKey(person.id, collection: "people")
                let stored = try #require(try ctx.txn.get(handle.documents, key).map { Array($0) })
                // As the format before checksums wrote it: names in the document, no checksum.
                let bytes = try DocumentValue(encoded: stored).encoded()
                try ctx.txn.put(handle.documents, key, [BinaryFormat.uncheckedVersion] + bytes.dropFirst().dropLast(4))
            }
            try ctx.txn.put(ctx.scope.core.meta, Array("format".utf8), [1])
        }
        #expect(try await Person.query().sortBy(\.age).results(in: store) == people)
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
        #expect(report.notices.contains { $0.contains("5 documents written before") }, "\(report)")
        people[0].age = 99
        try await store.save(people[0])
        #expect(try await store.verify().notices.contains { $0.contains("4 documents written before") })
        try await store.read { [people] ctx in
            let handle = try #require(try ctx.scope.handleForReading(Person.self))
            let key = try CollectionHandle.idKey(people[0].id, collection: "people")
            #expect(try ctx.txn.get(handle.documents, key)?.first == BinaryFormat.shapedVersion)
        }
        await store.close()

        let reopened = try await DocStore(path: dir.path("store.db"), options: options)
        let format = try await reopened.read { ctx in try ctx.txn.get(ctx.scope.core.meta, Array("format".utf8)).map { Array($0) } }
        #expect(format == [StoreCore.formatVersion])
        #expect(try await Person.query().count(in: reopened) == 5)
    }
}
