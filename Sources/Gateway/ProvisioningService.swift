import Foundation
import Logging
import Issuers
import ProvisioningCore
import Synchronization
import Tracing
import WalletCrypto

public struct ApplePayProvisioning: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let payload: ApplePayPayload
}

public struct GooglePayProvisioning: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let payload: GooglePayPayload
}

public struct SamsungPayProvisioning: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let payload: SamsungPayPayload
}

public struct WalletTokenList: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let tokens: [WalletToken]
}

public struct WalletTokenChange: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let tokenID: String
    public let result: WalletTokenTransition
}

public struct TokenActivation: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let result: TokenActivationResult
}

/// The caller as the configuration serving now says: the client given when no reload happened
/// since the request arrived; else the client its key names now (its programs as they are now),
/// or 401 when the key was revoked or names another client.
public typealias CallerNow = @Sendable (Client) throws(GatewayError) -> Client

/// One provisioning: resolve the card, check the client may use it, route it to an issuer, run
/// that issuer's endpoints under its retry policy and circuit breakers within the route's
/// deadline, fall back to `local` when the route allows, and write an audit event for every
/// attempt before answering (never the payload).
public struct ProvisioningService: Sendable {
    let store: any GatewayStore
    /// Loaded before the server starts; read per request.
    let upstreams: UpstreamDirectory
    let local: (any IssuerConnector)?
    let routing: RoutingTable
    let deadline: Duration
    let logger: Logger
    /// Issuers whose config asks for the PassKit chain to be validated before they are called.
    let validatedIssuers: Set<IssuerID>
    let chainValidator: ApplePayChainValidator?
    let caller: ResilientCaller
    let metrics: GatewayMetrics?
    /// Where a token activation without a card goes (`routing.activations.issuer`).
    let activationIssuer: IssuerID?
    /// Issuer accounts limited to some programs (`issuers.<name>.programs`); absent means any.
    let issuerPrograms: [IssuerID: Set<ProgramID>]
    /// Every program some client provisions for (`clients[].programs`, admins aside): an account
    /// without `programs` serves all of them.
    let everyClientProgram: Set<ProgramID>
    /// Deadlines and latencies are read from it.
    let clock: GatewayClock
    /// The token transitions under way in this process: one at a time per token.
    let transitions: TokenTransitionsUnderWay
    /// The caller as the configuration serving now says (`CallerNow`): asked when an operation
    /// starts and before each retry, so a reload that revoked the key or moved the client's
    /// programs while the request waited stops it. Without a reload it is the client given.
    let callerNow: CallerNow
    /// The late audit writes a stop waits for (`LateAudit`).
    let lateWrites: LateWrites

    public init(
        store: any GatewayStore, upstreams: UpstreamDirectory, local: (any IssuerConnector)? = nil, routing: RoutingTable,
        deadline: Duration, validatedIssuers: Set<IssuerID> = [], chainValidator: ApplePayChainValidator? = nil,
        health: UpstreamHealth = UpstreamHealth(), metrics: GatewayMetrics? = nil, activationIssuer: IssuerID? = nil,
        issuerPrograms: [IssuerID: Set<ProgramID>] = [:], everyClientProgram: Set<ProgramID> = [], clock: GatewayClock = .continuous,
        tracer: any Tracer = NoOpTracer(), logger: Logger, transitions: TokenTransitionsUnderWay = TokenTransitionsUnderWay(),
        callerNow: @escaping CallerNow = { client throws(GatewayError) in client }, lateWrites: LateWrites = LateWrites()
    ) {
        self.lateWrites = lateWrites
        self.transitions = transitions
        self.callerNow = callerNow
        self.clock = clock
        self.activationIssuer = activationIssuer
        self.issuerPrograms = issuerPrograms
        self.everyClientProgram = everyClientProgram
        self.store = store
        self.upstreams = upstreams
        self.local = local
        self.routing = routing
        self.deadline = deadline
        self.validatedIssuers = validatedIssuers
        self.chainValidator = chainValidator
        self.caller = ResilientCaller(health: health, metrics: metrics, tracer: tracer)
        self.metrics = metrics
        self.logger = logger
    }

    /// The audit events of one request: numbered attempts, and the request's own outcome (attempt
    /// 0) when no attempt carried it.
    struct Trail {
        var event: AuditEvent
        /// Calls made to an issuer (upstream or local).
        var attempts = 0
        /// The trail's numbered events: every attempt, and an issuer passed over for the fallback
        /// without a call (`auditPassedOver`); an event's `attempt` is its place in this count.
        var numbered = 0
        /// An attempt ended without saying whether the issuer acted (`GatewayError.issuerOutcomeUnknown`).
        var outcomeUnknown = false
        /// A call to an issuer's upstream began: a request cancelled from then on (a shutdown past
        /// its timeout) may have been out, and acted on.
        var upstreamCalled = false
        var lastRecorded: GatewayError?
        /// A write of this request's events found the store not answering in time: no other is
        /// tried (it would wait as long again, past the deadline).
        var storeUnanswered = false
        /// The request's logger, with its provisioning's metadata.
        var logger: Logger
    }

