import DocStore
import DocStorePostgres
import Foundation

/// The shell's state and its statements: queries and changes typed as text, `begin`/`commit`/`rollback`, and the
/// dot-commands. One statement runs at a time, on the main actor; the store's work runs in the store's actor.
@MainActor
final class Shell {
    let console: Console
    /// Answer yes to every confirmation (`--yes`).
    let assumeYes: Bool
    /// Open stores read-only (`--readonly`): every change is refused before anything else is done or asked.
    let readOnly: Bool
    /// Whether stores are opened for this process alone (`docstore --exclusive`).
    let exclusive: Bool
    /// Whether a store that exists already is checked (``DocStore/Options/checkFile``) before it is opened: the
    /// shell is how people open files they were sent.
    let checkFiles: Bool
    private(set) var store: DocStore?
    /// The store named on the command line but left unopened, because the first statement is `.recover`: a
    /// damaged file is read by the recovery alone.
    var unopenedPath: String?
    var renderer = Renderer(mode: .table)
    var timer = false
    /// Time spent waiting for answers to confirmations, which `.timer` leaves out.
    var answering = Duration.zero
    var explainEach = false
    var pending = PendingChanges()
    /// Asks the person at the terminal to confirm destructive changes; the line reader presents the questions.
    let confirmations = Prompt<String, Bool>(conflictPolicy: .refuseNew)
    /// Field statistics per collection, with the commit they were read at: kept while no process commits
    /// (``ReadContext/commitNumber``), dropped after each change this shell makes.
    private var statsCache: [String: (commit: Int, stats: FieldStats)] = [:]
    /// How many `.read`s are running inside each other.
    var readDepth = 0
    /// Whether a statement has failed (the status of a bare `.exit`).
    var hadError = false
    private var placeOrigin: String?
    private var placeFirstLine = 1
    /// Stop a script at its first error (`--bail`).
    var bail = false
    /// Set by `.exit`: the status the shell ends with.
    var exitCode: Int32?
    /// Names for completion, refreshed after each statement.
    private(set) var completionWords: [String] = []

    init(console: Console, assumeYes: Bool, readOnly: Bool = false, checkFiles: Bool = true, exclusive: Bool = false) {
        self.console = console
        self.assumeYes = assumeYes
        self.readOnly = readOnly
        self.checkFiles = checkFiles
        self.exclusive = exclusive
    }

    // MARK: The store

    /// Opens the store at `path`, or the one kept in PostgreSQL at a `postgres://` URL (``isServerURL(_:)``), in
    /// place of the open one.
    func open(path: String) async throws {
        if pending.isOpen {
            throw ShellError("a transaction is open: commit or rollback before opening another store")
        }
        if let store, store.path == path { return }
        let onServer = Shell.isServerURL(path)
        if !onServer, let output = console.outputPath, let results = FileIdentity(output) {
            if FileIdentity(path) == results {
                throw ShellError("cannot open \(path): the results are being written to it (.output \(output)); "
                    + ".output alone sends them back to the terminal")
            }
            if FileIdentity(path + "-lock") == results {
                throw ShellError("cannot open \(path): the results are being written to its lock file "
                    + "(.output \(output)), which the store needs for itself; .output alone sends them back to the "
                    + "terminal")
            }
        }
        // A store that is missing is created; one that cannot be reached is refused, saying why.
        if !onServer, let why = Shell.whyUnreadable(path), why != Shell.noSuchFile {
            throw ShellError("cannot open \(path): \(why)")
        }
        var options = DocStore.Options()
        options.readOnly = readOnly
        options.exclusive = exclusive
        options.checkFile = !onServer && checkFiles && FileManager.default.fileExists(atPath: path)
        let opened: DocStore
        do {
            opened = onServer ? try await DocStore(postgres: path, options: options)
                : try await DocStore(path: path, options: options)
        } catch let error as DocStoreError {
            throw Shell.inShellTerms(error)
        }
        if opened.isWithoutLockFile {
            console.error("warning: \(path) is open without its lock file (\(path)-lock cannot be written here): if "
                + "another process writes the store meanwhile, answers may be wrong; open it again after it has")
        }
        if let store { await store.close() }
        store = opened
        statsCache = [:]
        // The fields of each collection, for completion and for checking conditions.
        for name in (try? await reading({ try $0.collections().map(\.name) })) ?? [] {
            _ = try? await fieldStats(name)
        }
        await refreshCompletions()
    }

    /// The library's options, as the shell's command line names them.
    nonisolated static let optionFlags = [("DocStore.Options.readOnly", "docstore --readonly"),
                                          ("DocStore.Options.checkFile", "docstore --check"),
                                          ("DocStore.Options.exclusive", "docstore --exclusive, or "
                                              + "DocStore.Options.exclusive")]

    /// A library error with the options it names given as the shell's flags: the library speaks to programs, the
    /// shell to people at its command line.
    nonisolated static func inShellTerms(_ error: DocStoreError) -> DocStoreError {
        var message = error.message
        for (option, flag) in optionFlags { message = message.replacingOccurrences(of: option, with: flag) }
        return DocStoreError(error.code, message, collection: error.collection, index: error.index,
                             underlying: error.underlying)
    }

    func close() async {
        if let store { await store.close() }
        store = nil
    }

    func requireStore() throws -> DocStore {
        guard let store else { throw ShellError("no store is open: use .open PATH") }
        return store
    }

