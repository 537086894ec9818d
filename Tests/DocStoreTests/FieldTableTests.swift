import Foundation
import Testing
import TestSupport
@testable import DocStore

// Objects of four fields or more carry a table of where each field begins (document format 3): a look-up by name
// goes through it, a walk over every field checks it, and documents written before it keep reading.

@Suite struct FieldTableTests {
    private static let names = ["a", "b", "id", "name", "city", "x", "tags", "é", "", "address"]

    /// A random value: objects of up to 40 fields (names drawn from a few, so some repeat), arrays, scalars, and
    /// strings long enough that some objects need 2-byte tables and, rarely, none (past 64 KiB).
    private static func value(_ rng: inout SeededGenerator, depth: Int) -> DocumentValue {
        switch Int.random(in: 0..<(depth > 3 ? 4 : 7), using: &rng) {
        case 0: return .null
        case 1: return .int(Int64.random(in: -1_000_000...1_000_000, using: &rng))
        case 2: return .double(Double.random(in: -10...10, using: &rng))
        case 3:
            let length = Int.random(in: 0..<50, using: &rng) == 0 ? Int.random(in: 200...3_000, using: &rng)
                : Int.random(in: 0...12, using: &rng)
            return .string(String(repeating: "s", count: length))
        case 4: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in value(&rng, depth: depth + 1) })
        default: return object(&rng, depth: depth + 1)
        }
    }

    private static func object(_ rng: inout SeededGenerator, depth: Int) -> DocumentValue {
        let count = Int.random(in: 0..<8, using: &rng) == 0 ? Int.random(in: 8...40, using: &rng) : Int.random(in: 0...7, using: &rng)
        var fields = (0..<count).map { _ in
            DocumentValue.Field(names.randomElement(using: &rng)!, value(&rng, depth: depth))
        }
        if depth == 1, Int.random(in: 0..<40, using: &rng) == 0 {
            fields.append(.init("big", .string(String(repeating: "b", count: 70_000))))
        }
        return .object(fields)
    }

    /// Checks `ref` against the value it was encoded from: an object has the table the encoder gives its count
    /// and size, and every name (and some it lacks) is found through it where a walk over its fields finds the
    /// first field of that name.
    private static func check(_ reader: BinaryReader, _ ref: ValueRef, _ value: DocumentValue, _ where: String) throws {
        switch value {
        case .object(let fields):
            #expect(ref.tag == BinaryFormat.Tag.object, "\(`where`)")
            let fieldBytes = ref.end - reader.contentStart(ref)
            #expect(Int(ref.table) == BinaryFormat.tableWidth(count: fields.count, fieldBytes: fieldBytes),
                    "\(`where`): \(fields.count) fields in \(fieldBytes) bytes have table width \(ref.table)")
            var walked: [(name: [UInt8], value: ValueRef)] = []
            try reader.forEachField(ref) { name, value in walked.append((Array(name), value)) }
            #expect(walked.count == fields.count)
            for name in names + ["absent", "nam", "names"] {
                let first = walked.first { $0.name == Array(name.utf8) }?.value
                let found = try Array(name.utf8).withUnsafeBytes { try reader.field(ref, named: $0) }
                #expect(found?.start == first?.start && found?.end == first?.end, "\(`where`).\(name)")
            }
            for (field, walked) in zip(fields, walked) {
                try check(reader, walked.value, field.value, "\(`where`).\(field.name)")
            }
        case .array(let elements):
            var refs: [ValueRef] = []
            try reader.forEachElement(ref) { refs.append($0) }
            for (i, (element, ref)) in zip(elements, refs).enumerated() { try check(reader, ref, element, "\(`where`)[\(i)]") }
        default:
            #expect(ref.table == 0)
        }
    }

    @Test func aLookUpThroughTheTableFindsWhatAWalkFindsFirst() throws {
        var rng = SeededGenerator(seed: 3301)
        var tables = [0, 0, 0]
        for round in 0..<400 {
            let document = Self.object(&rng, depth: 1)
            let bytes = document.encoded()
            #expect(bytes.first == BinaryFormat.version)
            try bytes.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                let root = try reader.root()
                tables[Int(root.table)] += 1
                try Self.check(reader, root, document, "round \(round)")
            }
            #expect(try DocumentValue(encoded: bytes) == document, "round \(round)")
        }
        // Each width was met, and some roots had none.
        #expect(tables.allSatisfy { $0 > 0 }, "\(tables)")
    }

    /// The typed encoder writes the same bytes as the untyped value of the same fields.
    @Test func theTypedEncoderWritesTheSameTables() throws {
        struct Wide: Codable, Equatable {
            var a = 1, b = "two", c = [3.0], d: Int? = nil, e = true
            var inner = Inner()
            var list = [Inner(), Inner()]
        }
        struct Inner: Codable, Equatable { var x = 1, y = 2, z = 3, w = String(repeating: "w", count: 300) }
        let typed = try DocumentEncoder().encode(Wide())
        let value = try DocumentValue(encoded: typed)
        #expect(value.encoded() == typed)
        #expect(try DocumentDecoder().decode(Wide.self, from: typed) == Wide())
        try typed.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            let root = try reader.root()
            #expect(root.table == 2)
            let inner = try #require(try Array("inner".utf8).withUnsafeBytes { try reader.field(root, named: $0) })
            #expect(inner.table == 2)
        }
    }

    /// A table that says a field begins elsewhere than it does, under a checksum that holds, is refused by every
    /// walk over the fields, and reported by `verify()`.
    @Test func aTableThatDisagreesWithItsFieldsIsFound() async throws {
        let person = Person(name: "Ann", age: 41, city: "Bergen", email: "ann@x.org", tags: ["a"])
        let bytes = try DocumentEncoder().encode(person)
        let table = 1 + 1 + BinaryFormat.containerHeaderSize
        #expect(bytes[1] == BinaryFormat.Tag.object8)
        var damaged = bytes
        damaged.swapAt(table + 1, table + 2)
        damaged.removeLast(BinaryFormat.checksumSize)
        var writer = BinaryWriter()
        writer.bytes = damaged
        writer.seal()
        damaged = writer.bytes
        #expect(throws: DocStoreError.self) { _ = try DocumentValue(encoded: damaged) }
        #expect((try? DocumentValue(encoded: damaged)) == nil)

        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime(dir) {} }
        try await store.insert(person)
        try await store.write { [damaged] ctx in
            let handle = try ctx.scope.handle(for: Person.self)
            try ctx.txn.put(handle.documents, try CollectionHandle.idKey(person.id, collection: "people"), damaged)
        }
        let report = try await store.verify()
        #expect(report.problems.contains { $0.kind == .corruptDocument && $0.description.contains("field table") },
                "\(report)")
    }

    /// `value` in format 2: objects without tables, version byte 2.
    private static func untabled(_ value: DocumentValue) -> [UInt8] {
        func write(_ value: DocumentValue, _ writer: inout BinaryWriter) {
            switch value {
            case .array(let elements):
                let header = writer.openContainer(tag: BinaryFormat.Tag.array)
                for element in elements { write(element, &writer) }
                writer.closeContainer(at: header, count: elements.count)
            case .object(let fields):
                let header = writer.openContainer(tag: BinaryFormat.Tag.object)
                for field in fields { writer.name(field.name); write(field.value, &writer) }
                writer.closeContainer(at: header, count: fields.count)
            default:
                value.write(to: &writer)
            }
        }
        var writer = BinaryWriter()
        writer.byte(BinaryFormat.untabledVersion)
        write(value, &writer)
        writer.seal()
        return writer.bytes
    }

    /// A store of format 2: its documents read, query and verify; a document that changes (by a patch or a save)
    /// is written in format 3; the store is marked with format 3 when opened for writing.
    @Test func documentsOfFormat2StillRead() async throws {
        let (store, dir) = try await makeStore()
        var people = (0..<6).map { Person(name: "P\($0)", age: $0, city: $0 % 2 == 0 ? "Oslo" : "Bergen", email: "p\($0)@x.org", tags: ["t\($0)"]) }
        try await store.insert(contentsOf: people)
        try await rewriteDocuments(of: people, in: store, markingFormat: 2) { bytes in
            let old = Self.untabled(try DocumentValue(encoded: bytes))
            #expect(old.count < bytes.count && old.first == 2)
            return old
        }
        func stored(_ person: Person) async throws -> [UInt8] {
            try await store.read { ctx in
                let handle = try #require(try ctx.scope.handleForReading(Person.self))
                let key = try CollectionHandle.idKey(person.id, collection: "people")
                return try #require(try ctx.txn.get(handle.documents, key).map { Array($0) })
            }
        }
        #expect(try await stored(people[0]).first == 2)
        #expect(try await Person.query().sortBy(\.age).results(in: store) == people)
        #expect(try await Person.include(#Predicate { $0.name == "P3" }).results(in: store) == [people[3]])
        #expect(try await Person.include(#Predicate { $0.city == "Oslo" && $0.age > 1 }).count(in: store) == 2)
        #expect(try await store.verify().isClean)

        try await Person.include(#Predicate { $0.age == 1 }).update(in: store, [.set("city", .string("Molde"))])
        people[1].city = "Molde"
        people[2].name = "Q2"
        try await store.save(people[2])
        for changed in [people[1], people[2]] {
            let bytes = try await stored(changed)
            #expect(bytes.first == BinaryFormat.version)
            #expect(bytes[1] == BinaryFormat.Tag.object8)
        }
        #expect(try await stored(people[3]).first == 2)
        #expect(try await Person.query().sortBy(\.age).results(in: store) == people)
        #expect(try await store.verify().isClean)
        await store.close()

        let reopened = try await DocStore(path: dir.path("store.db"))
        let format = try await reopened.read { ctx in try ctx.txn.get(ctx.scope.core.meta, Array("format".utf8)).map { Array($0) } }
        #expect(format == [StoreCore.formatVersion])
        #expect(try await Person.query().sortBy(\.age).results(in: reopened) == people)
    }

    /// A patch inside a tabled object moves the entries after it, and gives up (for a whole rewrite) where the
    /// object would get another table: the bytes are always what encoding the changed value gives.
    @Test func aPatchKeepsTheTablesAsTheEncoderLaysThemOut() throws {
        var rng = SeededGenerator(seed: 3307)
        for round in 0..<300 {
            guard case .object(var fields) = Self.object(&rng, depth: 1), !fields.isEmpty else { continue }
            let document = DocumentValue.object(fields)
            let bytes = document.encoded()
            let i = Int.random(in: 0..<fields.count, using: &rng)
            // Only the first field of a name is what a path names.
            guard fields.firstIndex(where: { $0.name == fields[i].name }) == i, !fields[i].name.isEmpty else { continue }
            let replacement: DocumentValue = Bool.random(using: &rng) ? .string(String(repeating: "r", count: Int.random(in: 0...400, using: &rng)))
                : .int(Int64.random(in: -5...5, using: &rng))
            fields[i].value = replacement
            let expected = DocumentValue.object(fields).encoded()
            var patch = try #require(bytes.withUnsafeBytes { DocumentPatch($0) })
            if patch.replace(at: FieldPath(components: [fields[i].name]), with: replacement) {
                #expect(patch.sealed() == expected, "round \(round)")
            } else {
                let before = bytes.withUnsafeBytes { raw in (try? BinaryReader(raw).root())?.table }
                let after = expected.withUnsafeBytes { raw in (try? BinaryReader(raw).root())?.table }
                #expect(before != after, "round \(round): refused a patch that keeps the table")
            }
        }
    }
}
