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
    /// lines are lines of the request that caused them. Never holds card data. Read only when a
    /// line is written: a request whose upstream lines are below the log level never builds it.
    public var logMetadata: [String: String] { makeLogMetadata() }
    private let makeLogMetadata: @Sendable () -> [String: String]
    /// The trace of the attempt in progress, set by the resilience runtime for each attempt (nil
    /// outside one): `UpstreamHTTP` sends its headers and tells it the HTTP status.
    public private(set) var attemptTrace: UpstreamAttemptTrace?
    /// Who the request is made for (the client's id): when an issuer host's connections are all
    /// in use, the next one goes to the waiting call whose party holds the fewest of them, so one
    /// tenant's burst cannot starve another's calls at an issuer account they share.
    public let party: String

    public init(
        provisioningID: ProvisioningID, idempotencyKey: String? = nil, deadline: GatewayClock.Instant, clock: GatewayClock,
        party: String = "", logMetadata: @escaping @autoclosure @Sendable () -> [String: String] = [:]
    ) {
        self.party = party
        self.provisioningID = provisioningID
        self.idempotencyKey = idempotencyKey ?? provisioningID.rawValue
        self.deadline = deadline
        self.clock = clock
        self.makeLogMetadata = logMetadata
    }

    /// Time left before the deadline (negative once it passed).
    public var remaining: Duration { clock.now.duration(to: deadline) }

    /// The same request's context for one attempt under `trace`.
    public func attempt(_ trace: UpstreamAttemptTrace) -> ProvisioningContext {
        var context = self
        context.attemptTrace = trace
        return context
    }
}

/// One upstream attempt's part in the request's distributed trace: the W3C trace context headers
/// (`traceparent`, `tracestate`) of the attempt's span, sent with the attempt's HTTP request so the
/// upstream continues the caller's trace, and where the answer's HTTP status is noted for that span.
/// Holds trace identifiers only, never card data.
public struct UpstreamAttemptTrace: Sendable {
    public let headers: [(name: String, value: String)]
    private let noteStatus: @Sendable (Int) -> Void

    public init(headers: [(name: String, value: String)], noteStatus: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.headers = headers
        self.noteStatus = noteStatus
    }

    /// The upstream answered with `status` (whatever the connector then makes of it).
    public func answered(status: Int) { noteStatus(status) }
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
        throw GatewayError(.operationNotSupported, "\(issuer) does not activate wallet tokens")
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
