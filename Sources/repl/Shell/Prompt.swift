import Synchronization

/// A question that code asks and awaits, and that a presenter answers: a confirmation before a destructive
/// command, a choice among matches, a value the command cannot guess. The shell asks its confirmations through
/// one (``Shell/confirmations``), and the terminal presents them at the prompt.
///
/// The asking side calls ``query(with:)`` and suspends. The presenting side finds the question, as
/// ``pending`` or from the ``questions`` stream, shows its ``Question/input`` however it likes, and calls
/// ``Question/answer(with:)`` or ``Question/cancel()``. The asking side then resumes with that answer, or throws
/// `CancellationError`.
///
/// For example:
/// ```swift
/// let confirmDrop = Prompt<String, Bool>()
///
/// // The presenter: a loop that shows each question and answers it.
/// Task {
///     for await question in confirmDrop.questions {
///         print("Drop index \(question.input)? [y/N]")
///         question.answer(with: readLine() == "y")
///     }
/// }
///
/// // The command: waits for the answer.
/// if try await confirmDrop.query(with: "people.age") {
///     try await store.dropIndex("age", from: "people")
/// }
/// ```
///
/// The rules:
/// - At most one question is pending at a time. What happens when another is asked meanwhile is the
///   ``ConflictPolicy`` given at creation.
/// - Every question ends exactly once: answered, or cancelled. Whatever comes second is ignored, and says so by
///   returning `false`.
/// - Cancelling the task that awaits ``query(with:)`` cancels its question; a task cancelled before it asks
///   throws `CancellationError` without its question ever becoming pending.
/// - When a question ends, ``pending`` is `nil` again and the next question may be asked.
final class Prompt<Input: Sendable, Answer: Sendable>: Sendable {
    /// What ``Prompt/query(with:)`` does when a question is already waiting for an answer.
    ///
    /// For example, a shell where a new command replaces a forgotten question:
    /// ```swift
    /// let choose = Prompt<[String], Int>(conflictPolicy: .cancelPrevious)
    /// ```
    enum ConflictPolicy: Sendable {
        /// The waiting question is cancelled (its asker throws `CancellationError`) and the new one takes its
        /// place.
        case cancelPrevious
        /// The new question is refused: its asker throws ``PromptConflictError`` at once, and the waiting
        /// question stays pending.
        case refuseNew
    }

    /// One question asked of a ``Prompt``: what was asked, and the means to answer it or cancel it.
    ///
    /// A question is a value that can be handed to any task; answering or cancelling it from anywhere reaches
    /// the one asker.
    ///
    /// For example:
    /// ```swift
    /// if let question = prompt.pending {
    ///     print("\(question.id): \(question.input)")
    ///     question.answer(with: true)
    /// }
    /// ```
    struct Question: Sendable, Identifiable {
        /// The question's number, unique within its prompt and increasing in the order questions are asked.
        let id: Int
        /// What the asker passed to ``Prompt/query(with:)``.
        let input: Input
        let prompt: Prompt

        /// Answers the question: its asker's ``Prompt/query(with:)`` returns `answer`.
        ///
        /// Only the first answer or cancellation of a question counts.
        ///
        /// For example:
        /// ```swift
        /// question.answer(with: true)          // true: the asker gets `true`
        /// question.answer(with: false)         // false: already answered, ignored
        /// ```
        /// - Parameter answer: The value the asker receives.
        /// - Returns: `true` if this call answered the question; `false`, and nothing happens, if the question
        ///   had already been answered or cancelled.
        @discardableResult
        func answer(with answer: Answer) -> Bool {
            prompt.end(id, with: .success(answer))
        }

        /// Cancels the question: its asker's ``Prompt/query(with:)`` throws `CancellationError`.
        ///
        /// For example, when the person closes the dialog:
        /// ```swift
        /// question.cancel()
        /// ```
        /// - Returns: `true` if this call cancelled the question; `false`, and nothing happens, if the question
        ///   had already been answered or cancelled.
        @discardableResult
        func cancel() -> Bool {
            prompt.end(id, with: .failure(CancellationError()))
        }

        /// Whether the question still waits for an answer: neither answered nor cancelled yet.
        ///
        /// A presenter reading the ``Prompt/questions`` stream may use it to skip a question that ended before
        /// its turn came.
        ///
        /// For example:
        /// ```swift
        /// for await question in prompt.questions where question.isPending {
        ///     print(question.input)
        /// }
        /// ```
        var isPending: Bool {
            prompt.state.withLock { $0.waiting?.id == id }
        }
    }