    /// Reads in the state the shell shows: the committed state, with the pending changes applied when a
    /// transaction is open (in a transaction that is rolled back afterwards).
    func reading<R: Sendable>(_ body: @escaping @Sendable (ReadContext) throws -> R) async throws -> R {
        let store = try requireStore()
        if pending.isEmpty { return try await store.read(body) }
        let replay = pending.replay
        do {
            return try await store.dryRun { ctx in
                do { _ = try replay(ctx) } catch is CancellationError {
                    throw CancellationError()   // (Ctrl-C: the statement is cancelled, the changes still apply)
                } catch { throw PendingReplayFailed(underlying: error) }
                return try body(ctx)
            }
        } catch let failed as PendingReplayFailed {
            throw ShellError("the pending changes no longer apply to the committed state (\(failed.underlying)); "
                + "rollback to drop them")
        }
    }

    /// Makes a change: at once, or, in a transaction, as one more pending change (checked first against the
    /// pending state, so a change that cannot apply is refused now rather than at commit).
    ///
    /// A body that changes documents a person was asked about checks them first
    /// (``MatchedDocuments/requireUnchanged(in:)``): pending, it runs again at commit, so a change confirmed for
    /// documents that another writer has changed since fails the commit rather than apply to something else.
    /// `chosen` tells what the change chose when it ran (the ids it gave), for the note after `commit`: pending,
    /// the body runs again at commit, and what it chooses then is what is kept.
    func change<R: Sendable>(_ summary: String, chosen: @escaping @Sendable (R) -> String? = { _ in nil },
                             _ body: @escaping @Sendable (WriteContext) throws -> R) async throws -> R {
        let store = try requireStore()
        defer { statsCache = [:] }
        guard pending.isOpen else { return try await store.write(body) }
        let replay = pending.replay
        let result = try await store.dryRun { ctx in
            _ = try replay(ctx)
            return try body(ctx)
        }
        pending.append(.init(summary: summary) { ctx in chosen(try body(ctx)) })
        return result
    }

    /// Asks to confirm a destructive change: the person at the terminal answers, `--yes` answers yes, and without a
    /// terminal the change is refused.
    func confirm(_ question: String, refusing action: String) async throws -> Bool {
        if assumeYes {
            console.note("\(question) [y/N] y (--yes)")
            return true
        }
        guard console.interactive else {
            throw ShellError("refusing to \(action) without a confirmation: no one is at a terminal to answer "
                + "(stdin is not a terminal, or --batch or statements as arguments were given); "
                + "run with --yes to confirm destructive commands")
        }
        let clock = ContinuousClock(), asked = clock.now
        defer { answering += clock.now - asked }
        do {
            return try await confirmations.query(with: question)
        } catch {
            endQuestionRead?()   // Ctrl-C reached the statement first: the read of its answer ends too
            throw error
        }
    }

    /// What a change asks before it is made: the question, the action refused when no one can answer, and the note
    /// when the answer is no.
    struct ChangeQuestion {
        var text: String
        var refusing: String
        var declined: String
    }

    /// Asks before a change and makes it, asking again while what the change touches changes as the person answers:
    /// the loop of every change that asks about what it touches.
    ///
    /// Each round, `look` reads what the change touches and the question about it (`nil` altogether: there is
    /// nothing to do, and it has said why; a `nil` question: nothing to ask). `apply` then makes the change, first
    /// checking that what it touches is still what was read: when it is not (`apply` returns `nil`, or throws
    /// ``DocStoreError/Code/changedSinceRead``), the shell notes that `what` changed while the person answered
    /// and asks again, with what the change touches now.
    /// - Returns: What was read and what `apply` returned; `nil` when there was nothing to do or the answer was no.
    func askingAgain<Seen, Done>(_ what: String, look: () async throws -> (seen: Seen, question: ChangeQuestion?)?,
                                 apply: (Seen) async throws -> Done?) async throws -> (seen: Seen, done: Done)? {
        while true {
            guard let (seen, question) = try await look() else { return nil }
            if let question, try await !confirm(question.text, refusing: question.refusing) {
                console.note(question.declined)
                return nil
            }
            var reason = ""
            do {
                if let done = try await apply(seen) { return (seen, done) }
            } catch let error as DocStoreError where error.code == .changedSinceRead {
                reason = " (\(error))"
            }
            console.note("\(what) changed while you answered\(reason); asking again.")
        }
    }

    /// Ends the read of a confirmation's answer (set by the terminal loop).
    var endQuestionRead: (@Sendable () -> Void)?

    /// The prompt: `docstore> `, `docstore (read-only)> `, `docstore (tx)> `, `docstore (tx, 2 pending)> `.
    var prompt: String {
        guard pending.isOpen else { return store?.isReadOnly == true ? "docstore (read-only)> " : "docstore> " }
        return pending.isEmpty ? "docstore (tx)> " : "docstore (tx, \(pending.count) pending)> "
    }

    // MARK: Statements

    /// Runs one statement. Returns whether it succeeded; errors are written to stderr with where they are.
    @discardableResult
    func execute(_ text: String, origin: String? = nil, firstLine: Int = 1) async -> Bool {
        place = (origin, firstLine)
        do {
            let statement = try Parser.statement(text)
            try await run(statement, text: text)
            await refreshCompletions()
            return true
        } catch let error as ParseError {
            report(error, in: text, origin: origin, firstLine: firstLine)
        } catch let error as MeaningError {
            report(error.parseError, in: text, origin: origin, firstLine: firstLine)
        } catch is CancellationError {
            console.error("cancelled; nothing was changed")
        } catch is OutputInterrupted {
            // The output says where it stopped.
        } catch {
            console.error("error: \(error)")
        }
        hadError = true
        // A statement of a script (or a file it reads) that fails inside a transaction: no one saw it to decide, so
        // the commit that follows refuses to apply the others alone.
        if pending.isOpen && (!console.interactive || origin != nil) && failedInTransaction == nil {
            failedInTransaction = String(text.prefix(while: { $0 != "\n" }).prefix(80))
        }
        return false
    }

