import CLibPQ
import DocStore
import DocStorePostgres
import Foundation
import Synchronization
import TestSupport

/// The PostgreSQL server the PostgreSQL peers use: `--postgres URL`, or a throwaway cluster of the bench's own,
/// made as people run one (every commit flushed: `fsync` on), on loopback, stopped when the bench exits.
enum PostgresServer {
    private static let given = Mutex<String?>(nil)
    private static let started = Mutex<Result<String, any Error>?>(nil)

    /// Uses the server at `url` instead of starting one.
    static func use(_ url: String) { given.withLock { $0 = url } }

    /// The server's URL, without a schema.
    static func url() throws -> String {
        if let url = given.withLock({ $0 }) { return url }
        return try started.withLock { started in
            if started == nil {
                started = Result { "postgres://postgres@127.0.0.1:\(try PostgresCluster.startDurable().port)/postgres" }
            }
            return try started!.get()
        }
    }

    /// The server's URL with a `schema` query item.
    static func url(schema: String) throws -> String {
        let base = try url()
        return base + (base.contains("?") ? "&" : "?") + "schema=" + schema
    }

    /// A URL made by ``url(schema:)``, as libpq's URL and the schema.
    static func split(_ url: String) -> (url: String, schema: String) {
        guard var parts = URLComponents(string: url) else { return (url, "public") }
        let schema = parts.queryItems?.first { $0.name == "schema" }?.value ?? "public"
        parts.queryItems = parts.queryItems?.filter { $0.name != "schema" }
        if parts.queryItems?.isEmpty == true { parts.queryItems = nil }
        return (parts.string ?? url, schema)
    }

    /// A new schema name for one peer's tables.
    static func newSchema(_ prefix: String) -> String {
        prefix + "_" + UUID().uuidString.prefix(8).lowercased()
    }

    /// The bytes the tables of `schema` take on the server, indexes and TOAST included.
    static func size(ofSchema schema: String) throws -> Int {
        let link = try PostgresLink(url: try url())
        var bytes = 0
        try link.query("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
                       + "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
                       [schema]) { result, row in bytes = Int(PostgresLink.text(result, row, 0) ?? "0") ?? 0 }
        return bytes
    }

    /// Drops a peer's schema and everything in it.
    static func drop(schema: String) {
        _ = try? PostgresLink(url: try url()).query("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
    }
}

/// One libpq connection, as a program that uses PostgreSQL directly holds one: statements prepared once and run
/// with text parameters, rows read as text. Used by one thread at a time.
final class PostgresLink: @unchecked Sendable {
    // @unchecked: each link is used by one thread at a time, and only while its owner waits for it.
    private let raw: OpaquePointer
    private var prepared: Set<String> = []

    init(url: String) throws {
        guard let raw = PQconnectdb(url) else { throw BenchFailure(description: "libpq could not allocate a connection") }
        guard PQstatus(raw) == CONNECTION_OK else {
            let why = String(cString: PQerrorMessage(raw))
            PQfinish(raw)
            throw BenchFailure(description: "PostgreSQL: \(why)")
        }
        self.raw = raw
        try query("SET client_min_messages TO warning")
    }

    deinit { PQfinish(raw) }

    /// Runs `sql` (prepared the first time when it has parameters) with `parameters` as text; calls `row` with
    /// each row of the answer; returns the rows the statement returned or changed.
    @discardableResult
    func query(_ sql: String, _ parameters: [String?] = [], _ row: (OpaquePointer, Int32) -> Void = { _, _ in }) throws
        -> Int {
        let result: OpaquePointer?
        if parameters.isEmpty {
            result = PQexec(raw, sql)
        } else {
            let name = "q\(sql.hashValue & 0xFFFF_FFFF)"
            if !prepared.contains(name) {
                try check(PQprepare(raw, name, sql, Int32(parameters.count), nil), sql)
                prepared.insert(name)
            }
            let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.flatMap { strdup($0) } }
            defer { for copy in copies { free(copy) } }
            let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
            result = PQexecPrepared(raw, name, Int32(parameters.count), pointers, nil, nil, 0)
        }
        let answer = try check(result, sql)
        defer { PQclear(answer) }
        let rows = PQntuples(answer)
        for r in 0..<rows { row(answer, r) }
        return rows > 0 ? Int(rows) : Int(String(cString: PQcmdTuples(answer))) ?? 0
    }

