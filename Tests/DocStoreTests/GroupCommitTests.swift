import Foundation
import Synchronization
import Testing
import TestSupport
@testable import DocStore

/// Group commit: writes that arrive while a commit runs share the next one, and each stays all or nothing on its
/// own. Every test first holds the store's thread with a slow write, so that the writes started meanwhile queue
/// up and are committed as one group; each checks that they were. The tests' tasks run on threads of their own, so
/// that a pool kept busy by other suites does not leave the held write waiting for writes that never start.
@Suite(.ownThreads) struct GroupCommitTests {
    struct Thrown: Error {}

    /// Holds the store's thread inside a write until every one of `writes` waits on the store's queue, so that they
    /// commit together behind it. Returns each write's outcome, in `writes`' order.
    static func grouped<R: Sendable>(in store: DocStore,
                                     _ writes: [@Sendable (WriteContext) throws -> R]) async -> [Result<R, any Error>] {
        await grouped(in: store, calls: writes.map { body in { try await store.write(body) } })
    }

    /// ``grouped(in:_:)`` for calls that each make one write (an `insert`, a `save`).
    static func grouped<R: Sendable>(in store: DocStore,
                                     calls writes: [@Sendable () async throws -> R]) async -> [Result<R, any Error>] {
        let begun = Counter()
        let held = Task(executorPreference: GrowingThreadPool.shared) {
            try await store.write { _ in
                begun.increment()
                let deadline = Date().addingTimeInterval(60)
                while store.thread.waitingJobs < writes.count && Date() < deadline { usleep(1_000) }
            }
        }
        // The slow write holds the thread (or failed: its error is the test's to see).
        let deadline = Date().addingTimeInterval(60)
        while begun.value == 0 && Date() < deadline { try? await Task.sleep(for: .milliseconds(1)) }
        let outcomes = await withTaskGroup(of: (Int, Result<R, any Error>).self) { group in
            for (i, body) in writes.enumerated() {
                group.addTask {
                    do { return (i, .success(try await body())) } catch { return (i, .failure(error)) }
                }
            }
            var all = [Result<R, any Error>?](repeating: nil, count: writes.count)
            for await (i, outcome) in group { all[i] = outcome }
            return all.map { $0! }
        }
        _ = try? await held.value
        return outcomes
    }

    final class Counter: Sendable {
        private let count = Mutex(0)
        func increment() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    static func code(_ outcome: Result<some Any, any Error>) -> DocStoreError.Code? {
        if case .failure(let error) = outcome { return (error as? DocStoreError)?.code }
        return nil
    }

    /// A batch refused for a value taken by a stored document, or by another of the batch, leaves none of its
    /// documents; the write that caught the error commits the rest.
    @Test(arguments: writeModes) func aRefusedBatchCaughtInAWriteLeavesTheRestOfTheWrite(mode: WriteMode) async throws {
        let (store, dir) = try await makeStore(options: mode.options())
        defer { _ = dir }
        await mode.check(store)
        try await store.insert(Person(name: "Ann", age: 41, email: "ann@example.com"))
        let batches = [
            [Person(name: "Cy", age: 20), Person(name: "Di", age: 22, email: "ann@example.com")],
            [Person(name: "Ed", age: 20, email: "ed@example.com"), Person(name: "Fy", age: 22, email: "ed@example.com")],
        ]
        let caught = try await store.write { ctx -> Int in
            try ctx.insert(Person(name: "Bo", age: 30))
            var caught = 0
            for batch in batches {
                do { try ctx.insert(contentsOf: batch) } catch let error as DocStoreError where error.code == .uniqueViolation {
                    caught += 1
                }
            }
            return caught
        }
        #expect(caught == 2)
        #expect(Set(try await store.read { try Person.query().results(in: $0) }.map(\.name)) == ["Ann", "Bo"])
        #expect(try await store.read { try Person.query().count(in: $0) } == 2)
    }

