import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore

@Suite(.ownThreads) struct CrashSafetyTests {
    /// The child process built beside this test binary.
    static var writerURL: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("DocStoreCrashWriter")
    }

    /// The writer with `arguments`, what it prints thrown away; not started yet.
    static func quietWriter(_ arguments: [String]) -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = writerURL
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        return process
    }

    /// Starts the writer, waits for its first commit, kills it with SIGKILL `delay` later, and returns how it ended
    /// and what it printed. Waiting for a commit first makes each round kill a writer that is writing, however long
    /// a loaded machine takes to start the process.
    ///
    /// The waits block their thread rather than suspending: a suspended task may resume late while other suites keep
    /// the cooperative threads busy, and the writer would then run far longer than the round intends.
    static func runWriter(path: String, durability: String = "full", killAfterMilliseconds delay: Int) throws
        -> (Process.TerminationReason, String) {
        let process = ChildProcess()
        process.executableURL = writerURL
        process.arguments = [path, durability]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reader = output.fileHandleForReading
        var text = ""
        let deadline = Date().addingTimeInterval(30)
        while !text.contains("committed "), Date() < deadline {
            let data = reader.availableData   // blocks until the writer prints, or ends
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        usleep(useconds_t(delay * 1000))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        text += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationReason, text)
    }

    /// A child writes batches from eight tasks at once, so that its commits hold groups of them, and reports each
    /// batch whose write returned; it is killed with SIGKILL at random moments. After every kill, every reported batch is there in full, no batch is there in part, and `verify()` is clean: at every
    /// durability, since a crash of the process (not of the machine) loses nothing the operating system was given.
    @Test(.serialized, arguments: ["full", "normal", "off", "periodic", "off-exclusive"])
    func killedWriterLosesNoCommittedBatchAndLeavesNoneHalfWritten(durability: String) async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.writerURL.path),
                "the crash writer is missing at \(Self.writerURL.path)")
        let dir = TemporaryDirectory()
        let path = dir.path("crash.db")
        var rng = SeededGenerator(seed: 2024 &+ UInt64(durability.utf8.count))
        var reported: Set<Int> = []
        for round in 0..<20 {
            let delay = Int.random(in: 5...80, using: &rng)
            let (reason, text) = try Self.runWriter(path: path, durability: durability, killAfterMilliseconds: delay)
            #expect(reason == .uncaughtSignal, "\(durability), round \(round): the writer stopped by itself")
            for line in text.split(separator: "\n") where line.hasPrefix("committed ") {
                if let n = Int(line.dropFirst("committed ".count)) { reported.insert(n) }
            }

            let store = try await DocStore(path: path, options: CrashRecord.options)
            let records = try await store.write { try CrashRecord.query().results(in: $0) }
            let batches = Dictionary(grouping: records, by: \.batch)
            for b in reported.sorted() {
                #expect(batches[b] != nil, "\(durability), round \(round): reported batch \(b) is missing")
            }
            for (b, stored) in batches {
                #expect(stored.sorted { $0.id < $1.id } == CrashRecord.batch(b), "round \(round): batch \(b) is partial")
            }
            let report = try await store.verify()
            #expect(report.isClean, "round \(round): \(report)")
            await store.close()
        }
        print("crash test, \(durability): \(reported.count) batches reported committed")
        #expect(reported.count > 20, "the writer committed too little to test anything")
    }

    /// Four processes insert at once into one file, each from eight tasks: LMDB's writer lock takes their groups in
    /// turn, and every write a process was told had returned is there, once, with `verify()` clean.
    @Test func fourProcessesWritingAtOnceLoseNothing() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("shared.db")
        // The store exists before the writers start, so that none of them has to create it.
        let store = try await DocStore(path: path)
        try await store.write { try $0.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "shared") }
        let perProcess = 200
        let processes = (0..<4).map { p -> (ChildProcess, Pipe) in
            let process = ChildProcess()
            process.executableURL = Self.writerURL
            process.arguments = ["insert-concurrently", path, "\(perProcess)", "8", "w\(p)"]
            let output = Pipe()
            process.standardOutput = output
            return (process, output)
        }
        for (process, _) in processes { try process.run() }
        var acknowledged: [String: Set<Int>] = [:]
        for (p, (process, output)) in processes.enumerated() {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "writer \(p) failed")
            acknowledged["w\(p)"] = Set(text.split(separator: "\n").compactMap { Int($0.dropFirst("inserted ".count)) })
        }
        for p in 0..<4 { #expect(acknowledged["w\(p)"]?.count == perProcess, "writer \(p) acknowledged too few") }
        let stored = try await Query<DocumentValue>("shared").results(in: store)
        #expect(stored.count == 4 * perProcess)
        for (tag, ns) in acknowledged {
            let mine = stored.filter { $0[field: "writer"] == .string(tag) }
            #expect(Set(mine.compactMap { value -> Int? in
                if case .int(let n)? = value[field: "n"] { return Int(n) } else { return nil }
            }) == ns, "writer \(tag)")
        }
        #expect(try await Query<DocumentValue>("shared").include(.compare("n", .less, .int(10))).count(in: store) == 40)
        #expect(try await store.verify().isClean)
    }
}
