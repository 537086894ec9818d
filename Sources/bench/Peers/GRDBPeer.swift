#if GRDB
import Foundation
import GRDB

/// A person as a GRDB record: `BenchPerson` flattened into the columns of the `person` table. Its Codable
/// conformance is what GRDB reads rows into and writes rows from; the tags go to a JSON text column, as GRDB
/// stores any array.
struct GRDBPerson: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "person"

    var id: Int64
    var name: String
    var email: String
    var age: Int
    var city: String
    var score: Double
    var active: Bool
    var createdAt: Date
    var street: String
    var addressCity: String
    var zip: String
    var tags: [String]
    var bonus: Int?

    init(_ p: BenchPerson) {
        (id, name, email, age, city, score, active, createdAt, street, addressCity, zip, tags, bonus)
            = (p.id, p.name, p.email, p.age, p.city, p.score, p.active, p.createdAt, p.address.street,
               p.address.city, p.address.zip, p.tags, p.bonus)
    }

    var person: BenchPerson {
        BenchPerson(id: id, name: name, email: email, age: age, city: city, score: score, active: active, tags: tags,
                    createdAt: createdAt, address: .init(street: street, city: addressCity, zip: zip), bonus: bonus)
    }

    // Dates as seconds since 1970 in a REAL column: exact for every date, and what the C peer stores.
    static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy {
        .timeIntervalSince1970
    }

    static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy {
        .timeIntervalSince1970
    }
}

/// GRDB as a Swift application uses it: a `DatabasePool` in WAL mode, the schema made by a migration with GRDB's
/// table definitions, `GRDBPerson` records written and read through their Codable conformance, and every query a
/// cached statement walked with a cursor, inside the pool's async `read` and `write`. The SQL is the C peer's.
final class GRDBPeer: Peer {
    let name = "GRDB"
    private let durability: BenchDurability

    init(durability: BenchDurability = .full) { self.durability = durability }
    private var pool: DatabasePool?
    private var path = ""
    /// Where the values read from rows go, so that reading them is not optimized away.
    private(set) var sink = 0

    func load(_ people: [BenchPerson], in directory: String) async throws {
        path = directory + "/grdb.sqlite"
        let pool = try Self.openPool(path, durability)
        self.pool = pool

        var migrator = DatabaseMigrator()
        migrator.registerMigration("person") { db in
            try db.create(table: "person") { t in
                t.primaryKey("id", .integer)
                t.column("name", .text).notNull()
                t.column("email", .text).notNull().unique()
                t.column("age", .integer).notNull()
                t.column("city", .text).notNull()
                t.column("score", .double).notNull()
                t.column("active", .boolean).notNull()
                t.column("createdAt", .double).notNull()
                t.column("street", .text).notNull()
                t.column("addressCity", .text).notNull()
                t.column("zip", .text).notNull()
                t.column("tags", .jsonText).notNull()
                t.column("bonus", .integer)
            }
            try db.create(index: "person_on_age", on: "person", columns: ["age"])
            try db.create(index: "person_on_city", on: "person", columns: ["city"])
            try db.create(index: "person_on_city_age", on: "person", columns: ["city", "age"])
            try db.create(index: "person_on_bonus", on: "person", columns: ["bonus"])
            try db.create(table: "personTag") { t in
                t.column("personId", .integer).notNull()
                t.column("tag", .text).notNull()
            }
            try db.create(index: "personTag_on_tag_personId", on: "personTag", columns: ["tag", "personId"])
        }
        try migrator.migrate(pool)

        for start in stride(from: 0, to: people.count, by: 10_000) {
            let batch = people[start..<min(people.count, start + 10_000)]
            try await pool.write { db in
                for person in batch { try Self.insert(person, db) }
            }
        }
    }

    /// A pool whose writer commits at `durability`. GRDB sets `synchronous = NORMAL` on the writer when it turns WAL
    /// on, after the configuration's `prepareDatabase` has run, so the durability's own setting is made again then:
    /// without it, every durability ran at NORMAL.
    static func openPool(_ path: String, _ durability: BenchDurability) throws -> DatabasePool {
        let pool = try DatabasePool(path: path, configuration: configuration(durability))
        try pool.writeWithoutTransaction { try $0.execute(sql: durability.sqlitePragma) }
        return pool
    }

    /// The pool's configuration: the durability's pragmas on every connection it opens, the writer and each
    /// reader, and a wait for another process's write lock. The pool itself sets WAL mode.
    static func configuration(_ durability: BenchDurability) -> Configuration {
        var config = Configuration()
        config.busyMode = .timeout(60)
        let pragmas = PersonTable.connectionPragmas(durability)
        config.prepareDatabase { db in
            for pragma in pragmas { try db.execute(sql: pragma) }
        }
        return config
    }

    static func insert(_ person: BenchPerson, _ db: Database) throws {
        try GRDBPerson(person).insert(db)
        let tagInsert = try db.cachedStatement(sql: PersonTable.insertTag)
        for tag in person.tags { try tagInsert.execute(arguments: [person.id, tag]) }
    }

    func supports(_ scenario: Scenario, _ form: Form) -> Bool { !scenario.measuresReadsSideBySide }

