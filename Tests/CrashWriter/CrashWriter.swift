import DocStore
import DocStorePostgres
import Foundation

/// A record written by the crash-safety test's child process. Each batch holds `batchSize` records with the same
/// `batch`, ids `batch * batchSize + i`, and unique codes, so a half-written batch would show.
public struct CrashRecord: Document, Equatable {
    public var id: Int
    public var batch: Int
    public var code: String
    public var tags: [String]
    public var payload: String

    public static let batchSize = 40
    /// How many tasks of the crash writer write at once.
    public static let writers = 8
    public static let collection = "records"
    public static let indexes: [IndexSpec<CrashRecord>] = [
        .index("batch", \.batch),
        .unique("code", \.code),
        .multi("tags", \.tags),
    ]

    public static func batch(_ b: Int) -> [CrashRecord] {
        (0..<batchSize).map { i in
            CrashRecord(id: b * batchSize + i, batch: b, code: "code-\(b)-\(i)",
                        tags: ["b\(b % 7)", "i\(i % 5)"], payload: String(repeating: "x", count: 100 + (b * 31 + i) % 400))
        }
    }

    /// A durability by the name the crash test passes: `full`, `normal`, `off`, `periodic` (every 5 ms), or
    /// `off-exclusive` (`off`, the store opened exclusively: its pages written in place).
    public static func durability(named name: String) -> DocStore.Durability? {
        switch name {
        case "full": return .full
        case "normal": return .normal
        case "off", "off-exclusive": return .off
        case "periodic": return .periodic(milliseconds: 5)
        default: return nil
        }
    }

    /// Options with a small map, so that the map grows while the child is being killed.
    public static var options: DocStore.Options {
        var options = DocStore.Options()
        options.initialMapSize = 256 << 10
        return options
    }
}

/// A person written by the child process for the observation tests: the same fields, collection and indexes as
/// the tests' `Person`, so the tests read these documents as their own type.
public struct ChildPerson: Document, Equatable {
    public var id: UUID
    public var name: String
    public var age: Int
    public var city: String
    public var email: String?
    public var tags: [String]
    public static let collection = "people"
    public static let indexes: [IndexSpec<ChildPerson>] = [
        .index("age", \.age),
        .index("city_age", \.city, \.age),
        .unique("email", \.email),
        .multi("tags", \.tags),
    ]

    public init(number: Int) {
        id = UUID()
        name = "child-\(number)"
        age = 18 + number % 50
        city = "Bergen"
        email = nil
        tags = []
    }
}

/// Migrations that several processes run at once on one store: each counts its runs in the document `runs` of
/// `counters`, and each rewrites every document of `items`, so that it takes a while.
public enum SharedMigrations {
    public static let names = ["one", "two", "three"]

    public static var migrator: Migrator {
        var migrator = Migrator()
        for name in names {
            migrator.registerMigration(name) { m in
                let runs = try m.context.get("counters", id: .string("runs"))
                var count: Int64 = 0
                if case .int(let n)? = runs?[field: name] { count = n }
                try m.context.save(.object([("id", .string("runs"))]).setting(.int(count + 1), at: FieldPath(name))
                    .merging(runs), into: "counters")
                try m.addField(FieldPath(name), in: "items", value: .bool(true))
            }
        }
        return migrator
    }
}

extension DocumentValue {
    /// This object, with the fields of `other` it lacks added after its own.
    fileprivate func merging(_ other: DocumentValue?) -> DocumentValue {
        guard case .object(let theirs)? = other, case .object(var mine) = self else { return self }
        for field in theirs where !mine.contains(where: { $0.name == field.name }) { mine.append(field) }
        return .object(mine)
    }
}