    /// The first statement of a script that failed inside the open transaction (``execute(_:origin:firstLine:)``).
    var failedInTransaction: String?

    private func report(_ error: ParseError, in text: String, origin: String?, firstLine: Int) {
        var shifted = error
        shifted.location.line += firstLine - 1
        console.error(shifted.rendered(source: String(repeating: "\n", count: firstLine - 1) + text, origin: origin))
    }

    /// Where the statement running came from (a file, or nothing for the terminal) and its first line there.
    private var place: (origin: String?, firstLine: Int) {
        get { (placeOrigin, placeFirstLine) }
        set { (placeOrigin, placeFirstLine) = newValue }
    }

    func warn(_ warnings: [Warning], in text: String) {
        for w in warnings {
            var e = ParseError(message: w.message, location: w.location, length: w.length, suggestion: w.suggestion)
            e.location.line += place.firstLine - 1
            let source = String(repeating: "\n", count: place.firstLine - 1) + text
            let shown = e.rendered(source: source, origin: place.origin)
            console.error("warning" + shown.dropFirst("error".count))
        }
    }

    private func run(_ statement: Statement, text: String) async throws {
        switch statement {
        case .empty:
            return
        case .begin:
            guard !pending.isOpen else { throw ShellError("a transaction is already open: commit or rollback it first") }
            try requireStore().checkWritable("begin a transaction")
            pending.isOpen = true
            failedInTransaction = nil
            console.note("Transaction started: changes stay pending, visible only here, until commit.")
        case .commit:
            guard pending.isOpen else { throw ShellError("no transaction is open (begin starts one)") }
            let count = pending.count
            if let failed = failedInTransaction {
                throw ShellError("commit refused: a statement of this transaction failed (\(failed)), and applying the "
                    + "others alone could leave a change half made; nothing was applied. The \(count) change"
                    + "\(count == 1 ? " is" : "s are") still pending: rollback to drop \(count == 1 ? "it" : "them").")
            }
            let replay = pending.replay
            statsCache = [:]
            let chosen: [String]
            do {
                chosen = try await requireStore().write { try replay($0) }
            } catch is CancellationError {
                throw ShellError("commit cancelled: nothing was applied, and the \(count) change"
                    + "\(count == 1 ? " is" : "s are") still pending")
            } catch let error as DocStoreError where error.code == .commitOutcomeUnknown {
                // Committing again could make the changes twice: they are dropped, and the person told to look.
                pending.close()
                throw ShellError("the connection to the server was lost while the commit was under way, and whether it "
                    + "was applied cannot be known: the \(count) change\(count == 1 ? " was" : "s were") either all "
                    + "applied or none. They are no longer pending: read the store, and make them again if they are "
                    + "not there. (\(error.message))")
            } catch let failed as PendingChanges.Failed where failed.changedSinceRead {
                throw ShellError("commit failed, so nothing was applied: the pending \(failed.summary) was confirmed "
                    + "for documents that another writer has changed since (\(failed.underlying)). The \(count) change"
                    + "\(count == 1 ? " is" : "s are") still pending: rollback to drop \(count == 1 ? "it" : "them"), "
                    + "then make the change again on the documents as they are now.")
            } catch {
                // Kept: the person can see them (.status), change what they conflict with, and commit again.
                throw ShellError("commit failed, so nothing was applied: \(error). The \(count) change"
                    + "\(count == 1 ? " is" : "s are") still pending: commit again once the conflict is resolved, "
                    + "or rollback to drop \(count == 1 ? "it" : "them").")
            }
            pending.close()
            console.note("Committed \(count) change\(count == 1 ? "" : "s")"
                + (chosen.isEmpty ? "." : ":\n" + chosen.map { "  " + $0 }.joined(separator: "\n")))
        case .rollback:
            guard pending.isOpen else { throw ShellError("no transaction is open (begin starts one)") }
            let count = pending.count
            pending.close()
            failedInTransaction = nil
            statsCache = [:]
            console.note("Rolled back \(count) pending change\(count == 1 ? "" : "s").")
        case .command(let name, let arguments, let location):
            try await command(name, arguments, location: location, text: text)
        case .query(let expression) where expression.base == "it" && expression.steps.isEmpty:
            try showMore()
        case .query(let expression):
            try await query(expression, text: text)
        }
    }

    // MARK: Queries

    /// A query resolved against the store: its collection, the query, what it computes, and the step that runs it.
    struct Resolved {
        var query: Query<DocumentValue>
        /// What the query computes from its matches, printed as rows; `nil`: its documents (or what the step that
        /// runs it makes of them).
        var rows: Rows?
        var terminal: Step?
        var warnings: [Warning]
        var stats: FieldStats
        /// Whether a step (of the query or of a saved filter it starts from) includes or excludes documents.
        var filtered: Bool
    }

    /// What a query computes from its matches and prints as rows (groups, distinct values, an aggregate, some fields
    /// of each): a request, read and explained as any request is, whatever its elements.
    struct Rows: Sendable {
        let compute: @Sendable (ReadContext, Step?) throws -> Computed
        let explain: @Sendable (ReadContext) throws -> QueryExplanation

