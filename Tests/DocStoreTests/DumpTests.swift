import Foundation
import Testing
@testable import DocStore

/// Random values of every kind a document holds, the awkward ones often.
struct RandomValues {
    var rng: SeededGenerator

    mutating func scalar() -> DocumentValue {
        switch Int.random(in: 0..<14, using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &rng))
        case 3: return .int(Int64.random(in: -3...3, using: &rng))
        case 4: return .uint(UInt64.random(in: 0...UInt64.max, using: &rng))
        case 5: return .uint(UInt64.random(in: 0...3, using: &rng))
        case 6: return .double([1.0, -0.5, 0.1, 1e300, -2.5e-300, 123456789.125, 1e15, 3.0e16,
                                Double.random(in: -1e6...1e6, using: &rng)].randomElement(using: &rng)!)
        case 7: return .string(["", "plain", "quote \" and \\ back", "tab\tnew\nline\u{1}", "ünïcødé 🚀",
                                "{\"$date\": \"x\"}"].randomElement(using: &rng)!)
        case 8: return .bytes((0..<Int.random(in: 0...9, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        case 9: return .date(Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &rng)))
        case 10: return .date(Date(timeIntervalSinceReferenceDate: Double(Int.random(in: 0...1_000_000, using: &rng)) / 1000))
        case 11: return .uuid(UUID())
        case 12: return .double(Double(Int.random(in: -9...9, using: &rng)))
        default: return .string(String(Int.random(in: 0...99, using: &rng)))
        }
    }

    mutating func value(depth: Int = 0) -> DocumentValue {
        switch depth < 2 ? Int.random(in: 0..<6, using: &rng) : 0 {
        case 4: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in value(depth: depth + 1) })
        case 5: return object(depth: depth + 1)
        default: return scalar()
        }
    }

    mutating func object(depth: Int) -> DocumentValue {
        let names = ["a", "b", "$odd", "with space", "c.d", "x"]
        var fields: [(String, DocumentValue)] = []
        for name in names.shuffled(using: &rng).prefix(Int.random(in: 0...4, using: &rng)) {
            fields.append((name, value(depth: depth)))
        }
        return .object(fields)
    }
}

