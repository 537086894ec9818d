@_spi(Benchmarks) import DocStore
import DocStorePostgres
import Foundation
import Synchronization

/// The document as DocStore stores it: `BenchPerson` with its indexes.
struct StoredPerson: Document, Equatable {
    var id: Int64
    var name: String
    var email: String
    var age: Int
    var city: String
    var score: Double
    var active: Bool
    var tags: [String]
    var createdAt: Date
    var address: BenchPerson.Address
    var bonus: Int?

    static let collection = "people"
    static let indexes: [IndexSpec<StoredPerson>] = [
        .index("age", \.age),
        .index("city", \.city),
        .index("city_age", \.city, \.age),
        .multi("tags", \.tags),
        .unique("email", \.email),
        .index("bonus", \.bonus),
    ]

    init(_ p: BenchPerson) {
        (id, name, email, age, city, score, active, tags, createdAt, address, bonus)
            = (p.id, p.name, p.email, p.age, p.city, p.score, p.active, p.tags, p.createdAt, p.address, p.bonus)
    }
}

/// DocStore through its public API: `Query`s with `#Predicate`, run inside the store's actor; on a file, or on
/// the bench's PostgreSQL server (``PostgresServer``) in a schema of its own.
final class DocStorePeer: Peer {
    let name: String
    private var store: DocStore?
    /// The store's file, or its URL on PostgreSQL.
    private var path = ""
    /// ``DocStore/Options/scanThreads``; `nil` for the default.
    private let scanThreads: Int?
    private let durability: BenchDurability
    /// The schema of a store on PostgreSQL; `nil` for a file.
    private var schema: String?
    private let onPostgres: Bool
    /// ``DocStore/Options/exclusive``: no other process opens the file, whose pages are written in place at `.off`.
    private let exclusive: Bool

    init(scanThreads: Int? = nil, durability: BenchDurability = .full, onPostgres: Bool = false,
         exclusive: Bool = false) {
        self.scanThreads = scanThreads
        self.durability = durability
        self.onPostgres = onPostgres
        self.exclusive = exclusive
        name = onPostgres ? "DocStore PG" : exclusive ? "DocStore, exclusive"
            : scanThreads.map { "DocStore, \($0) thread\($0 == 1 ? "" : "s")" } ?? "DocStore"
    }

    /// Opens the store at `path`: a file, or a `postgres://` URL.
    static func open(_ path: String, _ options: DocStore.Options) async throws -> DocStore {
        path.hasPrefix("postgres") ? try await DocStore(postgres: path, options: options)
            : try await DocStore(path: path, options: options)
    }

    func load(_ people: [BenchPerson], in directory: String) async throws {
        path = directory + "/docstore.db"
        if onPostgres {
            let schema = PostgresServer.newSchema("docstore")
            self.schema = schema
            path = try PostgresServer.url(schema: schema)
        }
        var options = DocStore.Options()
        options.initialMapSize = 1 << 30
        if let scanThreads { options.scanThreads = scanThreads }
        options.durability = durability.docStore
        options.exclusive = exclusive
        let store = try await Self.open(path, options)
        self.store = store
        for start in stride(from: 0, to: people.count, by: 10_000) {
            let batch = people[start..<min(people.count, start + 10_000)].map(StoredPerson.init)
            try await store.insert(contentsOf: batch)
        }
    }

    /// A read by id always decodes (the public API has no raw read by id); the other queries have all three forms.
    func supports(_ scenario: Scenario, _ form: Form) -> Bool {
        ((scenario != .getByID && scenario != .lookupByID) || form == .decoded)
            && !(onPostgres && (scenario == .fileCheck || scenario.measuresReadsSideBySide))
            && !(exclusive && scenario == .insertProcesses4)
    }