        /// The results of `request`, a row each as `row` makes it (a `noun` each); `first` or `count()` may end it.
        init<E>(_ request: Query<E>, noun: String, row: @escaping @Sendable (E) -> DocumentValue) {
            compute = { ctx, terminal in
                switch terminal {
                case .first?: return .one(try request.first(in: ctx).map(row), noun: noun)
                case .count?: return .count(try request.count(in: ctx))
                default: return .rows(try request.results(in: ctx).map(row), noun: noun)
                }
            }
            explain = { try request.explain(in: $0) }
        }

        /// The one value of `request` (an aggregate of every match), in a column named as it is written.
        init(value request: Query<DocumentValue>, column: String) {
            compute = { ctx, _ in .value(try request.value(in: ctx), column: column) }
            explain = { try request.explain(in: $0) }
        }

        /// Groups, a row each: the values grouped by, at their paths, and the aggregate in a column of its own.
        static func groups(_ request: Query<Group<[DocumentValue], DocumentValue>>, by paths: [FieldPath],
                           column: String) -> Rows {
            Rows(request, noun: "group") { Shell.row($0.key, by: paths, $0.value, column: column) }
        }
    }

    /// Finds the collection or saved filter a query starts from, and lowers its steps.
    func resolve(_ expression: QueryExpression) async throws -> Resolved {
        let (filters, names) = try await reading { ctx in
            (try ctx.savedFilters(), try ctx.collections().map(\.name))
        }
        let (start, steps) = try Shell.expand(expression, filters: filters)
        let collection = start.collection
        if let step = expression.steps.last, step.writesGivenDocuments {
            let verb = Parser.name(of: step).prefix { $0 != "(" }
            if collection != expression.base {
                throw MeaningError(message: "'\(expression.base)' is a saved filter, and \(verb) writes the documents "
                    + "given whatever a filter says: write \(collection).\(verb)(...)",
                    location: expression.baseLocation, length: expression.baseLength)
            }
            if steps.count > 1 {
                throw MeaningError(message: "\(verb) does not use the steps before it (it writes the documents given, "
                    + "whatever they select): write \(collection).\(verb)(...) alone",
                    location: expression.baseLocation, length: expression.baseLength)
            }
        }
        if !names.contains(collection) {
            if !steps.contains(where: \.createsCollection) {
                throw MeaningError(message: "no collection or saved filter is named '\(collection)'"
                    + (names.isEmpty ? " (the store is empty; insert creates a collection)" : ""),
                    location: expression.baseLocation, length: expression.baseLength,
                    suggestion: Suggest.closest(collection, in: names + filters.map(\.name)).map { "'\($0)'" })
            }
        }
        let stats = try await fieldStats(collection)
        var lowering = Lowering(collection: collection, stats: stats)
        var query = start
        var rows: Rows?
        // Groups take the steps after them (a slice, an order) until they are printed.
        var groups: (request: Query<Group<[DocumentValue], DocumentValue>>, by: [FieldPath], column: String)? {
            didSet { rows = groups.map { Rows.groups($0.request, by: $0.by, column: $0.column) } }
        }
        var terminal: Step?
        // The steps of saved filters come first: what they warn of is said of the filter, where its name is typed.
        let fromFilters = steps.count - expression.steps.count
        func sayOfTheFilter(_ lowering: inout Lowering) {
            lowering.warnings = lowering.warnings.map { w in
                Warning(message: "in the saved filter '\(expression.base)': \(w.message)",
                        location: expression.baseLocation, length: expression.baseLength, suggestion: nil)
            }
        }
        for path in start.fieldsRead {
            _ = lowering.known(PathReference(path: path, location: expression.baseLocation, length: expression.baseLength))
        }
        if fromFilters == 0 { sayOfTheFilter(&lowering) }   // else with the steps of filters kept as text
        for (position, step) in steps.enumerated() {
            if position == fromFilters && fromFilters > 0 { sayOfTheFilter(&lowering) }
            switch step {
            case .include(let node): query = query.include(try lowering.filter(node))
            case .exclude(let node): query = query.exclude(try lowering.filter(node))
            case .sortBy(let path, let order):
                _ = lowering.known(path)
                query = query.sortBy(path.path, order: order)
            case .reverse: query = query.reverse()
            case .slice(let range):
                // After groupBy, a slice of the groups.
                if let g = groups { groups?.request = g.request[range] } else { query = query[range] }
            case .aggregate(let call):
                lowering.aggregated(call)
                rows = Rows(value: query.aggregate(call.aggregate), column: call.written)
            case .explain where terminal == .count:
                rows = Rows(value: query.aggregate(.count), column: "count()")
                terminal = step
            case .distinct(let path):
                _ = lowering.known(path)
                rows = Rows(query.distinct(path.path), noun: "value") { Shell.row([$0], by: [path.path]) }
            case .groupBy(let paths, let call):
                for path in paths { _ = lowering.known(path) }
                lowering.aggregated(call)
                groups = (query.groupBy(paths.map(\.path), call.aggregate), paths.map(\.path), call.written)
            case .sortGroups(let by, let order):
                groups?.request = groups!.request.sortBy(by, order: order)
            case .select(let paths):
                for path in paths { _ = lowering.known(path) }
                rows = Rows(query.select(paths.map(\.path)), noun: "document") { $0 }
            default: terminal = step
            }
        }
        if fromFilters > 0 && fromFilters == steps.count { sayOfTheFilter(&lowering) }
        let filtered = start.hasConditions
            || steps.contains { if case .include = $0 { true } else if case .exclude = $0 { true } else { false } }
        return Resolved(query: query, rows: rows, terminal: terminal, warnings: lowering.warnings, stats: stats,
                        filtered: filtered)
    }