    /// Runs a `COPY ... FROM STDIN` with `data` as its input, in a transaction of its own.
    func copy(_ sql: String, _ data: String) throws {
        try query("BEGIN")
        let started = try check(PQexec(raw, sql), sql, expecting: PGRES_COPY_IN)
        PQclear(started)
        var bytes = Array(data.utf8)
        let sent = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(raw, $0.baseAddress, Int32($0.count)) }
        }
        guard sent == 1, PQputCopyEnd(raw, nil) == 1 else {
            throw BenchFailure(description: "PostgreSQL on \"\(sql)\": \(String(cString: PQerrorMessage(raw)))")
        }
        while let result = PQgetResult(raw) { PQclear(try check(result, sql)) }
        try query("COMMIT")
    }

    static func text(_ result: OpaquePointer, _ row: Int32, _ column: Int32) -> String? {
        PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
    }

    /// A value's bytes, touched where a program would read them: their count and last byte.
    static func touch(_ result: OpaquePointer, _ row: Int32) -> Int {
        var touched = 0
        for column in 0..<PQnfields(result) {
            let count = Int(PQgetlength(result, row, column))
            if count > 0, let bytes = PQgetvalue(result, row, column) { touched &+= Int(bytes[count - 1]) }
            touched &+= count
        }
        return touched
    }

    @discardableResult
    private func check(_ result: OpaquePointer?, _ sql: String, expecting: ExecStatusType? = nil) throws -> OpaquePointer {
        guard let result else { throw BenchFailure(description: "PostgreSQL: \(String(cString: PQerrorMessage(raw)))") }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, expecting ?? PGRES_COMMAND_OK:
            return result
        default:
            let message = String(cString: PQresultErrorMessage(result))
            PQclear(result)
            throw BenchFailure(description: "PostgreSQL on \"\(sql)\": \(message)")
        }
    }
}

/// PostgreSQL used directly, as people use it for documents today: a table of `jsonb` documents keyed on their
/// id, expression indexes on the fields the queries filter on (a GIN index for the tags), plain SQL through libpq,
/// the documents encoded and decoded with Foundation's JSON coders.
final class PostgresJSONBPeer: Peer {
    let name = "PostgreSQL jsonb"
    private let durability: BenchDurability
    private var link: PostgresLink?
    private var schema = ""
    private var url = ""
    /// The connections of the concurrent writers, opened on first use and kept.
    private var writers: [PostgresLink] = []
    private(set) var sink = 0

    init(durability: BenchDurability = .full) { self.durability = durability }

    static let age = "(doc->>'age')::int"
    static let bonus = "(doc->>'bonus')::int"
    static let score = "(doc->>'score')::float8"

    static func schemaSQL(_ schema: String) -> String {
        """
        CREATE SCHEMA "\(schema)";
        SET search_path TO "\(schema)";
        CREATE TABLE person (id bigint PRIMARY KEY, doc jsonb NOT NULL);
        """
    }

    static let indexSQL = """
        CREATE INDEX person_on_age ON person ((\(age)));
        CREATE INDEX person_on_city ON person ((doc->>'city'));
        CREATE INDEX person_on_city_age ON person ((doc->>'city'), (\(age)));
        CREATE INDEX person_on_bonus ON person ((\(bonus)));
        CREATE INDEX person_on_tags ON person USING gin ((doc->'tags'));
        CREATE UNIQUE INDEX person_on_email ON person ((doc->>'email'));
        ANALYZE person;
        """

    /// The settings of a connection: the peer's schema, and whether a commit waits for its log to be flushed.
    static func settings(_ schema: String, _ durability: BenchDurability) -> String {
        "SET search_path TO \"\(schema)\"; SET synchronous_commit TO \(durability == .full ? "on" : "off")"
    }

    static func json(_ person: BenchPerson) throws -> String {
        String(decoding: try JSONEncoder().encode(person), as: UTF8.self)
    }

    static let insert = "INSERT INTO person (id, doc) VALUES ($1, $2)"
    static let save = "UPDATE person SET doc = $2 WHERE id = $1"

