import NIOCore

/// Runs a task's jobs on one SwiftNIO event loop (`withTaskExecutorPreference`): in a test, what
/// `serve --executor event-loops` does for every task of the gateway (SwiftNIO's takeover of the
/// global executor), which a test process cannot install without moving every other test too.
public final class EventLoopTaskExecutor: TaskExecutor {
    public let loop: any EventLoop

    public init(_ loop: any EventLoop) {
        self.loop = loop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }
}
