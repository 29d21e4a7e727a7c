import Foundation
import GatewayTestSupport
@testable import GatewayStore
import GRDB
import Synchronization
import Testing

/// The SQLite store's request-path writes (audit events, idempotency claims and answers) share
/// group commits; one caller's failing write must not take the others of its transaction with it.
@Suite(.timeLimit(.minutes(1))) struct SQLiteBatchedWriteTests {
    struct Refused: Error {}

    /// A migrated store with a `scratch (name)` table, in a directory of its own.
    static func withScratchStore(busyTimeout: TimeInterval = SQLiteGatewayStore.busyTimeout,
                                 _ body: (SQLiteGatewayStore) async throws -> Void) async throws {
        let directory = TestDirectories.root.appendingPathComponent("sqlite-batched-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try await SQLiteGatewayStore.open(path: directory.appendingPathComponent("gateway.sqlite").path, busyTimeout: busyTimeout)
        try await store.migrate()
        try await store.batched { db in try db.execute(sql: "CREATE TABLE scratch (name TEXT NOT NULL)") }
        try await body(store)
    }

    /// A write ("holder") that holds the writer until `done` says so (bounded, so a condition that
    /// never holds fails the test instead of hanging it); returns once it holds the writer. It is
    /// a request's write (group-committed), held on the writer's queue, never on a cooperative
    /// thread that the callers it waits for need: one of the store's other writes occupies the
    /// queue first, so the store declines to commit the holder on its caller's thread.
    static func holdWriter(_ store: SQLiteGatewayStore, until done: @escaping @Sendable () -> Bool) async -> Task<Void, any Error> {
        let occupied = Mutex(false)
        let release = Mutex(false)
        let alone = Task {
            try await store.writeAlone { _ in
                occupied.withLock { $0 = true }
                var waited = 0
                while !release.withLock({ $0 }) && waited < 20_000 {
                    usleep(1_000)
                    waited += 1
                }
            }
        }
        while !occupied.withLock({ $0 }) { await Task.yield() }
        let declined = store.writer.commitsDeclinedHere
        let holding = Mutex(false)
        let holder = Task {
            try await store.batched { db in
                holding.withLock { $0 = true }
                var waited = 0
                while !done() && waited < 20_000 {
                    usleep(1_000)
                    waited += 1
                }
                try db.execute(sql: "INSERT INTO scratch (name) VALUES ('holder')")
            }
        }
        var waited = 0
        while store.writer.commitsDeclinedHere == declined && waited < 5_000 {
            try? await Task.sleep(for: .milliseconds(1))
            waited += 1
        }
        #expect(store.writer.commitsDeclinedHere == declined + 1, "the holder's write was not sent to the writer's queue")
        release.withLock { $0 = true }
        try? await alone.value
        while !holding.withLock({ $0 }) { await Task.yield() }
        return holder
    }

    @Test func aFailingWriteRollsBackOnlyItselfAndTheRestOfItsBatchCommits() async throws {
        try await Self.withScratchStore { store in
            // The first write holds the writer until the three others are queued behind it, so those
            // three are the next batch: one transaction.
            let sawThreeQueued = Mutex(false)
            let holder = await Self.holdWriter(store) {
                let queued = store.writer.queuedCount == 3
                if queued { sawThreeQueued.withLock { $0 = true } }
                return queued
            }

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

    /// A request cancelled while its write waits for the next batch (a shutdown past its timeout,
    /// a caller gone) must not take the other requests' writes of that batch with it: the batch
    /// is committed whatever happens to its callers' tasks.
    @Test func aCancelledCallerStillLeavesItsBatchCommitted() async throws {
        try await Self.withScratchStore { store in
            let release = Mutex(false)
            let holder = await Self.holdWriter(store) { release.withLock { $0 } }
            /// Waits (bounded) until `count` writes are queued behind the holder.
            func queued(_ count: Int) async throws {
                var waited = 0
                while store.writer.queuedCount < count && waited < 20_000 {
                    try await Task.sleep(for: .milliseconds(1))
                    waited += 1
                }
                #expect(store.writer.queuedCount == count)
            }
            // "cancelled" queues first, so its write opens the next batch; "other" shares that batch.
            let cancelled = Task { try await store.batched { db in try db.execute(sql: "INSERT INTO scratch (name) VALUES ('cancelled')") } }
            try await queued(1)
            let other = Task { try await store.batched { db in try db.execute(sql: "INSERT INTO scratch (name) VALUES ('other')") } }
            try await queued(2)
            cancelled.cancel()
            release.withLock { $0 = true }

            try await holder.value
            try await other.value
            // The cancelled caller's write was queued before it was cancelled: it is committed like the rest.
            try await cancelled.value
            let names = try await store.batched { db in try String.fetchAll(db, sql: "SELECT name FROM scratch ORDER BY name") }
            #expect(names == ["cancelled", "holder", "other"])
        }
    }

    /// A request's write that finds the writer idle is committed on the caller's thread; one that
    /// arrives while another of the store's writes (a card, an import, a purge) holds the writer's
    /// queue is not (its thread would wait there): it goes to the queue and commits after it.
    @Test func aRequestWriteCommitsOnItsThreadOnlyWhenNoOtherWriteRuns() async throws {
        try await Self.withScratchStore { store in
            let here = store.writer.batchesCommittedHere
            try await store.batched { db in try db.execute(sql: "INSERT INTO scratch (name) VALUES ('idle')") }
            #expect(store.writer.batchesCommittedHere == here + 1)

            let release = Mutex(false)
            let holding = Mutex(false)
            let alone = Task {
                try await store.writeAlone { db in
                    holding.withLock { $0 = true }
                    var waited = 0
                    while !release.withLock({ $0 }) && waited < 10_000 {
                        usleep(1_000)
                        waited += 1
                    }
                    try db.execute(sql: "INSERT INTO scratch (name) VALUES ('alone')")
                }
            }
            while !holding.withLock({ $0 }) { await Task.yield() }
            let request = Task { try await store.batched { db in try db.execute(sql: "INSERT INTO scratch (name) VALUES ('request')") } }
            // Bounded: without the store declining, the request's write would be waiting on its
            // thread for the writer instead, and this count would never move.
            var waited = 0
            while store.writer.commitsDeclinedHere == 0 && waited < 5_000 {
                try await Task.sleep(for: .milliseconds(1))
                waited += 1
            }
            #expect(store.writer.commitsDeclinedHere == 1)
            release.withLock { $0 = true }
            try await alone.value
            try await request.value
            #expect(store.writer.batchesCommittedHere == here + 1)
            let names = try await store.batched { db in try String.fetchAll(db, sql: "SELECT name FROM scratch ORDER BY rowid") }
            #expect(names == ["idle", "alone", "request"])
        }
    }

    /// Another process's write lock (here another connection, writing on a queue of its own, as
    /// `vault rotate`, `store archive` or `cards import` beside a serving gateway do) sends a
    /// request's write to the writer's queue at once: the request's thread, one of the cooperative
    /// pool's, never waits out the busy timeout there. The writer's queue waits for the lock with
    /// the busy timeout (set back after the declined begin), so the write commits once the other
    /// connection's does.
    @Test func anotherConnectionsWriteLockSendsTheWriteToTheWritersQueue() async throws {
        // A busy timeout far past this test's bounds: a commit that waited for the lock here
        // instead of declining would still be waiting when the count below is read.
        try await Self.withScratchStore(busyTimeout: 60) { store in
            let other = try TestSQLite.queue(store.path)
            let holding = Mutex(false)
            let release = Mutex(false)
            let lockHolder = Task {
                try await other.write { db in
                    try db.execute(sql: "INSERT INTO scratch (name) VALUES ('other')")
                    holding.withLock { $0 = true }
                    var waited = 0
                    while !release.withLock({ $0 }) && waited < 10_000 {
                        usleep(1_000)
                        waited += 1
                    }
                }
            }
            while !holding.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(1)) }
            let declined = store.writer.commitsDeclinedHere
            let here = store.writer.batchesCommittedHere
            let request = Task { try await store.batched { db in try db.execute(sql: "INSERT INTO scratch (name) VALUES ('request')") } }
            // Bounded: a commit that waited for the lock on the request's thread would leave this
            // count where it is until the lock is let go, after this bound.
            var waited = 0
            while store.writer.commitsDeclinedHere == declined && waited < 5_000 {
                try await Task.sleep(for: .milliseconds(1))
                waited += 1
            }
            #expect(store.writer.commitsDeclinedHere == declined + 1, "the request's write waited for the lock on its own thread")
            release.withLock { $0 = true }
            try await lockHolder.value
            try await request.value
            #expect(store.writer.batchesCommittedHere == here)
            let names = try await store.batched { db in try String.fetchAll(db, sql: "SELECT name FROM scratch ORDER BY rowid") }
            #expect(names == ["other", "request"])
        }
    }
}
