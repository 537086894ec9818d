import Foundation
import Synchronization
import Testing
import TestSupport
@testable import repl

/// Awaited answers: a query suspends until its question is answered or cancelled, each question ends exactly
/// once, and a presenter finds questions as `pending` or on the `questions` stream.
@Suite(.ownThreads) struct PromptTests {
    // MARK: Answering

    @Test func queryWaitsForTheAnswerAndReturnsIt() async throws {
        let prompt = Prompt<String, Int>()
        let returned = Flag()
        let asker = Task(executorPreference: GrowingThreadPool.shared) {
            let answer = try await prompt.query(with: "how many?")
            returned.set()
            return answer
        }
        let question = try await pendingQuestion(of: prompt)
        #expect(question.input == "how many?")
        // Give a wrong implementation every chance to return early; nothing has answered yet.
        for _ in 0..<100 { await Task.yield() }
        #expect(!returned.isSet)
        #expect(prompt.pending?.id == question.id)

        #expect(question.answer(with: 42))
        #expect(try await withTimeout { try await asker.value } == 42)
        #expect(returned.isSet)
    }

    @Test func answerFromAnotherTaskReachesTheAsker() async throws {
        let prompt = Prompt<Int, String>()
        let presenter = Task(executorPreference: GrowingThreadPool.shared) {
            let question = try await pendingQuestion(of: prompt)
            return question.answer(with: "answer to \(question.input)")
        }
        let answer = try await withTimeout { try await prompt.query(with: 7) }
        #expect(answer == "answer to 7")
        #expect(try await presenter.value)
    }