/// Nanoseconds on the monotonic clock, which every process of the machine shares.
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Usage:
/// - `DocStoreCrashWriter PATH [DURABILITY]` — writes batches into the store at PATH from ``CrashRecord/writers``
///   tasks at once, printing `committed N` after each batch's write returns, until it is killed.
/// - `DocStoreCrashWriter insert-concurrently PATH N TASKS TAG` — inserts N documents with ids `TAG-0` ... into the
///   collection `shared`, from TASKS tasks at once, one write each, printing `inserted I` after write I returns; then
///   exits with status 0.
/// - `DocStoreCrashWriter insert-people PATH N [PAUSE_MS]` — inserts N ``ChildPerson``s into the store at PATH, one
///   commit each, pausing PAUSE_MS milliseconds (default 20) after each, printing `inserted I NANOS` after commit I
///   (1-based; NANOS from ``monotonicNanoseconds()``), then exits with status 0.
/// - `DocStoreCrashWriter insert-untyped PATH COLLECTION N TAG` — inserts N documents `{"writer": TAG, "n": i}`
///   without ids into COLLECTION, one commit each, so that the store chooses every id; prints `inserted I ID` after
///   each commit, then exits with status 0.
/// - `DocStoreCrashWriter insert-people-on-cue PATH N` — the same inserts, each when a line arrives on standard
///   input; after the last one it waits for one more line (or the end of input), then exits with status 0. So the
///   process is still running after every one of its commits until it is told to stop.
/// - `DocStoreCrashWriter compact PATH` — prints `compacting`, compacts the closed store at PATH, prints
///   `compacted BEFORE AFTER` (the file's sizes) and exits with status 0.
/// - `DocStoreCrashWriter migrate PATH` — runs ``SharedMigrations/migrator`` on the store at PATH, prints
///   `migrated NAMES` (those it ran, joined by commas) and exits with status 0.
/// - `DocStoreCrashWriter edit-films PATH` — in collection `films`, renames document 1, changes 2, deletes 3 and
///   inserts 4 (see ``MatchedDocumentsTests``), in one commit, and exits with status 0.
/// - `DocStoreCrashWriter catalog-on-cue PATH` — catalog changes read from standard input; see ``CatalogSteps``.
/// Opens the store at a path, or on PostgreSQL when the location is a `postgres://` URL: every mode runs on both.
func openStore(_ location: String, options: DocStore.Options = .init()) async throws -> DocStore {
    location.hasPrefix("postgres") ? try await DocStore(postgres: location, options: options)
        : try await DocStore(path: location, options: options)
}

/// A code claimed by the `claim-codes` mode: unique across every process that claims.
public struct Claim: Document {
    public var id: String
    public var code: Int
    public var writer: String
    public static let collection = "claims"
    public static let indexes: [IndexSpec<Claim>] = [.unique("code", \.code)]

    public init(id: String, code: Int, writer: String) {
        (self.id, self.code, self.writer) = (id, code, writer)
    }
}

/// Reads from the main actor, as a command-line tool's top-level code does. Each read's body must run on the main
/// actor's executor, with no hop to the pool and back (which costs the main queue's wake-up): a body that left it
/// stops the process at the precondition. (On Linux the main actor is the main queue, which `dispatch_main` hands to a
/// worker thread: `Thread.isMainThread` is false there, so the check is the executor's.)
@MainActor func readOnMain(path: String) async {
    do {
        let store = try await DocStore(path: path)
        try await store.insert(ChildPerson(number: 1))
        let count = try await store.read { ctx in
            MainActor.preconditionIsolated("a read from the main actor ran its body elsewhere")
            return try ChildPerson.query().count(in: ctx)
        }
        let first = try await ChildPerson.query().first(in: store)
        MainActor.preconditionIsolated("a query from the main actor did not return to it")
        await store.close()
        FileHandle.standardOutput.write(Data("read \(count) \(first?.name ?? "none")\n".utf8))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("DocStoreCrashWriter read-on-main: \(error)\n".utf8))
        exit(1)
    }
}

