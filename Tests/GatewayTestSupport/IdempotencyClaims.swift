import Foundation
import ProvisioningCore

extension GatewayStore {
    /// A claim whose provisioning id the test does not look at (a fresh one each time).
    public func claimIdempotencyKey(client: ClientID, key: String, requestHash: String, now: Date, expiresAt: Date, abandonAt: Date)
        async throws -> IdempotencyClaim
    {
        try await claimIdempotencyKey(client: client, key: key, requestHash: requestHash, provisioningID: .generate(at: now), now: now,
                                      expiresAt: expiresAt, abandonAt: abandonAt)
    }
}

extension IdempotencyClaim {
    /// Abandoned, whatever provisioning it names.
    public var isMismatch: Bool {
        if case .mismatch = self { return true }
        return false
    }

    public var isAbandoned: Bool {
        if case .abandoned = self { return true }
        return false
    }
}