    @Test func voidPromptIsAskedWithoutInput() async throws {
        let prompt = Prompt<Void, Bool>()
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query() }
        let question = try await pendingQuestion(of: prompt)
        #expect(question.answer(with: true))
        #expect(try await withTimeout { try await asker.value })
    }

    @Test func questionIDsIncreaseInAskingOrder() async throws {
        let prompt = Prompt<Int, Int>()
        var ids: [Int] = []
        for input in 0..<5 {
            let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: input) }
            let question = try await pendingQuestion(of: prompt)
            ids.append(question.id)
            question.answer(with: input)
            _ = try await withTimeout { try await asker.value }
        }
        #expect(ids == ids.sorted())
        #expect(Set(ids).count == ids.count)
    }

    // MARK: Conflicts

    @Test func refuseNewThrowsConflictAtOnceAndKeepsTheFirstPending() async throws {
        let prompt = Prompt<String, Int>(conflictPolicy: .refuseNew)
        let first = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "first") }
        let question = try await pendingQuestion(of: prompt)

        do {
            _ = try await withTimeout { try await prompt.query(with: "second") }
            Issue.record("a second question was accepted while one was pending")
        } catch let error as PromptConflictError {
            #expect(error.pendingQuestionID == question.id)
            #expect(error.description.contains("already waiting for an answer"))
        }

        #expect(prompt.pending?.id == question.id)
        #expect(prompt.pending?.input == "first")
        #expect(question.answer(with: 1))
        #expect(try await withTimeout { try await first.value } == 1)
    }

    @Test func refuseNewIsTheDefaultPolicy() async throws {
        let prompt = Prompt<Int, Int>()
        #expect(prompt.conflictPolicy == .refuseNew)
        let first = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: 1) }
        let question = try await pendingQuestion(of: prompt)
        await #expect(throws: PromptConflictError.self) {
            try await withTimeout { try await prompt.query(with: 2) }
        }
        question.cancel()
        await #expect(throws: CancellationError.self) { try await withTimeout { try await first.value } }
    }

    @Test func cancelPreviousCancelsTheWaitingQuestionAndTakesItsPlace() async throws {
        let prompt = Prompt<String, Int>(conflictPolicy: .cancelPrevious)
        let first = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "first") }
        let firstQuestion = try await pendingQuestion(of: prompt)

        let second = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "second") }
        await #expect(throws: CancellationError.self) { try await withTimeout { try await first.value } }

        let secondQuestion = try await pendingQuestion(of: prompt)
        #expect(secondQuestion.input == "second")
        #expect(secondQuestion.id != firstQuestion.id)
        #expect(!firstQuestion.isPending)
        #expect(!firstQuestion.answer(with: 1))
        #expect(secondQuestion.answer(with: 2))
        #expect(try await withTimeout { try await second.value } == 2)
        #expect(prompt.pending == nil)
    }

    // MARK: Cancellation

    @Test func cancellingTheAskingTaskThrowsCancellationAndClearsPending() async throws {
        let prompt = Prompt<String, Int>()
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "abandoned") }
        let question = try await pendingQuestion(of: prompt)

        asker.cancel()
        await #expect(throws: CancellationError.self) { try await withTimeout { try await asker.value } }
        #expect(prompt.pending == nil)
        #expect(!question.isPending)
        #expect(!question.answer(with: 1))
    }

    @Test func taskCancelledBeforeAskingThrowsWithoutBecomingPending() async throws {
        let prompt = Prompt<String, Int>()
        let questions = prompt.questions
        let cancelledFirst = Task(executorPreference: GrowingThreadPool.shared) {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await prompt.query(with: "never asked")
        }
        await #expect(throws: CancellationError.self) { try await withTimeout { try await cancelledFirst.value } }
        #expect(prompt.pending == nil)

        // The stream's first question is the next one: the cancelled one was never sent.
        let next = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "next") }
        let firstSeen = try await withTimeout {
            var iterator = questions.makeAsyncIterator()
            return await iterator.next()
        }
        #expect(firstSeen?.input == "next")
        firstSeen?.answer(with: 5)
        #expect(try await withTimeout { try await next.value } == 5)
    }

    /// Cancellation lands at every point of asking: before the question is stored, while it is stored, after
    /// it is answered. Whatever the timing, the query ends and leaves nothing pending.
    @Test func cancellationRacingTheQuestionAlwaysEndsIt() async throws {
        let prompt = Prompt<Int, Int>()
        try await withTimeout(seconds: 120) {
            for round in 0..<1_000 {
                let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: round) }
                for _ in 0..<(round % 7) { await Task.yield() }
                asker.cancel()
                do {
                    _ = try await asker.value
                    Issue.record("round \(round): a query nobody answered returned")
                } catch is CancellationError {
                } catch {
                    Issue.record("round \(round): unexpected \(error)")
                }
                #expect(prompt.pending == nil, "round \(round)")
            }
        }
    }

    /// The narrowest case: the task is cancelled after `query` checked for cancellation but before the question
    /// is stored, when no cancellation handler is registered yet to notice. To land there, the test holds the
    /// prompt's lock (which `query` takes to number the question) while the asker starts and is cancelled.
    @Test func cancellationBeforeTheQuestionIsStoredStillEndsIt() async throws {
        for round in 0..<5 {
            let prompt = Prompt<Int, Int>()
            let thread = WatchedThread()
            let asker = prompt.state.withLock { _ in
                let asker = Task(executorPreference: GrowingThreadPool.shared) {
                    thread.isCurrent()
                    return try await prompt.query(with: round)
                }
                // The asker has passed its first check and waits for the lock.
                #expect(thread.waitUntilWaitingForLock(), "round \(round): the asker did not wait for the lock")
                asker.cancel()
                return asker
            }
            await #expect(throws: CancellationError.self, "round \(round)") {
                try await withTimeout { try await asker.value }
            }
            #expect(prompt.pending == nil, "round \(round)")
        }
    }

    @Test func questionCancelMakesTheAskerThrowCancellation() async throws {
        let prompt = Prompt<String, Int>()
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "dismissed") }
        let question = try await pendingQuestion(of: prompt)
        #expect(question.cancel())
        await #expect(throws: CancellationError.self) { try await withTimeout { try await asker.value } }
    }

    @Test func cancelPendingMakesTheAskerThrowCancellation() async throws {
        let prompt = Prompt<String, Int>()
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "interrupted") }
        let question = try await pendingQuestion(of: prompt)
        #expect(prompt.cancelPending())
        await #expect(throws: CancellationError.self) { try await withTimeout { try await asker.value } }
        #expect(!question.isPending)
    }

    @Test func cancelPendingWithNothingPendingReturnsFalse() {
        let prompt = Prompt<String, Int>()
        #expect(!prompt.cancelPending())
        #expect(prompt.pending == nil)
    }

    // MARK: Exactly once

    @Test func secondAnswerIsIgnored() async throws {
        let prompt = Prompt<String, Int>()
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "once") }
        let question = try await pendingQuestion(of: prompt)
        #expect(question.answer(with: 1))
        #expect(!question.answer(with: 2))
        #expect(!question.cancel())
        #expect(try await withTimeout { try await asker.value } == 1)
    }

    @Test func answerAfterCancelIsIgnored() async throws {
        let prompt = Prompt<String, Int>()
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "cancelled") }
        let question = try await pendingQuestion(of: prompt)
        #expect(question.cancel())
        #expect(!question.answer(with: 1))
        #expect(!question.cancel())
        #expect(!prompt.cancelPending())
        await #expect(throws: CancellationError.self) { try await withTimeout { try await asker.value } }
    }

    @Test func oldQuestionCannotAnswerANewerOne() async throws {
        let prompt = Prompt<String, Int>()
        let first = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "old") }
        let old = try await pendingQuestion(of: prompt)
        old.answer(with: 1)
        _ = try await withTimeout { try await first.value }

        let second = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "new") }
        let new = try await pendingQuestion(of: prompt)
        #expect(!old.answer(with: 99))
        #expect(!old.cancel())
        #expect(new.isPending)
        #expect(new.answer(with: 2))
        #expect(try await withTimeout { try await second.value } == 2)
    }

    /// Two answerers and a canceller race five askers, one of whose tasks is cancelled, up to a thousand times.
    /// Every query ends (answered with its own question's answer, cancelled, or refused), every successful
    /// `answer` reaches exactly one asker, and nothing stays pending.
    ///
    /// Each round has a limit of its own, which only a stalled round reaches. A busy machine runs fewer rounds (at
    /// least a hundred) rather than reaching one limit for all of them: a limit that cancelled the rounds still
    /// running would report their askers' cancellation as wrong outcomes.
    @Test(arguments: [Prompt<Int, Int>.ConflictPolicy.refuseNew, .cancelPrevious])
    func concurrentAskersAnswerersAndCancellersEndEveryQuestionOnce(
        policy: Prompt<Int, Int>.ConflictPolicy
    ) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        for round in 0..<1_000 {
            try await withTimeout(seconds: 60) { try await Self.raceOneRound(round, policy: policy) }
            if round >= 100 && clock.now - start > .seconds(30) { break }
        }
    }

    private static func raceOneRound(_ round: Int, policy: Prompt<Int, Int>.ConflictPolicy) async throws {
        let prompt = Prompt<Int, Int>(conflictPolicy: policy)
        let answered = Counter()
        let cancelled = Counter()
        let askersDone = Flag()
        let askerCount = 5

        let outcomes = await withTaskGroup(of: [Outcome].self) { group in
            for answerer in 0..<2 {
                group.addTask {
                    while !askersDone.isSet {
                        if let question = prompt.pending, question.answer(with: question.input * 1_000 + answerer) {
                            answered.increment()
                        }
                        await Task.yield()
                    }
                    return []
                }
            }
            group.addTask {
                for attempt in 0..<4 {
                    await Task.yield()
                    let didCancel = attempt.isMultiple(of: 2) ? prompt.cancelPending() : (prompt.pending?.cancel() ?? false)
                    if didCancel { cancelled.increment() }
                }
                return []
            }
            group.addTask {
                let outcomes = await withTaskGroup(of: Outcome.self) { askers in
                    for asker in 1..<askerCount {
                        askers.addTask { await Outcome(asking: prompt, with: asker) }
                    }
                    let doomed = Task(executorPreference: GrowingThreadPool.shared) { await Outcome(asking: prompt, with: 0) }
                    for _ in 0..<(round % 5) { await Task.yield() }
                    doomed.cancel()
                    var outcomes = [await doomed.value]
                    for await outcome in askers { outcomes.append(outcome) }
                    return outcomes
                }
                askersDone.set()
                return outcomes
            }
            var all: [Outcome] = []
            for await outcomes in group { all += outcomes }
            return all
        }

        #expect(outcomes.count == askerCount, "round \(round)")
        var answeredOutcomes = 0
        var cancelledOutcomes = 0
        for outcome in outcomes {
            switch outcome {
            case .answered(let input, let answer):
                answeredOutcomes += 1
                #expect(answer / 1_000 == input, "round \(round): asker \(input) got the answer to \(answer / 1_000)")
            case .cancelled:
                cancelledOutcomes += 1
            case .refused:
                #expect(policy == .refuseNew, "round \(round): refused under \(policy)")
            case .unexpected(let error):
                Issue.record("round \(round): unexpected \(error)")
            }
        }
        #expect(answeredOutcomes == answered.value, "round \(round)")
        #expect(cancelledOutcomes >= cancelled.value, "round \(round)")
        if policy == .refuseNew {
            // Only the canceller and the cancelled task cancel questions: nothing replaces one.
            #expect(cancelledOutcomes <= cancelled.value + 1, "round \(round)")
        }
        #expect(prompt.pending == nil, "round \(round)")
    }

    // MARK: Pending, then the next question

    @Test func pendingIsNilAfterAnAnswerAndANewQuestionCanBeAsked() async throws {
        let prompt = Prompt<String, Int>()
        #expect(prompt.pending == nil)
        let first = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "first") }
        let question = try await pendingQuestion(of: prompt)
        #expect(question.isPending)
        question.answer(with: 1)
        #expect(prompt.pending == nil)
        #expect(!question.isPending)
        _ = try await withTimeout { try await first.value }

        let second = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "second") }
        let next = try await pendingQuestion(of: prompt)
        #expect(next.input == "second")
        next.answer(with: 2)
        #expect(try await withTimeout { try await second.value } == 2)
    }

    @Test func pendingIsNilAfterACancellationAndANewQuestionCanBeAsked() async throws {
        let prompt = Prompt<String, Int>()
        let first = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "first") }
        let question = try await pendingQuestion(of: prompt)
        question.cancel()
        #expect(prompt.pending == nil)
        await #expect(throws: CancellationError.self) { try await withTimeout { try await first.value } }

        let second = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "second") }
        let next = try await pendingQuestion(of: prompt)
        #expect(next.input == "second")
        next.answer(with: 2)
        #expect(try await withTimeout { try await second.value } == 2)
    }

    // MARK: The questions stream

    @Test func questionsStreamDeliversEachQuestionOnceToAPresenter() async throws {
        let prompt = Prompt<Int, Int>()
        let seen = Mutex<[Prompt<Int, Int>.Question]>([])
        let questions = prompt.questions
        let presenter = Task(executorPreference: GrowingThreadPool.shared) {
            for await question in questions {
                seen.withLock { $0.append(question) }
                question.answer(with: question.input * 2)
            }
        }
        for input in 1...20 {
            #expect(try await withTimeout { try await prompt.query(with: input) } == input * 2)
        }
        presenter.cancel()
        await presenter.value

        let delivered = seen.withLock { $0 }
        #expect(delivered.map(\.input) == Array(1...20))
        #expect(Set(delivered.map(\.id)).count == 20)
    }

    @Test func questionsStreamStartsWithTheQuestionAlreadyPending() async throws {
        let prompt = Prompt<String, Int>()
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "asked before listening") }
        let question = try await pendingQuestion(of: prompt)

        let firstSeen = try await withTimeout {
            var iterator = prompt.questions.makeAsyncIterator()
            return await iterator.next()
        }
        #expect(firstSeen?.id == question.id)
        #expect(firstSeen?.answer(with: 3) == true)
        #expect(try await withTimeout { try await asker.value } == 3)
    }

    @Test func everyStreamSeesEveryQuestion() async throws {
        let prompt = Prompt<Int, Int>()
        let streams = [prompt.questions, prompt.questions]
        for input in 0..<3 {
            let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: input) }
            try await pendingQuestion(of: prompt).answer(with: input)
            _ = try await withTimeout { try await asker.value }
        }
        for stream in streams {
            let inputs = try await withTimeout {
                var iterator = stream.makeAsyncIterator()
                var inputs: [Int] = []
                for _ in 0..<3 { if let question = await iterator.next() { inputs.append(question.input) } }
                return inputs
            }
            #expect(inputs == [0, 1, 2])
        }
    }

    @Test func streamedQuestionThatEndedIsNoLongerPending() async throws {
        let prompt = Prompt<String, Int>()
        let questions = prompt.questions
        let asker = Task(executorPreference: GrowingThreadPool.shared) { try await prompt.query(with: "gone") }
        try await pendingQuestion(of: prompt).cancel()
        await #expect(throws: CancellationError.self) { try await withTimeout { try await asker.value } }

        let late = try await withTimeout {
            var iterator = questions.makeAsyncIterator()
            return await iterator.next()
        }
        #expect(late?.input == "gone")
        #expect(late?.isPending == false)
        #expect(late?.answer(with: 1) == false)
    }

    @Test func streamFinishesWhenThePromptIsReleased() async throws {
        var prompt: Prompt<Int, Int>? = Prompt()
        let questions = try #require(prompt).questions
        prompt = nil
        let count = try await withTimeout {
            var count = 0
            for await _ in questions { count += 1 }
            return count
        }
        #expect(count == 0)
    }

    @Test func presenterWhoseTaskIsCancelledStopsListening() async throws {
        let prompt = Prompt<Int, Int>()
        let questions = prompt.questions
        #expect(prompt.state.withLock { $0.subscribers.count } == 1)
        let presenter = Task(executorPreference: GrowingThreadPool.shared) { for await _ in questions {} }
        presenter.cancel()
        try await withTimeout { await presenter.value }
        #expect(prompt.state.withLock { $0.subscribers.count } == 0)
    }

    /// A presenter answers from the stream while a canceller cancels whatever is pending, a thousand questions
    /// in a row: each query ends, answered with its own answer or cancelled.
    @Test func streamPresenterRacingCancellationsLeavesNoQuestionHanging() async throws {
        let prompt = Prompt<Int, Int>()
        let questions = prompt.questions
        let presenter = Task(executorPreference: GrowingThreadPool.shared) {
            for await question in questions { question.answer(with: -question.input) }
        }
        defer { presenter.cancel() }
        try await withTimeout(seconds: 120) {
            for round in 0..<1_000 {
                async let asked = Outcome(asking: prompt, with: round)
                if round.isMultiple(of: 2) {
                    for _ in 0..<(round % 3) { await Task.yield() }
                    prompt.cancelPending()
                }
                switch await asked {
                case .answered(let input, let answer): #expect(answer == -input, "round \(round)")
                case .cancelled: break
                case let other: Issue.record("round \(round): \(other)")
                }
                #expect(prompt.pending == nil, "round \(round)")
            }
        }
    }
}