    public func provisionApplePay(
        cardID: CardID, request: ApplePayProvisioningRequest, client: Client, provisioningID: ProvisioningID = .generate(),
        logger: Logger? = nil
    ) async throws(GatewayError) -> ApplePayProvisioning {
        let validated = validatedIssuers
        let chainValidator = chainValidator
        let (issuer, payload) = try await run(
            .applePay, cardID: cardID, client: client, provisioningID: provisioningID, deviceType: request.device.type,
            fallbackAllowed: true, logger: logger
        ) { (issuer) async throws(GatewayError) in
            guard validated.contains(issuer), let chainValidator else { return }
            do throws(ApplePayChainValidator.Failure) {
                _ = try await chainValidator.validate(leaf: request.leafCertificate.value, subordinate: request.subordinateCertificate.value, at: clock.date)
            } catch {
                throw GatewayError(.invalidCertificateChain, error.reason)
            }
        } call: { (connector, card, context) async throws(GatewayError) in
            try await connector.provisionApplePay(request, card: card!, context: context)
        }
        return ApplePayProvisioning(provisioningID: provisioningID, issuer: issuer, payload: payload)
    }

    public func provisionGooglePay(
        cardID: CardID, request: GooglePayProvisioningRequest, client: Client, provisioningID: ProvisioningID = .generate(),
        logger: Logger? = nil
    ) async throws(GatewayError) -> GooglePayProvisioning {
        let (issuer, payload) = try await run(
            .googlePay, cardID: cardID, client: client, provisioningID: provisioningID, deviceType: nil, fallbackAllowed: false,
            logger: logger
        ) { (connector, card, context) async throws(GatewayError) in
            try await connector.provisionGooglePay(request, card: card!, context: context)
        }
        return GooglePayProvisioning(provisioningID: provisioningID, issuer: issuer, payload: payload)
    }

    public func provisionSamsungPay(
        cardID: CardID, request: SamsungPayProvisioningRequest, client: Client, provisioningID: ProvisioningID = .generate(),
        logger: Logger? = nil
    ) async throws(GatewayError) -> SamsungPayProvisioning {
        let (issuer, payload) = try await run(
            .samsungPay, cardID: cardID, client: client, provisioningID: provisioningID, deviceType: request.deviceType,
            fallbackAllowed: false, logger: logger
        ) { (connector, card, context) async throws(GatewayError) in
            try await connector.provisionSamsungPay(request, card: card!, context: context)
        }
        return SamsungPayProvisioning(provisioningID: provisioningID, issuer: issuer, payload: payload)
    }

    /// The card's wallet tokens at its issuer (a read: the issuer's retry rules apply as to any call).
    public func walletTokens(
        cardID: CardID, client: Client, provisioningID: ProvisioningID = .generate(), logger: Logger? = nil
    ) async throws(GatewayError) -> WalletTokenList {
        let (issuer, tokens) = try await run(
            .walletTokens, cardID: cardID, client: client, provisioningID: provisioningID, deviceType: nil, fallbackAllowed: false,
            logger: logger
        ) { (connector, card, context) async throws(GatewayError) in
            try await connector.listWalletTokens(card: card!, context: context)
        }
        return WalletTokenList(provisioningID: provisioningID, issuer: issuer, tokens: tokens)
    }