    /// The request a query starts from (a collection's documents, or a saved filter's), and the steps to lower
    /// onto it: the query's, after those of filters an older build kept as text. A filter that (through others)
    /// names itself is an error.
    static func expand(_ expression: QueryExpression, filters: [SavedFilter]) throws
        -> (start: Query<DocumentValue>, steps: [Step]) {
        var start = Query<DocumentValue>(expression.base)
        var steps = expression.steps
        var path = [expression.base]
        while let saved = filters.first(where: { $0.name == start.collection }) {
            guard let text = saved.legacyText else { return (saved.query, steps) }
            // Its text starts from another filter, or from the collection its record names (which a rename keeps).
            let base = try Parser.savedQuery(text)
            let next = filters.contains { $0.name == base.base } ? base.base : saved.collection
            guard !path.contains(next) else {
                throw ShellError("the saved filter '\(expression.base)' is built on itself ("
                    + (path + [next]).joined(separator: " on ") + "): .unsave one of them")
            }
            path.append(next)
            start = Query(next)
            steps = base.steps + steps
        }
        return (start, steps)
    }

    private func query(_ expression: QueryExpression, text: String) async throws {
        if let change = expression.steps.last(where: \.isChange) {
            // Refused before anything is looked up or asked.
            try requireStore().checkWritable(change.refusal(on: expression.base))
        }
        let resolved = try await resolve(expression)
        warn(resolved.warnings, in: text)
        let q = resolved.query
        if explainEach, resolved.terminal.map({ !$0.isChange }) ?? true, resolved.terminal != .explain {
            let plan = try await explanation(of: resolved)
            console.result(plan.lines.dropLast().joined(separator: "\n") + "\n")
        }
        let clock = ContinuousClock()
        let started = clock.now, answeredBefore = answering
        var statistics: QueryStatistics?
        switch resolved.terminal {
        case _ where resolved.terminal != .explain && resolved.rows != nil:
            try await showComputed(resolved)
        case nil, .results?:
            let (documents, stats) = try await reading { ctx in
                let cursor = try q.cursor(in: ctx)
                var documents: [DocumentValue] = []
                while let d = try cursor.next() { documents.append(d) }
                return (documents, cursor.statistics)
            }
            statistics = stats
            try show(documents)
        case .first?:
            show(try await reading { try q.first(in: $0) })
        case .last?:
            show(try await reading { try q.last(in: $0) })
        case .any?:
            show(try await reading { try q.any(in: $0) })
        case .count?:
            // The count is what the run returned.
            let stats = try await reading { try q.aggregate(.count).explain(in: $0).statistics }
            let n = stats.returned
            statistics = stats
            show(count: n)
        case .explain?:
            console.result(try await explanation(of: resolved).description + "\n")
        case .delete?:
            try await delete(q)
        case .update(let changes)?:
            try await update(q, changes)
        case .insert(let literal)?:
            try await write(literal, into: q.collection, replacing: false)
        case .save(let literal)?:
            try await write(literal, into: q.collection, replacing: true)
        case .findOrCreate(let literal)?:
            try await findOrCreate(q, literal, filtered: resolved.filtered)
        default:
            break
        }
        if timer {
            let waited = answering - answeredBefore
            var line = "Run Time: \(Shell.format(clock.now - started - waited))"
            if let s = statistics {
                line += ", \(s.entriesScanned) entries scanned, \(s.documentsRead) documents read"
                if resolved.terminal != .count { line += ", \(s.returned) returned" }
            }
            if waited > .zero { line += " (not counting \(Shell.format(waited)) waiting for an answer)" }
            console.note(line)
        }
    }

    /// Runs a query that computes something from its matches (a value, distinct values, groups, some fields of each)
    /// and prints it as rows.
    private func showComputed(_ resolved: Resolved) async throws {
        guard let compute = try Shell.computation(of: resolved) else { return }
        try show(try await reading(compute))
    }

    /// What a query prints when it is not a list of its documents: rows (groups, distinct values, projected
    /// documents), one row (a value, a first document or group), or a count.
    enum Computed: Sendable, Equatable {
        case rows([DocumentValue], noun: String)
        case one(DocumentValue?, noun: String)
        case value(DocumentValue, column: String)
        case count(Int)

        /// The rows, as `.export` writes them: a value or a count as a row of one column, named as it prints.
        var rows: [DocumentValue] {
            switch self {
            case .rows(let rows, _): return rows
            case .one(let row, _): return row.map { [$0] } ?? []
            case .value(let value, let column): return [.object([.init(column, value)])]
            case .count(let n): return [.object([.init("count", .int(Int64(n)))])]
            }
        }

        /// What a row is: a document, a group, a value.
        var noun: String {
            switch self {
            case .rows(_, let noun), .one(_, let noun): return noun
            case .value, .count: return "row"
            }
        }
    }

    /// What a watched query prints, as a request the store observes (redrawn when its value changes); equal only to
    /// itself.
    struct ComputedRequest: StoreRequest {
        let id = UUID()
        let compute: @Sendable (ReadContext) throws -> Computed

        static func == (a: ComputedRequest, b: ComputedRequest) -> Bool { a.id == b.id }
        func fetch(_ context: ReadContext) throws -> Computed { try compute(context) }
    }

