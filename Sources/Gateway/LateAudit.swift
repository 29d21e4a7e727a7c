import Foundation
import Logging
import ProvisioningCore

/// Store writes that record what already happened, tried again on their own after the request's
/// own try failed: the request has answered its failure without waiting again, and the write is
/// made in the background, a few times, until the store takes it.
///
/// - Audit events (`keepTrying`): whatever the failure, a store that did not confirm in time
///   (`StoreError.unanswered`) or one that refused (a PostgreSQL server that restarted under the
///   COMMIT, its connection cut). The issuer may have acted, and the event is all the trail will
///   ever say of it (the crash audit: a PostgreSQL restart during the answer's commit lost the
///   `succeeded` events of requests the issuer had completed, while the gateway ran on). The write
///   that failed may have landed, or may land yet: an event written twice is recorded once (the
///   store's audit-once rule), so trying again costs nothing.
/// - An Idempotency-Key's release (`keepReleasing`), for a request that ended knowing the issuer
///   did nothing: a release the store refused had left the key claimed, read as in progress and
///   then as `idempotency_outcome_unknown`, though nothing was sent. A release touches only the
///   claim made at its time, so a late one never frees another request's claim.
///
/// Each outcome is logged; a process that stops meanwhile loses what was not written, as a crash does.
public enum LateAudit {
    /// Tries now, then after 1, 2, 4 and 8 seconds on `clock`.
    public static func keepTrying(_ events: [AuditEvent], store: any GatewayStore, clock: GatewayClock, logger: Logger) {
        guard !events.isEmpty else { return }
        let ids = Set(events.map(\.provisioningID.rawValue)).sorted().joined(separator: ",")
        retrying(clock: clock, logger: logger, metadata: ["provisioning_id": "\(ids)", "events": "\(events.count)"],
                 written: "audit events written after the store failed or answered late",
                 lost: "audit events could not be written after the store failed or answered late") {
            for event in events { try await store.appendAudit(event) }
        }
    }

    /// Releases the claim `claimedAt` of `client`'s `key`, now, then after 1, 2, 4 and 8 seconds.
    public static func keepReleasing(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID,
                                     store: any GatewayStore, clock: GatewayClock, logger: Logger) {
        // Never the key itself in a log line: the client's provisioning names the claim.
        retrying(clock: clock, logger: logger, metadata: ["client": "\(client)", "provisioning_id": "\(provisioningID.rawValue)"],
                 written: "Idempotency-Key released after the store failed the release",
                 lost: "Idempotency-Key could not be released: it reads as in progress, then as idempotency_outcome_unknown") {
            try await store.releaseIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: provisioningID)
        }
    }

    private static func retrying(clock: GatewayClock, logger: Logger, metadata: Logger.Metadata, written: Logger.Message, lost: Logger.Message,
                                 _ write: @escaping @Sendable () async throws -> Void) {
        Task.detached {
            var wait = Duration.seconds(1)
            for attempt in 1...5 {
                do {
                    try await write()
                    logger.notice(written, metadata: metadata)
                    return
                } catch {
                    guard attempt < 5 else {
                        var metadata = metadata
                        metadata["cause"] = "\(GatewayError.describe(error))"
                        logger.critical(lost, metadata: metadata)
                        return
                    }
                }
                try? await clock.sleep(for: wait)
                wait *= 2
            }
        }
    }
}
