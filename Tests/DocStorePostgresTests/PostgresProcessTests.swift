import DocStoreCrashWriter
import Foundation
import Testing
import TestSupport
@testable import DocStore
@testable import DocStorePostgres

/// What holds across processes on a store kept in PostgreSQL, with real child processes (the crash writer) and a
/// real server: nothing acknowledged is lost when a writer is killed, writers of four processes lose nothing, a
/// unique value is taken once, and a bad URL, a wrong password or a missing database is a clear error.
@Suite(.ownThreads, .enabled(if: PostgresCluster.isAvailable, Comment(rawValue: PostgresCluster.skipReason)))
struct PostgresProcessTests {
    static var writerURL: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("DocStoreCrashWriter")
    }

    /// Runs writers with each of `runs` as arguments, all at once, to their ends, and returns what each printed,
    /// one line each. The waits block this thread (the suite has threads of its own), never the shared pool.
    static func runWriters(_ runs: [[String]]) throws -> [(status: Int32, lines: [Substring], complaint: String)] {
        let started = try runs.map { arguments -> (ChildProcess, Pipe, Pipe) in
            let process = ChildProcess()
            process.executableURL = writerURL
            process.arguments = arguments
            let output = Pipe()
            let errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            return (process, output, errors)
        }
        return started.map { process, output, errors in
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let complaint = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, text.split(separator: "\n"), complaint)
        }
    }

    /// A writer on eight tasks is killed with SIGKILL at random moments: every batch it reported committed is there
    /// in full, none is there in part, and `verify()` is clean.
    @Test func aKilledWriterLosesNothingItAcknowledged() async throws {
        let url = try PostgresCluster.shared().freshURL()
        var rng = SeededGenerator(seed: 34)
        var reported: Set<Int> = []
        for round in 0..<6 {
            let delay = Int.random(in: 20...200, using: &rng)
            let process = ChildProcess()
            process.executableURL = Self.writerURL
            process.arguments = [url, "full"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let reader = output.fileHandleForReading
            var text = ""
            let deadline = Date().addingTimeInterval(60)
            while !text.contains("committed "), Date() < deadline {
                let data = reader.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            usleep(useconds_t(delay * 1000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            text += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationReason == .uncaughtSignal, "round \(round): the writer stopped by itself")
            for line in text.split(separator: "\n") where line.hasPrefix("committed ") {
                if let n = Int(line.dropFirst("committed ".count)) { reported.insert(n) }
            }
            let store = try await DocStore(postgres: url)
            let batches = Dictionary(grouping: try await CrashRecord.query().results(in: store), by: \.batch)
            for b in reported.sorted() { #expect(batches[b] != nil, "round \(round): reported batch \(b) is missing") }
            for (b, stored) in batches {
                #expect(stored.sorted { $0.id < $1.id } == CrashRecord.batch(b), "round \(round): batch \(b) is partial")
            }
            let report = try await store.verify()
            #expect(report.isClean, "round \(round): \(report)")
            await store.close()
        }
        #expect(reported.count >= 6, "the writer committed too little to test anything")
    }

    /// Four processes insert at once, each from eight tasks: every write a process was told had returned is there,
    /// once, and `verify()` is clean.
    @Test func fourProcessesWritingAtOnceLoseNothing() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let store = try await DocStore(postgres: url)
        try await store.write { try $0.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "shared") }
        let perProcess = 100
        let results = try Self.runWriters((0..<4).map { ["insert-concurrently", url, "\(perProcess)", "8", "w\($0)"] })
        var acknowledged: [String: Set<Int>] = [:]
        for (p, (status, lines, complaint)) in results.enumerated() {
            #expect(status == 0, "writer \(p) failed: \(complaint)")
            acknowledged["w\(p)"] = Set(lines.compactMap { Int($0.dropFirst("inserted ".count)) })
            #expect(acknowledged["w\(p)"]?.count == perProcess, "writer \(p) acknowledged too few")
        }
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

    /// Four processes try to take the same 60 codes under a unique index: each code is taken exactly once, by the
    /// process that was told so.
    @Test func aUniqueValueIsTakenOnceAcrossProcesses() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let store = try await DocStore(postgres: url)
        try await store.prepare(Claim.self)
        let codes = 60
        let results = try Self.runWriters((0..<4).map { ["claim-codes", url, "\(codes)", "p\($0)"] })
        var claimedBy: [Int: Int] = [:]
        for (status, lines, complaint) in results {
            #expect(status == 0, "claimer failed: \(complaint)")
            #expect(lines.count == codes, "a claimer answered \(lines.count) of \(codes) codes")
            for line in lines where line.hasPrefix("claimed ") {
                claimedBy[Int(line.dropFirst("claimed ".count))!, default: 0] += 1
            }
        }
        #expect(claimedBy.count == codes && claimedBy.values.allSatisfy { $0 == 1 }, "\(claimedBy)")
        let claims = try await Claim.query().results(in: store)
        #expect(claims.count == codes)
        #expect(Set(claims.map(\.code)) == Set(0..<codes))
    }

    /// Two stores on one schema, each with its own cache of the catalog and the counts (as two processes have):
    /// an insert takes its id and unique values as absent without asking, and a write served the catalog from the
    /// cache before the server said where the catalog last changed. Whatever the other store did in between, each
    /// refuses what it must, and sees the other's indexes and counts.
    /// A schema whose name is too long to follow `docstore ` in a notification channel (55 bytes and more): a
    /// write while a store observes commits, and the observer sees it.
    @Test func aStoreInASchemaOfALongNameIsObserved() async throws {
        let schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            + String(repeating: "x", count: 28)
        #expect(schema.utf8.count == 62)
        let url = try PostgresCluster.shared().url(schema: schema)
        let store = try await DocStore(postgres: url)
        let location = try PostgresLocation(url, durability: .full)
        let raw = try PostgresConnection(conninfo: location.storage.conninfo, server: location.storage.server)
        let (observing, started) = AsyncStream<Void>.makeStream()
        let watcher = Task { () -> Bool in
            for try await count in Person.query().observeCount(in: store) {
                if count == 0 { started.yield(()) }
                if count == 1 { return true }
            }
            return false
        }
        var first = observing.makeAsyncIterator()
        _ = await first.next()
        // The store counts itself among the listeners once it has asked for the last commit (every 50 ms).
        var listening = false
        for _ in 0..<600 where !listening {
            listening = (try raw.execute("SELECT listeners FROM \(quoted(schema)).meta").textInteger(0, 0) ?? 0) > 0
            if !listening { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(listening)
        try await store.insert(Person(name: "Ann", age: 30))
        let patience = Task { try await Task.sleep(for: .seconds(60)); watcher.cancel() }
        let seen = try await watcher.value
        patience.cancel()
        #expect(seen)
    }

    /// At a durability whose commits the server acknowledges before its log is on disk, `flush()` commits a
    /// transaction that waits for the log (it takes a transaction id of its own, which the count of ids shows).
    @Test func flushingAStoreOfUnsyncedCommitsWaitsForTheLog() async throws {
        let url = try PostgresCluster.shared().freshURL()
        var options = DocStore.Options()
        options.durability = .normal
        let store = try await DocStore(postgres: url, options: options)
        try await store.insert(Person(name: "Ann", age: 30))
        let location = try PostgresLocation(url, durability: .normal)
        let raw = try PostgresConnection(conninfo: location.storage.conninfo, server: location.storage.server)
        let before = try #require(try raw.execute("SELECT txid_current()").textInteger(0, 0))
        try await store.flush()
        let after = try #require(try raw.execute("SELECT txid_current()").textInteger(0, 0))
        #expect(after - before >= 2, "\(before) -> \(after)")
    }

    @Test func aStoreSeesWhatAnotherChangedWhileItsCacheHeldTheOld() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let a = try await DocStore(postgres: url)
        let b = try await DocStore(postgres: url)
        let ann = Person(name: "Ann", age: 30, email: "ann@example.com")
        try await a.insert(ann)
        try await b.insert(Person(name: "Bo", age: 40, email: "bo@example.com"))
        // Each store's cache now holds the catalog and the counts; the other commits past them.
        for (store, other) in [(a, b), (b, a)] {
            // (One with an email: a missing one is not indexed, and takes nothing.)
            let taken = try await Person.query().results(in: other).last { $0.email != nil }!
            await Self.expect(.duplicateID) { try await store.insert(taken) }
            var copy = Person(name: "Copy \(UUID())", age: 1, email: taken.email)
            await Self.expect(.uniqueViolation) { try await store.insert(copy) }
            copy.email = "new-\(UUID())@example.com"
            try await other.insert(Person(name: "Filler \(UUID())", age: 2))
            try await store.insert(copy)
        }
        #expect(try await Person.query().count(in: a) == 6)
        #expect(try await Person.query().count(in: b) == 6)
        // An index the one store makes binds the other's next write, which its cache knew nothing of.
        try await b.write { ctx in
            try ctx.createIndex(IndexDefinition(name: "by_name", kind: .unique, fields: ["name"]), in: "people")
        }
        await Self.expect(.uniqueViolation) {
            try await a.write { ctx in
                try ctx.insert(.object([("id", .string(UUID().uuidString)), ("name", .string("Ann")), ("age", .int(5)),
                                        ("city", .string("Oslo")), ("tags", .array([]))]), into: "people")
            }
        }
        await Self.expect(.uniqueViolation) { try await a.insert(Person(name: "Bo", age: 9)) }
        try await a.insert(Person(name: "Cy", age: 9))
        #expect(try await Person.query().count(in: b) == 7)
        #expect(try await a.verify().isClean)
    }

    /// A store made before the commit that last changed the catalog was kept opens, keeps what it holds, and
    /// gets the columns; from then on a commit of a process of that time (which fills no `format`) is refused.
    @Test func aStoreOfTheFormerLayoutOpensAndRefusesCommitsOfItsTime() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let location = try PostgresLocation(url, durability: .full)
        let ann = Person(name: "Ann", age: 30, email: "ann@example.com")
        do {
            let store = try await DocStore(postgres: url)
            try await store.insert(ann)
            await store.close()
        }
        let raw = try PostgresConnection(conninfo: location.storage.conninfo, server: location.storage.server)
        let schema = quoted(location.storage.schema)
        try raw.execute("ALTER TABLE \(schema).meta DROP COLUMN catalog, DROP COLUMN listeners; "
                        + "ALTER TABLE \(schema).commits DROP COLUMN format")
        let store = try await DocStore(postgres: url)
        #expect(try await Person.query().results(in: store) == [ann])
        await Self.expect(.uniqueViolation) { try await store.insert(Person(name: "Copy", age: 1, email: ann.email)) }
        try await store.insert(Person(name: "Bo", age: 40))
        #expect(try await Person.query().count(in: store) == 2)
        #expect(throws: PostgresError.self) {
            try raw.execute("INSERT INTO \(schema).commits SELECT max(number) + 1, '\\x00' FROM \(schema).commits")
        }
    }

    /// An index walked with its documents serves them again to a read of those documents by id, as the server
    /// would answer it (a missing one left out), and no longer once the transaction wrote.
    @Test func documentsFetchedWithAnIndexAreServedAgainUntilAWrite() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let engine = try PostgresStorage(settings: try PostgresLocation(url, durability: .full).storage)
        defer { engine.close() }
        let ids: [[UInt8]] = (0..<40).map { [UInt8($0), 7] }
        try engine.write { txn in
            let index = try #require(try txn.openKeySpace("index", create: true, duplicateSort: true))
            let documents = try #require(try txn.openKeySpace("documents", create: true, duplicateSort: false))
            for (i, id) in ids.enumerated() {
                try txn.put(index, [UInt8(i % 3)], id)
                if i % 5 != 0 { try txn.put(documents, id, id + [1]) }   // every fifth entry names no document
            }
        }
        try engine.write { txn in
            let index = try #require(try txn.openKeySpace("index", create: false, duplicateSort: true))
            let documents = try #require(try txn.openKeySpace("documents", create: false, duplicateSort: false))
            let cursor = try #require(try txn.openCursor(index, fetchingValuesIn: documents))
            var walked: [[UInt8]] = []
            var entry = try cursor.first()
            while let (_, id) = entry {
                walked.append(Array(id))
                #expect(cursor.fetchedDocument()?.map(Array.init) == (ids.firstIndex(of: Array(id))! % 5 == 0 ? nil : Array(id) + [1]))
                entry = try cursor.next()
            }
            #expect(Set(walked) == Set(ids))
            let asked = [ids[3], ids[5], ids[1]]
            let expected: [[UInt8]] = [ids[3] + [1], ids[1] + [1]]
            // (An entry is valid while its keeper lives.)
            func values() throws -> [[UInt8]] {
                let found = try txn.entries(documents, forKeys: asked)
                return withExtendedLifetime(found.keeper) { found.entries.map { Array($0.value) } }
            }
            #expect(try values() == expected)
            try txn.put(documents, ids[3], [42])
            try txn.put(documents, ids[5], [43])
            #expect(try values() == [[42], [43], ids[1] + [1]])
        }
    }

    static func expect(_ code: DocStoreError.Code, sourceLocation: SourceLocation = #_sourceLocation,
                       _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("no error; expected \(code)", sourceLocation: sourceLocation)
        } catch {
            #expect((error as? DocStoreError)?.code == code, "\(error)", sourceLocation: sourceLocation)
        }
    }

    /// Writes sent ahead (their count changes noted on the server and added up at the commit) keep the counts
    /// right inside a transaction, through savepoints kept and rolled back, and from one commit to the next, where
    /// the engine keeps the counts the commit returned. And a walk placed by a bounded seek ends at its bound.
    @Test func countsFollowWritesSentAheadThroughSavepoints() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let location = try PostgresLocation(url, durability: .full)
        let engine = try PostgresStorage(settings: location.storage)
        defer { engine.close() }
        struct Refused: Error {}
        var expected: (plain: Int, dups: Int) = (0, 0)
        var rng = SeededGenerator(seed: 11)
        for round in 0..<6 {
            try engine.write { txn in
                let plain = try #require(try txn.openKeySpace("plain", create: true, duplicateSort: false))
                let dups = try #require(try txn.openKeySpace("dups", create: true, duplicateSort: true))
                var inside = (plain: 0, dups: 0)
                for step in 0..<40 {
                    let key: [UInt8] = [UInt8(round), UInt8(step)]
                    // Sent ahead, not yet answered when the savepoint begins.
                    try txn.put(plain, key, [1])
                    try txn.put(dups, [UInt8(step % 3)], key)
                    // The same key twice (its last value stays), the same pair twice (once), with nothing between.
                    try txn.put(plain, key + [9], [3])
                    try txn.put(plain, key + [9], [4])
                    try txn.put(dups, [7], key)
                    try txn.put(dups, [7], key)
                    // Deleted then put again, put then deleted, in one space: each in its order.
                    try txn.discard(plain, key + [9], value: nil)
                    try txn.put(plain, key + [9], [4])
                    try txn.discard(dups, [7], value: key)
                    try txn.put(dups, [7], key)
                    try txn.put(dups, [8], key)
                    try txn.discard(dups, [8], value: key)
                    inside.plain += 2
                    inside.dups += 2
                    let keep = Bool.random(using: &rng)
                    _ = try? txn.nested { child in
                        try child.put(plain, key + [0], [2])
                        try child.put(dups, [UInt8(step % 3)], key + [0])
                        try child.discard(plain, key, value: nil)
                        if !keep { throw Refused() }
                    }
                    if keep { inside.dups += 1 }
                    #expect(try txn.entryCount(plain) == expected.plain + inside.plain, "round \(round) step \(step)")
                    #expect(try txn.entryCount(dups) == expected.dups + inside.dups, "round \(round) step \(step)")
                }
                expected.plain += inside.plain
                expected.dups += inside.dups
            }
            try engine.read { txn in
                let plain = try #require(try txn.openKeySpace("plain", create: false, duplicateSort: false))
                let dups = try #require(try txn.openKeySpace("dups", create: false, duplicateSort: true))
                #expect(try txn.entryCount(plain) == expected.plain)
                #expect(try txn.entryCount(dups) == expected.dups)
                var counted = (plain: 0, dups: 0)
                try txn.forEachEntry(in: plain) { _, _ in counted.plain += 1 }
                try txn.forEachEntry(in: dups) { _, _ in counted.dups += 1 }
                #expect(counted.plain == expected.plain && counted.dups == expected.dups)
                for step in 0..<40 {
                    #expect(try txn.get(plain, [UInt8(round), UInt8(step), 9]).map(Array.init) == [4])
                }
                // Key 1's values, walked from a bounded seek: all of them, in order, and nothing of key 2.
                var walked: [[UInt8]] = []
                try txn.withCursor(dups) { cursor in
                    var entry = try [UInt8(1)].withUnsafeBytes { try cursor.seek(atLeast: $0, below: [2]) }
                    while let (k, v) = entry, k.elementsEqual([1]) {
                        walked.append(Array(v))
                        entry = try cursor.next()
                    }
                    #expect(entry == nil || !entry!.key.lexicographicallyPrecedes([2]) == true)
                }
                var all: [[UInt8]] = []
                try txn.forEachEntry(in: dups, prefix: [1]) { _, v in all.append(Array(v)) }
                #expect(walked == all && !all.isEmpty)
            }
        }
    }

    /// Keys that differ only in length, in high bytes, or around embedded zeros walk in LMDB's order (bytes in
    /// order, a prefix first), forward and back, plain and duplicate-sorted; counts follow every change.
    @Test func keysAreOrderedAsLMDBOrdersThem() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let location = try PostgresLocation(url, durability: .full)
        let engine = try PostgresStorage(settings: location.storage)
        defer { engine.close() }
        var rng = SeededGenerator(seed: 7)
        let alphabet: [UInt8] = [0, 1, 0x7F, 0x80, 0xFE, 0xFF]
        var keys: Set<[UInt8]> = [[], [0], [0, 0], [0xFF], [0xFF, 0], [1, 0, 1], [1, 0], [1]]
        while keys.count < 300 {
            keys.insert((0..<Int.random(in: 1...5, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
        }
        keys.remove([])
        let sorted = keys.sorted { $0.lexicographicallyPrecedes($1) }
        let values: [[UInt8]] = [[9], [0, 0], [0]]
        let pairs: [([UInt8], [UInt8])] = keys.flatMap { k in values.map { (k, $0) } }
        func precedes(_ a: ([UInt8], [UInt8]), _ b: ([UInt8], [UInt8])) -> Bool {
            a.0 == b.0 ? a.1.lexicographicallyPrecedes(b.1) : a.0.lexicographicallyPrecedes(b.0)
        }
        let sortedPairs = pairs.sorted(by: precedes)
        try engine.write { txn in
            let plain = try #require(try txn.openKeySpace("plain", create: true, duplicateSort: false))
            let dups = try #require(try txn.openKeySpace("dups", create: true, duplicateSort: true))
            for k in keys.shuffled(using: &rng) { try txn.put(plain, k, k + [1]) }
            for (k, v) in pairs.shuffled(using: &rng) { try txn.put(dups, k, v) }
            #expect(try txn.put(plain, sorted[0], [], noOverwrite: true) == false)
            #expect(try txn.put(dups, sorted[0], [0], noDuplicate: true) == false)
        }
        try engine.read { txn in
            let plain = try #require(try txn.openKeySpace("plain", create: false, duplicateSort: false))
            let dups = try #require(try txn.openKeySpace("dups", create: false, duplicateSort: true))
            #expect(try txn.entryCount(plain) == keys.count)
            #expect(try txn.entryCount(dups) == pairs.count)
            var forward: [[UInt8]] = []
            var backward: [[UInt8]] = []
            try txn.withCursor(plain) { c in
                var e = try c.first()
                while let (k, _) = e { forward.append(Array(k)); e = try c.next() }
                e = try c.last()
                while let (k, _) = e { backward.append(Array(k)); e = try c.previous() }
                for k in sorted.prefix(40) {
                    let found = try c.seek(atLeast: Array(k.dropLast()) + [(k.last ?? 0) &+ 1])
                    let expected = sorted.first { !$0.lexicographicallyPrecedes(Array(k.dropLast()) + [(k.last ?? 0) &+ 1]) }
                    #expect(found.map { Array($0.key) } == expected)
                }
            }
            #expect(forward == sorted)
            #expect(backward == sorted.reversed())
            var walked: [([UInt8], [UInt8])] = []
            var distinct: [[UInt8]] = []
            try txn.withCursor(dups) { c in
                var e = try c.first()
                while let (k, v) = e { walked.append((Array(k), Array(v))); e = try c.next() }
                e = try c.first()
                while let (k, _) = e {
                    distinct.append(Array(k))
                    #expect(try c.duplicateCount() == 3)
                    e = try c.nextKey()
                }
                #expect(try c.contains(key: sorted[3], value: [0, 0]))
                #expect(try !c.contains(key: sorted[3], value: [1]))
            }
            #expect(walked.map(\.0) == sortedPairs.map(\.0) && walked.map(\.1) == sortedPairs.map(\.1))
            #expect(distinct == sorted)
            let many = try txn.entries(plain, forKeys: [sorted[5], [0xAA, 0xAA], sorted[2]])
            #expect(many.entries.map { Array($0.key) } == [sorted[5], sorted[2]])
            #expect(many.entries.map { Array($0.value) } == [sorted[5] + [1], sorted[2] + [1]])
        }
        // A write that fails rolls back its counts with it.
        struct Refusal: Error {}
        #expect(throws: Refusal.self) {
            try engine.write { txn in
                let plain = try #require(try txn.openKeySpace("plain", create: false, duplicateSort: false))
                try txn.delete(plain, sorted[0])
                throw Refusal()
            }
        }
        try engine.read { txn in
            let plain = try #require(try txn.openKeySpace("plain", create: false, duplicateSort: false))
            #expect(try txn.entryCount(plain) == keys.count)
        }
    }

    /// The server stops at once (as in a crash) and starts again while a task writes one document a commit: every
    /// write that returned is there, the writes in flight go through once the server is back (or fail naming the
    /// server), and none is there twice.
    @Test func aServerRestartedMidWriteLosesNothingAcknowledged() async throws {
        let cluster = try PostgresCluster.startOwn()
        let store = try await DocStore(postgres: cluster.freshURL())
        let total = 3_000
        let writer = Task {
            var acknowledged: [Int] = []
            var failures: [String] = []
            for code in 0..<total {
                do {
                    try await store.insert(Claim(id: "c\(code)", code: code, writer: "w"))
                    acknowledged.append(code)
                } catch {
                    failures.append("\(error)")
                }
            }
            return (acknowledged, failures)
        }
        while try await Claim.query().count(in: store) < 30 { try await Task.sleep(for: .milliseconds(10)) }
        try cluster.crashAndRestart()
        let atRestart = try await Claim.query().count(in: store)
        #expect(atRestart < total, "the writes ended before the server stopped: the test tested nothing")
        let (acknowledged, failures) = await writer.value
        print("server restarted with \(atRestart) of \(total) written; \(failures.count) writes failed: \(failures)")
        for failure in failures { #expect(failure.contains("PostgreSQL at 127.0.0.1:\(cluster.port)"), "\(failure)") }
        #expect(failures.isEmpty, "a write in flight failed rather than going through once the server was back")
        let stored = try await Claim.query().results(in: store).map(\.code)
        let lost = Set(acknowledged).subtracting(stored)
        #expect(lost.isEmpty, "acknowledged and not there: \(lost.sorted()) of \(acknowledged.count)")
        #expect(stored.count == Set(stored).count)
        #expect(acknowledged.last == total - 1, "the writes did not go on after the restart")
        #expect(try await store.verify().isClean)
    }

    /// A walk of a whole space (a dump's, a verify's, an index build's: `forEachEntry`) keeps only the window it is
    /// in, so that a space larger than memory is walked in bounded memory; it meets every entry in order, in a read
    /// and in a write that writes elsewhere as it walks.
    @Test func aWalkOfAWholeSpaceKeepsOnlyTheWindowItIsIn() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let engine = try PostgresStorage(settings: try PostgresLocation(url, durability: .full).storage)
        defer { engine.close() }
        let count = 20_000
        func key(_ i: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(i).bigEndian) { Array($0) } }
        func value(_ i: Int) -> [UInt8] { key(i) + [UInt8](repeating: UInt8(i % 251), count: 200) }
        try engine.write { txn in
            let space = try #require(try txn.openKeySpace("big", create: true, duplicateSort: false))
            for i in 0..<count { try txn.put(space, key(i), value(i)) }
        }
        try engine.read { txn in
            let space = try #require(try txn.openKeySpace("big", create: false, duplicateSort: false))
            let postgres = try #require(txn as? PostgresTransaction)
            let kept = postgres.keptAnswers
            var seen = 0
            try txn.forEachEntry(in: space) { k, v in
                if k.elementsEqual(key(seen)) && v.elementsEqual(value(seen)) { seen += 1 }
            }
            #expect(seen == count)
            #expect(try txn.copiedValue(space, key(1234)) == value(1234))
            #expect(try txn.copiedValue(space, key(count)) == nil)
            #expect(postgres.keptAnswers == kept, "the walk kept \(postgres.keptAnswers - kept) answers")
        }
        try engine.write { txn in
            let space = try #require(try txn.openKeySpace("big", create: false, duplicateSort: false))
            let copy = try #require(try txn.openKeySpace("copy", create: true, duplicateSort: false))
            let postgres = try #require(txn as? PostgresTransaction)
            let kept = postgres.keptAnswers
            var seen = 0
            try txn.forEachEntry(in: space) { k, v in
                if k.elementsEqual(key(seen)) && v.elementsEqual(value(seen)) { seen += 1 }
                try txn.put(copy, Array(k), Array(v))
            }
            #expect(seen == count)
            #expect(postgres.keptAnswers <= kept + 4, "the walk kept \(postgres.keptAnswers - kept) answers")
            // Windows of 16, 64, 256, 1,024, then 4,096 entries: the writes to another space fetch none again.
            #expect(postgres.windowsFetched <= 10, "the walk fetched \(postgres.windowsFetched) windows")
        }
        try engine.read { txn in
            let copy = try #require(try txn.openKeySpace("copy", create: false, duplicateSort: false))
            #expect(try txn.entryCount(copy) == count)
        }
    }

    /// A query that walks a whole collection, or an index's entries alone, keeps only the part of the walk it is in:
    /// a count, an update or a delete whose condition no index answers runs in bounded memory on a large collection.
    @Test func aQueryThatScansKeepsOnlyThePartItIsIn() async throws {
        let url = try PostgresCluster.shared().freshURL()
        let store = try await DocStore(postgres: url)
        let count = 6_000
        try await store.insert(contentsOf: (0..<count).map { i in
            Person(name: "p\(i)", age: i % 90, city: i % 7 == 0 ? "Oslo" : "Bergen", tags: i % 2 == 0 ? ["even"] : [])
        })
        let (counted, countKept) = try await store.read { ctx in
            let txn = try #require(ctx.txn as? PostgresTransaction)
            let before = txn.keptAnswers
            let n = try Person.include(#Predicate { $0.name.starts(with: "p7") }).count(in: ctx)
            return (n, txn.keptAnswers - before)
        }
        #expect(counted == 1 + 10 + 100)
        #expect(countKept <= 1, "a count that scans kept \(countKept) answers")
        // Documents read by id in batches, in a sorted walk, are kept only while the walk needs them.
        let (walked, walkKept) = try await store.read { ctx in
            let txn = try #require(ctx.txn as? PostgresTransaction)
            let before = txn.keptAnswers
            let cursor = try Person.include(#Predicate { $0.name >= "p1" }).sortBy(\.name).cursor(in: ctx)
            var walked = 0, last = ""
            while let person = try cursor.next() {
                if person.name >= last { walked += 1 }
                last = person.name
            }
            return (walked, txn.keptAnswers - before)
        }
        #expect(walked == count - 1)
        #expect(walkKept <= 2, "a sorted walk kept \(walkKept) answers")
        let (updated, deleted, writeKept) = try await store.write { ctx in
            let txn = try #require(ctx.txn as? PostgresTransaction)
            let before = txn.keptAnswers
            let updated = try Person.include(#Predicate { $0.name == "p4321" || $0.name == "p5" })
                .update(in: ctx, set: ["city": .string("Tromsø")])
            let deleted = try Person.include(#Predicate { $0.name == "p17" }).delete(in: ctx)
            return (updated, deleted, txn.keptAnswers - before)
        }
        #expect(updated == 2 && deleted == 1)
        #expect(writeKept <= 4, "an update and a delete of three documents kept \(writeKept) answers")
        #expect(try await Person.include(#Predicate { $0.city == "Tromsø" }).count(in: store) == 2)
        #expect(try await Person.query().count(in: store) == count - 1)
        // An update of many documents reads each ahead, and copies it: it keeps none of them.
        let (many, manyKept) = try await store.write { ctx in
            let txn = try #require(ctx.txn as? PostgresTransaction)
            let before = txn.keptAnswers
            let updated = try Person.include(#Predicate { $0.name.starts(with: "p1") }).update(in: ctx) { $0.age += 1 }
            return (updated, txn.keptAnswers - before)
        }
        #expect(many == 1 + 10 + 100 + 1_000 - 1)   // (p17 was deleted)
        #expect(manyKept <= 4, "an update of \(many) documents kept \(manyKept) answers")
        // A unique index made over the documents, which were found first to hold no two equal keys, puts its
        // entries without a round trip each.
        let waits = try await store.write { ctx in
            let txn = try #require(ctx.txn as? PostgresTransaction)
            let before = txn.connection.waits
            try ctx.createIndex(IndexDefinition(name: "unique_name", kind: .unique, fields: ["name"]), in: "people")
            return txn.connection.waits - before
        }
        #expect(waits <= 40, "a unique index over \(count - 1) documents waited \(waits) times for the server")
        #expect(try await store.read { ctx in
            "\(try Person.include(#Predicate { $0.name == "p4321" }).explain(in: ctx))"
        }.contains("unique_name"))
        await #expect(throws: DocStoreError.self) {
            try await store.insert(Person(name: "p4321", age: 1))
        }
        // A delete of many documents, each with entries in two unique indexes, asks for what it reads 512 documents
        // at a time.
        let (removed, deleteWaits) = try await store.write { ctx in
            let txn = try #require(ctx.txn as? PostgresTransaction)
            let before = txn.connection.waits
            let removed = try Person.include(#Predicate { $0.name.starts(with: "p2") }).delete(in: ctx)
            return (removed, txn.connection.waits - before)
        }
        #expect(removed == 1 + 10 + 100 + 1_000)
        #expect(deleteWaits <= 20, "a delete of \(removed) documents waited \(deleteWaits) times for the server")
        #expect(try await Person.query().count(in: store) == count - 1 - removed)
        #expect(try await Person.include(#Predicate { $0.name == "p2345" }).count(in: store) == 0)
        try await store.insert(Person(name: "p2345", age: 1))
        #expect(try await store.verify().isClean)
        #expect(try await Person.include(#Predicate { $0.name == "p1234" }).first(in: store)?.age == 1234 % 90 + 1)
    }

    /// A walk in id order that gathers the documents of an `||` whose branches include the ids' own range (a union
    /// with a scan of the documents) holds every document until it ends: each is still there when it is sorted or
    /// grouped, and the answers are those of the documents in memory.
    @Test func aSortedUnionWithAnIDBranchReadsEveryDocumentWhole() async throws {
        let store = try await DocStore(postgres: try PostgresCluster.shared().freshURL())
        let people = (0..<3_000).map { Person(name: "n\(($0 * 7_919) % 3_000)", age: $0 % 90, city: "c\($0 % 13)") }
        try await store.insert(contentsOf: people)
        let picked = people[1_234].id
        let query = Person.include(#Predicate { $0.id == picked || $0.age > 60 })
        let plan = "\(try await store.read { try query.explain(in: $0) })"
        #expect(plan.contains("union"), "\(plan)")
        let expected = people.filter { $0.id == picked || $0.age > 60 }
        let sorted = try await query.sortBy(\.name).results(in: store)
        let expectedNames: [String] = expected.map(\.name).sorted()
        #expect(sorted.map(\.name) == expectedNames)
        let ids: Set<UUID> = Set(sorted.map(\.id)), expectedIDs: Set<UUID> = Set(expected.map(\.id))
        #expect(ids == expectedIDs)
        let groups = try await query.groupBy(\.city).results(in: store)
        var counts: [String: Int] = [:]
        for person in expected { counts[person.city, default: 0] += 1 }
        #expect(groups.count == counts.count)
        for group in groups { #expect(counts[group.key] == group.value, "\(group)") }
    }

    /// A restore onto a server asks for what its documents' checks read (each id) 512 documents at a time, not
    /// with a round trip each (3,104 waits for 3,000 documents before; now about 115, most of them the windows of
    /// the index builds); a document refused (an id taken twice) still names its own line.
    @Test func aRestoreWaitsForTheServerOncePerBatchOfDocuments() async throws {
        let dir = TemporaryDirectory()
        let source = try await DocStore(path: dir.path("source.db"))
        let count = 3_000
        try await source.insert(contentsOf: (0..<count).map { Person(name: "p\($0)", age: $0 % 90, email: "e\($0)") })
        let dumpPath = dir.path("people.dump")
        try await source.dump(to: dumpPath)
        let store = try await DocStore(postgres: try PostgresCluster.shared().freshURL())
        let engine = try #require(store.core.env as? PostgresStorage)
        let before = engine.waits
        let summary = try await store.restore(from: dumpPath)
        #expect(summary.documents == count)
        #expect(engine.waits - before <= 200, "a restore of \(count) documents waited \(engine.waits - before) times")
        #expect(try await Person.query().count(in: store) == count)
        #expect(try await Person.include(#Predicate { $0.email == "e1234" }).first(in: store)?.name == "p1234")
        #expect(try await store.verify().isClean)

        // The dump with one document's line written again further on: refused, naming that line.
        let lines = try String(contentsOfFile: dumpPath, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let first = try #require(lines.firstIndex { $0.contains("\"document\"") })
        var twice = lines
        twice.insert(lines[first + 700], at: first + 1_500)
        let twicePath = dir.path("twice.dump")
        try twice.joined(separator: "\n").replacingOccurrences(of: "\"documents\": 3000", with: "\"documents\": 3001")
            .write(toFile: twicePath, atomically: true, encoding: .utf8)
        let other = try await DocStore(postgres: try PostgresCluster.shared().freshURL())
        do {
            try await other.restore(from: twicePath)
            Issue.record("a dump holding one id twice was restored")
        } catch let error as DocStoreError {
            #expect(error.message.contains("line \(first + 1_501):"), "\(error.message)")
        }
        #expect(try await Person.query().count(in: other) == 0)
    }

    /// A write that made a collection (its table, and the statements prepared for it) and that the server refused at
    /// its commit with a conflict runs again and commits, and so does the next write that makes one. The server
    /// refuses the first commit through a trigger on `meta`'s commit number (a sequence counts the commits: it is not
    /// undone by the rollback).
    @Test func aWriteThatMadeACollectionAndWasRefusedOnTheServerRunsAgain() async throws {
        let cluster = try PostgresCluster.shared()
        let schema = "rr_" + UUID().uuidString.prefix(8).lowercased()
        let store = try await DocStore(postgres: cluster.url(schema: schema))
        try await store.insert(Claim(id: "a", code: 1, writer: "t"))
        try cluster.psql("""
            CREATE SEQUENCE \(schema).tries;
            CREATE FUNCTION \(schema).refuse_first() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                IF NEW.commit IS DISTINCT FROM OLD.commit THEN
                    IF nextval('\(schema).tries') = 1 THEN RAISE EXCEPTION 'refused once' USING ERRCODE = '40001'; END IF;
                END IF;
                RETURN NEW; END $$;
            CREATE TRIGGER refuse_first BEFORE UPDATE ON \(schema).meta FOR EACH ROW EXECUTE FUNCTION \(schema).refuse_first();
            """)
        try await store.insert(Person(name: "Ann", age: 30, email: "ann@example.org", tags: ["x"]))
        try await store.write { ctx in
            try ctx.insert(.object([("id", .int(1)), ("n", .int(2))]), into: "others")
        }
        // The server did refuse a commit (the sequence counts every commit since; psql fails on the exception).
        try cluster.psql("DO $$ BEGIN IF (SELECT last_value FROM \(schema).tries) < 3 THEN "
            + "RAISE EXCEPTION 'no commit was refused'; END IF; END $$")
        #expect(try await Person.query().count(in: store) == 1)
        #expect(try await store.read { try Query<DocumentValue>("others").count(in: $0) } == 1)
        #expect(try await store.verify().isClean)
        await store.close()
    }

    /// A store opened read-only by a role that may only read it (as a reporting user, or a hot standby, would) answers
    /// its queries: opening changes nothing on the server, and a write is refused as on a read-only file.
    @Test func aRoleThatMayOnlyReadOpensTheStoreReadOnly() async throws {
        let cluster = try PostgresCluster.shared()
        let schema = "ro_" + UUID().uuidString.prefix(8).lowercased()
        let store = try await DocStore(postgres: cluster.url(schema: schema))
        try await store.insert(contentsOf: (0..<40).map { Claim(id: "c\($0)", code: $0, writer: "w\($0 % 3)") })
        await store.close()
        try cluster.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reader') THEN "
            + "CREATE ROLE reader LOGIN PASSWORD 'r'; END IF; END $$; GRANT USAGE ON SCHEMA \(schema) TO reader; "
            + "GRANT SELECT ON ALL TABLES IN SCHEMA \(schema) TO reader")
        var options = DocStore.Options()
        options.readOnly = true
        let reader = try await DocStore(postgres: cluster.url(schema: schema, user: "reader", password: "r"),
                                        options: options)
        #expect(try await Claim.query().count(in: reader) == 40)
        #expect(try await Claim.include(#Predicate { $0.code == 7 }).first(in: reader)?.id == "c7")
        await Self.expect(.readOnly) { try await reader.insert(Claim(id: "x", code: 99, writer: "r")) }
        await reader.close()
    }

    /// A URL with no server behind it, a wrong password and a missing database: each a clear error naming the
    /// server and what failed, within seconds.
    @Test func badLocationsFailClearlyAndQuickly() async throws {
        let cluster = try PostgresCluster.shared()
        try cluster.psql("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'app') THEN "
            + "CREATE ROLE app LOGIN PASSWORD 'right'; END IF; END $$; GRANT CREATE ON DATABASE postgres TO app")
        let cases: [(String, String)] = [
            ("postgres://postgres@127.0.0.1:1/postgres", "127.0.0.1:1"),
            (cluster.url(schema: "s", user: "app", password: "wrong"), "password"),
            (cluster.url(schema: "s", database: "no_such_database"), "no_such_database"),
            ("http://user:secret@example.com/x", "not a PostgreSQL URL"),
        ]
        for (url, expected) in cases {
            let started = ContinuousClock.now
            do {
                _ = try await DocStore(postgres: url)
                Issue.record("\(url) opened")
            } catch let error as DocStoreError {
                #expect(error.code == .cannotOpen, "\(url): \(error)")
                #expect("\(error)".contains(expected), "\(url): \(error)")
                #expect(!"\(error)".contains("secret") && !"\(error)".contains("wrong"), "a password shows: \(error)")
            }
            #expect(ContinuousClock.now - started < .seconds(15), "\(url) took too long")
        }
        // The right password opens it.
        let store = try await DocStore(postgres: cluster.url(schema: "app_store", user: "app", password: "right"))
        try await store.insert(Claim(id: "a", code: 1, writer: "t"))
        #expect(try await Claim.query().count(in: store) == 1)
    }
}
