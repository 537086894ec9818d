import DocStore
import Foundation
import TestSupport

/// `swift run -c release bench [--docs N,N] [--scenario S,S] [--peer P,P] [--runs N] [--json FILE] [--chart FILE.svg]`
enum BenchCommand {
    static let usage = """
        usage: bench [--docs 10000,100000,1000000] [--scenario NAME,...] [--peer docstore,grdb,sqlite,lmdb,docstore1,docstore-x]
                     [--runs 5] [--form ids,raw,decoded] [--durability full|normal|off] [--json FILE] [--chart FILE.svg]
                     [--check THRESHOLDS] [--postgres URL] [--quiet]
        peers on PostgreSQL: docstore-pg (DocStore on it), postgres (jsonb documents, plain SQL through libpq); on a
                   throwaway cluster of the bench's own (scripts/setup installs the server), or at --postgres URL
        scenarios: \(Scenario.allCases.map(\.rawValue).joined(separator: ", "))
                   codec (the codec alone), streaming (memory of a lazy walk); all of them unless --scenario names some
        """

    static func run(_ arguments: [String]) async {
        if arguments.first == "--child-writer" { await ProcessWriters.child(Array(arguments.dropFirst())) }
        var counts = [10_000, 100_000, 1_000_000]
        var scenarios = Scenario.allCases
        var extras: Set<String> = ["codec", "streaming"]
        // GRDB is a peer of a bench built with --traits GRDB.
        var peers = ["docstore", "grdb", "sqlite", "lmdb"].filter { Harness.makePeer($0) != nil }
        var runs = 5
        var forms = Form.allCases
        var durability = BenchDurability.full
        var jsonPath: String?
        var chartPath: String?
        var quiet = false
        var thresholdsPath: String?
        var args = arguments[...]
        func list(_ option: String) -> [String] {
            guard let value = args.popFirst() else { fail("\(option) needs a value\n\(usage)") }
            return value.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }
        }
        while let a = args.popFirst() {
            switch a {
            case "--docs":
                counts = list(a).map { Int($0.replacingOccurrences(of: "_", with: "")) ?? -1 }
                if counts.contains(where: { $0 <= 0 }) { fail("--docs takes positive counts\n\(usage)") }
            case "--scenario":
                let names = list(a)
                extras = Set(names).intersection(["codec", "streaming"])
                scenarios = names.filter { !extras.contains($0) }.map { name in
                    guard let s = Scenario(rawValue: name) else { fail("unknown scenario '\(name)'\n\(usage)") }
                    return s
                }
            case "--peer":
                peers = list(a)
                for p in peers where Harness.makePeer(p) == nil {
                    fail(p.lowercased() == "grdb" ? "the GRDB peer is built with the GRDB trait: swift build -c release "
                        + "--traits GRDB --product bench" : "unknown peer '\(p)'\n\(usage)")
                }
            case "--runs":
                guard let n = list(a).first.flatMap(Int.init), n >= 1 else { fail("--runs takes a number ≥ 1") }
                runs = n
            case "--form":
                forms = list(a).map { name in
                    guard let form = Form(rawValue: name) else { fail("--form takes ids, raw or decoded") }
                    return form
                }
            case "--durability":
                guard let d = list(a).first.flatMap(BenchDurability.init(rawValue:)) else {
                    fail("--durability takes full, normal or off")
                }
                durability = d
            case "--json": jsonPath = list(a).first
            case "--chart": chartPath = list(a).first
            case "--quiet": quiet = true
            case "--postgres":
                guard let url = list(a).first, url.hasPrefix("postgres") else { fail("--postgres takes a postgres:// URL") }
                PostgresServer.use(url)
            case "--replot":
                // Draws the chart again from a --json file: `bench --replot bench.json --chart bench.svg`.
                guard let json = args.popFirst(), args.popFirst() == "--chart", let svg = args.popFirst() else {
                    fail("usage: bench --replot FILE.json --chart FILE.svg")
                }
                do {
                    let results = try JSONDecoder().decode(BenchResults.self, from: Data(contentsOf: URL(fileURLWithPath: json)))
                    try Chart.svg(results.measurements).write(toFile: svg, atomically: true, encoding: .utf8)
                    exit(0)
                } catch {
                    fail("\(error)")
                }
            case "--stream-walk":
                // The child process of the streaming measurement: a fresh process, so its memory is the walk's.
                guard let path = args.popFirst() else { fail("--stream-walk needs a path") }
                do {
                    print(try await StreamingMemory.walk(path))
                    exit(0)
                } catch {
                    fail("\(error)")
                }
            case "--fuzz-codec":
                // Not for people: scripts/bench-ci's run of the codec on corrupt documents in this optimized build.
                guard let count = args.popFirst().flatMap(Int.init), count > 0 else { fail("--fuzz-codec needs a count") }
                let seed = args.popFirst().flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
                do {
                    exit(try CodecFuzz.run(count: count, seed: seed) ? 0 : 1)
                } catch {
                    fail("\(error)")
                }
            case "--check": thresholdsPath = list(a).first
            case "--help", "-h": print(usage); exit(0)
            default: fail("unknown argument '\(a)'\n\(usage)")
            }
        }
        let harness = Harness(counts: counts, scenarios: scenarios, peers: peers, runs: runs, forms: forms, durability: durability) { line in
            if !quiet { FileHandle.standardError.write(Data((line + "\n").utf8)) }
        }
        do {
            let measurements = try await harness.run()
            var codec: [CodecFigure] = []
            if peers.contains("docstore") && extras.contains("codec") {
                codec = try CodecFigure.measure(count: min(counts.max() ?? 10_000, 100_000), runs: runs)
            }
            var memory: StreamingMemory?
            if peers.contains("docstore") && extras.contains("streaming") {
                memory = try await StreamingMemory.measure(count: counts.max() ?? 0)
            }
            print(machine())
            print(Report.table(measurements))
            print(Report.postgresTable(measurements))
            for c in codec { print(c.line) }
            if let d = codec.first(where: { $0.what == "DocumentDecoder" }), let j = codec.first(where: { $0.what == "JSONDecoder" }) {
                print(String(format: "codec: DocumentDecoder decodes %.1fx as fast as JSONDecoder", d.documentsPerSecond / j.documentsPerSecond))
            }
            if let memory { print(memory.line) }
            if let jsonPath {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                let data = try encoder.encode(BenchResults(machine: machine(), measurements: measurements,
                                                           codec: codec, streaming: memory))
                try data.write(to: URL(fileURLWithPath: jsonPath))
            }
            if let chartPath {
                try Chart.svg(measurements).write(toFile: chartPath, atomically: true, encoding: .utf8)
            }
            if let thresholdsPath {
                let text = try String(contentsOfFile: thresholdsPath, encoding: .utf8)
                let failures = try Thresholds.check(text, measurements) { print($0) }
                if failures > 0 { fail("\(failures) ratio\(failures == 1 ? " is" : "s are") below the floor in \(thresholdsPath)") }
            }
        } catch {
            fail("\(error)")
        }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data(("bench: " + message + "\n").utf8))
        exit(1)
    }

    /// The machine the figures come from.
    static func machine() -> String {
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?
            .split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        return "Machine: \(cpu), \(ProcessInfo.processInfo.activeProcessorCount) cores, "
            + "\(ProcessInfo.processInfo.physicalMemory >> 30) GiB; release build"
    }
}