    /// Suspends, resumes or deactivates one of the card's tokens. The token must be among the
    /// card's (listed first, in the same attempt): another card's token, or one that does not
    /// exist, is `token_not_found` and no transition is sent. Neither Marqeta nor Lithic has an
    /// idempotency key, so a transition whose bytes may have left is never sent again (the issuer's
    /// decision table, `resendSafe: false`).
    public func transitionWalletToken(
        cardID: CardID, tokenID: String, action: WalletTokenAction, client: Client, provisioningID: ProvisioningID = .generate(),
        logger: Logger? = nil
    ) async throws(GatewayError) -> WalletTokenChange {
        guard WalletToken.isTokenID(tokenID) else { throw GatewayError(.invalidRequest, WalletToken.tokenIDRule) }
        // The store's hold of the token, once taken: let go only after `run` wrote the request's
        // trail, so that a hold left behind is a transition whose outcome may be on no record (its
        // instance died between the issuer's answer and its audit commit), which the purge, or the
        // request that takes it over, records as `token_transition_unfinished`. (Under an
        // Idempotency-Key the success event commits later, with the kept answer; the unfinished
        // claim is that request's trace.)
        var storeHold: (key: String, until: Date)?
        // Whether the transition's own call was made (not only the listing): only then may an
        // unknown outcome be a transition the issuer applies later.
        var transitionCalled = false
        let outcome: Result<(IssuerID, WalletTokenTransition), GatewayError>
        do throws(GatewayError) {
            outcome = .success(try await run(
                AuditOperation(action), cardID: cardID, client: client, provisioningID: provisioningID, deviceType: nil, tokenID: tokenID,
                fallbackAllowed: false,
                logger: logger
            ) { (connector, card, context) async throws(GatewayError) -> WalletTokenTransition in
                // One transition of a token at a time, from its listing to the issuer's answer: two
                // identical requests at once had both listed the token active and both suspended it,
                // and a second deactivate went to a token the first had just deactivated (the token
                // audit). Claimed for this card's token, after the card was found to be the caller's:
                // keyed by the token alone, another tenant naming the same token id through its own
                // card (whose listing then finds no such token) held the claim while its listing ran,
                // refusing the owner's deactivate and telling it that the token was being changed
                // (the identifier audit: 31 of 40 of the owner's transitions refused). A token is one
                // card's, and a card's issuer reference is its own (`issuer_reference_in_use`), so the
                // card's id adds nothing that two requests for one token could differ in.
                let underWay = Self.tokenHoldKey(issuer: connector.issuer, card: card!.id, token: tokenID)
                let conflict = GatewayError(.tokenStateConflict, "another request is changing this token at \(connector.issuer), or did "
                    + "with no answer in time and its hold has not lapsed: list the card's tokens for its outcome; nothing was sent").nothingActed()
                guard transitions.claim(underWay) else { throw conflict }
                defer { transitions.release(underWay) }
                // Then across the instances sharing the store (the multi-instance audit: two suspends
                // of one token on two instances both listed it active and both were sent). The hold
                // lasts as long as this request can (its deadline and the claims' margin), so one its
                // instance died holding is free again after that.
                let now = clock.date
                let until = now.addingTimeInterval(Double((context.remaining + GatewayConfig.idempotencyAbandonMargin).wholeMilliseconds) / 1000)
                let held: Bool
                do {
                    held = try await store.takeHold(underWay, holder: provisioningID.rawValue, now: now, until: until)
                } catch {
                    // The hold may have committed with its answer lost (a PostgreSQL timeout): let it
                    // go, or the token would refuse every transition until its time.
                    try? await store.releaseHold(underWay, holder: provisioningID.rawValue)
                    throw GatewayError(.internal, "the store could not hold the token for its transition; nothing was sent", cause: error)
                        .nothingActed()
                }
                guard held else { throw conflict }
                storeHold = (underWay, until)
                return try await transition(connector, card!, context)
            })
        } catch {
            outcome = .failure(error)
        }
        if let storeHold, transitionCalled, case .failure(let error) = outcome, error.issuerOutcomeUnknown {
            // The transition may have reached the issuer, which may apply it yet (no answer in time,
            // a reset, a 5xx): the hold stands until its time (the request's deadline and the
            // claims' margin), so no other request, with another key or none, on any instance,
            // lists the token in its old state meanwhile and sends the transition again (the
            // send-twice audit). The purge then records it, as a transition whose outcome is on no
            // record (`token_transition_unfinished`), which it is.
            (logger ?? self.logger).notice("a token's transition hold stands until its time: the issuer may have acted", metadata: [
                "provisioning_id": "\(provisioningID)", "until": "\(storeHold.until)",
            ])
        } else if let storeHold {
            do {
                try await store.releaseHold(storeHold.key, holder: provisioningID.rawValue)
            } catch {
                // Its time ends it: the token waits at most that long (and the purge records it).
                (logger ?? self.logger).warning("a token's transition hold could not be released: it lapses at its time", metadata: [
                    "provisioning_id": "\(provisioningID)", "until": "\(storeHold.until)", "cause": "\(GatewayError.describe(error))",
                ])
            }
        }
        let (issuer, change) = try outcome.get()
        return WalletTokenChange(provisioningID: provisioningID, issuer: issuer, tokenID: tokenID, result: change)

        /// The transition itself, while this request holds the token: its listing, the state
        /// check, and the issuer's call.
        func transition(_ connector: any IssuerConnector, _ card: CardRecord, _ context: ProvisioningContext)
            async throws(GatewayError) -> WalletTokenTransition {
            // The list only reads: however it fails, no transition was sent, so the failure leaves no
            // outcome unknown (an Idempotency-Key is released, the attempt may be made again).
            let tokens: [WalletToken]
            do throws(GatewayError) {
                tokens = try await connector.listWalletTokens(card: card, context: context)
            } catch {
                throw error.nothingActed()
            }
            guard let token = tokens.first(where: { $0.tokenID == tokenID }) else {
                // The id is not repeated: it is the caller's text, and may be anything pasted there.
                throw GatewayError(.tokenNotFound, "card \(cardID) has no wallet token of that id at \(connector.issuer)")
            }
            // The state just listed decides what may be asked: nothing goes to the issuer for a
            // deactivated token (final), or to put one in the state it is in. A pending or unknown
            // state is the issuer's to judge.
            if let conflict = Self.stateConflict(token.status, action) {
                throw GatewayError(.tokenStateConflict, "the token is \(token.status.rawValue) at \(connector.issuer): \(conflict); nothing was sent")
            }
            // The listing took its time (up to ten pages, each within a try's bound): the caller
            // as the configuration says now and the card as the registry says now are read again
            // before the one call that acts, as before a retry. A card moved to another tenant's
            // program, or a key revoked, while the listing ran stops here, nothing sent.
            do throws(GatewayError) {
                try await reconfirm(card, client: client, issuer: connector.issuer)
            } catch {
                throw error.nothingActed()
            }
            transitionCalled = true
            return try await connector.transitionWalletToken(token, action, card: card, context: context)
        }
    }