    /// How to read what the query prints, in a read transaction, when it is not the list of its documents (`nil`
    /// then). A query that changes documents, or explains itself, prints no rows: it is an error.
    nonisolated static func computation(of resolved: Resolved) throws
        -> (@Sendable (ReadContext) throws -> Computed)? {
        let (q, terminal) = (resolved.query, resolved.terminal)
        if let step = terminal, step == .explain || step.isChange {
            throw ShellError("\(Parser.name(of: step)) gives no rows")
        }
        guard let rows = resolved.rows else {
            switch terminal {
            case nil, .results?: return nil
            case .first?: return { .one(try q.first(in: $0), noun: "document") }
            case .last?: return { .one(try q.last(in: $0), noun: "document") }
            case .any?: return { .one(try q.any(in: $0), noun: "document") }
            case .count?: return { .count(try q.count(in: $0)) }
            case let step?: throw ShellError("\(Parser.name(of: step)) gives no rows")
            }
        }
        return { try rows.compute($0, terminal) }
    }

    /// A row of computed values: `values` at the `paths` they were read from (nested as in the documents), then
    /// `value` in a column of its own named `column`, when there is one.
    nonisolated static func row(_ values: [DocumentValue], by paths: [FieldPath], _ value: DocumentValue? = nil,
                                column: String? = nil) -> DocumentValue {
        var row = DocumentValue.object([DocumentValue.Field]())
        for (path, v) in zip(paths, values) { row = row.setting(v, at: path) }
        if let value, let column { row = row.setting(value, at: FieldPath(components: [column])) }
        return row
    }

    /// How a query runs, or how what it computes is computed, then what running it took.
    func explanation(of resolved: Resolved) async throws -> QueryExplanation {
        let (q, rows) = (resolved.query, resolved.rows)
        return try await reading { try rows?.explain($0) ?? q.explain(in: $0) }
    }

    static func format(_ d: Duration) -> String {
        let ms = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        return ms < 1 ? String(format: "%.3f ms", ms) : (ms < 1000 ? String(format: "%.2f ms", ms)
            : String(format: "%.2f s", ms / 1000))
    }

    // MARK: Changes

    /// Counts what a delete will touch, asks, then deletes exactly those documents; asks again if they changed.
    private func delete(_ q: Query<DocumentValue>) async throws {
        let collection = q.collection
        try await changeMatches(of: q, verb: "delete", done: "deleted", preposition: "from") { ctx, id in
            try ctx.delete(collection, id: id)
        }
    }

    /// Counts what an update will touch, asks (saying what it changes), then changes exactly those documents by id;
    /// asks again if they changed.
    private func update(_ q: Query<DocumentValue>, _ changes: [FieldChange]) async throws {
        let collection = q.collection
        try await changeMatches(of: q, verb: "update", done: "updated", preposition: "of",
                                detail: changes.map(\.description).joined(separator: ", ")) { ctx, id in
            try ctx.update(collection, id: id, changes)
        }
    }

    /// A change to each document a query matches: takes them (their ids and bytes), asks "Delete 2 documents from
    /// people?" (with `detail`, what the change does, in the question and in `.status`), then `apply`s the change to
    /// exactly those documents, in one transaction (or as one pending change) that first checks they are still the
    /// documents asked about (``MatchedDocuments``); if they changed while the person answered, says so and asks
    /// again. Pending, the same check runs again at `commit`, over whatever other writers committed meanwhile.
    /// `apply` says whether it found the document.
    private func changeMatches(of q: Query<DocumentValue>, verb: String, done: String, preposition: String,
                               detail: String? = nil,
                               _ apply: @escaping @Sendable (WriteContext, DocumentValue) throws -> Bool) async throws {
        func what(_ n: Int) -> String { "\(n) document\(n == 1 ? "" : "s") \(preposition) \(q.collection)" }
        let made = try await askingAgain("The matching documents", look: {
            let matched = try await reading { try q.matchedDocuments(in: $0) }
            if matched.isEmpty {
                console.note("No document matches; nothing to \(verb).")
                return nil
            }
            let what = what(matched.count)
            return (matched, ChangeQuestion(
                text: "\(verb.prefix(1).uppercased() + verb.dropFirst()) \(what)" + (detail.map { " (\($0))" } ?? "") + "?",
                refusing: "\(verb) \(what)", declined: "Nothing was \(done)."))
        }, apply: { (matched: MatchedDocuments) in
            try await change("\(verb) \(what(matched.count)) (\(q))" + (detail.map { ": \($0)" } ?? "")) { ctx in
                try matched.requireUnchanged(in: ctx)
                return try matched.ids.filter { try apply(ctx, $0) }.count
            }
        })
        guard let (matched, changed) = made else { return }
        console.note(pending.isOpen ? "Pending: \(verb) \(what(matched.count))."
            : "\(done.prefix(1).uppercased() + done.dropFirst()) \(changed) document\(changed == 1 ? "" : "s").")
    }

    /// Inserts (or saves) one document or a list of them. Those without an id are given one by the store, in the
    /// transaction that writes them; a save that would replace documents asks first, as a delete does.
    private func write(_ literal: Literal, into collection: String, replacing: Bool) async throws {
        var documents: [DocumentValue]
        switch literal.value {
        case .object: documents = [literal.value]
        case .array(let list): documents = list
        default:
            throw MeaningError(message: "\(replacing ? "save" : "insert") takes a document ({...}) or a list of them",
                               location: literal.location, length: literal.length)
        }
        for d in documents {
            guard case .object = d else {
                throw MeaningError(message: "every document is an object ({...}), not \(d.literalText)",
                                   location: literal.location, length: literal.length)
            }
        }
        try await writeDocuments(documents, into: collection, replacing: replacing, from: nil)
    }

    /// The path of a collection's ids (`id` for a collection that does not exist yet).
    func idPath(of collection: String) async throws -> FieldPath {
        try await reading { ctx in try ctx.collections().first { $0.name == collection }?.idPath } ?? FieldPath("id")
    }

