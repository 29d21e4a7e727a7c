import Foundation
import GatewayTestSupport
@testable import GatewayStore
import GRDB
import Testing

/// The SQLite store's migrations run on a thread of their own, not on Swift's cooperative pool:
/// each is a commit synced to disk, and on the pool a stalled disk (or another process's write
/// lock, as here) stopped every task of the process, not only the caller.
@Suite(.timeLimit(.minutes(1))) struct OffPoolTests {
    /// More migrations than the pool has threads, each waiting on a write lock another connection
    /// holds: a task posted meanwhile still runs, before any of them has returned. On the pool,
    /// the migrations held both of its threads and the task ran only once the lock's wait ended.
    @Test func migrationsWaitingOnTheDiskLeaveThePoolFree() async throws {
        let directory = TestDirectories.root.appendingPathComponent("off-pool-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        // A database of its own for each migration: migrations of one file at once can fail (a
        // read that turns into a write meets SQLite's busy at once), which is not what this tests.
        let paths = (0..<count).map { directory.appendingPathComponent("gateway-\($0).sqlite").path }
        // Opened first (opening writes too); each waits up to 30 s for the lock below, and fails then.
        let stores = try paths.map { try SQLiteGatewayStore(path: $0, busyTimeout: 30) }

        // Another connection to each holds its write lock, on a thread of its own, until `release`.
        let holders = try paths.map { try DatabaseQueue(path: $0) }
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        for holder in holders {
            Thread.detachNewThread {
                try? holder.writeWithoutTransaction { db in
                    try db.inTransaction(.immediate) {
                        holding.signal()
                        _ = release.wait(timeout: .now() + 40)
                        return .rollback
                    }
                }
            }
        }
        let holds = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: holders.allSatisfy { _ in holding.wait(timeout: .now() + 30) == .success })
            }
        }
        try #require(holds, "another connection did not take a write lock")
        let returned = Locked(0)
        let migrations = stores.map { store in
            Task.detached {
                defer { returned.withLock { $0 += 1 } }
                try await store.migrate()
            }
        }
        // Time for the migrations to reach the lock. Had they not, the task below would run
        // anyway: the test would prove nothing that time, but it could not fail wrongly.
        try await Task.sleep(for: .milliseconds(500))
        let ranBeforeAnyReturned = await Task.detached { returned.withLock { $0 } == 0 }.value
        for _ in holders { release.signal() }
        var failed = 0
        for migration in migrations { if case .failure = await migration.result { failed += 1 } }

        #expect(ranBeforeAnyReturned, "a task waited for the migrations: they held the cooperative pool's threads")
        try #require(failed == 0, "\(failed) migrations timed out waiting for the lock")
        for holder in holders {
            let applied = try await holder.read { db in try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") }
            #expect(applied == SQLiteGatewayStore.migrator.migrations, "every migration ran once the lock was let go")
        }
    }
}
