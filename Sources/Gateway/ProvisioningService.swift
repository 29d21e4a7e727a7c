import Foundation
import Logging
import Issuers
import ProvisioningCore
import WalletCrypto

public struct ApplePayProvisioning: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let payload: ApplePayPayload
}

/// One provisioning: resolve the card, check the client may use it, route it to an issuer, run
/// that issuer's endpoints under its retry policy and circuit breakers within the route's
/// deadline, fall back to `local` when the route allows, and write an audit event for every
/// attempt before answering (never the payload).
public struct ProvisioningService: Sendable {
    let store: any GatewayStore
    let upstreams: [IssuerID: UpstreamIssuer]
    let local: (any IssuerConnector)?
    let routing: RoutingTable
    let deadline: Duration
    let logger: Logger
    /// Issuers whose config asks for the PassKit chain to be validated before they are called.
    let validatedIssuers: Set<IssuerID>
    let chainValidator: ApplePayChainValidator?
    let caller: ResilientCaller
    let metrics: GatewayMetrics?

    public init(
        store: any GatewayStore, upstreams: UpstreamDirectory, local: (any IssuerConnector)? = nil, routing: RoutingTable,
        deadline: Duration, validatedIssuers: Set<IssuerID> = [], chainValidator: ApplePayChainValidator? = nil,
        health: UpstreamHealth = UpstreamHealth(), metrics: GatewayMetrics? = nil, logger: Logger
    ) {
        self.store = store
        self.upstreams = upstreams.issuers
        self.local = local
        self.routing = routing
        self.deadline = deadline
        self.validatedIssuers = validatedIssuers
        self.chainValidator = chainValidator
        self.caller = ResilientCaller(health: health, metrics: metrics)
        self.metrics = metrics
        self.logger = logger
    }

    /// The audit events of one request: numbered attempts, and the request's own outcome (attempt
    /// 0) when no attempt carried it.
    struct Trail {
        var event: AuditEvent
        var attempts = 0
        var lastRecorded: GatewayError?
    }

    public func provisionApplePay(
        cardID: CardID, request: ApplePayProvisioningRequest, client: Client, provisioningID: ProvisioningID = .generate()
    ) async throws(GatewayError) -> ApplePayProvisioning {
        let started = ContinuousClock.now
        var logger = logger
        logger[metadataKey: "provisioning_id"] = "\(provisioningID)"
        logger[metadataKey: "card_id"] = "\(cardID)"
        logger[metadataKey: "client"] = "\(client.id)"
        var trail = Trail(event: AuditEvent(
            provisioningID: provisioningID, at: Date(), client: client.id, cardID: cardID, wallet: .applePay, issuer: nil,
            endpoint: nil, attempt: 0, outcome: .failed, errorCode: nil, upstreamStatus: nil, latencyMS: 0))

        do throws(GatewayError) {
            let card = try await card(cardID)
            guard client.mayUse(card) else {
                throw GatewayError(.forbidden, "card \(cardID) belongs to a program this client may not use")
            }
            guard let issuer = routing.issuer(for: card, wallet: .applePay) else {
                throw GatewayError(.walletNotSupported, "no issuer is routed for card \(cardID) and apple_pay")
            }
            trail.event.issuer = issuer
            logger[metadataKey: "issuer"] = "\(issuer)"
            let deadline = started.advanced(by: routing.deadline(for: card, wallet: .applePay) ?? self.deadline)
            let context = ProvisioningContext(provisioningID: provisioningID, deadline: deadline)
            do throws(GatewayError) {
                let payload = try await serve(issuer, request: request, card: card, context: context, trail: &trail)
                logger.info("apple pay provisioned", metadata: ["latency_ms": "\(started.duration(to: .now).wholeMilliseconds)"])
                metrics?.request(operation: "apple_pay", outcome: "succeeded")
                return ApplePayProvisioning(provisioningID: provisioningID, issuer: issuer, payload: payload)
            } catch where error.isRetryable {
                guard let fallback = routing.fallback(for: card, wallet: .applePay), fallback != issuer, fallback == local?.issuer,
                      ContinuousClock.now < deadline
                else { throw error }
                logger.notice("falling back", metadata: ["fallback": "\(fallback)", "code": "\(error.code.rawValue)"])
                metrics?.fallback(issuer: issuer, to: fallback)
                do throws(GatewayError) {
                    let payload = try await serve(fallback, request: request, card: card, context: context, trail: &trail)
                    metrics?.request(operation: "apple_pay", outcome: "succeeded")
                    return ApplePayProvisioning(provisioningID: provisioningID, issuer: fallback, payload: payload)
                } catch let fallbackError where fallbackError.code == .cardNotFound {
                    // The vault holds nothing for this card: its own attempt is on record, and the
                    // issuer's failure is the answer.
                    throw error
                }
            }
        } catch {
            if trail.lastRecorded.map({ $0.code != error.code || $0.detail != error.detail }) ?? true {
                var event = trail.event
                event.attempt = 0
                event.endpoint = nil
                event.fail(with: error, since: started)
                try? await record(event)
            }
            metrics?.request(operation: "apple_pay", outcome: error.code.rawValue)
            logger.notice("apple pay provisioning failed", metadata: ["code": "\(error.code.rawValue)", "detail": "\(error.detail)"])
            throw error.with(provisioningID: provisioningID)
        }
    }