    func load(_ people: [BenchPerson], in directory: String) async throws {
        schema = PostgresServer.newSchema("jsonb")
        url = try PostgresServer.url()
        let link = try PostgresLink(url: url)
        self.link = link
        try link.query(Self.schemaSQL(schema))
        try link.query(Self.settings(schema, durability))
        // As people load many rows: COPY, in batches of 10,000 a transaction each; the indexes after.
        for start in stride(from: 0, to: people.count, by: 10_000) {
            var lines = ""
            for person in people[start..<min(people.count, start + 10_000)] {
                lines += "\(person.id),\"" + (try Self.json(person)).replacingOccurrences(of: "\"", with: "\"\"") + "\"\n"
            }
            try link.copy("COPY person (id, doc) FROM STDIN WITH (FORMAT csv)", lines)
        }
        try link.query(Self.indexSQL)
    }

    func supports(_ scenario: Scenario, _ form: Form) -> Bool {
        scenario != .fileCheck && scenario != .verify && !scenario.measuresReadsSideBySide
    }

    /// The rows of a reading scenario: what `form` selects, and the condition.
    static func query(_ scenario: Scenario, _ form: Form, _ p: Parameters) -> (sql: String, parameter: String?)? {
        let range10 = "\(age) >= 20 AND \(age) < 30"
        var parameter: String?
        let tail: String
        switch scenario {
        case .equality: tail = "WHERE doc->>'city' = $1"; parameter = p.city
        case .range1: tail = "WHERE \(age) >= 42 AND \(age) < 43"
        case .range10: tail = "WHERE \(range10)"
        case .compoundPrefix: tail = "WHERE doc->>'city' = $1 AND \(age) >= 50"; parameter = p.city
        case .arrayContains: tail = "WHERE doc->'tags' ? $1"; parameter = p.tag
        case .indexedResidual: tail = "WHERE \(range10) AND (doc->>'active')::boolean"
        case .unindexedFilter: tail = "WHERE \(score) > 99"
        case .sortIndexedLimit: tail = "ORDER BY \(age), id LIMIT 100"
        case .sortUnindexedLimit: tail = "ORDER BY \(score) DESC, id LIMIT 100"
        case .fullSort10: tail = "WHERE \(range10) ORDER BY \(score), id"
        case .coalesce: tail = "WHERE COALESCE(\(bonus), 0) > 150"
        case .optionalRange: tail = "WHERE doc->>'bonus' IS NOT NULL AND COALESCE(\(bonus), 0) BETWEEN 100 AND 105"
        case .flatMap: tail = "WHERE \(bonus) > 190"
        case .twoFields: tail = "WHERE COALESCE(\(bonus), 0) > \(age) + 100"
        case .arithmetic: tail = "WHERE \(age) * 2 > 190"
        case .ternary: tail = "WHERE CASE WHEN doc->>'bonus' IS NULL THEN \(age) < 2 ELSE \(bonus) > 195 END"
        case .stringContains: tail = "WHERE strpos(doc->>'name', 'ar') > 0"
        case .arrayCount: tail = "WHERE jsonb_array_length(doc->'tags') > 2"
        default: return nil
        }
        return ("SELECT \(form == .ids ? "id" : "doc") FROM person \(tail)", parameter)
    }

    /// The statement of an aggregate scenario, whose rows are the groups (or the one value).
    static func aggregate(_ scenario: Scenario) -> String? {
        switch scenario {
        case .groupByIndexedCount: return "SELECT doc->>'city', count(*) FROM person GROUP BY 1"
        case .groupByUnindexedSum: return "SELECT doc->>'name', sum(\(score)) FROM person GROUP BY 1"
        case .distinctIndexed: return "SELECT DISTINCT doc->>'city' FROM person"
        case .maxIndexed: return "SELECT max(\(age)) FROM person"
        case .averageRange10: return "SELECT avg(\(age)) FROM person WHERE \(age) >= 20 AND \(age) < 30"
        case .averageScoreRange10: return "SELECT avg(\(score)) FROM person WHERE \(age) >= 20 AND \(age) < 30"
        default: return nil
        }
    }

