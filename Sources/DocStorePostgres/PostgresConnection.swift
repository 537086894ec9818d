import CLibPQ
import DocStore
import Foundation

/// One libpq connection, used by one thread at a time: statements sent and answered in turn, keys and values in
/// PostgreSQL's binary format (a `bytea` travels as its bytes, with no hex in between).
final class PostgresConnection {
    private let raw: OpaquePointer
    /// The server as errors name it: `host:port/database`.
    let server: String
    /// The names of the statements prepared on this connection (``execute(_:_:_:)``).
    private var prepared: Set<String> = []
    /// A statement sent by ``send(_:)`` whose answer has not been read.
    private var unanswered = false

    /// Connects, or throws ``PostgresError`` with libpq's reason. `conninfo` is a URI or `key=value` pairs.
    init(conninfo: String, server: String) throws {
        guard let raw = PQconnectdb(conninfo) else {
            throw PostgresError(server: server, message: "libpq could not allocate a connection", sqlState: nil,
                                connectionLost: true)
        }
        // Before `self` is whole: a throw after that would run `deinit`, which finishes the connection again.
        guard PQstatus(raw) == CONNECTION_OK else {
            let why = String(cString: PQerrorMessage(raw)).trimmingCharacters(in: .whitespacesAndNewlines)
            PQfinish(raw)
            throw PostgresError(server: server, message: why, sqlState: nil, connectionLost: true)
        }
        self.raw = raw
        self.server = server
    }

    deinit { PQfinish(raw) }

    /// Whether the connection is still up, as far as libpq knows.
    var isUp: Bool { PQstatus(raw) == CONNECTION_OK }

    /// Runs `sql` (one statement or several, separated by semicolons, with no parameters) and returns the last
    /// statement's result; results come as text.
    @discardableResult
    func execute(_ sql: String) throws -> PostgresResult {
        try readUnanswered()
        return try check(PQexec(raw, sql))
    }

    /// Sends `sql` without waiting for its answer, which is read (and any error in it thrown) before the next
    /// statement: for the `COMMIT` that ends a read, which nothing waits on.
    func send(_ sql: String) throws {
        try readUnanswered()
        guard PQsendQuery(raw, sql) == 1 else { throw lostError() }
        unanswered = true
    }

