import CSQLite
import Foundation
import Synchronization

/// What the two SQL peers share, so that they run the same SQL on the same tables: the pragmas, the person
/// written out by `findOrCreateMiss`, and each scenario's statement.
///
/// The tables: `person` has a real column for every field (the address flattened into `street`, `addressCity` and
/// `zip`; `createdAt` as seconds since 1970; `bonus` nullable; `tags` also as JSON text, so that a row alone makes a
/// whole `BenchPerson`, and what `tags.count` counts with `json_array_length`), and `personTag` has one row per tag,
/// for the `tags contains` scenario. Indexes: `age`; `(city, age)`; `bonus`; the unique `email`;
/// `personTag (tag, personId)`.
enum PersonTable {
    /// The columns of `person` in table order, as every full-row statement selects them.
    static let columns = "id, name, email, age, city, score, active, createdAt, street, addressCity, zip, tags, bonus"

    /// The per-connection pragmas. Memory mapping larger than any database the bench makes (SQLite caps it at
    /// its compile-time limit), and a 256 MiB page cache.
    static func connectionPragmas(_ durability: BenchDurability) -> [String] {
        [
            "PRAGMA mmap_size = 4294967296",
            "PRAGMA cache_size = -262144",
            // FULL by default: every commit is synced to disk before it returns, as DocStore's (LMDB's) commits
            // are, so writes are compared at the same durability. (NORMAL, WAL's usual setting, skips that sync and
            // can lose the last commits in a power loss: DocStore's `.normal` is its match, and OFF its `.off`.)
            durability.sqlitePragma,
        ]
    }

    static let insertPerson = "INSERT INTO person (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    static let insertTag = "INSERT INTO personTag (personId, tag) VALUES (?, ?)"
    /// A save of a person that exists: every column but the id written, as GRDB's `update` writes them.
    static let savePerson = "UPDATE person SET name = ?2, email = ?3, age = ?4, city = ?5, score = ?6, active = ?7, "
        + "createdAt = ?8, street = ?9, addressCity = ?10, zip = ?11, tags = ?12, bonus = ?13 WHERE id = ?1"
    static let count = "SELECT COUNT(*) FROM person WHERE age < 10"
    static let countAll = "SELECT COUNT(*) FROM person"
    static let byEmail = "SELECT \(columns) FROM person WHERE email = ?"
    static let update1Percent = "UPDATE person SET zip = ? WHERE age = 42"

    /// The statement of an aggregate scenario, whose rows are the groups (or the one value); nil for the others.
    static func aggregate(_ scenario: Scenario) -> String? {
        switch scenario {
        case .groupByIndexedCount: return "SELECT city, COUNT(*) FROM person GROUP BY city"
        case .groupByUnindexedSum: return "SELECT name, SUM(score) FROM person GROUP BY name"
        case .distinctIndexed: return "SELECT DISTINCT city FROM person"
        case .maxIndexed: return "SELECT MAX(age) FROM person"
        case .averageRange10: return "SELECT AVG(age) FROM person WHERE age >= 20 AND age < 30"
        case .averageScoreRange10: return "SELECT AVG(score) FROM person WHERE age >= 20 AND age < 30"
        default: return nil
        }
    }

    /// What an aggregate scenario produces from its rows: the number of groups, or the one value (a mean times 100,
    /// rounded), the same for every peer.
    static func produced(_ scenario: Scenario, rows: Int, value: Double) -> Int {
        switch scenario {
        case .maxIndexed: return Int(value)
        case .averageRange10, .averageScoreRange10: return Int((value * 100).rounded())
        default: return rows
        }
    }

    /// The point read of `getByID`, selecting what `form` needs.
    static func byID(_ form: Form) -> String {
        "SELECT \(form == .ids ? "id" : columns) FROM person WHERE id = ?"
    }

