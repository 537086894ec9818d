import DocStore
import Foundation

/// The storage interface on a PostgreSQL server: each key space a table of `bytea` keys and values, which
/// PostgreSQL orders as LMDB does (bytes compared in order, a shorter key first when it is the other's prefix).
///
/// In the store's schema:
/// - `meta`: one row, the number of the last commit, the next key space's number, the number of the commit that
///   last changed the catalog, and how many processes listen for commits;
/// - `commits`: the last commits' numbers, each with a random mark (see ``committed(_:)``) and the format of the
///   process that made it;
/// - `spaces`: each key space's name, number, whether it is duplicate-sorted, and its entry count, kept in the
///   transaction that changes it so that a count costs one row;
/// - `main`, and `s1`, `s2`, ...: the key spaces, keyed on `k` (on `k, v` when duplicate-sorted).
///
/// A write begins by locking the `meta` row (`SELECT ... FOR UPDATE`), so writers take turns as LMDB's do, across
/// processes and hosts: each then reads the last commit's state and nothing can change under it, so the writes
/// are serialisable with no conflict to retry. A conflict the server still reports (a deadlock with a tool
/// outside DocStore, a serialisation failure on an engine that checks more) runs the write again, as does a
/// connection lost before the commit was sent. Reads run in `REPEATABLE READ READ ONLY` transactions: one
/// snapshot each. The SQL is plain: row locks, no advisory locks, no `LISTEN` on the data path.
final class PostgresStorage: StorageEngine {
    struct Settings {
        /// The URI libpq connects with (the store's schema left out).
        var conninfo: String
        /// The server and database, as errors name them.
        var server: String
        var schema: String
        /// `synchronous_commit` for writes: `on`, or `off` for durabilities that may lose the last commits.
        var synchronousCommit: Bool
        /// How long a lost connection is tried again before a write or read gives up.
        var reconnectFor: Duration = .seconds(10)
    }

    let settings: Settings
    private var connection: PostgresConnection?
    /// How many times the engine waited for the server (``PostgresConnection/waits``), on its current connection.
    var waits: Int { connection?.waits ?? 0 }
    /// Duplicate-sorted or not, per open key space.
    fileprivate var duplicateSorted: [UInt32: Bool] = [0: false]
    private var closed = false

    init(settings: Settings) throws {
        self.settings = settings
        let connection = try connect()
        self.connection = connection
        try prepareSchema(connection)
    }

    private func connect() throws -> PostgresConnection {
        let connection = try PostgresConnection(conninfo: settings.conninfo, server: settings.server)
        try connection.execute("SET search_path TO \(quoted(settings.schema)); SET client_min_messages TO warning; "
            + "SET synchronous_commit TO " + (settings.synchronousCommit ? "on" : "off"))
        // A session whose client is gone (the network dropped mid-write) holds the `meta` row, and every writer of
        // every process waits, until the server sees it gone: its keepalives, asked after 20 s and every 10 s, see
        // it within a minute rather than the system's two hours. (Not every server lets a session set them.)
        _ = try? connection.execute("SET tcp_keepalives_idle TO 20; SET tcp_keepalives_interval TO 10; "
            + "SET tcp_keepalives_count TO 3")
        // Every statement looks keys up, or walks a key range, whatever its values: one plan serves them all. Left
        // to choose, the server plans the statements that take arrays again at every run (a sixth of a single
        // insert's time on the server). A server without the setting plans as it will.
        _ = try? connection.execute("SET plan_cache_mode TO force_generic_plan")
        return connection
    }