    /// Writes documents: inserts, or saves (`replacing`), which counts the documents it would replace, asks, and
    /// replaces exactly those, asking again if they changed meanwhile. `origin` is the file of an import.
    func writeDocuments(_ batch: [DocumentValue], into collection: String, replacing: Bool, from origin: String?)
        async throws {
        let idPath = try await idPath(of: collection)
        let ids = batch.compactMap { d in d[path: idPath].flatMap { $0 == .null ? nil : $0 } }
        let documents = DocumentBatch(count: batch.count, ids: ids) { body in
            for (i, d) in batch.enumerated() {
                if i % 1000 == 999 { try Task.checkCancellation() }   // Ctrl-C: the whole write is rolled back
                try body(d)
            }
        }
        try await writeDocuments(documents, into: collection, idPath: idPath, replacing: replacing, from: origin)
    }

    /// The key the store gives an id.
    nonisolated static func idKey(_ id: DocumentValue) -> [UInt8] {
        var key = KeyEncoder()
        key.append(id)
        return key.bytes
    }

    /// Writes a batch of documents as ``writeDocuments(_:into:replacing:from:)`` does, in one transaction, taking
    /// them one at a time from the batch (which may read them from a file as they are written).
    func writeDocuments(_ batch: DocumentBatch, into collection: String, idPath: FieldPath, replacing: Bool,
                        from origin: String?) async throws {
        let ids = batch.ids
        // Ids compared as the store keys them: `1` and `1.0` are one id there (the second would replace the first),
        // and a NaN is equal to itself.
        if Set(ids.map(Shell.idKey)).count != ids.count {
            throw ShellError("\(origin ?? "the documents") hold\(origin == nil ? "" : "s") two documents with the same id")
        }
        let showProgress = console.stderrIsTerminal && batch.count >= 5_000 && !pending.isOpen
        let n = batch.count
        let what = "\(n) document\(n == 1 ? "" : "s")"
        let verb = origin != nil ? "import" : (replacing ? "save" : "insert")
        let summary = "\(verb) \(what) into \(collection)" + (origin.map { " from \($0)" } ?? "")
        let written = try await askingAgain("The documents of \(collection)", look: {
            let replaced = replacing ? try await reading { try $0.matchedDocuments(collection, ids: ids) } : nil
            guard let replaced, !replaced.isEmpty else { return (replaced, nil) }
            let r = replaced.count
            let which = r <= 5 ? " (id\(r == 1 ? "" : "s") \(replaced.ids.map(\.literalText).joined(separator: ", ")))" : ""
            let question = origin != nil
                ? "Import \(what) into \(collection), replacing \(r) existing one\(r == 1 ? "" : "s")\(which)?"
                : "Replace \(r) existing document\(r == 1 ? "" : "s") of \(collection)\(which)?"
            return (replaced, ChangeQuestion(text: question,
                                             refusing: "replace \(r) document\(r == 1 ? "" : "s") of \(collection)",
                                             declined: origin != nil ? "Nothing was imported." : "Nothing was saved."))
        }, apply: { (replaced: MatchedDocuments?) in
            try await change(summary, chosen: { $0.chosenText }) { ctx in
                // Exactly the documents counted are replaced, as they were: if others now share ids with these,
                // or those changed, ask again.
                try replaced?.requireUnchanged(in: ctx)
                var stored = StoredIDs()
                var i = 0
                var k = 0   // the ids given so far, each the one counted when asked (a file read again may differ)
                try batch.forEach { d in
                    let id = d[path: idPath].flatMap { $0 == .null ? nil : $0 }
                    if let id {
                        guard k < ids.count, Shell.idKey(ids[k]) == Shell.idKey(id) else {
                            throw ShellError("\(origin ?? "the input") changed while it was written: document "
                                + "\(i + 1) has id \(id.literalText), not the one counted; nothing was written")
                        }
                        k += 1
                    }
                    let kept = replacing ? try ctx.saveAndFetch(d, into: collection) : try ctx.insertAndFetch(d, into: collection)
                    stored.add(kept[path: idPath] ?? .null, chosen: id == nil, of: n)
                    i += 1
                    if showProgress && i % 1000 == 0 { Progress.draw(label: "importing", done: i, total: n) }
                }
                guard i == n && k == ids.count else {
                    throw ShellError("\(origin ?? "the input") changed while it was written: \(i) documents instead "
                        + "of \(n); nothing was written")
                }
                if showProgress { Progress.draw(label: "importing", done: n, total: n) }
                return stored
            }.all
        })
        guard let (replaced, storedIDs) = written else { return }
        let replacedCount = replaced?.count ?? 0
        let replacedText = replacedCount == 0 ? "" : ", replacing \(replacedCount)"
        if pending.isOpen {
            let made = ids.count < n ? "; ids for those without one are chosen at commit" : ""
            console.note("Pending: \(verb) \(what)\(origin == nil ? Shell.idText(ids, of: n) : "")\(replacedText)\(made).")
        } else {
            let done = origin != nil ? "Imported" : (replacing ? "Saved" : "Inserted")
            let shownIDs = origin == nil && (n == 1 || ids.count < n) ? Shell.idText(storedIDs, of: n) : ""
            console.note("\(done) \(what)\(origin == nil ? "" : " into \(collection)")\(shownIDs)\(replacedText).")
        }
    }

