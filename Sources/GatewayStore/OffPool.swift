import Foundation

/// Blocking work (a run of synchronous commits, each synced to disk) done on a thread of its own,
/// never on one of Swift's cooperative pool: that pool has one thread per core (two here), and
/// work that blocks on the disk there stops every task of the process while the disk stalls
/// (health checks, timers, other requests), not only the caller. The caller suspends meanwhile.
/// Cancelling the caller does not stop the work: it ends as it would have, and its result is
/// returned.
enum OffPool {
    static func run<T: Sendable>(_ name: String, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let thread = Thread { continuation.resume(with: Result { try work() }) }
            thread.name = name
            thread.start()
        }
    }
}