// MARK: - Helpers

/// How one query ended.
private enum Outcome: Sendable, Equatable {
    case answered(input: Int, answer: Int)
    case cancelled
    case refused
    case unexpected(String)

    init(asking prompt: Prompt<Int, Int>, with input: Int) async {
        do {
            self = .answered(input: input, answer: try await prompt.query(with: input))
        } catch is CancellationError {
            self = .cancelled
        } catch is PromptConflictError {
            self = .refused
        } catch {
            self = .unexpected("\(error)")
        }
    }
}

private final class Flag: Sendable {
    private let state = Mutex(false)
    var isSet: Bool { state.withLock { $0 } }
    func set() { state.withLock { $0 = true } }
}

private final class Counter: Sendable {
    private let state = Mutex(0)
    var value: Int { state.withLock { $0 } }
    func increment() { state.withLock { $0 += 1 } }
}

private struct TimedOut: Error, CustomStringConvertible {
    let seconds: Double
    var description: String { "did not finish within \(seconds) seconds" }
}

/// Resumes a continuation with whichever outcome arrives first, and ignores the rest.
private final class FirstOutcome<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, any Error>?>

    init(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation = Mutex(continuation)
    }

    @discardableResult
    func resume(with outcome: Result<T, any Error>) -> Bool {
        guard let continuation = continuation.withLock({ $0.take() }) else { return false }
        continuation.resume(with: outcome)
        return true
    }
}

/// Runs `operation`, or throws ``TimedOut`` after `seconds`, so a bug that leaves a query waiting fails the
/// test instead of hanging it. The operation runs in its own task, which is cancelled on time-out but not
/// waited for: a wait that ignores cancellation cannot hold the test.
private func withTimeout<T: Sendable>(
    seconds: Double = 60, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let first = FirstOutcome(continuation)
        let work = Task(executorPreference: GrowingThreadPool.shared) {
            do { first.resume(with: .success(try await operation())) } catch { first.resume(with: .failure(error)) }
        }
        let timer = Task(executorPreference: GrowingThreadPool.shared) {
            try? await Task.sleep(for: .seconds(seconds))
            if first.resume(with: .failure(TimedOut(seconds: seconds))) { work.cancel() }
        }
        Task(executorPreference: GrowingThreadPool.shared) {
            await work.value
            timer.cancel()
        }
    }
}

/// The question `prompt` is waiting on, once there is one.
private func pendingQuestion<Input, Answer>(of prompt: Prompt<Input, Answer>) async throws
    -> Prompt<Input, Answer>.Question
{
    try await withTimeout {
        while true {
            if let question = prompt.pending { return question }
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}
