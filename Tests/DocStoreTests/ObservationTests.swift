import DocStoreCrashWriter
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import DocStore

// Observed queries and documents: the first value at once, then one value for each commit that changes the
// answer and none for a commit that leaves it equal; a slow consumer gets the latest answer, never a backlog;
// commits of another process are noticed; cancelling or closing ends the observation and releases what it held.

// MARK: Helpers

/// How long a test waits for something that should come within a fraction of a second. A passing test never waits
/// this long; the margin is for a loaded machine. (Tests that block their thread, waiting for a child process or a
/// pipe, run on threads of their own: on the shared pool, two of them once stopped every observation for two
/// minutes.)
private let patience: Duration = .seconds(120)

/// A wait that ran out: the test stops instead of hanging.
private struct ObservationTimeout: Error, CustomStringConvertible {
    var description: String
}

/// Waits until `condition` holds, checking every few milliseconds; after `limit`, records an issue that names
/// `what` and throws.
private func eventually(
    within limit: Duration = patience,
    _ what: @autoclosure () -> String,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while try !condition() {
        guard ContinuousClock.now < deadline else {
            let message = "waited \(limit) for \(what())"
            Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
            throw ObservationTimeout(description: message)
        }
        try await Task.sleep(for: .milliseconds(2))
    }
}

/// Consumes an observation in a task of its own and keeps what it delivered, so a test can read the values at its
/// own pace, wait for one with a time limit, and check that none came.
private final class ObservationRecorder<Value: Sendable>: Sendable {
    private struct State {
        var values: [(value: Value, at: ContinuousClock.Instant)] = []
        var read = 0
        var ended = false
        var error: (any Error)?
    }

    private let state = Mutex(State())
    private let consumer = Mutex<Task<Void, Never>?>(nil)

    /// Starts consuming `stream`. With `pause`, the consumer sleeps that long after each value, like a slow
    /// renderer. The consumer runs on threads of its own: when a value came is when the store delivered it, not when
    /// Swift's shared pool, which the suites running beside this one keep busy, had a thread free.
    init(_ stream: AsyncThrowingStream<Value, Error>, pause: Duration? = nil) {
        let task = Task(executorPreference: GrowingThreadPool.shared) { await self.consume(stream, pause: pause) }
        consumer.withLock { $0 = task }
    }

    private func consume(_ stream: AsyncThrowingStream<Value, Error>, pause: Duration?) async {
        do {
            for try await value in stream {
                let now = ContinuousClock.now
                state.withLock { $0.values.append((value, now)) }
                if let pause { try? await Task.sleep(for: pause) }
            }
            state.withLock { $0.ended = true }
        } catch {
            state.withLock { $0.ended = true; $0.error = error }
        }
    }

    /// Every value delivered so far.
    var values: [Value] { state.withLock { $0.values.map(\.value) } }

    /// Every value delivered so far, with when it came.
    var timedValues: [(value: Value, at: ContinuousClock.Instant)] { state.withLock { $0.values } }

    /// The values delivered and not yet taken by ``next(within:sourceLocation:)``.
    var unread: [Value] { state.withLock { Array($0.values[$0.read...].map(\.value)) } }

    /// Whether the stream has ended, and the error it ended with.
    var ending: (ended: Bool, error: (any Error)?) { state.withLock { ($0.ended, $0.error) } }