    @Test(arguments: writeModes) func aFailingWriteInAGroupFailsAloneAndLeavesNoTrace(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "group.db"), options: mode.options())
        await mode.check(store)
        try await store.insert(Person(name: "taken", age: 1, email: "taken@example.com"))
        let ids = (0..<12).map { _ in UUID() }
        // Every third write fails after it has written something: a thrown error, a unique conflict, or a
        // duplicate id; the others each insert two people.
        let writes: [@Sendable (WriteContext) throws -> Int] = ids.enumerated().map { i, id in
            { ctx in
                try ctx.insert(Person(id: id, name: "first-\(i)", age: 100 + i))
                switch i % 6 {
                case 2: throw Thrown()
                case 5: try ctx.insert(Person(name: "second-\(i)", age: i, email: "taken@example.com"))
                default: try ctx.insert(Person(name: "second-\(i)", age: i, email: "\(i)@example.com"))
                }
                return i
            }
        }
        let outcomes = await Self.grouped(in: store, writes)
        let largest = await store.largestGroup
        #expect(largest >= 6, "the writes were not grouped: \(largest)")
        var expected: Set<String> = ["taken"]
        for (i, outcome) in outcomes.enumerated() {
            switch i % 6 {
            case 2:
                guard case .failure(let error) = outcome else { Issue.record("write \(i) should have thrown"); continue }
                #expect(error is Thrown, "write \(i): \(error)")
            case 5:
                #expect(Self.code(outcome) == .uniqueViolation, "write \(i): \(outcome)")
            default:
                #expect((try? outcome.get()) == i, "write \(i): \(outcome)")
                expected.formUnion(["first-\(i)", "second-\(i)"])
            }
        }
        let names = Set(try await Person.query().results(in: store).map(\.name))
        #expect(names == expected)
        // The indexes hold exactly the documents kept.
        #expect(try await Person.include(#Predicate { $0.age >= 100 }).count(in: store)
                == expected.filter { $0.hasPrefix("first-") }.count)
        #expect(try await store.verify().isClean)
    }

    /// Writes of a group that change and delete stored documents, and then throw or meet a unique conflict, leave
    /// every document and index entry they touched as it was; the changes of the writes that return stay.
    @Test(arguments: writeModes)
    func aFailingWriteThatChangedAndDeletedDocumentsLeavesThemAsTheyWere(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "changes.db"), options: mode.options())
        await mode.check(store)
        let keeper = Person(name: "keeper", age: 1, email: "keeper@example.com")
        let people = (0..<24).map {
            Person(name: "p\($0)", age: $0 + 10, city: "c\($0 % 3)", email: "p\($0)@example.com", tags: ["t\($0 % 4)", "all"])
        }
        try await store.insert(contentsOf: people + [keeper])
        // Write i changes person 2i (every indexed field), deletes person 2i + 1 and inserts a newcomer; every fourth
        // newcomer takes the keeper's email (a unique conflict), and every third write then throws.
        let newcomers = (0..<12).map { i in
            Person(name: "n\(i)", age: 200 + i, email: i % 4 == 3 ? keeper.email : "n\(i)@example.com", tags: ["new"])
        }
        let changed = (0..<12).map { i in
            var person = people[2 * i]
            (person.age, person.city, person.email, person.tags) = (person.age + 100, "moved", "new\(i)@example.com", ["x"])
            return person
        }
        let writes: [@Sendable (WriteContext) throws -> Int] = (0..<12).map { i in
            { ctx in
                try ctx.save(changed[i])
                _ = try ctx.delete(Person.self, id: people[2 * i + 1].id)
                try ctx.insert(newcomers[i])
                if i % 3 == 1 { throw Thrown() }
                return i
            }
        }
        let outcomes = await Self.grouped(in: store, writes)
        let largest = await store.largestGroup
        #expect(largest >= 6, "the writes were not grouped: \(largest)")
        var expected = Dictionary(uniqueKeysWithValues: (people + [keeper]).map { ($0.id, $0) })
        for i in 0..<12 {
            if i % 4 == 3 {
                #expect(Self.code(outcomes[i]) == .uniqueViolation, "write \(i): \(outcomes[i])")
            } else if i % 3 == 1 {
                #expect(outcomes[i].failureIsThrown, "write \(i): \(outcomes[i])")
            } else {
                #expect((try? outcomes[i].get()) == i, "write \(i): \(outcomes[i])")
                expected[changed[i].id] = changed[i]
                expected[people[2 * i + 1].id] = nil
                expected[newcomers[i].id] = newcomers[i]
            }
        }
        let stored = try await Person.query().results(in: store)
        #expect(Dictionary(uniqueKeysWithValues: stored.map { ($0.id, $0) }) == expected)
        // Every index answers as the documents do.
        for person in expected.values {
            let email = person.email ?? ""
            #expect(try await Person.include(#Predicate { $0.email == email }).first(in: store) == person)
        }
        for i in 0..<12 where expected[changed[i].id] != changed[i] {
            let email = "new\(i)@example.com"
            #expect(try await Person.include(#Predicate { $0.email == email }).count(in: store) == 0)
        }
        #expect(try await Person.include(#Predicate { $0.age >= 100 && $0.age < 200 }).count(in: store)
                == expected.values.filter { $0.age >= 100 && $0.age < 200 }.count)
        #expect(try await Person.include(#Predicate { $0.city == "moved" }).count(in: store)
                == expected.values.filter { $0.city == "moved" }.count)
        #expect(try await Person.include(#Predicate { $0.tags.contains("all") }).count(in: store)
                == expected.values.filter { $0.tags.contains("all") }.count)
        #expect(try await store.verify().isClean)
    }

    /// A file's map only: a server has none to fill.
    @Test(.enabled(if: !engineIsServer), arguments: writeModes)
    func aWriteTooLargeForTheMapFailsAloneInItsGroup(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        var options = mode.options()
        options.initialMapSize = 1 << 20
        options.maximumMapSize = 4 << 20
        let store = try await openStore(storeLocation(dir, "full.db"), options: options)
        let huge = String(repeating: "x", count: 6 << 20)
        let writes: [@Sendable (WriteContext) throws -> Int] = (0..<8).map { i in
            { ctx in
                try ctx.insert(Person(name: i == 3 ? huge : "small-\(i)", age: i))
                return i
            }
        }
        let outcomes = await Self.grouped(in: store, writes)
        for (i, outcome) in outcomes.enumerated() {
            if i == 3 {
                #expect(Self.code(outcome) == .storeFull, "write \(i): \(outcome)")
            } else {
                #expect((try? outcome.get()) == i, "write \(i): \(outcome)")
            }
        }
        let names = Set(try await Person.query().results(in: store).map(\.name))
        #expect(names == Set((0..<8).filter { $0 != 3 }.map { "small-\($0)" }))
        let report = try await store.verify()
        #expect(report.isClean, "\(report)")
    }

    /// Inserts that commit together, some taking a unique value or an id that another of the group took first:
    /// what the group reads ahead for their checks (at once, on a server) is read again once a write of the group
    /// has changed it, so that exactly one of each clash commits.
    @Test func insertsOfOneGroupSeeTheValuesAndIDsTheOthersTook() async throws {
        let (store, dir) = try await makeStore()
        defer { _ = dir }
        // (The collection is open: its checks are read ahead.)
        let first = Person(name: "first", age: 1, email: "first@example.com")
        try await store.insert(first)
        let shared = UUID()
        // The 13th takes the id of one stored before, the 14th its email: refused as the others' conflicts are
        // (on an engine that takes an insert's checks as free, the group then runs again, reading them).
        var people = (0..<12).map { i in
            Person(id: i == 3 || i == 7 ? shared : UUID(), name: "p\(i)", age: i,
                   email: i % 4 == 1 ? "same@example.com" : "p\(i)@example.com")
        }
        people.append(Person(id: first.id, name: "p12", age: 12))
        people.append(Person(name: "p13", age: 13, email: first.email))
        let outcomes = await Self.grouped(in: store, calls: people.map { person in { try await store.insert(person) } })
        let largest = await store.largestGroup
        #expect(largest >= 8, "the writes were not grouped: \(largest)")
        let committed = Set(outcomes.indices.filter { (try? outcomes[$0].get()) != nil })
        #expect(committed.intersection([1, 5, 9]).count == 1, "\(outcomes)")
        #expect(committed.intersection([3, 7]).count == 1, "\(outcomes)")
        #expect(committed.isSuperset(of: [0, 2, 4, 6, 8, 10, 11]), "\(outcomes)")
        #expect(committed.isDisjoint(with: [12, 13]), "\(outcomes)")
        for i in Set(0..<14).subtracting(committed) {
            #expect([.uniqueViolation, .duplicateID].contains(Self.code(outcomes[i])), "\(outcomes[i])")
        }
        #expect(Self.code(outcomes[12]) == .duplicateID && Self.code(outcomes[13]) == .uniqueViolation, "\(outcomes)")
        let names = Set(try await Person.query().results(in: store).map(\.name))
        #expect(names == Set(committed.map { "p\($0)" } + ["first"]))
        #expect(try await store.verify().isClean)
    }

    @Test(arguments: writeModes) func aGroupThatOutgrowsTheMapGrowsItAndCommitsEveryWrite(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        var options = mode.options()
        options.initialMapSize = 256 << 10
        let store = try await openStore(storeLocation(dir, "grow.db"), options: options)
        let writes: [@Sendable (WriteContext) throws -> Int] = (0..<16).map { i in
            { ctx in
                for j in 0..<40 {
                    try ctx.insert(Person(name: "p-\(i)-\(j)-" + String(repeating: "y", count: 500), age: j,
                                          tags: ["t\(i)"]))
                }
                return i
            }
        }
        let outcomes = await Self.grouped(in: store, writes)
        let largest = await store.largestGroup
        #expect(largest >= 8, "the writes were not grouped: \(largest)")
        for (i, outcome) in outcomes.enumerated() { #expect((try? outcome.get()) == i, "write \(i): \(outcome)") }
        #expect(try await Person.query().count(in: store) == 16 * 40)
        #expect(try await Person.include(#Predicate { $0.tags.contains("t7") }).count(in: store) == 40)
        #expect(try await store.verify().isClean)
    }

    /// A collection first opened by a write of a group, when a later write of the group makes the map grow: the
    /// group's transaction is run again, and the collection's database, opened in the transaction that was undone,
    /// must be opened again rather than used closed.
    @Test(arguments: writeModes) func aCollectionOpenedInAGroupThatRunsAgainIsOpenedAgain(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let path = storeLocation(dir, "reopen.db")
        var options = mode.options()
        options.initialMapSize = 256 << 10
        do {
            let first = try await openStore(path, options: options)
            for name in ["x", "y"] {
                try await first.write { try $0.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: name) }
            }
            await first.close()
        }
        let store = try await openStore(path, options: options)   // no collection open yet
        let big = String(repeating: "z", count: 600 << 10)
        let writes: [@Sendable (WriteContext) throws -> Int] = (0..<8).map { i in
            { ctx in
                if i == 4 { try ctx.insert(.object([("n", .int(-1)), ("blob", .string(big))]), into: "y") }
                try ctx.insert(.object([("n", .int(Int64(i)))]), into: "x")
                return i
            }
        }
        let outcomes = await Self.grouped(in: store, writes)
        let largest = await store.largestGroup
        #expect(largest >= 4, "the writes were not grouped: \(largest)")
        for (i, outcome) in outcomes.enumerated() { #expect((try? outcome.get()) == i, "write \(i): \(outcome)") }
        #expect(try await Query<DocumentValue>("x").count(in: store) == 8)
        #expect(try await Query<DocumentValue>("x").include(.compare("n", .less, .int(3))).count(in: store) == 3)
        #expect(try await Query<DocumentValue>("y").count(in: store) == 1)
        #expect(try await store.verify().isClean)
    }

    @Test(arguments: writeModes) func catalogChangesInAGroupAreKeptOrUndoneWithTheirWrite(mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "catalog.db"), options: mode.options())
        await mode.check(store)
        // Each write makes a collection of its own with an index, fills it, and half of them then throw.
        let writes: [@Sendable (WriteContext) throws -> Int] = (0..<10).map { i in
            { ctx in
                try ctx.createIndex(IndexDefinition(name: "n", kind: .regular, fields: ["n"]), in: "c\(i)")
                for n in 0..<5 { try ctx.insert(.object([("n", .int(Int64(n)))]), into: "c\(i)") }
                if i % 2 == 1 { throw Thrown() }
                return i
            }
        }
        let outcomes = await Self.grouped(in: store, writes)
        let largest = await store.largestGroup
        #expect(largest >= 5, "the writes were not grouped: \(largest)")
        let names = Set(try await store.collections().map(\.name))
        for i in 0..<10 {
            if i % 2 == 1 {
                #expect(outcomes[i].failureIsThrown, "write \(i)")
                #expect(!names.contains("c\(i)"), "collection c\(i) of a failed write exists")
            } else {
                #expect((try? outcomes[i].get()) == i)
                #expect(names.contains("c\(i)"))
                let ones = try await Query<DocumentValue>("c\(i)").include(.compare("n", .equal, .int(1))).count(in: store)
                #expect(ones == 1)
            }
        }
        // The collections opened in the group serve later writes and reads.
        try await store.write { try $0.insert(.object([("n", .int(9))]), into: "c0") }
        #expect(try await Query<DocumentValue>("c0").count(in: store) == 6)
        #expect(try await store.verify().isClean)
    }

    /// A write whose caller is cancelled while it waits in a group stops its scan as it would alone, and is undone
    /// alone: its neighbour commits.
    @Test func aCancelledCallersWriteInAGroupStopsAsItWouldAlone() async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "cancel.db"))
        try await store.write { ctx in
            for n in 0..<20_000 { try ctx.insert(.object([("x", .int(Int64(n)))]), into: "many") }
        }
        let released = Counter(), begun = Counter()
        let held = Task(executorPreference: GrowingThreadPool.shared) {
            try await store.write { _ in
                begun.increment()
                let deadline = Date().addingTimeInterval(60)
                while released.value == 0 && Date() < deadline { usleep(1_000) }
            }
        }
        while begun.value == 0 { try await Task.sleep(for: .milliseconds(1)) }
        let doomed = Task(executorPreference: GrowingThreadPool.shared) {
            try await Query<DocumentValue>("many").include(.compare("x", .greater, .int(-1))).delete(in: store)
        }
        let neighbour = Task(executorPreference: GrowingThreadPool.shared) {
            try await store.write { try $0.insert(.object([("x", .int(-5))]), into: "other") }
        }
        let deadline = Date().addingTimeInterval(60)
        while store.thread.waitingJobs < 2 && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
        doomed.cancel()
        released.increment()
        _ = try await held.value
        await #expect(throws: CancellationError.self) { _ = try await doomed.value }
        try await neighbour.value
        let largest = await store.largestGroup
        #expect(largest >= 2, "the writes were not grouped: \(largest)")
        #expect(try await Query<DocumentValue>("many").count(in: store) == 20_000)
        #expect(try await Query<DocumentValue>("other").count(in: store) == 1)
    }

    /// Each task increments its own counter and appends the value it saw: the writes of one task commit in the
    /// order they were made, and each sees the one before, across many groups.
    @Test func writesOfOneTaskCommitInTheOrderTheyWereMade() async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "order.db"))
        let tasks = 8, steps = 40
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                group.addTask {
                    for step in 0..<steps {
                        let seen = try await store.write { ctx -> Int in
                            let key = "counter-\(t)"
                            let current = try Query<DocumentValue>("counters").include(.compare("key", .equal, .string(key)))
                                .first(in: ctx)
                            var log: [DocumentValue] = []
                            if case .array(let items)? = current?[field: "log"] { log = items }
                            let next = log.count
                            log.append(.int(Int64(step)))
                            try ctx.save(.object([("id", .string(key)), ("key", .string(key)), ("log", .array(log))]),
                                         into: "counters")
                            return next
                        }
                        #expect(seen == step, "task \(t): write \(step) saw \(seen) earlier writes")
                    }
                }
            }
            try await group.waitForAll()
        }
        let largest = await store.largestGroup
        #expect(largest >= 2, "no two writes shared a commit")
        for t in 0..<tasks {
            let doc = try await Query<DocumentValue>("counters").include(.compare("key", .equal, .string("counter-\(t)")))
                .first(in: store)
            #expect(doc?[field: "log"] == .array((0..<steps).map { .int(Int64($0)) }))
        }
    }

    /// Random writers, some of which fail, against a model built from what each write was told.
    @Test(arguments: engineSeeds(randomSeeds(from: "GROUP_SEEDS", otherwise: [11, 12, 13])), writeModes)
    func concurrentWritesLeaveExactlyWhatTheyWereToldCommitted(seed: UInt64, mode: WriteMode) async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "random.db"), options: mode.options())
        await mode.check(store)
        var rng = SeededGenerator(seed: seed)
        // Each write inserts 1-3 people with codes from a small pool (so unique conflicts happen), and may throw.
        struct Plan: Sendable { var people: [Person]; var throwsAtEnd: Bool }
        let plans: [Plan] = (0..<48).map { w in
            Plan(people: (0..<Int.random(in: 1...3, using: &rng)).map { k in
                Person(name: "w\(w)-\(k)", age: Int.random(in: 0..<100, using: &rng),
                       email: Bool.random(using: &rng) ? "code-\(Int.random(in: 0..<30, using: &rng))" : nil)
            }, throwsAtEnd: Int.random(in: 0..<5, using: &rng) == 0)
        }
        // Queued behind a held write, so that they commit in groups however busy the machine is.
        let outcomes = await Self.grouped(in: store, plans.enumerated().map { w, plan in
            { @Sendable ctx in
                for person in plan.people { try ctx.insert(person) }
                if plan.throwsAtEnd { throw Thrown() }
                return w
            }
        })
        var expected: [UUID: Person] = [:]
        for (w, plan) in plans.enumerated() {
            switch outcomes[w] {
            case .success(let value):
                #expect(value == w)
                for person in plan.people { expected[person.id] = person }
            case .failure(let error):
                // A write that would throw at its end may meet a unique conflict first.
                let conflict = (error as? DocStoreError)?.code == .uniqueViolation
                #expect(conflict || (plan.throwsAtEnd && error is Thrown), "write \(w): \(error)")
            }
        }
        let largest = await store.largestGroup
        #expect(largest >= 2, "no two writes shared a commit")
        let stored = Dictionary(uniqueKeysWithValues: try await Person.query().results(in: store).map { ($0.id, $0) })
        var wrong: [String] = []
        for id in Set(stored.keys).union(expected.keys) where stored[id] != expected[id] {
            wrong.append((stored[id] ?? expected[id])?.name ?? "?")
        }
        #expect(wrong.isEmpty, "seed \(seed): stored and committed differ for \(wrong.sorted())")
        // A write refused for a unique conflict met a code that a write told it committed holds.
        let held = Set(expected.values.compactMap(\.email))
        for (w, plan) in plans.enumerated() {
            if case .failure(let error) = outcomes[w], !(error is Thrown) {
                let codes = plan.people.compactMap(\.email)
                #expect(codes.contains { held.contains($0) } || Set(codes).count < codes.count,
                        "write \(w) was refused, but none of its codes is held")
            }
        }
        #expect(try await store.verify().isClean)
    }
}

