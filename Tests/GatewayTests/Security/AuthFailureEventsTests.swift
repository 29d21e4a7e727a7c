import Foundation
import Gateway
import GatewayStore
import GatewayTestSupport
import GRDB
import Logging
import ProvisioningCore
import Testing

/// Failed authentications from any number of addresses write at most the limit's events; the
/// rest are counted, and the count rides on the next event written.
@Suite struct AuthFailureEventsTests {
    /// A fresh store, the test's clock, and the recorder under `limit`.
    static func recorder(_ limit: RateLimitConfig) async throws -> (store: SQLiteGatewayStore, clock: TestClock, events: AuthFailureEvents) {
        let store = try await SQLiteGatewayStore.open(path: TestDirectories.root.appendingPathComponent("auth-events-\(UUID().uuidString)/gateway.sqlite").path)
        try await store.migrate()
        let clock = TestClock()
        let events = AuthFailureEvents(audit: SecurityAudit(store: store, logger: Logger(label: "test")), clock: GatewayClock(clock),
                                       limit: limit, logger: Logger(label: "test"))
        return (store, clock, events)
    }

    @Test func pastTheLimitFailuresAreCountedAndTheNextEventCarriesTheCount() async throws {
        let (store, clock, events) = try await Self.recorder(RateLimitConfig(requestsPerSecond: 10, burst: 100))
        // 130 failures at one instant, each from an address of its own: the burst is written.
        for index in 0..<130 { await events.note(source: "10.0.\(index / 256).\(index % 256)", reason: "invalid_key") }
        let written = try await store.securityEvents(SecurityEventQuery(kind: .authFailed, limit: 500))
        #expect(written.count == 100)
        #expect(written.allSatisfy { $0.detail["suppressed"] == nil && $0.detail["reason"] == "invalid_key" && $0.actor == "anonymous" })
        // A tenth of a second refills one token: the next failure is written, with the 30 counted.
        clock.advance(by: .milliseconds(100))
        await events.note(source: "192.0.2.1", reason: "missing_key")
        let after = try await store.securityEvents(SecurityEventQuery(kind: .authFailed, limit: 500))
        #expect(after.count == 101)
        #expect(after.last?.detail == ["reason": "missing_key", "suppressed": "30"])
        #expect(after.last?.source == "192.0.2.1")
        // The count starts again from there.
        clock.advance(by: .milliseconds(100))
        await events.note(source: "192.0.2.2", reason: "invalid_key")
        let last = try await store.securityEvents(SecurityEventQuery(kind: .authFailed, limit: 500)).last
        #expect(last?.detail == ["reason": "invalid_key"])
    }

    /// An event that cannot be written gives its count back, with itself: the next event written
    /// carries every failure not written since the last one.
    @Test func aFailedWriteGivesItsCountBackToTheNextEvent() async throws {
        let (store, clock, events) = try await Self.recorder(RateLimitConfig(requestsPerSecond: 1, burst: 1))
        for _ in 0..<3 { await events.note(source: "10.0.0.1", reason: "invalid_key") }  // one written, two counted
        try await TestSQLite.queue(store.path).write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON security_events BEGIN SELECT RAISE(ABORT, 'disk full'); END")
        }
        clock.advance(by: .seconds(1))
        await events.note(source: "10.0.0.2", reason: "invalid_key")  // its write fails: three to carry
        try await TestSQLite.queue(store.path).write { db in try db.execute(sql: "DROP TRIGGER refuse") }
        clock.advance(by: .seconds(1))
        await events.note(source: "10.0.0.3", reason: "missing_key")
        let written = try await store.securityEvents(SecurityEventQuery(kind: .authFailed))
        #expect(written.count == 2)
        #expect(written.last?.detail == ["reason": "missing_key", "suppressed": "3"])
    }
}
