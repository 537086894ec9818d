// The Swift blocks of the doc comments in Sources/DocStore, word for word, each in a scope of its own after what it
// assumes. DocumentationTests checks that every block is here; building this target checks that they compile.

import DocStore
import Foundation

/// The doc comments' examples, with the model they use.
enum CodeExamples {
    enum Status: String, Codable, Sendable { case active, away }

    /// The doc comments' model: the README's, without a score and with a status.
    struct Person: Document {
        var id: UUID
        var name: String
        var age: Int
        var city: String
        var email: String?
        var tags: [String]
        var status: Status = .active
        var score: Double = 0
        static let collection = "people"
    }

    // Sources/DocStore/Codec/DocumentDecoder.swift
    static func documentDecoder1() async throws {
        let person = Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: nil, tags: [])
        let bytes = try DocumentEncoder().encode(person)
        let copy = try DocumentDecoder().decode(Person.self, from: bytes)
        _ = (person, bytes, copy)
    }

    // Sources/DocStore/Codec/DocumentEncoder.swift
    static func documentEncoder1() async throws {
        let person = Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: nil, tags: [])
        let bytes = try DocumentEncoder().encode(person)
        let value = try DocumentValue(encoded: bytes)   // the same document, without its type
        _ = (person, bytes, value)
    }

    // Sources/DocStore/Codec/DocumentValue+Literals.swift
    static func documentValueLiterals1() async throws {
        let store = try await exampleStore()
        let people = Query<DocumentValue>("people")
        try await people.update(in: store, set: ["city": "Bergen", "score": 9.5])
        let ann: DocumentValue = ["id": 1, "name": "Ann", "tags": ["swift"]]
        _ = (store, people, ann)
    }

    // Sources/DocStore/Codec/DocumentValue.swift
    static func documentValue1() async throws {
        let value: DocumentValue = .object([("name", .string("Ann")), ("age", .int(41))])
        print(value.json())   // {"name":"Ann","age":41}
        _ = value
    }

    // Sources/DocStore/Codec/FieldPath.swift
    static func fieldPath1() async throws {
        let path = FieldPath("address.city")
        print(path.components)   // ["address", "city"]
        _ = path
    }

    // Sources/DocStore/Codec/KeyEncoder.swift
    static func keyEncoder1() async throws {
        var key = KeyEncoder()
        key.append(.string("Oslo"))
        key.append(.int(42))
        // key.bytes sorts after every ("Oslo", n) with n < 42 and before every ("Oslo", n) with n > 42
    }

    // Sources/DocStore/DocStoreError.swift
    static func docStoreError1() async throws {
        let store = try await exampleStore()
        let person = Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: nil, tags: [])
        do {
            try await store.insert(person)
        } catch DocStoreError.uniqueViolation {
            print("someone already has that email")
        } catch {
            print(error)   // the message names the collection, index and value
        }
        _ = (store, person)
    }

    // Sources/DocStore/Planning/Filter.swift
    static func filter1() async throws {
        let store = try await exampleStore()
        let adultsInOslo: Filter = .and([
            .compare("age", .greaterOrEqual, .int(18)),
            .compare("address.city", .equal, .string("Oslo")),
        ])
        let n = try await store.read { try Query<DocumentValue>("people").include(adultsInOslo).count(in: $0) }
        _ = (store, adultsInOslo, n)
    }

    // Sources/DocStore/Planning/Filter.swift
    static func filter2() async throws {
        let late: Filter = .compare(.field("depDelay") ?? .literal(.int(0)), .greater, .field("arrDelay") * .literal(.int(2)))
        _ = late
    }

    // Sources/DocStore/Query/MatchedDocuments.swift
    static func matchedDocuments1() async throws {
        let store = try await exampleStore()
        func ask(_ question: String) -> Bool { !question.isEmpty }
        let stale = Query<DocumentValue>("people").include(.compare("age", .greater, .int(90)))
        let matched = try await store.read { try stale.matchedDocuments(in: $0) }
        guard ask("Delete \(matched.count) documents?") else { return }
        try await store.write { ctx in
            try matched.requireUnchanged(in: ctx)          // or nothing is deleted
            for id in matched.ids { try ctx.delete("people", id: id) }
        }
        _ = (store, stale, matched)
    }

    // Sources/DocStore/Query/Query+Aggregates.swift
    static func queryAggregates1() async throws {
        let store = try await exampleStore()
        let perCity = try await Person.query().groupBy(\.city).results(in: store)          // [Group(key: "Bergen", value: 120), ...]
        let top10 = try await Person.query().groupBy(\.city).sortBy(.value, order: .reverse)[0..<10].results(in: store)
        let ages = try await Person.query().groupBy(\.city, .average(\.age)).results(in: store)
        _ = (store, perCity, top10, ages)
    }

    // Sources/DocStore/Query/Query+Observation.swift
    static func queryObservation1() async throws {
        let store = try await exampleStore()
        func render(_ people: [Person]) { print(people.count) }
        for try await adults in Person.include(#Predicate { $0.age >= 18 }).sortBy(\.name).observe(in: store) {
            render(adults)
        }
        _ = store
    }

    // Sources/DocStore/Query/Query+Select.swift
    static func querySelect1() async throws {
        let store = try await exampleStore()
        struct NameAndAge: Decodable { var name: String; var age: Int }
        let rows = try await Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age).results(in: store)
        let typed = try await Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age)
            .decoded(as: NameAndAge.self).results(in: store)
        _ = (store, rows, typed)
    }

    // Sources/DocStore/Query/Query+Verbs.swift
    static func queryVerbs1() async throws {
        let store = try await exampleStore()
        try await store.read { ctx in
            let adults = try Person.include(#Predicate { $0.age >= 18 }).cursor(in: ctx)
            while let person = try adults.next() { print(person.name) }
        }
        _ = store
    }

    // Sources/DocStore/Query/Query+Verbs.swift
    static func queryVerbs2() async throws {
        let store = try await exampleStore()
        let jill = try await Person.include(#Predicate { $0.name == "Jill" }).findOrCreate(in: store) {
            Person(id: UUID(), name: "Jill", age: 30, city: "Bergen", email: nil, tags: [])
        }
        _ = (store, jill)
    }

    // Sources/DocStore/Query/Query.swift
    static func query1() async throws {
        let store = try await exampleStore()
        let adults = Person
            .include(#Predicate { $0.age >= 18 })
            .exclude(#Predicate { $0.city == "Oslo" })
            .sortBy(\.age)                       // then by name within an age:
            .sortBy(\.name, order: .reverse)
        let page = try await adults[20..<40].results(in: store)

        let sameAsValues = try await Query<DocumentValue>("people")
            .include(.compare("age", .greaterOrEqual, .int(18)))
            .sortBy("age")[0..<10]
            .results(in: store)
        _ = (store, adults, page, sameAsValues)
    }

    // Sources/DocStore/Schema/Document.swift
    static func document1() async throws {
        struct Person: Document {
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
        }
    }

    // Sources/DocStore/Schema/IndexSpec.swift
    static func indexSpec1() async throws {
        struct Person: Document {
            var id: UUID
            var name: String
            var age: Int
            var city: String
            var email: String?
            var tags: [String]
            var status: Status
            static let indexes: [IndexSpec<Person>] = [
                .index("age", \.age),                    // single field
                .index("city_age", \.city, \.age),       // compound: city, then age
                .unique("email", \.email),               // nil emails are not indexed
                .multi("tags", \.tags),                  // one entry per tag
                .index("status", .field(\.status, path: "status")),   // a field whose path cannot be derived
            ]
        }
    }

    // Sources/DocStore/Query/SavedFilter.swift
    static func savedFilter1() async throws {
        let store = try await exampleStore()
        let adults = SavedFilter(name: "adults",
                                 query: Query<DocumentValue>("people").include(.compare("age", .greaterOrEqual, .int(18))))
        try await store.write { try $0.saveFilter(adults) }
        let n = try await store.read { try $0.savedFilter(named: "adults")?.query.count(in: $0) }
        _ = (store, n)
    }

    // Sources/DocStore/Collections/Context+Catalog.swift
    static func contextCatalog1() async throws {
        let store = try await exampleStore()
        try await store.write { try $0.createIndex(IndexDefinition(name: "age", kind: .regular, fields: ["age"]), in: "people") }
        _ = store
    }

    // Sources/DocStore/Collections/Context+Catalog.swift
    static func contextCatalog2() async throws {
        let store = try await exampleStore()
        let left = try await store.dryRun { ctx in
            try Query<DocumentValue>("people").include(.compare("age", .less, .int(13))).delete(in: ctx)
            return try Query<DocumentValue>("people").count(in: ctx)
        }
        _ = (store, left)
    }

    // Sources/DocStore/Collections/Context+Untyped.swift
    static func contextUntyped1() async throws {
        let store = try await exampleStore()
        let ann = try await store.read { ctx in try ctx.get("people", id: .string("ann")) }
        print(ann?.json() ?? "none")
        _ = (store, ann)
    }

    // Sources/DocStore/Collections/Context.swift
    static func context1() async throws {
        let store = try await exampleStore()
        let annID = UUID()
        let ann = try await store.read { ctx in try ctx.get(Person.self, id: annID) }
        _ = (store, annID, ann)
    }

    // Sources/DocStore/Collections/Context.swift
    static func context2() async throws {
        let store = try await exampleStore()
        let id = UUID()
        let n = try await store.write { ctx in
            guard var p = try ctx.get(Person.self, id: id) else { return 0 }
            p.age += 1
            try ctx.save(p)
            return try Person.query().count(in: ctx)
        }
        _ = (store, id, n)
    }

    // Sources/DocStore/Maintenance/DocStore+Backup.swift
    static func docStoreBackup1() async throws {
        let store = try await exampleStore()
        let day = "monday"
        try await store.backup(to: "/var/backups/people-\(day).db")
        _ = (store, day)
    }

    // Sources/DocStore/Maintenance/DocStore+Backup.swift
    static func docStoreBackupSpace() async throws {
        let store = try await exampleStore()
        let usage = try await store.spaceUsage()
        if usage.reclaimableBytes > usage.fileBytes / 2 { print("compacting would give back \(usage.reclaimableBytes) bytes") }
        _ = (store, usage)
    }

    // Sources/DocStore/Maintenance/DocStore+Backup.swift
    static func docStoreBackup2() async throws {
        let (before, after) = try await DocStore.compact(path: "people.db")
        _ = (before, after)
    }

    // Sources/DocStore/Maintenance/DocStore+Check.swift
    static func docStoreCheck1() async throws {
        let store = try await exampleStore()
        let check = try await store.check(Person.self)
        if !check.isClean { print(check) }      // document 42: field 'email': missing
        _ = (store, check)
    }

    // Sources/DocStore/Observation/DocStore+Observation.swift
    static func docStoreObservation1() async throws {
        let store = try await exampleStore()
        let ann = Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: nil, tags: [])
        for try await state in store.observe(Person.self, id: ann.id) {
            switch state {
            case .existing(let p): print("now", p.name)
            case .gone(let last): print(last.name, "was deleted")
            case .missing: print("no such person")
            }
        }
        _ = (store, ann)
    }

    // Sources/DocStore/Maintenance/DocStore+Recover.swift
    static func docStoreRecover1() async throws {
        let report = try await DocStore.recover(from: "damaged.db", to: "recovered.db")
        print(report)   // per collection: documents copied and lost, indexes rebuilt; the damage met; the totals
        _ = report
    }

    // Sources/DocStore/Observation/DocStore+Requests.swift
    static func docStoreRequests1() async throws {
        let store = try await exampleStore()
        func show(_ names: [String]) { print(names) }
        struct AdultsRequest: StoreRequest {
            var minimumAge = 18
            var byName = true
            func fetch(_ ctx: ReadContext) throws -> [String] {
                let age = minimumAge
                let q = Person.include(#Predicate { $0.age >= age })
                return try (byName ? q.sortBy(\.name) : q.sortBy(\.age)).results(in: ctx).map(\.name)
            }
        }
        for try await names in store.observe(AdultsRequest()) { print(names) }
        let (requests, next) = AsyncStream.makeStream(of: AdultsRequest.self)
        next.yield(AdultsRequest(byName: true))
        Task { for try await names in store.observe(requests: requests) { show(names) } }
        next.yield(AdultsRequest(byName: false))   // the names again, by age, once
        _ = (store, requests, next)
    }

    // Sources/DocStore/Maintenance/DocStore+Verify.swift
    static func docStoreVerify1() async throws {
        let store = try await exampleStore()
        let report = try await store.verify()
        if !report.isClean { print(report) }   // one line per problem, naming collection, index and document
        _ = (store, report)
    }

    // Sources/DocStore/Store/DocStore.swift
    static func docStore1() async throws {
        let store = try await DocStore(path: "people.db")          // creates or opens
        try await store.insert(Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: nil, tags: ["swift"]))
        let total = try await Person.query().count(in: store)
        _ = (store, total)
    }

    // Sources/DocStore/Store/DocStore.swift
    static func docStore2() async throws {
        var options = DocStore.Options()
        options.readOnly = true
        let archive = try await DocStore(path: "/mnt/backup/people.db", options: options)
        _ = archive
    }

    // Sources/DocStore/Store/DocStore.swift
    static func docStore3() async throws {
        var options = DocStore.Options()
        options.durability = .normal          // one sync per commit
        let store = try await DocStore(path: "/var/lib/app/events.db", options: options)
        _ = store
    }

    // Sources/DocStore/Store/DocStore.swift
    static func docStore4() async throws {
        var options = DocStore.Options()
        options.maximumMapSize = 8 << 30
        let store = try await DocStore(path: "/var/lib/app/people.db", options: options)
        _ = store
    }

    // Sources/DocStore/Store/DocStore.swift
    static func docStore5() async throws {
        let path = examplePath()
        var migrator = Migrator()
        migrator.registerMigration("v2") { m in try m.renameField("name", to: "fullName", in: "people") }
        let store = try await DocStore(path: path, migrator: migrator)
        _ = (path, store)
    }

    // Sources/DocStore/Migrations/Migrator.swift
    static func docStore7() async throws {
        let store = try await exampleStore()
        let (adults, total) = try await store.read { ctx in
            (try Person.include(#Predicate { $0.age >= 18 }).count(in: ctx), try Person.query().count(in: ctx))
        }
        _ = (store, adults, total)
    }

    // Sources/DocStore/Store/DocStore.swift
    static func docStore8() async throws {
        let store = try await exampleStore()
        let id = UUID()
        let n = try await store.write { ctx in
            guard var p = try ctx.get(Person.self, id: id) else { return 0 }
            p.age += 1
            try ctx.save(p)
            return try Person.query().count(in: ctx)
        }
        _ = (store, id, n)
    }

    // Sources/DocStore/Store/DocStore.swift
    static func docStore9() async throws {
        let store = try await exampleStore()
        try await store.insert(Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: []))
        _ = store
    }

    // Sources/DocStore/Migrations/MigrationContext.swift
    static func migrationContext1() async throws {
        var migrator = Migrator()
        migrator.registerMigration("split") { m in
            try m.splitField("name", into: ["first", "last"], in: "people") { name in
                guard case .string(let s) = name else { return [nil, nil] }
                let parts = s.split(separator: " ", maxSplits: 1).map { DocumentValue.string(String($0)) }
                return [parts.first, parts.count > 1 ? parts[1] : nil]
            }
        }
    }

    // Sources/DocStore/Migrations/Migrator.swift
    static func migrator1() async throws {
        let store = try await exampleStore()
        var migrator = Migrator()
        migrator.registerMigration("v2") { m in
            try m.renameField("name", to: "fullName", in: "people")
            try m.addField("initials", in: "people") { person in
                guard case .string(let name)? = person[field: "fullName"] else { return nil }
                return .string(String(name.prefix(1)))
            }
            try m.convertField("zip", in: "people", to: .int)
            try m.createIndex(IndexDefinition(name: "zip", kind: .regular, fields: ["zip"]), in: "people")
        }
        try await migrator.migrate(store)
        _ = store
    }

    // The one-line examples of the doc comments (`For example: ...`), each in a scope of its own.
    enum Airport: String, Codable, Sendable { case EWR, JFK, LGA }
    struct Flight: Document {
        var id: Int
        var origin: Airport
        var dest: Airport?
        static let collection = "flights"
    }

    static func inlineExamples() async throws {
        let store = try await exampleStore()
        let filter: Filter = .compare("age", .greater, .int(20))
        let q = Query<DocumentValue>("people")
        let people = q
        let search = "ann"
        let group = try await Query<DocumentValue>("flights").groupBy("origin").results(in: store)[0]
        do { // Filter.swift
            let example: Filter = .compare("age", .less, .int(13))
            _ = example
        }
        do { // Filter.swift
            let example: Filter = .contains("tags", .string("swift"))
            _ = example
        }
        do { // Filter.swift
            let example: Filter = .containsText("name", "nn")
            _ = example
        }
        do { // Filter.swift
            let example: Filter = .oneOf("city", [.string("Oslo"), .string("Bergen")])
            _ = example
        }
        do { // Filter.swift
            let example: Filter = .hasPrefix("name", "An")
            _ = example
        }
        do { // Filter.swift
            _ = Person.query().include(.equalIgnoringCase("city", "oslo"))
        }
        do { // Filter.swift
            _ = try await Person.query().include(.containsIgnoringCase("name", search)).results(in: store)
        }
        do { // Filter.swift
            let example: Filter = .compare(.field("arrDelay"), .greater, .field("depDelay"))
            _ = example
        }
        do { // Query+Aggregates.swift
            try await store.write { ctx in
                _ = try Query<DocumentValue>("people").aggregate(.sum("score")).value(in: ctx)
            }
        }
        do { // Query+Aggregates.swift
            try await store.write { ctx in
                _ = try Query<DocumentValue>("people").distinct("city").results(in: ctx)
            }
        }
        do { // Query+Aggregates.swift
            try await store.write { ctx in
                _ = try Query<DocumentValue>("people").groupBy("city", "active").results(in: ctx)
            }
        }
        do { // Query+Aggregates.swift
            let origin = try group.key[0].decoded(as: Airport.self)
            _ = origin
        }
        do { // Query+Aggregates.swift
            try await store.write { ctx in
                let total = try Person.query().aggregate(.sum(\.score)).value(in: ctx)
                _ = total
            }
        }
        do { // Query+Aggregates.swift
            try await store.write { ctx in
                let mean = try Person.include(#Predicate { $0.city == "Oslo" }).aggregate(.average(\.age)).value(in: ctx)
                _ = mean
            }
        }
        do { // Query+Aggregates.swift
            try await store.write { ctx in
                let oldest = try Person.query().aggregate(.max(\.age)).value(in: ctx)
                _ = oldest
            }
        }
        do { // Query+Aggregates.swift
            try await store.write { ctx in
                let cities = try Person.query().distinct(\.city).results(in: ctx)
                _ = cities
            }
        }
        do { // Query+Aggregates.swift
            let perCity = try await Person.query().groupBy(\.city).results(in: store)
            _ = perCity
        }
        do { // Query+Aggregates.swift
            let perRoute = try await Flight.query().groupBy(\.origin, \.dest).results(in: store)
            _ = perRoute
        }
        do { // Query+Aggregates.swift
            let ages = try await Person.query().groupBy(\.city, .average(\.age)).results(in: store)
            _ = ages
        }
        do { // Query+Aggregates.swift
            _ = Person.query().groupBy(\.city).sortBy(.value, order: .reverse)[0..<10]
        }
        do { // Query+Aggregates.swift
            _ = Query<DocumentValue>("people").groupBy(["city"], .average("age"))
        }
        do { // Query+Aggregates.swift
            _ = Person.query().aggregate(.average(\.age))
        }
        do { // Query+Verbs.swift
            let total = try await Person.query().aggregate(.sum(\.score)).value(in: store)
            _ = total
        }
        do { // Query.swift
            struct NameAndAge: Decodable { var name: String; var age: Int }
            _ = try await Person.query().select(\.name, \.age).decoded(as: NameAndAge.self).results(in: store)
        }
        do { // Query+Observation.swift
            for try await n in Person.query().observeCount(in: store) { print(n) }
        }
        do { // Query+Select.swift
            _ = Query<DocumentValue>("people").include(filter).select("name", "address.city")
        }
        do { // Query+Select.swift
            _ = Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age)
        }
        do { // Query+Update.swift
            try await store.write { ctx in
                _ = try Query<DocumentValue>("people").include(filter).update(in: ctx, [.set("city", .string("Bergen"))])
            }
        }
        do { // Query+Update.swift
            try await store.write { ctx in
                _ = try q.update(in: ctx, set: ["city": .string("Bergen")], increment: ["age": .int(1)])
            }
        }
        do { // Query+Update.swift
            _ = try await people.include(filter).update(in: store, set: ["city": .string("Bergen")], increment: ["age": .int(1)])
        }
        do { // Query+Update.swift
            try await store.write { ctx in
                _ = try Person.include(#Predicate { $0.city == "Oslo" }).update(in: ctx) { $0.city = "Bergen" }
            }
        }
        do { // Query+Update.swift
            let moved = try await Person.include(#Predicate { $0.city == "Oslo" }).update(in: store) { $0.city = "Bergen" }
            _ = moved
        }
        do { // Query+Verbs.swift
            try await store.write { ctx in
                print(try Person.include(#Predicate { $0.age >= 18 }).explain(in: ctx))
            }
        }
        do { // Query+Verbs.swift
            _ = try await Person.sortBy(\.age)[0..<10].results(in: store)
        }
        do { // Query+Verbs.swift
            print(try await q.explain(in: store))
        }
        do { // Query+Verbs.swift
            try await store.write { ctx in
                let ids = try Person.include(#Predicate { $0.age < 18 }).ids(in: ctx)
                _ = ids
            }
        }
        do { // Query.swift
            _ = Query<DocumentValue>("people").include(.compare("age", .greaterOrEqual, .int(18)))
        }
        do { // Query.swift
            _ = Query<DocumentValue>("people").sortBy("age").sortBy("name", order: .reverse)
        }
        do { // Query.swift
            _ = try await Person.sortBy(\.age).reverse().first(in: store)
        }
        do { // Query.swift
            _ = Person.sortBy(\.name)[0..<10]
        }
        do { // Query.swift
            _ = try await Person.include(#Predicate { $0.age > 40 }).decoded(as: DocumentValue.self).first(in: store)?.json()
        }
        do { // Query.swift
            _ = try await Query<DocumentValue>("people").include(filter).decoded(as: Person.self).results(in: store)
        }
        do { // Query.swift
            _ = try await Query<DocumentValue>("people").count(in: store)
        }
        do { // Query.swift
            _ = Person.query().include(#Predicate { $0.age >= 18 && $0.tags.contains("swift") })
        }
        do { // Query.swift
            _ = Person.query().exclude(#Predicate { $0.city == "Oslo" })
        }
        do { // Query.swift
            _ = Person.sortBy(\.age).sortBy(\.name, order: .reverse)
        }
        do { // Query.swift
            _ = Flight.sortBy(\.origin)
        }
        do { // Query.swift
            _ = try await Person.query().count(in: store)
        }
        do { // DocStore.swift
            _ = try await store.prepare(Person.self)
        }
        _ = (filter, people, search, group)
    }
}