    /// The next value not yet taken, waiting for it up to `limit`.
    func next(within limit: Duration = patience, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> Value {
        try await eventually(within: limit, "the next value", sourceLocation: sourceLocation) {
            state.withLock { $0.read < $0.values.count || $0.ended }
        }
        let taken = state.withLock { state -> Value? in
            guard state.read < state.values.count else { return nil }
            state.read += 1
            return state.values[state.read - 1].value
        }
        guard let taken else {
            let message = "the observation ended (\(ending.error.map { "\($0)" } ?? "no error")) instead of sending a value"
            Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
            throw ObservationTimeout(description: message)
        }
        return taken
    }

    /// Waits `quiet` and expects that no value came meanwhile.
    func expectNothingNew(for quiet: Duration = .milliseconds(300), sourceLocation: SourceLocation = #_sourceLocation)
        async throws {
        try await Task.sleep(for: quiet)
        let unread = self.unread
        #expect(unread.isEmpty, "no value was expected, but came: \(unread)", sourceLocation: sourceLocation)
    }

    /// Waits until the delivered values satisfy `condition`; they then count as taken.
    func waitUntil(
        within limit: Duration = patience,
        _ what: @autoclosure () -> String,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: ([Value]) -> Bool
    ) async throws {
        try await eventually(within: limit, "\(what()); the last values so far: \(values.suffix(5))",
                             sourceLocation: sourceLocation) {
            state.withLock { state in
                guard condition(state.values.map(\.value)) else { return false }
                state.read = state.values.count
                return true
            }
        }
    }

    /// Waits until the stream ends, and returns the error it ended with.
    func waitForEnd(within limit: Duration = patience, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> (any Error)? {
        try await eventually(within: limit, "the observation to end", sourceLocation: sourceLocation) { ending.ended }
        return ending.error
    }

    /// Cancels the consuming task.
    func cancel() { consumer.withLock { $0?.cancel() } }
}

/// An ``ObservedDocument`` of a ``Person`` as a value tests compare.
private enum SeenPerson: Equatable, CustomStringConvertible {
    case existing(Person)
    case gone(last: Person)
    case missing

    init(_ observed: ObservedDocument<Person>) {
        switch observed {
        case .existing(let p): self = .existing(p)
        case .gone(let last): self = .gone(last: last)
        case .missing: self = .missing
        }
    }

    var description: String {
        switch self {
        case .existing(let p): "existing(\(p.name), \(p.age), \(p.city))"
        case .gone(let p): "gone(last: \(p.name), \(p.age), \(p.city))"
        case .missing: "missing"
        }
    }
}

/// The names of people, for readable failures.
private func names(_ people: [Person]) -> [String] { people.map(\.name) }

/// The names of untyped documents.
private func names(_ documents: [DocumentValue]) -> [String] {
    documents.map { $0[field: "name"].map { value in
        if case .string(let s) = value { return s }
        return "\(value)"
    } ?? "?" }
}

/// A document of another collection: a write of it leaves every query on `people` as it was.
private func pet(_ name: String) -> DocumentValue {
    .object([("id", .string(name)), ("name", .string(name)), ("kind", .string("dog"))])
}

private let adultsByName = Person.include(#Predicate { $0.age >= 18 }).sortBy(\.name)

// MARK: Tests

// Observers hold the store only while they read: a test keeps its store alive while it observes.

@Suite struct ObservationTests {
    /// The child process built beside this test binary.
    static var writerURL: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("DocStoreCrashWriter")
    }

    /// Runs the child writer's `insert-people` mode on the store at `path` and waits for it to exit (up to a
    /// minute). Returns its exit status, when it exited, and what it printed.
    static func runChildInserting(_ inserts: Int, pauseMilliseconds pause: Int, into path: String) async throws
        -> (status: Int32, exited: ContinuousClock.Instant, printed: String, complaint: String) {
        let process = ChildProcess()
        process.executableURL = writerURL
        process.arguments = ["insert-people", path, "\(inserts)", "\(pause)"]
        let output = Pipe()
        process.standardOutput = output
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        try await eventually(within: .seconds(60), "the child writer to exit") { !process.isRunning }
        let exited = ContinuousClock.now
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let complaint = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, exited, printed, complaint)
    }

    // MARK: Exact sequences

    @Test func resultsComeAtOnceThenOncePerCommitThatChangesThemAndNeverForCommitsThatLeaveThemEqual() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        var ann = Person(name: "Ann", age: 30)
        var cid = Person(name: "Cid", age: 10)
        try await store.insert(contentsOf: [ann, cid])

        let recorder = ObservationRecorder(adultsByName.observe(in: store))
        defer { recorder.cancel() }
        var expected: [[Person]] = []
        func expectNext(_ people: [Person], sourceLocation: SourceLocation = #_sourceLocation) async throws {
            expected.append(people)
            let value = try await recorder.next(sourceLocation: sourceLocation)
            #expect(value == people, "got \(names(value)), expected \(names(people))", sourceLocation: sourceLocation)
        }

        // The first value, before any commit.
        try await expectNext([ann])

        var bob = Person(name: "Bob", age: 40)
        try await store.insert(bob)
        try await expectNext([ann, bob])

        // A write to another collection, and a child the query leaves out: nothing. The next relevant commit
        // brings its own result, not a repeat of the last one.
        try await store.write { try $0.insert(pet("Rex"), into: "pets") }
        let dan = Person(name: "Dan", age: 10)
        try await store.insert(dan)
        try await recorder.expectNothingNew()
        let ada = Person(name: "Ada", age: 20)
        try await store.insert(ada)
        try await expectNext([ada, ann, bob])

        // A change to a returned document that keeps its place.
        bob.city = "Tromsø"
        try await store.save(bob)
        try await expectNext([ada, ann, bob])

        // A document saved unchanged, and a child who stays a child: nothing.
        try await store.save(ann)
        cid.age = 11
        try await store.save(cid)
        try await recorder.expectNothingNew()
        // The child comes of age.
        cid.age = 18
        try await store.save(cid)
        try await expectNext([ada, ann, bob, cid])

        // A rename that moves a document in the order.
        ann.name = "Zoe"
        try await store.save(ann)
        try await expectNext([ada, bob, cid, ann])

        // A transaction that inserts an adult and deletes it again leaves the results equal: nothing.
        try await store.write { ctx in
            let eve = Person(name: "Eve", age: 50)
            try ctx.insert(eve)
            try ctx.delete(Person.self, id: eve.id)
        }
        // A transaction with several changes: one value.
        bob.age = 17
        try await store.write { [bob, ada] ctx in
            try ctx.delete(Person.self, id: ada.id)
            try ctx.save(bob)
        }
        try await expectNext([cid, ann])

        // Deleting a child, then writing to another collection: nothing.
        try await store.delete(Person.self, id: dan.id)
        try await store.write { try $0.save(pet("Rex"), into: "pets") }
        try await recorder.expectNothingNew()
        try await store.delete(Person.self, id: cid.id)
        try await expectNext([ann])

        try await recorder.expectNothingNew()
        let delivered = recorder.values
        #expect(delivered == expected, "delivered \(delivered.map(names)), expected \(expected.map(names))")
        #expect(try await adultsByName.results(in: store) == [ann])
    }

    @Test func countComesAtOnceThenOnlyWhenItChanges() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let adults = Person.include(#Predicate { $0.age >= 18 })
        let recorder = ObservationRecorder(adults.observeCount(in: store))
        defer { recorder.cancel() }

        #expect(try await recorder.next() == 0)
        var ann = Person(name: "Ann", age: 30)
        try await store.insert(ann)
        #expect(try await recorder.next() == 1)

        // A child, another collection, and a change that keeps the count: nothing.
        let cid = Person(name: "Cid", age: 9)
        try await store.insert(cid)
        try await store.write { try $0.insert(pet("Rex"), into: "pets") }
        ann.name = "Anna"
        try await store.save(ann)
        try await recorder.expectNothingNew()

        let bob = Person(name: "Bob", age: 44)
        try await store.insert(bob)
        #expect(try await recorder.next() == 2)

        try await store.delete(Person.self, id: cid.id)
        try await recorder.expectNothingNew()
        try await store.write { [ann, bob] ctx in
            try ctx.delete(Person.self, id: ann.id)
            try ctx.delete(Person.self, id: bob.id)
        }
        #expect(try await recorder.next() == 0)
        try await recorder.expectNothingNew()
        #expect(recorder.values == [0, 1, 2, 0])
    }

    @Test func untypedQueryResultsAndCountFollowTypedAndUntypedWrites() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let ann = Person(name: "Ann", age: 30)
        try await store.insert(ann)

        let query = Query<DocumentValue>("people").include(.compare("age", .greaterOrEqual, .int(18))).sortBy("name")
        let results = ObservationRecorder(query.observe(in: store))
        let counts = ObservationRecorder(query.observeCount(in: store))
        defer { results.cancel(); counts.cancel() }
        /// The query's answer now, read directly.
        func current() async throws -> [DocumentValue] { try await store.read { try query.results(in: $0) } }

        var value = try await results.next()
        #expect(names(value) == ["Ann"])
        #expect(value == (try await current()))
        #expect(try await counts.next() == 1)

        // An untyped adult.
        let bea: DocumentValue = .object([
            ("id", .uuid(UUID())), ("name", .string("Bea")), ("age", .int(52)), ("city", .string("Bergen")),
            ("tags", .array([])),
        ])
        try await store.write { try $0.save(bea, into: "people") }
        value = try await results.next()
        #expect(names(value) == ["Ann", "Bea"])
        #expect(value == (try await current()))
        #expect(try await counts.next() == 2)

        // A typed child and a write to another collection: nothing for either.
        try await store.insert(Person(name: "Cid", age: 12))
        try await store.write { try $0.insert(pet("Rex"), into: "pets") }
        try await results.expectNothingNew()
        #expect(counts.unread.isEmpty, "the count should not have changed: \(counts.unread)")

        // An untyped change to a returned document: new results, the same count.
        var older = bea
        if case .object(var fields) = older, let i = fields.firstIndex(where: { $0.name == "age" }) {
            fields[i].value = .int(53)
            older = .object(fields)
        }
        try await store.write { [older] in try $0.save(older, into: "people") }
        value = try await results.next()
        #expect(value.last?[field: "age"] == .int(53))
        #expect(value == (try await current()))

        // A typed delete.
        try await store.delete(Person.self, id: ann.id)
        value = try await results.next()
        #expect(names(value) == ["Bea"])
        #expect(try await counts.next() == 1)
        try await results.expectNothingNew()
        #expect(counts.values == [1, 2, 1])
        #expect(results.values.map(names) == [["Ann"], ["Ann", "Bea"], ["Ann", "Bea"], ["Bea"]])
    }