    func run(_ scenario: Scenario, _ form: Form, _ p: Parameters) async throws -> Int {
        guard let link else { return 0 }
        var touched = 0
        defer { sink &+= touched }
        /// What a program does with a row: the id read, the document's bytes touched, or the document decoded.
        let visit: (OpaquePointer, Int32) -> Void
        switch form {
        case .ids: visit = { touched &+= Int(PostgresLink.text($0, $1, 0) ?? "") ?? 0 }
        case .raw: visit = { touched &+= PostgresLink.touch($0, $1) }
        case .decoded:
            let decoder = JSONDecoder()
            visit = { result, row in
                let count = Int(PQgetlength(result, row, 0))
                let data = Data(bytes: PQgetvalue(result, row, 0), count: count)
                touched &+= ((try? decoder.decode(BenchPerson.self, from: data))?.age ?? -1_000_000)
            }
        }
        switch scenario {
        case .insert, .fileCheck, .verify:
            return 0
        case .getByID, .lookupByID:
            let sql = "SELECT \(form == .ids ? "id" : "doc") FROM person WHERE id = $1"
            var found = 0
            for id in p.ids { found += try link.query(sql, [String(id)], visit) }
            return found
        case .countByIndex:
            var count = 0
            try link.query("SELECT count(*) FROM person WHERE \(Self.age) < 10") { count = Int(PostgresLink.text($0, $1, 0)!)! }
            return count
        case .insertProcesses4:
            return try ProcessWriters.run(kind: "postgres", path: try PostgresServer.url(schema: schema),
                                          durability: durability, p)
        case .singleInserts, .insertTasks4, .insertTasks16, .insertTasks64, .singleSaves, .saveTasks16:
            let (lists, saving) = p.writes(scenario)
            while writers.count < lists.count {
                let writer = try PostgresLink(url: url)
                try writer.query(Self.settings(schema, durability))
                writers.append(writer)
            }
            if let message = Self.writeOnThreads(lists, through: writers, sql: saving ? Self.save : Self.insert) {
                throw BenchFailure(description: message)
            }
            return lists.reduce(0) { $0 + $1.count }
        case .update1Percent, .update1PercentFields:
            return try link.query("UPDATE person SET doc = jsonb_set(doc, '{address,zip}', to_jsonb($1::text)) "
                                  + "WHERE \(Self.age) = 42", [p.newZip])
        case _ where Self.aggregate(scenario) != nil:
            var value = 0.0
            let rows = try link.query(Self.aggregate(scenario)!) { result, row in
                touched &+= PostgresLink.touch(result, row)
                value = Double(PostgresLink.text(result, row, PQnfields(result) - 1) ?? "") ?? 0
            }
            return PersonTable.produced(scenario, rows: rows, value: value)
        case .findOrCreateHit, .findOrCreateMiss:
            for (email, id) in p.findOrCreateCalls(scenario) {
                if try link.query("SELECT doc FROM person WHERE doc->>'email' = $1", [email], visit) == 0 {
                    let person = PersonTable.newcomer(id: id, email: email)
                    try link.query("INSERT INTO person (id, doc) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                                   [String(person.id), try Self.json(person)])
                }
            }
            return Parameters.findOrCreateCalls
        default:
            guard let (sql, parameter) = Self.query(scenario, form, p) else { return 0 }
            return try link.query(sql, parameter.map { [$0] } ?? [], visit)
        }
    }

    /// Writes each list on a thread of its own, through its connection, a statement (a transaction) per person,
    /// encoded with `JSONEncoder`; the first error's message, or `nil`.
    static func writeOnThreads(_ lists: [[BenchPerson]], through links: [PostgresLink], sql: String) -> String? {
        let failure = Mutex<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        for (link, people) in zip(links, lists) {
            Thread {
                defer { finished.signal() }
                do {
                    for person in people {
                        let start = Meter.now()
                        try link.query(sql, [String(person.id), try json(person)])
                        WriteLatency.record(since: start)
                    }
                } catch {
                    failure.withLock { if $0 == nil { $0 = "\(error)" } }
                }
            }.start()
        }
        for _ in lists { finished.wait() }
        return failure.withLock { $0 }
    }

    func fileSize() throws -> Int { try PostgresServer.size(ofSchema: schema) }

    func close() async {
        writers = []
        link = nil
        PostgresServer.drop(schema: schema)
    }
}
