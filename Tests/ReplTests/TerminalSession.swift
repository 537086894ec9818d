// TerminalSession: a small pseudo-terminal driver for tests.
//
// It starts a program on a fresh pseudo-terminal that becomes the program's
// controlling terminal (the child is a new session leader), so the program
// sees exactly what it would see when a user runs it in a terminal emulator:
// isatty() is true, readline switches to raw mode and echoes, and typing
// Ctrl-C (byte 0x03) makes the kernel's line discipline send SIGINT to the
// foreground process group.
//
// Linux/glibc only. Notes on the glibc interfaces used:
// - openpty() lives in libc.so.6 since glibc 2.34 (no -lutil needed) and is
//   visible to Swift's Glibc module. posix_openpt/grantpt/unlockpt/ptsname are
//   hidden from Swift by feature-test macros (_XOPEN_SOURCE), so they are not
//   used.
// - POSIX_SPAWN_SETSID (0x80 in <spawn.h>, glibc >= 2.26) is a GNU extension
//   that Swift does not import, so its value is spelled out below. glibc's
//   __spawni_child calls setsid() before it runs the file actions, so opening
//   the slave path (without O_NOCTTY) in a file action makes it the new
//   session's controlling terminal.
// - posix_spawn_file_actions_addchdir_np (glibc >= 2.29) and
//   posix_spawn_file_actions_addclosefrom_np (glibc >= 2.34) are GNU
//   extensions Swift does not import either; they are looked up with dlsym.
//
// Not thread-safe: use one session from one task at a time. The class is
// deliberately not Sendable.

#if canImport(Glibc)
import Glibc
import TestSupport
#else
#error("TerminalSession supports Linux with glibc only")
#endif

/// Errors thrown by `TerminalSession`. The description is meant to be read in
/// a test failure message.
enum TerminalSessionError: Error, CustomStringConvertible {
    /// A system call failed.
    case systemCall(String, errno: Int32)
    /// posix_spawn failed (for example the executable or the directory does not exist).
    case spawnFailed(executable: String, directory: String?, errno: Int32)
    /// The text did not appear within the timeout.
    case expectTimedOut(pattern: String, timeout: Double, recentOutput: String)
    /// The process exited (or closed the terminal) before the text appeared.
    case exitedBeforeMatch(pattern: String, status: Int32?, recentOutput: String)
    /// The process did not exit within the timeout.
    case exitTimedOut(timeout: Double, recentOutput: String)
    /// The terminal is closed: the session was terminated, or the program
    /// closed its side of the terminal.
    case terminalClosed(String)

    var description: String {
        switch self {
        case let .systemCall(call, errno):
            return "TerminalSession: \(call) failed: \(TerminalSessionError.describe(errno: errno))"
        case let .spawnFailed(executable, directory, errno):
            let place = directory.map { " in directory \($0)" } ?? ""
            return "TerminalSession: cannot start \(executable)\(place): \(TerminalSessionError.describe(errno: errno))"
        case let .expectTimedOut(pattern, timeout, recentOutput):
            return """
                TerminalSession: expected text \(TerminalSessionError.quote(pattern)) did not appear \
                within \(timeout) s.
                \(recentOutput)
                """
        case let .exitedBeforeMatch(pattern, status, recentOutput):
            let how = status.map { "the process exited with status \($0)" }
                ?? "the process closed the terminal"
            return """
                TerminalSession: expected text \(TerminalSessionError.quote(pattern)) did not appear: \
                \(how) first.
                \(recentOutput)
                """
        case let .exitTimedOut(timeout, recentOutput):
            return """
                TerminalSession: the process did not exit within \(timeout) s.
                \(recentOutput)
                """
        case let .terminalClosed(detail):
            return "TerminalSession: the terminal is closed (\(detail))."
        }
    }

    static func describe(errno code: Int32) -> String {
        if let message = strerror(code) {
            return "\(String(cString: message)) (errno \(code))"
        }
        return "errno \(code)"
    }