    /// What a token's transition holds, in this process and in the store: its issuer, card and id.
    public static func tokenHoldKey(issuer: IssuerID, card: CardID, token: String) -> String {
        "\(issuer.rawValue)\n\(card.rawValue)\n\(token)"
    }

    /// Why a token in `status` cannot take `action`, or nil when it may.
    /// (`TokenTransitionsUnderWay` keeps a second request from judging a state the first is changing.)
    static func stateConflict(_ status: WalletToken.Status, _ action: WalletTokenAction) -> String? {
        switch (status, action) {
        case (.deactivated, _): "a deactivated token is final"
        case (.suspended, .suspend): "it is suspended already"
        case (.active, .resume): "it is active already"
        default: nil
        }
    }

    /// Activates a wallet token at the card's issuer, or, without a card, at `activationIssuer`.
    public func activateToken(
        _ request: TokenActivationRequest, cardID: CardID?, client: Client, provisioningID: ProvisioningID = .generate(),
        logger: Logger? = nil
    ) async throws(GatewayError) -> TokenActivation {
        let (issuer, result) = try await run(
            .tokenActivation, cardID: cardID, client: client, provisioningID: provisioningID, deviceType: nil,
            tokenID: request.tokenUniqueReference, fallbackAllowed: false,
            logger: logger
        ) { (connector, card, context) async throws(GatewayError) in
            try await connector.activateToken(request, card: card, context: context)
        }
        metrics?.activation(issuer: issuer, result: result.outcome.rawValue)
        return TokenActivation(provisioningID: provisioningID, issuer: issuer, result: result)
    }

    /// Which connectors serve an operation, and whether one issuer can.
    private func serves(_ issuer: IssuerID, _ operation: AuditOperation) -> Bool {
        guard let connector = upstreams.issuer(issuer)?.endpoints.first ?? (local?.issuer == issuer ? local : nil) else { return false }
        switch operation {
        case .applePay, .googlePay, .samsungPay: return operation.wallet.map(connector.wallets.contains) ?? false
        case .tokenActivation: return connector.activatesTokens
        case .walletTokens, .tokenSuspend, .tokenResume, .tokenDeactivate: return connector.managesTokens
        }
    }