    /// The question being waited for, with the continuation of its asker.
    struct Waiting {
        let id: Int
        let input: Input
        let continuation: CheckedContinuation<Answer, any Error>
    }

    struct State {
        var lastQuestionID = 0
        var waiting: Waiting?
        var lastSubscriberID = 0
        var subscribers: [Int: AsyncStream<Question>.Continuation] = [:]
    }

    /// What happens when a question is asked while another waits.
    let conflictPolicy: ConflictPolicy
    let state = Mutex(State())

    /// Creates a prompt with no question pending.
    ///
    /// For example:
    /// ```swift
    /// let confirm = Prompt<String, Bool>()                              // refuses a second question
    /// let choose = Prompt<[String], Int>(conflictPolicy: .cancelPrevious) // a new question replaces the old
    /// ```
    /// - Parameter conflictPolicy: What ``query(with:)`` does when a question is already pending.
    init(conflictPolicy: ConflictPolicy = .refuseNew) {
        self.conflictPolicy = conflictPolicy
    }

    deinit {
        let subscribers = state.withLock { state in
            let subscribers = state.subscribers
            state.subscribers = [:]
            return subscribers
        }
        for subscriber in subscribers.values { subscriber.finish() }
    }

    /// Asks a question and suspends until a presenter answers it or it is cancelled.
    ///
    /// The question becomes ``pending`` and is sent to every ``questions`` stream.
    ///
    /// For example:
    /// ```swift
    /// do {
    ///     let index = try await choose.query(with: ["Ada", "Alan", "Grace"])
    ///     print("picked", index)
    /// } catch is CancellationError {
    ///     print("never mind")
    /// }
    /// ```
    /// - Parameter input: What the presenter shows; it is the question's ``Question/input``.
    /// - Returns: The answer given with ``Question/answer(with:)``.
    /// - Throws: `CancellationError` if the question is cancelled (by ``Question/cancel()``, ``cancelPending()``,
    ///   a newer question under ``ConflictPolicy/cancelPrevious``, or cancellation of the calling task,
    ///   before or while it waits). ``PromptConflictError`` under ``ConflictPolicy/refuseNew`` if another
    ///   question is pending.
    func query(with input: Input) async throws -> Answer {
        try Task.checkCancellation()
        let id = state.withLock { state in
            state.lastQuestionID += 1
            return state.lastQuestionID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                ask(Waiting(id: id, input: input, continuation: continuation))
            }
        } onCancel: {
            _ = end(id, with: .failure(CancellationError()))
        }
    }

    /// The question waiting for an answer, if any: for a presenter that looks when it is ready rather than
    /// listening to ``questions``.
    ///
    /// For example:
    /// ```swift
    /// if let question = confirm.pending {
    ///     question.answer(with: true)
    /// }
    /// ```
    var pending: Question? {
        state.withLock { state in
            state.waiting.map { Question(id: $0.id, input: $0.input, prompt: self) }
        }
    }

    /// Every question as it is asked, for a presenter that loops.
    ///
    /// Each access makes a new stream. It starts with the question pending at that moment, if any, so a
    /// presenter that starts listening late misses nothing, then delivers each later question once, in the
    /// order they are asked. A question may have ended by the time the presenter reads it (check
    /// ``Question/isPending``; answering it anyway does nothing). The stream finishes when the prompt is
    /// released; it stops listening when the loop's task is cancelled or the stream is dropped.
    ///
    /// For example:
    /// ```swift
    /// let presenter = Task {
    ///     for await question in confirm.questions {
    ///         print("\(question.input)? [y/N]")
    ///         question.answer(with: readLine() == "y")
    ///     }
    /// }
    /// ```
    var questions: AsyncStream<Question> {
        let (stream, continuation) = AsyncStream.makeStream(of: Question.self)
        let subscriberID = state.withLock { state in
            state.lastSubscriberID += 1
            state.subscribers[state.lastSubscriberID] = continuation
            if let waiting = state.waiting {
                continuation.yield(Question(id: waiting.id, input: waiting.input, prompt: self))
            }
            return state.lastSubscriberID
        }
        continuation.onTermination = { [weak self] _ in
            self?.unsubscribe(subscriberID)
        }
        return stream
    }

    /// Cancels the pending question, if any: its asker throws `CancellationError`.
    ///
    /// For example, the first Ctrl-C of a shell:
    /// ```swift
    /// if !confirm.cancelPending() {
    ///     runningCommand.cancel()   // no question was waiting: stop the command instead
    /// }
    /// ```
    /// - Returns: `true` if a question was cancelled; `false` if none was pending.
    @discardableResult
    func cancelPending() -> Bool {
        let continuation = state.withLock { state in
            let continuation = state.waiting?.continuation
            state.waiting = nil
            return continuation
        }
        guard let continuation else { return false }
        continuation.resume(throwing: CancellationError())
        return true
    }

    /// Makes `waiting` the pending question, or turns it away, then resumes whoever must leave.
    ///
    /// The check for cancellation is made under the lock: a cancellation handler that ran before `waiting` was
    /// stored found nothing to cancel, so the question must be refused here; one that runs later finds it
    /// stored.
    private func ask(_ waiting: Waiting) {
        let (refusal, replaced) = state.withLock { state -> ((any Error)?, CheckedContinuation<Answer, any Error>?) in
            if Task.isCancelled { return (CancellationError(), nil) }
            var replaced: CheckedContinuation<Answer, any Error>?
            if let current = state.waiting {
                switch conflictPolicy {
                case .refuseNew: return (PromptConflictError(pendingQuestionID: current.id), nil)
                case .cancelPrevious: replaced = current.continuation
                }
            }
            state.waiting = waiting
            // Under the lock, so that every stream sees questions in the order they became pending.
            let question = Question(id: waiting.id, input: waiting.input, prompt: self)
            for subscriber in state.subscribers.values { subscriber.yield(question) }
            return (nil, replaced)
        }
        replaced?.resume(throwing: CancellationError())
        if let refusal { waiting.continuation.resume(throwing: refusal) }
    }

    /// Ends question `id` with `outcome` if it is still the pending one.
    ///
    /// - Returns: Whether it was: `false` for a question already answered, cancelled or replaced.
    private func end(_ id: Int, with outcome: Result<Answer, any Error>) -> Bool {
        let continuation = state.withLock { state -> CheckedContinuation<Answer, any Error>? in
            guard let waiting = state.waiting, waiting.id == id else { return nil }
            state.waiting = nil
            return waiting.continuation
        }
        guard let continuation else { return false }
        continuation.resume(with: outcome)
        return true
    }

    private func unsubscribe(_ subscriberID: Int) {
        // The continuation is released after the lock, in case it is the last reference to its stream.
        let removed = state.withLock { $0.subscribers.removeValue(forKey: subscriberID) }
        _ = removed
    }
}

