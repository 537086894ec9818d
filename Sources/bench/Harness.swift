import DocStore
import Foundation
import Synchronization

/// One scenario run by one peer, in one form, at one document count.
struct Measurement: Codable, Sendable {
    var peer: String
    var scenario: String
    var form: String
    var documents: Int
    /// Median and 95th percentile of the timed runs, in nanoseconds.
    var medianNanoseconds: Double
    var p95Nanoseconds: Double
    var runs: Int
    /// What one run produced (documents, ids, a count); -1 when not comparable (a raw walk of everything).
    var produced: Int
    /// Documents handled per run: inserted, read, scanned or returned, as the scenario counts them.
    var work: Int
    var documentsPerSecond: Double { medianNanoseconds > 0 ? Double(work) / (medianNanoseconds / 1e9) : 0 }
    var nanosecondsPerDocument: Double { work > 0 ? medianNanoseconds / Double(work) : 0 }
    /// The process's peak resident memory during the runs, and the store's files.
    var peakResidentBytes: Int
    var fileBytes: Int
    /// For the write scenarios: the median and 99th percentile of one write's latency (from its call to its
    /// return, durable), over every write of the timed runs, in nanoseconds.
    var writeP50Nanoseconds: Double? = nil
    var writeP99Nanoseconds: Double? = nil
}

/// The latency of each single write a write scenario makes, recorded by the peers as they write.
enum WriteLatency {
    private static let samples = Mutex<[Double]>([])

    /// Records a write that began at `start` (``Meter/now()``) and has just returned.
    static func record(since start: UInt64) {
        let elapsed = Double(Meter.now() - start)
        samples.withLock { $0.append(elapsed) }
    }

    /// Runs each list on a task of its own, `write` once per person in order, recording each write's latency;
    /// returns the writes made.
    static func timed(_ lists: [[BenchPerson]], _ write: @escaping @Sendable (BenchPerson) async throws -> Void)
        async throws -> Int {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for people in lists {
                group.addTask {
                    for person in people {
                        let start = Meter.now()
                        try await write(person)
                        record(since: start)
                    }
                }
            }
            try await group.waitForAll()
        }
        return lists.reduce(0) { $0 + $1.count }
    }

    /// The latencies recorded since the last call.
    static func take() -> [Double] {
        samples.withLock { all in
            defer { all = [] }
            return all
        }
    }
}

/// Timing and memory, from the kernel's own counters.
enum Meter {
    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Resets the peak resident size the kernel keeps for the process (`VmHWM`).
    static func resetPeak() {
        if let fd = fopen("/proc/self/clear_refs", "w") { fputs("5", fd); fclose(fd) }
    }

    /// A field of /proc/self/status in bytes (`VmHWM`, `RssAnon`).
    static func status(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let kb = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
            return kb * 1024
        }
        return 0
    }

    static func median(_ xs: [Double]) -> Double {
        let s = xs.sorted()
        guard !s.isEmpty else { return 0 }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func percentile95(_ xs: [Double]) -> Double { percentile(xs, 0.95) }

    /// The smallest value at or above fraction `q` of the sorted values.
    static func percentile(_ xs: [Double], _ q: Double) -> Double {
        let s = xs.sorted()
        guard !s.isEmpty else { return 0 }
        return s[max(0, min(s.count - 1, Int((Double(s.count) * q).rounded(.up)) - 1))]
    }
}

/// Runs the selected scenarios against the selected peers at each document count.
struct Harness {
    var counts: [Int]
    var scenarios: [Scenario]
    var peers: [String]
    var runs: Int
    /// The forms a scenario that returns documents is run in.
    var forms = Form.allCases
    var durability = BenchDurability.full
    var log: (String) -> Void

    static func makePeer(_ name: String, durability: BenchDurability = .full) -> (any Peer)? {
        switch name.lowercased() {
        case "docstore": return DocStorePeer(durability: durability)
        case "docstore1": return DocStorePeer(scanThreads: 1, durability: durability)
        case "docstore-x", "docstorex": return DocStorePeer(durability: durability, exclusive: true)
        #if GRDB
        case "grdb": return GRDBPeer(durability: durability)
        #endif
        case "sqlite", "sqlite c", "sqlitec": return SQLitePeer(durability: durability)
        case "lmdb", "raw lmdb", "rawlmdb": return LMDBPeer()
        case "docstore-pg", "docstorepg": return DocStorePeer(durability: durability, onPostgres: true)
        case "postgres", "postgresql", "jsonb": return PostgresJSONBPeer(durability: durability)
        default: return nil
        }
    }

