import DocStore
import Foundation
#if GRDB
import GRDB
#endif
import CSQLite
import Synchronization
import TestSupport

/// The `insertProcesses4` scenario: four processes insert into one store at once, each from four tasks (threads,
/// for SQLite's C API), a transaction per document. The processes are this binary, started as
/// `bench --child-writer KIND PATH DURABILITY FIRST_ID COUNT TASKS`; each opens the store, says `ready`, waits for a
/// line on its standard input, inserts, says `done` and exits. The time runs from the go to the last `done`, so the
/// start of the processes is not counted.
enum ProcessWriters {
    static let processes = 4
    static let insertsPerProcess = 200
    static let tasksPerProcess = 4

    /// Runs the processes against the store of kind `kind` ("docstore", "sqlite", "grdb") at `path`; returns the
    /// documents inserted, and hands the harness the time the inserts took (``MeasuredSpan``).
    static func run(kind: String, path: String, durability: BenchDurability, _ p: Parameters) throws -> Int {
        let first = Int64(p.documentCount) + 40_000_000 + Int64(p.missSerial * processes * insertsPerProcess)
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var children: [(process: ChildProcess, input: Pipe, output: FileHandle)] = []
        defer { for child in children where child.process.isRunning { child.process.terminate() } }
        for i in 0..<processes {
            let process = ChildProcess()
            process.executableURL = executable
            process.arguments = ["--child-writer", kind, path, durability.rawValue,
                                 "\(first + Int64(i * insertsPerProcess))", "\(insertsPerProcess)", "\(tasksPerProcess)"]
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            children.append((process, input, output.fileHandleForReading))
        }
        for child in children { try expect("ready", from: child.output, kind) }
        let start = Meter.now()
        for child in children { child.input.fileHandleForWriting.write(Data("go\n".utf8)) }
        for child in children { try expect("done", from: child.output, kind) }
        MeasuredSpan.set(Double(Meter.now() - start))
        for child in children {
            child.process.waitUntilExit()
            guard child.process.terminationStatus == 0 else {
                throw BenchFailure(description: "a \(kind) writer process exited with \(child.process.terminationStatus)")
            }
        }
        return processes * insertsPerProcess
    }

    /// Reads the child's output up to `word` on a line of its own.
    private static func expect(_ word: String, from output: FileHandle, _ kind: String) throws {
        var text = ""
        while !text.split(separator: "\n").contains(Substring(word)) {
            let data = output.availableData
            guard !data.isEmpty else {
                throw BenchFailure(description: "a \(kind) writer process ended before '\(word)': \(text)")
            }
            text += String(decoding: data, as: UTF8.self)
        }
    }

    /// The child: `KIND PATH DURABILITY FIRST_ID COUNT TASKS`.
    static func child(_ arguments: [String]) async -> Never {
        guard arguments.count == 6, let durability = BenchDurability(rawValue: arguments[2]),
              let first = Int64(arguments[3]), let count = Int(arguments[4]), let tasks = Int(arguments[5]), tasks > 0
        else {
            FileHandle.standardError.write(Data("usage: bench --child-writer KIND PATH DURABILITY FIRST COUNT TASKS\n".utf8))
            exit(2)
        }
        let (kind, path) = (arguments[0], arguments[1])
        let people = (0..<Int64(count)).map { PersonTable.newcomer(id: first + $0, email: "process\(first + $0)@example.com") }
        let lists = (0..<tasks).map { t in stride(from: t, to: people.count, by: tasks).map { people[$0] } }
        func say(_ word: String) { FileHandle.standardOutput.write(Data((word + "\n").utf8)) }
        do {
            switch kind {
            case "docstore":
                var options = DocStore.Options()
                options.durability = durability.docStore
                let store = try await DocStorePeer.open(path, options)
                say("ready")
                _ = readLine()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for list in lists {
                        group.addTask { for person in list { try await store.insert(StoredPerson(person)) } }
                    }
                    try await group.waitForAll()
                }
                await store.close()
            case "postgres":
                let (url, schema) = PostgresServer.split(path)
                let links = try lists.map { _ in try PostgresLink(url: url) }
                for link in links { try link.query(PostgresJSONBPeer.settings(schema, durability)) }
                say("ready")
                _ = readLine()
                if let message = PostgresJSONBPeer.writeOnThreads(lists, through: links, sql: PostgresJSONBPeer.insert) {
                    throw BenchFailure(description: message)
                }
            #if GRDB
            case "grdb":
                let pool = try GRDBPeer.openPool(path, durability)
                say("ready")
                _ = readLine()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for list in lists {
                        group.addTask { for person in list { try await pool.write { try GRDBPeer.insert(person, $0) } } }
                    }
                    try await group.waitForAll()
                }
            #endif
            case "sqlite":
                let connections = try lists.map { _ in try SQLitePeer.writerConnection(path, durability) }
                say("ready")
                _ = readLine()
                if let message = SQLitePeer.insertOnThreads(lists, through: connections) {
                    throw BenchFailure(description: message)
                }
                for connection in connections { sqlite3_close(connection.raw) }
            default:
                throw BenchFailure(description: "no writer process for '\(kind)'")
            }
            say("done")
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("bench writer process: \(error)\n".utf8))
            exit(1)
        }
    }
}

/// A scenario's own measure of its run, which the harness takes instead of timing the whole call: for a run whose
/// setting up (starting processes) is not what it measures.
enum MeasuredSpan {
    private static let span = Mutex<Double?>(nil)
    static func set(_ nanoseconds: Double) { span.withLock { $0 = nanoseconds } }
    static func take() -> Double? { span.withLock { value in defer { value = nil }; return value } }
}