@main
struct CrashWriter {
    static func main() async {
        let arguments = CommandLine.arguments
        if arguments.count >= 4, arguments[1] == "insert-people" {
            await insertPeople(arguments: Array(arguments.dropFirst(2)))
        }
        if arguments.count >= 4, arguments[1] == "insert-untyped" {
            await insertUntyped(arguments: Array(arguments.dropFirst(2)))
        }
        if arguments.count >= 4, arguments[1] == "insert-people-on-cue" {
            await insertPeopleOnCue(arguments: Array(arguments.dropFirst(2)))
        }
        if arguments.count == 5, arguments[1] == "claim-codes" {
            await claimCodes(location: arguments[2], count: Int(arguments[3]) ?? 0, tag: arguments[4])
        }
        if arguments.count >= 4, arguments[1] == "insert-concurrently" {
            await insertConcurrently(arguments: Array(arguments.dropFirst(2)))
        }
        if arguments.count == 3, arguments[1] == "compact" {
            FileHandle.standardOutput.write(Data("compacting\n".utf8))
            do {
                let (before, after) = try await DocStore.compact(path: arguments[2])
                FileHandle.standardOutput.write(Data("compacted \(before) \(after)\n".utf8))
                exit(0)
            } catch {
                FileHandle.standardError.write(Data("DocStoreCrashWriter compact: \(error)\n".utf8))
                exit(1)
            }
        }
        if arguments.count == 3, arguments[1] == "migrate" {
            do {
                let store = try await openStore(arguments[2])
                let ran = try await SharedMigrations.migrator.migrate(store)
                await store.close()
                FileHandle.standardOutput.write(Data("migrated \(ran.joined(separator: ","))\n".utf8))
                exit(0)
            } catch {
                FileHandle.standardError.write(Data("DocStoreCrashWriter migrate: \(error)\n".utf8))
                exit(1)
            }
        }
        if arguments.count == 3, arguments[1] == "edit-films" {
            do {
                let store = try await openStore(arguments[2])
                try await store.write { ctx in
                    // 1 no longer matches name == "Titanic", 2 is changed, 3 is deleted, 4 matches now.
                    try ctx.save(.object([("id", .int(1)), ("name", .string("Titanic II"))]), into: "films")
                    try ctx.save(.object([("id", .int(2)), ("name", .string("Titanic")), ("dir", .string("B"))]),
                                 into: "films")
                    try ctx.delete("films", id: .int(3))
                    try ctx.insert(.object([("id", .int(4)), ("name", .string("Titanic"))]), into: "films")
                }
                await store.close()
                exit(0)
            } catch {
                FileHandle.standardError.write(Data("DocStoreCrashWriter edit-films: \(error)\n".utf8))
                exit(1)
            }
        }
        if arguments.count == 3, arguments[1] == "read-on-main" {
            await readOnMain(path: arguments[2])
        }
        if arguments.count == 4, arguments[1] == "hold" {
            await hold(path: arguments[2], exclusive: arguments[3] == "exclusive")
        }
        if arguments.count == 3, arguments[1] == "catalog-on-cue" {
            await CatalogSteps.run(path: arguments[2])
        }
        guard arguments.count == 2 || arguments.count == 3,
              let durability = arguments.count == 3 ? CrashRecord.durability(named: arguments[2]) : .full else {
            FileHandle.standardError.write(
                Data("usage: DocStoreCrashWriter PATH [full|normal|off|periodic|off-exclusive]\n".utf8))
            exit(2)
        }
        do {
            var options = CrashRecord.options
            options.durability = durability
            options.exclusive = arguments.count == 3 && arguments[2].hasSuffix("-exclusive")
            let store = try await openStore(arguments[1], options: options)
            // Eight tasks write at once, so that commits hold groups of batches; task t writes batches
            // start + t, start + t + 8, ... after the highest batch an earlier round left.
            let start = (try await CrashRecord.query().aggregate(.max(\.batch)).value(in: store) ?? -1) + 1
            await withThrowingTaskGroup(of: Void.self) { group in
                for t in 0..<CrashRecord.writers {
                    group.addTask {
                        var batch = start + t
                        while true {
                            try await store.insert(contentsOf: CrashRecord.batch(batch))
                            // Written straight to the file descriptor: nothing is buffered when the process is killed.
                            FileHandle.standardOutput.write(Data("committed \(batch)\n".utf8))
                            batch += CrashRecord.writers
                        }
                    }
                }
                do { try await group.waitForAll() } catch {
                    FileHandle.standardError.write(Data("DocStoreCrashWriter: \(error)\n".utf8))
                    exit(1)
                }
            }
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter: \(error)\n".utf8))
            exit(1)
        }
    }

    /// The `hold` mode: `PATH exclusive|shared`. Opens the store so, prints `opened` or `refused` and the error,
    /// and keeps it open until its standard input ends. Never returns.
    static func hold(path: String, exclusive: Bool) async -> Never {
        var options = DocStore.Options()
        options.exclusive = exclusive
        do {
            let store = try await DocStore(path: path, options: options)
            FileHandle.standardOutput.write(Data("opened\n".utf8))
            _ = FileHandle.standardInput.readDataToEndOfFile()
            await store.close()
        } catch {
            FileHandle.standardOutput.write(Data("refused \(error)\n".utf8))
        }
        exit(0)
    }

