import Foundation
@testable import GatewayStore
import GRDB
import Synchronization
import Testing

/// The SQLite store's request-path writes (audit events, idempotency claims and answers) share
/// group commits; one caller's failing write must not take the others of its transaction with it.
@Suite(.timeLimit(.minutes(1))) struct SQLiteBatchedWriteTests {
    struct Refused: Error {}

    @Test func aFailingWriteRollsBackOnlyItselfAndTheRestOfItsBatchCommits() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-batched-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteGatewayStore(path: directory.appendingPathComponent("gateway.sqlite").path)
        try await store.migrate()
        try await store.batched { db in try db.execute(sql: "CREATE TABLE scratch (name TEXT NOT NULL)") }

        // The first write holds the writer until the three others are queued behind it, so those
        // three are the next batch: one transaction.
        let holding = Mutex(false)
        let sawThreeQueued = Mutex(false)
        let holder = Task {
            try await store.batched { db in
                holding.withLock { $0 = true }
                // Bounded, so a writer that never queues fails the test below instead of hanging it.
                var waited = 0
                while store.writer.queuedCount < 3 && waited < 20_000 {
                    usleep(1_000)
                    waited += 1
                }
                sawThreeQueued.withLock { $0 = store.writer.queuedCount == 3 }
                try db.execute(sql: "INSERT INTO scratch (name) VALUES ('holder')")
            }
        }
        while !holding.withLock({ $0 }) { await Task.yield() }

        async let first: Void = store.batched { db in try db.execute(sql: "INSERT INTO scratch (name) VALUES ('first')") }
        let failing = Task {
            try await store.batched { db in
                try db.execute(sql: "INSERT INTO scratch (name) VALUES ('failing')")
                throw Refused()
            }
        }
        async let last: Void = store.batched { db in try db.execute(sql: "INSERT INTO scratch (name) VALUES ('last')") }

        try await holder.value
        #expect(sawThreeQueued.withLock { $0 }, "the three writes did not queue behind the holder, so they were not one batch")
        try await first
        await #expect(throws: Refused.self) { try await failing.value }
        try await last

        let names = try await store.batched { db in try String.fetchAll(db, sql: "SELECT name FROM scratch ORDER BY name") }
        // The failing write's own row was rolled back with it; its neighbours' rows committed.
        #expect(names == ["first", "holder", "last"])
    }
}
