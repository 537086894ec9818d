import DocStore
import Foundation

/// `docstore`: the shell. Parses its arguments, opens the store, then reads statements from the terminal (with
/// readline) or from a pipe.
@main
@MainActor
enum DocStoreShell {
    static let usage = """
        usage: docstore [options] [PATH | URL] [STATEMENT ...]
          PATH            the store to open (created when missing)
          URL             a store kept in PostgreSQL (its tables created when missing):
                          postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME] (schema docstore unless
                          given; without a password, libpq's PGPASSWORD or ~/.pgpass gives it)
          STATEMENT       run these statements, then exit
        options:
          --demo          open a new store of sample people to try things on
          --cmd TEXT      run TEXT first (may be given more than once)
          --batch         read statements without a terminal's features, even at a terminal
          --bail          stop at the first error
          --yes           answer yes to confirmations (needed for deletes without a terminal)
          --readonly      open the store read-only: queries work, every change is refused
          --exclusive     keep the store to this shell while it is open: another process's opening of it is
                          refused (and this one is, while another process has it open)
          --check         check an existing store's file structure before opening it (the default; a store
                          kept in PostgreSQL is checked with pg_amcheck instead)
          --no-check      open an existing store without first checking its file's structure (the check reads
                          every page once, and refuses a damaged file instead of crashing on it later; then
                          `docstore FILE .recover NEW` copies what can still be read into a new store)
          --help          this text
        """

    static func main() async {
        var path: String?
        var statements: [String] = []
        var commands: [String] = []
        var demo = false, batch = false, bail = false, yes = false, readOnly = false, checkFiles = true
        var exclusive = false
        var checkAsked = false
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            switch argument {
            case "--demo", "-demo": demo = true
            case "--batch", "-batch": batch = true
            case "--bail", "-bail": bail = true
            case "--yes", "-yes", "-y": yes = true
            case "--readonly", "-readonly": readOnly = true
            case "--exclusive", "-exclusive": exclusive = true
            case "--check", "-check": (checkFiles, checkAsked) = (true, true)
            case "--no-check", "-no-check": checkFiles = false
            case "--help", "-help", "-h":
                Console.write(1, usage + "\n")
                exit(0)
            case "--cmd", "-cmd":
                guard let text = arguments.popFirst() else { fail("--cmd needs a statement") }
                commands.append(text)
            default:
                if argument.hasPrefix("-") && argument.count > 1 { fail("unknown option \(argument)") }
                if path == nil && !demo { path = argument } else { statements.append(argument) }
            }
        }
        let interactive = isatty(0) == 1 && !batch && statements.isEmpty
        let console = Console(interactive: interactive)
        let shell = Shell(console: console, assumeYes: yes, readOnly: readOnly, checkFiles: checkFiles,
                          exclusive: exclusive)
        shell.bail = bail
        if demo {
            do {
                let demoPath = try await Demo.create()
                path = demoPath
                console.note("A demo store of 1000 people, indexed by age, city and age, email (unique) and tags, "
                    + "in \(demoPath); it is removed on exit (.export keeps data). Try:\n"
                    + "  people.include(age >= 18 && city == \"Oslo\").sortBy(age, .reverse)[0..<5]")
            } catch {
                fail("cannot create the demo store: \(error)")
            }
        }
        if let path, checkAsked, Shell.isServerURL(path) { fail("\(Shell.needsFile("--check", tool: "--check"))") }
        if let path, !Shell.isServerURL(path), (commands + statements).first?.hasPrefix(".recover") == true {
            shell.unopenedPath = path   // a damaged file is read by the recovery alone
        } else if let path {
            do {
                try await shell.open(path: path)
            } catch let error as DocStoreError where error.code == .damagedFile {
                fail("\(error)\n(docstore \(path) .recover NEW copies every document that can still be read into a new "
                    + "store)")
            } catch {
                fail("\(error)")
            }
        } else if interactive {
            console.note("No store is open: .open PATH (or a postgres:// URL) opens one, or run docstore --demo.")
        }
        // At a terminal, confirmations and Ctrl-C work from the first statement on, --cmd ones included.
        let terminal = interactive ? Terminal(shell) : nil
        var failed = false
        for text in commands + statements {
            let ok: Bool
            if let terminal {
                await terminal.runStatement(text)
                ok = !shell.hadError
            } else {
                ok = await shell.execute(text)
            }
            if !ok {
                failed = true
                if bail { break }
            }
            if shell.exitCode != nil { break }
        }
        if statements.isEmpty && shell.exitCode == nil && !(failed && bail) {
            if let terminal {
                await terminal.run()
            } else if await !batchLoop(shell) {
                failed = true
            }
        }
        if shell.pending.isOpen && !shell.pending.isEmpty {
            console.error("warning: \(shell.pending.count) pending change\(shell.pending.count == 1 ? " was" : "s were") "
                + "not committed and \(shell.pending.count == 1 ? "is" : "are") dropped")
            failed = true   // (a script that ends with its changes dropped did not do what it says)
        }
        await shell.close()
        try? console.redirect(to: nil)
        Demo.removeFolder()
        exit(shell.exitCode ?? (failed ? 1 : 0))
    }

    static func fail(_ message: String) -> Never {
        Console.write(2, "docstore: \(message)\n")
        exit(1)
    }

    /// Statements from a pipe or file, one per line (more while brackets are open). Returns false after an error.
    static func batchLoop(_ shell: Shell) async -> Bool {
        var ok = true
        var text = ""
        var lineNumber = 0
        var firstLine = 1
        // The first line is read without the C library's buffer, so that a dump (docstore NEW < dump) can be
        // read on from the descriptor, whole.
        let first = Shell.rawFirstLine()
        if let first, Shell.isDumpHeader(first) { return await shell.restoreInput(firstLine: first) }
        var pendingFirst = first
        while let line = pendingFirst ?? Swift.readLine(strippingNewline: true) {
            pendingFirst = nil
            lineNumber += 1
            if text.isEmpty { firstLine = lineNumber }
            text += (text.isEmpty ? "" : "\n") + line
            if Shell.needsMore(text) { continue }
            if !(await shell.execute(text, firstLine: firstLine)) {
                ok = false
                if shell.bail { return false }
            }
            text = ""
            if shell.exitCode != nil { return ok }
        }
        if !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
           !(await shell.execute(text, firstLine: firstLine)) { ok = false }
        return ok
    }

}

