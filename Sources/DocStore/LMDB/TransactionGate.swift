import Foundation
import Synchronization

/// What lets this process's read transactions run side by side with each other and with its writer, and what
/// keeps them apart where LMDB requires it.
///
/// - Readers (read transactions, and copies, which hold one) pass the gate together. What needs no transaction of
///   the process open (a new map size, closing the environment, a database deleted, as its handle is closed at
///   once) passes it alone: it waits for the readers in, and readers that come meanwhile wait for it. It never
///   waits while holding a transaction open, so that no reader it waits for waits for it.
/// - Opening a database (`mdb_dbi_open`) is one transaction's at a time, from the open until that transaction ends,
///   as LMDB requires: ``keySpaces`` is held meanwhile. A reader that opens one (a collection first read in this
///   process) may so wait for a writer that opened one, and the other way round; no other read waits.
final class TransactionGate: @unchecked Sendable {
    // @unchecked: `readers`, `alone` and `waitingAlone` are guarded by `condition`.
    private let condition = NSCondition()
    private var readers = 0
    private var alone = false
    private var waitingAlone = 0
    /// Held by the transaction that opened a database, until it ends.
    let keySpaces = NSLock()
    /// The databases open in the process, by name, as transactions that opened them committed: what a read beside
    /// others looks up instead of calling `mdb_dbi_open`, which reads LMDB's table of names while a writer may
    /// change it.
    private let openNames = Mutex<[String: UInt32]>([:])

    func openName(_ name: String) -> UInt32? { openNames.withLock { $0[name] } }

    /// The name of the open database `dbi`, if it is open in the process.
    func name(of dbi: UInt32) -> String? { openNames.withLock { $0.first { $0.value == dbi }?.key } }

    /// Every database open in the process now, by name.
    func openNamesNow() -> [String: UInt32] { openNames.withLock { $0 } }

    func opened(_ names: [(String, UInt32)]) {
        openNames.withLock { for (name, dbi) in names { $0[name] = dbi } }
    }

    /// A database deleted: its handle is closed.
    func closed(_ dbi: UInt32) {
        openNames.withLock { names in names = names.filter { $0.value != dbi } }
    }

    /// Lets a reader in: it waits only while something passes alone, or waits to.
    func enter() {
        condition.lock()
        while alone || waitingAlone > 0 { condition.wait() }
        readers += 1
        condition.unlock()
    }

    func leave() {
        condition.lock()
        readers -= 1
        if readers == 0 { condition.broadcast() }
        condition.unlock()
    }

    /// Waits until no reader is in and nothing else passes alone, then keeps every reader out until ``endAlone()``.
    func beginAlone() {
        condition.lock()
        waitingAlone += 1
        while alone || readers > 0 { condition.wait() }
        waitingAlone -= 1
        alone = true
        condition.unlock()
    }

    func endAlone() {
        condition.lock()
        alone = false
        condition.broadcast()
        condition.unlock()
    }

    /// Runs `body` alone.
    func alone<R>(_ body: () throws -> R) rethrows -> R {
        beginAlone()
        defer { endAlone() }
        return try body()
    }
}
