import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore

/// Three versions of one model, and the migrations between them.
enum Contacts {
    /// Version 1: a name in one field, the zip code as text.
    struct V1: Document, Equatable {
        var id: Int
        var name: String
        var zip: String
        var city: String
        static let collection = "contacts"
        static let indexes: [IndexSpec<V1>] = [.index("city", \.city)]
    }

    /// Version 2: `name` renamed `fullName`, a new required `initials` computed from it, the zip code a number and
    /// indexed.
    struct V2: Document, Equatable {
        var id: Int
        var fullName: String
        var initials: String
        var zip: Int
        var city: String
        static let collection = "contacts"
        static let indexes: [IndexSpec<V2>] = [.index("city", \.city), .index("zip", \.zip)]
    }

    /// Version 3: the collection renamed `people`, the full name split in two, zip and city merged into `place`,
    /// and an index on the last name.
    struct V3: Document, Equatable {
        var id: Int
        var firstName: String
        var lastName: String?
        var initials: String
        var place: String
        static let collection = "people"
        static let indexes: [IndexSpec<V3>] = [.index("lastName", \.lastName)]
    }

    static func initials(of name: String) -> String {
        String(name.split(separator: " ").compactMap(\.first))
    }

    static func registerV2(_ migrator: inout Migrator) {
        migrator.registerMigration("v2: full names, numeric zip codes") { m in
            try m.renameField("name", to: "fullName", in: "contacts")
            try m.addField("initials", in: "contacts") { contact in
                guard case .string(let name)? = contact[field: "fullName"] else { return nil }
                return .string(initials(of: name))
            }
            try m.convertField("zip", in: "contacts", to: .int)
            try m.createIndex(IndexDefinition(name: "zip", kind: .regular, fields: ["zip"]), in: "contacts")
        }
    }

    static func registerV3(_ migrator: inout Migrator) {
        migrator.registerMigration("v3: people, split names, places") { m in
            try m.dropIndex("zip", from: "contacts")
            try m.dropIndex("city", from: "contacts")
            try m.mergeFields(["zip", "city"], into: "place", in: "contacts") { parts in
                let zip = parts[0].map { $0 == .null ? "" : $0.json() } ?? ""
                guard case .string(let city)? = parts[1] else { return .string(zip) }
                return .string("\(zip) \(city)")
            }
            try m.splitField("fullName", into: ["firstName", "lastName"], in: "contacts") { name in
                guard case .string(let s) = name else { return [name, nil] }
                let parts = s.split(separator: " ", maxSplits: 1).map { DocumentValue.string(String($0)) }
                return [parts.first ?? .string(""), parts.count > 1 ? parts[1] : nil]
            }
            try m.renameCollection("contacts", to: "people")
            try m.createIndex(IndexDefinition(name: "lastName", kind: .regular, fields: ["lastName"]), in: "people")
        }
    }

    /// Random version 1 contacts: names of one to three words.
    static func randomV1(count: Int, seed: UInt64) -> [V1] {
        var rng = SeededGenerator(seed: seed)
        let words = ["Ann", "Bo", "Cy", "Dag", "Eva", "Lee", "Moe", "Nils", "Ola", "Per"]
        let cities = ["Oslo", "Bergen", "Tromsø", "Bodø"]
        return (1...count).map { id in
            let name = (0..<Int.random(in: 1...3, using: &rng)).map { _ in words.randomElement(using: &rng)! }
            return V1(id: id, name: name.joined(separator: " "),
                      zip: String(format: "%04d", Int.random(in: 1...9999, using: &rng)),
                      city: cities.randomElement(using: &rng)!)
        }
    }

    /// What version 2 must hold for a version 1 contact: computed here, apart from the migration's code.
    static func expectedV2(_ c: V1) -> V2 {
        V2(id: c.id, fullName: c.name, initials: initials(of: c.name), zip: Int(c.zip)!, city: c.city)
    }

    static func expectedV3(_ c: V1) -> V3 {
        let words = c.name.split(separator: " ", maxSplits: 1).map(String.init)
        return V3(id: c.id, firstName: words[0], lastName: words.count > 1 ? words[1] : nil,
                  initials: initials(of: c.name), place: "\(Int(c.zip)!) \(c.city)")
    }
}