    /// One request of any operation: card and client checks, routing, the issuer's attempts under
    /// its resilience rules, the local fallback where allowed, and the audit trail. `prepare` runs
    /// once per issuer before its first attempt (chain validation). `requestLogger`: the request's
    /// own (its `request_id`), else the service's.
    private func run<T: Sendable>(
        _ operation: AuditOperation, cardID: CardID?, client arrived: Client, provisioningID: ProvisioningID, deviceType: DeviceType?,
        tokenID: String? = nil, fallbackAllowed: Bool, logger requestLogger: Logger?,
        prepare: (IssuerID) async throws(GatewayError) -> Void = { _ in },
        call: (any IssuerConnector, CardRecord?, ProvisioningContext) async throws(GatewayError) -> T
    ) async throws(GatewayError) -> (IssuerID, T) {
        // Asked again here, not only when the handler began: a request with an Idempotency-Key
        // may have waited for a duplicate's claim for up to its deadline (the reload audit: a key
        // revoked, or the program moved to another tenant, while a duplicate waited, and the
        // duplicate then provisioned with the old rights, seconds after the reload).
        let client: Client
        do throws(GatewayError) {
            client = try callerNow(arrived)
        } catch {
            // Refused as the configuration says now, before anything was read or sent: on the
            // trail all the same, as every request that reached its operation is (the durability
            // audit: a duplicate refused after a reload revoked its key had left no event).
            let refused = AuditEvent(provisioningID: provisioningID, at: clock.date, client: arrived.id, cardID: cardID ?? CardID(""),
                                     operation: operation, deviceType: deviceType, tokenID: tokenID, issuer: nil, endpoint: nil, attempt: 0,
                                     outcome: .failed, errorCode: error.code, upstreamStatus: nil, latencyMS: 0)
            try await record(refused, logger: requestLogger ?? logger)
            throw error.with(provisioningID: provisioningID)
        }
        let started = clock.now
        var logger = requestLogger ?? logger
        logger[metadataKey: "provisioning_id"] = "\(provisioningID)"
        logger[metadataKey: "operation"] = "\(operation.rawValue)"
        if let cardID { logger[metadataKey: "card_id"] = "\(cardID)" }
        logger[metadataKey: "client"] = "\(client.id)"
        var trail = Trail(event: AuditEvent(
            provisioningID: provisioningID, at: clock.date, client: client.id, cardID: cardID ?? CardID(""), operation: operation,
            deviceType: deviceType, tokenID: tokenID, issuer: nil, endpoint: nil, attempt: 0, outcome: .failed, errorCode: nil, upstreamStatus: nil,
            latencyMS: 0), logger: logger)

        // Rules match a wallet; a token activation goes to the card's own issuer, else to
        // routing.activations. Operations on a card's tokens go where its Apple Pay would.
        let wallet: Wallet = operation.wallet ?? .applePay
        do throws(GatewayError) {
            // Admin clients manage; provisioning and activation belong to the programs' own clients.
            guard !client.admin else {
                throw GatewayError(.forbidden, "admin clients manage the gateway; they do not provision or activate tokens")
            }
            var card: CardRecord?
            /// The first routing rule matching the card: its issuer (when the record names none),
            /// fallback and deadline.
            var rule: RoutingRule?
            let issuer: IssuerID
            if let cardID {
                let record = try await self.card(cardID)
                // Another program's card is answered exactly like a card that does not exist.
                guard client.mayUse(record) else { throw .cardNotAmongClients(cardID) }
                card = record
                // Every event from here on names the program: the trail's reader is judged by it.
                trail.event.program = record.program
                rule = routing.firstMatch(record, wallet: wallet)
                guard let routed = operation == .tokenActivation ? record.issuer ?? activationIssuer : record.issuer ?? rule?.issuer
                else {
                    // A wallet no issuer provisions for this card, or an operation (the token
                    // routes are no wallet) no issuer serves for it: the codes each route lists.
                    throw GatewayError(operation.wallet == nil ? .operationNotSupported : .walletNotSupported,
                                       "no issuer is routed for card \(cardID) and \(operation.rawValue)")
                }
                issuer = routed
            } else {
                try Self.mayActivateWithoutACard(client)
                guard let routed = activationIssuer else {
                    throw GatewayError(.operationNotSupported, "an activation without card_id needs routing.activations.issuer, which is not configured")
                }
                issuer = routed
            }
            // An issuer account limited to some programs never serves another program's card,
            // whatever a routing rule says.
            if let card, let allowed = issuerPrograms[issuer], !allowed.contains(card.program) {
                throw GatewayError(.forbidden, "issuer \(issuer) does not serve program \(card.program)")
            }
            trail.event.issuer = issuer
            logger[metadataKey: "issuer"] = "\(issuer)"
            trail.logger = logger
            // A card registered to an issuer this configuration no longer has (removed from the
            // file, renamed): an ops problem, said as one, not as the wallet being unsupported.
            guard upstreams.issuer(issuer) != nil || local?.issuer == issuer else {
                throw GatewayError(.upstreamUnavailable, "the card's issuer \(issuer) is not in this gateway's configuration (issuers.\(issuer))")
            }
            // An issuer whose contract has no place for this operation is never called.
            guard serves(issuer, operation) else {
                switch operation {
                case .tokenActivation: throw GatewayError(.operationNotSupported, "\(issuer) does not activate wallet tokens")
                case .walletTokens, .tokenSuspend, .tokenResume, .tokenDeactivate:
                    throw GatewayError(.operationNotSupported, "\(issuer) does not manage wallet tokens")
                case .applePay, .googlePay, .samsungPay:
                    throw GatewayError(.walletNotSupported, "\(issuer) does not provision for \(operation.rawValue)")
                }
            }
            // Nor is an issuer the config narrowed to other wallets (the token operations are no wallet).
            if operation.wallet != nil, let used = upstreams.issuer(issuer)?.wallets, !used.contains(wallet) {
                throw GatewayError(.walletNotSupported, "\(issuer) is not used for \(wallet.rawValue) (issuers.\(issuer).wallets)")
            }
            // An activation reaches the issuer as a token reference alone (no connector sends the
            // card; a card named here only routes it), which may be any card's at that account. So
            // the account must not serve another client's programs, or a client could activate
            // another's token through a card of its own; an account that lists no programs serves
            // every client's. Without a card, the account must list its programs, all of them this
            // client's (also checked in the config).
            if operation == .tokenActivation {
                if card == nil {
                    try accountServesOnly(client, issuer: issuer)
                } else {
                    guard !client.sharesAccount(serving: issuerPrograms[issuer], everyClientProgram: everyClientProgram) else {
                        throw GatewayError(.forbidden, "an activation names only the token, so it needs issuer \(issuer)'s account "
                            + "limited to this client's programs (issuers.\(issuer).programs)")
                    }
                }
            }
            let deadline = started.advanced(by: rule?.deadline ?? self.deadline)
            let requestLogger = logger
            let context = ProvisioningContext(
                provisioningID: provisioningID, deadline: deadline, clock: clock, party: client.id.rawValue,
                logMetadata: requestLogger.handler.metadata.mapValues { "\($0)" })
            do throws(GatewayError) {
                let value = try await serve(issuer, card: card, client: client, context: context, trail: &trail, prepare: prepare, call: call)
                reportSuccess(operation, started: started, logger: logger)
                return (issuer, value)
            } catch where error.isRetryable && fallbackAllowed {
                guard let card, let fallback = rule?.fallback, fallback != issuer, fallback == local?.issuer,
                      clock.now < deadline
                else { throw error }
                logger.notice("falling back", metadata: ["fallback": "\(fallback)", "code": "\(error.code.rawValue)"])
                metrics?.fallback(issuer: issuer, to: fallback)
                if trail.attempts == 0 {
                    // Paused, every breaker open: the routed issuer was not called, and the trail
                    // says so before the local attempt, rather than showing the local one alone.
                    try await auditPassedOver(issuer, error: error, trail: &trail)
                }
                // The routed issuer may have taken up to the deadline: the caller and the card are
                // asked again before the local issuer opens the vault (the review: a key revoked,
                // a program or card moved meanwhile, and the fallback provisioned as before).
                try await reconfirm(card, client: client, issuer: fallback)
                do throws(GatewayError) {
                    let value = try await serve(fallback, card: card, client: client, context: context, trail: &trail, prepare: prepare, call: call)
                    // The request's `issuer` is the routed one; the line says who answered.
                    var answered = logger
                    answered[metadataKey: "answered_by"] = "\(fallback)"
                    reportSuccess(operation, started: started, logger: answered)
                    return (fallback, value)
                } catch let fallbackError where fallbackError.code == .cardNotFound {
                    // The vault holds nothing for this card: its own attempt is on record, and the
                    // issuer's failure is the answer.
                    throw error
                }
            }
        } catch {
            var error = error
            if !trail.storeUnanswered, trail.lastRecorded.map({ $0.code != error.code || $0.detail != error.detail }) ?? true {
                var event = trail.event
                event.attempt = 0
                event.endpoint = nil
                event.fail(with: error, latency: started.duration(to: clock.now))
                do throws(GatewayError) {
                    if error.code == .internal, error.detail == Self.registryUnanswered {
                        // The store did not answer the card read in time: the failure event is
                        // written in the background (`LateAudit`), not waited for a second time
                        // (the PostgreSQL audit's outage cost a request 10 s, twice the bound).
                        LateAudit.keepTrying([event], store: store, clock: clock, logger: logger, writes: lateWrites)
                    } else {
                        try await record(event, logger: logger)
                    }
                } catch let auditFailure {
                    // No answer goes out without its audit event: the caller gets the audit
                    // failure instead (logged by `record`), and the original one is logged below.
                    logger.notice("\(operation.rawValue) failed before its audit event could be written",
                                  metadata: ["code": "\(error.code.rawValue)", "detail": "\(error.detail)"])
                    error = auditFailure
                }
            }
            metrics?.request(operation: operation.rawValue, outcome: error.code.rawValue)
            logger.notice("\(operation.rawValue) failed", metadata: Self.failureMetadata(error))
            throw error.with(provisioningID: provisioningID).afterAttempt(trail.attempts > 0)
                .outcomeUnknown(operation.actsAtTheIssuer && (trail.outcomeUnknown || (trail.upstreamCalled && Task.isCancelled)))
                .storeDidNotAnswer(trail.storeUnanswered)
        }
    }

