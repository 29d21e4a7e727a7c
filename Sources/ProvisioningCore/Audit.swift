import Foundation

/// One step of one provisioning, as the audit trail keeps it. It names what happened and where,
/// never what was carried: no card data, certificates, nonces or payloads.
public struct AuditEvent: Sendable, Equatable {
    public enum Outcome: String, Sendable, Codable, CaseIterable {
        case succeeded, failed
        /// A repeat of a request under its Idempotency-Key, answered from the stored response; no
        /// upstream was called. With an error code, the stored answer was withheld (the client no
        /// longer holds the card) and the code was answered instead.
        case replayed
    }

    public var provisioningID: ProvisioningID
    public var at: Date
    public var client: ClientID
    public var cardID: CardID
    /// What the request asked for (stored in the `wallet` column).
    public var operation: AuditOperation
    /// Apple Pay: the device the pass is for (phone, watch, tablet).
    public var deviceType: DeviceType?
    /// The wallet token the request acted on: a transition's token id at the issuer, an
    /// activation's `token_unique_reference`. Identifiers, never card data.
    public var tokenID: String?
    public var issuer: IssuerID?
    /// The program the card was in when the request read it and found it the caller's: what
    /// decides who reads the trail later (`GET /v1/provisionings/{id}`), whatever becomes of the
    /// card. Nil when no card of the caller's was read (a refusal before, an activation without a
    /// card, a refused repeat) and for events written before schema 011.
    public var program: ProgramID?
    /// The upstream endpoint's base URL (never with credentials or a query).
    public var endpoint: String?
    public var attempt: Int
    public var outcome: Outcome
    public var errorCode: GatewayError.Code?
    public var upstreamStatus: Int?
    public var latencyMS: Int

    /// Marks this attempt as failed with `error` after `latency`.
    public mutating func fail(with error: GatewayError, latency: Duration) {
        outcome = .failed
        errorCode = error.code
        upstreamStatus = error.upstreamStatus
        latencyMS = Int(latency.wholeMilliseconds)
    }

    public init(
        provisioningID: ProvisioningID, at: Date, client: ClientID, cardID: CardID, operation: AuditOperation, deviceType: DeviceType? = nil,
        tokenID: String? = nil, issuer: IssuerID?, endpoint: String?, attempt: Int, outcome: Outcome, errorCode: GatewayError.Code?,
        upstreamStatus: Int?, latencyMS: Int, program: ProgramID? = nil
    ) {
        self.program = program
        self.provisioningID = provisioningID
        self.at = at
        self.client = client
        self.cardID = cardID
        self.operation = operation
        self.deviceType = deviceType
        self.tokenID = tokenID
        self.issuer = issuer
        self.endpoint = endpoint
        self.attempt = attempt
        self.outcome = outcome
        self.errorCode = errorCode
        self.upstreamStatus = upstreamStatus
        self.latencyMS = latencyMS
    }
}

/// The unified API operation an audit event belongs to.
public enum AuditOperation: String, Sendable, Codable, CaseIterable {
    case applePay = "apple_pay"
    case googlePay = "google_pay"
    case samsungPay = "samsung_pay"
    case tokenActivation = "token_activation"
    /// Listing a card's wallet tokens, and changing one's state.
    case walletTokens = "wallet_tokens"
    case tokenSuspend = "token_suspend"
    case tokenResume = "token_resume"
    case tokenDeactivate = "token_deactivate"

    /// Whether the operation asks an issuer to do something (provision, activate, change a
    /// token), so that an attempt whose outcome is unknown may have done it; listing tokens only
    /// reads.
    public var actsAtTheIssuer: Bool { self != .walletTokens }

    public init(_ wallet: Wallet) {
        switch wallet {
        case .applePay: self = .applePay
        case .googlePay: self = .googlePay
        case .samsungPay: self = .samsungPay
        }
    }

    public init(_ action: WalletTokenAction) {
        switch action {
        case .suspend: self = .tokenSuspend
        case .resume: self = .tokenResume
        case .deactivate: self = .tokenDeactivate
        }
    }

    /// The wallet a provisioning is for; nil for the operations on tokens.
    public var wallet: Wallet? {
        switch self {
        case .applePay: .applePay
        case .googlePay: .googlePay
        case .samsungPay: .samsungPay
        case .tokenActivation, .walletTokens, .tokenSuspend, .tokenResume, .tokenDeactivate: nil
        }
    }
}