/// Everything the store holds: catalog, saved filters, migration records and documents, for "nothing changed".
private func everything(_ store: DocStore) async throws -> String {
    try await store.read { ctx in
        var out = ""
        for info in try ctx.collections() {
            out += "\(info)\n"
            for document in try Query<DocumentValue>(info.name).results(in: ctx) { out += document.json() + "\n" }
        }
        out += "\(try ctx.savedFilters())\n\(try ctx.appliedMigrations())"
        return out
    }
}

@Suite struct MigrationTests {
    /// A step's text is what earlier builds recorded (dates, UUIDs and unsigned integers plain), so that a store
    /// migrated by one of them does not look as if its migrations had changed.
    @Test func stepTextsKeepTheirPlainForm() async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "s.db"))
        try await store.write { ctx in try ctx.insert(.object([("id", .int(1))]), into: "c") }
        let day = Date(timeIntervalSince1970: 1_714_557_600)
        let id = UUID(uuidString: "00000000-0000-0000-0000-00000000002A")!
        try await store.applyMigration("defaults") { m in
            try m.addField("created", in: "c", value: .date(day))
            try m.addField("ref", in: "c", value: .array([.uuid(id), .uint(UInt64.max), .double(.infinity)]))
        }
        #expect(try await store.appliedMigrations().first?.steps == [
            "add field c.created = \"2024-05-01T10:00:00.000Z\"",
            "add field c.ref = [\"00000000-0000-0000-0000-00000000002A\",18446744073709551615,null]",
        ])
    }

    /// Messages name values as they always have (a date or a UUID as text), not in the tagged JSON of data.
    @Test func messagesNameValuesAsPlainText() {
        let day = Date(timeIntervalSince1970: 1_714_557_600)
        let id = UUID(uuidString: "00000000-0000-0000-0000-00000000002A")!
        #expect(FieldChange.set("d", .date(day)).description == "set d = \"2024-05-01T10:00:00.000Z\"")
        #expect(CollectionHandle.describeID(KeyEncoder.key(.uuid(id)), in: nil, idPath: "id")
            == "\"00000000-0000-0000-0000-00000000002A\"")
    }

    /// A migration and an update change a document through one rewrite, which compares bytes: a change `==` on
    /// values cannot see (-0.0 for 0.0, a NaN for a NaN of other bits) is written, and an id kept as an equal key is
    /// not a change of id.
    @Test func migrationWritesChangesThatEqualValuesHide() async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "m.db"))
        try await store.write { ctx in
            try ctx.insert(.object([("id", .int(1)), ("x", .double(-0.0))]), into: "c")
            try ctx.insert(.object([("id", .int(2)), ("x", .double(1))]), into: "c")
        }
        try await store.applyMigration("zero") { m in
            try m.transformDocuments(in: "c") { $0.setting(.double(0.0), at: "x") }
        }
        let signs = try await Query<DocumentValue>("c").results(in: store).map { doc -> Bool in
            guard case .double(let x)? = doc[field: "x"] else { return true }
            return x.sign == .minus
        }
        #expect(signs == [false, false])
        #expect(try await store.verify().isClean)
    }

    @Test func aStoreOfVersionOneMigratesToTwoThenThree() async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "contacts.db")
        let v1 = Contacts.randomV1(count: 300, seed: 17)
        do {
            let store = try await openStore(path)
            try await store.insert(contentsOf: v1)
            try await store.write { ctx in
                try ctx.saveFilter(SavedFilter(name: "oslo", query: Query("contacts")
                    .include(.compare("city", .equal, .string("Oslo")))))
            }
            // Before migrating, the check names what version 2 cannot read.
            let check = try await store.check(Contacts.V2.self, limit: 3)
            #expect(check.failureCount == v1.count)
            #expect(check.failures.first?.field == "fullName", "\(check)")
            await store.close()
        }

        // Version 2: the app registers one migration.
        do {
            let store = try await openStore(path)
            var migrator = Migrator()
            Contacts.registerV2(&migrator)
            #expect(try await migrator.pendingMigrations(in: store) == ["v2: full names, numeric zip codes"])
            #expect(try await migrator.migrate(store) == ["v2: full names, numeric zip codes"])
            #expect(try await migrator.hasCompletedMigrations(store))
            #expect(try await store.check(Contacts.V2.self).isClean)
            let stored = try await store.read { ctx in
                try Contacts.V2.query().sortBy(\.id).results(in: ctx)
            }
            #expect(stored == v1.map(Contacts.expectedV2))
            // The new index is used, and answers as a scan would.
            let zip = Int64(stored[5].zip)
            let byIndex = Query<DocumentValue>("contacts").include(.compare("zip", .equal, .int(zip)))
            #expect(try await byIndex.explain(in: store).index == "zip")
            #expect(try await byIndex.count(in: store) == stored.filter { $0.zip == stored[5].zip }.count)
            #expect(try await store.verify().isClean)
            // A second run does nothing.
            #expect(try await migrator.migrate(store).isEmpty)
            await store.close()
        }

        // Version 3: the same store, opened by an app that has both migrations, runs only the second.
        let store = try await openStore(path)
        var migrator = Migrator()
        Contacts.registerV2(&migrator)
        Contacts.registerV3(&migrator)
        #expect(try await migrator.migrate(store) == ["v3: people, split names, places"])
        #expect(try await store.check(Contacts.V3.self).isClean)
        let stored = try await store.read { ctx in try Contacts.V3.query().sortBy(\.id).results(in: ctx) }
        #expect(stored == v1.map(Contacts.expectedV3))
        #expect(try await store.collections().map(\.name) == ["people"])
        #expect(try await store.collections().first?.indexes.map(\.name) == ["lastName"])
        let lee = Query<DocumentValue>("people").include(.compare("lastName", .equal, .string("Lee")))
        #expect(try await lee.explain(in: store).index == "lastName")
        #expect(try await lee.count(in: store) == stored.filter { $0.lastName == "Lee" }.count)
        // The saved filter follows its collection.
        let filter = try await store.read { ctx in try ctx.savedFilter(named: "oslo") }
        #expect(filter?.collection == "people")
        #expect(filter?.query.description == #"people.include(city == "Oslo")"#)
        #expect(try await store.verify().isClean)
        // The store records both, in order, with their steps.
        let applied = try await store.appliedMigrations()
        #expect(applied.map(\.name) == migrator.migrationNames)
        #expect(applied.map(\.position) == [1, 2])
        #expect(applied[0].steps.first == "rename field contacts.name to fullName", "\(applied[0])")
        #expect(applied[1].steps.contains("rename collection contacts to people"))
        // The typed model writes and reads as any other.
        try await store.insert(Contacts.V3(id: 1000, firstName: "Zoe", lastName: "Lee", initials: "ZL", place: "1 Oslo"))
        #expect(try await lee.count(in: store) == stored.filter { $0.lastName == "Lee" }.count + 1)
    }

    @Test func aMigrationThatFailsHalfwayChangesNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var v1 = Contacts.randomV1(count: 120, seed: 5)
        v1[80].zip = "12b"   // no number: the conversion fails on the 81st document
        try await store.insert(contentsOf: v1)
        try await store.write { ctx in
            try ctx.saveFilter(SavedFilter(name: "all", query: Query("contacts")))
        }
        let before = try await everything(store)
        var migrator = Migrator()
        Contacts.registerV2(&migrator)
        do {
            try await migrator.migrate(store)
            Issue.record("a zip code of '12b' was converted to a number")
        } catch let error as DocStoreError {
            #expect(error.code == .migrationFailed)
            #expect(error.message.contains("v2: full names"), "\(error)")
            #expect(error.message.contains("document 81"), "\(error)")
            #expect(error.message.contains("\"12b\""), "\(error)")
            #expect(error.collection == "contacts")
        }
        #expect(try await everything(store) == before)
        #expect(try await store.appliedMigrations().isEmpty)

        // A body that throws after its steps changes nothing either; so does one that renames a collection and
        // then fails.
        struct Stop: Error {}
        var throwing = Migrator()
        throwing.registerMigration("throws") { m in
            try m.renameField("city", to: "town", in: "contacts")
            try m.dropIndex("city", from: "contacts")
            try m.renameCollection("contacts", to: "people")
            try m.createIndex(IndexDefinition(name: "town", kind: .regular, fields: ["town"]), in: "people")
            throw Stop()
        }
        await #expect(throws: DocStoreError.self) { try await throwing.migrate(store) }
        #expect(try await everything(store) == before)
        #expect(try await store.verify().isClean)
        // The store is still usable, with the old type.
        #expect(try await store.get(Contacts.V1.self, id: 3) == v1[2])
        try await store.insert(Contacts.V1(id: 999, name: "New One", zip: "1", city: "Oslo"))
        #expect(try await store.verify().isClean)
    }

    /// A step that fails halfway is never committed, even when the body catches its error and goes on: a unique
    /// index over duplicates (its catalog entry written, then its build stopped at the second duplicate), a
    /// conversion that fails on one document after others were rewritten, a field renamed onto one some documents
    /// have. The migration fails naming the step's error, and the store is as it was. The same holds for a write
    /// that catches a failed index build.
    @Test func aStepThatFailsHalfwayIsNeverCommittedEvenWhenItsErrorIsCaught() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var v1 = Contacts.randomV1(count: 300, seed: 12)
        for i in stride(from: 0, to: v1.count, by: 7) { v1[i].city = "Oslo" }   // duplicate cities
        v1[150].zip = "12b"   // a zip that is no integer, after 150 that are
        try await store.insert(contentsOf: v1)
        try await store.write { ctx in
            let first = Query<DocumentValue>("contacts").include(.compare("id", .less, .int(5)))
            try first.update(in: ctx, set: ["town": .string("x")])
        }
        let before = try await everything(store)
        // A unique index over duplicates is refused before anything is written: a body may catch that and go on.
        try await store.applyMigration("unique index, else none") { m in
            do { try m.createIndex(IndexDefinition(name: "u", kind: .unique, fields: ["city"]), in: "contacts") }
            catch let error as DocStoreError where error.code == .uniqueViolation {}
        }
        #expect(try await store.collections().first { $0.name == "contacts" }?.indexes.map(\.name) == ["city"])
        #expect(try await store.appliedMigrations().map(\.steps) == [[]])
        #expect(try await store.verify().isClean)
        try await store.write { ctx in try ctx.catalog.removeMigration(named: "unique index, else none") }
        let steps: [(String, Migrator.Body)] = [
            ("conversion", { m in
                do { try m.convertField("zip", in: "contacts", to: .int) } catch {}
            }),
            ("rename onto a field some have", { m in
                do { try m.renameField("city", to: "town", in: "contacts") } catch {}
            }),
            ("transform", { m in
                var seen = 0
                do {
                    try m.transformDocuments(in: "contacts") { document in
                        seen += 1
                        if seen == 200 { throw CancellationError() }
                        return document.setting(.string("changed"), at: "city")
                    }
                } catch {}
            }),
        ]
        for (name, body) in steps {
            do {
                try await store.applyMigration(name, body)
                Issue.record("\(name): the migration was applied: \(try await everything(store).prefix(300))")
            } catch let error as DocStoreError {
                #expect(error.message.contains("halfway"), "\(name): \(error)")
            }
            #expect(try await everything(store) == before, "\(name)")
            #expect(try await store.appliedMigrations().isEmpty, "\(name)")
            #expect(try await store.collections().first { $0.name == "contacts" }?.indexes.map(\.name) == ["city"],
                    "\(name)")
            let report = try await store.verify()
            #expect(report.isClean, "\(name): \(report)")
        }
        try await store.write { ctx in
            do { try ctx.createIndex(IndexDefinition(name: "u", kind: .unique, fields: ["city"]), in: "contacts") }
            catch let error as DocStoreError where error.code == .uniqueViolation {
                try ctx.createIndex(IndexDefinition(name: "u", kind: .regular, fields: ["city"]), in: "contacts")
            }
        }
        #expect(try await store.collections().first { $0.name == "contacts" }?.indexes.map(\.name) == ["city", "u"])
        #expect(try await store.verify().isClean)
    }

    @Test func stepsThatWouldBreakTheStoreAreRefused() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.insert(contentsOf: Contacts.randomV1(count: 10, seed: 9))
        func refusal(_ body: @escaping Migrator.Body) async throws -> String {
            do {
                try await store.applyMigration(UUID().uuidString, body)
                return "applied"
            } catch let error as DocStoreError {
                #expect(error.code == .migrationFailed)
                return error.message
            }
        }
        #expect(try await refusal { try $0.renameField("id", to: "key", in: "contacts") }.contains("id field"))
        #expect(try await refusal { try $0.removeField("city", in: "contacts") }.contains("index 'city'"))
        #expect(try await refusal { try $0.renameField("name", to: "city", in: "contacts") }
            .contains("already has a field 'city'"))
        #expect(try await refusal { m in
            try m.transformDocuments(in: "contacts") { $0.setting(.int(5), at: "id") }
        }.contains("change its id"))
        #expect(try await refusal { m in
            try m.splitField("name", into: ["a", "b"], in: "contacts") { _ in [nil] }
        }.contains("1 values for 2 fields"))
        // A value that would go inside a field that is not an object is refused, not dropped.
        #expect(try await refusal { try $0.renameField("name", to: "zip.name", in: "contacts") }
            .contains("not an object"))
        #expect(try await refusal { m in
            try m.splitField("name", into: ["city.first", "last"], in: "contacts") { v in [v, v] }
        }.contains("not an object"))
        #expect(try await refusal { try $0.addField("zip.plus4", in: "contacts", value: .int(1)) }
            .contains("not an object"))
        // A rename onto an existing collection.
        try await store.write { ctx in try ctx.insert(.object([("id", .int(1))]), into: "other") }
        let taken = try await refusal { try $0.renameCollection("contacts", to: "other") }
        #expect(taken.contains("a collection has that name"), "\(taken)")
        #expect(try await store.appliedMigrations().isEmpty)
        #expect(try await store.verify().isClean)
    }

    /// Random documents and random steps, against the same steps applied to the documents in memory.
    @Test(arguments: engineSeeds([1, 2, 3, 4, 5, 6] as [UInt64]))
    func randomStepsMatchTheSameStepsInMemory(seed: UInt64) async throws {
        var rng = SeededGenerator(seed: seed)
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        let fields: [FieldPath] = ["a", "b", "c", "n.x", "n.y"]
        func randomValue() -> DocumentValue {
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: return .int(Int64.random(in: -5...5, using: &rng))
            case 1: return .string(String(Int.random(in: 0...9, using: &rng)))
            case 2: return .string(["x", "yes", "no", " 7 "].randomElement(using: &rng)!)
            case 3: return .double([0.5, 2, -1].randomElement(using: &rng)!)
            case 4: return .bool(Bool.random(using: &rng))
            default: return .null
            }
        }
        var documents: [DocumentValue] = (1...60).map { id in
            var d = DocumentValue.object([("id", .int(Int64(id)))])
            for f in fields where Bool.random(using: &rng) { d = d.setting(randomValue(), at: f) }
            return d
        }
        try await store.write { [documents] ctx in
            for d in documents { try ctx.insert(d, into: "things") }
            try ctx.createIndex(IndexDefinition(name: "by_b", kind: .regular, fields: ["b"]), in: "things")
        }
        var indexed: FieldPath = "b"
        for round in 0..<12 {
            let f = fields.randomElement(using: &rng)!
            var g = fields.randomElement(using: &rng)!
            if g == f { g = FieldPath("z\(round)") }
            let kind = FieldConversion.allCases.randomElement(using: &rng)!
            let constant = randomValue()
            let step = Int.random(in: 0..<5, using: &rng)
            // The expected documents, or nil when the step must fail.
            var expected: [DocumentValue]? = documents
            switch step {
            case 0:
                if documents.contains(where: { $0[path: f] != nil && $0[path: g] != nil }) || f.isWithin(g)
                    || g.isWithin(f) { expected = nil } else {
                    expected = documents.map { d in d[path: f].map { d.removing(at: f).setting($0, at: g) } ?? d }
                }
            case 1:
                expected = documents.map { d in
                    (d[path: f] == nil || d[path: f] == .null) ? d.setting(constant, at: f) : d
                }
            case 2:
                expected = indexed.isWithin(f) ? nil : documents.map { $0.removing(at: f) }
            case 3:
                expected = try? documents.map { d in
                    guard let v = d[path: f], v != .null else { return d }
                    return d.setting(try kind.convert(v), at: f)
                }
            default:
                expected = documents.map { d in
                    guard case .int(let i)? = d[field: "id"], i % 3 == 0 else { return d }
                    return d.setting(.string("third"), at: "t")
                }
            }
            var ok = true
            let g2 = g
            do {
                try await store.applyMigration("m\(round)") { m in
                    switch step {
                    case 0: try m.renameField(f, to: g2, in: "things")
                    case 1: try m.addField(f, in: "things", value: constant)
                    case 2: try m.removeField(f, in: "things")
                    case 3: try m.convertField(f, in: "things", to: kind)
                    default:
                        try m.transformDocuments(in: "things") { d in
                            guard case .int(let i)? = d[field: "id"], i % 3 == 0 else { return d }
                            return d.setting(.string("third"), at: "t")
                        }
                    }
                }
            } catch let error as DocStoreError where error.code == .migrationFailed {
                ok = false
            }
            #expect(ok == (expected != nil), "round \(round), step \(step) on \(f) / \(g)")
            if let expected {
                documents = expected
                if step == 0, indexed.isWithin(f) { indexed = indexed.moved(from: f, to: g) }
            }
            let stored = try await Query<DocumentValue>("things").results(in: store)
            #expect(stored == documents, "round \(round), step \(step) on \(f) / \(g) (\(kind))")
            // The index on `b` follows the field when it is renamed, and answers as the documents in memory do.
            let b = indexed
            #expect(try await store.collections().first?.indexes.first?.fields == [b], "round \(round)")
            for value in [DocumentValue.int(1), .string("1"), .bool(true), .null] {
                let q = Query<DocumentValue>("things").include(.compare(b, .equal, value))
                // A missing field equals null, as in every query.
                let want = documents.filter { ($0[path: b] ?? .null) == value }.count
                #expect(try await q.count(in: store) == want, "\(b) == \(value.json()) after round \(round)")
            }
        }
        #expect(try await store.verify().isClean)
    }

    /// A conversion loses nothing it does not say it loses: an integer a Double cannot hold exactly is refused, and a
    /// date with a fraction of a second is written with it, so that it converts back to the same date.
    @Test func conversionsKeepWhatTheyConvert() throws {
        #expect(throws: (any Error).self) { _ = try FieldConversion.double.convert(.int(9_007_199_254_740_993)) }
        #expect(try FieldConversion.double.convert(.int(9_007_199_254_740_992)) == .double(9_007_199_254_740_992))
        let date = Date(timeIntervalSinceReferenceDate: 736_000_000.25)
        let text = try FieldConversion.string.convert(.date(date))
        #expect(try FieldConversion.date.convert(text) == .date(date), "\(text)")
        let whole = Date(timeIntervalSinceReferenceDate: 736_000_000)
        #expect(try FieldConversion.string.convert(.date(whole)) == .string("2024-04-28T12:26:40Z"))
    }

    @Test func convertFieldReadsDatesInISO8601OrInAFormat() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        try await store.write { ctx in
            try ctx.insert(.object([("id", .int(1)), ("day", .string("Jan 5 2013")), ("iso", .string("2013-01-05"))]),
                           into: "flights")
            try ctx.insert(.object([("id", .int(2)), ("day", .string("Dec 31 2013")), ("iso", .null)]), into: "flights")
            try ctx.insert(.object([("id", .int(3)), ("slashed", .string("2013/01/05 10:00 +0100"))]), into: "flights")
        }
        try await store.applyMigration("dates") { m in
            try m.convertField("day", in: "flights", to: .date, format: "MMM d yyyy")
            try m.convertField("iso", in: "flights", to: .date)
            try m.convertField("slashed", in: "flights", to: .date, format: "yyyy/MM/dd HH:mm Z")
        }
        let stored = try await Query<DocumentValue>("flights").results(in: store)
        let jan5 = Date(timeIntervalSince1970: 1_357_344_000)
        #expect(stored[0][field: "day"] == .date(jan5))
        #expect(stored[0][field: "iso"] == .date(jan5))
        #expect(stored[1][field: "day"] == .date(Date(timeIntervalSince1970: 1_388_448_000)))
        #expect(stored[1][field: "iso"] == .null)
        #expect(stored[2][field: "slashed"] == .date(Date(timeIntervalSince1970: 1_357_376_400)))
        // Text in another format fails the migration, naming the value and the format; nothing is written.
        try await store.write { try $0.insert(.object([("id", .int(4)), ("when", .string("2013-01-05"))]), into: "later") }
        try await store.write { try $0.insert(.object([("id", .int(5)), ("when", .string("Jan 6 2013"))]), into: "later") }
        do {
            try await store.applyMigration("bad") { m in
                try m.convertField("when", in: "later", to: .date, format: "MMM d yyyy")
            }
            Issue.record("a date in another format was converted")
        } catch let error as DocStoreError {
            #expect(error.code == .migrationFailed)
            #expect("\(error)".contains("\"2013-01-05\" is not a date written as MMM d yyyy"), "\(error)")
        }
        #expect(try await Query<DocumentValue>("later").results(in: store).map { $0[field: "when"] }
                == [.string("2013-01-05"), .string("Jan 6 2013")])
        // A format for another kind, or one that reads no whole date, is refused.
        for (kind, format) in [(FieldConversion.int, "yyyy"), (.date, "MM/dd")] {
            await #expect(throws: DocStoreError.self) {
                try await store.applyMigration("format \(kind) \(format)") { m in
                    try m.convertField("when", in: "later", to: kind, format: format)
                }
            }
        }
    }

    @Test func migrationsAreRecordedAndRunOnce() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        var migrator = Migrator()
        migrator.registerMigration("seed") { m in
            try m.context.insert(.object([("id", .int(1)), ("n", .int(0))]), into: "counters")
        }
        migrator.registerMigration("bump") { m in
            try m.convertField("n", in: "counters") { v in
                guard case .int(let i) = v else { return v }
                return .int(i + 1)
            }
        }
        migrator.registerMigration("later") { _ in }
        #expect(try await migrator.migrate(store, upTo: "bump") == ["seed", "bump"])
        #expect(try await migrator.pendingMigrations(in: store) == ["later"])
        #expect(try await store.knownMigrations() == ["seed", "bump", "later"])
        // Many callers at once: each migration still runs once.
        let all = migrator
        try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<8 { group.addTask { try await all.migrate(store) } }
            var ran: [String] = []
            for try await names in group { ran += names }
            #expect(ran == ["later"])
        }
        #expect(try await store.read { try $0.get("counters", id: .int(1)) }?[field: "n"] == .int(1))
        #expect(try await store.appliedMigrations().map(\.name) == ["seed", "bump", "later"])

        // A migrator that lacks one the store applied leaves it be, as GRDB's does, and says it was superseded.
        var fewer = Migrator()
        fewer.registerMigration("seed") { _ in }
        #expect(try await fewer.migrate(store).isEmpty)
        #expect(try await fewer.hasBeenSuperseded(store))
        #expect(try await !migrator.hasBeenSuperseded(store))
        // Up to a migration the store is past: refused.
        await #expect(throws: DocStoreError.self) { try await migrator.migrate(store, upTo: "seed") }
        // A name registered twice is refused.
        var twice = Migrator()
        twice.registerMigration("x") { _ in }
        twice.registerMigration("x") { _ in }
        await #expect(throws: DocStoreError.self) { try await twice.migrate(store) }
        await #expect(throws: DocStoreError.self) { try await migrator.migrate(store, upTo: "nope") }
    }

    @Test func aRenamedMigrationIsANewOneThatRunsAgainAndTheStoreIsSuperseded() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        func bump(_ name: String) -> Migrator {
            var migrator = Migrator()
            migrator.registerMigration(name) { m in
                try m.context.save(.object([("id", .int(1)), ("n", .int(0))]), into: "counters")
                try m.convertField("n", in: "counters") { v in if case .int(let i) = v { .int(i + 1) } else { v } }
            }
            return migrator
        }
        #expect(try await bump("v1").migrate(store) == ["v1"])
        let renamed = bump("v1-counters")
        // As the article says: the store's v1 is not this migrator's, which reports it, and the renamed one runs.
        #expect(try await renamed.hasBeenSuperseded(store))
        #expect(try await renamed.pendingMigrations(in: store) == ["v1-counters"])
        #expect(try await renamed.migrate(store) == ["v1-counters"])
        #expect(try await store.appliedMigrations().map(\.name) == ["v1", "v1-counters"])
        #expect(try await renamed.migrate(store).isEmpty)
    }

    @Test func openingWithAMigratorMigratesOrClosesTheStore() async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "opened.db")
        var good = Migrator()
        good.registerMigration("seed") { m in try m.context.insert(.object([("id", .int(1))]), into: "items") }
        do {
            let store = try await openStore(path, migrator: good)
            #expect(try await Query<DocumentValue>("items").count(in: store) == 1)
            await store.close()
        }
        var bad = good
        bad.registerMigration("fails") { m in
            try m.context.insert(.object([("id", .int(2))]), into: "items")
            try m.convertField("id", in: "items", to: .string)
        }
        await #expect(throws: DocStoreError.self) { _ = try await openStore(path, migrator: bad) }
        // The failed open closed the store: it opens again, as it was.
        let store = try await openStore(path)
        #expect(try await Query<DocumentValue>("items").count(in: store) == 1)
        #expect(try await store.appliedMigrations().map(\.name) == ["seed"])
    }

    @Test func aReadOnlyStoreOpensWithAMigratorItHasHadAndIsRefusedOneItHasNot() async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "ro.db")
        var migrator = Migrator()
        migrator.registerMigration("one") { m in try m.context.insert(.object([("id", .int(1))]), into: "items") }
        do {
            let store = try await openStore(path, migrator: migrator)
            await store.close()
        }
        var options = DocStore.Options()
        options.readOnly = true
        let store = try await openStore(path, options: options, migrator: migrator)
        #expect(try await Query<DocumentValue>("items").count(in: store) == 1)
        await store.close()
        migrator.registerMigration("two") { _ in }
        do {
            _ = try await openStore(path, options: options, migrator: migrator)
            Issue.record("a read-only store was given a migration")
        } catch let error as DocStoreError {
            #expect(error.code == .readOnly)
            #expect(error.message.contains("'two'"), "\(error)")
        }
    }

    @Test func aChangedMigrationErasesTheStoreOnlyWhenAsked() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        func migrator(default value: Int64, erase: Bool) -> Migrator {
            var m = Migrator()
            m.eraseStoreOnSchemaChange = erase
            m.registerMigration("v1") { m in
                try m.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "items")
                try m.addField("n", in: "items", value: .int(value))
            }
            return m
        }
        try await migrator(default: 1, erase: true).migrate(store)
        try await store.write { ctx in try ctx.insert(.object([("id", .int(1))]), into: "items") }
        // Unchanged: nothing is erased.
        #expect(try await migrator(default: 1, erase: true).migrate(store).isEmpty)
        #expect(try await Query<DocumentValue>("items").count(in: store) == 1)
        // Changed, without the option: the store keeps what it has (the change cannot be seen without running).
        #expect(try await migrator(default: 2, erase: false).migrate(store).isEmpty)
        #expect(try await Query<DocumentValue>("items").count(in: store) == 1)
        // Changed, with the option: erased, and every migration run again.
        #expect(try await migrator(default: 2, erase: true).migrate(store) == ["v1"])
        #expect(try await Query<DocumentValue>("items").count(in: store) == 0)
        #expect(try await store.appliedMigrations().first?.steps.last == "add field items.n = 2")
        #expect(try await store.collections().first?.indexes.map(\.name) == ["n"])
    }
}

