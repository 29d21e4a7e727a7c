import Synchronization

/// Group commit: concurrent callers' items are written together, in one transaction, and each
/// caller returns only once the transaction holding its item has committed. So "written before
/// the answer is sent" holds for every caller, and a burst of N requests costs one commit (one WAL
/// sync) instead of N.
///
/// The caller that finds no write in progress starts one with what is queued (its own item first,
/// up to `maxBatch`). The commit's completion wakes that batch's callers and, if more arrived
/// meanwhile, starts the next batch itself, on the store's writer queue: no caller's task leads a
/// batch or is woken to hand one on, so a write costs its caller one suspension and one wake-up. A
/// failed commit fails every caller of that batch (the transaction rolled back, so none of its
/// items was written); the next batch is tried afresh. A batch is committed whatever happens to
/// its callers' tasks: the commit runs outside them, so cancelling one caller (a shutdown past its
/// timeout, a caller gone) never rolls back the others' writes. A stalled commit is bounded by the
/// store itself (SQLite's busy timeout), not by the shutdown timeout.
final class GroupCommit<Item: Sendable>: Sendable {
    typealias Completion = @Sendable (Result<Void, any Error>) -> Void
    /// One caller's item, and the caller waiting for its batch.
    private typealias Entry = (item: Item, caller: CheckedContinuation<Void, any Error>)

    private struct State {
        var queued: [Entry] = []
        var writing = false
    }

    private let state = Mutex(State())
    /// Starts writing one batch in one transaction and calls its completion once it committed, or
    /// with the error that rolled it back. Called with no lock held. The completion must be called
    /// exactly once (twice resumes a caller twice; never leaves every later write waiting), and
    /// not before `commit` returns: the completion starts the next batch, so a synchronous one would
    /// write every batch on the first caller's stack.
    private let commit: @Sendable ([Item], @escaping Completion) -> Void
    /// The most items one transaction takes.
    let maxBatch: Int

    /// `committing` starts a batch's transaction and calls back once it is over (GRDB's `asyncWrite`).
    init(maxBatch: Int = 128, committing: @escaping @Sendable ([Item], @escaping Completion) -> Void) {
        precondition(maxBatch > 0)
        self.maxBatch = maxBatch
        self.commit = committing
    }

    /// `commit` writes one batch in one transaction, in a task of its own; throws to roll it back.
    convenience init(maxBatch: Int = 128, commit: @escaping @Sendable ([Item]) async throws -> Void) {
        self.init(maxBatch: maxBatch) { items, done in
            Task {
                do {
                    try await commit(items)
                    done(.success(()))
                } catch {
                    done(.failure(error))
                }
            }
        }
    }

    private let committed = Atomic<Int>(0)
    /// Transactions committed so far (each one WAL sync): what a request costs in commits.
    var batchesCommitted: Int { committed.load(ordering: .relaxed) }

    /// Items waiting for the next batch (not those of the commit in progress).
    var queuedCount: Int { state.withLock { $0.queued.count } }

    /// Returns once `item` is committed; throws the commit's error when its batch failed.
    func write(_ item: Item) async throws {
        try await withCheckedThrowingContinuation { (caller: CheckedContinuation<Void, any Error>) in
            let batch = state.withLock { state -> [Entry]? in
                state.queued.append((item, caller))
                guard !state.writing else { return nil }
                state.writing = true
                return takeBatch(&state)
            }
            if let batch { start(batch) }
        }
    }

    private func takeBatch(
        _ state: inout State
    ) -> [Entry] {
        let taken = Array(state.queued.prefix(maxBatch))
        state.queued.removeFirst(taken.count)
        return taken
    }

    private func start(_ batch: [Entry]) {
        commit(batch.map(\.item)) { result in
            if case .success = result { self.committed.add(1, ordering: .relaxed) }
            for entry in batch { entry.caller.resume(with: result) }
            // The next batch: whatever queued meanwhile, or stop writing.
            let next = self.state.withLock { state -> [Entry]? in
                guard !state.queued.isEmpty else {
                    state.writing = false
                    return nil
                }
                return self.takeBatch(&state)
            }
            if let next { self.start(next) }
        }
    }
}
