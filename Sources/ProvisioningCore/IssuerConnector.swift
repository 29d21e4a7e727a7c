import Foundation

/// What one attempt at an upstream knows beyond the wallet request itself.
public struct ProvisioningContext: Sendable {
    public let provisioningID: ProvisioningID
    /// Sent to upstreams that honour an idempotency key; the same for every attempt.
    public let idempotencyKey: String
    public let deadline: ContinuousClock.Instant

    public init(provisioningID: ProvisioningID, idempotencyKey: String? = nil, deadline: ContinuousClock.Instant) {
        self.provisioningID = provisioningID
        self.idempotencyKey = idempotencyKey ?? provisioningID.rawValue
        self.deadline = deadline
    }
}

/// One upstream issuer's dialect: build its request, call it, decode its answer, map its errors.
/// Every failure is thrown as a `GatewayError` with a unified code.
public protocol IssuerConnector: Sendable {
    var issuer: IssuerID { get }
    /// The upstream base URL this connector calls, for the audit trail.
    var endpoint: String { get }
    func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
}
