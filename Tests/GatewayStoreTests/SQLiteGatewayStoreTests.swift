import Foundation
@testable import GatewayStore
import GRDB
import ProvisioningCore
import Testing

@Suite struct SQLiteGatewayStoreTests {
    func withStore(_ body: (SQLiteGatewayStore) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(try SQLiteGatewayStore(path: directory.appendingPathComponent("gateway.sqlite").path))
    }

    @Test(arguments: StoreConformance.all)
    func conforms(_ scenario: StoreScenario) async throws { try await withStore(scenario.run) }

    @Test func theFileIsInWALModeAndSurvivesReopening() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("nested/gateway.sqlite").path
        do {
            let store = try SQLiteGatewayStore(path: path)
            try await store.migrate()
            try await store.putCard(StoreConformance.card("kept"))
        }
        let journalMode = try await DatabaseQueue(path: path).read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journalMode == "wal")
        let reopened = try SQLiteGatewayStore(path: path)
        try await reopened.migrate()
        #expect(try await reopened.card("kept") == StoreConformance.card("kept"))
    }

    /// Durability the README promises: every commit syncs the WAL (synchronous = FULL), on a new
    /// file and on a reopened one. GRDB's WAL set-up sets NORMAL on the writer after the
    /// configuration's own preparation ran, so this fails if FULL is set only there.
    @Test func everyCommitOnTheWriterIsSyncedNewFileAndReopened() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("gateway.sqlite").path
        do {
            let store = try SQLiteGatewayStore(path: path)
            try await store.migrate()
            #expect(try await store.writerSynchronous() == SQLiteGatewayStore.synchronousFull)
            // The request path's group-committed writes run on that same writer.
            let event = AuditEvent(
                provisioningID: "prv_sync_1", at: StoreConformance.instant(1), client: ClientID("acme"), cardID: "c1", operation: .applePay,
                issuer: "bridge", endpoint: nil, attempt: 1, outcome: .succeeded, errorCode: nil, upstreamStatus: 200, latencyMS: 3)
            try await store.appendAudit(event)
            #expect(try await store.auditEvents("prv_sync_1") == [event])
            #expect(try await store.writerSynchronous() == SQLiteGatewayStore.synchronousFull)
        }
        let reopened = try SQLiteGatewayStore(path: path)
        #expect(try await reopened.writerSynchronous() == SQLiteGatewayStore.synchronousFull)
    }

    /// A keyed request's answer and its success event are one commit: both kept or neither, and
    /// one WAL sync rather than two.
    @Test func anAnswerAndItsAuditEventsCommitTogetherOrNotAtAll() async throws {
        try await withStore { store in
            try await store.migrate()
            let now = StoreConformance.instant(0)
            func claim(_ key: String) async throws -> IdempotencyClaim {
                try await store.claimIdempotencyKey(client: "acme", key: key, requestHash: "h", now: now, expiresAt: now.addingTimeInterval(60),
                                                    staleBefore: now.addingTimeInterval(-60))
            }
            func event(_ id: String) -> AuditEvent {
                AuditEvent(provisioningID: ProvisioningID(id), at: now, client: "acme", cardID: "c1", operation: .applePay, issuer: "bridge",
                           endpoint: nil, attempt: 1, outcome: .succeeded, errorCode: nil, upstreamStatus: 200, latencyMS: 3)
            }
            let answer = StoredResponse(status: 200, body: Data("{}".utf8))
            #expect(try await claim("kept") == .acquired)
            let before = store.writer.batchesCommitted
            try await store.completeIdempotencyKey(client: "acme", key: "kept", response: answer, audit: [event("prv_kept")])
            #expect(store.writer.batchesCommitted == before + 1)
            #expect(try await store.auditEvents("prv_kept") == [event("prv_kept")])

            // The event cannot be written: the answer is not kept either, and the claim stays unfinished.
            #expect(try await claim("lost") == .acquired)
            try await DatabaseQueue(path: store.path).write { db in
                try db.execute(sql: "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'audit refused'); END")
            }
            await #expect(throws: (any Error).self) {
                try await store.completeIdempotencyKey(client: "acme", key: "lost", response: answer, audit: [event("prv_lost")])
            }
            #expect(try await claim("lost") == .inProgress)
            // Nor did the event slip in around the refusal: with the trigger gone, none is there.
            try await DatabaseQueue(path: store.path).write { db in try db.execute(sql: "DROP TRIGGER refuse_audit") }
            #expect(try await store.auditEvents("prv_lost").isEmpty)
            #expect(try await claim("lost") == .inProgress)
        }
    }

    @Test func anUnopenableFileNamesTheStore() throws {
        let path = "/proc/no-such-dir/gateway.sqlite"
        let error = try #require(throws: StoreError.self) { try SQLiteGatewayStore(path: path) }
        // The message an operator reads names the kind of store and the file, and says what failed.
        #expect(error.store == "sqlite \(path)")
        #expect(error.description.hasPrefix("sqlite \(path): cannot open the database"), "\(error)")
    }
}