    /// The statement of a scenario that returns people, selecting what `form` needs, and its one text argument
    /// if it has one; nil for the scenarios that have no such statement.
    static func query(_ scenario: Scenario, _ form: Form, _ p: Parameters) -> (sql: String, argument: String?)? {
        let tail: String
        var argument: String? = nil
        switch scenario {
        case .equality: tail = "WHERE city = ?"; argument = p.city
        case .range1: tail = "WHERE age >= 42 AND age < 43"
        case .range10: tail = "WHERE age >= 20 AND age < 30"
        case .compoundPrefix: tail = "WHERE city = ? AND age >= 50"; argument = p.city
        case .arrayContains: tail = "WHERE id IN (SELECT personId FROM personTag WHERE tag = ?)"; argument = p.tag
        case .indexedResidual: tail = "WHERE age >= 20 AND age < 30 AND active"
        case .unindexedFilter: tail = "WHERE score > 99"
        case .sortIndexedLimit: tail = "ORDER BY age, id LIMIT 100"
        case .sortUnindexedLimit: tail = "ORDER BY score DESC, id LIMIT 100"
        case .fullSort10: tail = "WHERE age >= 20 AND age < 30 ORDER BY score, id"
        case .coalesce: tail = "WHERE COALESCE(bonus, 0) > 150"
        case .optionalRange:
            tail = "WHERE bonus IS NOT NULL AND COALESCE(bonus, 0) >= 100 AND COALESCE(bonus, 0) <= 105"
        case .flatMap: tail = "WHERE bonus > 190"
        case .twoFields: tail = "WHERE COALESCE(bonus, 0) > age + 100"
        case .arithmetic: tail = "WHERE age * 2 > 190"
        case .ternary: tail = "WHERE CASE WHEN bonus IS NULL THEN age < 2 ELSE bonus > 195 END"
        case .stringContains: tail = "WHERE instr(name, 'ar') > 0"   // case-sensitive, as Swift's contains
        case .arrayCount:
            // The row's own JSON array: twice as fast as grouping the tag table's rows by person, and a count
            // correlated per person would walk the whole tag table for each.
            tail = "WHERE json_array_length(tags) > 2"
        case .insert, .getByID, .lookupByID, .countByIndex, .findOrCreateHit, .findOrCreateMiss, .fileCheck, .verify,
             .scansInARow4, .scansAtOnce4, .savesBesideScans: return nil
        case .groupByIndexedCount, .groupByUnindexedSum, .distinctIndexed, .maxIndexed, .averageRange10,
             .averageScoreRange10, .update1Percent, .update1PercentFields, .singleInserts, .insertTasks4, .insertTasks16, .insertTasks64,
             .insertProcesses4, .singleSaves, .saveTasks16:
            return nil
        }
        return ("SELECT \(form == .ids ? "id" : columns) FROM person \(tail)", argument)
    }

    /// The person `findOrCreateMiss` creates, the same as the other peers create.
    static func newcomer(id: Int64, email: String) -> BenchPerson {
        BenchPerson(id: id, name: "New", email: email, age: 33, city: "city1", score: 1, active: true, tags: [],
                    createdAt: Date(timeIntervalSince1970: 0), address: .init(street: "", city: "city1", zip: ""),
                    bonus: nil)
    }

    /// The sizes of the database file and its WAL and shared-memory files, those that exist.
    static func fileSize(_ path: String) throws -> Int {
        try [path, path + "-wal", path + "-shm"].reduce(0) { total, file in
            guard FileManager.default.fileExists(atPath: file) else { return total }
            return total + ((try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
        }
    }
}

/// SQLite through its C API: the same tables, pragmas and SQL as the GRDB peer, with no Swift layer between the
/// bench and the library. Statements are prepared once and reset after each use; rows are read column by column
/// with `sqlite3_column_*`. It builds no `BenchPerson`, so it has no `.decoded` form.
final class SQLitePeer: Peer {
    let name = "SQLite C"
    private let durability: BenchDurability
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    private var path = ""
    /// Where the values read from rows go, so that reading them is not optimized away.
    private(set) var sink = 0

    static let schema = """
        CREATE TABLE person (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            email TEXT NOT NULL UNIQUE,
            age INTEGER NOT NULL,
            city TEXT NOT NULL,
            score DOUBLE NOT NULL,
            active BOOLEAN NOT NULL,
            createdAt DOUBLE NOT NULL,
            street TEXT NOT NULL,
            addressCity TEXT NOT NULL,
            zip TEXT NOT NULL,
            tags TEXT NOT NULL,
            bonus INTEGER
        );
        CREATE INDEX person_on_age ON person (age);
        CREATE INDEX person_on_city ON person (city);
        CREATE INDEX person_on_city_age ON person (city, age);
        CREATE INDEX person_on_bonus ON person (bonus);
        CREATE TABLE personTag (
            personId INTEGER NOT NULL,
            tag TEXT NOT NULL
        );
        CREATE INDEX personTag_on_tag_personId ON personTag (tag, personId);
        """

    /// The one check of every SQLite return code: OK, ROW and DONE pass (and are returned), anything else throws
    /// an error naming the statement and SQLite's message.
    @discardableResult
    private func check(_ rc: Int32, _ sql: String) throws -> Int32 {
        switch rc {
        case SQLITE_OK, SQLITE_ROW, SQLITE_DONE:
            return rc
        default:
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            throw BenchFailure(description: "SQLite error \(rc) on \"\(sql)\": \(message)")
        }
    }

    init(durability: BenchDurability = .full) { self.durability = durability }

    func load(_ people: [BenchPerson], in directory: String) async throws {
        path = directory + "/sqlite-c.sqlite"
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        try check(sqlite3_open_v2(path, &db, flags, nil), "open \(path)")
        for sql in ["PRAGMA journal_mode = WAL"] + PersonTable.connectionPragmas(durability) + [Self.schema] {
            try check(sqlite3_exec(db, sql, nil, nil, nil), sql)
        }
        for start in stride(from: 0, to: people.count, by: 10_000) {
            let batch = people[start..<min(people.count, start + 10_000)]
            try transaction("BEGIN IMMEDIATE") {
                for person in batch { try insert(person) }
            }
        }
    }

    /// The statement for `sql`, prepared on first use and kept.
    private func statement(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil), sql)
        guard let statement else { throw BenchFailure(description: "SQLite made no statement of \"\(sql)\"") }
        statements[sql] = statement
        return statement
    }