    /// " (id 7)" or " (ids 7, 8, 9)" for a few documents, nothing for many.
    static func idText(_ ids: [DocumentValue], of count: Int) -> String {
        guard !ids.isEmpty, ids.count == count, count <= 5 else { return "" }
        return " (id\(count == 1 ? "" : "s") \(ids.map(\.literalText).joined(separator: ", ")))"
    }

    /// Documents to write, counted, with the ids they give; `forEach` hands them over one at a time.
    struct DocumentBatch: Sendable {
        var count: Int
        var ids: [DocumentValue]
        var forEach: @Sendable (_ body: (DocumentValue) throws -> Void) throws -> Void
    }

    /// The ids a write stored, as much of them as its notes show: every id of a few documents, and the first of
    /// those the store chose, with how many it chose.
    struct StoredIDs: Sendable {
        /// Every id, for five documents or fewer.
        var all: [DocumentValue] = []
        var chosen: [DocumentValue] = []
        var chosenCount = 0

        mutating func add(_ id: DocumentValue, chosen isChosen: Bool, of count: Int) {
            if count <= 5 { all.append(id) }
            guard isChosen else { return }
            chosenCount += 1
            if chosen.count < 5 { chosen.append(id) }
        }

        /// The ids the store chose for documents that had none, for the note after a commit.
        var chosenText: String? {
            guard chosenCount > 0 else { return nil }
            let shown = chosen.map(\.literalText).joined(separator: ", ")
            return "id\(chosenCount == 1 ? "" : "s") \(shown)" + (chosenCount > 5 ? " and \(chosenCount - 5) more" : "")
        }
    }

    private func findOrCreate(_ q: Query<DocumentValue>, _ literal: Literal, filtered: Bool) async throws {
        guard case .object = literal.value else {
            throw MeaningError(message: "findOrCreate takes the document to create ({...})",
                               location: literal.location, length: literal.length)
        }
        guard filtered else {
            throw MeaningError(message: "findOrCreate finds a document that its filter matches, and without one any "
                + "document matches: write \(q.collection).include(...).findOrCreate({...}), or insert({...}) to add "
                + "one whatever is there", location: literal.location, length: literal.length)
        }
        if let found = try await reading({ try q.first(in: $0) }) {
            console.result(renderer.render(found))
            console.note("Found; nothing was created.")
            return
        }
        let document = literal.value
        let collection = q.collection, inTransaction = pending.isOpen
        let (result, created) = try await change("findOrCreate in \(q.collection)",
                                                 chosen: { $0.created ? "created \($0.document.json())" : nil }) { ctx
            -> (document: DocumentValue, created: Bool) in
            var created = false
            let result = try q.findOrCreate(in: ctx) { created = true; return document }
            // Nothing was found when it was asked: in a transaction, a document found at commit was made by
            // another writer since, and the one shown as created would silently not be.
            guard created || !inTransaction else {
                throw DocStoreError(.changedSinceRead, "findOrCreate in '\(collection)' now finds a document another "
                    + "writer made since (\(result.json())): the one shown as created would not be", collection: collection)
            }
            return (result, created)
        }
        console.result(renderer.render(result))
        console.note(created ? (pending.isOpen ? "Pending: created (an id it lacks is chosen at commit)." : "Created.")
            : "Found; nothing was created.")
    }

    // MARK: Field statistics

    /// The fields of a collection, from up to 10,000 of its documents (in the state shown).
    func fieldStats(_ collection: String) async throws -> FieldStats {
        if let cached = statsCache[collection], pending.isEmpty,
           try await reading({ $0.commitNumber }) == cached.commit {
            return cached.stats
        }
        let (commit, stats) = try await reading { ctx in
            var stats = FieldStats()
            stats.total = try Query<DocumentValue>(collection).count(in: ctx)
            let sample = try Query<DocumentValue>(collection)[0..<FieldStats.sampleLimit].cursor(in: ctx)
            while let d = try sample.next() { stats.add(d) }
            return (ctx.commitNumber, stats)
        }
        if pending.isEmpty { statsCache[collection] = (commit, stats) }
        return stats
    }

    func refreshCompletions() async {
        guard store != nil else { completionWords = []; return }
        let words = try? await reading { ctx -> [String] in
            var words: [String] = []
            for info in try ctx.collections() {
                words.append(info.name)
                words += info.indexes.map(\.name)
            }
            words += try ctx.savedFilters().map(\.name)
            return words
        }
        var all = Set(words ?? [])
        for cached in statsCache.values { for p in cached.stats.paths { all.insert(p.written) } }
        completionWords = all.sorted()
    }
}

/// A pending change that failed when replayed for a query.
private struct PendingReplayFailed: Error {
    let underlying: any Error
}

extension Step {
    /// What the change would do to `collection`, in the words of a refusal: `delete documents from 'people'`.
    func refusal(on collection: String) -> String {
        switch self {
        case .delete: return "delete documents from '\(collection)'"
        case .update: return "update documents of '\(collection)'"
        case .insert: return "insert into '\(collection)'"
        case .save: return "save into '\(collection)'"
        case .findOrCreate: return "findOrCreate in '\(collection)'"
        default: return "change '\(collection)'"
        }
    }

    /// Whether the step writes the documents it is given (`insert`, `save`), whatever the steps before it select.
    var writesGivenDocuments: Bool {
        switch self {
        case .insert, .save: return true
        default: return false
        }
    }

    /// Whether the step makes its collection when it is missing.
    var createsCollection: Bool {
        switch self {
        case .insert, .save, .findOrCreate: return true
        default: return false
        }
    }

    /// Whether the step changes documents.
    var isChange: Bool {
        switch self {
        case .delete, .insert, .save, .findOrCreate, .update: return true
        default: return false
        }
    }
}

