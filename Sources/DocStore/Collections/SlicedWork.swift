import Foundation
import Synchronization

/// Work on many items that needs no transaction (encoding documents, changing their bytes), made on several threads
/// at once when the items are many, while the calling thread uses each result in the items' order as soon as it and
/// every result before it is made (writes them, in the transaction only it may use).
enum SlicedWork {
    /// Makes `work` of each of `count` items and hands each result to `consume`, in the items' order, on the calling
    /// thread. With `threads` above 1 and at least `least` items (64, unless the caller knows its items to be
    /// cheaper), helper threads make units of items too (a sixteenth of the items, 16 to `unit`): new threads, which
    /// cost tens of microseconds to start. The calling thread makes units while the next result it needs is not made
    /// yet; each thread has its own `state` from `start`. When `consume` throws, no new unit is begun, and the helpers
    /// are joined before the error is rethrown.
    ///
    /// `work` runs on several threads at once: it must not share anything it changes.
    static func run<State, T>(_ count: Int, threads: Int, unit: Int = 256, least: Int = 64, start: () -> State,
                              _ work: (inout State, Int) throws -> T,
                              consume: (Int, Result<T, any Error>) throws -> Void) rethrows {
        let unit = max(16, min(unit, count / 16))
        let units = (count + unit - 1) / unit
        let helpers = count < max(least, 2) ? 0 : min(threads, units) - 1
        guard helpers > 0 else {
            var state = start()
            for i in 0..<count { try consume(i, Result { try work(&state, i) }) }
            return
        }
        try withoutActuallyEscaping(start) { start in
            try withoutActuallyEscaping(work) { work in
                let shared = Units(count: count, unit: unit, start: start, work: work)
                let finished = DispatchSemaphore(value: 0)
                for _ in 0..<helpers {
                    let thread = Thread {
                        shared.help()
                        finished.signal()
                    }
                    thread.name = "DocStore work"
                    thread.start()
                }
                defer {
                    shared.stop.store(true, ordering: .relaxed)
                    for _ in 0..<helpers { finished.wait() }
                    // Let go of the closures here, whoever still holds `shared`: they must not outlive this call.
                    shared.release()
                }
                var state = start()
                var next = 0   // the next unit to consume
                while next < units {
                    if shared.isMade(next) {
                        for i in shared.range(of: next) { try consume(i, shared.results[i]) }
                        next += 1
                    } else if let u = shared.claim() {
                        shared.make(u, &state)
                    } else {
                        shared.progress.wait()
                    }
                }
            }
        }
    }

    /// `work` of each of `count` items, in the items' order (``run(_:threads:unit:least:start:_:consume:)``).
    static func results<State, T>(_ count: Int, threads: Int, unit: Int = 256, least: Int = 64, start: () -> State,
                                  _ work: (inout State, Int) throws -> T) -> [Result<T, any Error>] {
        var results: [Result<T, any Error>] = []
        results.reserveCapacity(count)
        // (`work`'s errors kept as results, so that this `run` throws none.)
        run(count, threads: threads, unit: unit, least: least, start: start,
            { state, i in Result { try work(&state, i) } },
            consume: { _, made in if case .success(let result) = made { results.append(result) } })
        return results
    }
}

/// The units of one ``SlicedWork/run(_:threads:unit:least:start:_:consume:)``, shared by its threads: a unit is made
/// by the thread that claims it, which alone writes its results, and read once it is marked made (the mark taken under
/// a lock, which orders the writes before it).
private final class Units<State, T>: @unchecked Sendable {
    let count: Int
    let unit: Int
    private var start: (() -> State)?
    private var work: ((inout State, Int) throws -> T)?
    let results: UnsafeMutablePointer<Result<T, any Error>>
    private let made: Mutex<[Bool]>
    private let nextUnit = Atomic<Int>(0)
    let stop = Atomic<Bool>(false)
    /// Signalled after each unit is made.
    let progress = DispatchSemaphore(value: 0)

    init(count: Int, unit: Int, start: @escaping () -> State, work: @escaping (inout State, Int) throws -> T) {
        self.count = count
        self.unit = unit
        self.start = start
        self.work = work
        results = .allocate(capacity: count)
        made = Mutex(Array(repeating: false, count: (count + unit - 1) / unit))
    }

    deinit {
        // Every unit begun was finished: the made ones hold results.
        for (u, isMade) in made.withLock({ $0 }).enumerated() where isMade {
            (results + range(of: u).lowerBound).deinitialize(count: range(of: u).count)
        }
        results.deallocate()
    }

    func range(of u: Int) -> Range<Int> { (u * unit)..<min(count, (u + 1) * unit) }

    func isMade(_ u: Int) -> Bool { made.withLock { $0[u] } }

    /// The next unit no thread has begun, unless there is none or the work stops.
    func claim() -> Int? {
        guard !stop.load(ordering: .relaxed) else { return nil }
        let u = nextUnit.add(1, ordering: .relaxed).oldValue
        return u * unit < count ? u : nil
    }

    func make(_ u: Int, _ state: inout State) {
        guard let work else { return }
        for i in range(of: u) { (results + i).initialize(to: Result { try work(&state, i) }) }
        made.withLock { $0[u] = true }
        progress.signal()
    }

    /// A helper thread's part: units until none is left.
    func help() {
        guard let start else { return }
        var state = start()
        while let u = claim() { make(u, &state) }
    }

    func release() {
        start = nil
        work = nil
    }
}