/// Everything `--json` writes.
struct BenchResults: Codable {
    var machine: String
    var measurements: [Measurement]
    var codec: [CodecFigure]
    var streaming: StreamingMemory?
}

/// The codec alone, on in-memory bytes: DocStore's encoder and decoder beside Foundation's JSON ones.
struct CodecFigure: Codable {
    var what: String
    var documentsPerSecond: Double
    var line: String { "codec: \(what): \(Report.count(documentsPerSecond)) docs/s" }

    static func measure(count: Int, runs: Int) throws -> [CodecFigure] {
        let people = People.make(count).map(StoredPerson.init)
        let encoder = DocumentEncoder(), decoder = DocumentDecoder()
        let json = JSONEncoder(), jsonDecoder = JSONDecoder()
        func best(_ body: () throws -> Void) rethrows -> Double {
            var times: [Double] = []
            for _ in 0...runs {
                let t0 = Meter.now()
                try body()
                times.append(Double(Meter.now() - t0))
            }
            return Double(count) / (Meter.median(Array(times.dropFirst())) / 1e9)
        }
        var encoded: [[UInt8]] = []
        let encodeRate = try best { encoded = try people.map { try encoder.encode($0) } }
        var jsonData: [Data] = []
        let jsonEncodeRate = try best { jsonData = try people.map { try json.encode($0) } }
        let decodeRate = try best { for e in encoded { _ = try decoder.decode(StoredPerson.self, from: e) } }
        let jsonDecodeRate = try best { for d in jsonData { _ = try jsonDecoder.decode(StoredPerson.self, from: d) } }
        return [
            CodecFigure(what: "DocumentEncoder", documentsPerSecond: encodeRate),
            CodecFigure(what: "JSONEncoder", documentsPerSecond: jsonEncodeRate),
            CodecFigure(what: "DocumentDecoder", documentsPerSecond: decodeRate),
            CodecFigure(what: "JSONDecoder", documentsPerSecond: jsonDecodeRate),

        ]
    }
}

/// Anonymous memory while streaming every document through lazy results.
struct StreamingMemory: Codable {
    var documents: Int
    var peakAnonymousBytes: Int
    var line: String {
        "streaming \(documents) documents through lazy results: RssAnon peaked at \(Report.bytes(peakAnonymousBytes))"
    }

    /// Makes a store of `count` documents, then walks it in a child process of its own (this executable with
    /// `--stream-walk`), whose anonymous memory is the walk's alone.
    static func measure(count: Int) async throws -> StreamingMemory {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docstore-bench-stream-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let peer = DocStorePeer()
        try await peer.load(People.make(count), in: directory)
        await peer.close()
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        child.arguments = ["--stream-walk", directory + "/docstore.db"]
        let out = Pipe()
        child.standardOutput = out
        try child.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard child.terminationStatus == 0, let peak = Int(text) else {
            throw BenchFailure(description: "the streaming walk failed: \(text)")
        }
        return StreamingMemory(documents: count, peakAnonymousBytes: peak)
    }

    /// Walks every document of the store at `path` through lazy results; returns the peak `RssAnon` seen.
    static func walk(_ path: String) async throws -> Int {
        var options = DocStore.Options()
        options.initialMapSize = 1 << 30
        let store = try await DocStore(path: path, options: options)
        let peak = try await store.read { ctx -> Int in
            var peak = Meter.status("RssAnon")
            var n = 0
            let people = try StoredPerson.query().cursor(in: ctx)
            while let person = try people.next() {
                n += person.age >= 0 ? 1 : 0
                if n % 10_000 == 0 { peak = max(peak, Meter.status("RssAnon")) }
            }
            return max(peak, Meter.status("RssAnon"))
        }
        await store.close()
        return peak
    }
}

/// A failure of the bench itself (an LMDB call, a malformed thresholds file, a child that did not report).
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
}
