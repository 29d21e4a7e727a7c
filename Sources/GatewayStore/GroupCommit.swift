import Synchronization

/// Group commit: concurrent callers' items are written together, in one transaction, and each
/// caller returns only once the transaction holding its item has committed. So "written before
/// the answer is sent" holds for every caller, and a burst of N requests costs one commit (one WAL
/// sync) instead of N.
///
/// The caller that finds no write in progress leads: it takes what is queued (its own item first,
/// up to `maxBatch`), commits it in one transaction and wakes those callers. If more arrived
/// meanwhile, the first of them leads the next batch, so no caller writes more than one batch. A
/// failed commit fails every caller of that batch (the transaction rolled back, so none of its
/// items was written); the next batch is tried afresh. A batch is committed whatever happens to
/// the task that leads it: cancelling one caller never fails the others.
final class GroupCommit<Item: Sendable>: Sendable {
    private enum Caller {
        /// Resumed with `false` once its batch committed, or with the batch's error.
        case waiting(CheckedContinuation<Bool, any Error>)
        /// Already running as the batch's writer.
        case leading
    }

    private struct State {
        var queued: [(item: Item, caller: Caller)] = []
        var writing = false
    }

    private let state = Mutex(State())
    /// Writes one batch in one transaction; throws to roll it back.
    private let commit: @Sendable ([Item]) async throws -> Void
    /// The most items one transaction takes.
    let maxBatch: Int

    init(maxBatch: Int = 128, commit: @escaping @Sendable ([Item]) async throws -> Void) {
        precondition(maxBatch > 0)
        self.maxBatch = maxBatch
        self.commit = commit
    }

    private let committed = Atomic<Int>(0)
    /// Transactions committed so far (each one WAL sync): what a request costs in commits.
    var batchesCommitted: Int { committed.load(ordering: .relaxed) }

    /// Items waiting for the next batch (not those of the commit in progress).
    var queuedCount: Int { state.withLock { $0.queued.count } }

    /// Returns once `item` is committed; throws the commit's error when its batch failed.
    func write(_ item: Item) async throws {
        let leads = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
            let leads = state.withLock { state -> Bool in
                if state.writing {
                    state.queued.append((item, .waiting(continuation)))
                    return false
                }
                state.writing = true
                state.queued.append((item, .leading))
                return true
            }
            if leads { continuation.resume(returning: true) }
        }
        guard leads else { return }

        // The leader: its item is first in the queue.
        let batch = state.withLock { state in
            let taken = Array(state.queued.prefix(maxBatch))
            state.queued.removeFirst(taken.count)
            return taken
        }
        var failure: (any Error)?
        do {
            // Committed in a task of its own: the batch holds other callers' writes, so the leading
            // caller's cancellation (a shutdown past its timeout, a caller gone) must not reach the
            // store, which would roll the whole batch back. Awaiting an unstructured task's value
            // does not pass cancellation on. So a stalled commit is bounded by the store itself
            // (SQLite's busy timeout), not by the shutdown timeout.
            let items = batch.map(\.item)
            let commit = self.commit
            try await Task { try await commit(items) }.value
            committed.add(1, ordering: .relaxed)
        } catch {
            failure = error
        }
        for entry in batch {
            guard case .waiting(let continuation) = entry.caller else { continue }
            if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: false) }
        }
        // Hand the next batch to the first caller that queued meanwhile, or stop writing.
        let next = state.withLock { state -> CheckedContinuation<Bool, any Error>? in
            guard let first = state.queued.first else {
                state.writing = false
                return nil
            }
            state.queued[0].caller = .leading
            guard case .waiting(let continuation) = first.caller else { return nil }
            return continuation
        }
        next?.resume(returning: true)
        if let failure { throw failure }
    }
}