    /// The query of each reading scenario.
    static func query(_ scenario: Scenario, _ p: Parameters) -> Query<StoredPerson>? {
        let city = p.city, tag = p.tag
        switch scenario {
        case .equality: return StoredPerson.include(#Predicate { $0.city == city })
        case .range1: return StoredPerson.include(#Predicate { $0.age >= 42 && $0.age < 43 })
        case .range10: return StoredPerson.include(#Predicate { $0.age >= 20 && $0.age < 30 })
        case .compoundPrefix: return StoredPerson.include(#Predicate { $0.city == city && $0.age >= 50 })
        case .arrayContains: return StoredPerson.include(#Predicate { $0.tags.contains(tag) })
        case .indexedResidual: return StoredPerson.include(#Predicate { $0.age >= 20 && $0.age < 30 && $0.active })
        case .unindexedFilter: return StoredPerson.include(#Predicate { $0.score > 99 })
        case .sortIndexedLimit: return StoredPerson.sortBy(\.age)[0..<100]
        case .sortUnindexedLimit: return StoredPerson.sortBy(\.score, order: .reverse)[0..<100]
        case .fullSort10: return StoredPerson.include(#Predicate { $0.age >= 20 && $0.age < 30 }).sortBy(\.score)
        case .countByIndex: return StoredPerson.include(#Predicate { $0.age < 10 })
        case .coalesce: return StoredPerson.include(#Predicate { ($0.bonus ?? 0) > 150 })
        case .optionalRange:
            return StoredPerson.include(#Predicate {
                $0.bonus != nil && ($0.bonus ?? 0) >= 100 && ($0.bonus ?? 0) <= 105
            })
        case .flatMap: return StoredPerson.include(#Predicate { $0.bonus.flatMap { $0 > 190 } ?? false })
        case .twoFields: return StoredPerson.include(#Predicate { ($0.bonus ?? 0) > $0.age + 100 })
        case .arithmetic: return StoredPerson.include(#Predicate { $0.age * 2 > 190 })
        case .ternary: return StoredPerson.include(#Predicate { $0.bonus == nil ? $0.age < 2 : $0.bonus! > 195 })
        case .stringContains: return StoredPerson.include(#Predicate { $0.name.contains("ar") })
        case .arrayCount: return StoredPerson.include(#Predicate { $0.tags.count > 2 })
        default: return nil
        }
    }

    func run(_ scenario: Scenario, _ form: Form, _ p: Parameters) async throws -> Int {
        guard let store else { return 0 }
        switch scenario {
        case .insert:
            return 0
        case .getByID:
            let ids = p.ids
            return try await store.read { ctx in
                var n = 0
                for id in ids where try ctx.get(StoredPerson.self, id: id) != nil { n += 1 }
                return n
            }
        case .lookupByID:
            let ids = p.ids
            return try await store.read { ctx in
                var n = 0
                for id in ids where try StoredPerson.include(#Predicate { $0.id == id }).first(in: ctx) != nil { n += 1 }
                return n
            }
        case .countByIndex:
            return try await Self.query(scenario, p)!.count(in: store)
        case .fileCheck:
            let report = DocStore.checkFile(at: path)
            guard report.isClean else { throw BenchFailure(description: "the store's file check failed: \(report)") }
            return p.documentCount
        case .verify:
            let report = try await store.verify()
            guard report.isClean else { throw BenchFailure(description: "verify() failed: \(report)") }
            return report.documentsChecked
        case .groupByIndexedCount:
            return try await StoredPerson.query().groupBy(\.city).results(in: store).count
        case .groupByUnindexedSum:
            return try await StoredPerson.query().groupBy(\.name, .sum(\.score)).results(in: store).count
        case .distinctIndexed:
            return try await StoredPerson.query().distinct(\.city).count(in: store)
        case .maxIndexed:
            return try await StoredPerson.query().aggregate(.max(\.age)).value(in: store) ?? -1
        case .averageRange10:
            let mean = try await StoredPerson.include(#Predicate { $0.age >= 20 && $0.age < 30 }).aggregate(.average(\.age)).value(in: store)
            return Int(((mean ?? -1) * 100).rounded())
        case .averageScoreRange10:
            let mean = try await StoredPerson.include(#Predicate { $0.age >= 20 && $0.age < 30 }).aggregate(.average(\.score)).value(in: store)
            return Int(((mean ?? -1) * 100).rounded())
        case .insertProcesses4:
            return try ProcessWriters.run(kind: "docstore", path: path, durability: durability, p)
        case .singleInserts, .insertTasks4, .insertTasks16, .insertTasks64, .singleSaves, .saveTasks16:
            let (lists, saving) = p.writes(scenario)
            return try await WriteLatency.timed(lists) { person in
                if saving { try await store.save(StoredPerson(person)) } else { try await store.insert(StoredPerson(person)) }
            }
        case .scansInARow4:
            let scan = StoredPerson.include(#Predicate { $0.score > 99 })
            var n = 0
            for _ in 0..<4 { n += try await scan.count(in: store) }
            return n
        case .scansAtOnce4:
            let scan = StoredPerson.include(#Predicate { $0.score > 99 })
            return try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { try await scan.count(in: store) } }
                return try await group.reduce(0, +)
            }
        case .savesBesideScans:
            let scan = StoredPerson.include(#Predicate { $0.score > 99 })
            let saves = Array(p.writes(.singleSaves).lists[0].prefix(20))
            let stop = StopFlag()
            return try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        while !stop.isSet { _ = try await scan.count(in: store) }
                        return 0
                    }
                }
                let written = try await WriteLatency.timed([saves]) { try await store.save(StoredPerson($0)) }
                stop.set()
                return try await group.reduce(written, +)
            }
        case .update1Percent:
            let zip = p.newZip
            return try await StoredPerson.include(#Predicate { $0.age == 42 }).update(in: store) { $0.address.zip = zip }
        case .update1PercentFields:
            return try await StoredPerson.include(#Predicate { $0.age == 42 })
                .update(in: store, set: ["address.zip": .string(p.newZip)])
        case .findOrCreateHit, .findOrCreateMiss:
            for (email, id) in p.findOrCreateCalls(scenario) {
                _ = try await StoredPerson.include(#Predicate { $0.email == email }).findOrCreate(in: store) {
                    StoredPerson(BenchPerson(id: id, name: "New", email: email, age: 33, city: "city1", score: 1,
                                             active: true, tags: [], createdAt: Date(timeIntervalSince1970: 0),
                                             address: .init(street: "", city: "city1", zip: "")))
                }
            }
            return Parameters.findOrCreateCalls
        default:
            guard let q = Self.query(scenario, p) else { return 0 }
            switch form {
            case .decoded:
                return try await q.results(in: store).count
            case .ids:
                // From the index entries where they answer the filter: no document is read.
                return try await store.read { try q.ids(in: $0).count }
            case .raw:
                return try await store.read { ctx in
                    var n = 0
                    var touched = 0
                    try q.forEachEncoded(in: ctx) { raw in
                        n += 1
                        touched &+= Int(raw.last ?? 0)
                        return true
                    }
                    return n + (touched & 0)
                }
            }
        }
    }

    func fileSize() throws -> Int {
        if let schema { return try PostgresServer.size(ofSchema: schema) }
        // What the file takes on disk, where that is less than its length (a file with holes).
        var status = stat()
        guard stat(path, &status) == 0 else { return 0 }
        return min(Int(status.st_size), Int(status.st_blocks) * 512)
    }

    func close() async {
        await store?.close()
        store = nil
        if let schema { PostgresServer.drop(schema: schema) }
    }
}

/// Tells the scanning tasks (or threads) of `savesBesideScans` to stop.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}