    private func bind(_ statement: OpaquePointer, _ index: Int32, _ value: String, _ sql: String) throws {
        try check(sqlite3_bind_text(statement, index, value, -1, docstore_sqlite_transient()), sql)
    }

    private func bind(_ statement: OpaquePointer, _ index: Int32, _ value: Int64, _ sql: String) throws {
        try check(sqlite3_bind_int64(statement, index, value), sql)
    }

    private func bind(_ statement: OpaquePointer, _ index: Int32, _ value: Double, _ sql: String) throws {
        try check(sqlite3_bind_double(statement, index, value), sql)
    }

    /// Binds `value`, or NULL when there is none.
    private func bind(_ statement: OpaquePointer, _ index: Int32, _ value: Int64?, _ sql: String) throws {
        guard let value else {
            try check(sqlite3_bind_null(statement, index), sql)
            return
        }
        try bind(statement, index, value, sql)
    }

    /// Steps `statement` to its end, handing each row to `row`, then resets it; returns the number of rows.
    @discardableResult
    private func step(_ statement: OpaquePointer, _ sql: String, _ row: (OpaquePointer) -> Void = { _ in }) throws
        -> Int {
        var rows = 0
        do {
            while try check(sqlite3_step(statement), sql) == SQLITE_ROW {
                row(statement)
                rows += 1
            }
        } catch {
            _ = sqlite3_reset(statement)   // it repeats the failure just thrown
            throw error
        }
        try check(sqlite3_reset(statement), sql)
        return rows
    }

    /// Runs a statement that has no arguments, such as BEGIN or COMMIT.
    private func execute(_ sql: String) throws {
        try step(try statement(sql), sql)
    }