    /// Loads every peer, then runs each scenario with the peers taking turns, run by run (in an order shuffled each
    /// run), so that a slow stretch of a shared machine falls on every peer of a scenario rather than on one.
    func run() async throws -> [Measurement] {
        var all: [Measurement] = []
        for count in counts {
            log("== \(count) documents ==")
            let people = People.make(count)
            var loaded: [any Peer] = []
            var directories: [String] = []
            defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
            for peerName in peers {
                guard let peer = Harness.makePeer(peerName, durability: durability) else { continue }
                let directory = FileManager.default.temporaryDirectory
                    .appendingPathComponent("docstore-bench-\(UUID().uuidString)").path
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                directories.append(directory)
                Meter.resetPeak()
                let start = Meter.now()
                try await peer.load(people, in: directory)
                let loadTime = Double(Meter.now() - start)
                loaded.append(peer)
                if scenarios.contains(.insert) {
                    all.append(Measurement(peer: peer.name, scenario: Scenario.insert.rawValue, form: "-",
                                           documents: count, medianNanoseconds: loadTime, p95Nanoseconds: loadTime,
                                           runs: 1, produced: count, work: count,
                                           peakResidentBytes: Meter.status("VmHWM"), fileBytes: try peer.fileSize()))
                    log("  \(peer.name) insert: \(Report.rate(all.last!))")
                }
            }
            var parameters = Parameters(documentCount: count)
            // Spread over the ids, so that the saves touch pages all over each store.
            parameters.stored = stride(from: 0, to: people.count, by: max(1, people.count / 256)).prefix(256).map { people[$0] }
            for scenario in scenarios where scenario != .insert {
                for form in scenario.returnsDocuments ? forms : [.ids] {
                    let taking = loaded.filter { $0.supports(scenario, form) }
                    guard !taking.isEmpty else { continue }
                    Meter.resetPeak()
                    var times = Array(repeating: [Double](), count: taking.count)
                    var produced = Array(repeating: 0, count: taking.count)
                    var latencies = Array(repeating: [Double](), count: taking.count)
                    // The peers take their turns in a new order each run (seeded, the same in every bench): in a
                    // fixed order a peer always ran after the same other one, and found what that one had left in the
                    // caches (SQLite's C peer ran after GRDB's, which had just run libsqlite3's code).
                    var order = Array(taking.indices)
                    var shuffler = SeededGenerator(seed: 0x7A4E)
                    for i in 0...runs {   // the first round warms up and is not timed
                        order.shuffle(using: &shuffler)
                        for p in order {
                            let peer = taking[p]
                            parameters.missSerial += 1
                            _ = WriteLatency.take()
                            _ = MeasuredSpan.take()
                            let t0 = Meter.now()
                            produced[p] = try await peer.run(scenario, form, parameters)
                            let t = MeasuredSpan.take() ?? Double(Meter.now() - t0)
                            let writes = WriteLatency.take()
                            if i > 0 {
                                times[p].append(t)
                                latencies[p] += writes
                            }
                        }
                    }
                    for (p, peer) in taking.enumerated() {
                        let m = Measurement(
                            peer: peer.name, scenario: scenario.rawValue,
                            form: scenario.returnsDocuments ? form.rawValue : "-", documents: count,
                            medianNanoseconds: Meter.median(times[p]), p95Nanoseconds: Meter.percentile95(times[p]),
                            runs: runs, produced: produced[p],
                            work: Harness.work(scenario, produced: produced[p], count: count),
                            peakResidentBytes: Meter.status("VmHWM"), fileBytes: try peer.fileSize())
                        var measured = m
                        if !latencies[p].isEmpty {
                            measured.writeP50Nanoseconds = Meter.percentile(latencies[p], 0.50)
                            measured.writeP99Nanoseconds = Meter.percentile(latencies[p], 0.99)
                        }
                        all.append(measured)
                        log("  \(peer.name) \(scenario.rawValue) \(m.form): \(Report.rate(m)) (\(produced[p]))")
                    }
                }
            }
            for peer in loaded { await peer.close() }
        }
        return all
    }

    /// Documents a run handles, as the scenario counts them.
    static func work(_ scenario: Scenario, produced: Int, count: Int) -> Int {
        switch scenario {
        case .insert: return count
        case .findOrCreateHit, .findOrCreateMiss: return Parameters.findOrCreateCalls
        default: return scenario.scansEverything ? count : max(produced, 0)
        }
    }
}