    /// Creates the schema and its tables if missing. Two processes creating them at once may collide on the
    /// system catalogs: the loser tries again, and finds them there. A store whose tables are all there, as this
    /// version has them, is opened without a statement that changes anything: by a role that may only read, or on a
    /// server in recovery (a hot standby), which refuses even a `CREATE … IF NOT EXISTS`.
    private func prepareSchema(_ connection: PostgresConnection) throws {
        let literal = "'" + settings.schema.replacingOccurrences(of: "'", with: "''") + "'"
        let present = try connection.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = \(literal) "
            + "AND ((table_name = 'meta' AND column_name IN ('commit', 'next_space', 'catalog', 'listeners')) "
            + "OR (table_name = 'spaces' AND column_name = 'count') OR (table_name = 'main' AND column_name = 'v') "
            + "OR (table_name = 'commits' AND column_name = 'format'))")
        if present.rowCount == 7 { return }
        let schema = quoted(settings.schema)
        var attempt = 0
        while true {
            attempt += 1
            do {
                try connection.execute("""
                    BEGIN;
                    CREATE SCHEMA IF NOT EXISTS \(schema);
                    CREATE TABLE IF NOT EXISTS \(schema).meta (
                        one boolean PRIMARY KEY DEFAULT true CHECK (one),
                        commit bigint NOT NULL, next_space integer NOT NULL, catalog bigint NOT NULL DEFAULT 0,
                        listeners integer NOT NULL DEFAULT 0);
                    INSERT INTO \(schema).meta (one, commit, next_space) VALUES (true, 0, 1) ON CONFLICT DO NOTHING;
                    CREATE TABLE IF NOT EXISTS \(schema).spaces (
                        name text PRIMARY KEY, number integer NOT NULL UNIQUE,
                        dupsort boolean NOT NULL, count bigint NOT NULL);
                    CREATE TABLE IF NOT EXISTS \(schema).main (k bytea PRIMARY KEY, v bytea NOT NULL);
                    CREATE TABLE IF NOT EXISTS \(schema).commits (
                        number bigint PRIMARY KEY, mark bytea NOT NULL, format integer NOT NULL);
                    COMMIT
                    """)
                // A store made before the commit that last changed the catalog was kept (`meta.catalog`) gets it.
                // A process of that time would change the catalog without saying so, and a process of this one,
                // whose cache holds the catalog while no commit changed it, could then miss an index: its commits
                // are refused from now on (each commit notes its `format`, which that process does not fill).
                // (And the number of processes listening for commits, `meta.listeners`.)
                let upgraded = try connection.execute("SELECT 1 FROM information_schema.columns WHERE table_schema = "
                    + "\(literal) AND ((table_name = 'meta' AND column_name IN ('catalog', 'listeners')) OR "
                    + "(table_name = 'commits' AND column_name = 'format'))")
                if upgraded.rowCount < 3 {
                    try connection.execute("""
                        BEGIN;
                        ALTER TABLE \(schema).meta ADD COLUMN IF NOT EXISTS catalog bigint NOT NULL DEFAULT 0;
                        ALTER TABLE \(schema).meta ADD COLUMN IF NOT EXISTS listeners integer NOT NULL DEFAULT 0;
                        ALTER TABLE \(schema).commits ADD COLUMN IF NOT EXISTS format integer NOT NULL DEFAULT 2;
                        ALTER TABLE \(schema).commits ALTER COLUMN format DROP DEFAULT;
                        COMMIT
                        """)
                }
                return
            } catch let error as PostgresError where attempt < 5 && !error.connectionLost {
                _ = try? connection.execute("ROLLBACK")
                if ["23505", "42P07", "42P06", "40001", "40P01"].contains(error.sqlState ?? "") { continue }
                throw error
            }
        }
    }

    /// The open connection, made again if it was lost: tried for ``Settings/reconnectFor``.
    fileprivate func liveConnection() throws -> PostgresConnection {
        if closed { throw StorageError.closed }
        if let connection, connection.isUp { return connection }
        connection = nil
        let deadline = ContinuousClock.now + settings.reconnectFor
        var delay = Duration.milliseconds(50)
        while true {
            do {
                let c = try connect()
                connection = c
                return c
            } catch let error as PostgresError {
                if ContinuousClock.now + delay > deadline {
                    throw PostgresError(server: error.server, message: "the connection was lost and could not be "
                        + "made again within \(settings.reconnectFor): \(error.message)", sqlState: error.sqlState,
                        connectionLost: true)
                }
                Thread.sleep(forTimeInterval: Double(delay.components.attoseconds) / 1e18 + Double(delay.components.seconds))
                delay = min(delay * 2, .milliseconds(800))
            }
        }
    }

    func read<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        try translating {
            var attempt = 0
            while true {
                attempt += 1
                let connection = try liveConnection()
                let txn: PostgresTransaction
                do {
                    txn = try PostgresTransaction(beginning: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                                                  engine: self, connection: connection, isReadOnly: true)
                } catch let error as PostgresError where error.connectionLost && attempt < 3 {
                    continue   // nothing has run yet
                }
                defer {
                    txn.invalidate()
                    // A read has nothing to commit: its end is sent, and its answer read before the next statement.
                    try? connection.send("COMMIT")
                }
                do {
                    let result = try body(txn)
                    try txn.checkBegun()
                    return result
                } catch let error as PostgresError where error.connectionLost && !txn.hasBegun && attempt < 3 {
                    continue   // the connection went before the read began
                } catch where txn.mustRunAgain && attempt < 10 {
                    continue
                }
            }
        }
    }

    func write<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        try translating {
            var attempt = 0
            var assumeAbsence = true
            while true {
                attempt += 1
                let connection = try liveConnection()
                var committing = false
                let txn: PostgresTransaction
                do {
                    txn = try PostgresTransaction(beginning: "BEGIN", engine: self, connection: connection,
                                                  isReadOnly: false, assumingAbsence: assumeAbsence)
                } catch let error as PostgresError where error.connectionLost && attempt < 10 {
                    continue   // nothing has run yet
                }
                var result: R?
                do {
                    result = try body(txn)
                    if let failure = txn.failure { throw failure }
                    if let interrupted = txn.interruptedChange { throw StorageError.interruptedChange(interrupted) }
                    if txn.mustRunAgain { throw PostgresTransaction.staleCache }
                    // A write that changed something checks the commit it began at with its commit; one that did
                    // not waits for the answer to `BEGIN`.
                    if !txn.changed { try txn.checkBegun() }
                    txn.invalidate()
                    committing = true
                    try txn.commit()
                    if txn.changed { cache.committed(txn) }
                    return result!
                } catch {
                    let cause = txn.failure ?? (error as? PostgresError)
                    txn.invalidate()
                    if committing { cache.forget() }
                    if let cause, cause.connectionLost {
                        // The commit may have reached the server before the connection went: then it holds, with
                        // the spaces it made.
                        if committing, let result, try !txn.changed || committed(txn) { return result }
                        forget(txn.createdSpaces, on: connection)
                        if attempt < 10 { continue }
                    } else {
                        // The writes sent ahead are answered first (their errors are this one's consequences).
                        do { try connection.settle() } catch { txn.note(error) }
                        _ = try? connection.execute("ROLLBACK")
                        // The statements of the tables the write made go once it is rolled back: a transaction the
                        // server failed refuses every command but its rollback, `DEALLOCATE` too, and statements
                        // outlive a rollback. Left on the server, they stopped the numbers of those tables, given
                        // out again, from having statements: the write's next run, and every later one making a
                        // collection, failed.
                        forget(txn.createdSpaces, on: connection)
                        if let cause { txn.note(cause) }
                        // A key taken as absent was there: the write runs again, reading what it checks.
                        if txn.assumedWrongly { assumeAbsence = false }
                        if (cause?.isConflict ?? false) || txn.mustRunAgain, attempt < 10 { continue }
                    }
                    throw error
                }
            }
        }
    }

    /// Whether `txn` committed, asked on a new connection after the old one was lost mid-commit: whether a commit
    /// holds its mark.
    ///
    /// The server may still be ending the transaction (writing its commit, or rolling it back) when the answer is
    /// asked: it holds the `meta` row until then, as every write does from its start, so the question takes that
    /// row first and waits for it. Should the row stay held (a server that has not yet seen the connection go: its
    /// keepalives end the session within about a minute), the outcome cannot be known, and the error says so: the
    /// write must not be run again blindly.
    private func committed(_ txn: PostgresTransaction) throws -> Bool {
        // (Asked by the mark alone: the answer that said which commit the transaction began at may not have come.)
        let mark = txn.mark.map { String(format: "%02x", $0) }.joined()
        var asked: PostgresConnection?
        do {
            let connection = try liveConnection()
            asked = connection
            _ = try connection.execute("BEGIN; SET LOCAL lock_timeout TO '90s'; SELECT 1 FROM meta FOR UPDATE")
            let found = try connection.execute("SELECT 1 FROM commits WHERE mark = decode('\(mark)', 'hex')").rowCount > 0
            _ = try connection.execute("COMMIT")
            return found
        } catch {
            _ = try? asked?.execute("ROLLBACK")
            throw StorageError.outcomeUnknown("\(settings.server): the connection was lost while a write committed, "
                + "and whether it committed cannot be known (\(error)): read the store before writing it again")
        }
    }

    fileprivate func forget(_ spaces: [UInt32], on connection: PostgresConnection) {
        for number in spaces {
            duplicateSorted[number] = nil
            connection.forgetStatements(naming: "s\(number)")
        }
    }

    /// Keeps the number and kind of a space its transaction opened (the numbers of spaces never change).
    fileprivate func opened(_ number: UInt32, duplicateSort: Bool, name: String) {
        duplicateSorted[number] = duplicateSort
        if name == KeySpace.catalogName { cache.catalog = number }
    }

    fileprivate let cache = CommitCache()

    /// A second connection that listens for the store's commits (``channel``), opened when observation first asks
    /// for the last commit; and the last commit it read.
    private var listener: PostgresConnection?
    private var lastSeenCommit: Int?

    /// The channel every commit notifies (a `NOTIFY` in the transaction, delivered when it commits), as an
    /// identifier, and by name.
    ///
    /// A commit notifies only while a process listens: `meta.listeners` counts them. (The server takes a lock of
    /// the whole database at the commit of a transaction that notifies: the commits of every store in it take turns
    /// there.) A listener counts itself in after its `LISTEN` and before it reads the
    /// last commit; the count takes the `meta` row, which every writer holds from its start to its commit, so a
    /// commit either sees the listener counted or comes before that read. A process that ends without counting
    /// itself out (killed, or its connection lost) leaves the count up: commits then notify for nobody, as they
    /// always did before.
    var channel: String { quoted(channelName) }
    var channelName: String {
        let name = "docstore " + settings.schema
        guard name.utf8.count > 63 else { return name }
        // A channel's name is at most 63 bytes (pg_notify refuses a longer one): a long schema's is its hash.
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325   // FNV-1a
        for byte in settings.schema.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        return "docstore " + String(hash, radix: 16)
    }

    /// The last commit's number. Observers ask every 50 ms: while no commit has been announced on the listening
    /// connection since the last answer, the answer is the same, with no statement sent.
    func lastCommittedTransaction() throws -> Int {
        try translating {
            if let listener, listener.isUp, let seen = lastSeenCommit, try listener.notifications().isEmpty {
                return seen
            }
            // (Forgotten before it is asked for: the notifications just read are used up, and should the question
            // fail, the next call must ask again rather than answer the old commit for good.)
            lastSeenCommit = nil
            if listener == nil || listener?.isUp == false {
                lastSeenCommit = nil
                listener = try? connect()
                do {
                    // (A writer of another process holds the `meta` row while it writes: a long one is not waited
                    // for, and the last commit is then asked for at every call.)
                    _ = try listener?.execute("SET lock_timeout TO '2s'")
                    _ = try listener?.execute("LISTEN \(channel)")
                    _ = try listener?.execute("UPDATE meta SET listeners = listeners + 1")
                } catch {
                    listener = nil   // (the last commit is then asked for at every call)
                }
            }
            let commit = try liveConnection().execute("SELECT commit FROM meta").textInteger(0, 0) ?? 0
            if listener != nil { lastSeenCommit = commit }
            return commit
        }
    }

    func close() {
        closed = true
        connection = nil
        if let listener, listener.isUp { _ = try? listener.execute("UPDATE meta SET listeners = listeners - 1") }
        listener = nil
    }

    /// Every commit is durable when the server acknowledges it, unless `synchronous_commit` is off; the server then
    /// writes the log within `wal_writer_delay`. Flushing then commits a transaction of its own with
    /// `synchronous_commit` on (its id taken, so that it has a commit record to write): the server acknowledges
    /// it once the log is on disk up to it, and so every commit before it.
    func flush() throws {
        if closed { throw StorageError.closed }
        guard !settings.synchronousCommit else { return }
        try translating {
            let connection = try liveConnection()
            do {
                _ = try connection.execute("BEGIN; SET LOCAL synchronous_commit TO on; SELECT txid_current(); COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// PostgreSQL's errors, as the store's storage errors.
    private func translating<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as PostgresError {
            throw StorageError.failed(error.description)
        }
    }
}

/// Calls `body` with the bytes of each of `arrays`, valid for the call.
func withBuffers<R>(_ arrays: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) throws -> R) throws -> R {
    func nest(_ i: Int, _ done: [UnsafeRawBufferPointer]) throws -> R {
        if i == arrays.count { return try body(done) }
        return try arrays[i].withUnsafeBytes { try nest(i + 1, done + [$0]) }
    }
    return try nest(0, [])
}

/// An identifier, quoted for SQL.
func quoted(_ identifier: String) -> String {
    "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

/// A transaction on one connection, valid inside the engine's `read` or `write` closure.
final class PostgresTransaction: StorageTransaction {
    let engine: PostgresStorage
    let connection: PostgresConnection
    let isReadOnly: Bool
    private(set) var isValid = true
    var opensKeySpaces: Bool { false }
    var keptKeySpaces: Bool { true }

    /// The commit this transaction began at, once the answer to its `BEGIN` has been read; `nil` before.
    private var begunAt: Int?
    /// The commit and the catalog's last change the cache held when this transaction began: it serves the
    /// transaction's first reads before the answer comes (``usedCachedCounts``, ``usedCachedCatalog``).
    private let assumedCommit: Int
    private let assumedCatalog: Int
    /// Whether counts (which every commit may change) or catalog entries (which only a change of the catalog
    /// changes) came from the cache before the answer to `BEGIN` said which commit this transaction sees.
    private var usedCachedCounts = false
    private var usedCachedCatalog = false
    /// The answer said another commit than the cache's, after the cache had served what that commit changes: what
    /// was read may be out of date, and the transaction must run again (``mustRunAgain``).
    private var stale = false
    /// Random bytes kept with this transaction's commit number (table `commits`), for asking whether it committed
    /// when the connection goes. Made when a commit first asks for it: a read has none (each `UUID()` opens the
    /// system's random device).
    fileprivate lazy var mark = withUnsafeBytes(of: UUID().uuid) { Array($0) }

    var mustRunAgain: Bool { stale || assumedWrongly }
    /// What a transaction the cache served from another commit throws, to be run again.
    static let staleCache = StorageError.failed("the commit cache served a transaction from another commit: "
                                                + "it runs again")

    /// Whether keys a write expects absent are taken as absent without asking (``prefetch(_:expectingAbsent:)``).
    private let assumesAbsence: Bool
    /// A check sent ahead failed: a key taken as absent was there, or the commit cache served this transaction from
    /// another commit than the one it saw. The transaction cannot commit, and runs again.
    private(set) var assumedWrongly = false
    /// What a failed check sent ahead gives: a division by zero, the one error in portable SQL that a `SELECT` can
    /// be made to raise on a condition. No other statement of the engine divides.
    private static let checkFailedState = "22012"

    /// Notes an error of the server: a failed check means that the transaction runs again.
    func note(_ error: any Error) {
        if let error = error as? PostgresError, error.sqlState == PostgresTransaction.checkFailedState {
            assumedWrongly = true
        }
    }
    var hasBegun: Bool { begunAt != nil }

    /// For a read, the commit it sees; for a write, the commit it makes.
    var id: Int {
        if begunAt == nil { try? checkBegun() }
        return (begunAt ?? assumedCommit) + (isReadOnly ? 0 : 1)
    }
    /// The first error the server gave: the server has aborted the transaction, which cannot commit.
    fileprivate(set) var failure: PostgresError?
    private(set) var interruptedChange: (any Error)?
    /// (Its savepoints are this transaction too.)
    private(set) var changes = 0
    /// Entry counts changed here, per space: written with the commit.
    fileprivate var countChanges: [UInt32: Int] = [:]
    /// Spaces created here, forgotten if the transaction does not commit.
    fileprivate(set) var createdSpaces: [UInt32] = []
    /// Whether anything was written: a write that changed nothing is no commit.
    fileprivate(set) var changed = false
    /// Counts the writes, so that what was fetched is known to be out of date.
    private(set) var writeGeneration = 0
    /// Counts the writes to each space, and those that may have changed any (``generation(of:)``).
    private var writesTo: [UInt32: Int] = [:]
    private var writesToAny = 0

    /// Changes when a write may have changed `space`'s entries: a cursor's window stays valid across writes to other
    /// spaces (a walk of documents that writes index entries does not fetch its window again after each).
    func generation(of space: UInt32) -> Int { writesTo.isEmpty ? writesToAny : writesToAny + (writesTo[space] ?? 0) }
    /// Every answer that values were handed out from: kept until the transaction ends, so that a value stays valid
    /// as long as one of LMDB's would (callers hold entries across later reads and writes). A transaction that reads
    /// much holds it all until it ends, but for what a passing cursor walks (``withPassingCursor(_:_:)``) and what
    /// is copied out (``copiedValue(_:_:)``).
    private var answers: [PostgresResult] = []
    /// Cached values handed out, kept as ``answers`` are.
    private var cachedValues: [CommitCache.Bytes] = []
    private var savepoints = 0
    /// This transaction wrote to the catalog: its reads of it go to the server, and the cache forgets it at commit.
    fileprivate(set) var wroteCatalog = false
    /// This transaction emptied or dropped a space: the counts the server holds are no longer those of the commit
    /// it began at.
    fileprivate(set) var resetCounts = false

    /// Begins a transaction with `begin` and asks for the commit it sees and the commit that last changed the
    /// catalog (a write locks the `meta` row, so that writers of every process take turns), both sent ahead: their
    /// answer comes with the transaction's first statement, in the same round trip. Until then the cache serves as
    /// of its own commit; if the answer says that what it served has changed since, the transaction runs again.
    init(beginning begin: String, engine: PostgresStorage, connection: PostgresConnection, isReadOnly: Bool,
         assumingAbsence: Bool = false) throws {
        self.engine = engine
        self.connection = connection
        self.isReadOnly = isReadOnly
        assumesAbsence = assumingAbsence && !isReadOnly
        assumedCommit = engine.cache.commit
        assumedCatalog = engine.cache.catalogChanged
        try connection.sendAhead(begin)
        let sql = isReadOnly ? "SELECT commit, catalog FROM meta" : "SELECT commit, catalog FROM meta FOR UPDATE"
        try connection.sendAhead(isReadOnly ? "began2" : "beganwrite2", sql, []) { [weak self] answer in
            guard let self, answer.rowCount > 0 else { return }
            let commit = answer.binaryInteger(0, 0), catalog = answer.binaryInteger(0, 1)
            begunAt = commit
            if (usedCachedCounts && commit != assumedCommit) || (usedCachedCatalog && catalog != assumedCatalog) {
                stale = true
            }
            engine.cache.begin(at: commit, catalogChanged: catalog)
        }
    }

    /// Reads the answer to `BEGIN` if no statement has yet, and throws when the cache served this transaction
    /// from another commit than the one it sees.
    func checkBegun() throws {
        if begunAt == nil { try onServer { try connection.settle() } }
        if stale { throw PostgresTransaction.staleCache }
    }

    /// Notes that the cache served this transaction a count, or a catalog entry, before the answer to `BEGIN` came.
    fileprivate func servedFromCache(catalog: Bool) {
        if begunAt == nil {
            if catalog { usedCachedCatalog = true } else { usedCachedCounts = true }
        }
    }

    func invalidate() {
        isValid = false
        answers = []
        windows = [:]
        prefetched = [:]
        cachedValues = []
        along = nil
        alongByID = nil
    }

    /// Ends a write in one round trip: its count changes (those known here, and those the writes sent ahead
    /// noted on the server), the commit number, the notice to observers and `COMMIT` are sent ahead with the writes
    /// not yet answered.
    fileprivate func commit() throws {
        try sendGathered()
        if changed {
            // (Each answers the count it leaves: the count at the commit, which the cache keeps.)
            for (number, delta) in countChanges where delta != 0 {
                countedOnServer.insert(number)
                try connection.sendAhead("addcount2", "UPDATE spaces SET count = count + $1::bigint WHERE number = "
                                         + "$2::bigint RETURNING count", [], integers: [delta, Int(number)],
                                         then: countAnswered(KeySpace(number: number)))
            }
            if countsRolledBack && !countedOnServer.isEmpty {
                try connection.sendAhead("countsnow", "SELECT number::bigint, count FROM spaces", []) { [weak self] answer in
                    for row in 0..<answer.rowCount {
                        self?.committedCounts[UInt32(answer.binaryInteger(row, 0))] = answer.binaryInteger(row, 1)
                    }
                }
            }
            // The commit number, the mark of the transaction that made it, and the notice to observers, in one
            // prepared statement. The mark is for asking after a lost connection whether the commit held: a
            // transaction id the server never logged is given out again after a crash, and another transaction
            // with it may have committed. The marks of all but the last 1,024 commits are let go.
            // A change of the catalog is noted as this commit's (`$5`).
            //
            // When the cache served this transaction before the answer to `BEGIN` came (which may come only with the
            // commit), the statement also checks that what it served still held: that the commit made follows the
            // one the cache held (`$3`), that the catalog last changed where the cache says (`$4`); -1 for no check.
            // Else it fails, and with it the transaction, which runs again. (`old` sees the row before the update.)
            if stale { throw PostgresTransaction.staleCache }
            let counts = usedCachedCounts ? assumedCommit : -1
            let catalog = usedCachedCatalog ? assumedCatalog : -1
            try mark.withUnsafeBytes { m in
                try engine.channelName.withUTF8Bytes { c in
                    try connection.sendAhead("commitnext4", "WITH old AS (SELECT commit, catalog, listeners FROM meta), "
                                             + "next AS (UPDATE meta SET commit = commit + 1, catalog = CASE WHEN "
                                             + "$5::bigint = 1 THEN commit + 1 ELSE catalog END RETURNING commit), marked "
                                             + "AS (INSERT INTO commits SELECT commit, $1, 2 FROM next RETURNING 1) SELECT "
                                             + "CASE WHEN old.listeners > 0 THEN pg_notify(convert_from($2, 'UTF8'), '') "
                                             + "END, 1 / (CASE WHEN ($3::bigint < 0 "
                                             + "OR old.commit = $3::bigint) AND ($4::bigint < 0 OR old.catalog = "
                                             + "$4::bigint) THEN 1 ELSE 0 END) FROM marked, old", [m, c],
                                             integers: [counts, catalog, wroteCatalog ? 1 : 0]) { _ in }
                }
            }
            // (By the commit this transaction is thought to make, before the answer says: a later one lets them go
            // if this one misses.)
            let made = (begunAt ?? assumedCommit) + 1
            if made > 0 && made % 1_024 == 0 {
                try connection.sendAhead("DELETE FROM commits WHERE number <= \(made - 1_024)")
            }
        }
        try connection.sendAhead("COMMIT")
        do { try connection.settle() } catch {
            note(error)
            throw error
        }
    }

    /// The spaces whose counts the writes sent ahead changed on the server, as they ran, each with the count the
    /// last of them (or the commit) answered: the count at the commit.
    fileprivate(set) var countedOnServer: Set<UInt32> = []
    fileprivate(set) var committedCounts: [UInt32: Int] = [:]
    /// A savepoint was rolled back after its writes had changed counts on the server: the counts they answered no
    /// longer hold, and the commit asks for them again.
    private var countsRolledBack = false

    /// A delete sent ahead that lowers its space's count on the server as it runs: `change` (a `WITH` whose rows,
    /// one per entry removed, are named `row`), then the count lowered by its rows, in the same statement, which
    /// answers the new count.
    private func counting(_ space: KeySpace, _ change: String) -> String {
        "WITH \(change) UPDATE spaces SET count = count - (SELECT count(*) FROM row) WHERE number = \(space.number) "
            + "RETURNING count"
    }

    /// Keeps the count a write made by ``counting(_:_:)`` answered.
    private func countAnswered(_ space: KeySpace) -> (PostgresResult) -> Void {
        { [weak self] answer in if answer.rowCount > 0 { self?.committedCounts[space.number] = answer.binaryInteger(0, 0) } }
    }

    /// Talks to the server for this transaction: after a server error nothing more is sent, and an error is kept
    /// (outside a savepoint), since the server has aborted the transaction.
    private func onServer<R>(_ body: () throws -> R) throws -> R {
        if let failure { throw failure }
        let result: R
        do {
            try sendGathered()
            result = try body()
        } catch let error as PostgresError {
            if savepoints == 0 { failure = error }
            note(error)
            throw error
        }
        if stale { throw PostgresTransaction.staleCache }
        return result
    }

    /// Runs a statement of this transaction.
    @discardableResult
    func run(_ name: String, _ sql: @autoclosure () -> String, _ values: [UnsafeRawBufferPointer],
             integers: [Int] = []) throws -> PostgresResult {
        try onServer { try connection.execute(name, sql(), values, integers: integers) }
    }

    /// Sends a write of this transaction without waiting for its answer, which goes to `then` when a later
    /// statement is answered (``PostgresConnection/sendAhead(_:_:_:integers:then:)``); its error, if any, is thrown
    /// and kept by the call that reads it.
    func runAhead(_ name: String, _ sql: @autoclosure () -> String, _ values: [UnsafeRawBufferPointer],
                  then: @escaping (PostgresResult) -> Void = { _ in }) throws {
        try onServer { try connection.sendAhead(name, sql(), values, then: then) }
    }

    @discardableResult
    private func runText(_ sql: String) throws -> PostgresResult {
        try onServer { try connection.execute(sql) }
    }

    /// The statement of a look-up by key: the first value, for a duplicate-sorted space.
    private func getStatement(_ table: String) -> String { "SELECT v FROM \(table) WHERE k = $1 ORDER BY v LIMIT 1" }

    /// The table of a space.
    func table(_ space: KeySpace) -> String { space.number == 0 ? "main" : "s\(space.number)" }

    func isDuplicateSorted(_ space: KeySpace) -> Bool { engine.duplicateSorted[space.number] ?? false }

    /// Notes a write, to `key` of `space` when it names one; `countedOnServer` when it was sent ahead and noted its
    /// count change on the server.
    private func wrote(_ space: KeySpace? = nil, key: UnsafeRawBufferPointer? = nil, countedOnServer counted: Bool = false) {
        if counted, let space { countedOnServer.insert(space.number) }
        // A value read ahead under that key no longer holds (any, after a write that names no key).
        if !prefetched.isEmpty {
            if let space, let key { prefetched[PrefetchKey(space: space.number, key: Array(key))] = nil } else { prefetched = [:] }
        }
        changed = true
        writeGeneration += 1
        if let space { writesTo[space.number, default: 0] += 1 } else { writesToAny += 1 }
        if space == nil || space?.number == engine.cache.catalog { wroteCatalog = true }
    }

    private func checkWritable() throws {
        if isReadOnly { throw StorageError.permissionDenied("a read transaction cannot write") }
    }

    // MARK: Key spaces

    func openKeySpace(_ name: String?, create: Bool, duplicateSort: Bool, fixedSizeValues: Bool) throws -> KeySpace? {
        guard let name else { return KeySpace(number: 0) }
        let found = try name.withUTF8Bytes { n in
            try run("space", "SELECT number, dupsort FROM spaces WHERE name = convert_from($1, 'UTF8')", [n])
        }
        if found.rowCount > 0 {
            let number = UInt32(found.binaryInteger(0, 0))
            engine.opened(number, duplicateSort: found.bytes(0, 1).first == 1, name: name)
            return KeySpace(number: number)
        }
        guard create else { return nil }
        try checkWritable()
        let allocated = try runText("UPDATE meta SET next_space = next_space + 1 RETURNING next_space - 1")
        guard let number = allocated.textInteger(0, 0).map(UInt32.init) else {
            throw StorageError.failed("the store's meta row is missing")
        }
        try name.withUTF8Bytes { n in
            _ = try run("newspace", "INSERT INTO spaces VALUES (convert_from($1, 'UTF8'), $2::bigint, $3::bigint = 1, 0)",
                        [n], integers: [Int(number), duplicateSort ? 1 : 0])
        }
        try runText("CREATE TABLE s\(number) (k bytea NOT NULL, v bytea NOT NULL, PRIMARY KEY (k\(duplicateSort ? ", v" : "")))")
        createdSpaces.append(number)
        engine.opened(number, duplicateSort: duplicateSort, name: name)
        wrote()
        return KeySpace(number: number)
    }

    func drop(_ space: KeySpace, delete: Bool) throws {
        try checkWritable()
        changes &+= 1
        resetCounts = true
        if delete {
            try runText("DROP TABLE \(table(space)); DELETE FROM spaces WHERE number = \(space.number)")
            countChanges[space.number] = nil
        } else {
            try runText("DELETE FROM \(table(space)); UPDATE spaces SET count = 0 WHERE number = \(space.number)")
            countChanges[space.number] = 0
        }
        wrote()
    }

    func entryCount(_ space: KeySpace) throws -> Int {
        if space.number == 0 { return try runText("SELECT count(*) FROM main").textInteger(0, 0) ?? 0 }
        if countedOnServer.contains(space.number) {
            // The count as of this transaction's statements so far, which the writes sent ahead changed as they ran.
            return try run("countnow", "SELECT count FROM spaces WHERE number = $1::bigint", [],
                           integers: [Int(space.number)]).binaryInteger(0, 0) + (countChanges[space.number] ?? 0)
        }
        let cached = resetCounts ? nil : engine.cache.counts[space.number]
        if cached != nil { servedFromCache(catalog: false) }
        let stored = try cached ?? {
            let answer = try run("count", "SELECT count FROM spaces WHERE number = $1::bigint", [],
                                 integers: [Int(space.number)])
            let count = answer.rowCount > 0 ? answer.binaryInteger(0, 0) : 0
            if !resetCounts { engine.cache.counts[space.number] = count }
            return count
        }()
        return stored + (countChanges[space.number] ?? 0)
    }

    /// One `count(*)` on the server, of at most `limit` rows when one is given.
    func entryCount(_ space: KeySpace, from lower: [UInt8], below upper: [UInt8]?, atMost limit: Int?) throws -> Int {
        try entryCounts([(space, lower, upper)], atMost: limit)[0]
    }

    /// One `GROUP BY k` on the server, which walks the table's key in order and stops at the limit; each key's
    /// first value is one probe of the primary key (PostgreSQL has no `min` of `bytea`).
    func keySummaries(_ space: KeySpace, from lower: [UInt8], after: [UInt8]?, below upper: [UInt8]?, atMost limit: Int)
        throws -> [(key: [UInt8], first: [UInt8], count: Int)] {
        let t = table(space)
        let name = "\(t)_keys" + (after == nil ? "from" : "after") + (upper == nil ? "" : "below")
        let sql = "SELECT g.k, (SELECT v FROM \(t) WHERE k = g.k ORDER BY v LIMIT 1), g.n FROM (SELECT k, count(*) AS n "
            + "FROM \(t) WHERE " + (after == nil ? "k >= $1" : "k > $1") + (upper == nil ? "" : " AND k < $2")
            + " GROUP BY k ORDER BY k LIMIT $\(upper == nil ? 2 : 3)) AS g ORDER BY g.k"
        let answer = try (after ?? lower).withUnsafeBytes { l in
            try (upper ?? []).withUnsafeBytes { u in
                try run(name, sql, upper == nil ? [l] : [l, u], integers: [limit])
            }
        }
        return (0..<answer.rowCount).map {
            (Array(answer.bytes($0, 0)), Array(answer.bytes($0, 1)), answer.binaryInteger($0, 2))
        }
    }

    /// A `count(*)` each, sent together and answered in one round trip.
    func entryCounts(_ ranges: [(space: KeySpace, lower: [UInt8], upper: [UInt8]?)], atMost limit: Int?) throws -> [Int] {
        var counts = [Int](repeating: 0, count: ranges.count)
        for (i, (space, lower, upper)) in ranges.enumerated() {
            let t = table(space)
            let rows = "SELECT 1 FROM \(t) WHERE k >= $1" + (upper == nil ? "" : " AND k < $2")
                + (limit == nil ? "" : " LIMIT $\(upper == nil ? 2 : 3)")
            let name = "\(t)_count" + (upper == nil ? "from" : "in") + (limit == nil ? "" : "most")
            try lower.withUnsafeBytes { l in
                try (upper ?? []).withUnsafeBytes { u in
                    try onServer {
                        try connection.sendAhead(name, "SELECT count(*) FROM (\(rows)) AS counted",
                                                 upper == nil ? [l] : [l, u], integers: limit.map { [$0] } ?? []) {
                            counts[i] = $0.binaryInteger(0, 0)
                        }
                    }
                }
            }
        }
        try onServer { try connection.settle() }
        return counts
    }

    // MARK: Entries

    /// Keeps an answer whose values are handed out until the transaction ends.
    func keep(_ answer: PostgresResult) { answers.append(answer) }

    /// The last windows whose rows came with the documents they name (``PostgresCursor``), while nothing was
    /// written since: ``entries(_:forKeys:)`` serves those documents again (a walk that checks a condition on the
    /// documents of a page of results, whose documents are then read again by id, reads them once). At most
    /// ``alongRows`` rows are looked in, the oldest windows dropped first (``answers`` holds them all until the
    /// transaction ends).
    private var along: (space: UInt32, generation: Int, windows: [PostgresResult], rows: Int)?
    /// The documents of ``along`` by id, made when first asked for.
    private var alongByID: [Bytes: (id: UnsafeRawBufferPointer, document: UnsafeRawBufferPointer?)]?
    private static let alongRows = 8_192

    /// Bytes as a dictionary key, hashed at once rather than a byte at a time.
    private struct Bytes: Hashable {
        let bytes: [UInt8]
        func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    }

    /// Notes a window whose rows are index entries (`k`, `v`) with the document of `space` each names (a third
    /// column).
    func fetchedAlong(_ space: KeySpace, _ answer: PostgresResult) {
        var kept = along.flatMap { $0.space == space.number && $0.generation == writeGeneration ? $0 : nil }
            ?? (space: space.number, generation: writeGeneration, windows: [], rows: 0)
        kept.windows.append(answer)
        kept.rows += answer.rowCount
        while kept.rows > PostgresTransaction.alongRows && kept.windows.count > 1 {
            kept.rows -= kept.windows.removeFirst().rowCount
        }
        along = kept
        alongByID = nil
    }

    /// The entries under `keys`, when ``along`` holds every one of them (a document or its absence).
    private func entriesFetchedAlong(_ space: KeySpace, _ keys: [[UInt8]]) -> [StorageEntry]? {
        guard let along, along.space == space.number, along.generation == writeGeneration else { return nil }
        let byID = alongByID ?? {
            var byID: [Bytes: (id: UnsafeRawBufferPointer, document: UnsafeRawBufferPointer?)] = [:]
            for window in along.windows {
                for row in 0..<window.rowCount {
                    let id = window.bytes(row, 1)
                    byID[Bytes(bytes: Array(id))] = (id, window.isNull(row, 2) ? nil : window.bytes(row, 2))
                }
            }
            alongByID = byID
            return byID
        }()
        var entries: [StorageEntry] = []
        entries.reserveCapacity(keys.count)
        for key in keys {
            guard let found = byID[Bytes(bytes: key)] else { return nil }
            if let document = found.document { entries.append((found.id, document)) }
        }
        return entries
    }

    /// The windows cursors fetched, by statement, parameters and the writes before them: a window asked for again
    /// in the same transaction (the planner counts a range's entries, then the walk reads them) is not fetched
    /// twice.
    private var windows: [WindowKey: PostgresResult] = [:]
    private struct WindowKey: Hashable {
        let statement: String
        let values: [[UInt8]]
        let limit: Int
        let generation: Int
    }

    /// A cursor's window: the answer of statement `name` for `values` and `limit`, kept until the transaction ends
    /// unless `keeping` is false (the cursor then keeps it as long as it needs it).
    func window(_ name: String, _ sql: @autoclosure () -> String, _ values: [UnsafeRawBufferPointer], limit: Int,
                keeping: Bool = true) throws -> PostgresResult {
        let key = WindowKey(statement: name, values: values.map(Array.init), limit: limit, generation: writeGeneration)
        if let found = windows[key] { return found }
        let answer = try run(name, sql(), values, integers: [limit])
        windowsFetched += 1
        guard keeping else { return answer }
        keep(answer)
        windows[key] = answer
        return answer
    }

    /// How many answers the transaction keeps until it ends.
    var keptAnswers: Int { answers.count }
    /// How many windows cursors fetched.
    private(set) var windowsFetched = 0

    /// Values read ahead (``prefetch(_:)``), by space and key: each valid until a write to its key (or a write that
    /// names none, or a rollback).
    private var prefetched: [PrefetchKey: ReadAhead] = [:]
    /// A value read ahead (`nil`: none there), and the answer it lies in until ``get(_:_:)`` hands it out, which
    /// then keeps it until the transaction ends (a value only copied, ``copiedValue(_:_:)``, is not kept: an update
    /// of many documents reads each ahead).
    private struct ReadAhead {
        let value: UnsafeRawBufferPointer?
        var answer: PostgresResult?
    }
    private struct PrefetchKey: Hashable {
        let space: UInt32
        let key: [UInt8]
    }

    /// Every key's `get` not already read ahead, sent together and answered in one round trip.
    ///
    /// Keys the caller expects absent are, on a write's first run, taken as absent without asking: one statement
    /// sent ahead with the writes checks that none is there, and fails when one is (see ``note(_:)``). The
    /// transaction then cannot commit, and runs again reading them; the caller finds the key there and refuses.
    /// So an insert costs one round trip, its commit's.
    func prefetch(_ keys: [(KeySpace, [UInt8])], expectingAbsent: Bool) throws {
        if expectingAbsent && assumesAbsence { return try assumeAbsent(keys) }
        var asked = false
        var sent = Set<PrefetchKey>()
        for (space, key) in keys where prefetched[PrefetchKey(space: space.number, key: key)] == nil
            && sent.insert(PrefetchKey(space: space.number, key: key)).inserted {
            let t = table(space)
            asked = true
            try key.withUnsafeBytes { k in
                try runAhead("\(t)_get", getStatement(t), [k]) { [weak self] answer in
                    guard let self else { return }
                    prefetched[PrefetchKey(space: space.number, key: key)] = answer.rowCount > 0
                        ? ReadAhead(value: answer.bytes(0, 0), answer: answer) : ReadAhead(value: nil, answer: nil)
                }
            }
        }
        if asked { try onServer { try connection.settle() } }
    }

    private func assumeAbsent(_ keys: [(KeySpace, [UInt8])]) throws {
        var bySpace: [UInt32: [[UInt8]]] = [:]
        for (space, key) in keys where prefetched[PrefetchKey(space: space.number, key: key)] == nil {
            prefetched[PrefetchKey(space: space.number, key: key)] = ReadAhead(value: nil, answer: nil)
            bySpace[space.number, default: []].append(key)
        }
        guard !bySpace.isEmpty else { return }
        let sorted = bySpace.sorted { $0.key < $1.key }
        let spaces = sorted.map(\.key)
        let arrays = sorted.map { PostgresTransaction.byteaArray($0.value) }
        let found = spaces.enumerated().map { i, number in
            "EXISTS (SELECT 1 FROM \(table(KeySpace(number: number))) WHERE k = ANY($\(i + 1)::bytea[]))"
        }
        try withBuffers(arrays) { values in
            try runAhead("absent_" + spaces.map(String.init).joined(separator: "_"),
                         "SELECT 1 / (CASE WHEN \(found.joined(separator: " OR ")) THEN 0 ELSE 1 END)", values)
        }
    }

    func get(_ space: KeySpace, _ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        if !prefetched.isEmpty, let found = prefetched[PrefetchKey(space: space.number, key: Array(key))] {
            if let answer = found.answer {
                keep(answer)
                prefetched[PrefetchKey(space: space.number, key: Array(key))]?.answer = nil
            }
            return found.value
        }
        let cached = space.number == engine.cache.catalog && !wroteCatalog
        if cached, let hit = engine.cache.entries[Array(key)] {
            servedFromCache(catalog: true)
            guard let hit else { return nil }
            cachedValues.append(hit)
            return hit.buffer
        }
        let t = table(space)
        let answer = try run("\(t)_get", getStatement(t), [key])
        guard answer.rowCount > 0 else {
            if cached { engine.cache.entries[Array(key)] = .some(nil) }
            return nil
        }
        keep(answer)
        if cached { engine.cache.entries[Array(key)] = CommitCache.Bytes(answer.bytes(0, 0)) }
        return answer.bytes(0, 0)
    }

    func copiedValue(_ space: KeySpace, _ key: [UInt8]) throws -> [UInt8]? {
        if !prefetched.isEmpty, let found = prefetched[PrefetchKey(space: space.number, key: key)] {
            return found.value.map { Array($0) }
        }
        if space.number == engine.cache.catalog {
            return try key.withUnsafeBytes { try get(space, $0).map { Array($0) } }
        }
        let t = table(space)
        let answer = try key.withUnsafeBytes { try run("\(t)_get", getStatement(t), [$0]) }
        return answer.rowCount > 0 ? Array(answer.bytes(0, 0)) : nil
    }

    var prefersBatches: Bool { true }

    /// One statement for all the keys: an array parameter, joined to the table in the keys' order.
    func entries(_ space: KeySpace, forKeys keys: [[UInt8]]) throws -> (entries: [StorageEntry], keeper: AnyObject?) {
        if along != nil, let served = entriesFetchedAlong(space, keys) { return (served, nil) }
        let t = table(space)
        let answer = try PostgresTransaction.byteaArray(keys).withUnsafeBytes { a in
            try run("\(t)_many", "SELECT q.k, v FROM unnest($1::bytea[]) WITH ORDINALITY AS q(k, i) "
                    + "JOIN \(t) ON \(t).k = q.k ORDER BY i", [a])
        }
        // (Not kept until the transaction ends: the caller keeps the answer as long as it needs the entries.)
        return ((0..<answer.rowCount).map { (answer.bytes($0, 0), answer.bytes($0, 1)) }, answer)
    }

    /// PostgreSQL's binary array of `bytea`: dimensions, no nulls, element type bytea (17), length and lower bound,
    /// then each element's length and bytes.
    static func byteaArray(_ items: [[UInt8]]) -> [UInt8] {
        var array: [UInt8] = []
        array.reserveCapacity(20 + items.reduce(0) { $0 + 4 + $1.count })
        func append(_ n: Int) { for shift in [24, 16, 8, 0] { array.append(UInt8(truncatingIfNeeded: n >> shift)) } }
        append(1); append(0); append(17); append(items.count); append(1)
        for item in items { append(item.count); array += item }
        return array
    }

    /// The puts and deletes whose answer nobody needs, gathered per space until the next statement of any other
    /// kind, and then sent as two statements (``send(_:)``), so that everything else sees them as if sent one by
    /// one. A space's puts of one key keep the last value (a duplicate-sorted space keeps each pair once).
    ///
    /// They are gathered per nested transaction (``nested(_:)``), the transaction itself first, each with whether
    /// its `SAVEPOINT` has been sent. A savepoint is sent only when its transaction first sends something else (a
    /// read, a write that answers), after the puts gathered around it: a nested transaction that sends nothing (a
    /// group commit's insert, whose checks were read ahead) costs no statement, and its puts join those around it.
    private var levels = [Level(name: "", opened: true)]
    private struct Level {
        let name: String
        var opened: Bool
        var gathered: [UInt32: GatheredChanges] = [:]
    }
    /// One space's changes gathered: deletes, sent first, then puts. A delete drops the puts gathered before it of
    /// what it deletes, so that sending every delete before every put keeps the order they were made in.
    private struct GatheredChanges {
        var keys: [[UInt8]] = []
        /// `nil` for a put a later delete dropped.
        var values: [[UInt8]?] = []
        /// Where each key's put is (in a duplicate-sorted space, each pair's: ``slot(_:_:duplicateSorted:)``).
        var positions: [[UInt8]: Int] = [:]
        /// The keys deleted, and in a duplicate-sorted space the values with them.
        var deletedKeys: [[UInt8]] = []
        var deletedValues: [[UInt8]] = []

        private static func slot(_ key: [UInt8], _ value: [UInt8], duplicateSorted: Bool) -> [UInt8] {
            guard duplicateSorted else { return key }
            return withUnsafeBytes(of: UInt32(key.count).bigEndian) { Array($0) } + key + value
        }

        var hasPuts: Bool { values.contains { $0 != nil } }

        mutating func put(_ key: [UInt8], _ value: [UInt8], duplicateSorted: Bool) {
            let slot = GatheredChanges.slot(key, value, duplicateSorted: duplicateSorted)
            if let at = positions[slot] {
                values[at] = value
                return
            }
            positions[slot] = keys.count
            keys.append(key)
            values.append(value)
        }

        mutating func delete(_ key: [UInt8], value: [UInt8]?, duplicateSorted: Bool) {
            if let at = positions[GatheredChanges.slot(key, value ?? [], duplicateSorted: duplicateSorted)] {
                values[at] = nil
            }
            deletedKeys.append(key)
            if duplicateSorted, let value { deletedValues.append(value) }
        }

        /// Adds the changes of `other`, made after these.
        mutating func add(_ other: GatheredChanges, duplicateSorted: Bool) {
            if keys.isEmpty && deletedKeys.isEmpty { return self = other }
            for i in other.deletedKeys.indices {
                delete(other.deletedKeys[i], value: duplicateSorted ? other.deletedValues[i] : nil,
                       duplicateSorted: duplicateSorted)
            }
            for (key, value) in zip(other.keys, other.values) {
                if let value { put(key, value, duplicateSorted: duplicateSorted) }
            }
        }
    }

    private func gather(_ space: KeySpace, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
                        duplicateSorted: Bool) {
        // (Changed in place: a copy taken out of the dictionary and put back would copy the arrays each time.)
        levels[levels.count - 1].gathered[space.number, default: GatheredChanges()]
            .put(Array(key), Array(value), duplicateSorted: duplicateSorted)
    }

    /// Sends the savepoints not yet sent, each after the puts gathered around it, and the puts gathered in the
    /// innermost: everything that must reach the server before a statement of another kind.
    private func sendGathered() throws {
        for i in levels.indices {
            if !levels[i].opened {
                try connection.sendAhead("SAVEPOINT \(levels[i].name)")
                levels[i].opened = true
            }
            guard !levels[i].gathered.isEmpty else { continue }
            let all = levels[i].gathered
            levels[i].gathered = [:]
            try send(all)
        }
    }

    /// Sends changes: one statement for every space's deletes, then one for every space's puts, each space's rows
    /// one `unnest` of arrays, with the count of each space moved by the entries removed or added, which the
    /// statement answers. Each statement is named after its spaces and their kinds.
    private func send(_ all: [UInt32: GatheredChanges]) throws {
        let spaces = all.sorted { $0.key < $1.key }
        var arrays: [[UInt8]] = []
        /// The next parameter, for `bytes`.
        func parameter(_ bytes: [[UInt8]]) -> String {
            arrays.append(PostgresTransaction.byteaArray(bytes))
            return "$\(arrays.count)::bytea[]"
        }
        var name = "dm_"
        var changes: [String] = [], counts: [String] = []
        for (number, changed) in spaces where !changed.deletedKeys.isEmpty {
            let t = table(KeySpace(number: number)), i = changes.count
            if isDuplicateSorted(KeySpace(number: number)) {
                name += "\(number)d_"
                changes.append("x\(i) AS (DELETE FROM \(t) USING unnest(\(parameter(changed.deletedKeys)), "
                               + "\(parameter(changed.deletedValues))) AS g(k, v) WHERE \(t).k = g.k AND \(t).v = g.v "
                               + "RETURNING 1)")
            } else {
                name += "\(number)_"
                changes.append("x\(i) AS (DELETE FROM \(t) WHERE k = ANY(\(parameter(changed.deletedKeys))) RETURNING 1)")
            }
            counts.append("(\(number), (SELECT -count(*) FROM x\(i)))")
        }
        if !changes.isEmpty { try sendCounted(name, changes, counts, arrays) }
        (name, changes, counts, arrays) = ("pm_", [], [], [])
        for (number, changed) in spaces where changed.hasPuts {
            let t = table(KeySpace(number: number)), i = changes.count
            var keys: [[UInt8]] = [], values: [[UInt8]] = []
            for (key, value) in zip(changed.keys, changed.values) {
                if let value { keys.append(key); values.append(value) }
            }
            let rows = "\(t) SELECT * FROM unnest(\(parameter(keys)), \(parameter(values)))"
            if isDuplicateSorted(KeySpace(number: number)) {
                name += "\(number)d_"
                changes.append("r\(i) AS (INSERT INTO \(rows) ON CONFLICT DO NOTHING RETURNING true AS added)")
            } else {
                name += "\(number)_"
                // A row the insert made has no `xmax`; one it updated has this transaction's (a join with the
                // table to find the keys already there can be planned as a scan of the whole table).
                changes.append("r\(i) AS (INSERT INTO \(rows) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v RETURNING "
                               + "xmax = 0 AS added)")
            }
            counts.append("(\(number), (SELECT count(*) FILTER (WHERE added) FROM r\(i)))")
        }
        if !changes.isEmpty { try sendCounted(name, changes, counts, arrays) }
    }

    /// Sends `changes` (a `WITH`'s parts), then the counts moved by `counts` (a space and its change each).
    private func sendCounted(_ name: String, _ changes: [String], _ counts: [String], _ arrays: [[UInt8]]) throws {
        let sql = "WITH \(changes.joined(separator: ", ")) UPDATE spaces SET count = count + d.n FROM (VALUES "
            + "\(counts.joined(separator: ", "))) AS d(number, n) WHERE spaces.number = d.number RETURNING "
            + "spaces.number::bigint, spaces.count"
        try withBuffers(arrays) { values in
            try connection.sendAhead(name, sql, values) { [weak self] answer in
                for row in 0..<answer.rowCount {
                    self?.committedCounts[UInt32(answer.binaryInteger(row, 0))] = answer.binaryInteger(row, 1)
                }
            }
        }
    }

    @discardableResult
    func put(_ space: KeySpace, _ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer,
             noOverwrite: Bool, noDuplicate: Bool) throws -> Bool {
        try checkWritable()
        changes &+= 1
        let t = table(space)
        let added: Int
        if isDuplicateSorted(space) {
            if noOverwrite {
                added = try run("\(t)_putnew", "INSERT INTO \(t) SELECT $1, $2 WHERE NOT EXISTS "
                                + "(SELECT 1 FROM \(t) WHERE k = $1)", [key, value]).affected
                if added == 0 { return false }
            } else if noDuplicate {
                added = try run("\(t)_putdup", "INSERT INTO \(t) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                                [key, value]).affected
                if added == 0 { return false }
            } else {
                // Nothing to answer: gathered, and sent with the next statement, its count change noted on the server.
                if let failure { throw failure }
                gather(space, key, value, duplicateSorted: true)
                wrote(space, key: key, countedOnServer: true)
                return true
            }
        } else if noOverwrite {
            added = try run("\(t)_putnew", "INSERT INTO \(t) VALUES ($1, $2) ON CONFLICT DO NOTHING", [key, value]).affected
            if added == 0 { return false }
        } else {
            // Nothing to answer: gathered, and sent with the next statement, its count change noted on the server.
            if let failure { throw failure }
            gather(space, key, value, duplicateSorted: false)
            wrote(space, key: key, countedOnServer: true)
            return true
        }
        countChanges[space.number, default: 0] += added
        wrote(space, key: key)
        return true
    }

    @discardableResult
    func delete(_ space: KeySpace, _ key: [UInt8], value: [UInt8]?) throws -> Bool {
        try checkWritable()
        changes &+= 1
        let t = table(space)
        let removed = try key.withUnsafeBytes { k in
            if let value {
                return try value.withUnsafeBytes { v in
                    try run("\(t)_delpair", "DELETE FROM \(t) WHERE k = $1 AND v = $2", [k, v]).affected
                }
            }
            return try run("\(t)_del", "DELETE FROM \(t) WHERE k = $1", [k]).affected
        }
        guard removed > 0 else { return false }
        countChanges[space.number, default: 0] -= removed
        key.withUnsafeBytes { wrote(space, key: $0) }
        return true
    }

    /// A delete whose answer nobody waits for: sent ahead, its count change noted on the server.
    func discard(_ space: KeySpace, _ key: [UInt8], value: [UInt8]?) throws {
        try checkWritable()
        changes &+= 1
        let duplicateSorted = isDuplicateSorted(space)
        if duplicateSorted == (value != nil) {
            // A pair of a duplicate-sorted space, or a key of another: gathered with the puts (sent before them).
            if let failure { throw failure }
            levels[levels.count - 1].gathered[space.number, default: GatheredChanges()]
                .delete(key, value: value, duplicateSorted: duplicateSorted)
            key.withUnsafeBytes { wrote(space, key: $0, countedOnServer: true) }
            return
        }
        let t = table(space)
        try key.withUnsafeBytes { k in
            if let value {
                try value.withUnsafeBytes { v in
                    try runAhead("\(t)_delpairc2", counting(space, "row AS (DELETE FROM \(t) WHERE k = $1 AND v = $2 "
                                                             + "RETURNING 1)"), [k, v], then: countAnswered(space))
                }
            } else {
                try runAhead("\(t)_delc2", counting(space, "row AS (DELETE FROM \(t) WHERE k = $1 RETURNING 1)"),
                             [k], then: countAnswered(space))
            }
        }
        key.withUnsafeBytes { wrote(space, key: $0, countedOnServer: true) }
    }

    // MARK: Cursors

    func withCursor<R>(_ space: KeySpace, _ body: (any StorageCursor) throws -> R) throws -> R {
        try body(PostgresCursor(transaction: self, space: space))
    }

    /// A cursor that keeps only the window it is in: the windows it left are let go.
    func withPassingCursor<R>(_ space: KeySpace, _ body: (any StorageCursor) throws -> R) throws -> R {
        try body(PostgresCursor(transaction: self, space: space, keepingWindows: false))
    }

    func openCursor(_ space: KeySpace) throws -> any StorageCursor {
        PostgresCursor(transaction: self, space: space)
    }

    func openPassingCursor(_ space: KeySpace) throws -> any StorageCursor {
        PostgresCursor(transaction: self, space: space, keepingWindows: false)
    }

    /// A cursor whose windows are joined to the documents their entries name: an index walked to its documents
    /// costs the round trips of its windows alone.
    func openCursor(_ space: KeySpace, fetchingValuesIn documents: KeySpace) throws -> (any StorageCursor)? {
        PostgresCursor(transaction: self, space: space, documents: documents)
    }

    func closeCursor(_ cursor: any StorageCursor) {}

    // MARK: Atomic changes

    func changingAtomically(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            if interruptedChange == nil { interruptedChange = error }
            throw error
        }
    }

    /// A savepoint: released into this transaction when `body` returns, rolled back to when it throws.
    ///
    /// `SAVEPOINT` and `RELEASE` are sent ahead with the writes, so that the writes of a group commit, each nested,
    /// cost no round trip of their own; and only when `body` sends something else than puts and deletes (see
    /// ``levels``): else its changes join this transaction's when it returns, and are dropped when it throws. A rollback undoes the count
    /// changes noted on the server with the writes.
    func nested<R>(_ body: (any StorageTransaction) throws -> R) throws -> R {
        if let failure { throw failure }
        savepoints += 1
        defer { savepoints -= 1 }
        let counts = countChanges
        let created = createdSpaces.count
        // Values read ahead before the savepoint hold again after a rollback to it (prefetch reads its answers
        // before it returns, so none is on its way).
        let readAhead = prefetched
        let interrupted = interruptedChange
        levels.append(Level(name: "nested\(savepoints)", opened: false))
        let result: R
        do {
            result = try body(self)
            if interruptedChange != nil && interrupted == nil {
                throw StorageError.interruptedChange(interruptedChange!)
            }
        } catch {
            // What was gathered since the savepoint is undone by not sending it. What was sent ahead is answered
            // first: its error, if any, is this one or its cause.
            let level = levels.removeLast()
            if level.opened {
                do { try connection.settle() } catch { note(error) }
                do {
                    try connection.execute("ROLLBACK TO SAVEPOINT \(level.name)")
                } catch let rollbackError as PostgresError {
                    failure = rollbackError
                    throw error
                }
            }
            countChanges = counts
            // The counts answered inside are undone; those answered before may have come after the savepoint began.
            if level.opened { countsRolledBack = true }
            interruptedChange = interrupted
            engine.forget(Array(createdSpaces[created...]), on: connection)
            createdSpaces.removeSubrange(created...)
            writeGeneration += 1
            writesToAny += 1
            prefetched = readAhead   // (those read since may have been read after writes the rollback undid)
            throw error
        }
        let level = levels.removeLast()
        if level.opened { try connection.sendAhead("RELEASE SAVEPOINT \(level.name)") }
        for (number, puts) in level.gathered {
            levels[levels.count - 1].gathered[number, default: GatheredChanges()]
                .add(puts, duplicateSorted: isDuplicateSorted(KeySpace(number: number)))
        }
        return result
    }

    func twin() -> (any StorageTransaction)? { nil }
    func end() {}
}

extension String {
    /// The string's UTF-8 bytes, for a statement's parameter.
    func withUTF8Bytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var copy = self
        return try copy.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }
}

/// What every transaction reads and only a commit changes, kept from one transaction to the next: the catalog's
/// entries (every transaction of the store reads its records), while no commit changed the catalog, and the key
/// spaces' counts (the planner asks for them), while no commit came between. A transaction that begins past either
/// drops that part; a commit of this engine carries its own count changes over, and forgets the catalog if it wrote
/// there. Writers take turns on the `meta` row, so a commit's state is the one it began at plus its own changes.
final class CommitCache {
    /// A cached value's bytes, at an address that stays while a transaction holds it.
    final class Bytes {
        let buffer: UnsafeRawBufferPointer
        init(_ bytes: UnsafeRawBufferPointer) {
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 8)
            copy.copyMemory(from: bytes)
            buffer = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(copy)[..<bytes.count])
        }
        deinit { buffer.baseAddress.map { UnsafeMutableRawPointer(mutating: $0).deallocate() } }
    }

    /// The catalog's space, once a transaction has opened it.
    var catalog: UInt32?
    /// The commit the cache's counts hold at, -1 for none.
    private(set) var commit = -1
    /// The commit that last changed the catalog, which the cache's catalog entries hold at; -1 for none.
    private(set) var catalogChanged = -1
    /// The catalog's entries, as they have been since ``catalogChanged``: a value, or none (`.some(nil)`).
    var entries: [[UInt8]: Bytes?] = [:]
    /// The spaces' counts at ``commit``.
    var counts: [UInt32: Int] = [:]

    /// A transaction begins at `commit`, where the catalog last changed at `catalogChanged`.
    func begin(at commit: Int, catalogChanged: Int) {
        if commit != self.commit {
            counts = [:]
            self.commit = commit
        }
        if catalogChanged != self.catalogChanged {
            entries = [:]
            self.catalogChanged = catalogChanged
        }
    }

    /// `txn` committed, as the commit after the one it began at.
    func committed(_ txn: PostgresTransaction) {
        if txn.wroteCatalog {
            entries = [:]
            catalogChanged = commit + 1
        }
        if txn.resetCounts {
            counts = [:]
        } else {
            for (number, delta) in txn.countChanges { counts[number]? += delta }
            for number in txn.countedOnServer { counts[number] = txn.committedCounts[number] }
        }
        commit += 1
    }

    func forget() {
        entries = [:]
        counts = [:]
        commit = -1
        catalogChanged = -1
    }
}
