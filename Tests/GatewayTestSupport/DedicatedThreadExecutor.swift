import Foundation

/// A task executor with one thread of its own: a test whose task must block its thread (a
/// synchronous commit held on a semaphore, as `GroupCommit` runs one on its caller's thread) runs
/// that task here (`addTask(executorPreference:)`), never on one of the cooperative pool's threads.
/// On two cores the pool has two: one held by such a test while another test held the other left
/// no thread for anything else in the process (every test's tasks, its servers' handlers) until
/// the hold's timeout, 10 s, and unrelated tests failed on connects "not made in time".
public final class DedicatedThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []
    /// The executor's thread, once it runs (guarded by `condition`). Thread names are no proof
    /// on Linux: a new thread keeps its creator's, a cooperative thread's when made from a task.
    private var thread: pthread_t?

    public init() {
        Thread.detachNewThread { [unowned self] in
            self.condition.lock()
            self.thread = pthread_self()
            self.condition.unlock()
            self.run()
        }
    }

    /// Whether the calling code runs on this executor's thread.
    public var isCurrent: Bool {
        condition.lock()
        defer { condition.unlock() }
        return thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