    @Test func untypedQueryOnACollectionThatDoesNotExistYetStartsEmptyAndSeesItCreated() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let pets = Query<DocumentValue>("pets").sortBy("name")
        let results = ObservationRecorder(pets.observe(in: store))
        let counts = ObservationRecorder(pets.observeCount(in: store))
        defer { results.cancel(); counts.cancel() }

        #expect(try await results.next() == [])
        #expect(try await counts.next() == 0)
        try await store.insert(Person(name: "Ann", age: 30))
        try await results.expectNothingNew()
        #expect(counts.unread.isEmpty)

        try await store.write { try $0.insert(pet("Rex"), into: "pets") }
        #expect(try await results.next() == [pet("Rex")])
        #expect(try await counts.next() == 1)
        try await store.write { try $0.insert(pet("Ace"), into: "pets") }
        #expect(try await results.next() == [pet("Ace"), pet("Rex")])
        #expect(try await counts.next() == 2)
    }

    // MARK: Documents

    @Test func documentIsMissingThenExistingThenUpdatedThenGoneAndIgnoresOtherDocuments() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let other = Person(name: "Other", age: 50)
        try await store.insert(other)
        var ann = Person(name: "Ann", age: 30)

        let recorder = ObservationRecorder(store.observe(Person.self, id: ann.id))
        defer { recorder.cancel() }
        func expectNext(_ seen: SeenPerson, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let value = SeenPerson(try await recorder.next(sourceLocation: sourceLocation))
            #expect(value == seen, "got \(value), expected \(seen)", sourceLocation: sourceLocation)
        }

        try await expectNext(.missing)

        // Other documents and collections: nothing, and the insert that follows is the next value.
        var changedOther = other
        changedOther.age = 51
        try await store.save(changedOther)
        try await store.insert(Person(name: "Third", age: 7))
        try await store.write { try $0.insert(pet("Rex"), into: "pets") }
        try await recorder.expectNothingNew()
        try await store.insert(ann)
        try await expectNext(.existing(ann))

        ann.city = "Bergen"
        try await store.save(ann)
        try await expectNext(.existing(ann))

        // Saved unchanged, and another document deleted: nothing.
        try await store.save(ann)
        try await store.delete(Person.self, id: other.id)
        try await recorder.expectNothingNew()
        ann.age = 31
        try await store.save(ann)
        try await expectNext(.existing(ann))

        try await store.delete(Person.self, id: ann.id)
        try await expectNext(.gone(last: ann))

        // Still gone after other writes: nothing; then inserted again.
        try await store.insert(Person(name: "Fourth", age: 8))
        try await recorder.expectNothingNew()
        let again = Person(id: ann.id, name: "Ann again", age: 5)
        try await store.insert(again)
        try await expectNext(.existing(again))
        try await recorder.expectNothingNew()
        #expect(recorder.values.count == 6)
    }

    @Test func documentThatExistsIsExistingAtFirst() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let ann = Person(name: "Ann", age: 30)
        try await store.insert(ann)
        let recorder = ObservationRecorder(store.observe(Person.self, id: ann.id))
        defer { recorder.cancel() }
        #expect(SeenPerson(try await recorder.next()) == .existing(ann))
        try await store.delete(Person.self, id: ann.id)
        #expect(SeenPerson(try await recorder.next()) == .gone(last: ann))
    }

    // MARK: Errors

    @Test func documentThatNoLongerDecodesEndsTheTypedObservationWithDecodingFailed() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let ann = Person(name: "Ann", age: 30)
        try await store.insert(ann)
        let recorder = ObservationRecorder(adultsByName.observe(in: store))
        let document = ObservationRecorder(store.observe(Person.self, id: ann.id))
        #expect(try await recorder.next() == [ann])
        #expect(SeenPerson(try await document.next()) == .existing(ann))

        // Ann replaced by an adult without the required `city`: it matches the query but is not a Person.
        let broken: DocumentValue = .object([
            ("id", .uuid(ann.id)), ("name", .string("Broken")), ("age", .int(40)), ("tags", .array([])),
        ])
        try await store.write { try $0.save(broken, into: "people") }

        let documentError = try await document.waitForEnd()
        #expect((documentError as? DocStoreError)?.code == .decodingFailed, "\(String(describing: documentError))")
        #expect(document.values.count == 1)

        let error = try await recorder.waitForEnd()
        let storeError = try #require(error as? DocStoreError, "expected a DocStoreError, got \(String(describing: error))")
        #expect(storeError.code == .decodingFailed, "\(storeError)")
        #expect(storeError.message.contains("people"), "\(storeError.message)")
        #expect(storeError.message.contains("city"), "\(storeError.message)")
        #expect(recorder.values == [[ann]])

        // The ended observation holds nothing.
        try await eventually("the notifier to drop the observer") {
            store.changes.subscriberCount == 0 && !store.changes.isPolling
        }
    }

    @Test func observingAClosedStoreEndsWithClosed() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        await store.close()
        let recorder = ObservationRecorder(adultsByName.observe(in: store))
        let error = try await recorder.waitForEnd()
        #expect((error as? DocStoreError)?.code == .closed, "\(String(describing: error))")
        #expect(recorder.values.isEmpty)
        try await eventually("the notifier to drop the observer") {
            store.changes.subscriberCount == 0 && !store.changes.isPolling
        }
    }

    // MARK: Slow consumers

    @Test func slowConsumerGetsTheLatestAnswerNotABacklog() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let oldest = Person.sortBy(\.age, order: .reverse)[0..<3]
        let counts = ObservationRecorder(Person.query().observeCount(in: store), pause: .milliseconds(50))
        let tops = ObservationRecorder(oldest.observe(in: store), pause: .milliseconds(50))
        defer { counts.cancel(); tops.cancel() }
        #expect(try await counts.next() == 0)
        #expect(try await tops.next() == [])

        let commits = engineIsServer ? 2_000 : 10_000   // a server commits more slowly
        let started = ContinuousClock.now
        let writer = Task {
            for i in 0..<commits {
                try await store.write { try $0.insert(Person(name: "p\(i)", age: i)) }
                // A breath now and then: commits back to back with observers reading after each keep the store's
                // actor, and with it one of the few cooperative threads, busy for seconds on end.
                if i % 50 == 49 { try await Task.sleep(for: .milliseconds(1)) }
            }
        }
        try await writer.value
        let writesEnded = ContinuousClock.now

        // A backlog would take (commits - received) × 50 ms to drain: minutes, not seconds.
        try await counts.waitUntil("the final count \(commits) after the writes ended") {
            $0.last == commits
        }
        let final = try await oldest.results(in: store)
        try await tops.waitUntil("the final results after the writes ended") { $0.last == final }
        let caughtUp = ContinuousClock.now
        try await counts.expectNothingNew()
        try await tops.expectNothingNew()

        let countValues = counts.values
        let topValues = tops.values
        print("slow consumers: \(commits) commits in \(writesEnded - started); \(countValues.count) counts and "
            + "\(topValues.count) results received")
        // A consumer takes one value per 50 ms, however the answers are kept, so the count of values alone tells a
        // backlog from the latest answer only when the writer commits faster than that, which a busy machine or a
        // server may not. What tells them apart is what came after the last commit: the latest answer then, and the
        // final one, where a backlog hands over every commit the consumer had not reached yet.
        let paced = Int((caughtUp - started) / .milliseconds(50)) + 20
        for (name, timed) in [("counts", counts.timedValues.map(\.at)), ("results", tops.timedValues.map(\.at))] {
            let late = timed.filter { $0 > writesEnded }.count
            #expect(late <= 20, "a backlog was delivered: \(late) \(name) after the writes ended, \(timed.count) in all")
            #expect(timed.count <= paced, "\(timed.count) \(name) came faster than the consumer takes them")
        }
        #expect(zip(countValues, countValues.dropFirst()).allSatisfy { $0 < $1 }, "the counts went back or repeated")
        #expect(final.map(\.age) == [commits - 1, commits - 2, commits - 3])
        #expect(topValues.last == final)
    }

    @Test func consumerThatDoesNotReadFindsOnlyTheLatestAnswerWaiting() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let stream = Person.query().observeCount(in: store)
        for i in 0..<500 {
            try await store.insert(Person(name: "p\(i)", age: i))
        }
        // Only now does anyone read.
        let recorder = ObservationRecorder(stream)
        defer { recorder.cancel() }
        try await recorder.waitUntil("the final count 500") { $0.last == 500 }
        try await recorder.expectNothingNew()
        let received = recorder.values
        #expect(received.last == 500, "the final count did not come: \(received)")
        // What was waiting is at most one buffered value, one being computed and one more signalled: never the
        // 501 values of the commits.
        #expect(received.count <= 3, "a backlog was delivered: \(received)")
    }

    // MARK: Other processes

    @Test func commitsOfAnotherProcessAreNoticedWhileItWrites() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.writerURL.path),
                "the child writer is missing at \(Self.writerURL.path)")
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let counts = ObservationRecorder(Person.query().observeCount(in: store))
        defer { counts.cancel() }
        #expect(try await counts.next() == 0)

        let inserts = 40
        let child = try await Self.runChildInserting(inserts, pauseMilliseconds: 25, into: store.path)
        let exited = child.exited
        #expect(child.status == 0, "the child writer failed: \(child.complaint)")
        #expect(child.printed.split(separator: "\n").filter { $0.hasPrefix("inserted ") }.count == inserts)

        try await counts.waitUntil("the count \(inserts) after the child exited") {
            $0.last == inserts
        }
        let timed = counts.timedValues
        let values = timed.map(\.value)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "the counts went back or repeated: \(values)")
        // Counts between the first and the last were read while the child was writing (how many depends on the
        // machine's load; `eachCommitOfAnotherProcessIsNoticedWhileThatProcessStillRuns` makes it certain). A read
        // begun while it wrote may arrive after it exited, by as long as a read takes on a loaded machine (longer
        // on a server): never seconds later.
        let midway = timed.filter { $0.value > 0 && $0.value < inserts }
        #expect(midway.allSatisfy { $0.at <= exited + .seconds(2) }, "\(timed.map { ($0.value, $0.at - exited) })")
        print("another process: counts \(values); the last one came \(timed.last.map { $0.at - exited } ?? .zero) "
            + "after the child exited")

        let people = try await Person.query().results(in: store)
        #expect(Set(people.map(\.name)) == Set((1...inserts).map { "child-\($0)" }))
    }

    @Test func eachCommitOfAnotherProcessIsNoticedWhileThatProcessStillRuns() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let counts = ObservationRecorder(Person.query().observeCount(in: store))
        defer { counts.cancel() }
        #expect(try await counts.next() == 0)

        // The child commits one document per line it reads, and after the last one waits to be told to stop.
        let inserts = 10
        let process = ChildProcess()
        process.executableURL = Self.writerURL
        process.arguments = ["insert-people-on-cue", store.path, "\(inserts)"]
        let cues = Pipe()
        process.standardInput = cues
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        for number in 1...inserts {
            try #require(process.isRunning, "the child stopped before its commit \(number)")
            try cues.fileHandleForWriting.write(contentsOf: Data("\n".utf8))
            #expect(try await counts.next() == number)
            #expect(process.isRunning, "the child stopped before being told to")
        }
        try cues.fileHandleForWriting.close()
        try await eventually(within: .seconds(60), "the child writer to exit") { !process.isRunning }
        let complaint = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "the child writer failed: \(complaint)")
        try await counts.expectNothingNew()
        #expect(counts.values == Array(0...inserts))
    }

    @Test func untypedObservationSeesACollectionAnotherProcessCreates() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        // This process never opens `people`: the child creates it.
        let everyone = Query<DocumentValue>("people").sortBy("name")
        let counts = ObservationRecorder(everyone.observeCount(in: store))
        let results = ObservationRecorder(everyone.observe(in: store))
        defer { counts.cancel(); results.cancel() }
        #expect(try await counts.next() == 0)
        #expect(try await results.next() == [])

        let inserts = 10
        let child = try await Self.runChildInserting(inserts, pauseMilliseconds: 20, into: store.path)
        #expect(child.status == 0, "the child writer failed: \(child.complaint)")
        try await counts.waitUntil("the count \(inserts) after the child exited") {
            $0.last == inserts
        }
        let expectedNames = (1...inserts).map { "child-\($0)" }.sorted()
        try await results.waitUntil("every child's document after the child exited") {
            $0.last.map(names) == expectedNames
        }
        let values = counts.values
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "the counts went back or repeated: \(values)")
    }

    // MARK: Catalog changes and rollbacks

    @Test func writesThatRollBackSendNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let recorder = ObservationRecorder(adultsByName.observe(in: store))
        defer { recorder.cancel() }
        #expect(try await recorder.next() == [])

        struct Refused: Error {}
        let left = try await store.dryRun { ctx in
            try ctx.insert(Person(name: "Rehearsed", age: 40))
            return try Person.query().count(in: ctx)
        }
        #expect(left == 1)
        await #expect(throws: Refused.self) {
            try await store.write { ctx in
                try ctx.insert(Person(name: "Refused", age: 40))
                throw Refused()
            }
        }
        try await recorder.expectNothingNew()
        let ann = Person(name: "Ann", age: 30)
        try await store.insert(ann)
        #expect(try await recorder.next() == [ann])
    }

    @Test func catalogChangesThatLeaveTheResultsEqualSendNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let ann = Person(name: "Ann", age: 30, city: "Bergen")
        try await store.insert(ann)
        let typed = ObservationRecorder(adultsByName.observe(in: store))
        let untyped = ObservationRecorder(
            Query<DocumentValue>("people").include(.compare("city", .equal, .string("Bergen"))).observeCount(in: store))
        defer { typed.cancel(); untyped.cancel() }
        #expect(try await typed.next() == [ann])
        #expect(try await untyped.next() == 1)

        // An index the type does not declare, then one it does, dropped (the type builds it again when next used).
        try await store.write {
            try $0.createIndex(IndexDefinition(name: "by_name", kind: .regular, fields: ["name"]), in: "people")
        }
        try await store.dropIndex("age", from: "people")
        try await store.dropIndex("by_name", from: "people")
        try await typed.expectNothingNew()
        #expect(untyped.unread.isEmpty, "the count should not have changed: \(untyped.unread)")

        let bob = Person(name: "Bob", age: 40, city: "Bergen")
        try await store.insert(bob)
        #expect(try await typed.next() == [ann, bob])
        #expect(try await untyped.next() == 2)
    }

    @Test func droppingTheObservedCollectionEmptiesTheUntypedResults() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        try await store.write { try $0.insert(pet("Rex"), into: "pets") }
        let recorder = ObservationRecorder(Query<DocumentValue>("pets").observe(in: store))
        defer { recorder.cancel() }
        #expect(try await recorder.next() == [pet("Rex")])

        #expect(try await store.write { try $0.dropCollection("pets") })
        #expect(try await recorder.next() == [])
        try await store.write { try $0.insert(pet("Ace"), into: "pets") }
        #expect(try await recorder.next() == [pet("Ace")])
    }

    // MARK: Ending

    @Test func cancellingTheConsumerEndsTheObservationAndReleasesEverything() async throws {
        let dir = TemporaryDirectory()
        // The only strong reference this test keeps.
        var store: DocStore? = try await DocStore(path: dir.path("store.db"))
        let notifier = try #require(store).changes
        #expect(notifier.subscriberCount == 0)
        #expect(!notifier.isPolling)

        let recorder = ObservationRecorder(adultsByName.observe(in: try #require(store)))
        #expect(try await recorder.next() == [])
        #expect(notifier.subscriberCount == 1)
        #expect(notifier.isPolling)

        recorder.cancel()
        #expect(try await recorder.waitForEnd() == nil)
        try await eventually("no subscriber and no poller; now \(notifier.subscriberCount) "
                             + "subscribers, polling: \(notifier.isPolling)") {
            notifier.subscriberCount == 0 && !notifier.isPolling
        }

        // Nothing the observation started still holds the store.
        weak let released = store
        store = nil
        try await eventually("the store to be released") { released == nil }
    }

    @Test func observationsDroppedUnreadOrCancelledAtOnceHoldNothing() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let notifier = store.changes
        _ = adultsByName.observe(in: store)
        _ = store.observe(Person.self, id: UUID())
        var consumers: [Task<Void, Error>] = []
        for _ in 0..<20 {
            let consumer = Task { for try await _ in Person.query().observeCount(in: store) {} }
            consumer.cancel()
            consumers.append(consumer)
        }
        for consumer in consumers { try await consumer.value }
        try await eventually("no subscriber and no poller; now \(notifier.subscriberCount) "
                             + "subscribers, polling: \(notifier.isPolling)") {
            notifier.subscriberCount == 0 && !notifier.isPolling
        }

        // Observing again works as before.
        let recorder = ObservationRecorder(Person.query().observeCount(in: store))
        #expect(try await recorder.next() == 0)
        #expect(notifier.subscriberCount == 1 && notifier.isPolling)
        try await store.insert(Person(name: "Ann", age: 30))
        #expect(try await recorder.next() == 1)
        recorder.cancel()
        try await eventually("no subscriber and no poller") {
            notifier.subscriberCount == 0 && !notifier.isPolling
        }
    }

    @Test func cancellingWhileCommitsPourInReleasesEverything() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let notifier = store.changes
        let lastTen = Person.sortBy(\.name, order: .reverse)[0..<10]
        let results = (0..<3).map { _ in ObservationRecorder(lastTen.observe(in: store)) }
        let counts = (0..<3).map { _ in ObservationRecorder(Person.query().observeCount(in: store)) }
        for recorder in results { #expect(try await recorder.next() == []) }
        for recorder in counts { #expect(try await recorder.next() == 0) }

        let writer = Task {
            // Names in insertion order, so that the last ten change with every commit.
            for i in 0..<3_000 { try await store.insert(Person(name: "p\(100_000 + i)", age: i % 90)) }
        }
        defer { writer.cancel() }
        for recorder in results { _ = try await recorder.next() }
        for recorder in counts { _ = try await recorder.next() }
        results.forEach { $0.cancel() }
        counts.forEach { $0.cancel() }
        try await eventually("no subscriber and no poller while writes go on; now \(notifier.subscriberCount) "
                             + "subscribers, polling: \(notifier.isPolling)") {
            notifier.subscriberCount == 0 && !notifier.isPolling
        }
        for recorder in results { #expect(try await recorder.waitForEnd() == nil) }
        for recorder in counts { #expect(try await recorder.waitForEnd() == nil) }
        try await writer.value
        #expect(notifier.subscriberCount == 0 && !notifier.isPolling)
    }

    @Test func eachObserverHoldsItsOwnSubscriptionAndThePollerRunsWhileAnyIsLeft() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let notifier = store.changes
        let first = ObservationRecorder(Person.query().observeCount(in: store))
        let ann = Person(name: "Ann", age: 30)
        let second = ObservationRecorder(store.observe(Person.self, id: ann.id))
        _ = try await first.next()
        _ = try await second.next()
        #expect(notifier.subscriberCount == 2)

        first.cancel()
        try await eventually("one subscriber left") { notifier.subscriberCount == 1 }
        #expect(notifier.isPolling)

        // A consumer that stops iterating ends its observation too.
        for try await n in Person.query().observeCount(in: store) {
            #expect(n == 0)
            #expect(notifier.subscriberCount == 2)
            break
        }
        try await eventually("one subscriber left after the loop ended") {
            notifier.subscriberCount == 1
        }
        #expect(notifier.isPolling)

        // The remaining observer still works.
        try await store.insert(ann)
        #expect(SeenPerson(try await second.next()) == .existing(ann))
        second.cancel()
        try await eventually("no subscriber and no poller") {
            notifier.subscriberCount == 0 && !notifier.isPolling
        }
    }

    @Test func closingTheStoreEndsTheObservation() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let results = ObservationRecorder(adultsByName.observe(in: store))
        let document = ObservationRecorder(store.observe(Person.self, id: UUID()))
        // The requests stay open: the stream is waiting for the next one when the store closes.
        let (requests, next) = AsyncStream.makeStream(of: AdultNames.self)
        defer { next.finish() }
        let followed = ObservationRecorder(store.observe(requests: requests))
        next.yield(AdultNames())
        #expect(try await results.next() == [])
        #expect(SeenPerson(try await document.next()) == .missing)
        #expect(try await followed.next() == [])

        await store.close()
        // Closing while the observer waits finishes its stream; a read that was under way would meet the closed
        // store and end with that error instead.
        let resultsError = try await results.waitForEnd()
        #expect(resultsError == nil || (resultsError as? DocStoreError)?.code == .closed, "\(String(describing: resultsError))")
        let documentError = try await document.waitForEnd()
        #expect(documentError == nil || (documentError as? DocStoreError)?.code == .closed,
                "\(String(describing: documentError))")
        let followedError = try await followed.waitForEnd()
        #expect(followedError == nil || (followedError as? DocStoreError)?.code == .closed,
                "\(String(describing: followedError))")
        try await eventually("no subscriber and no poller") {
            store.changes.subscriberCount == 0 && !store.changes.isPolling
        }
    }

    @Test func releasingTheStoreEndsTheObservationAndFreesTheFile() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        // The only strong reference to the store.
        var store: DocStore? = try await DocStore(path: path)
        let notifier = try #require(store?.changes)
        let results = ObservationRecorder(adultsByName.observe(in: try #require(store)))
        let count = ObservationRecorder(Person.query().observeCount(in: try #require(store)))
        let document = ObservationRecorder(try #require(store).observe(Person.self, id: UUID()))
        // The requests stay open: the stream is waiting for the next one when the store goes.
        let (requests, next) = AsyncStream.makeStream(of: AdultNames.self)
        defer { next.finish() }
        let followed = ObservationRecorder(try #require(store).observe(requests: requests))
        next.yield(AdultNames())
        #expect(try await results.next() == [])
        #expect(try await count.next() == 0)
        #expect(SeenPerson(try await document.next()) == .missing)
        #expect(try await followed.next() == [])
        #expect(notifier.subscriberCount == 4 && notifier.isPolling)

        weak let released = store
        store = nil
        // Nothing else holds the store: every observer ends without an error, and the file can be opened again in
        // this process (LMDB allows one environment per file and process, so a store kept alive would refuse).
        #expect(try await results.waitForEnd() == nil)
        #expect(try await count.waitForEnd() == nil)
        #expect(try await document.waitForEnd() == nil)
        #expect(try await followed.waitForEnd() == nil)
        #expect(released == nil, "an observer kept the store alive")
        try await eventually("no subscriber and no poller") { notifier.subscriberCount == 0 && !notifier.isPolling }
        let reopened = try await DocStore(path: path)
        try await reopened.insert(Person(name: "Ann", age: 30))
        #expect(try await Person.query().count(in: reopened) == 1)
    }

    @Test func aStoreReleasedElsewhereClosesItsFileBeforeItsObservationsEnd() async throws {
        let dir = TemporaryDirectory()
        let path = dir.path("store.db")
        var store: DocStore? = try await DocStore(path: path)
        let count = ObservationRecorder(Person.query().observeCount(in: try #require(store)))
        #expect(try await count.next() == 0)
        // The last reference goes in another task, as when an observer's read or the poller held the store last.
        let (go, release) = AsyncStream.makeStream(of: Void.self)
        let holder = Task { [store] in
            for await _ in go { break }
            _ = store
        }
        store = nil
        release.yield()
        #expect(try await count.waitForEnd() == nil)
        // The observation has ended: the file is free already.
        let reopened = try await DocStore(path: path)
        #expect(try await Person.query().count(in: reopened) == 0)
        await holder.value
    }
}

/// The adults' names, by name or by age: a request whose parameters are its properties.
private struct AdultNames: StoreRequest {
    var minimumAge = 18
    var byName = true

    func fetch(_ ctx: ReadContext) throws -> [String] {
        let age = minimumAge
        let query = Person.include(#Predicate { $0.age >= age })
        return try (byName ? query.sortBy(\.name) : query.sortBy(\.age).sortBy(\.name)).results(in: ctx).map(\.name)
    }
}

@Suite struct ObservedRequestTests {
    @Test func requestValueComesAtOnceThenOnlyWhenItChanges() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        try await store.insert(Person(name: "Bo", age: 40))
        let recorder = ObservationRecorder(store.observe(AdultNames()))
        #expect(try await recorder.next() == ["Bo"])
        try await store.insert(Person(name: "Kid", age: 9))          // not an adult: the names are equal
        try await store.insert(Person(name: "Ann", age: 30))
        #expect(try await recorder.next() == ["Ann", "Bo"])
        try await recorder.expectNothingNew()
    }

    @Test func swappingTheRequestSendsTheNewValueOnceAndNeverTheOldOnesAgain() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        try await store.insert(contentsOf: [Person(name: "Bo", age: 40), Person(name: "Ann", age: 30),
                                            Person(name: "Cy", age: 12)])
        let (requests, next) = AsyncStream.makeStream(of: AdultNames.self)
        let recorder = ObservationRecorder(store.observe(requests: requests))
        next.yield(AdultNames(byName: true))
        #expect(try await recorder.next() == ["Ann", "Bo"])
        next.yield(AdultNames(byName: true))                         // equal: nothing new
        try await recorder.expectNothingNew()
        next.yield(AdultNames(byName: false))                        // by age: the same people, once
        #expect(try await recorder.next() == ["Ann", "Bo"])
        next.yield(AdultNames(minimumAge: 10, byName: false))
        #expect(try await recorder.next() == ["Cy", "Ann", "Bo"])
        // A commit now reaches only the latest request.
        try await store.insert(Person(name: "Di", age: 11))
        #expect(try await recorder.next() == ["Di", "Cy", "Ann", "Bo"])
        try await recorder.expectNothingNew()
        next.finish()
    }

    @Test(arguments: [false, true])
    func cancellingTheConsumerEndsTheRequestsObservation(requestsEnded: Bool) async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let notifier = store.changes
        let (requests, next) = AsyncStream.makeStream(of: AdultNames.self)
        defer { next.finish() }
        let recorder = ObservationRecorder(store.observe(requests: requests))
        next.yield(AdultNames())
        #expect(try await recorder.next() == [])
        // Whether the requests are still open or have ended (the last one is then followed), the consumer stopping
        // ends the observation of the request it follows.
        if requestsEnded { next.finish() }
        #expect(notifier.subscriberCount == 1)

        recorder.cancel()
        #expect(try await recorder.waitForEnd() == nil)
        try await eventually("no subscriber and no poller; now \(notifier.subscriberCount) "
                             + "subscribers, polling: \(notifier.isPolling)") {
            notifier.subscriberCount == 0 && !notifier.isPolling
        }
    }

    /// A sequence of requests that gives one request and then waits for good, deaf to cancellation.
    fileprivate struct DeafRequests: AsyncSequence, Sendable {
        let first: AdultNames
        struct Iterator: AsyncIteratorProtocol {
            var given = false
            let first: AdultNames
            mutating func next() async -> AdultNames? {
                if !given { given = true; return first }
                await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }   // never resumed
                return nil
            }
        }
        func makeAsyncIterator() -> Iterator { Iterator(first: first) }
    }

    /// The consumer stopping ends the current request's observation even when the requests never end and do not
    /// heed cancellation: the observation was left reading after every commit, its subscription held, for good.
    @Test func cancellingTheConsumerEndsTheObservationOfRequestsThatIgnoreCancellation() async throws {
        let (store, dir) = try await makeStore()
        defer { withExtendedLifetime((store, dir)) {} }
        let notifier = store.changes
        let recorder = ObservationRecorder(store.observe(requests: DeafRequests(first: AdultNames())))
        #expect(try await recorder.next() == [])
        #expect(notifier.subscriberCount == 1)
        recorder.cancel()
        try await eventually("no subscriber and no poller; now \(notifier.subscriberCount) "
                             + "subscribers, polling: \(notifier.isPolling)") {
            notifier.subscriberCount == 0 && !notifier.isPolling
        }
    }
}
