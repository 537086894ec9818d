import CLibPQ
import DocStore
import Foundation

/// One libpq connection, used by one thread at a time: statements sent and answered in turn, keys and values in
/// PostgreSQL's binary format (a `bytea` travels as its bytes, with no hex in between).
final class PostgresConnection {
    private let raw: OpaquePointer
    /// The server as errors name it: `host:port/database`.
    let server: String
    /// The statements prepared on this connection (``execute(_:_:_:)``), by name, with their text.
    private var prepared: [String: String] = [:]

    /// The name a statement is prepared under on the server: its own, or a hash of it for one longer than the
    /// server keeps (63 bytes), which would share its first 63 bytes with others.
    private static func serverName(_ name: String) -> String {
        guard name.utf8.count > 63 else { return name }
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325   // FNV-1a
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        return String(name.prefix(40)) + "_h" + String(hash, radix: 16)
    }
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
        try settle()
        return try check(PQexec(raw, sql))
    }

    /// Sends `sql` without waiting for its answer, which is read (and any error in it thrown) before the next
    /// statement: for the `COMMIT` that ends a read, which nothing waits on.
    func send(_ sql: String) throws {
        try readUnanswered()
        try settle()
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
    /// binary; the result comes in binary too. Statements sent ahead (``sendAhead(_:_:_:integers:then:)``) go in
    /// the same round trip, before it.
    @discardableResult
    func execute(_ name: String, _ sql: @autoclosure () -> String, _ values: [UnsafeRawBufferPointer],
                 integers: [Int] = []) throws -> PostgresResult {
        try readUnanswered()
        waits += 1
        if !ahead.isEmpty {
            var answer: PostgresResult?
            try sendAhead(name, sql(), values, integers: integers) { answer = $0 }
            try settle()
            guard let answer else { throw lostError() }
            return answer
        }
        let server = PostgresConnection.serverName(name)
        if prepared[name] == nil {
            let text = sql()
            try check(PQprepare(raw, server, text, Int32(values.count + integers.count), nil))
            prepared[name] = text
        }
        return try check(withParameters(values, integers) { count, pointers, lengths, formats in
            PQexecPrepared(raw, server, count, pointers, lengths, formats, 1)
        })
    }

    /// What was sent ahead and not yet read, in order: a statement prepared, or one run with what to do with its
    /// answer.
    private enum Ahead {
        case prepared(String)
        case statement((PostgresResult) -> Void)
    }
    private var ahead: [Ahead] = []
    /// At most this many statements wait unread: past it they are read, so that the answers waiting in the socket
    /// never fill it while the statements are still being sent.
    private static let aheadLimit = 512

    /// Sends a statement as ``execute(_:_:_:integers:)`` does, without waiting: the server runs it in order, and its
    /// answer goes to `then` when the next statement that waits is answered, or at ``settle()``. For the writes of a
    /// transaction, whose answers only a count needs. An error in it is thrown by the call that reads it.
    func sendAhead(_ name: String, _ sql: @autoclosure () -> String, _ values: [UnsafeRawBufferPointer],
                   integers: [Int] = [], then: @escaping (PostgresResult) -> Void) throws {
        try beginAhead()
        let server = PostgresConnection.serverName(name)
        if prepared[name] == nil {
            let text = sql()
            guard PQsendPrepare(raw, server, text, Int32(values.count + integers.count), nil) == 1 else {
                throw sendFailed()
            }
            prepared[name] = text
            ahead.append(.prepared(name))
        }
        let sent = withParameters(values, integers) { count, pointers, lengths, formats in
            PQsendQueryPrepared(raw, server, count, pointers, lengths, formats, 1)
        }
        guard sent == 1 else { throw sendFailed() }
        try queued(.statement(then))
    }

    /// Sends a statement with no parameters and no answer to read (`SAVEPOINT`, `RELEASE SAVEPOINT`) ahead, as
    /// ``sendAhead(_:_:_:integers:then:)`` does.
    func sendAhead(_ sql: String) throws {
        try beginAhead()
        guard PQsendQueryParams(raw, sql, 0, nil, nil, nil, nil, 0) == 1 else { throw sendFailed() }
        try queued(.statement({ _ in }))
    }

    /// Enters pipeline mode for the first statement sent ahead.
    private func beginAhead() throws {
        try readUnanswered()
        if ahead.isEmpty {
            guard PQenterPipelineMode(raw) == 1 else { throw lostError() }
        }
    }

    /// Notes a statement sent ahead; past ``aheadLimit`` unread ones, reads them.
    private func queued(_ item: Ahead) throws {
        ahead.append(item)
        if ahead.count >= PostgresConnection.aheadLimit { try settle() }
    }

    /// How many times the connection waited for the server (a statement run, or those sent ahead read): its round
    /// trips, but for those of `execute(_:)`.
    private(set) var waits = 0

    /// Reads the answers of the statements sent ahead, in order, handing each to its `then`; throws the first
    /// error among them (the statements after it did not run). Every other call that waits settles first.
    func settle() throws {
        guard !ahead.isEmpty else { return }
        waits += 1
        let sent = ahead
        ahead = []
        var failure: (any Error)?
        defer { PQexitPipelineMode(raw) }
        guard PQpipelineSync(raw) == 1 else { throw lostError() }
        for item in sent {
            // Each statement's answer is one result, then a null.
            guard let result = PQgetResult(raw) else { failure = failure ?? lostError(); break }
            while let extra = PQgetResult(raw) { PQclear(extra) }
            let aborted = PQresultStatus(result) == PGRES_PIPELINE_ABORTED
            if aborted { PQclear(result) }
            switch item {
            case .prepared(let name):
                if aborted { prepared[name] = nil; continue }
                do { try check(result) } catch { prepared[name] = nil; failure = failure ?? error }
            case .statement(let then):
                if aborted { continue }
                do { then(try check(result)) } catch { failure = failure ?? error }
            }
            if !isUp { failure = failure ?? lostError(); break }
        }
        if isUp, let sync = PQgetResult(raw) { PQclear(sync) }
        if let failure { throw failure }
    }

    /// The error for a statement libpq could not send ahead: the connection is gone, and pipeline mode is left
    /// when nothing else was sent, so that the next statement may wait for its answer.
    private func sendFailed() -> PostgresError {
        let error = lostError()
        if ahead.isEmpty { PQexitPipelineMode(raw) }
        return error
    }

    /// Calls `body` with the parameters in libpq's form: `values` in binary, then `integers` as 8-byte `bigint`s.
    private func withParameters<R>(_ values: [UnsafeRawBufferPointer], _ integers: [Int],
                                   _ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> R) -> R {
        let count = values.count + integers.count
        var numbers: [UInt8] = []
        for n in integers {
            for shift in stride(from: 56, through: 0, by: -8) { numbers.append(UInt8(truncatingIfNeeded: Int64(n) >> shift)) }
        }
        return numbers.withUnsafeBytes { numbers in
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
            return body(Int32(count), pointers, lengths, [Int32](repeating: 1, count: count))
        }
    }

    /// Forgets the statements whose text names `table` (the table is gone), on the server too.
    func forgetStatements(naming table: String) {
        try? readUnanswered()
        try? settle()
        for (name, text) in prepared
        where text.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") }).contains(Substring(table)) {
            prepared[name] = nil
            PQclear(PQexec(raw, "DEALLOCATE \"\(PostgresConnection.serverName(name))\""))
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
    var columnCount: Int { Int(PQnfields(raw)) }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(raw, Int32(row), Int32(column)) != 0 }

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