extension Prompt where Input == Void {
    /// Asks a question that needs no input and suspends until it is answered or cancelled: the same as
    /// `query(with: ())`.
    ///
    /// For example:
    /// ```swift
    /// let carryOn = Prompt<Void, Bool>()
    /// if try await carryOn.query() {
    ///     try await store.insert(contentsOf: people)
    /// }
    /// ```
    /// - Returns: The answer given with ``Question/answer(with:)``.
    /// - Throws: As ``query(with:)``: `CancellationError` or ``PromptConflictError``.
    func query() async throws -> Answer {
        try await query(with: ())
    }
}

/// The error thrown by ``Prompt/query(with:)`` when its prompt's conflict policy is
/// ``Prompt/ConflictPolicy/refuseNew`` and a question is already waiting for an answer.
///
/// The waiting question is untouched: answer or cancel it, then ask again.
///
/// For example:
/// ```swift
/// do {
///     _ = try await confirm.query(with: "drop people")
/// } catch let error as PromptConflictError {
///     print(error)   // A question is already waiting for an answer (question 3) ...
/// }
/// ```
struct PromptConflictError: Error, Sendable, CustomStringConvertible {
    /// The ``Prompt/Question/id`` of the question that is waiting.
    let pendingQuestionID: Int

    init(pendingQuestionID: Int) {
        self.pendingQuestionID = pendingQuestionID
    }

    var description: String {
        "A question is already waiting for an answer (question \(pendingQuestionID)); "
            + "answer or cancel it before asking another."
    }
}