    /// A failure's log metadata: its code, detail and cause.
    private static func failureMetadata(_ error: GatewayError) -> Logger.Metadata {
        var failure: Logger.Metadata = ["code": "\(error.code.rawValue)", "detail": "\(error.detail)"]
        if let cause = error.cause { failure["cause"] = "\(cause)" }
        return failure
    }

    /// The success's log line and metric; under an Idempotency-Key only once the answer and its
    /// event are committed, and as the failure the caller gets if they cannot be.
    private func reportSuccess(_ operation: AuditOperation, started: GatewayClock.Instant, logger: Logger) {
        let clock = clock, metrics = metrics
        let report: @Sendable (GatewayError?) -> Void = { error in
            let latency = "\(started.duration(to: clock.now).wholeMilliseconds)"
            guard let error else {
                logger.info("\(operation.rawValue) succeeded", metadata: ["latency_ms": "\(latency)"])
                metrics?.request(operation: operation.rawValue, outcome: "succeeded")
                return
            }
            metrics?.request(operation: operation.rawValue, outcome: error.code.rawValue)
            var failure = Self.failureMetadata(error)
            failure["latency_ms"] = "\(latency)"
            logger.notice("\(operation.rawValue) failed after its issuer succeeded", metadata: failure)
        }
        if let deferred = DeferredAudit.current { deferred.onSettled(report) } else { report(nil) }
    }

    /// Every attempt at one issuer: its upstream endpoints under the resilience rules, or the
    /// local encryptor once. Each attempt's audit event is written before going on.
    private func serve<T: Sendable>(
        _ issuer: IssuerID, card: CardRecord?, client: Client, context: ProvisioningContext, trail: inout Trail,
        prepare: (IssuerID) async throws(GatewayError) -> Void,
        call: (any IssuerConnector, CardRecord?, ProvisioningContext) async throws(GatewayError) -> T
    ) async throws(GatewayError) -> T {
        try await prepare(issuer)
        if let upstream = upstreams.issuer(issuer) {
            trail.upstreamCalled = true
            var calls = 0
            return try await caller.call(upstream, context: context, logger: trail.logger, onAttempt: { (report) async throws(GatewayError) in
                try await audit(report, trail: &trail)
            }) { (connector, attempt) async throws(GatewayError) in
                calls += 1
                if calls > 1 { try await reconfirm(card, client: client, issuer: issuer) }
                return try await call(connector, card, attempt)
            }
        }
        guard let local, local.issuer == issuer else {
            throw GatewayError(.internal, "issuer \(issuer) has no connector")
        }
        let started = clock.now
        do throws(GatewayError) {
            let value = try await call(local, card, context)
            try await audit(AttemptReport(issuer: issuer, endpoint: local.endpoint, error: nil, latency: started.duration(to: clock.now)),
                            trail: &trail)
            return value
        } catch {
            try await audit(AttemptReport(issuer: issuer, endpoint: local.endpoint, error: error, latency: started.duration(to: clock.now)),
                            trail: &trail)
            throw error
        }
    }

