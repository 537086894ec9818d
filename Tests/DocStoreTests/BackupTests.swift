import DocStoreCrashWriter
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import DocStore

/// Online backups and compaction, against real processes where processes matter.
@Suite(.ownThreads) struct BackupTests {
    /// Reads a child's output until `word` appears (or the child ends); blocks its thread, as the crash test does.
    static func wait(for word: String, from output: FileHandle) -> String {
        var text = ""
        let deadline = Date().addingTimeInterval(30)
        while !text.contains(word) {
            // (Read only once there is something to read: a child that says nothing makes the test fail at the
            // deadline rather than hang.)
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { break }
            var ready = pollfd(fd: output.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let polled = poll(&ready, 1, Int32(min(left, 1) * 1_000))
            guard polled > 0 else { continue }
            let data = output.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        return text
    }

    static func child(_ arguments: [String]) throws -> (ChildProcess, FileHandle, Pipe) {
        let process = ChildProcess()
        process.executableURL = CrashSafetyTests.writerURL
        process.arguments = arguments
        let output = Pipe(), input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, output.fileHandleForReading, input)
    }

    /// While a task of this process writes a document into each of two collections per transaction, and another
    /// process inserts people one commit each, backups are taken: each is one commit's state (the two collections
    /// equal), holds the other process's people, opens as a store, and verifies clean. The writers pause between
    /// commits, so as not to take the machine from the suites that run beside this one.
    @Test func aBackupTakenWhileWritersGoOnIsOneCommitsState() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("live.db")
        let store = try await DocStore(path: path, options: CrashRecord.options)
        try await store.write { ctx in
            for name in ["a", "b"] { try ctx.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: name) }
        }
        let (writer, writerOutput, _) = try Self.child(["insert-people", path, "100000", "2"])
        defer { kill(writer.processIdentifier, SIGKILL); writer.waitUntilExit() }
        _ = Self.wait(for: "inserted ", from: writerOutput)
        let failure = Mutex<String?>(nil)
        // Started on the suite's own threads: a plain `Task` would run on the shared pool, which other suites may block.
        let pairs = Task(executorPreference: GrowingThreadPool.shared) {
            var n = 0
            while !Task.isCancelled {
                let k = n
                do {
                    try await store.write { ctx in
                        for name in ["a", "b"] {
                            try ctx.insert(.object([("n", .int(Int64(k))), ("pad", .string(String(repeating: "p", count: 300)))]),
                                           into: name)
                        }
                    }
                } catch {
                    failure.withLock { $0 = "\(error)" }
                    return
                }
                n += 1
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
        defer { pairs.cancel() }
        var written = 0
        for round in 0..<3 {
            // Each round waits for new pairs: on a loaded machine the other process may hold the write lock a while.
            let deadline = Date().addingTimeInterval(30)
            while try await Query<DocumentValue>("a").count(in: store) <= written && Date() < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let now = try await Query<DocumentValue>("a").count(in: store)
            let progressed = now > written
            written = now
            #expect(failure.withLock { $0 } == nil, "the writer of pairs failed: \(failure.withLock { $0 } ?? "")")
            let other = writer.isRunning ? "running" : "ended, status \(writer.terminationStatus)"
            #expect(progressed, "round \(round): the writer of pairs made no progress in 30 s; the other process is \(other)")
            let backup = dir.path("backup-\(round).db")
            try await store.backup(to: backup, compact: round != 1)
            #expect(!FileManager.default.fileExists(atPath: backup + ".incomplete"))
            let copy = try await DocStore(path: backup)
            let a = try await Query<DocumentValue>("a").count(in: copy)
            let b = try await Query<DocumentValue>("b").count(in: copy)
            #expect(a == b, "round \(round): a has \(a) documents and b \(b): not one commit's state")
            #expect(a > 0 || !progressed, "round \(round): the writer had written nothing")
            #expect(try await Query<DocumentValue>("a").include(.compare("n", .less, .int(5))).count(in: copy) == min(a, 5))
            let theirs = try await Query<DocumentValue>("people").count(in: copy)
            #expect(theirs > 0 || !progressed, "round \(round): the other process's people are missing")
            #expect(try await Query<DocumentValue>("people").include(.compare("age", .greaterOrEqual, .int(0))).count(in: copy)
                    == theirs, "round \(round): the people's age index differs from their documents")
            let report = try await copy.verify()
            #expect(report.isClean, "round \(round): \(report)")
            await copy.close()
        }
        pairs.cancel()
        await pairs.value
    }

