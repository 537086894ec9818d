import Dispatch
import Foundation
import Synchronization

/// Ctrl-C at the terminal: ends the line or question being read, or else cancels the running statement.
final class Interrupts: Sendable {
    private let reader: LineReader
    private let current = Mutex<Task<Bool, Never>?>(nil)
    /// Kept alive for as long as the shell runs; set once, from `install`.
    nonisolated(unsafe) private var source: (any DispatchSourceSignal)?

    init(reader: LineReader) { self.reader = reader }

    /// Takes SIGINT from the default handler (which would end the process) and handles it here.
    func install() {
        signal(SIGINT, SIG_IGN)
        let signalSource = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        signalSource.setEventHandler { [self] in fire() }
        signalSource.resume()
        source = signalSource
    }

    /// The statement now running, cancelled by Ctrl-C unless a line is being read.
    func running(_ task: Task<Bool, Never>?) { current.withLock { $0 = task } }

    private func fire() {
        if reader.isReading {
            reader.interrupt()
        } else {
            current.withLock { $0?.cancel() }
        }
    }
}