    private func audit(_ report: AttemptReport, trail: inout Trail) async throws(GatewayError) {
        trail.attempts += 1
        trail.numbered += 1
        if let error = report.error, !error.actedOnNothing, error.issuerOutcomeUnknown || error.condition?.leavesOutcomeUnknown == true {
            trail.outcomeUnknown = true
        }
        var event = trail.event
        event.at = clock.date
        event.issuer = report.issuer
        event.endpoint = report.endpoint
        event.attempt = trail.numbered
        event.outcome = report.error == nil ? .succeeded : .failed
        event.errorCode = report.error?.code
        if let error = report.error {
            // A refusal of the gateway's own after the upstream answered keeps that answer's status.
            event.upstreamStatus = error.upstreamStatus ?? report.upstreamStatus
        } else {
            event.upstreamStatus = report.upstreamStatus
        }
        event.latencyMS = Int(report.latency.wholeMilliseconds)
        if report.error == nil, let deferred = DeferredAudit.current {
            // Under an Idempotency-Key: committed with the stored answer, before the answer is sent.
            deferred.hold(event)
        } else {
            try await record(event, logger: trail.logger, unanswered: &trail.storeUnanswered)
        }
        trail.lastRecorded = report.error
    }

    /// The routed issuer, not called, passed over for the fallback: a numbered event with its code
    /// and no endpoint, upstream status or latency (no call was made), written before the local
    /// attempt so the trail reads in order.
    private func auditPassedOver(_ issuer: IssuerID, error: GatewayError, trail: inout Trail) async throws(GatewayError) {
        trail.numbered += 1
        var event = trail.event
        event.at = clock.date
        event.issuer = issuer
        event.endpoint = nil
        event.attempt = trail.numbered
        event.outcome = .failed
        event.errorCode = error.code
        event.upstreamStatus = nil
        event.latencyMS = 0
        try await record(event, logger: trail.logger, unanswered: &trail.storeUnanswered)
        trail.lastRecorded = error
    }

    /// An activation without `card_id` is the client's only when its config allows it.
    private static func mayActivateWithoutACard(_ client: Client) throws(GatewayError) {
        guard client.activationsWithoutCard else {
            throw GatewayError(.forbidden, "card_id: required (this client may not activate tokens without a card: clients[].activations_without_card)")
        }
    }

    /// A stored answer about to be replayed: the client must still hold the card (or still make
    /// activations without one), and the replay is on the trail either way, under the stored
    /// answer's provisioning id, before it is answered: `replayed` (no upstream was called), or,
    /// refused, `failed` with its code, and its problem names that provisioning (the client made
    /// it), as a fresh refusal's would.
    public func replay(
        provisioningID: ProvisioningID, cardID: CardID?, client: Client, operation: AuditOperation, tokenID: String? = nil,
        issuer: IssuerID? = nil, deviceType: DeviceType? = nil, logger: Logger? = nil
    ) async throws(GatewayError) {
        var logger = logger ?? self.logger
        logger[metadataKey: "provisioning_id"] = "\(provisioningID)"
        func event(_ outcome: AuditEvent.Outcome, _ code: GatewayError.Code?, program: ProgramID? = nil) -> AuditEvent {
            AuditEvent(provisioningID: provisioningID, at: clock.date, client: client.id, cardID: cardID ?? CardID(""), operation: operation,
                       deviceType: deviceType, tokenID: tokenID, issuer: issuer, endpoint: nil, attempt: 0, outcome: outcome, errorCode: code,
                       upstreamStatus: nil, latencyMS: 0, program: program)
        }
        let program: ProgramID?
        do {
            // The caller as the configuration says now: a duplicate that waited for the first
            // request's claim, then answered from its stored answer, had been served with a key
            // revoked, or a program moved, meanwhile (the review).
            program = try await authorizeReplay(cardID: cardID, client: try callerNow(client))
        } catch {
            // A refused replay is a `replayed` event with the refusal's code: like a served one it
            // called no issuer, and every refusal is kept (a `failed` event at attempt 0 would be
            // the provisioning's one such event, so a second refusal could not be written and
            // answered 500; the two-instance audit found it).
            try await record(event(.replayed, error.code), logger: logger)
            throw error.with(provisioningID: provisioningID)
        }
        try await record(event(.replayed, nil, program: program), logger: logger)
    }

