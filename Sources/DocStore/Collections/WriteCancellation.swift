import Synchronization

/// Whether the task that made a write was cancelled. A write of a group runs in the task that commits the group,
/// not in its caller's; scans check this rather than `Task.isCancelled`, so that a cancelled caller's long write
/// stops as it would alone. (The caller's task-local values are not carried over: a body should not read them.)
enum WriteCancellation {
    @TaskLocal static var ofCaller: CancellationFlag?

    static var isCancelled: Bool { Task.isCancelled || ofCaller?.isSet == true }
}

/// A cancellation, set from any thread.
final class CancellationFlag: Sendable {
    private let state = Atomic(false)
    func set() { state.store(true, ordering: .releasing) }
    var isSet: Bool { state.load(ordering: .acquiring) }
}