    /// Every attempt at one issuer: its upstream endpoints under the resilience rules, or the
    /// local encryptor once. Each attempt's audit event is written before going on.
    private func serve(
        _ issuer: IssuerID, request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext, trail: inout Trail
    ) async throws(GatewayError) -> ApplePayPayload {
        if validatedIssuers.contains(issuer), let chainValidator {
            do {
                _ = try await chainValidator.validate(leaf: request.leafCertificate.value, subordinate: request.subordinateCertificate.value)
            } catch {
                throw GatewayError(.invalidCertificateChain, error.reason)
            }
        }
        if let upstream = upstreams[issuer] {
            return try await caller.call(upstream, context: context, onAttempt: { (report) async throws(GatewayError) in
                try await audit(report, trail: &trail)
            }) { (connector) async throws(GatewayError) in
                try await connector.provisionApplePay(request, card: card, context: context)
            }
        }
        guard let local, local.issuer == issuer else {
            throw GatewayError(.internal, "issuer \(issuer) of card \(card.id) has no connector")
        }
        let started = ContinuousClock.now
        do throws(GatewayError) {
            let payload = try await local.provisionApplePay(request, card: card, context: context)
            try await audit(AttemptReport(issuer: issuer, endpoint: local.endpoint, error: nil, latency: started.duration(to: .now)),
                            trail: &trail)
            return payload
        } catch {
            try await audit(AttemptReport(issuer: issuer, endpoint: local.endpoint, error: error, latency: started.duration(to: .now)),
                            trail: &trail)
            throw error
        }
    }

    private func audit(_ report: AttemptReport, trail: inout Trail) async throws(GatewayError) {
        trail.attempts += 1
        var event = trail.event
        event.at = Date()
        event.issuer = report.issuer
        event.endpoint = report.endpoint
        event.attempt = trail.attempts
        event.outcome = report.error == nil ? .succeeded : .failed
        event.errorCode = report.error?.code
        event.upstreamStatus = report.error?.upstreamStatus ?? (report.issuer == LocalConnector.issuerID ? nil : 200)
        event.latencyMS = Int(report.latency.wholeMilliseconds)
        try await record(event)
        trail.lastRecorded = report.error
    }

    /// Notes that a stored answer was replayed for an Idempotency-Key: no upstream was called.
    public func recordReplay(provisioningID: ProvisioningID, cardID: CardID, client: Client, wallet: Wallet) async {
        let event = AuditEvent(
            provisioningID: provisioningID, at: Date(), client: client.id, cardID: cardID, wallet: wallet, issuer: nil,
            endpoint: nil, attempt: 0, outcome: .replayed, errorCode: nil, upstreamStatus: nil, latencyMS: 0)
        try? await record(event)
    }

    /// The audit event is written before the caller gets an answer; if it cannot be, neither can the answer.
    private func record(_ event: AuditEvent) async throws(GatewayError) {
        do {
            try await store.appendAudit(event)
        } catch {
            logger.error("audit write failed", metadata: ["provisioning_id": "\(event.provisioningID)", "error_type": "\(type(of: error))"])
            throw GatewayError(.internal, "the audit trail could not be written")
        }
    }

    private func card(_ id: CardID) async throws(GatewayError) -> CardRecord {
        let record: CardRecord?
        do {
            record = try await store.card(id)
        } catch {
            throw GatewayError(.internal, "the card registry failed")
        }
        guard let record else { throw GatewayError(.cardNotFound, "no card \(id) in the registry") }
        return record
    }
}
