import Foundation
import Logging
import ProvisioningCore

/// Audit events whose write the store did not confirm in time (`StoreError.unanswered`): the
/// request has answered its failure without waiting again, and the events are written on their
/// own in the background, a few times, until the store takes them. The write that timed out may
/// have landed, or may land yet: an event written twice is recorded once (the store's audit-once
/// rule), so trying again costs nothing. Each outcome is logged; a process that stops meanwhile
/// loses what was not written, as a crash does.
public enum LateAudit {
    /// Tries now, then after 1, 2, 4 and 8 seconds on `clock`.
    public static func keepTrying(_ events: [AuditEvent], store: any GatewayStore, clock: GatewayClock, logger: Logger) {
        guard !events.isEmpty else { return }
        let ids = Set(events.map(\.provisioningID.rawValue)).sorted().joined(separator: ",")
        Task.detached {
            var wait = Duration.seconds(1)
            for attempt in 1...5 {
                do {
                    for event in events { try await store.appendAudit(event) }
                    logger.notice("audit events written after the store answered late", metadata: ["provisioning_id": "\(ids)", "events": "\(events.count)"])
                    return
                } catch {
                    guard attempt < 5 else {
                        logger.critical("audit events could not be written after the store answered late", metadata: [
                            "provisioning_id": "\(ids)", "events": "\(events.count)", "cause": "\(GatewayError.describe(error))",
                        ])
                        return
                    }
                }
                try? await clock.sleep(for: wait)
                wait *= 2
            }
        }
    }
}