/// The terminal: readline, Ctrl-C, and confirmations asked at the prompt.
@MainActor
final class Terminal {
    let shell: Shell
    let reader: LineReader
    let interrupts: Interrupts
    private var presenter: Task<Void, Never>?

    init(_ shell: Shell) {
        self.shell = shell
        reader = LineReader(historyPath: LineReader.defaultHistoryPath())
        interrupts = Interrupts(reader: reader)
        interrupts.install()
        let reader = reader
        shell.endQuestionRead = { reader.interrupt() }
        presenter = Task { @MainActor in
            for await question in shell.confirmations.questions {
                guard question.isPending else { continue }
                switch await reader.readLine(prompt: question.input + " [y/N] ", addToHistory: false) {
                case .line(let answer):
                    let yes = ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased())
                    question.answer(with: yes)
                case .interrupted, .endOfInput:
                    question.cancel()
                }
            }
        }
    }

    deinit { presenter?.cancel() }

    /// Reads and runs statements until Ctrl-D, `.exit`, or Ctrl-C twice at an empty prompt.
    func run() async {
        // A store kept in PostgreSQL is named, as the store goes by it: its URL without a password.
        let on = shell.isOnServer ? " on \(shell.store?.path ?? "")" : ""
        shell.console.note("DocStore shell\(on): .help for help, Ctrl-D or .exit to leave.")
        var interruptedAtEmptyPrompt = false
        while shell.exitCode == nil {
            LineReader.completions.withLock { $0 = shell.completionWords }
            var text = ""
            var input = await reader.readLine(prompt: shell.prompt)
            while case .line(let line) = input {
                text += (text.isEmpty ? "" : "\n") + line
                guard Shell.needsMore(text) else { break }
                input = await reader.readLine(prompt: "   ...> ")
            }
            switch input {
            case .endOfInput:
                if !text.isEmpty { await shell.execute(text) }
                if await mayLeave() { return }
                continue
            case .interrupted(let hadText):
                if hadText || !text.isEmpty {
                    interruptedAtEmptyPrompt = false
                } else if interruptedAtEmptyPrompt {
                    // (As Ctrl-D and .exit do: pending changes are not dropped without asking.)
                    if await mayLeave() { return }
                    interruptedAtEmptyPrompt = false
                } else {
                    interruptedAtEmptyPrompt = true
                    shell.console.note("(Ctrl-C again at an empty prompt, Ctrl-D or .exit to leave)")
                }
                continue
            case .line:
                interruptedAtEmptyPrompt = false
            }
            await runStatement(text)
        }
    }

    /// Whether Ctrl-D may end the shell: with changes pending, only once the person agrees to drop them (or types
    /// Ctrl-D again at the question).
    func mayLeave() async -> Bool {
        let count = shell.pending.count
        guard shell.pending.isOpen, count > 0 else { return true }
        let changes = "\(count) pending change\(count == 1 ? "" : "s")"
        let leave: Bool
        switch await reader.readLine(prompt: "Leave and drop \(changes)? [y/N] ", addToHistory: false) {
        case .line(let answer): leave = ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased())
        case .endOfInput: leave = true
        case .interrupted: leave = false
        }
        guard leave else {
            shell.console.note("Still in the transaction: commit keeps the \(changes), rollback drops "
                + "\(count == 1 ? "it" : "them").")
            return false
        }
        shell.pending.close()
        shell.console.note("Dropped \(changes) (not committed).")
        return true
    }

    /// Runs one statement as a task that Ctrl-C cancels.
    func runStatement(_ text: String) async {
        let shell = shell
        let task = Task { @MainActor in await shell.execute(text) }
        interrupts.running(task)
        _ = await task.value
        interrupts.running(nil)
    }
}
