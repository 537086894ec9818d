// The Swift blocks of the README and the DocC articles, word for word, each in a scope of its own after what it
// assumes (a store, a value it names). DocumentationTests checks that every block is here; building this target
// checks that they compile. They are not run.

import DocStore
import DocStorePostgres
import Foundation

/// The README's model.
struct Person: Document {
    var id: UUID
    var name: String
    var age: Int
    var city: String
    var email: String?
    var tags: [String]
    var score: Double
    static let collection = "people"
}

/// A smaller Decodable for a projection.
struct NameAndAge: Decodable, Sendable {
    var name: String
    var age: Int
}

func examplePath() -> String { NSTemporaryDirectory() + "docstore-examples-\(UUID()).db" }
func exampleStore() async throws -> DocStore { try await DocStore(path: examplePath()) }
func render(_ people: [Person]) { print(people.count) }

enum Examples {
    // README.md
    static func readmeTour() async throws {
        struct Person: Document {                 // Document = Codable & Sendable & Identifiable
            var id: UUID
            var name: String
            var age: Int
            var city: String
            var email: String?
            var tags: [String]
            var score: Double
            static let collection = "people"       // defaults to the type's name
            static let indexes: [IndexSpec<Person>] = [
                .index("age", \.age),
                .index("city_age", \.city, \.age),  // compound: by city, then age
                .unique("email", \.email),          // nil is not indexed: many people may lack an email
                .multi("tags", \.tags),             // one entry per tag
            ]
        }

        let store = try await DocStore(path: "people.db")             // creates or opens
        let ann = Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: ["swift"], score: 7.5)
        try await store.insert(ann)                                    // fails on an existing id or a unique conflict
        try await store.save(ann)                                      // insert or replace by id
        let same = try await store.get(Person.self, id: ann.id)        // nil when absent
        let more = (1...3).map { Person(id: UUID(), name: "P\($0)", age: 20 + $0, city: "Bergen", email: nil, tags: [], score: 0) }
        try await store.insert(contentsOf: more)                       // one transaction: all or none
        let n = try await store.write { ctx in                         // several steps, one write transaction
            guard var p = try ctx.get(Person.self, id: ann.id) else { return 0 }
            p.age += 1
            try ctx.save(p)
            return try Person.query().count(in: ctx)                   // O(1)
        }
        try await store.prepare(Person.self)                           // collection and declared indexes, ahead of reads
        try await store.delete(Person.self, id: ann.id)
        print(try await store.verify())                   // the file's pages, then every document and index entry checked
        _ = (store, ann, same, more, n)
    }

    // README.md
    static func readmeQueries() async throws {
        let store = try await exampleStore()
        let adults = Person.include(#Predicate { $0.age >= 18 })
            .exclude(#Predicate { $0.city == "Oslo" })
            .sortBy(\.age)                              // cumulative: by age, then by name within an age
            .sortBy(\.name, order: .reverse)
        let page   = try await adults[20..<40].results(in: store)        // [Person]
        let oldest = try await adults.reverse().first(in: store)         // reverse() flips every ordering
        let anyone = try await Person.query().any(in: store)
        let ids    = try await adults.ids(in: store)                     // [UUID], in order
        let swifty = try await Person.include(#Predicate { $0.tags.contains("swift") }).count(in: store)
        let jill   = try await Person.include(#Predicate { $0.name == "Jill" }).findOrCreate(in: store) {
            Person(id: UUID(), name: "Jill", age: 30, city: "Bergen", email: nil, tags: [], score: 0)
        }                                                                // atomic: concurrent callers make one Jill
        let gone   = try await Person.include(#Predicate { $0.age < 13 }).delete(in: store)   // number deleted
        print(try await adults[0..<10].explain(in: store))
        try await store.read { ctx in                                    // synchronous, one transaction
            let people = try adults.cursor(in: ctx)                      // streams, decoding as it goes
            while let p = try people.next() { print(p.name) }
        }
        _ = (store, adults, page, oldest, anyone, ids, swifty, jill, gone)
    }

    // README.md
    static func readmeUniqueConflict() async throws {
        let store = try await exampleStore()
        let bob = Person(id: UUID(), name: "Bob", age: 30, city: "Oslo", email: "ann@example.com", tags: [], score: 1)
        do { try await store.insert(bob) }
        catch DocStoreError.uniqueViolation { print("that email is taken") }
        // unique index 'email' of collection 'people' already has "ann@example.com" for another document
        _ = (store, bob)
    }

    // README.md
    static func readmeAggregates() async throws {
        let store = try await exampleStore()
        let total   = try await Person.query().aggregate(.sum(\.score)).value(in: store)   // 0 when there is nothing
        let mean    = try await Person.include(#Predicate { $0.city == "Oslo" })
            .aggregate(.average(\.age)).value(in: store)                                   // nil when empty
        let oldest  = try await Person.query().aggregate(.max(\.age)).value(in: store)     // one step along the age index
        let cities  = try await Person.query().distinct(\.city).results(in: store)         // ["Bergen", "Oslo", ...], key order
        let perCity = try await Person.query().groupBy(\.city).results(in: store)          // [Group(key: "Bergen", value: 120), ...]
        let top10   = try await Person.query().groupBy(\.city)
            .sortBy(.value, order: .reverse)[0..<10].results(in: store)
        let ages    = try await Person.query().groupBy(\.city, .average(\.age)).results(in: store)   // Group<String, Double?>
        let names   = try await Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age).results(in: store)
        let rows    = try await Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age)
            .decoded(as: NameAndAge.self).results(in: store)                              // a smaller Decodable
        let moved   = try await Person.include(#Predicate { $0.city == "Oslo" }).update(in: store) { $0.city = "Bergen" }
        let bumped  = try await Query<DocumentValue>("people").include(.compare("city", .equal, .string("Bergen")))
            .update(in: store, set: ["active": .bool(true)], increment: ["age": .int(1)])   // no Swift type
        let perCityAndFlag = try await Query<DocumentValue>("people").groupBy(["city", "active"], .average("age")).results(in: store)
        print(try await Person.query().groupBy(\.city).explain(in: store))
        _ = (store, total, mean, oldest, cities, perCity, top10, ages, names, rows, moved, bumped, perCityAndFlag)
    }

    // README.md
    static func readmePostgres() async throws {
        let store = try await DocStore(postgres: "postgres://app:secret@db.internal:5432/app?schema=people")
        _ = store
    }

    // Sources/DocStorePostgres/DocStore+Postgres.swift
    static func postgresMigrator() async throws {
        var migrator = Migrator()
        migrator.registerMigration("v2") { m in try m.renameField("name", to: "fullName", in: "people") }
        let store = try await DocStore(postgres: "postgres://app@db.internal/app", migrator: migrator)
        _ = store
    }

    // README.md
    static func readmeDurability() async throws {
        var options = DocStore.Options()
        options.durability = .normal
        let store = try await DocStore(path: "/var/lib/app/events.db", options: options)
        try await store.flush()                 // at a moment that matters: every returned write durable now
        _ = store
    }

    // Sources/DocStore/DocStore.docc/Transactions.md
    static func transactionsExclusive() async throws {
        var options = DocStore.Options()
        options.durability = .off
        options.exclusive = true                // one process: pages written in place
        let cache = try await DocStore(path: "/var/cache/app/pages.db", options: options)
        _ = cache
    }

    // README.md
    static func readmeMigrations() async throws {
        let path = examplePath()
        var migrator = Migrator()
        migrator.registerMigration("v2: full names, numeric zip codes") { m in
            try m.renameField("name", to: "fullName", in: "contacts")          // indexes on it follow
            try m.addField("initials", in: "contacts") { contact in              // computed from the document
                guard case .string(let name)? = contact[field: "fullName"] else { return nil }
                return .string(String(name.split(separator: " ").compactMap(\.first)))
            }
            try m.convertField("zip", in: "contacts", to: .int)                  // "0150" -> 150
            try m.convertField("since", in: "contacts", to: .date, format: "MMM d yyyy")  // "Jan 5 2013" -> a date
            try m.createIndex(IndexDefinition(name: "zip", kind: .regular, fields: ["zip"]), in: "contacts")
        }
        let store = try await DocStore(path: path, migrator: migrator)           // runs what the store has not had
        _ = (path, store)
    }

    // README.md
    static func readmeBackups() async throws {
        let store = try await exampleStore()
        let day = "monday"
        try await store.backup(to: "/var/backups/people-\(day).db")
        let usage = try await store.spaceUsage()            // file, in use, free pages
        await store.close()
        let (before, after) = try await DocStore.compact(path: "people.db")
        _ = (store, day, usage, before, after)
    }

    // README.md
    static func readmeObserving() async throws {
        let store = try await exampleStore()
        let id = UUID()
        for try await adults in Person.include(#Predicate { $0.age >= 18 }).sortBy(\.name).observe(in: store) {
            render(adults)                    // at once, then after each commit that changes the adults
        }
        for try await n in Person.query().observeCount(in: store) { print(n) }
        for try await state in store.observe(Person.self, id: id) { print(state) }   // .existing(p), .gone(last: p), .missing
        _ = (store, id)
    }

    // README.md
    static func readmeUntypedWrites() async throws {
        let store = try await exampleStore()
        try await store.write { ctx in
            try ctx.insert(.object([("id", .uuid(UUID())), ("name", .string("Cy")), ("age", .int(7))]), into: "people")
            let dee = try ctx.insertAndFetch(.object([("name", .string("Dee"))]), into: "notes")   // no id: one is given
            print(dee[field: "id"]!)                                       // .int(1): the next integer, chosen in this transaction
            for doc in try Query<DocumentValue>("people").sortBy("age").results(in: ctx) { print(doc.json()) }
        }
        _ = store
    }

    // README.md
    static func readmeUntypedQueries() async throws {
        let store = try await exampleStore()
        let young = Query<DocumentValue>("people").include(.compare("age", .less, .int(18)))   // what the shell builds
        let same  = Person.include(#Predicate { $0.age < 18 }).decoded(as: DocumentValue.self)
        let ids   = try await young.ids(in: store)                         // [DocumentValue]
        try await store.write { ctx in for id in ids { try ctx.delete("people", id: id) } }
        _ = (store, young, same, ids)
    }

    // Sources/DocStore/DocStore.docc/Aggregates.md
    static func aggregatesArticle() async throws {
        let store = try await exampleStore()
        let total   = try await Person.query().aggregate(.sum(\.score)).value(in: store)
        let mean    = try await Person.include(#Predicate { $0.city == "Oslo" }).aggregate(.average(\.age)).value(in: store)
        let oldest  = try await Person.query().aggregate(.max(\.age)).value(in: store)
        let cities  = try await Person.query().distinct(\.city).results(in: store)
        let perCity = try await Person.query().groupBy(\.city).results(in: store)
        let top10   = try await Person.query().groupBy(\.city).sortBy(.value, order: .reverse)[0..<10]
            .results(in: store)
        let names   = try await Person.include(#Predicate { $0.age > 90 }).select(\.name, \.age).results(in: store)
        let moved   = try await Person.include(#Predicate { $0.city == "Oslo" }).update(in: store) { $0.city = "Bergen" }
        _ = (store, total, mean, oldest, cities, perCity, top10, names, moved)
    }

    // Sources/DocStore/DocStore.docc/ChangingYourModels.md
    static func changingModelsVersion1() async throws {
        struct Contact: Document {          // version 1
            var id: Int
            var name: String                // "Ann Lee"
            var zip: String                 // "0150"
            var city: String
            static let collection = "contacts"
            static let indexes: [IndexSpec<Contact>] = [.index("city", \.city)]
        }
    }

    // Sources/DocStore/DocStore.docc/ChangingYourModels.md
    static func changingModelsVersion2() async throws {
        struct Contact: Document {          // version 2
            var id: Int
            var fullName: String
            var initials: String
            var zip: Int
            var city: String
            static let collection = "contacts"
            static let indexes: [IndexSpec<Contact>] = [.index("city", \.city), .index("zip", \.zip)]
        }
    }

    // Sources/DocStore/DocStore.docc/ChangingYourModels.md
    static func changingModelsCheck() async throws {
        let store = try await exampleStore()
        struct Contact: Document { var id: Int; var fullName: String; static let collection = "contacts" }
        let check = try await store.check(Contact.self, limit: 3)
        print(check)
        // checked 300 documents of 'contacts' as App.Contact: 300 do not decode
        //   document 1: field 'fullName': missing
        //   ...
        _ = (store, check)
    }

    // Sources/DocStore/DocStore.docc/ChangingYourModels.md
    static func changingModelsMigrator() async throws {
        let path = examplePath()
        var migrator = Migrator()
        migrator.registerMigration("v2: full names, numeric zip codes") { m in
            try m.renameField("name", to: "fullName", in: "contacts")
            try m.addField("initials", in: "contacts") { contact in
                guard case .string(let name)? = contact[field: "fullName"] else { return nil }
                return .string(String(name.split(separator: " ").compactMap(\.first)))
            }
            try m.convertField("zip", in: "contacts", to: .int)
            try m.createIndex(IndexDefinition(name: "zip", kind: .regular, fields: ["zip"]), in: "contacts")
        }
        let store = try await DocStore(path: path, migrator: migrator)
        _ = (path, store)
    }

    // Sources/DocStore/DocStore.docc/ChangingYourModels.md
    static func changingModelsVersion3() async throws {
        var migrator = Migrator()
        struct Person: Document {           // version 3
            var id: Int
            var firstName: String
            var lastName: String?
            var initials: String
            var place: String
            static let collection = "people"
            static let indexes: [IndexSpec<Person>] = [.index("lastName", \.lastName)]
        }

        migrator.registerMigration("v3: people, split names, places") { m in
            // A field an index reads cannot be removed: drop the index first, in the same migration.
            try m.dropIndex("zip", from: "contacts")
            try m.dropIndex("city", from: "contacts")
            try m.mergeFields(["zip", "city"], into: "place", in: "contacts") { parts in
                guard case .int(let zip)? = parts[0], case .string(let city)? = parts[1] else { return nil }
                return .string("\(zip) \(city)")
            }
            try m.splitField("fullName", into: ["firstName", "lastName"], in: "contacts") { name in
                guard case .string(let s) = name else { return [name, nil] }
                let words = s.split(separator: " ", maxSplits: 1).map { DocumentValue.string(String($0)) }
                return [words.first ?? .string(""), words.count > 1 ? words[1] : nil]
            }
            try m.renameCollection("contacts", to: "people")
            try m.createIndex(IndexDefinition(name: "lastName", kind: .regular, fields: ["lastName"]), in: "people")
        }
    }

    // Sources/DocStore/DocStore.docc/GettingStarted.md
    static func gettingStarted() async throws {
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
                .unique("email", \.email),
            ]
        }

        let store = try await DocStore(path: "people.db")
        try await store.insert(Person(id: UUID(), name: "Ann", age: 41, city: "Oslo", email: "ann@example.com", tags: []))

        let annID = UUID()
        let ann = try await store.get(Person.self, id: annID)
        let adults = try await Person.include(#Predicate { $0.age >= 18 }).sortBy(\.name).results(in: store)
        _ = (store, annID, ann, adults)
    }

    // Sources/DocStore/DocStore.docc/Indexes.md
    static func indexesEnums() async throws {
        enum Airport: String, Codable, Sendable { case EWR, JFK, LGA }
        struct Flight: Document {
            var id: Int
            var origin: Airport
            var time: Int
            static let indexes: [IndexSpec<Flight>] = [.unique("origin_time", \.origin, \.time)]
        }
        let jfk = Airport.JFK
        let morning = Flight.include(#Predicate { $0.origin == jfk && $0.time < 1200 })   // planned on origin_time
        _ = (jfk, morning)
    }

    // Sources/DocStore/DocStore.docc/Indexes.md
    static func indexesNamedPath() async throws {
        enum Status: String, Codable, Sendable { case open, closed }
        struct Ticket: Document {
            var id: Int
            var status: Status
            enum CodingKeys: String, CodingKey { case id, status = "state" }
        static let indexes: [IndexSpec<Ticket>] = [.index("state", .field(\.status, path: "state"))]
        }
    }

    // Sources/DocStore/DocStore.docc/QueryPlanning.md
    static func queryPlanningArticle() async throws {
        let store = try await exampleStore()
        print(try await Person.include(#Predicate { $0.age >= 18 }).sortBy(\.age)[0..<10].explain(in: store))
        _ = store
    }

    // Sources/DocStore/DocStore.docc/Transactions.md
    static func transactionsArticle() async throws {
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

    // README.md
    static func readmeTextIgnoringCase() async throws {
        let store = try await exampleStore()
        let search = "ann"
        let found = try await Person.query().include(.containsIgnoringCase("name", search)).results(in: store)
        let inOslo = try await Person.query().include(.equalIgnoringCase("city", "OSLO")).count(in: store)
        let an = Person.include(#Predicate { $0.age > 20 }).include(.hasPrefixIgnoringCase("name", "AN"))
        _ = (store, search, found, inOslo, an)
    }
}
