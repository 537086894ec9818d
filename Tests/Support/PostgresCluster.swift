import Foundation
import Synchronization

/// A PostgreSQL cluster of the tests' own: made with `initdb` in a temporary folder (as the `postgres` user when
/// the tests run as root, since the server refuses root), listening on loopback only, on a free port, and stopped
/// when the test process exits. A watchdog beside the server stops it within a second if the test process dies
/// without exiting cleanly, so no server outlives the tests.
///
/// The server binaries are looked for in `PATH` and in Debian's `/usr/lib/postgresql/<version>/bin`
/// (`scripts/setup` installs them). Without them, ``shared`` is an error that says so: the tests that need a
/// server skip (see ``isAvailable``), except under `CI=true`, where they fail.
public final class PostgresCluster: Sendable {
    public let port: Int
    let folder: String
    let binaries: String
    /// The user that runs the server's commands, when the tests run as root.
    let runAs: String?
    /// The server's settings beyond loopback and the socket folder.
    let settings: String

    /// The cluster, started by the first test that asks.
    public static func shared() throws -> PostgresCluster {
        try started.get()
    }

    /// Whether tests that need a server run: there are server binaries, or `CI=true` (where their absence is a
    /// failure, not a reason to skip).
    public static let isAvailable: Bool = ProcessInfo.processInfo.environment["CI"] == "true" || findBinaries() != nil

    /// Why tests that need a server are skipped.
    public static let skipReason = "no PostgreSQL server binaries (initdb, pg_ctl, postgres): install them "
        + "with scripts/setup (Debian's postgresql package), then run swift test again"

    /// A URL for a new, empty store: a schema of its own in the cluster's database.
    public func freshURL() -> String {
        "postgres://postgres@127.0.0.1:\(port)/postgres?schema=t_" + UUID().uuidString.prefix(13)
            .replacingOccurrences(of: "-", with: "").lowercased()
    }

    /// A URL on the cluster for a given schema.
    public func url(schema: String, user: String = "postgres", password: String? = nil,
                    database: String = "postgres") -> String {
        "postgres://\(user)\(password.map { ":" + $0 } ?? "")@127.0.0.1:\(port)/\(database)?schema=\(schema)"
    }

    private static let started: Result<PostgresCluster, any Error> = Result { try PostgresCluster() }

    /// A cluster of one test's own, for a test that stops the server: the others' go on undisturbed. It stops when
    /// the test process exits.
    public static func startOwn() throws -> PostgresCluster { try PostgresCluster() }

    /// A cluster as people run one, for the bench: every commit flushed to disk (`fsync` and full-page writes on,
    /// unlike the tests' cluster, which turns them off for speed), 256 MiB of shared buffers.
    public static func startDurable() throws -> PostgresCluster {
        try PostgresCluster(settings: "-c max_connections=300 -c shared_buffers=256MB")
    }