/// Several processes that open one store at once, each with the same migrator: each migration runs once.
@Suite(.ownThreads) struct MigrationAcrossProcessesTests {
    @Test func fourProcessesMigratingAtOnceRunEachMigrationOnce() async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "shared.db")
        do {
            let store = try await openStore(path)
            try await store.write { ctx in
                for i in 0..<3000 { try ctx.insert(.object([("id", .int(Int64(i)))]), into: "items") }
            }
            await store.close()
        }
        var children: [(ChildProcess, Pipe)] = []
        for _ in 0..<4 {
            let process = ChildProcess()
            process.executableURL = ObservationTests.writerURL
            process.arguments = ["migrate", path]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            children.append((process, output))
        }
        var ran: [String] = []
        for (process, output) in children {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(text)")
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("migrated ") }) {
                ran += line.dropFirst("migrated ".count).split(separator: ",").map(String.init)
            }
        }
        #expect(ran.sorted() == SharedMigrations.names.sorted(), "\(ran)")
        let store = try await openStore(path)
        let runs = try await store.read { try $0.get("counters", id: .string("runs")) }
        for name in SharedMigrations.names { #expect(runs?[field: name] == .int(1), "\(runs?.json() ?? "none")") }
        #expect(try await store.appliedMigrations().map(\.name) == SharedMigrations.names)
        #expect(try await Query<DocumentValue>("items").include(.compare("three", .equal, .bool(true))).count(in: store)
                == 3000)
        #expect(try await store.verify().isClean)
    }
}