    private func readUnanswered() throws {
        guard unanswered else { return }
        unanswered = false
        var failure: (any Error)?
        while let result = PQgetResult(raw) {
            do { try check(result) } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// Runs the statement named `name`, preparing it from `sql` the first time, with `values` (bytes the caller
    /// owns for the call's length), then `integers` (each a `bigint`), as its parameters in that order, all in
    /// binary; the result comes in binary too.
    @discardableResult
    func execute(_ name: String, _ sql: @autoclosure () -> String, _ values: [UnsafeRawBufferPointer],
                 integers: [Int] = []) throws -> PostgresResult {
        let count = values.count + integers.count
        try readUnanswered()
        if !prepared.contains(name) {
            try check(PQprepare(raw, name, sql(), Int32(count), nil))
            prepared.insert(name)
        }
        var numbers: [UInt8] = []
        for n in integers {
            for shift in stride(from: 56, through: 0, by: -8) { numbers.append(UInt8(truncatingIfNeeded: Int64(n) >> shift)) }
        }
        let result = numbers.withUnsafeBytes { numbers -> OpaquePointer? in
            var pointers: [UnsafePointer<CChar>?] = []
            var lengths: [Int32] = []
            pointers.reserveCapacity(count)
            lengths.reserveCapacity(count)
            for bytes in values {
                // libpq reads a null pointer as SQL NULL: an empty value needs an address of its own.
                pointers.append(bytes.baseAddress.map { $0.assumingMemoryBound(to: CChar.self) } ?? PostgresConnection.empty)
                lengths.append(Int32(bytes.count))
            }
            for i in integers.indices {
                pointers.append(numbers.baseAddress!.advanced(by: 8 * i).assumingMemoryBound(to: CChar.self))
                lengths.append(8)
            }
            let formats = [Int32](repeating: 1, count: count)
            return PQexecPrepared(raw, name, Int32(count), pointers, lengths, formats, 1)
        }
        return try check(result)
    }

    /// Forgets the statements whose names start with `prefix` (their tables are gone), on the server too.
    func forgetStatements(withPrefix prefix: String) {
        try? readUnanswered()
        for name in prepared where name.hasPrefix(prefix) {
            prepared.remove(name)
            PQclear(PQexec(raw, "DEALLOCATE \"\(name)\""))
        }
    }

    /// The pending notifications (`LISTEN`), after reading what the server has sent.
    func notifications() throws -> [String] {
        guard PQconsumeInput(raw) == 1 else { throw lostError() }
        var channels: [String] = []
        while let notice = PQnotifies(raw) {
            channels.append(String(cString: notice.pointee.relname))
            PQfreemem(notice)
        }
        return channels
    }

    /// The socket, to wait on for notifications.
    var socket: Int32 { PQsocket(raw) }

    // Never written: the one byte a zero-length value points at.
    nonisolated(unsafe) private static let empty: UnsafePointer<CChar> = {
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        p.initialize(to: 0)
        return UnsafePointer(p)
    }()

    private func lostError() -> PostgresError {
        PostgresError(server: server, message: String(cString: PQerrorMessage(raw))
            .trimmingCharacters(in: .whitespacesAndNewlines), sqlState: nil, connectionLost: true)
    }

    @discardableResult
    private func check(_ result: OpaquePointer?) throws -> PostgresResult {
        guard let result else { throw lostError() }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return PostgresResult(raw: result)
        default:
            let state = PQresultErrorField(result, 67).map { String(cString: $0) }   // 'C': PG_DIAG_SQLSTATE
            var message = PQresultErrorField(result, 77).map { String(cString: $0) }   // 'M': the primary message
                ?? String(cString: PQresultErrorMessage(result))
            if let detail = PQresultErrorField(result, 68).map({ String(cString: $0) }) { message += " (\(detail))" }
            PQclear(result)
            let lost = PQstatus(raw) != CONNECTION_OK
            if lost, state == nil { throw lostError() }
            throw PostgresError(server: server, message: message.trimmingCharacters(in: .whitespacesAndNewlines),
                                sqlState: state, connectionLost: lost)
        }
    }
}

/// A statement's answer, freed when released. Binary values point into it.
final class PostgresResult {
    private let raw: OpaquePointer

    fileprivate init(raw: OpaquePointer) { self.raw = raw }
    deinit { PQclear(raw) }

    var rowCount: Int { Int(PQntuples(raw)) }

    /// The rows a statement changed (`INSERT 0 1` says 1).
    var affected: Int { Int(String(cString: PQcmdTuples(raw))) ?? 0 }

    /// A value's bytes, as the server sent them.
    @inline(__always)
    func bytes(_ row: Int, _ column: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: PQgetvalue(raw, Int32(row), Int32(column)),
                               count: Int(PQgetlength(raw, Int32(row), Int32(column))))
    }

    /// A value sent as text, read as a whole number (`nil` for NULL or anything else).
    func textInteger(_ row: Int, _ column: Int) -> Int? {
        guard PQgetisnull(raw, Int32(row), Int32(column)) == 0 else { return nil }
        return Int(String(cString: PQgetvalue(raw, Int32(row), Int32(column))))
    }

    func text(_ row: Int, _ column: Int) -> String? {
        guard PQgetisnull(raw, Int32(row), Int32(column)) == 0 else { return nil }
        return String(cString: PQgetvalue(raw, Int32(row), Int32(column)))
    }

    /// A `bigint` or `integer` sent in binary.
    func binaryInteger(_ row: Int, _ column: Int) -> Int {
        let b = bytes(row, column)
        var n: Int64 = 0
        for byte in b { n = n << 8 | Int64(byte) }
        return b.count == 4 ? Int(Int32(truncatingIfNeeded: n)) : Int(n)
    }
}

/// What the server or libpq answered, with the server named.
struct PostgresError: Error, CustomStringConvertible {
    let server: String
    let message: String
    /// The five-character SQLSTATE, when the server sent one.
    let sqlState: String?
    /// The connection is gone (the server stopped or restarted, the network dropped it).
    let connectionLost: Bool

    /// A conflict with a concurrent transaction, which a new run of the transaction can get past.
    var isConflict: Bool { sqlState == "40001" || sqlState == "40P01" }

    var description: String {
        "PostgreSQL at \(server): \(message)" + (sqlState.map { " [SQLSTATE \($0)]" } ?? "")
    }
}
