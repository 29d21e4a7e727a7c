import ProvisioningCore
import Synchronization

/// The successful attempt's audit event of a request with an Idempotency-Key, held back so the
/// guard commits it in the same transaction as the answer it keeps for replays
/// (`GatewayStore.completeIdempotencyKey(client:key:response:audit:)`): one synced commit instead
/// of two. The answer still goes out only once the event is committed. Failed attempts' events
/// are never held: they are written as they happen, as without a key.
final class DeferredAudit: Sendable {
    /// Set by `IdempotencyGuard` around the operation it runs for a claimed key; nil otherwise.
    @TaskLocal static var current: DeferredAudit?

    private let held = Mutex<[AuditEvent]>([])

    func hold(_ event: AuditEvent) {
        held.withLock { $0.append(event) }
    }

    /// The events held so far, which are then no longer held.
    func take() -> [AuditEvent] {
        held.withLock { events in
            defer { events = [] }
            return events
        }
    }
}
