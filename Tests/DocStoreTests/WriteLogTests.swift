import Foundation
import Testing
@testable import DocStore
import TestSupport

/// The write log at full durability (``WriteLog``): commits wait for a record of their changes, the file's pages are
/// synced at checkpoints, and a crash of the machine, which may leave any mix of the pages written since the last
/// checkpoint on disk, loses no commit that returned.
///
/// A crash of the machine is simulated: the store is abandoned as a dying process leaves it (nothing synced, the
/// log as it is), each page of the file is set back at random to what it held at a sync after the log's checkpoint
/// (as if its later writes never reached the disk), the pages added since are zeroed at random, and the log's boot
/// id is made another boot's.
@Suite struct WriteLogTests {
    /// Random inserts, saves, deletes, unique conflicts inside groups and batches after a checkpoint, then a crash:
    /// the store opens with every write that returned and nothing else, and verifies clean. Read-only, it is refused
    /// until a writable opening has applied the log.
    /// With `limits` "bytes", a slot of the log holds 16 KiB of records, so that a record that would not fit makes a
    /// checkpoint every few writes; with "pages", the file may grow by 64 pages between checkpoints; with "freed",
    /// the commits between checkpoints may free 48 pages.
    @Test(arguments: [(UInt64(1), 0.5, ""), (2, 0.0, ""), (3, 1.0, ""), (4, 0.3, "bytes"), (5, 0.8, "bytes"),
                      (6, 0.5, "pages"), (7, 0.0, "pages"), (8, 0.5, "freed")])
    func aCrashOfTheMachineLosesNoWriteThatReturned(seed: UInt64, reached: Double, limits: String) async throws {
        var random = SeededGenerator(seed: seed)
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        var expected: [UUID: Person] = [:]
        // Written and synced before the crash's session: the state the first checkpoint starts from.
        let first = try await DocStore(path: path)
        let early = (0..<300).map { Person(name: "early \($0)", age: $0 % 90, city: ["Oslo", "Rome"][$0 % 2],
                                           email: "e\($0)@x", tags: ["t\($0 % 7)"]) }
        try await first.insert(contentsOf: early)
        for person in early { expected[person.id] = person }
        await first.close()

        let store = try await DocStore(path: path)
        await store.tuneWriteLog(capacity: limits == "bytes" ? 16 << 10 : nil, growth: limits == "pages" ? 64 : nil,
                                 freed: limits == "freed" ? 48 : nil)
        // The disk as a sync after the log's last checkpoint leaves it: what the crash sets pages back to. (A sync
        // changes none of the pages of the checkpoint's base, which the log keeps from reuse.)
        var checkpoint: [UInt8] = [], epoch: UInt64?
        func follow() async throws {
            let now = try Self.header(of: path).epoch
            guard now != epoch else { return }
            try await store.flush()
            (checkpoint, epoch) = (Self.contents(of: path), now)
        }
        var emails = 0
        for step in 0..<400 {
            try await follow()
            let ids = Array(expected.keys)
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                emails += 1
                let person = Person(name: "p\(step)", age: Int.random(in: 0..<90, using: &random),
                                    city: ["Oslo", "Rome", "Lima"].randomElement(using: &random)!,
                                    email: "n\(emails)@x", tags: ["t\(step % 5)", "u\(step % 3)"])
                try await store.insert(person)
                expected[person.id] = person
            case 4..<7:
                var person = expected[ids.randomElement(using: &random)!]!
                person.age = Int.random(in: 0..<90, using: &random)
                person.tags = Int.random(in: 0..<3, using: &random) == 0 ? [] : ["s\(step % 4)"]
                try await store.save(person)
                expected[person.id] = person
            case 7:
                let id = ids.randomElement(using: &random)!
                #expect(try await store.delete(Person.self, id: id))
                expected[id] = nil
            case 8:
                // Writes of several tasks, committed as a group, one of which breaks the unique email: its changes
                // are taken back alone.
                let taken = expected.values.first { $0.email != nil }!.email
                let batch = (0..<4).map { i in
                    Person(name: "g\(step)-\(i)", age: i, email: i == 2 ? taken : "g\(step)-\(i)@x")
                }
                let results = await withTaskGroup(of: (Person, Bool).self) { group in
                    for person in batch {
                        group.addTask { (person, (try? await store.insert(person)) != nil) }
                    }
                    return await group.reduce(into: [(Person, Bool)]()) { $0.append($1) }
                }
                for (person, inserted) in results {
                    #expect(inserted == (person.email != taken), "\(person.name)")
                    if inserted { expected[person.id] = person }
                }
            default:
                // A save that changes nothing, then a batch.
                if let unchanged = expected.values.first { try await store.save(unchanged) }
                let batch = (0..<25).map { Person(name: "b\(step)-\($0)", age: $0, city: "Kyiv") }
                try await store.insert(contentsOf: batch)
                for person in batch { expected[person.id] = person }
            }
        }
        try await follow()
        #expect(try Self.header(of: path).owner != 0, "the log is not owned")
        await store.abandon()