@Suite struct DumpTests {
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func everyValueReadsBackAsItWasWritten(seed: UInt64) throws {
        var values = RandomValues(rng: SeededGenerator(seed: seed))
        for _ in 0..<2000 {
            let value = values.value()
            let text = ExtendedJSON.text(value)
            #expect(!text.contains("\n"))
            let back = try ExtendedJSON.read(text)
            #expect(back == value, "\(text)")
            #expect(back.encoded() == value.encoded(), "\(text)")
        }
        // A stored document is written from its bytes exactly as it is once decoded (a small unsigned integer is
        // stored as an integer, so the decoded value, not the one encoded, is the reference).
        for _ in 0..<2000 {
            let stored = values.object(depth: 0).encoded()
            var fromBytes: [UInt8] = []
            try stored.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                try ExtendedJSON.write(reader: reader, ref: try reader.root(), to: &fromBytes)
            }
            #expect(String(decoding: fromBytes, as: UTF8.self) == ExtendedJSON.text(try DocumentValue(encoded: stored)))
        }
        // NaN and the infinities, which JSON cannot write.
        for d in [Double.nan, .infinity, -.infinity] {
            let text = ExtendedJSON.text(.double(d))
            guard case .double(let back) = try ExtendedJSON.read(text) else { Issue.record("\(text)"); continue }
            #expect(back.isNaN == d.isNaN && (d.isNaN || back == d), "\(text)")
        }
    }

    /// MongoDB's exports write a date as milliseconds since 1970: canonical `{"$numberLong": "..."}`, or a number.
    @Test func mongoDBDatesReadAsDates() throws {
        let date = Date(timeIntervalSince1970: 1_714_557_600.123)
        #expect(try ExtendedJSON.read(#"{"$date": {"$numberLong": "1714557600123"}}"#) == .date(date))
        #expect(try ExtendedJSON.read(#"{"$date": 1714557600123}"#) == .date(date))
        #expect(try ExtendedJSON.read(#"{"$date": {"$numberLong": "-86400000"}}"#) == .date(Date(timeIntervalSince1970: -86400)))
        #expect(throws: (any Error).self) { try ExtendedJSON.read(#"{"$date": {"$numberLong": "soon"}}"#) }
    }

    /// A store of several collections (every kind of index), saved filters and migrations, dumped and restored:
    /// everything is equal, document by document.
    @Test(arguments: engineSeeds([7, 8] as [UInt64]))
    func dumpThenRestoreGivesAnEqualStore(seed: UInt64) async throws {
        let dir = TemporaryDirectory()
        let source = try await openStore(storeLocation(dir, "source.db"))
        var values = RandomValues(rng: SeededGenerator(seed: seed))
        var documents: [String: [DocumentValue]] = [:]
        documents["things"] = (1...400).map { id in
            var d = values.object(depth: 0).setting(.int(Int64(id)), at: "id", first: true)
            d = d.setting(.int(Int64(id % 17)), at: "group")
            return d.setting(.array((0..<(id % 4)).map { .string("t\($0 + id % 3)") }), at: "tags")
        }
        documents["keyed"] = (1...150).map { id in
            DocumentValue.object([("key", .string("k\(id)")), ("email", .string("e\(id)@x")), ("v", values.scalar())])
        }
        documents["empty"] = []
        try await source.write { [documents] ctx in
            for (name, list) in documents {
                for d in list { try ctx.insert(d, into: name) }
            }
            try ctx.createIndex(IndexDefinition(name: "group", kind: .regular, fields: ["group"]), in: "things")
            try ctx.createIndex(IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]), in: "things")
            try ctx.createIndex(IndexDefinition(name: "group_a", kind: .regular, fields: ["group", "a"]), in: "things")
            try ctx.createIndex(IndexDefinition(name: "email", kind: .unique, fields: ["email"]), in: "keyed")
            try ctx.createIndex(IndexDefinition(name: "empty_n", kind: .regular, fields: ["n"]), in: "empty")
            try ctx.saveFilter(SavedFilter(name: "small", query: Query("things").include(.compare("group", .less, .int(3)))))
            try ctx.saveFilter(SavedFilter(name: "odd \"name\"", query: Query("keyed")))
        }
        var migrator = Migrator()
        migrator.registerMigration("first") { m in try m.addField("added", in: "keyed", value: .bool(true)) }
        migrator.registerMigration("second") { _ in }
        migrator.registerMigration("later") { _ in }
        try await migrator.migrate(source, upTo: "second")

        let dumpPath = dir.path("store.ndjson")
        let dumped = try await source.dump(to: dumpPath)
        #expect(dumped.collections == 3)
        #expect(dumped.documents == 550)
        #expect(dumped.indexes == 5)
        #expect(dumped.savedFilters == 2)
        #expect(dumped.migrations == 2)
        #expect(!FileManager.default.fileExists(atPath: dumpPath + ".incomplete"))
        let text = try String(contentsOfFile: dumpPath, encoding: .utf8)
        #expect(text.hasPrefix("{\"docstore\":\"dump\""))
        // The header, 3 collections, 2 filters, 2 migrations, the known migrations, the documents, the end.
        let lineCount: Int = text.split(separator: "\n").count
        #expect(lineCount == 560)

        let restored = try await openStore(storeLocation(dir, "restored.db"))
        let summary = try await restored.restore(from: dumpPath)
        #expect(summary == dumped)
        #expect(try await restored.collections() == source.collections())
        for info in try await source.collections() {
            let before = try await Query<DocumentValue>(info.name).results(in: source)
            let after = try await Query<DocumentValue>(info.name).results(in: restored)
            #expect(after.count == before.count, "\(info.name)")
            for (a, b) in zip(after, before) { #expect(a == b && a.encoded() == b.encoded(), "\(a.json())") }
        }
        #expect(try await restored.read { try $0.savedFilters() } == source.read { try $0.savedFilters() })
        #expect(try await restored.appliedMigrations() == source.appliedMigrations())
        #expect(try await restored.knownMigrations() == ["first", "second", "later"])
        #expect(try await migrator.pendingMigrations(in: restored) == ["later"])
        // The indexes were built: each answers as the source's does, and the store verifies.
        for group in 0..<17 {
            let q = Query<DocumentValue>("things").include(.compare("group", .equal, .int(Int64(group))))
            #expect(try await q.explain(in: restored).index != nil)
            #expect(try await q.count(in: restored) == q.count(in: source))
        }
        let tag = Query<DocumentValue>("things").include(.compare("tags", .equal, .string("t2")))
        #expect(try await tag.count(in: restored) == tag.count(in: source))
        #expect(try await restored.verify().isClean)
        // A unique index still refuses a second value.
        await #expect(throws: DocStoreError.self) {
            try await restored.write { ctx in
                try ctx.insert(.object([("key", .string("new")), ("email", .string("e1@x"))]), into: "keyed")
            }
        }
    }

    @Test func aDumpCutShortOrDamagedRestoresNothingAndSaysWhere() async throws {
        let dir = TemporaryDirectory()
        let source = try await openStore(storeLocation(dir, "source.db"))
        try await source.write { ctx in
            for i in 1...50 { try ctx.insert(.object([("id", .int(Int64(i))), ("n", .int(Int64(i % 5)))]), into: "items") }
            try ctx.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "items")
        }
        let dumpPath = dir.path("dump.ndjson")
        try await source.dump(to: dumpPath)
        let lines = try String(contentsOfFile: dumpPath, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        var rng = SeededGenerator(seed: 3)
        var cases: [(String, String)] = []
        for _ in 0..<6 {
            let cut = Int.random(in: 0..<(lines.count - 2), using: &rng)
            cases.append((lines[...cut].joined(separator: "\n") + "\n", "cut short"))
        }
        var damaged = lines
        damaged[5] = damaged[5].dropLast(3)
        cases.append((damaged.joined(separator: "\n"), "line 6"))
        var duplicate = lines
        duplicate.insert(lines[4], at: 5)
        cases.append((duplicate.joined(separator: "\n"), "already has a document"))
        cases.append(("{\"name\": \"not a dump\"}\n", "not a DocStore dump"))
        cases.append(("", "empty"))
        for (i, (text, expected)) in cases.enumerated() {
            let path = dir.path("case-\(i).ndjson")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let target = try await openStore(storeLocation(dir, "target-\(i).db"))
            do {
                try await target.restore(from: path)
                Issue.record("case \(i) restored")
            } catch let error as DocStoreError {
                #expect(error.message.contains(expected), "case \(i): \(error)")
            }
            #expect(try await target.collections().isEmpty, "case \(i)")
            await target.close()
        }
        // A store that is not empty is refused.
        await #expect(throws: DocStoreError.self) { try await source.restore(from: dumpPath) }
        #expect(try await Query<DocumentValue>("items").count(in: source) == 50)
    }

    /// A dump larger than the new store's first map: the restore grows the map, reading the dump again from its
    /// start, and restores it all. A file's map only: a server has none to grow.
    @Test(.enabled(if: !engineIsServer)) func aDumpLargerThanTheMapRestoresWhole() async throws {
        let dir = TemporaryDirectory()
        let source = try await openStore(storeLocation(dir, "big.db"))
        let pad = String(repeating: "p", count: 900)
        try await source.write { ctx in
            for i in 0..<4000 {
                try ctx.insert(.object([("id", .int(Int64(i))), ("n", .int(Int64(i % 10))), ("pad", .string(pad))]),
                               into: "big")
            }
            try ctx.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "big")
        }
        let dumpPath = dir.path("big.ndjson")
        try await source.dump(to: dumpPath)
        var options = DocStore.Options()
        options.initialMapSize = 1 << 20
        for viaPipe in [false, true] {
            let target = try await openStore(storeLocation(dir, "target-\(viaPipe).db"), options: options)
            if viaPipe {
                // Through a pipe, which cannot be read twice.
                let pipe = Pipe()
                let data = try Data(contentsOf: URL(fileURLWithPath: dumpPath))
                let feeder = Thread {
                    try? pipe.fileHandleForWriting.write(contentsOf: data)
                    try? pipe.fileHandleForWriting.close()
                }
                feeder.start()
                let fd = pipe.fileHandleForReading.fileDescriptor
                #expect(try await target.restore(fromDescriptor: fd).documents == 4000)
            } else {
                #expect(try await target.restore(from: dumpPath).documents == 4000)
            }
            #expect(try await Query<DocumentValue>("big").count(in: target) == 4000)
            #expect(try await target.verify().isClean)
            #expect(try await target.spaceUsage().mapBytes > 1 << 20)
            await target.close()
        }
    }

    @Test func hostileLinesAreRefusedWithoutACrash() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let lines = [#""\ud800\u0041""#, deep, "{\"$object\": " + String(repeating: "{\"$object\":", count: 300),
                     "[1,", "{\"a\" 1}", "\"unterminated", "-", "1e", "{\"$date\": true}", "{\"$uint\": \"-1\"}", "tru"]
        for line in lines {
            #expect(throws: (any Error).self, "\(line.prefix(30))") { _ = try ExtendedJSON.read(line) }
        }
    }

    /// A damaged document stops the dump with the error a read of it gives, naming it; nothing is left at the
    /// dump's path.
    @Test func aDamagedDocumentStopsTheDumpNamingIt() async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "damaged.db"))
        try await store.write { ctx in
            for i in 1...20 { try ctx.insert(.object([("id", .int(Int64(i))), ("name", .string("n\(i)"))]), into: "items") }
        }
        try await store.write { ctx in
            let handle = try #require(try ctx.scope.handle(named: "items"))
            let key = KeyEncoder.key(DocumentValue.int(7))
            var bytes = try #require(try ctx.txn.get(handle.documents, key).map { Array($0) })
            bytes.removeLast(9)   // cut inside the document: it no longer parses
            try ctx.txn.put(handle.documents, key, bytes)
        }
        do {
            try await store.dump(to: dir.path("damaged.ndjson"))
            Issue.record("a damaged document was dumped")
        } catch let error as DocStoreError {
            #expect(error.code == .corruptDocument, "\(error)")
            #expect(error.message.contains("document 7 of collection 'items'"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("damaged.ndjson")))
        #expect(!FileManager.default.fileExists(atPath: dir.path("damaged.ndjson.incomplete")))
    }

    @Test func aReadOnlyStoreDumps() async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "ro.db")
        do {
            let store = try await openStore(path)
            try await store.write { ctx in try ctx.insert(.object([("id", .int(1))]), into: "one") }
            await store.close()
        }
        var options = DocStore.Options()
        options.readOnly = true
        let store = try await openStore(path, options: options)
        #expect(try await store.dump(to: dir.path("ro.ndjson")).documents == 1)
        await #expect(throws: DocStoreError.self) { try await store.restore(from: dir.path("ro.ndjson")) }
    }
}