    /// Runs `body` between `begin` and COMMIT, rolling back if it throws.
    private func transaction<R>(_ begin: String, _ body: () throws -> R) throws -> R {
        try execute(begin)
        let result: R
        do {
            result = try body()
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        try execute("COMMIT")
        return result
    }

    private func insert(_ p: BenchPerson) throws {
        let sql = PersonTable.insertPerson
        let s = try statement(sql)
        try bind(s, 1, p.id, sql)
        try bind(s, 2, p.name, sql)
        try bind(s, 3, p.email, sql)
        try bind(s, 4, Int64(p.age), sql)
        try bind(s, 5, p.city, sql)
        try bind(s, 6, p.score, sql)
        try bind(s, 7, Int64(p.active ? 1 : 0), sql)
        try bind(s, 8, p.createdAt.timeIntervalSince1970, sql)
        try bind(s, 9, p.address.street, sql)
        try bind(s, 10, p.address.city, sql)
        try bind(s, 11, p.address.zip, sql)
        // The tags hold no character that JSON escapes: `["tag1","tag2"]`, as GRDB's JSON encoder writes them.
        try bind(s, 12, "[" + p.tags.map { "\"\($0)\"" }.joined(separator: ",") + "]", sql)
        try bind(s, 13, p.bonus.map(Int64.init), sql)
        try step(s, sql)
        let tagSQL = PersonTable.insertTag
        let t = try statement(tagSQL)
        for tag in p.tags {
            try bind(t, 1, p.id, tagSQL)
            try bind(t, 2, tag, tagSQL)
            try step(t, tagSQL)
        }
    }

    /// Reads every column of the current row where SQLite keeps it: integers and doubles as numbers, text and
    /// blobs as their bytes, touching the last one, with no Swift string made.
    private static func touchColumns(_ s: OpaquePointer) -> Int {
        var touched = 0
        for i in 0..<sqlite3_column_count(s) {
            switch sqlite3_column_type(s, i) {
            case SQLITE_INTEGER:
                touched &+= Int(truncatingIfNeeded: sqlite3_column_int64(s, i))
            case SQLITE_FLOAT:
                touched &+= Int(truncatingIfNeeded: sqlite3_column_double(s, i).bitPattern)
            case SQLITE_TEXT:
                let bytes = sqlite3_column_text(s, i)
                let count = Int(sqlite3_column_bytes(s, i))
                if let bytes, count > 0 { touched &+= Int(bytes[count - 1]) }
                touched &+= count
            case SQLITE_BLOB:
                let bytes = sqlite3_column_blob(s, i)?.assumingMemoryBound(to: UInt8.self)
                let count = Int(sqlite3_column_bytes(s, i))
                if let bytes, count > 0 { touched &+= Int(bytes[count - 1]) }
                touched &+= count
            default:
                break
            }
        }
        return touched
    }

    func supports(_ scenario: Scenario, _ form: Form) -> Bool { form != .decoded }

    func run(_ scenario: Scenario, _ form: Form, _ p: Parameters) async throws -> Int {
        guard db != nil else { return 0 }
        var touched = 0
        let visit: (OpaquePointer) -> Void = form == .ids
            ? { touched &+= Int(truncatingIfNeeded: sqlite3_column_int64($0, 0)) }
            : { touched &+= Self.touchColumns($0) }
        defer { sink &+= touched }
        switch scenario {
        case .insert:
            return 0
        case .getByID, .lookupByID:
            let sql = PersonTable.byID(form)
            let s = try statement(sql)
            return try transaction("BEGIN") {
                var found = 0
                for id in p.ids {
                    try bind(s, 1, id, sql)
                    found += try step(s, sql, visit)
                }
                return found
            }
        case .fileCheck, .verify:
            let sql = scenario == .fileCheck ? "PRAGMA quick_check" : "PRAGMA integrity_check"
            var answer = ""
            try step(try statement(sql), sql) { answer = String(cString: sqlite3_column_text($0, 0)) }
            guard answer == "ok" else { throw BenchFailure(description: "\(sql): \(answer)") }
            guard scenario == .verify else { return p.documentCount }
            // The rows there are, as DocStore's verify() counts the documents it checked (findOrCreateMiss adds some).
            var rows = 0
            try step(try statement(PersonTable.countAll), PersonTable.countAll) { rows = Int(sqlite3_column_int64($0, 0)) }
            return rows
        case .countByIndex:
            let sql = PersonTable.count
            var count = 0
            try step(try statement(sql), sql) { count = Int(sqlite3_column_int64($0, 0)) }
            return count
        case .insertProcesses4:
            return try ProcessWriters.run(kind: "sqlite", path: path, durability: durability, p)
        case .singleInserts, .insertTasks4, .insertTasks16, .insertTasks64, .singleSaves, .saveTasks16:
            let (lists, saving) = p.writes(scenario)
            try writeConcurrently(lists, sql: saving ? PersonTable.savePerson : PersonTable.insertPerson)
            return lists.reduce(0) { $0 + $1.count }
        case .update1Percent, .update1PercentFields:
            let sql = PersonTable.update1Percent
            let s = try statement(sql)
            return try transaction("BEGIN IMMEDIATE") {
                try bind(s, 1, p.newZip, sql)
                try step(s, sql)
                return Int(sqlite3_changes(db))
            }
        case _ where PersonTable.aggregate(scenario) != nil:
            let sql = PersonTable.aggregate(scenario)!
            var value = 0.0
            let rows = try step(try statement(sql), sql) { row in
                touched &+= Self.touchColumns(row)
                value = sqlite3_column_double(row, Int32(sqlite3_column_count(row) - 1))
            }
            return PersonTable.produced(scenario, rows: rows, value: value)
        case .scansInARow4:
            let reader = try readerConnections(1)[0]
            return try (0..<4).reduce(0) { n, _ in try n + Self.countScores(through: reader) }
        case .scansAtOnce4:
            return try Self.onThreads(try readerConnections(4)) { try Self.countScores(through: $0) }.reduce(0, +)
        case .savesBesideScans:
            // Four threads loop the count, each through its own connection, while this one saves: WAL lets the
            // writer go on beside the readers.
            let stop = StopFlag()
            let saves = Array(p.writes(.singleSaves).lists[0].prefix(20))
            let scans = Self.start(try readerConnections(4)) { reader in
                while !stop.isSet { _ = try Self.countScores(through: reader) }
                return 0
            }
            let message = Self.insert(saves, through: db!, sql: PersonTable.savePerson)
            stop.set()
            _ = try scans()
            if let message { throw BenchFailure(description: message) }
            return saves.count
        case .findOrCreateHit, .findOrCreateMiss:
            let sql = PersonTable.byEmail
            let s = try statement(sql)
            for (email, id) in p.findOrCreateCalls(scenario) {
                try transaction("BEGIN IMMEDIATE") {
                    try bind(s, 1, email, sql)
                    if try step(s, sql, { touched &+= Self.touchColumns($0) }) == 0 {
                        try insert(PersonTable.newcomer(id: id, email: email))
                    }
                }
            }
            return Parameters.findOrCreateCalls
        default:
            guard let (sql, argument) = PersonTable.query(scenario, form, p) else { return 0 }
            let s = try statement(sql)
            if let argument { try bind(s, 1, argument, sql) }
            return try step(s, sql, visit)
        }
    }

    /// Connections of the concurrent writers, opened on first use and kept: one per thread, as SQLite wants them.
    private var writers: [OpaquePointer] = []
    /// Read-only connections of the side-by-side scans, opened on first use and kept, one per thread.
    private var readers: [OpaquePointer] = []

    /// The first `count` reader connections, opened as needed.
    private func readerConnections(_ count: Int) throws -> [SendableConnection] {
        while readers.count < count {
            var connection: OpaquePointer?
            guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
                  let connection else { throw BenchFailure(description: "SQLite cannot open \(path) to read") }
            readers.append(connection)
            for sql in PersonTable.connectionPragmas(durability) {
                try check(sqlite3_exec(connection, sql, nil, nil, nil), sql)
            }
        }
        return readers.prefix(count).map(SendableConnection.init)
    }

    /// The count the side-by-side scenarios scan for (every row read), through `connection`.
    private static func countScores(through connection: SendableConnection) throws -> Int {
        let sql = "SELECT COUNT(*) FROM person WHERE score > 99"
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection.raw, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw BenchFailure(description: "SQLite cannot prepare \"\(sql)\"")
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else {
            throw BenchFailure(description: "\(sql): \(String(cString: sqlite3_errmsg(connection.raw)))")
        }
        return Int(sqlite3_column_int64(statement, 0))
    }

    /// Runs `body` once per connection, each on a thread of its own; returns what waits for them all and gives
    /// their results in order, or throws the first error.
    private static func start<R: Sendable>(_ connections: [SendableConnection],
                                           _ body: @escaping @Sendable (SendableConnection) throws -> R)
        -> () throws -> [R] {
        let results = Mutex<[Int: Result<R, any Error>]>([:])
        let finished = DispatchSemaphore(value: 0)
        for (i, connection) in connections.enumerated() {
            Thread {
                defer { finished.signal() }
                let result = Result { try body(connection) }
                results.withLock { $0[i] = result }
            }.start()
        }
        return {
            for _ in connections { finished.wait() }
            return try results.withLock { all in
                try (0..<connections.count).map { i in
                    try (all[i] ?? .failure(BenchFailure(description: "a scan thread ended without a result"))).get()
                }
            }
        }
    }

    /// ``start(_:_:)``, waited for.
    private static func onThreads<R: Sendable>(_ connections: [SendableConnection],
                                               _ body: @escaping @Sendable (SendableConnection) throws -> R) throws -> [R] {
        try start(connections, body)()
    }

    /// Writes each list (`sql`: an insert or a save) on a thread of its own, through a connection of its own, a
    /// transaction per person; the connections wait for SQLite's write lock (`busy_timeout`) rather than fail.
    private func writeConcurrently(_ lists: [[BenchPerson]], sql: String) throws {
        while writers.count < lists.count { writers.append(try Self.writerConnection(path, durability).raw) }
        if let message = Self.insertOnThreads(lists, through: writers.map(SendableConnection.init), sql: sql) {
            throw BenchFailure(description: message)
        }
    }

    /// A connection for a writer thread: the durability's pragmas, and a wait for SQLite's write lock
    /// (`busy_timeout`) rather than a failure.
    static func writerConnection(_ path: String, _ durability: BenchDurability) throws -> SendableConnection {
        var connection: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &connection, flags, nil) == SQLITE_OK, let connection else {
            throw BenchFailure(description: "SQLite cannot open \(path)")
        }
        for sql in PersonTable.connectionPragmas(durability) + ["PRAGMA busy_timeout = 60000"] {
            guard sqlite3_exec(connection, sql, nil, nil, nil) == SQLITE_OK else {
                throw BenchFailure(description: "\(sql): \(String(cString: sqlite3_errmsg(connection)))")
            }
        }
        return SendableConnection(raw: connection)
    }