        try Self.crash(path, checkpoint: checkpoint, reached: reached, random: &random)
        await expectError(.cannotOpen, mentions: ["open the store writable once", "-log"]) {
            _ = try await DocStore.recover(from: path, to: dir.path("salvaged.db"))
        }
        #expect(DocStore.checkFile(at: path).notices.contains { $0.contains("open the store writable once") })
        var readOnly = DocStore.Options()
        readOnly.readOnly = true
        await expectError(.cannotOpen, mentions: ["open the store writable once"]) {
            _ = try await DocStore(path: path, options: readOnly)
        }
        let recovered = try await DocStore(path: path)
        let people = try await Person.query().results(in: recovered)
        #expect(people.count == expected.count)
        #expect(Dictionary(people.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }) == expected)
        #expect(try await recovered.verify().isClean)
        await recovered.close()
        // Applied once: the log is cleared, and a read-only opening goes on.
        let again = try await DocStore(path: path, options: readOnly)
        #expect(try await Person.query().count(in: again) == expected.count)
        await again.close()
    }

    /// Processes that write in turn append their records under one checkpoint, the first writer's, each after the
    /// others': no process syncs the file to take the log over. When the checkpoint's owner dies, the next writer
    /// finds no live process holding its base (a new process's opening has cleared the dead one's reader slot) and
    /// makes a checkpoint of its own. The machine then crashes, every writer killed: recovery applies every
    /// process's records in the order of their commits, and loses no write that returned.
    ///
    /// The file is left as the processes left it, its pages all on disk: what recovery writes back is the base's
    /// meta pages, so that a page of the base written over since (reused while no reader held it) shows.
    @Test(.ownThreads, .enabled(if: !WriteLog.bootID.isEmpty))
    func processesWritingInTurnShareTheLogAndACrashLosesNone() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        try await Self.makeStoreOfFiftyPeople(at: path)
        typealias Writer = (process: ChildProcess, output: FileHandle, input: Pipe, done: Int)
        func start() throws -> Writer {
            let (process, output, input) = try BackupTests.child(["insert-people-on-cue", path, "1000"])
            return (process, output, input, 0)
        }
        var writers = try (0..<3).map { _ in try start() }
        defer { for writer in writers { kill(writer.process.processIdentifier, SIGKILL); writer.process.waitUntilExit() } }
        var acknowledged = 0
        /// One insert from each writer of `turns`, in turn, `rounds` times; each waits for the one before it.
        func inTurns(_ turns: [Int], rounds: Int) {
            for _ in 0..<rounds {
                for w in turns {
                    writers[w].input.fileHandleForWriting.write(Data("go\n".utf8))
                    writers[w].done += 1
                    let said = BackupTests.wait(for: "inserted \(writers[w].done) ", from: writers[w].output)
                    #expect(said.contains("inserted \(writers[w].done) "), "writer \(w) said \(said)")
                    if said.contains("inserted \(writers[w].done) ") { acknowledged += 1 }
                }
            }
        }
        inTurns([0], rounds: 1)
        let owned = try Self.header(of: path)
        #expect(owned.owner != 0)
        inTurns([0, 1, 2], rounds: 12)
        let shared = try Self.header(of: path)
        #expect(shared.epoch == owned.epoch, "a writer of another process made a checkpoint of its own")

        // The owner dies; a fourth process opens (clearing its reader slot) and writes with the other two.
        kill(writers[0].process.processIdentifier, SIGKILL)
        writers[0].process.waitUntilExit()
        writers.append(try start())
        inTurns([1, 2, 3], rounds: 12)
        let after = try Self.header(of: path)
        #expect(after.owner != 0 && after.epoch != owned.epoch, "the writers went on under a base no process held")

        for writer in writers { kill(writer.process.processIdentifier, SIGKILL) }
        for writer in writers { writer.process.waitUntilExit() }
        let recovered = try await Self.crashAndRecover(path)
        let people = try await Query<DocumentValue>("people").results(in: recovered)
        #expect(people.count == 50 + acknowledged)
        #expect(try await recovered.verify().isClean)
        await recovered.close()
    }

    /// A writer that joins another process's checkpoint counts the file's growth from the checkpoint's base, by the
    /// base's meta page in the log's header, not from when it joined: once the other process's commits have grown
    /// the file past the bound, its first write makes a checkpoint of its own.
    @Test(.ownThreads, .enabled(if: !WriteLog.bootID.isEmpty))
    func aJoinedCheckpointsGrowthCountsFromItsBase() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        // Made, then closed: the other process's first write makes the checkpoint. (This one is open before it
        // writes, so that only a look at the header comes between its last insert and the insert here, well within
        // the second after which it lets the log go.)
        await (try await DocStore(path: path)).close()
        let store = try await DocStore(path: path)
        await store.tuneWriteLog(capacity: nil, growth: 64)
        let (writer, output, input) = try BackupTests.child(["insert-people-on-cue", path, "30"])
        defer { kill(writer.processIdentifier, SIGKILL); writer.waitUntilExit() }
        input.fileHandleForWriting.write(Data(String(repeating: "go\n", count: 29).utf8))
        #expect(BackupTests.wait(for: "inserted 29 ", from: output).contains("inserted 29 "))
        let theirs = try Self.header(of: path)
        #expect(theirs.owner >> 32 == UInt64(writer.processIdentifier), "the other process made no checkpoint")
        try await store.insert(Person(name: "here", age: 1))
        let after = try Self.header(of: path)
        #expect(after.epoch != theirs.epoch, "a write joined a checkpoint the file had outgrown")
        #expect(try await Query<DocumentValue>("people").count(in: store) == 30)
        await store.close()
    }

    /// A commit that fails lets LMDB's writer lock go. A writer of another process that takes it meanwhile, under
    /// the same checkpoint, writes its record where the failed one's was, and commits. The failed write must not
    /// strike that record out when it takes the lock back: after a crash of the machine, the other process's insert
    /// is there.
    @Test(.ownThreads, .enabled(if: !WriteLog.bootID.isEmpty))
    func aFailedCommitLeavesTheRecordAnotherProcessWroteInItsPlace() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        await store.tuneWriteLog(capacity: nil, growth: nil)
        try await store.insert(Person(name: "first", age: 1))
        let (writer, output, input) = try BackupTests.child(["insert-people-on-cue", path, "2"])
        defer { kill(writer.processIdentifier, SIGKILL); writer.waitUntilExit() }
        let epoch = try Self.header(of: path).epoch
        let environment = try #require(store.core.env as? LMDBEnvironment)
        final class Said { var text = "" }
        let said = Said()
        environment.failNextCommit {
            input.fileHandleForWriting.write(Data("go\n".utf8))
            said.text = BackupTests.wait(for: "inserted 1 ", from: output)
        }
        await #expect(throws: (any Error).self) { try await store.insert(Person(name: "failed", age: 2)) }
        #expect(said.text.contains("inserted 1 "), "the other process did not write")
        #expect(try Self.header(of: path).epoch == epoch, "the other process made a checkpoint of its own")
        await store.abandon()
        kill(writer.processIdentifier, SIGKILL)
        writer.waitUntilExit()
        let recovered = try await Self.crashAndRecover(path)
        let names = try await Query<DocumentValue>("people").results(in: recovered).compactMap { person -> String? in
            if case .string(let name)? = person[field: "name"] { return name } else { return nil }
        }
        #expect(names.sorted() == ["child-1", "first"])
        #expect(try await recovered.verify().isClean)
        await recovered.close()
    }

    /// Three processes insert at once, each as fast as it is told to, so that their commits take LMDB's write lock
    /// in no set order and their records interleave in the log; one of them is killed at a random moment, then the
    /// machine crashes. Every insert a process reported is there after recovery, with at most one more from the
    /// process killed while it wrote (committed, not yet reported), and `verify()` is clean.
    @Test(.ownThreads, .enabled(if: !WriteLog.bootID.isEmpty), arguments: [UInt64(1), 2, 3])
    func processesWritingAtOnceWithOneKilledThenACrashLoseNone(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        try await Self.makeStoreOfFiftyPeople(at: path)
        let count = 60
        let writers = try (0..<3).map { _ in try BackupTests.child(["insert-people-on-cue", path, "\(count + 1)"]) }
        defer { for (process, _, _) in writers { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        // Every cue at once: each process inserts as fast as it can.
        for (_, _, input) in writers {
            input.fileHandleForWriting.write(Data(String(repeating: "go\n", count: count).utf8))
        }
        let victim = Int.random(in: 0..<3, using: &random)
        let killAfter = Int.random(in: 1..<count, using: &random)
        var reported = [0, 0, 0]
        for (w, (process, output, _)) in writers.enumerated() {
            let last = w == victim ? killAfter : count
            var said = BackupTests.wait(for: "inserted \(last) ", from: output)
            if w == victim {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                // (What it reported before the kill reached it.)
                said += String(decoding: output.readDataToEndOfFile(), as: UTF8.self)
            }
            reported[w] = said.split(separator: "\n").filter { $0.hasPrefix("inserted ") }.count
            #expect(reported[w] >= last, "writer \(w) reported \(reported[w]) inserts")
        }
        // (Killed while their stores are open, with the log as it is: each waits for one more cue.)
        for (process, _, _) in writers { kill(process.processIdentifier, SIGKILL) }
        for (process, _, _) in writers { process.waitUntilExit() }
        let recovered = try await Self.crashAndRecover(path)
        let stored = try await Query<DocumentValue>("people").count(in: recovered) - 50
        let acknowledged = reported.reduce(0, +)
        #expect(stored >= acknowledged && stored <= acknowledged + 1, "\(stored) stored, \(acknowledged) reported")
        #expect(try await recovered.verify().isClean)
        await recovered.close()
    }

    /// Each single write frees the pages its changes replace, which LMDB cannot reuse until the next checkpoint:
    /// checkpoints come often enough that the file's free pages stay within bounds, however many writes come.
    /// (Bounded by the file's growth alone, every checkpoint added to the free pages, and so to the time until the
    /// next: they grew with the square root of the writes.)
    /// The file's growth is let go unbounded here, so that only the freed pages make checkpoints.
    @Test(.enabled(if: !WriteLog.bootID.isEmpty)) func theFreePagesStayBoundedHoweverManySingleWrites() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        var people = (0..<500).map { Person(name: "p\($0)", age: $0 % 90, city: ["Oslo", "Rome"][$0 % 2],
                                            email: "e\($0)@x", tags: ["t\($0 % 7)"]) }
        try await store.insert(contentsOf: people)
        let freed = 128
        await store.tuneWriteLog(capacity: nil, growth: 1 << 30, freed: freed)
        var random = SeededGenerator(seed: 11)
        var most = 0
        for step in 0..<3_000 {
            if step % 2 == 0 {
                let person = Person(name: "n\(step)", age: step % 90, city: "Lima", email: "n\(step)@x",
                                    tags: ["t\(step % 5)"])
                try await store.insert(person)
                people.append(person)
            } else {
                let index = Int.random(in: 0..<people.count, using: &random)
                people[index].age = Int.random(in: 0..<90, using: &random)
                try await store.save(people[index])
            }
            if step % 100 == 99 { most = max(most, try await store.spaceUsage().freePages) }
        }
        #expect(try Self.header(of: path).owner != 0, "the writes were logged")
        // (The bound is the larger of `freed` and a quarter of the file's pages: about 100 at the end.)
        #expect(most <= 4 * freed, "at most \(most) free pages")
        #expect(try await Person.query().count(in: store) == people.count)
        await store.close()
    }

    /// A change too large for a record (a batch of about 6 MiB) is committed with a sync of the file, and the log is
    /// cleared: a crash of the machine then has nothing to apply, and the file holds the batch. The next small write
    /// takes the log over again.
    @Test func aChangeTooLargeForARecordIsSyncedAndClearsTheLog() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        await store.tuneWriteLog(capacity: nil, growth: nil)
        try await store.insert(Person(name: "small", age: 1))
        #expect(try Self.header(of: path).owner != 0)
        let name = String(repeating: "n", count: 3_000)
        let batch = (0..<2_000).map { Person(name: name + "\($0)", age: $0 % 90) }
        try await store.insert(contentsOf: batch)
        #expect(try Self.header(of: path).owner == 0, "a change too large for a record left the log owned")
        try await store.insert(Person(name: "after", age: 2))
        #expect(try Self.header(of: path).owner != 0)
        await store.close()
        #expect(try Self.header(of: path).owner == 0, "closing left the log owned")
        let reopened = try await DocStore(path: path)
        #expect(try await Person.query().count(in: reopened) == 2_002)
        await reopened.close()
    }

    /// An owner that writes nothing for a while lets the log go (a sync, and the owner cleared), so that its pin
    /// keeps no page from another process's reuse and a crash of the machine leaves nothing to apply.
    @Test func anIdleOwnerLetsTheLogGo() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        await store.tuneWriteLog(capacity: nil, growth: nil, idleAfter: .zero)
        try await store.insert(Person(name: "a", age: 1))
        var waited = 0
        while try Self.header(of: path).owner != 0 && waited < 30_000 {
            try await Task.sleep(for: .milliseconds(20))
            waited += 20
        }
        #expect(try Self.header(of: path).owner == 0, "the log is still owned after \(waited) ms idle")
        try await store.insert(Person(name: "b", age: 2))
        #expect(try await Person.query().count(in: store) == 2)
        await store.close()
    }

    /// Closing an owner of the log after another process grew the map: the write begun to clear the log meets
    /// `MDB_MAP_RESIZED`, adopts the size (closing holds the gate alone already) and clears it.
    @Test func closingAfterAnotherProcessGrewTheMapClearsTheLog() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        var small = DocStore.Options()
        small.initialMapSize = 1 << 20
        let store = try await DocStore(path: path, options: small)
        await store.tuneWriteLog(capacity: nil, growth: nil)
        try await store.insert(Person(name: "owner", age: 1))
        #expect(try Self.header(of: path).owner != 0)
        // The other process opens with a map of 64 MiB, and its commits use pages past this one's.
        let (writer, _, _) = try BackupTests.child(["insert-people", path, "300", "0"])
        writer.waitUntilExit()
        #expect(writer.terminationStatus == 0)
        await store.close()
        #expect(try Self.header(of: path).owner == 0, "closing left the log owned")
        let again = try await DocStore(path: path)
        // (The other process's people share the collection.)
        #expect(try await Query<DocumentValue>("people").count(in: again) == 301)
        await again.close()
    }

    /// A lone writer at full durability commits on its caller's thread while its commit is brief: one write of the
    /// log, no checkpoint (a sync of the file) near. The hint that says so is never true before a write that makes
    /// a checkpoint, and it turns false as the file's growth nears the checkpoint's. Another process's writes go
    /// under this process's checkpoint, after its records: the header stays as it was, and so does the hint.
    @Test(.enabled(if: !WriteLog.bootID.isEmpty)) func aWriteRunsOnItsCallersThreadOnlyWhileItsCommitIsBrief()
        async throws {
        let dir = TemporaryDirectory()
        let (store, file, path) = try await Self.storeWithItsLog(in: dir)
        try await store.insert(Person(name: "first", age: 1))
        var briefs = 0, checkpoints = 0
        for i in 0..<400 {
            let brief = file.nextCommitIsBrief
            let before = try Self.header(of: path).epoch
            try await store.insert(Person(name: "p\(i)", age: i % 90, city: "c\(i % 13)", email: "p\(i)@x",
                                          tags: ["t\(i % 7)"]))
            let made = try Self.header(of: path).epoch != before
            #expect(!(brief && made), "write \(i) made a checkpoint though its commit was said to be brief")
            if brief { briefs += 1 }
            if made { checkpoints += 1 }
        }
        #expect(briefs > 300 && checkpoints > 0, "\(briefs) brief commits, \(checkpoints) checkpoints")
        #expect(store.writesOnCallersThreads.load(ordering: .relaxed) > 0, "no write ran on its caller's thread")
        // Another process's write takes the log over: the next commit here syncs the file to take it back.
        var more = 0
        while !file.nextCommitIsBrief && more < 10 {
            try await store.insert(Person(name: "more \(more)", age: 3))
            more += 1
        }
        #expect(file.nextCommitIsBrief)
        // (Room for the other process's pages before a checkpoint is due.)
        await store.tuneWriteLog(capacity: nil, growth: 1 << 20)
        let epoch = try Self.header(of: path).epoch
        let (writer, _, _) = try BackupTests.child(["insert-people", path, "20", "0"])
        writer.waitUntilExit()
        #expect(writer.terminationStatus == 0)
        #expect(try Self.header(of: path).epoch == epoch, "another process's writes made a checkpoint of their own")
        #expect(file.nextCommitIsBrief)
        try await store.insert(Person(name: "after", age: 2))
        #expect(try Self.header(of: path).epoch == epoch, "the write after another process's made a checkpoint")
        #expect(file.nextCommitIsBrief)
        #expect(try await Query<DocumentValue>("people").include(.compare("name", .equal, .string("after")))
            .count(in: store) == 1)
        await store.close()
    }

    /// A write whose commit would sync the file after all, though it was said to be brief (changes too large for
    /// a record), is refused on its caller's thread before anything is written, and runs on the store's thread:
    /// the log is cleared there, and every document is stored.
    @Test(.enabled(if: !WriteLog.bootID.isEmpty)) func aWriteThatWouldSyncTheFileLeavesItsCallersThread()
        async throws {
        let dir = TemporaryDirectory()
        let (store, file, path) = try await Self.storeWithItsLog(in: dir)
        var small = 0
        while !file.nextCommitIsBrief && small < 10 {
            try await store.insert(Person(name: "small \(small)", age: 1))
            small += 1
        }
        #expect(file.nextCommitIsBrief)
        let before = store.writesOnCallersThreads.load(ordering: .relaxed)
        let name = String(repeating: "n", count: 3_000)
        try await store.insert(contentsOf: (0..<2_000).map { Person(name: name + "\($0)", age: $0 % 90) })
        #expect(store.writesOnCallersThreads.load(ordering: .relaxed) == before,
                "a write that syncs the file ran on its caller's thread")
        #expect(try Self.header(of: path).owner == 0, "a change too large for a record left the log owned")
        #expect(try await Person.query().count(in: store) == 2_000 + small)
        try await store.insert(Person(name: "after", age: 2))
        #expect(store.writesOnCallersThreads.load(ordering: .relaxed) == before, "the write after a sync ran here")
        try await store.insert(Person(name: "after that", age: 2))
        #expect(store.writesOnCallersThreads.load(ordering: .relaxed) == before + 1)
        await store.close()
    }

    /// A store in `dir` at full durability, its log kept while the test pauses; its file engine, and its path.
    static func storeWithItsLog(in dir: TemporaryDirectory) async throws
        -> (DocStore, any FileStorageEngine, String) {
        let path = dir.path("store.db")
        let store = try await DocStore(path: path)
        await store.tuneWriteLog(capacity: nil, growth: nil)
        return (store, try #require(store.core.file), path)
    }

    /// A store at `path` holding 50 people, closed: the log cleared, so that the next writer makes a checkpoint.
    static func makeStoreOfFiftyPeople(at path: String) async throws {
        let store = try await DocStore(path: path)
        try await store.insert(contentsOf: (0..<50).map { Person(name: "early \($0)", age: $0, tags: ["t\($0 % 3)"]) })
        await store.close()
    }

    /// A crash of the machine with the file's pages as its processes left them (``crash(_:checkpoint:reached:random:)``
    /// with all of them reached), then the store opened again: what recovery makes of the log.
    static func crashAndRecover(_ path: String) async throws -> DocStore {
        var random = SeededGenerator(seed: 1)
        try crash(path, checkpoint: [], reached: 1, random: &random)
        return try await DocStore(path: path)
    }

    // MARK: The crash

    static func contents(of path: String) -> [UInt8] {
        (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
    }

    /// Sets each page of the file back to `checkpoint`'s (the file as synced) with probability `1 - reached` (pages
    /// past the checkpoint's end are zeroed instead), in place, and gives the log's header another boot id.
    static func crash(_ path: String, checkpoint: [UInt8], reached: Double,
                      random: inout SeededGenerator) throws {
        let header = try header(of: path)
        let pageSize = header.pageSize
        let latest = contents(of: path)
        var torn = latest
        for page in 0..<(latest.count / pageSize) where Double.random(in: 0..<1, using: &random) >= reached {
            let range = (page * pageSize)..<((page + 1) * pageSize)
            if range.upperBound <= checkpoint.count {
                torn.replaceSubrange(range, with: checkpoint[range])
            } else {
                torn.replaceSubrange(range, with: repeatElement(0, count: pageSize))
            }
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.write(contentsOf: torn)
        try handle.close()
        var changed = header
        changed.bootID = Array("another boot of the machine".utf8)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: path + "-log"))
        try log.seek(toOffset: UInt64(try slot(of: path) * WriteLog.slotSize))
        try log.write(contentsOf: changed.encoded())
        try log.close()
    }

    /// The log's current header, and its slot.
    static func current(of path: String) throws -> (Int, WriteLog.Header) {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path + "-log"))
        defer { try? handle.close() }
        return try #require(WriteLog.current(in: [UInt8](try handle.read(upToCount: 2 * WriteLog.slotSize) ?? Data())))
    }

    static func header(of path: String) throws -> WriteLog.Header { try current(of: path).1 }
    static func slot(of path: String) throws -> Int { try current(of: path).0 }
}

extension DocStore {
    /// Sets the write log's limits (its bytes, and the pages the file may grow by, and the commits free, between
    /// checkpoints), and keeps it while the test pauses.
    func tuneWriteLog(capacity: Int?, growth: Int?, freed: Int? = nil, idleAfter: Duration = .seconds(3_600)) {
        guard let log = (core.env as? LMDBEnvironment)?.log else { return }
        if let capacity { log.capacity = capacity }
        if let growth { log.growthBetweenCheckpoints = growth }
        if let freed { log.freedBetweenCheckpoints = freed }
        log.idleAfter = idleAfter
    }

    /// Leaves the store as the death of its process would: nothing synced, the log as it is.
    func abandon() {
        (core.env as? LMDBEnvironment)?.abandon()
    }
}
