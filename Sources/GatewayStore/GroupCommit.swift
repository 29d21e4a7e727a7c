import Synchronization

/// Group commit: concurrent callers' items are written together, in one transaction, and each
/// caller returns only once the transaction holding its item has committed. So "written before
/// the answer is sent" holds for every caller, and a burst of N requests costs one commit (one WAL
/// sync) instead of N.
///
/// A caller that finds no write in progress, while the last commit held one item (no other caller
/// in sight), commits its own item at once, on its own thread (`commitHere`, GRDB's synchronous
/// write, which runs on the calling thread when the writer's queue is idle): no hand-off to the
/// writer's queue and back, which at one request at a time was a tenth of a provisioning's CPU.
/// Once a commit held several items, callers have company: the next one joins the queue even if
/// the writer is idle, so that the callers right behind it share its commit (one WAL sync) and no
/// caller's thread waits on a sync the others could have shared; a batch of one turns it back.
/// Callers that arrive meanwhile queue; when that commit is over,
/// what they queued (up to `maxBatch`) is handed to `commit`, which runs it on the store's writer
/// queue, and that commit's completion wakes its callers and starts the next batch itself, so
/// under load no caller's task leads a batch or is woken to hand one on. At most one caller's
/// thread is ever in a commit (the one that found the writer idle), for one transaction. The
/// store can decline a commit here (`commitHere` returns nil: another of its writes is running,
/// or another process holds the database's write lock, and the caller's thread would wait for
/// it); the item then goes to `commit` as a batch of one, which waits on the writer's queue.
///
/// A failed commit fails every caller of that batch (the transaction rolled back, so none of its
/// items was written); the next batch is tried afresh. A batch is committed whatever happens to
/// its callers' tasks: a commit on the writer's queue runs outside them, and one here runs to its
/// end on its caller's thread, so cancelling one caller (a shutdown past its timeout, a caller
/// gone) never rolls back the others' writes. A stalled commit is bounded by the store itself
/// (SQLite's busy timeout), not by the shutdown timeout.
final class GroupCommit<Item: Sendable>: Sendable {
    typealias Completion = @Sendable (Result<Void, any Error>) -> Void
    /// One caller's item, and the caller waiting for its batch.
    private typealias Entry = (item: Item, caller: CheckedContinuation<Void, any Error>)

    private struct State {
        var queued: [Entry] = []
        var writing = false
        /// How many items the last commit held: a caller commits its own item at once only while
        /// the last commit held one (no other caller in sight). With company, it joins a batch.
        var lastBatch = 1
    }

    private let state = Mutex(State())
    /// Starts writing one batch in one transaction and calls its completion once it committed, or
    /// with the error that rolled it back. Called with no lock held. The completion must be called
    /// exactly once (twice resumes a caller twice; never leaves every later write waiting), and
    /// not before `commit` returns: the completion starts the next batch, so a synchronous one would
    /// write every batch on the first caller's stack.
    private let commit: @Sendable ([Item], @escaping Completion) -> Void
    /// Writes one caller's item in one transaction on the calling thread and returns once it is
    /// over, or nil, without writing, when the store declines to (the caller's thread would wait).
    private let commitHere: (@Sendable (Item) -> Result<Void, any Error>?)?
    /// The most items one transaction takes.
    let maxBatch: Int

    /// `committing` starts a batch's transaction and calls back once it is over (GRDB's
    /// `asyncWrite`); `committingHere`, when given, is what a caller that finds the writer idle
    /// runs on its own thread (GRDB's synchronous `write`), nil to decline.
    init(
        maxBatch: Int = 128, committingHere: (@Sendable (Item) -> Result<Void, any Error>?)? = nil,
        committing: @escaping @Sendable ([Item], @escaping Completion) -> Void
    ) {
        precondition(maxBatch > 0)
        self.maxBatch = maxBatch
        self.commitHere = committingHere
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

    private let items = Atomic<Int>(0)
    /// Items (callers' writes) in the transactions committed so far: with `batchesCommitted`, how
    /// many writes share a commit (`gateway_store_committed_writes_total` over
    /// `gateway_store_commits_total`). A rolled-back batch counts in neither.
    var itemsCommitted: Int { items.load(ordering: .relaxed) }

    private let committedHere = Atomic<Int>(0)
    /// Of `batchesCommitted`, those a caller committed on its own thread.
    var batchesCommittedHere: Int { committedHere.load(ordering: .relaxed) }
    private let declined = Atomic<Int>(0)
    /// Writes that found the writer idle but were declined by `commitHere` (sent to the queue).
    var commitsDeclinedHere: Int { declined.load(ordering: .relaxed) }

    /// Returns once `item` is committed; throws the commit's error when its batch failed.
    func write(_ item: Item) async throws {
        if let commitHere, state.withLock({ state in
            guard !state.writing, state.lastBatch <= 1 else { return false }
            state.writing = true
            return true
        }) {
            guard let result = commitHere(item) else {
                declined.add(1, ordering: .relaxed)
                // Declined: the writer's queue commits it, as a batch of one, and goes on with
                // whatever queued meanwhile.
                try await withCheckedThrowingContinuation { caller in start([(item, caller)]) }
                return
            }
            if case .success = result {
                committed.add(1, ordering: .relaxed)
                items.add(1, ordering: .relaxed)
                committedHere.add(1, ordering: .relaxed)
            }
            if let next = nextBatch(after: 1) { start(next) }
            return try result.get()
        }
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
            if case .success = result {
                self.committed.add(1, ordering: .relaxed)
                self.items.add(batch.count, ordering: .relaxed)
            }
            for entry in batch { entry.caller.resume(with: result) }
            if let next = self.nextBatch(after: batch.count) { self.start(next) }
        }
    }

    /// The next batch, once a commit is over: whatever queued meanwhile, or nil (and no write in
    /// progress any more).
    private func nextBatch(after committed: Int) -> [Entry]? {
        state.withLock { state -> [Entry]? in
            state.lastBatch = committed
            guard !state.queued.isEmpty else {
                state.writing = false
                return nil
            }
            return takeBatch(&state)
        }
    }
}
