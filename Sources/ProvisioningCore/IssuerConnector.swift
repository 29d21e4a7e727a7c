import Foundation

/// What one attempt at an upstream knows beyond the wallet request itself.
public struct ProvisioningContext: Sendable {
    public let provisioningID: ProvisioningID
    /// Sent to upstreams that honour an idempotency key; the same for every attempt.
    public let idempotencyKey: String
    /// The request's one deadline, on `clock`.
    public let deadline: GatewayClock.Instant
    /// The gateway's clock: what is left before the deadline is read from it.
    public let clock: GatewayClock
    /// The request's logger metadata (`request_id`, `provisioning_id`, ...), so an upstream's log
    /// lines are lines of the request that caused them. Never holds card data.
    public let logMetadata: [String: String]

    public init(
        provisioningID: ProvisioningID, idempotencyKey: String? = nil, deadline: GatewayClock.Instant, clock: GatewayClock,
        logMetadata: [String: String] = [:]
    ) {
        self.provisioningID = provisioningID
        self.idempotencyKey = idempotencyKey ?? provisioningID.rawValue
        self.deadline = deadline
        self.clock = clock
        self.logMetadata = logMetadata
    }

    /// Time left before the deadline (negative once it passed).
    public var remaining: Duration { clock.now.duration(to: deadline) }
}

/// One upstream issuer's dialect: build its request, call it, decode its answer, map its errors.
/// Every failure is thrown as a `GatewayError` with a unified code.
public protocol IssuerConnector: Sendable {
    var issuer: IssuerID { get }
    /// The upstream base URL this connector calls, for the audit trail.
    var endpoint: String { get }
    func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload

    /// The wallets this upstream's contract serves; a request for another is refused before any call.
    var wallets: Set<Wallet> { get }
    func provisionGooglePay(_ request: GooglePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> GooglePayPayload

    /// Whether the upstream activates wallet tokens from the issuer's app.
    var activatesTokens: Bool { get }
    /// `card` is nil when the caller named no card.
    func activateToken(_ request: TokenActivationRequest, card: CardRecord?, context: ProvisioningContext)
        async throws(GatewayError) -> TokenActivationResult

    /// Samsung Pay, for connectors whose `wallets` hold it.
    func provisionSamsungPay(_ request: SamsungPayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> SamsungPayPayload

    /// Whether the upstream lists a card's wallet tokens and changes their state.
    var managesTokens: Bool { get }
    func listWalletTokens(card: CardRecord, context: ProvisioningContext) async throws(GatewayError) -> [WalletToken]
    /// `token` is one `listWalletTokens` gave for `card`.
    func transitionWalletToken(_ token: WalletToken, _ action: WalletTokenAction, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> WalletTokenTransition
}

extension IssuerConnector {
    public var wallets: Set<Wallet> { [.applePay] }
    public var activatesTokens: Bool { false }

    public func provisionGooglePay(_ request: GooglePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> GooglePayPayload
    {
        throw GatewayError(.walletNotSupported, "\(issuer) does not provision for google_pay")
    }

    public func activateToken(_ request: TokenActivationRequest, card: CardRecord?, context: ProvisioningContext)
        async throws(GatewayError) -> TokenActivationResult
    {
        throw GatewayError(.walletNotSupported, "\(issuer) does not activate wallet tokens")
    }

    public func provisionSamsungPay(_ request: SamsungPayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> SamsungPayPayload
    {
        throw GatewayError(.walletNotSupported, "\(issuer) does not provision for samsung_pay")
    }

    public var managesTokens: Bool { false }

    public func listWalletTokens(card: CardRecord, context: ProvisioningContext) async throws(GatewayError) -> [WalletToken] {
        throw GatewayError(.operationNotSupported, "\(issuer) does not manage wallet tokens")
    }

    public func transitionWalletToken(_ token: WalletToken, _ action: WalletTokenAction, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> WalletTokenTransition
    {
        throw GatewayError(.operationNotSupported, "\(issuer) does not manage wallet tokens")
    }
}