extension GroupCommitTests {
    /// After a group of several, a write that finds the store's thread idle does not commit alone at once where
    /// commits wait: it queues as the first of the next group, which waits a moment for the writers the last group
    /// resumed. A group of one ends that, and a store whose commits do not wait never does it.
    @Test func aWriteAfterAGroupOfSeveralWaitsForTheNextGroup() async throws {
        let dir = TemporaryDirectory()
        let store = try await openStore(storeLocation(dir, "next.db"))
        #expect(store.commitsWait)
        #expect(await store.commitsAtOnce, "a first write waits for a group")
        await store.settingLastGroupSize(4)
        #expect(await !store.commitsAtOnce, "a write after a group of four commits alone")
        try await store.insert(Person(name: "after", age: 1))
        #expect(await store.lastGroupSize == 1)
        #expect(await store.commitsAtOnce, "a write after a group of one waits for a group")
        #expect(try await Person.query().count(in: store) == 1)

        // (On a server every commit is a round trip, and waits, whatever the durability.)
        guard !engineIsServer else { return }
        var options = DocStore.Options()
        options.durability = .off
        let unsynced = try await openStore(storeLocation(dir, "off.db"), options: options)
        await unsynced.settingLastGroupSize(4)
        #expect(await unsynced.commitsAtOnce, "a store whose commits do not wait held a write back")
    }
}

extension DocStore {
    func settingLastGroupSize(_ size: Int) { lastGroupSize = size }
}

extension Result {
    var failureIsThrown: Bool {
        if case .failure(let error) = self { return error is GroupCommitTests.Thrown }
        return false
    }
}
