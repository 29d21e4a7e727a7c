import Foundation
import Gateway
@testable import GatewayServer
import GatewayTestSupport
import Logging
import ProvisioningCore
import ServiceLifecycle
import Synchronization
import Testing

/// The store service, which outlives every service that uses the store (`StoreUser`), and the
/// late writes that the requests cut off at the shutdown timeout start after `LateWritesService`
/// has drained (`LateAudit`). The service drains them again, once every user has returned,
/// before the store's pool stops: their events are of issuer calls that may have been made.
@Suite struct StoreServiceTests {
    static func event(_ id: String) -> AuditEvent {
        AuditEvent(provisioningID: ProvisioningID(id), at: Date(timeIntervalSince1970: 1_800_000_000), client: "acme", cardID: "c1",
                   operation: .applePay, issuer: "bridge", endpoint: "https://bridge.invalid", attempt: 1, outcome: .succeeded,
                   errorCode: nil, upstreamStatus: 200, latencyMS: 3)
    }

    /// A store service over a store that can refuse or hold writes, with `users` services using
    /// the store, a clock that never moves on its own, and the late writes it drains.
    static func parts(users count: Int) async throws
        -> (LostAcknowledgementStore, GatewayClock, Logger, LateWrites, StoreUsers, StoreService) {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        let clock = GatewayClock(TestClock())
        let logger = Logger(label: "store-service-test")
        let writes = LateWrites()
        let users = StoreUsers(count: count)
        let service = StoreService(store: nil, name: "sqlite", users: users, lateWrites: writes, clock: clock, logger: logger)
        return (store, clock, logger, writes, users, service)
    }

    /// A late write started while the store service waits for its users (the stop has begun,
    /// the late-writes service has drained and returned), whose first try the store refused, and
    /// whose next try waits on a clock that never moves: the store service does not return
    /// before it is written.
    @Test(.timeLimit(.minutes(1)))
    func aLateWriteStartedAfterTheFirstDrainIsWrittenBeforeTheStoreStops() async throws {
        let (store, clock, logger, writes, users, service) = try await Self.parts(users: 1)
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
        let running = Task { try await group.run() }
        // The stop begins; the store service now waits for its one user, a server still answering
        // the request it is about to cut off.
        await group.triggerGracefulShutdown()

        store.refuseNext(1)
        LateAudit.keepTrying([Self.event("prv_late")], store: store, clock: clock, logger: logger, writes: writes)
        // Its first try was made and refused (not timed: up to 10 s); it now waits for its next.
        for _ in 0..<1000 where store.auditsWritten.withLock({ $0.count }) < 1 {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(store.auditsWritten.withLock { $0.count } == 1)
        #expect(writes.count == 1)
        #expect(try await store.auditEvents("prv_late").isEmpty, "nothing written before the store service drains")

        // The last user returns: the store service drains, then returns.
        users.ended()
        try await running.value
        #expect(writes.count == 0, "the write ended before the store service returned")
        #expect(try await store.auditEvents("prv_late").map(\.outcome) == [.succeeded])
    }

    /// The stop's timeout passed: the group cancels every service, the store service included,
    /// and the request it cut off starts its late write just as its server returns. The store
    /// service still waits for that write before it returns (and the process exits): cancelled,
    /// it had returned at once, and a cut-off request's attempt event was lost (seen in CI, the
    /// store's lock held by another writer).
    @Test(.timeLimit(.minutes(1)))
    func aCancelledStoreServiceStillWaitsForALateWrite() async throws {
        let (store, clock, logger, writes, users, service) = try await Self.parts(users: 1)
        // The events written when the service returned; nil while it runs.
        let returned = Mutex<Int?>(nil)
        let running = Task {
            try await service.run()
            let written = try await store.auditEvents("prv_cut").count
            returned.withLock { $0 = written }
        }
        running.cancel()
        // The cut-off request's write waits on the store (another writer holds it) ...
        store.shutGate(throwingFirst: 0)
        let failSafe = store.failSafe()
        defer { failSafe.cancel() }
        LateAudit.keepTrying([Self.event("prv_cut")], store: store, clock: clock, logger: logger, writes: writes)
        for _ in 0..<1000 where store.auditsWritten.withLock({ $0.count }) < 1 {
            try await Task.sleep(for: .milliseconds(5))
        }
        // ... as its server returns.
        users.ended()
        for _ in 0..<20 where returned.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(returned.withLock { $0 } == nil, "the cancelled store service returned under a late write")
        store.openGate()
        try await running.value
        #expect(returned.withLock { $0 } == 1, "the late write had not landed when the store service returned")
        #expect(!store.openedByTimer.withLock { $0 })
    }

    /// A late write the store refuses on every try ends with the drain all the same (its tries
    /// made at once, without their waits): a stop is never held up by a store that is gone.
    @Test(.timeLimit(.minutes(1)))
    func aLateWriteTheStoreRefusesEveryTimeDoesNotHoldTheStopUp() async throws {
        let (store, clock, logger, writes, _, service) = try await Self.parts(users: 0)
        store.refuseNext(5)
        LateAudit.keepTrying([Self.event("prv_lost")], store: store, clock: clock, logger: logger, writes: writes)
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(writes.count == 0)
        #expect(store.auditsWritten.withLock { $0.count } == 5, "every try was made")
        #expect(try await store.auditEvents("prv_lost").isEmpty)
    }
}
