// ChildProcess: the part of `Foundation.Process` the tests and the bench use, on posix_spawn.
//
// Foundation's `Process.run()` on Linux (swift-corelibs-foundation up to Swift 6.3.1) finds the highest open
// descriptor by reading /proc/self/fd and copying each entry's whole 256-byte name, which reads past the end of
// glibc's buffer when an entry ends it: a suite that starts many children crashes now and then inside `run()`
// ("Bad pointer dereference" in memcpy). This launcher asks glibc to close every descriptor above 2 in the child
// (posix_spawn_file_actions_addclosefrom_np) and never lists them.
//
// The configuration (executable, arguments, environment, directory, standard streams) is set before `run()`, from
// one task; after it, `isRunning`, `waitUntilExit()` and the termination properties may be used from any thread.

#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

public final class ChildProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String] = []
    /// The child's whole environment; nil passes this process's own.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// A `Pipe` (the child gets the end it needs; the parent closes that end once the child runs), a `FileHandle`,
    /// or nil for this process's own stream.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    public private(set) var processIdentifier: pid_t = 0
    private let ending = Mutex<Int32?>(nil)

    public init() {}

    deinit {
        // Reap a child that ended unwaited for, so that it does not stay a zombie for the rest of the run.
        if processIdentifier > 0, ending.withLock({ $0 == nil }) {
            var status: Int32 = 0
            _ = waitpid(processIdentifier, &status, WNOHANG)
        }
    }

    public func run() throws {
        guard let executable = executableURL?.path else { throw ChildProcessError("no executable given") }
        var attributes = posix_spawnattr_t()
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        // Default dispositions and an empty mask: the test runner may ignore or block signals a child must see.
        var allSignals = sigset_t(), noSignals = sigset_t()
        sigfillset(&allSignals)
        sigemptyset(&noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        // A process group of its own, as Foundation gives it: a Ctrl-C at the terminal stops the runner, not it.
        try check(posix_spawnattr_setpgroup(&attributes, 0), "posix_spawnattr_setpgroup")
        try check(posix_spawnattr_setflags(&attributes,
                                           Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP)),
                  "posix_spawnattr_setflags")

        var actions = posix_spawn_file_actions_t()
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [FileHandle] = []
        for (stream, target) in [(standardInput, Int32(0)), (standardOutput, 1), (standardError, 2)] {
            let handle: FileHandle
            switch stream {
            case nil: continue
            case let pipe as Pipe:
                handle = target == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                parentEnds.append(handle)
            case let given as FileHandle: handle = given
            default: throw ChildProcessError("a standard stream must be a Pipe or a FileHandle")
            }
            // Foundation's `FileHandle.nullDevice` has no descriptor (-1): the child opens /dev/null itself.
            if handle.fileDescriptor < 0 {
                try check(posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_RDWR, 0),
                          "posix_spawn_file_actions_addopen")
            } else {
                try check(posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, target),
                          "posix_spawn_file_actions_adddup2")
            }
        }
        guard let closeFrom = SpawnExtensions.addCloseFrom else {
            throw ChildProcessError("posix_spawn_file_actions_addclosefrom_np is not in this libc (glibc 2.34 or later)")
        }
        try check(closeFrom(&actions, 3), "posix_spawn_file_actions_addclosefrom_np")
        if let directory = currentDirectoryURL?.path {
            guard let addChdir = SpawnExtensions.addChdir else {
                throw ChildProcessError("posix_spawn_file_actions_addchdir_np is not in this libc")
            }
            try check(addChdir(&actions, directory), "posix_spawn_file_actions_addchdir_np")
        }

        let argv = CStringArray([executable] + arguments)
        let variables = environment ?? ProcessInfo.processInfo.environment
        let envp = CStringArray(variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv.pointers, envp.pointers)
        guard status == 0 else {
            throw ChildProcessError("cannot start \(executable): \(String(cString: strerror(status)))")
        }
        processIdentifier = pid
        for end in parentEnds { try? end.close() }
    }

    /// Whether the child has not ended yet (an ended child is reaped here, its status kept).
    public var isRunning: Bool {
        guard processIdentifier > 0 else { return false }
        return ending.withLock { ending in
            if ending != nil { return false }
            var status: Int32 = 0
            guard waitpid(processIdentifier, &status, WNOHANG) == processIdentifier else { return true }
            ending = status
            return false
        }
    }

    public func waitUntilExit() {
        guard processIdentifier > 0, ending.withLock({ $0 == nil }) else { return }
        // Waits without reaping, so that only `isRunning` and this, under the lock, ever reap.
        var info = siginfo_t()
        while waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
        ending.withLock { ending in
            guard ending == nil else { return }
            var status: Int32 = 0
            while waitpid(processIdentifier, &status, 0) == -1, errno == EINTR {}
            ending = status
        }
    }

    /// The exit code, or the number of the signal that ended the child (as `Foundation.Process` gives).
    public var terminationStatus: Int32 {
        let status = endingStatus()
        return exited(status) ? (status >> 8) & 0xff : status & 0x7f
    }

    public var terminationReason: Process.TerminationReason {
        exited(endingStatus()) ? .exit : .uncaughtSignal
    }

    public func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    private func endingStatus() -> Int32 {
        guard let status = ending.withLock({ $0 }) else {
            preconditionFailure("the child process has not ended: wait for it first")
        }
        return status
    }

    private func exited(_ status: Int32) -> Bool { status & 0x7f == 0 }

    private func check(_ status: Int32, _ call: String) throws {
        guard status == 0 else { throw ChildProcessError("\(call) failed: \(String(cString: strerror(status)))") }
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// glibc extensions that Swift's Glibc module does not import, resolved at run time.
public enum SpawnExtensions {
    public typealias AddChdir = @convention(c) (
        UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    public typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// posix_spawn_file_actions_addchdir_np (glibc >= 2.29).
    public static var addChdir: AddChdir? {
        symbol("posix_spawn_file_actions_addchdir_np").map { unsafeBitCast($0, to: AddChdir.self) }
    }

    /// posix_spawn_file_actions_addclosefrom_np (glibc >= 2.34).
    public static var addCloseFrom: AddCloseFrom? {
        symbol("posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: AddCloseFrom.self) }
    }

    private static func symbol(_ name: String) -> UnsafeMutableRawPointer? {
        // A null path gives the global symbol scope of the running program, libc included.
        guard let handle = dlopen(nil, RTLD_NOW) else { return nil }
        defer { dlclose(handle) }
        return dlsym(handle, name)
    }
}

/// A NUL-terminated array of C strings that lives as long as this value.
public final class CStringArray {
    public let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    public init(_ strings: [String]) {
        count = strings.count
        pointers = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() {
            pointers[index] = strdup(string)
        }
        pointers[strings.count] = nil
    }

    deinit {
        for index in 0..<count { free(pointers[index]) }
        pointers.deallocate()
    }
}