    /// Stops the server at once, as a crash would (`SIGQUIT` to the postmaster), and starts it again on the same
    /// port with a watchdog of its own; returns when it accepts connections again. No command is waited on: only
    /// signals, `/proc` and a socket.
    public func crashAndRestart() throws {
        let data = folder + "/data"
        guard let text = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8),
              let pid = text.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            throw ClusterError("the server's postmaster.pid cannot be read")
        }
        kill(pid, SIGQUIT)
        var waited = 0
        while FileManager.default.fileExists(atPath: "/proc/\(pid)") && waited < 30_000 { usleep(10_000); waited += 10 }
        try startServer(data: data)
    }

    /// Starts the server, with a watchdog that stops it when this process is gone, and waits until its port
    /// accepts connections (within 60 s).
    private func startServer(data: String) throws {
        let server = "\(binaries)/postgres -D \(data) -p \(port) -k \(folder) -c listen_addresses=127.0.0.1 \(settings)"
        let watchdog = "\(server) >> \(folder)/server.log 2>&1 & pid=$!; "
            + "while [ -d /proc/\(getpid()) ] && kill -0 $pid 2>/dev/null; do sleep 1; done; kill -INT $pid 2>/dev/null; "
            + "if [ ! -d /proc/\(getpid()) ]; then wait $pid; rm -rf \(folder); fi"
        _ = try Self.spawn(runAs: runAs, "/bin/sh", ["-c", watchdog])
        let deadline = Date().addingTimeInterval(60)
        while !Self.accepts(port: port) {
            if Date() > deadline {
                let log = (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? ""
                throw ClusterError("the tests' PostgreSQL server did not start within 60 s: \(log)")
            }
            usleep(100_000)
        }
    }

    /// Whether something accepts TCP connections on the loopback port.
    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private init(settings: String = "-c fsync=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB")
        throws {
        self.settings = settings
        guard let binaries = Self.findBinaries() else {
            throw ClusterError("the tests need PostgreSQL's server (initdb, pg_ctl, postgres) and none was found "
                + "in PATH or /usr/lib/postgresql/*/bin; scripts/setup installs it")
        }
        self.binaries = binaries
        let root = getuid() == 0
        runAs = root ? "postgres" : nil
        // As root, in /tmp: the `postgres` user must reach the folder, and TMPDIR may lie under root's home.
        let base = root ? URL(fileURLWithPath: "/tmp") : FileManager.default.temporaryDirectory
        folder = base.appendingPathComponent("docstore-pg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        if root { _ = try Self.run("/bin/chown", ["postgres:postgres", folder]) }
        port = try Self.freePort()
        let data = folder + "/data"
        try runServerCommand(binaries + "/initdb", ["-D", data, "-U", "postgres", "--auth-local=trust",
                                                    "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync",
                                                    "--no-instructions"], input: nil)
        // Loopback connections by the cluster's owner need no password; the tests' other users need theirs.
        let hba = "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
            + "local all all trust\n"
        try runServerCommand("/bin/sh", ["-c", "cat > \(data)/pg_hba.conf"], input: hba)
        // The server, and a watchdog that stops it when this process is gone.
        try startServer(data: data)
        // Accepting connections is not yet ready for them: pg_isready says when it is.
        let deadline = Date().addingTimeInterval(60)
        while (try? Self.run(binaries + "/pg_isready", ["-h", "127.0.0.1", "-p", "\(port)", "-q"])) != 0 {
            if Date() > deadline { throw ClusterError("the tests' PostgreSQL server is not ready after 60 s") }
            Thread.sleep(forTimeInterval: 0.1)
        }
        PostgresCluster.stopAtExit(data: data, folder: folder, binaries: binaries, runAs: runAs)
    }

    /// Runs SQL as the cluster's owner (`psql`), for a test's set-up: users, databases.
    public func psql(_ sql: String, database: String = "postgres") throws {
        let status = try Self.run(binaries + "/psql", ["-h", "127.0.0.1", "-p", "\(port)", "-U", "postgres", "-d",
                                                       database, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        if status != 0 { throw ClusterError("psql failed on: \(sql)") }
    }

    private func runServerCommand(_ path: String, _ arguments: [String], input: String?) throws {
        let process = try Self.spawn(runAs: runAs, path, arguments, input: input)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ClusterError("\(path) \(arguments.joined(separator: " ")) failed with status \(process.terminationStatus)")
        }
    }

    private static func spawn(runAs: String?, _ path: String, _ arguments: [String],
                              input: String? = nil) throws -> ChildProcess {
        let process = ChildProcess()
        if let runAs {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", runAs, "--", path] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: path)
            process.arguments = arguments
        }
        process.standardOutput = FileHandle.nullDevice
        let pipe = Pipe()
        if input != nil { process.standardInput = pipe }
        try process.run()
        if let input {
            pipe.fileHandleForWriting.write(Data(input.utf8))
            try pipe.fileHandleForWriting.close()
        }
        return process
    }

    @discardableResult
    private static func run(_ path: String, _ arguments: [String]) throws -> Int32 {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    static func findBinaries() -> String? {
        var candidates = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += versions.sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }.map { "/usr/lib/postgresql/\($0)/bin" }
        return candidates.first { dir in
            ["initdb", "pg_ctl", "postgres", "pg_isready", "psql"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: dir + "/" + $0)
            }
        }
    }

    /// A port no one listens on now, found by binding port 0.
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClusterError("no socket to find a free port") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa -> Bool in
                bind(fd, sa, length) == 0 && getsockname(fd, sa, &length) == 0
            }
        }
        guard bound else { throw ClusterError("cannot bind a loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static let exitState = Mutex<[(data: String, folder: String, binaries: String, runAs: String?)]>([])

    private static func stopAtExit(data: String, folder: String, binaries: String, runAs: String?) {
        let first = exitState.withLock { clusters in
            clusters.append((data, folder, binaries, runAs))
            return clusters.count == 1
        }
        guard first else { return }
        atexit {
            for state in PostgresCluster.exitState.withLock({ $0 }) where FileManager.default.fileExists(atPath: state.data) {
            let stop = ChildProcess()
            let arguments = [state.binaries + "/pg_ctl", "-D", state.data, "-m", "immediate", "-w", "stop"]
            if let runAs = state.runAs {
                stop.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
                stop.arguments = ["-u", runAs, "--"] + arguments
            } else {
                stop.executableURL = URL(fileURLWithPath: arguments[0])
                stop.arguments = Array(arguments.dropFirst())
            }
            stop.standardOutput = FileHandle.nullDevice
            stop.standardError = FileHandle.nullDevice
            try? stop.run()
            stop.waitUntilExit()
            try? FileManager.default.removeItem(atPath: state.folder)
            }
        }
    }
}

public struct ClusterError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
