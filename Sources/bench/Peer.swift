import DocStore

/// What a scenario asks for.
enum Scenario: String, CaseIterable, Sendable {
    case insert                 // batches of 10,000 in one transaction each, 4 indexes and the unique email
    case getByID                // 1,000 random ids, one read each
    case lookupByID             // the same ids, each a query: include(id == x).first (peers: their read by id)
    case equality               // city == "city7": ~0.1%
    case range1                 // age == 42 expressed as 42 <= age < 43: ~1%
    case range10                // 20 <= age < 30: ~10%
    case compoundPrefix         // city == "city7" && age >= 50 on the (city, age) index
    case arrayContains          // tags contains "tag7" on a multi-value index: ~4%
    case indexedResidual        // 20 <= age < 30 && active: an index range plus a check
    case unindexedFilter        // score > 99: a full scan, ~1%
    case sortIndexedLimit       // sort by age, first 100
    case sortUnindexedLimit     // sort by score descending, first 100
    case fullSort10             // 20 <= age < 30 sorted by score
    case countByIndex           // count of age < 10
    case findOrCreateHit        // email == an existing one; 100 calls a run, each its own transaction
    case findOrCreateMiss       // email == a new one: inserts; 100 calls a run, each its own transaction
    // Predicates over optionals and numbers, each beside SQL's equivalent. bonus is nil for ~40%, else -50...200.
    case coalesce               // (bonus ?? 0) > 150, onto the bonus index: ~12%
    case optionalRange          // bonus != nil && 100 <= (bonus ?? 0) <= 105, onto the bonus index: ~1.4%
    case flatMap                // bonus.flatMap { $0 > 190 } ?? false, onto the bonus index: ~2.4%
    case twoFields              // (bonus ?? 0) > age + 100: a scan, ~12%
    case arithmetic             // age * 2 > 190: a scan, ~4%
    case ternary                // bonus == nil ? age < 2 : bonus! > 195: a scan, ~2%
    case stringContains         // name.contains("ar"), case-sensitive: a scan, ~27%
    case arrayCount             // tags.count > 2: a scan, ~31%
    // Checking a store.
    case fileCheck              // the file's structure, every page in use: SQLite's PRAGMA quick_check
    case verify                 // structure, every document and index entry: SQLite's PRAGMA integrity_check
    // Aggregates, groups and updates, beside SQL's GROUP BY, DISTINCT, MAX, AVG and UPDATE.
    case groupByIndexedCount    // groupBy(city).count(): 1,000 groups, on the city index
    case groupByUnindexedSum    // groupBy(name).sum(score): 96 groups, a scan
    case distinctIndexed        // distinct(city): 1,000 values, on the city index
    case maxIndexed             // max(age), on the age index
    case averageRange10         // average(age) of 20 <= age < 30 (~10%), on the age index
    case averageScoreRange10    // average(score) of 20 <= age < 30: the documents read through the age index
    case update1Percent         // age == 42 (~1%): set address.zip, one transaction (DocStore: a typed closure)
    case update1PercentFields   // the same as a field change (DocStore: `set:`; the peers: as update1Percent)
    // Commits.
    case singleInserts          // 100 documents inserted one after the other, a transaction (and a commit) each
    case insertTasks4           // 256 documents inserted by 4 concurrent tasks, a transaction each
    case insertTasks16          // the same by 16 tasks
    case insertTasks64          // the same by 64 tasks
    case insertProcesses4       // 800 documents inserted by 4 processes at once, 4 tasks each, a transaction each
    case singleSaves            // 100 existing documents saved (every field written) one after the other, a commit each
    case saveTasks16            // 256 existing documents saved by 16 concurrent tasks, a transaction each
    // Reads side by side (DocStore on a file only: its reads against themselves).
    case scansInARow4           // four counts of score > 99 (a full scan each), one after another
    case scansAtOnce4           // the same four counts from four tasks at once
    case savesBesideScans       // 20 saves one after another while four tasks loop that count

    /// The concurrent writers of an `insertTasks` scenario; 0 for the others.
    var tasks: Int {
        switch self {
        case .insertTasks4: return 4
        case .insertTasks16: return 16
        case .insertTasks64: return 64
        case .saveTasks16: return 16
        default: return 0
        }
    }

    /// Whether the scenario reads documents (and so has the three forms).
    var returnsDocuments: Bool {
        switch self {
        case .insert, .countByIndex, .findOrCreateHit, .findOrCreateMiss, .fileCheck, .verify: return false
        case .groupByIndexedCount, .groupByUnindexedSum, .distinctIndexed, .maxIndexed, .averageRange10,
             .averageScoreRange10, .update1Percent, .update1PercentFields, .singleInserts, .insertTasks4, .insertTasks16, .insertTasks64,
             .insertProcesses4, .singleSaves, .saveTasks16, .scansInARow4, .scansAtOnce4, .savesBesideScans:
            return false
        default: return true
        }
    }

    /// Whether the scenario measures DocStore's reads beside each other and beside its writer: its own figures,
    /// against themselves (four scans at once against four in a row; a save's latency beside scans against
    /// `singleSaves`).
    var measuresReadsSideBySide: Bool {
        switch self {
        case .scansInARow4, .scansAtOnce4, .savesBesideScans: return true
        default: return false
        }
    }

    /// The scenarios whose condition no peer's index answers: every document is looked at.
    var scansEverything: Bool {
        switch self {
        case .unindexedFilter, .sortUnindexedLimit, .twoFields, .arithmetic, .ternary, .stringContains, .arrayCount,
             .groupByUnindexedSum:
            return true
        default: return false
        }
    }
}

