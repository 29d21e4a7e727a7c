import Foundation
import Logging
import ProvisioningCore

/// Writes security events (PCI DSS 10.2) to the store. A registry change or admin read is not
/// answered as a success when its event cannot be written; a refusal or failed authentication
/// that cannot be recorded is logged instead (the caller is refused either way).
public struct SecurityAudit: Sendable {
    let store: any GatewayStore
    let logger: Logger

    public init(store: any GatewayStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func record(_ event: SecurityEvent) async throws(GatewayError) {
        do {
            try await store.appendSecurityEvent(event)
        } catch {
            let failure = GatewayError(.internal, "the security audit trail could not be written", cause: error)
            logger.error("security event write failed", metadata: ["kind": "\(event.kind.rawValue)", "cause": "\(failure.cause ?? "")"])
            throw failure
        }
    }

    /// Best effort: a failure is logged by `record` and goes no further.
    public func note(_ event: SecurityEvent) async {
        try? await record(event)
    }
}