    /// Runs `statement` with `arguments` and does with each row what `form` asks: reads the id, reads every
    /// column's value from the row, or decodes a `GRDBPerson` and makes its `BenchPerson`. Returns the number of
    /// rows; what was read is added to `touched`.
    private static func visit(_ statement: Statement, _ arguments: StatementArguments, _ form: Form,
                              _ touched: inout Int) throws -> Int {
        var rows = 0
        switch form {
        case .ids:
            let ids = try Int64.fetchCursor(statement, arguments: arguments)
            while let id = try ids.next() {
                rows += 1
                touched &+= Int(id)
            }
        case .raw:
            let cursor = try Row.fetchCursor(statement, arguments: arguments)
            while let row = try cursor.next() {
                rows += 1
                for value in row.databaseValues {
                    switch value.storage {
                    case .null: break
                    case .int64(let n): touched &+= Int(truncatingIfNeeded: n)
                    case .double(let d): touched &+= Int(truncatingIfNeeded: d.bitPattern)
                    case .string(let s): touched &+= s.utf8.count
                    case .blob(let data): touched &+= data.count
                    }
                }
            }
        case .decoded:
            let records = try GRDBPerson.fetchCursor(statement, arguments: arguments)
            while let record = try records.next() {
                rows += 1
                touched &+= record.person.tags.count
            }
        }
        return rows
    }

    func run(_ scenario: Scenario, _ form: Form, _ p: Parameters) async throws -> Int {
        guard let pool else { return 0 }
        let rows: Int, touched: Int
        switch scenario {
        case .insert:
            return 0
        case .getByID, .lookupByID:
            let ids = p.ids
            (rows, touched) = try await pool.read { db in
                let statement = try db.cachedStatement(sql: PersonTable.byID(form))
                var rows = 0, touched = 0
                for id in ids { rows += try Self.visit(statement, [id], form, &touched) }
                return (rows, touched)
            }
        case .fileCheck, .verify:
            let sql = scenario == .fileCheck ? "PRAGMA quick_check" : "PRAGMA integrity_check"
            let answer = try await pool.read { db in try String.fetchOne(db, sql: sql) }
            guard answer == "ok" else { throw BenchFailure(description: "\(sql): \(answer ?? "nothing")") }
            guard scenario == .verify else { return p.documentCount }
            // The rows there are, as DocStore's verify() counts the documents it checked (findOrCreateMiss adds some).
            return try await pool.read { db in try Int.fetchOne(db, sql: PersonTable.countAll) } ?? 0
        case .countByIndex:
            return try await pool.read { db in
                try Int.fetchOne(db.cachedStatement(sql: PersonTable.count)) ?? 0
            }
        case .insertProcesses4:
            return try ProcessWriters.run(kind: "grdb", path: path, durability: durability, p)
        case .singleInserts, .insertTasks4, .insertTasks16, .insertTasks64, .singleSaves, .saveTasks16:
            let (lists, saving) = p.writes(scenario)
            return try await WriteLatency.timed(lists) { person in
                try await pool.write { db in
                    if saving { try GRDBPerson(person).update(db) } else { try Self.insert(person, db) }
                }
            }
        case .update1Percent, .update1PercentFields:
            let zip = p.newZip
            return try await pool.write { db in
                try GRDBPerson.filter(Column("age") == 42).updateAll(db, Column("zip").set(to: zip))
            }
        case _ where PersonTable.aggregate(scenario) != nil:
            let sql = PersonTable.aggregate(scenario)!
            let (groups, value) = try await pool.read { db -> (Int, Double) in
                let rows = try Row.fetchAll(db.cachedStatement(sql: sql))
                let last: DatabaseValue = rows.last.map { $0[$0.count - 1] } ?? .null
                return (rows.count, Double.fromDatabaseValue(last) ?? 0)
            }
            return PersonTable.produced(scenario, rows: groups, value: value)
        case .findOrCreateHit, .findOrCreateMiss:
            var tagsFound = 0
            for (email, id) in p.findOrCreateCalls(scenario) {
                tagsFound &+= try await pool.write { db in
                    if let found = try GRDBPerson.fetchOne(db.cachedStatement(sql: PersonTable.byEmail),
                                                           arguments: [email]) {
                        return found.person.tags.count
                    }
                    try Self.insert(PersonTable.newcomer(id: id, email: email), db)
                    return 0
                }
            }
            (rows, touched) = (Parameters.findOrCreateCalls, tagsFound)
        default:
            guard let (sql, argument) = PersonTable.query(scenario, form, p) else { return 0 }
            let arguments: StatementArguments = argument.map { [$0] } ?? []
            (rows, touched) = try await pool.read { db in
                var touched = 0
                let rows = try Self.visit(db.cachedStatement(sql: sql), arguments, form, &touched)
                return (rows, touched)
            }
        }
        sink &+= touched
        return rows
    }

    func fileSize() throws -> Int {
        try PersonTable.fileSize(path)
    }

    func close() async {
        do {
            try pool?.close()
        } catch {
            FileHandle.standardError.write(Data("\(name): \(error)\n".utf8))
        }
        pool = nil
    }
}
#endif