/// How much of each document a query hands back.
enum Form: String, CaseIterable, Sendable {
    case ids            // the ids only
    case raw            // the stored bytes (or the row's columns read, for SQLite)
    case decoded        // fully decoded `BenchPerson` models
}

/// What a commit syncs, for every peer alike (`--durability`): SQLite's `synchronous` levels, and DocStore's of the
/// same names.
enum BenchDurability: String, CaseIterable, Sendable {
    case full, normal, off

    var docStore: DocStore.Durability {
        switch self {
        case .full: return .full
        case .normal: return .normal
        case .off: return .off
        }
    }

    var sqlitePragma: String { "PRAGMA synchronous = \(rawValue.uppercased())" }
}

/// One store under test. The harness calls `load` once per document count, then `run` many times.
protocol Peer: AnyObject {
    /// "DocStore", "GRDB", "SQLite C", "raw LMDB".
    var name: String { get }
    /// Creates a fresh store in `directory` with the five indexes (age; city; city, age; tags one entry per
    /// element, or its equivalent; bonus) and the unique email index, and inserts `people` in batches of 10,000.
    func load(_ people: [BenchPerson], in directory: String) async throws
    /// Whether the peer can run the scenario in the form (a peer that does not decode has no `.decoded`).
    func supports(_ scenario: Scenario, _ form: Form) -> Bool
    /// Runs the scenario once; returns how many documents (or ids, or the count) it produced, which the harness
    /// checks is the same for every peer.
    func run(_ scenario: Scenario, _ form: Form, _ parameters: Parameters) async throws -> Int
    /// The size of the store's files in bytes.
    func fileSize() throws -> Int
    /// Closes the store.
    func close() async
}

/// The values the scenarios use, the same for every peer.
struct Parameters: Sendable {
    var documentCount: Int
    var city = People.city(7)
    var tag = People.tag(7)
    /// Ids for `getByID`, in a random but fixed order.
    var ids: [Int64]
    /// Advanced by the harness before each run, so that what a run writes is new: the people `findOrCreateMiss` and
    /// `singleInserts` insert, the zip `update1Percent` sets.
    var missSerial = 0

    init(documentCount: Int) {
        self.documentCount = documentCount
        var random = SeededGenerator(seed: 7)
        ids = (0..<1_000).map { _ in Int64.random(in: 1...Int64(max(1, documentCount)), using: &random) }
    }

    /// How many calls a run of `findOrCreateHit` or `findOrCreateMiss` makes, one after the other. One call takes a
    /// few microseconds (a hit) to a few hundred (a miss): the median of a handful of single calls, each just after
    /// the other peers' runs, said more of the machine than of the call.
    static let findOrCreateCalls = 100
    /// The calls of `scenario` (`findOrCreateHit` or `findOrCreateMiss`): an email each, and the id its person gets
    /// when there is none. A hit looks for existing people spread over the store, others each run; a miss for new
    /// people, new each run.
    func findOrCreateCalls(_ scenario: Scenario) -> [(email: String, id: Int64)] {
        let calls = Parameters.findOrCreateCalls
        if scenario == .findOrCreateHit {
            let count = max(1, documentCount), step = max(1, count / calls)
            return (0..<calls).map { k in ("person\(1 + (k * step + missSerial) % count)@example.com", 0) }
        }
        return (0..<calls).map { k in
            let n = missSerial * calls + k
            return ("new\(n)@example.com", Int64(documentCount) + 1_000_000 + Int64(n))
        }
    }
    /// The zip `update1Percent` sets: new each run, so that every run changes every matched document.
    var newZip: String { "z\(missSerial)" }

    /// The people `singleInserts` inserts, new each run.
    var singles: [BenchPerson] {
        (0..<Parameters.singleInserts).map { k in
            let id = Int64(documentCount) + 10_000_000 + Int64(missSerial) * Int64(Parameters.singleInserts) + Int64(k)
            return PersonTable.newcomer(id: id, email: "single\(id)@example.com")
        }
    }
    static let singleInserts = 100

    /// The people an `insertTasks` scenario inserts, new each run, dealt to `tasks` writers.
    func concurrent(tasks: Int) -> [[BenchPerson]] {
        let base = Int64(documentCount) + 20_000_000 + Int64(missSerial) * Int64(Parameters.concurrentInserts)
        let people = (0..<Parameters.concurrentInserts).map { k in
            PersonTable.newcomer(id: base + Int64(k), email: "task\(base + Int64(k))@example.com")
        }
        return (0..<tasks).map { t in stride(from: t, to: people.count, by: tasks).map { people[$0] } }
    }
    static let concurrentInserts = 256

    /// The writes of a single-document write scenario: a list per writer, and whether they save documents that
    /// exist (or insert new ones).
    func writes(_ scenario: Scenario) -> (lists: [[BenchPerson]], saving: Bool) {
        switch scenario {
        case .singleInserts: return ([singles], false)
        case .singleSaves: return (saves(Parameters.singleInserts, tasks: 1), true)
        case .saveTasks16: return (saves(Parameters.concurrentInserts, tasks: scenario.tasks), true)
        default: return (concurrent(tasks: scenario.tasks), false)
        }
    }

    /// People of the store, the same for every peer, that the save scenarios write back changed.
    var stored: [BenchPerson] = []

    /// `count` of ``stored``, changed as a save would change them: a new age and score each run, every other field
    /// as it was (so that only the age index moves), dealt to `tasks` writers.
    func saves(_ count: Int, tasks: Int) -> [[BenchPerson]] {
        let people = stored.prefix(count).map { person in
            var changed = person
            changed.age = (person.age + missSerial) % 100
            changed.score = person.score + Double(missSerial)
            return changed
        }
        return (0..<tasks).map { t in stride(from: t, to: people.count, by: tasks).map { people[$0] } }
    }
}