    /// The `claim-codes` mode: `PATH N TAG`. Tries to take each code 0..<N under a unique index, from four tasks,
    /// and prints `claimed N` or `taken N` for each. Never returns.
    static func claimCodes(location: String, count: Int, tag: String) async -> Never {
        do {
            let store = try await openStore(location)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for t in 0..<4 {
                    group.addTask {
                        for code in stride(from: t, to: count, by: 4) {
                            do {
                                try await store.insert(Claim(id: "\(tag)-\(code)", code: code, writer: tag))
                                FileHandle.standardOutput.write(Data("claimed \(code)\n".utf8))
                            } catch let error as DocStoreError where error.code == .uniqueViolation {
                                FileHandle.standardOutput.write(Data("taken \(code)\n".utf8))
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            await store.close()
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter claim-codes: \(error)\n".utf8))
            exit(1)
        }
    }

    /// The `insert-concurrently` mode: `PATH N TASKS TAG`. Never returns.
    static func insertConcurrently(arguments: [String]) async -> Never {
        guard arguments.count == 4, let count = Int(arguments[1]), count >= 0, let tasks = Int(arguments[2]),
              tasks > 0 else {
            FileHandle.standardError.write(Data("usage: DocStoreCrashWriter insert-concurrently PATH N TASKS TAG\n".utf8))
            exit(2)
        }
        let tag = arguments[3]
        do {
            let store = try await openStore(arguments[0])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for t in 0..<tasks {
                    group.addTask {
                        for n in stride(from: t, to: count, by: tasks) {
                            try await store.write { ctx in
                                try ctx.insert(.object([("id", .string("\(tag)-\(n)")), ("writer", .string(tag)),
                                                        ("n", .int(Int64(n)))]), into: "shared")
                            }
                            FileHandle.standardOutput.write(Data("inserted \(n)\n".utf8))
                        }
                    }
                }
                try await group.waitForAll()
            }
            await store.close()
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter insert-concurrently: \(error)\n".utf8))
            exit(1)
        }
    }

    /// The `insert-people` mode: `PATH N [PAUSE_MS]`. Never returns.
    static func insertPeople(arguments: [String]) async -> Never {
        guard arguments.count <= 3, let count = Int(arguments[1]), count >= 0,
              let pause = arguments.count == 3 ? Int(arguments[2]) : 20, pause >= 0 else {
            FileHandle.standardError.write(Data("usage: DocStoreCrashWriter insert-people PATH N [PAUSE_MS]\n".utf8))
            exit(2)
        }
        do {
            let store = try await openStore(arguments[0])
            for index in 0..<count {
                let number = index + 1
                try await store.insert(ChildPerson(number: number))
                FileHandle.standardOutput.write(Data("inserted \(number) \(monotonicNanoseconds())\n".utf8))
                if pause > 0 { try await Task.sleep(for: .milliseconds(pause)) }
            }
            await store.close()
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter insert-people: \(error)\n".utf8))
            exit(1)
        }
    }

    /// The `insert-untyped` mode: `PATH COLLECTION N TAG`. Never returns.
    static func insertUntyped(arguments: [String]) async -> Never {
        guard arguments.count == 4, let count = Int(arguments[2]), count >= 0 else {
            FileHandle.standardError.write(Data("usage: DocStoreCrashWriter insert-untyped PATH COLLECTION N TAG\n".utf8))
            exit(2)
        }
        let (collection, tag) = (arguments[1], arguments[3])
        do {
            let store = try await openStore(arguments[0])
            for n in 0..<count {
                let stored = try await store.write { ctx in
                    try ctx.insertAndFetch(.object([("writer", .string(tag)), ("n", .int(Int64(n)))]), into: collection)
                }
                FileHandle.standardOutput.write(Data("inserted \(n) \(stored[field: "id"]?.json() ?? "?")\n".utf8))
            }
            await store.close()
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter insert-untyped: \(error)\n".utf8))
            exit(1)
        }
    }

    /// The `insert-people-on-cue` mode: `PATH N`. Never returns.
    static func insertPeopleOnCue(arguments: [String]) async -> Never {
        guard arguments.count == 2, let count = Int(arguments[1]), count >= 0 else {
            FileHandle.standardError.write(Data("usage: DocStoreCrashWriter insert-people-on-cue PATH N\n".utf8))
            exit(2)
        }
        do {
            let store = try await openStore(arguments[0])
            for index in 0..<count {
                guard readLine() != nil else { break }
                let number = index + 1
                try await store.insert(ChildPerson(number: number))
                FileHandle.standardOutput.write(Data("inserted \(number) \(monotonicNanoseconds())\n".utf8))
            }
            _ = readLine()
            await store.close()
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter insert-people-on-cue: \(error)\n".utf8))
            exit(1)
        }
    }
}
