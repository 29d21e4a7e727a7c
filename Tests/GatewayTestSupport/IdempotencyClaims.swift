import Foundation
import ProvisioningCore

extension GatewayStore {
    /// A claim whose provisioning id the test does not look at: `ProvisioningID.testClaim`, which
    /// the release and the abandon below name.
    public func claimIdempotencyKey(client: ClientID, key: String, requestHash: String, now: Date, expiresAt: Date, abandonAt: Date)
        async throws -> IdempotencyClaim
    {
        try await claimIdempotencyKey(client: client, key: key, requestHash: requestHash, provisioningID: .testClaim(client, key, at: now),
                                      now: now, expiresAt: expiresAt, abandonAt: abandonAt)
    }

    /// Releases the claim the convenience claim above made at `claimedAt`.
    public func releaseIdempotencyKey(client: ClientID, key: String, claimedAt: Date) async throws {
        try await releaseIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: .testClaim(client, key, at: claimedAt))
    }

    /// Marks abandoned the claim the convenience claim above made at `claimedAt`.
    public func abandonIdempotencyKey(client: ClientID, key: String, claimedAt: Date) async throws {
        try await abandonIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: .testClaim(client, key, at: claimedAt))
    }
}

extension ProvisioningID {
    /// The id the tests' convenience claim gives `client`'s claim of `key` at `now`.
    public static func testClaim(_ client: ClientID, _ key: String, at now: Date) -> ProvisioningID {
        ProvisioningID("prv_test_\(client.rawValue)_\(key)_\(Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))")
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