    /// Writes each list on a thread of its own, through its connection, a transaction per person; the first
    /// error's message, or `nil`.
    static func insertOnThreads(_ lists: [[BenchPerson]], through connections: [SendableConnection],
                                sql: String = PersonTable.insertPerson) -> String? {
        let failure = Mutex<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        for (job, people) in zip(connections, lists) {
            Thread {
                defer { finished.signal() }
                if let message = SQLitePeer.insert(people, through: job.raw, sql: sql) {
                    failure.withLock { if $0 == nil { $0 = message } }
                }
            }.start()
        }
        for _ in lists { finished.wait() }
        return failure.withLock { $0 }
    }

    /// Inserts people (or, with `sql` ``PersonTable/savePerson``, saves them) a transaction each through `db`,
    /// with a statement prepared once; the first error's message, or `nil`.
    static func insert(_ people: [BenchPerson], through db: OpaquePointer, sql: String = PersonTable.insertPerson)
        -> String? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            return "SQLite cannot prepare a concurrent write: \(String(cString: sqlite3_errmsg(db)))"
        }
        defer { sqlite3_finalize(statement) }
        for p in people {
            let tags = "[" + p.tags.map { "\"\($0)\"" }.joined(separator: ",") + "]"
            let texts: [(Int32, String)] = [(2, p.name), (3, p.email), (5, p.city), (9, p.address.street),
                                            (10, p.address.city), (11, p.address.zip), (12, tags)]
            sqlite3_bind_int64(statement, 1, p.id)
            for (i, text) in texts { sqlite3_bind_text(statement, i, text, -1, docstore_sqlite_transient()) }
            sqlite3_bind_int64(statement, 4, Int64(p.age))
            sqlite3_bind_double(statement, 6, p.score)
            sqlite3_bind_int64(statement, 7, p.active ? 1 : 0)
            sqlite3_bind_double(statement, 8, p.createdAt.timeIntervalSince1970)
            if let bonus = p.bonus { sqlite3_bind_int64(statement, 13, Int64(bonus)) } else { sqlite3_bind_null(statement, 13) }
            let start = Meter.now()
            let ok = sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil) == SQLITE_OK
                && sqlite3_step(statement) == SQLITE_DONE
                && sqlite3_reset(statement) == SQLITE_OK
                && sqlite3_exec(db, "COMMIT", nil, nil, nil) == SQLITE_OK
            if !ok {
                let message = String(cString: sqlite3_errmsg(db))
                _ = sqlite3_reset(statement)
                _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
                return "SQLite error on a concurrent write: \(message)"
            }
            WriteLatency.record(since: start)
        }
        return nil
    }

    func fileSize() throws -> Int {
        try PersonTable.fileSize(path)
    }

    func close() async {
        func report(_ error: any Error) { FileHandle.standardError.write(Data("\(name): \(error)\n".utf8)) }
        for connection in writers + readers { _ = sqlite3_close_v2(connection) }
        (writers, readers) = ([], [])
        for (sql, statement) in statements {
            do { try check(sqlite3_finalize(statement), sql) } catch { report(error) }
        }
        statements = [:]
        if let db {
            do { try check(sqlite3_close_v2(db), "close \(path)") } catch { report(error) }
        }
        db = nil
    }
}

/// A connection handed to the one thread that uses it.
struct SendableConnection: @unchecked Sendable {
    // @unchecked: each connection is used by one thread at a time, and only while the peer waits for it.
    let raw: OpaquePointer
}
