import ProvisioningCore
import Synchronization

/// The successful attempt's audit event of a request with an Idempotency-Key, held back so the
/// guard commits it in the same transaction as the answer it keeps for replays
/// (`GatewayStore.completeIdempotencyKey(client:key:claimedAt:response:audit:)`): one synced commit instead
/// of two. The answer still goes out only once the event is committed. Failed attempts' events
/// are never held: they are written as they happen, as without a key.
///
/// What reports the success (its log line and metric) waits for that commit too: it runs once
/// the guard knows whether the answer goes out (`settle`), so a request answered 500 because its
/// answer could not be kept is never logged or counted as succeeded.
final class DeferredAudit: Sendable {
    /// Set by `IdempotencyGuard` around the operation it runs for a claimed key; nil otherwise.
    @TaskLocal static var current: DeferredAudit?

    private let held = Mutex<[AuditEvent]>([])

    func hold(_ event: AuditEvent) {
        held.withLock { $0.append(event) }
    }

    private enum Reports {
        case waiting([@Sendable (GatewayError?) -> Void])
        case settled(GatewayError?)
    }

    private let reports = Mutex(Reports.waiting([]))

    /// Runs `report` once the request's outcome is settled: nil when its answer and events are
    /// committed, else the error the caller gets. Once settled, at once.
    func onSettled(_ report: @escaping @Sendable (GatewayError?) -> Void) {
        let settled: GatewayError?? = reports.withLock { reports in
            switch reports {
            case .waiting(let waiting):
                reports = .waiting(waiting + [report])
                return nil
            case .settled(let error):
                return .some(error)
            }
        }
        if let settled { report(settled) }
    }

    /// Runs the reports waiting for the outcome; the first call decides it.
    func settle(_ error: GatewayError?) {
        let waiting: [@Sendable (GatewayError?) -> Void] = reports.withLock { reports in
            guard case .waiting(let waiting) = reports else { return [] }
            reports = .settled(error)
            return waiting
        }
        for report in waiting { report(error) }
    }

    /// The events held so far, which are then no longer held.
    func take() -> [AuditEvent] {
        held.withLock { events in
            defer { events = [] }
            return events
        }
    }
}