    /// A stored answer is replayed only while the card is still one of the client's: not after it
    /// was deleted, moved to another program, or the client lost the program.
    /// The card's program, when there is a card.
    private func authorizeReplay(cardID: CardID?, client: Client) async throws(GatewayError) -> ProgramID? {
        guard let cardID else {
            // An activation without a card: replayed only while the client may still make one.
            try Self.mayActivateWithoutACard(client)
            return nil
        }
        let card = try await card(cardID)
        guard client.mayUse(card) else { throw .cardNotAmongClients(cardID) }
        return card.program
    }

    /// The audit event is written before the caller gets an answer; if it cannot be, neither can the answer.
    private func record(_ event: AuditEvent, logger: Logger) async throws(GatewayError) {
        var unanswered = false
        try await record(event, logger: logger, unanswered: &unanswered)
    }

    /// `record`, setting `unanswered` when the store did not answer in time.
    private func record(_ event: AuditEvent, logger: Logger, unanswered: inout Bool) async throws(GatewayError) {
        do {
            try await store.appendAudit(event)
        } catch {
            // The request answers its failure now; the event is still written, whether the store
            // did not answer in time (the review) or refused it (the crash audit: a PostgreSQL
            // restart under the write lost the events of issuer calls that had been made).
            if StoreError.isUnanswered(error) { unanswered = true }
            // Not a replay's: the audit-once rule does not cover replays, so a write that landed
            // with its acknowledgement lost would be recorded twice, and a `replayed` event
            // written later would say the stored answer was served to a caller that got 500.
            if event.outcome != .replayed { LateAudit.keepTrying([event], store: store, clock: clock, logger: logger, writes: lateWrites) }
            let failure = GatewayError(.internal, "the audit trail could not be written", cause: error)
            logger.error("audit write failed", metadata: ["provisioning_id": "\(event.provisioningID)", "cause": "\(failure.cause ?? "")"])
            throw failure
        }
    }

    /// Before a retry the card is read again: one moved to another program (or away from this
    /// client), another issuer or another card at its issuer while the request waited is not sent
    /// again (the PostgreSQL audit's retry provisioned, 2 s after the move, a card an admin had
    /// just given to another tenant's program). Only retries pay the read.
    private func confirmUnchanged(_ card: CardRecord, client: Client) async throws(GatewayError) {
        let now = try await self.card(card.id)
        guard client.mayUse(now) else { throw .cardNotAmongClients(card.id) }
        guard now.issuer == card.issuer, now.issuerReference == card.issuerReference else {
            throw GatewayError(.cardNotFound,
                "card \(card.id) changed while the request ran (its issuer or issuer reference): nothing more was sent; send the request again")
        }
    }

    /// Before anything more is sent for a request that waited (a retry, the fallback): the
    /// caller as the configuration says now (the reload audit's retry went out 0.9 s after its
    /// program moved, with the card's data in its answer), then the card as the registry says
    /// now, or, for an activation without a card, the client's right to make one and the
    /// account's programs, all still the client's.
    private func reconfirm(_ card: CardRecord?, client: Client, issuer: IssuerID) async throws(GatewayError) {
        let now = try callerNow(client)
        if let card {
            try await confirmUnchanged(card, client: now)
        } else {
            try Self.mayActivateWithoutACard(now)
            try accountServesOnly(now, issuer: issuer)
        }
    }

    /// An activation without a card reaches the issuer as a token reference alone: the account
    /// must list its programs, all of them the client's. Said as what the account needs, not as
    /// what else it serves: a tenant is not told that other tenants share it.
    private func accountServesOnly(_ client: Client, issuer: IssuerID) throws(GatewayError) {
        guard let served = issuerPrograms[issuer], served.isSubset(of: client.programs) else {
            throw GatewayError(.forbidden,
                "an activation without card_id needs issuer \(issuer)'s account limited to this client's programs (issuers.\(issuer).programs): activate with card_id")
        }
    }

    static let registryUnanswered = "the card registry did not answer in time"

    private func card(_ id: CardID) async throws(GatewayError) -> CardRecord {
        let record: CardRecord?
        do {
            record = try await store.card(id)
        } catch {
            throw GatewayError(.internal, StoreError.isUnanswered(error) ? Self.registryUnanswered : "the card registry failed", cause: error)
        }
        guard let record else { throw .cardNotAmongClients(id) }
        return record
    }
}

/// The wallet token transitions under way in this process, by issuer, card and token id: a second
/// transition of a token waits for nothing and is refused (409 `token_state_conflict`) while the
/// first runs, from its listing to the issuer's answer. Taken before the store's hold, which does
/// the same across instances: a second request of this process is refused without a write.
public final class TokenTransitionsUnderWay: Sendable {
    private let held = Mutex<Set<String>>([])
    public init() {}

    /// True when nobody held `key`; it is now the caller's until `release`.
    func claim(_ key: String) -> Bool { held.withLock { $0.insert(key).inserted } }
    func release(_ key: String) { _ = held.withLock { $0.remove(key) } }
}