    static func quote(_ text: String) -> String {
        "\"" + TerminalSession.visible(Array(text.utf8)) + "\""
    }
}

final class TerminalSession {
    /// Process id of the started program (a session and process-group leader).
    let processID: pid_t
    /// Path of the terminal's slave side as the program sees it, e.g. /dev/pts/3.
    let terminalPath: String

    private var masterFD: Int32
    /// Decoded output: escape sequences, CR, BEL and NUL removed.
    private var cleaned: [UInt8] = []
    private var filter = EscapeFilter()
    /// Offset in `cleaned` just past the last successful `expect` match.
    private var matchEnd = 0
    /// Set once the master side reports EOF/EIO: no process holds the terminal open any more.
    private var outputClosed = false
    /// Exit status (exit code, or 128 + signal) once the process has been reaped.
    private var exitStatus: Int32?

    static let columns: UInt16 = 120
    static let rows: UInt16 = 40

    /// Starts `executable` with `arguments` on a new pseudo-terminal that becomes
    /// its controlling terminal (new session via setsid), with `environment`
    /// merged over a minimal one (TERM=xterm, HOME, PATH, LANG=C.UTF-8),
    /// working directory `directory`, and a 120x40 window.
    ///
    /// An `executable` without a slash is looked up in this process's PATH.
    init(
        executable: String,
        arguments: [String],
        environment: [String: String] = [:],
        directory: String? = nil
    ) throws {
        // 1. The pseudo-terminal pair, with the window size set on it.
        var master: Int32 = -1
        var slave: Int32 = -1
        var size = winsize(ws_row: Self.rows, ws_col: Self.columns, ws_xpixel: 0, ws_ypixel: 0)
        guard openpty(&master, &slave, nil, nil, &size) == 0 else {
            throw TerminalSessionError.systemCall("openpty", errno: errno)
        }
        // The parent's copy of the slave is only needed until the child has
        // opened its own; closing it lets reads on the master report EOF once
        // the program (and anything it started) has let go of the terminal.
        defer { close(slave) }
        var ownsMaster = true
        defer { if ownsMaster { close(master) } }

        // Keep both descriptors out of any other child process.
        guard fcntl(master, F_SETFD, FD_CLOEXEC) == 0, fcntl(slave, F_SETFD, FD_CLOEXEC) == 0 else {
            throw TerminalSessionError.systemCall("fcntl(F_SETFD)", errno: errno)
        }
        let flags = fcntl(master, F_GETFL)
        guard flags >= 0, fcntl(master, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw TerminalSessionError.systemCall("fcntl(O_NONBLOCK)", errno: errno)
        }
        var nameBuffer = [CChar](repeating: 0, count: 256)
        let nameStatus = ttyname_r(slave, &nameBuffer, nameBuffer.count)
        guard nameStatus == 0 else {
            throw TerminalSessionError.systemCall("ttyname_r", errno: nameStatus)
        }
        let slavePath = String(decoding: nameBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) },
                               as: UTF8.self)

        // 2. Spawn attributes: new session, default signal dispositions and an
        //    empty signal mask (a test runner may ignore or block SIGINT, which
        //    the child would otherwise inherit).
        var attributes = posix_spawnattr_t()
        guard posix_spawnattr_init(&attributes) == 0 else {
            throw TerminalSessionError.systemCall("posix_spawnattr_init", errno: errno)
        }
        defer { posix_spawnattr_destroy(&attributes) }
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        let spawnFlags = Self.spawnSetSID | Int32(POSIX_SPAWN_SETSIGDEF) | Int32(POSIX_SPAWN_SETSIGMASK)
        let flagStatus = posix_spawnattr_setflags(&attributes, Int16(spawnFlags))
        guard flagStatus == 0 else {
            throw TerminalSessionError.systemCall("posix_spawnattr_setflags", errno: flagStatus)
        }

        // 3. File actions, run by glibc after setsid(): open the slave by path
        //    as fd 0 without O_NOCTTY (so it becomes the controlling terminal),
        //    then copy it to 1 and 2.
        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else {
            throw TerminalSessionError.systemCall("posix_spawn_file_actions_init", errno: errno)
        }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var actionStatus = posix_spawn_file_actions_addopen(&actions, 0, slavePath, O_RDWR, 0)
        if actionStatus == 0 { actionStatus = posix_spawn_file_actions_adddup2(&actions, 0, 1) }
        if actionStatus == 0 { actionStatus = posix_spawn_file_actions_adddup2(&actions, 0, 2) }
        if actionStatus == 0, let closeFrom = SpawnExtensions.addCloseFrom {
            // Drop any descriptor the test process leaked without FD_CLOEXEC.
            actionStatus = closeFrom(&actions, 3)
        }
        if actionStatus == 0, let directory {
            guard let addChdir = SpawnExtensions.addChdir else {
                throw TerminalSessionError.systemCall("posix_spawn_file_actions_addchdir_np (not in this libc)",
                                                      errno: ENOSYS)
            }
            actionStatus = addChdir(&actions, directory)
        }
        guard actionStatus == 0 else {
            throw TerminalSessionError.systemCall("posix_spawn_file_actions", errno: actionStatus)
        }

        // 4. argv and envp as NUL-terminated C arrays.
        var merged: [String: String] = [
            "TERM": "xterm",
            "HOME": Self.inheritedVariable("HOME") ?? "/",
            "PATH": Self.inheritedVariable("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
        ]
        merged.merge(environment) { _, given in given }
        let argv = CStringArray([executable] + arguments)
        let envp = CStringArray(merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })

        var pid: pid_t = 0
        let spawnStatus: Int32
        if executable.contains("/") {
            spawnStatus = posix_spawn(&pid, executable, &actions, &attributes, argv.pointers, envp.pointers)
        } else {
            spawnStatus = posix_spawnp(&pid, executable, &actions, &attributes, argv.pointers, envp.pointers)
        }
        guard spawnStatus == 0 else {
            throw TerminalSessionError.spawnFailed(executable: executable, directory: directory, errno: spawnStatus)
        }

        ownsMaster = false
        masterFD = master
        processID = pid
        terminalPath = slavePath
    }

    deinit {
        terminate()
    }

    // MARK: Typing

    /// Writes the UTF-8 bytes of `text` to the terminal, as if typed.
    ///
    /// Type only once the program waits for input (expect its prompt first):
    /// text that arrives before readline has switched the terminal to raw mode
    /// is echoed by the kernel and then again by readline.
    func send(_ text: String) throws {
        try write(Array(text.utf8))
    }

    /// Types `text` followed by Return (a carriage return, as a terminal sends).
    func sendLine(_ text: String) throws {
        try write(Array(text.utf8) + [0x0D])
    }

    /// Types Ctrl-C (0x03): with the default terminal settings the kernel sends
    /// SIGINT to the foreground process group; readline shows it as ^C.
    ///
    /// Unlike ordinary characters, which wait in the terminal's input queue
    /// until the program reads them, the signal takes effect at once. So this
    /// first waits, like a person looking at the screen, until the output has
    /// been quiet for 50 ms (at most 1 s), for two reasons:
    /// - bash 5.2's readline can miss a SIGINT that arrives while it is still
    ///   redrawing (after printing a prompt or an echo, before it waits for the
    ///   next key): it prints ^C but then sits without a new prompt until the
    ///   next key is pressed;
    /// - the kernel discards terminal output not yet read when it sends the
    ///   signal (ISIG without NOFLSH), so it is read first.
    func sendControlC() throws {
        waitForQuietOutput(quietFor: 0.05, timeout: 1)
        try write([0x03])
    }

    /// Types Ctrl-D (0x04): end of file at the start of a line.
    func sendControlD() throws {
        try write([0x04])
    }

    /// Types Tab (0x09), e.g. for readline completion.
    func sendTab() throws {
        try write([0x09])
    }

    // MARK: Reading

    /// Passes over the output read so far: the next `expect` returns only
    /// what is read after this.
    func skipOutputSoFar() {
        matchEnd = cleaned.count
    }

    /// Reads output until `text` appears after the end of the previous match,
    /// and returns the (escape-stripped) output from there up to and including
    /// the match. Matching is done on the output with escape sequences, CR, BEL
    /// and NUL removed. Throws if the text does not appear within `timeout`
    /// seconds or the program exits (closes the terminal) first.
    @discardableResult
    func expect(_ text: String, timeout: Double = 10) throws -> String {
        let pattern = Array(text.utf8)
        let deadline = Self.now() + timeout
        var searchFrom = matchEnd
        while true {
            if let range = Self.find(pattern, in: cleaned, from: searchFrom) {
                let consumed = String(decoding: cleaned[matchEnd..<range.upperBound], as: UTF8.self)
                matchEnd = range.upperBound
                return consumed
            }
            // Nothing before this point can start a match any more.
            searchFrom = max(matchEnd, cleaned.count - pattern.count + 1)

            if outputClosed || reap() != nil {
                // The program is gone (or has closed the terminal): take what
                // is still buffered, then give up if the text is not there.
                drainAfterExit()
                if let range = Self.find(pattern, in: cleaned, from: searchFrom) {
                    let consumed = String(decoding: cleaned[matchEnd..<range.upperBound], as: UTF8.self)
                    matchEnd = range.upperBound
                    return consumed
                }
                if outputClosed, exitStatus == nil {
                    // Closing the terminal usually means exiting: give it a moment.
                    _ = try? waitForExit(timeout: 0.5)
                }
                throw TerminalSessionError.exitedBeforeMatch(
                    pattern: text, status: exitStatus, recentOutput: recentOutputReport())
            }

            let remaining = deadline - Self.now()
            if remaining <= 0 {
                throw TerminalSessionError.expectTimedOut(
                    pattern: text, timeout: timeout, recentOutput: recentOutputReport())
            }
            // Short slices so that an exit is noticed even while a grandchild
            // keeps the terminal open.
            pump(timeoutMilliseconds: Int32(min(remaining, 0.05) * 1000) + 1)
        }
    }

    /// Reads output until none has arrived for `quietFor` seconds, or until
    /// `timeout` seconds have passed, or the terminal is closed.
    func waitForQuietOutput(quietFor quiet: Double = 0.05, timeout: Double = 1) {
        let deadline = Self.now() + timeout
        var lastOutput = Self.now()
        while masterFD >= 0, !outputClosed {
            let now = Self.now()
            let wait = min(lastOutput + quiet - now, deadline - now)
            if wait <= 0 { return }
            var descriptor = pollfd(fd: masterFD, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, Int32(wait * 1000) + 1) > 0, drainAvailable() > 0 {
                lastOutput = Self.now()
            }
        }
    }

    /// All output so far, with ANSI/VT100 escape sequences, CR, BEL and NUL removed.
    var transcript: String {
        drainAvailable(atMost: .max)
        return String(decoding: cleaned, as: UTF8.self)
    }

    // MARK: Process lifetime

    /// Waits up to `timeout` seconds for the program to exit, reading its
    /// output meanwhile, and returns its exit status, or 128 + the signal
    /// number if a signal killed it (-1 if the status was lost because
    /// something else reaped the process).
    @discardableResult
    func waitForExit(timeout: Double = 10) throws -> Int32 {
        let deadline = Self.now() + timeout
        while true {
            if let status = reap() {
                drainAfterExit()
                return status
            }
            let remaining = deadline - Self.now()
            if remaining <= 0 {
                throw TerminalSessionError.exitTimedOut(timeout: timeout, recentOutput: recentOutputReport())
            }
            if outputClosed {
                usleep(5_000)
            } else {
                pump(timeoutMilliseconds: Int32(min(remaining, 0.02) * 1000) + 1)
            }
        }
    }

    /// Ends the session: closes the terminal (a hangup, as when a terminal
    /// window is closed), SIGKILLs the program if it is still running and
    /// every other process left in its session (background jobs, anything it
    /// started that did not start a session of its own), and reaps the
    /// program. Safe to call more than once; called from deinit. `transcript`
    /// stays readable afterwards.
    func terminate() {
        let running = exitStatus == nil && reap() == nil
        if masterFD >= 0 {
            drainAvailable(atMost: .max)
            close(masterFD)
            masterFD = -1
            outputClosed = true
        }
        if running {
            // Not reaped yet, so the pid (and session id) is still ours.
            kill(processID, SIGKILL)
        }
        killSessionMembers(includingLeader: running)
        guard running else { return }
        var status: Int32 = 0
        var result: pid_t
        repeat {
            result = waitpid(processID, &status, 0)
        } while result == -1 && errno == EINTR
        exitStatus = result == processID ? Self.decode(waitStatus: status) : -1
    }

    // MARK: - Internals

    /// GNU extension flag from <spawn.h>; not imported into Swift.
    private static let spawnSetSID: Int32 = 0x80

    private func write(_ bytes: [UInt8]) throws {
        guard masterFD >= 0 else { throw TerminalSessionError.terminalClosed("the session was terminated") }
        var offset = 0
        let deadline = Self.now() + 10
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { buffer in
                Glibc.write(masterFD, buffer.baseAddress, buffer.count)
            }
            if written > 0 {
                offset += written
                // Keep the output flowing as a terminal emulator would: the
                // kernel drops echo characters when its output queue is full.
                drainAvailable()
                continue
            }
            let code = errno
            if written < 0, code == EINTR { continue }
            if written < 0, code == EAGAIN || code == EWOULDBLOCK {
                // The terminal's input queue is full. Keep reading its output so
                // a program blocked on writing can make progress, then retry.
                if Self.now() > deadline {
                    throw TerminalSessionError.terminalClosed(
                        "input not consumed for 10 s, \(bytes.count - offset) bytes left to write")
                }
                var descriptor = pollfd(fd: masterFD, events: Int16(POLLOUT | POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 50)
                if descriptor.revents & Int16(POLLIN) != 0 { drainAvailable() }
                continue
            }
            throw TerminalSessionError.terminalClosed(
                "write failed: \(TerminalSessionError.describe(errno: code))")
        }
    }

    /// Waits up to `timeoutMilliseconds` for output, then reads everything available.
    private func pump(timeoutMilliseconds: Int32) {
        guard masterFD >= 0, !outputClosed else { return }
        var descriptor = pollfd(fd: masterFD, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, timeoutMilliseconds)
        if ready > 0 {
            drainAvailable()
        }
    }

    /// Reads the output available right now, without waiting, and returns
    /// the number of bytes read. While matching it stops after 64 KiB: a
    /// program that writes as fast as this reads would otherwise keep it
    /// reading to the end, and a match would be seen only then.
    @discardableResult
    private func drainAvailable(atMost limit: Int = 64 * 1024) -> Int {
        guard masterFD >= 0, !outputClosed else { return 0 }
        var chunk = [UInt8](repeating: 0, count: 8192)
        var total = 0
        while total < limit {
            let count = chunk.withUnsafeMutableBytes { buffer in
                read(masterFD, buffer.baseAddress, buffer.count)
            }
            if count > 0 {
                filter.feed(chunk[0..<count], into: &cleaned)
                total += count
                continue
            }
            if count == 0 {
                outputClosed = true
                return total
            }
            switch errno {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                return total
            default:
                // EIO: every slave descriptor is closed and the buffered output
                // has been read (the program exited).
                outputClosed = true
                return total
            }
        }
        return total
    }

    /// After the program has exited: collect its last output. The kernel hands
    /// pty output to the master asynchronously, so when something else (a
    /// background grandchild) keeps the terminal open and no EOF arrives, wait
    /// until the output has been quiet for a short while.
    private func drainAfterExit() {
        let deadline = Self.now() + 1
        while masterFD >= 0, !outputClosed, Self.now() < deadline {
            var descriptor = pollfd(fd: masterFD, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) > 0, drainAvailable(atMost: .max) > 0 || outputClosed else { return }
        }
    }

    /// SIGKILLs every live process whose session id is the program's pid, found
    /// through /proc. Processes that started sessions of their own (daemons)
    /// are out of reach. The session id cannot be reused while any member of
    /// the session exists; once the program has been reaped, a process whose
    /// pid equals it is skipped, as that pid may have been reused.
    private func killSessionMembers(includingLeader: Bool) {
        for _ in 0..<50 {
            var killed = false
            guard let directory = opendir("/proc") else { return }
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard let pid = pid_t(name), pid != getpid() else { continue }
                if pid == processID, !includingLeader { continue }
                guard let (state, session) = Self.stateAndSession(of: pid),
                      session == processID, state != UInt8(ascii: "Z") else { continue }
                kill(pid, SIGKILL)
                killed = true
            }
            closedir(directory)
            if !killed { return }
            usleep(2_000)  // let the kills land, then look for late forks
        }
    }

    /// Process state and session id from /proc/<pid>/stat
    /// ("pid (comm) state ppid pgrp session ...").
    private static func stateAndSession(of pid: pid_t) -> (UInt8, pid_t)? {
        let descriptor = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0, let close = buffer[0..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 3, let state = fields[0].first,
              let session = pid_t(String(decoding: fields[3], as: UTF8.self)) else { return nil }
        return (state, session)
    }

    /// Non-blocking reap; returns the exit status once the process has exited.
    private func reap() -> Int32? {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        let result = waitpid(processID, &status, WNOHANG)
        if result == processID {
            exitStatus = Self.decode(waitStatus: status)
        } else if result == -1, errno == ECHILD {
            // Someone else reaped it (e.g. SIGCHLD ignored): status unknown.
            exitStatus = -1
        }
        return exitStatus
    }

    /// WIFEXITED/WEXITSTATUS/WTERMSIG are macros Swift does not import.
    private static func decode(waitStatus status: Int32) -> Int32 {
        let signal = status & 0x7F
        if signal == 0 { return (status >> 8) & 0xFF }   // exited normally
        return 128 + signal                               // killed by a signal
    }

    private func recentOutputReport() -> String {
        let limit = 2000
        let unmatched = cleaned.count - matchEnd
        let start = max(matchEnd, cleaned.count - limit)
        var report = "--- output since the last match (\(unmatched) bytes; escape sequences stripped, "
        report += "control characters shown as ^X)"
        if start > matchEnd { report += ", last \(cleaned.count - start) bytes" }
        report += " ---\n"
        report += Self.visible(Array(cleaned[start...]))
        report += "\n--- end of output ---"
        return report
    }

    /// Renders bytes as text, showing control characters other than newline and tab as ^X.
    static func visible(_ bytes: [UInt8]) -> String {
        var shown: [UInt8] = []
        shown.reserveCapacity(bytes.count)
        for byte in bytes {
            switch byte {
            case 0x0A, 0x09:
                shown.append(byte)
            case 0x00..<0x20:
                shown.append(UInt8(ascii: "^"))
                shown.append(byte + 0x40)
            case 0x7F:
                shown.append(contentsOf: Array("^?".utf8))
            default:
                shown.append(byte)
            }
        }
        return String(decoding: shown, as: UTF8.self)
    }

    private static func find(_ pattern: [UInt8], in haystack: [UInt8], from start: Int) -> Range<Int>? {
        let start = max(start, 0)
        guard !pattern.isEmpty else { return start..<start }
        guard haystack.count - start >= pattern.count else { return nil }
        let first = pattern[0]
        var index = start
        let lastStart = haystack.count - pattern.count
        while index <= lastStart {
            if haystack[index] == first {
                var offset = 1
                while offset < pattern.count, haystack[index + offset] == pattern[offset] { offset += 1 }
                if offset == pattern.count { return index..<(index + pattern.count) }
            }
            index += 1
        }
        return nil
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1_000_000_000
    }

    private static func inheritedVariable(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        return String(cString: value)
    }
}