    @Test func aBackupGoesToAnOpenDescriptorAndRefusesTheStoreItself() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("source.db")
        let store = try await DocStore(path: path)
        try await store.insert(contentsOf: (0..<50).map { Person(name: "p\($0)", age: $0) })
        await expectError(.cannotOpen, mentions: ["own file"]) { try await store.backup(to: path) }
        await expectError(.cannotOpen, mentions: ["directory"]) { try await store.backup(to: dir.path("")) }
        let target = dir.path("by-descriptor.db")
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        try await store.backup(toDescriptor: fd)
        close(fd)
        let copy = try await DocStore(path: target)
        #expect(try await Person.query().count(in: copy) == 50)
        #expect(try await Person.include(#Predicate { $0.age < 10 }).count(in: copy) == 10)
        #expect(try await copy.verify().isClean)
        await store.close()
        await expectError(.closed, mentions: []) { try await store.backup(to: dir.path("late.db")) }
    }

    /// A backup or a dump onto the store's own file, by any name (a symbolic link, a hard link, `..`), or onto its
    /// lock file, is refused, and the store goes on; a backup and a dump elsewhere get the store's permissions.
    @Test func aBackupOrADumpOntoTheStoreByAnyNameIsRefused() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("source.db")
        let store = try await DocStore(path: path)
        try await store.insert(contentsOf: (0..<50).map { Person(name: "p\($0)", age: $0) })
        try FileManager.default.createSymbolicLink(atPath: dir.path("soft.db"), withDestinationPath: path)
        #expect(link(path, dir.path("hard.db")) == 0)
        try FileManager.default.createDirectory(atPath: dir.path("sub"), withIntermediateDirectories: true)
        for name in ["soft.db", "hard.db", "sub/../source.db", "source.db-lock"] {
            await expectError(.cannotOpen, mentions: ["own file"]) { try await store.backup(to: dir.path(name)) }
            await expectError(.cannotOpen, mentions: ["own file"]) { try await store.dump(to: dir.path(name)) }
        }
        #expect(try await Person.query().count(in: store) == 50)
        try await store.insert(Person(name: "after", age: 1))
        #expect(try await store.verify().isClean)
        #expect(chmod(path, 0o600) == 0)
        try await store.backup(to: dir.path("copy.db"))
        try await store.dump(to: dir.path("copy.ndjson"))
        for name in ["copy.db", "copy.ndjson"] {
            let mode = try FileManager.default.attributesOfItem(atPath: dir.path(name))[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(name): \(String(mode ?? 0, radix: 8))")
        }
        await store.close()
        let reopened = try await DocStore(path: path)
        #expect(try await Person.query().count(in: reopened) == 51)
        await reopened.close()
    }

    /// A file left where a backup or a dump writes its partial copy (a dump cut short, or a link someone put there)
    /// is made anew, not written into: the file a link there names keeps what it held, and the copy gets the store's
    /// permissions, a copy with LMDB's own writer (`compact: false`) as much as a rewritten one.
    @Test func aFileLeftWhereACopyIsWrittenIsNotWrittenInto() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("source.db")
        let store = try await DocStore(path: path)
        try await store.insert(contentsOf: (0..<50).map { Person(name: "p\($0)", age: $0) })
        #expect(chmod(path, 0o600) == 0)
        let victim = dir.path("victim.txt")
        for (name, compact) in [("copy.db", false), ("copy.db", true), ("copy.ndjson", false)] {
            try Data("keep".utf8).write(to: URL(fileURLWithPath: victim))
            #expect(chmod(victim, 0o644) == 0)
            unlink(dir.path(name))
            try FileManager.default.createSymbolicLink(atPath: dir.path(name + ".incomplete"), withDestinationPath: victim)
            if name.hasSuffix(".db") {
                try await store.backup(to: dir.path(name), compact: compact)
            } else {
                try await store.dump(to: dir.path(name))
            }
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "keep", "\(name), compact \(compact)")
            let attributes = try FileManager.default.attributesOfItem(atPath: dir.path(name))
            #expect(attributes[.type] as? FileAttributeType == .typeRegular, "\(name), compact \(compact)")
            #expect(attributes[.posixPermissions] as? Int == 0o600, "\(name), compact \(compact)")
        }
        let copy = try await DocStore(path: dir.path("copy.db"))
        #expect(try await Person.query().count(in: copy) == 50)
        #expect(try await copy.verify().isClean)
        await copy.close()
        await store.close()
    }

    /// A backup to a file is written as a compaction is (every key space again, in key order): its pages are full,
    /// where LMDB's copy (what a backup to a descriptor still is) keeps them as random inserts left them. Both hold
    /// every document and index entry, while a writer goes on.
    @Test(arguments: writeModes) func aBackupToAFileHasFullPagesAndEveryDocument(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("source.db"), options: mode.options())
        // Emails in random order split the unique index's pages, over several commits.
        let people = (0..<4_000).map {
            Person(name: "p\($0)", age: $0 % 90, city: ["Oslo", "Lima"][$0 % 2],
                   email: "\(UUID().uuidString)@example.com", tags: ["t\($0 % 5)"])
        }
        for start in stride(from: 0, to: people.count, by: 400) {
            try await store.insert(contentsOf: Array(people[start..<(start + 400)]))
        }
        let writer = Task {
            for i in 0..<200 { try await store.insert(Person(name: "late \(i)", age: i % 90)) }
        }
        let (full, backup, copy) = try await Self.backupAndCopySizes(store, dir, "full")
        try await writer.value
        #expect(Double(backup) < Double(copy) * 0.9, "rewritten \(backup) bytes, copied \(copy)")
        for path in [full, dir.path("full-copied.db")] {
            let copy = try await DocStore(path: path)
            let count = try await Person.query().count(in: copy)
            #expect(count >= people.count && count <= people.count + 200, "\(path): \(count)")
            #expect(try await Person.include(#Predicate { $0.name.starts(with: "p") }).count(in: copy) == people.count)
            let email = people[1_234].email
            #expect(try await Person.include(#Predicate { $0.email == email }).first(in: copy) == people[1_234])
            #expect(try await copy.verify().isClean)
            await copy.close()
        }
        await store.close()
    }

    /// The sizes of the backup to a file and of LMDB's copy to a descriptor, taken one after the other.
    static func backupAndCopySizes(_ store: DocStore, _ dir: TemporaryDirectory, _ name: String) async throws
        -> (full: String, backup: Int, copy: Int) {
        let full = dir.path(name + ".db"), copied = dir.path(name + "-copied.db")
        try await store.backup(to: full)
        let fd = open(copied, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        try await store.backup(toDescriptor: fd)
        close(fd)
        let size = { (path: String) in Int((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? UInt64 ?? 0) }
        return (full, size(full), size(copied))
    }

    /// A backup taken first thing, by a process that has read nothing since it opened the store, after another
    /// process made a collection with an index: the backup still is a rewrite (the key spaces are opened for it),
    /// and holds what the other process made.
    @Test func aBackupFirstThingAfterAnotherProcessMadeACollectionIsARewriteWithIt() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("source.db")
        let people = (0..<3_000).map {
            Person(name: "p\($0)", age: $0 % 90, email: "\(UUID().uuidString)@example.com", tags: ["t\($0 % 5)"])
        }
        do {
            let store = try await DocStore(path: path)
            for start in stride(from: 0, to: people.count, by: 300) {
                try await store.insert(contentsOf: Array(people[start..<(start + 300)]))
            }
            await store.close()
        }
        let store = try await DocStore(path: path)
        let child = try CatalogChild(path: path)
        try child.make("create items 2000 a")
        try child.make("index items by_group group")
        let (full, backup, copy) = try await Self.backupAndCopySizes(store, dir, "first")
        #expect(try child.finish() == 0)
        #expect(Double(backup) < Double(copy) * 0.9, "rewritten \(backup) bytes, copied \(copy)")
        let restored = try await DocStore(path: full)
        #expect(try await Person.query().count(in: restored) == people.count)
        let groups = try await restored.read { ctx in
            let q = Query<DocumentValue>("items").include(.compare("group", .equal, .string("g1")))
            return (try q.count(in: ctx), try q.explain(in: ctx).index)
        }
        #expect(groups.0 == 667 && groups.1 == "by_group", "\(groups)")
        #expect(try await restored.verify().isClean)
        await restored.close()
        await store.close()
    }

    /// Backups while collections are made, by this process and by another one that this process's reads then
    /// open: each new key space is either in a backup whole or not in it, and every backup opens and verifies
    /// clean. (A handle this process opens after a backup's read transaction began is not valid in that
    /// transaction, though the key space was there when it began: the backup must not take it.)
    @Test func backupsWhileCollectionsAreMadeEachHoldWholeCollections() async throws {
        let dir = TemporaryDirectory()
        let store = try await DocStore(path: dir.path("source.db"))
        // Enough documents that a backup takes a while over them, before it comes to the collections made since.
        try await store.insert(contentsOf: (0..<5_000).map { Person(name: "p\($0)", age: $0 % 90) })
        /// The child, used by the thread below alone until it is done.
        struct Handed: @unchecked Sendable { let child: CatalogChild }
        let child = try CatalogChild(path: store.path)
        let handed = Handed(child: child)
        let made = Mutex(0), done = Mutex(false)
        let other = Thread {
            defer { done.withLock { $0 = true } }
            for i in 0..<30 {
                do { try handed.child.make("create other\(i) 20 x") } catch { return }
                made.withLock { $0 += 1 }
            }
        }
        other.start()
        let maker = Task {
            for i in 0..<60 {
                // A new collection of this process's, or a document more in the other's newest (its key spaces
                // opened by this write).
                let newest = made.withLock { $0 } - 1
                try await store.write { ctx in
                    if i % 2 == 0 || newest < 0 {
                        for n in 0..<20 {
                            try ctx.save(.object([.init("id", .int(Int64(n))), .init("n", .int(Int64(n)))]),
                                         into: "made\(i)")
                        }
                    } else {
                        try ctx.save(.object([.init("id", .int(1_000)), .init("n", .int(1_000))]), into: "other\(newest)")
                    }
                }
            }
        }
        for round in 0..<12 {
            let target = dir.path("round\(round).db")
            try await store.backup(to: target)
            let copy = try await DocStore(path: target)
            let counts = try await copy.read { ctx in
                try ctx.collections().map { try Query<DocumentValue>($0.name).count(in: ctx) }
            }
            #expect(counts.allSatisfy { [20, 21, 5_000].contains($0) }, "round \(round): \(counts)")
            #expect(try await copy.verify().isClean, "round \(round)")
            await copy.close()
        }
        try await maker.value
        while !done.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(made.withLock { $0 } == 30, "the other process stopped making collections")
        #expect(try child.finish() == 0)
        await store.close()
    }

    /// Compaction rewrites every key space entry by entry, in key order: each one comes back with all its entries
    /// (keys of one value, a few, dozens and thousands of duplicates, large values too), and pages that random
    /// inserts left partly empty come back full, so the file is smaller than LMDB's compacting copy of it. The
    /// second case commits every 64 KiB, as a large store's compaction does every 64 MiB.
    @Test(arguments: [(1, 64 << 20), (2, 64 << 10)])
    func aCompactionKeepsEveryEntryAndFillsThePages(seed: UInt64, bytesPerCommit: Int) throws {
        let dir = TemporaryDirectory()
        let path = dir.path("rewrite.mdb")
        let configuration = FileStorage.Configuration(initialMapSize: 1 << 26, maximumMapSize: 1 << 28, maxDatabases: 8,
                                                      maxReaders: 8)
        var random = SeededGenerator(seed: seed)
        func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) } }
        do {
            let env = try LMDBEnvironment(path: path, configuration: configuration)
            defer { env.close() }
            try env.write { txn in
                let plain = try txn.openKeySpace("plain", create: true, duplicateSort: false)!
                let sorted = try txn.openKeySpace("sorted", create: true, duplicateSort: true)!
                _ = try txn.openKeySpace("empty", create: true, duplicateSort: false)
                for i in 0..<20_000 {
                    // Keys in random order; now and then a value larger than a page.
                    try txn.put(plain, bytes(Int.random(in: 1...40, using: &random)),
                                bytes(i % 997 == 0 ? 9_000 : Int.random(in: 0...60, using: &random)))
                    // Keys of one value, of about three, of about 60, and one of about 2,900.
                    let key: [UInt8] = switch i % 7 {
                    case 0, 1, 2: [0, UInt8(i >> 8), UInt8(i & 0xFF)]
                    case 3, 4: [1, UInt8(i % 97)]
                    case 5: [2, UInt8(i % 1_000 >> 8), UInt8(i % 1_000 & 0xFF)]
                    default: [3]
                    }
                    try txn.put(sorted, key, bytes(16))
                }
                // Deletes leave holes the rewrite must not carry.
                let doomed: [[UInt8]] = try txn.withCursor(plain) { cursor in
                    var keys: [[UInt8]] = [], seen = 0
                    var entry = try cursor.first()
                    while let (key, _) = entry {
                        if seen % 3 == 0 { keys.append(Array(key)) }
                        seen += 1
                        entry = try cursor.next()
                    }
                    return keys
                }
                for key in doomed { _ = try txn.delete(plain, key) }
            }
        }
        func entries(at path: String) throws -> [String: [[UInt8]]] {
            let env = try LMDBEnvironment(path: path, configuration: configuration)
            defer { env.close() }
            // (A write transaction: it opens the key spaces, which a read beside others does not.)
            return try env.write { txn in
                var all: [String: [[UInt8]]] = [:]
                for (name, duplicates) in [("plain", false), ("sorted", true), ("empty", false)] {
                    let space = try #require(try txn.openKeySpace(name, create: false, duplicateSort: duplicates))
                    all[name] = try txn.withCursor(space) { cursor in
                        var found: [[UInt8]] = []
                        var entry = try cursor.first()
                        while let (key, value) = entry {
                            found.append(Array(key) + [0xFF] + Array(value))
                            entry = try cursor.next()
                        }
                        return found
                    }
                }
                return all
            }
        }
        let before = try entries(at: path)
        #expect(before["plain"]!.count > 10_000 && before["sorted"]!.count == 20_000 && before["empty"]!.isEmpty)
        let copy = dir.path("copy.mdb")
        do {
            let env = try LMDBEnvironment(path: path, configuration: configuration)
            defer { env.close() }
            try env.copy(to: .path(copy, mode: nil), compact: true)
        }
        let (_, after) = try FileStorage.compact(path: path, configuration: configuration,
                                                 bytesPerCommit: bytesPerCommit)
        #expect(try entries(at: path) == before)
        let copied = Int((try FileManager.default.attributesOfItem(atPath: copy))[.size] as! UInt64)
        #expect(Double(after) < Double(copied) * 0.85, "rewritten \(after) bytes, copied \(copied)")
        #expect(LMDBFileCheck.run(path: path).problems.isEmpty)

        // The file keeps its permissions.
        chmod(path, 0o664)   // group write, which the usual umask (022) takes off
        _ = try FileStorage.compact(path: path, configuration: configuration, bytesPerCommit: bytesPerCommit)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o664,
                "mode \(String(info.st_mode & 0o777, radix: 8))")
        #expect(try entries(at: path) == before)

        // An environment whose main database holds a record of its own is not a store: refused, left as it was.
        let foreign = dir.path("foreign.mdb")
        do {
            let env = try LMDBEnvironment(path: foreign, configuration: configuration)
            defer { env.close() }
            try env.write { txn in
                let main = try #require(try txn.openKeySpace(nil, create: false, duplicateSort: false))
                try txn.put(main, Array("settings".utf8), [1, 2, 3])
            }
        }
        let original = try Data(contentsOf: URL(fileURLWithPath: foreign))
        #expect {
            try FileStorage.compact(path: foreign, configuration: configuration)
        } throws: { error in
            guard case StorageError.notAStore(let why) = error else { return false }
            return why.contains("settings")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: foreign)) == original)
        #expect(!FileManager.default.fileExists(atPath: foreign + ".compacting"))
    }

    /// A store with nine documents in ten deleted shrinks when compacted, keeps every remaining document and index
    /// entry, and shows its free pages before.
    @Test func compactingAStoreWithMostDocumentsDeletedShrinksIt() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("shrink.db")
        var kept: [Person] = []
        do {
            let store = try await DocStore(path: path)
            let people = (0..<5_000).map {
                Person(name: "person \($0) " + String(repeating: "n", count: 200), age: $0 % 90, email: "p\($0)@example.com",
                       tags: ["t\($0 % 7)"])
            }
            try await store.insert(contentsOf: people)
            let doomed = people.enumerated().filter { $0.offset % 10 != 0 }.map(\.element.id)
            try await store.write { ctx in for id in doomed { _ = try ctx.delete(Person.self, id: id) } }
            kept = people.enumerated().filter { $0.offset % 10 == 0 }.map(\.element)
            let usage = try await store.spaceUsage()
            #expect(usage.freePages > 0, "\(usage)")
            #expect(usage.reclaimableBytes > usage.fileBytes / 2, "\(usage)")
            await expectError(.alreadyOpen, mentions: ["this process"]) {
                try await DocStore.compact(path: path)
            }
            await store.close()
        }
        let (before, after) = try await DocStore.compact(path: path)
        print("compaction of a store with 90% of its documents deleted: \(before) bytes to \(after)")
        #expect(after < before / 3, "\(before) -> \(after)")
        let store = try await DocStore(path: path)
        let stored = try await Person.query().results(in: store)
        #expect(Set(stored.map(\.id)) == Set(kept.map(\.id)))
        #expect(try await Person.include(#Predicate { $0.tags.contains("t3") }).count(in: store)
                == kept.filter { $0.tags.contains("t3") }.count)
        #expect(try await store.verify().isClean)
        let usage = try await store.spaceUsage()
        #expect(usage.fileBytes == after)
    }

    @Test func compactionRefusesAStoreAnotherProcessHasOpenAndLeavesItAsItWas() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("busy.db")
        do {
            let store = try await DocStore(path: path)
            try await store.insert(Person(name: "kept", age: 1))
            await store.close()
        }
        let (holder, holderOutput, holderInput) = try Self.child(["insert-people-on-cue", path, "1"])
        defer { kill(holder.processIdentifier, SIGKILL); holder.waitUntilExit() }
        holderInput.fileHandleForWriting.write(Data("go\n".utf8))
        _ = Self.wait(for: "inserted 1", from: holderOutput)   // it has the store open, and waits
        let before = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
        await expectError(.alreadyOpen, mentions: ["another process"]) {
            try await DocStore.compact(path: path)
        }
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == before)
        #expect(!FileManager.default.fileExists(atPath: path + ".compacting"))
        await expectError(.cannotOpen, mentions: ["no store"]) {
            try await DocStore.compact(path: dir.path("missing.db"))
        }
    }

    /// Another process opens the store while it is compacted, writes and closes it again: the compaction keeps
    /// nothing of its rewrite, and the write is there. An opening in this process meanwhile is refused.
    @Test func aCompactionThatAnotherProcessWroteDuringKeepsTheWrite() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("written.db")
        let people = (0..<200).map { Person(name: "P\($0)", age: $0 % 90) }
        do {
            let store = try await DocStore(path: path)
            try await store.insert(contentsOf: people)
            await store.close()
        }
        let configuration = FileStorage.Configuration(initialMapSize: 1 << 24, maximumMapSize: 1 << 30, maxDatabases: 64,
                                                      maxReaders: 126)
        var openedHere = false
        do {
            _ = try FileStorage.compact(path: path, configuration: configuration, beforeReplacing: {
                if let engine = try? FileStorage.open(path: path, configuration: configuration) {
                    openedHere = true
                    engine.close()
                }
                let writer = CrashSafetyTests.quietWriter(["insert-people", path, "1", "0"])
                try writer.run()
                writer.waitUntilExit()
                #expect(writer.terminationStatus == 0)
            })
            Issue.record("the compaction replaced a file written meanwhile")
        } catch let error as StorageError {
            #expect("\(error)".contains("wrote to the file meanwhile"), "\(error)")
        }
        #expect(!openedHere, "the file was opened in this process while it was compacted")
        #expect(!FileManager.default.fileExists(atPath: path + ".compacting"))
        let store = try await DocStore(path: path)
        // (The writer's people share the collection.)
        let names = try await Query<DocumentValue>("people").results(in: store).compactMap { $0[field: "name"]?.plainJSON() }
        #expect(names.count == people.count + 1 && names.contains { $0.contains("child-") }, "\(names.count)")
        #expect(try await store.verify().isClean)
        await store.close()
        // With nothing written meanwhile, the same compaction replaces the file.
        let (before, after) = try FileStorage.compact(path: path, configuration: configuration)
        #expect(after > 0 && after <= before)
    }

    /// A store reached through a symbolic link is compacted where the link points: the link stays one, and the
    /// store opens through it with every document.
    @Test func aCompactionThroughASymbolicLinkKeepsTheLink() async throws {
        let dir = TemporaryDirectory()
        let real = dir.path("real.db"), link = dir.path("link.db")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        let people = (0..<300).map { Person(name: "P\($0)", age: $0 % 90) }
        do {
            let store = try await DocStore(path: link)
            try await store.insert(contentsOf: people)
            try await store.write { ctx in for person in people.prefix(200) { _ = try ctx.delete(Person.self, id: person.id) } }
            await store.close()
        }
        let (before, after) = try await DocStore.compact(path: link)
        #expect(after < before)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == real)
        #expect(!FileManager.default.fileExists(atPath: real + ".compacting"))
        let store = try await DocStore(path: link)
        #expect(Set(try await Person.query().results(in: store).map(\.id)) == Set(people.dropFirst(200).map(\.id)))
        #expect(try await store.verify().isClean)
        await store.close()
    }

    /// Closing any descriptor of a file lets go of every `fcntl` lock the process holds on it, and a store's locks
    /// on its lock file are how other processes know it is open (and which of its reads are alive). So nothing this
    /// process does with the open store's lock file by its name (opening it as a store, checking or recovering it,
    /// restoring a dump from it, compacting the open store) may open and close it: after each, another process's
    /// compaction must still find the store open and refuse, and the store keeps what it is given.
    @Test func theLockFileOfAnOpenStoreIsNeverOpenedByName() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("open.db")
        let lock = path + "-lock"
        let store = try await DocStore(path: path)
        try await store.insert(contentsOf: (0..<100).map { Person(name: "p\($0)", age: $0 % 90) })
        let empty = try await DocStore(path: dir.path("empty.db"))
        let attempts: [(String, () async throws -> Void)] = [
            ("checkFile", { _ = DocStore.checkFile(at: lock) }),
            ("open", { _ = try await DocStore(path: lock) }),
            ("restore", { _ = try await empty.restore(from: lock) }),
            ("recover", { _ = try await DocStore.recover(from: lock, to: dir.path("recovered.db")) }),
            ("compact", { _ = try await DocStore.compact(path: path) }),
        ]
        for (name, attempt) in attempts {
            try? await attempt()
            let (process, _, _) = try Self.child(["compact", path])
            process.waitUntilExit()
            #expect(process.terminationStatus != 0, "after \(name), another process compacted the open store")
            try await store.insert(Person(name: "after \(name)", age: 1))
        }
        #expect(!DocStore.checkFile(at: lock).isClean)
        await empty.close()
        await store.close()
        let reopened = try await DocStore(path: path)
        #expect(try await Person.query().count(in: reopened) == 100 + attempts.count)
        #expect(try await reopened.verify().isClean)
        await reopened.close()
    }

    /// A compaction killed at random moments never loses the store: it opens with every document, verifies clean,
    /// and a later compaction completes.
    @Test func aCompactionKilledAtRandomMomentsNeverLosesTheStore() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("killed.db")
        var expected: Set<UUID> = []
        do {
            let store = try await DocStore(path: path)
            let people = (0..<20_000).map { Person(name: "person \($0) " + String(repeating: "q", count: 100), age: $0 % 90) }
            try await store.insert(contentsOf: people)
            let doomed = people.enumerated().filter { $0.offset % 4 != 0 }.map(\.element.id)
            try await store.write { ctx in for id in doomed { _ = try ctx.delete(Person.self, id: id) } }
            expected = Set(people.enumerated().filter { $0.offset % 4 == 0 }.map(\.element.id))
            await store.close()
        }
        var rng = SeededGenerator(seed: 77)
        var completed = 0
        for round in 0..<20 {
            let (process, output, _) = try Self.child(["compact", path])
            _ = Self.wait(for: "compacting", from: output)
            usleep(useconds_t(Int.random(in: 0...40_000, using: &rng)))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if process.terminationReason == .exit, process.terminationStatus == 0 { completed += 1 }
            let store = try await DocStore(path: path)
            let ids = Set(try await Person.query().results(in: store).map(\.id))
            let whole = ids == expected
            #expect(whole, "round \(round): \(ids.count) documents of \(expected.count)")
            #expect(try await Person.include(#Predicate { $0.age == 4 }).count(in: store) > 0, "round \(round)")
            let report = try await store.verify()
            #expect(report.isClean, "round \(round): \(report)")
            await store.close()
        }
        print("compactions killed: \(20 - completed) of 20 were cut short")
        let (_, after) = try await DocStore.compact(path: path)
        #expect(after > 0)
        #expect(!FileManager.default.fileExists(atPath: path + ".compacting"))
    }
}