extension TerminalSession {
    /// Incremental filter that removes terminal control sequences from a byte
    /// stream: CSI (ESC [ ... final byte, which covers colours, cursor motion and
    /// the bracketed-paste toggles ESC[?2004h / ESC[?2004l), OSC and the other
    /// string sequences (ESC ] / P / X / ^ / _ ... terminated by BEL or ESC \),
    /// two- and three-byte ESC sequences (ESC =, ESC 7, ESC ( B, ESC O P, ...), plus CR,
    /// BEL and NUL. Sequences split across reads are handled. Other bytes,
    /// including backspace and UTF-8 text, pass through unchanged.
    struct EscapeFilter {
        private enum State {
            case ground, escape, escapeIntermediate, singleShift, controlSequence, string, stringEscape
        }

        private var state = State.ground

        mutating func feed<Bytes: Sequence>(_ bytes: Bytes, into output: inout [UInt8]) where Bytes.Element == UInt8 {
            for byte in bytes {
                consume(byte, into: &output)
            }
        }

        private mutating func consume(_ byte: UInt8, into output: inout [UInt8]) {
            let escapeByte: UInt8 = 0x1B
            // CAN (0x18) and SUB (0x1A) abort a sequence.
            switch state {
            case .ground:
                switch byte {
                case escapeByte: state = .escape
                case 0x0D, 0x07, 0x00: break  // CR, BEL, NUL
                default: output.append(byte)
                }
            case .escape:
                switch byte {
                case UInt8(ascii: "["): state = .controlSequence
                case UInt8(ascii: "]"), UInt8(ascii: "P"), UInt8(ascii: "X"), UInt8(ascii: "^"), UInt8(ascii: "_"):
                    state = .string
                case 0x20...0x2F: state = .escapeIntermediate
                case UInt8(ascii: "N"), UInt8(ascii: "O"): state = .singleShift  // SS2/SS3 + one character
                case escapeByte: state = .escape
                case 0x18, 0x1A: state = .ground
                case 0x00..<0x20:
                    // A control character inside an escape sequence takes effect on
                    // its own; the sequence continues.
                    if byte != 0x0D, byte != 0x07, byte != 0x00 { output.append(byte) }
                default: state = .ground  // ESC + final byte (ESC =, ESC 7, ESC M, ...)
                }
            case .escapeIntermediate:
                switch byte {
                case 0x20...0x2F: break
                case escapeByte: state = .escape
                default: state = .ground
                }
            case .singleShift:
                state = byte == escapeByte ? .escape : .ground
            case .controlSequence:
                switch byte {
                case 0x40...0x7E: state = .ground  // final byte
                case escapeByte: state = .escape
                case 0x18, 0x1A: state = .ground
                default: break  // parameters, intermediates, stray controls
                }
            case .string:
                switch byte {
                case 0x07: state = .ground
                case escapeByte: state = .stringEscape
                case 0x18, 0x1A: state = .ground
                default: break
                }
            case .stringEscape:
                if byte == UInt8(ascii: "\\") {
                    state = .ground  // ST
                } else {
                    // ESC not followed by '\': the string ended; this ESC starts a new sequence.
                    state = .escape
                    consume(byte, into: &output)
                }
            }
        }
    }
}
