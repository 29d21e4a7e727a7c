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

/// One provisioning: resolve the card, check the client may use it, route it to an issuer, call
/// that issuer's connector within the request's deadline, and write an audit event for what
/// happened before answering (never the payload).
public struct ProvisioningService: Sendable {
    let store: any GatewayStore
    let connectors: [IssuerID: any IssuerConnector]
    let routing: RoutingTable
    let deadline: Duration
    let logger: Logger
    /// Issuers whose config asks for the PassKit chain to be validated before they are called.
    let validatedIssuers: Set<IssuerID>
    let chainValidator: ApplePayChainValidator?

    public init(
        store: any GatewayStore, upstreams: UpstreamDirectory, local: (any IssuerConnector)? = nil, routing: RoutingTable,
        deadline: Duration, validatedIssuers: Set<IssuerID> = [], chainValidator: ApplePayChainValidator? = nil, logger: Logger
    ) {
        self.store = store
        var connectors = upstreams.connectors
        if let local { connectors[local.issuer] = local }
        self.connectors = connectors
        self.routing = routing
        self.deadline = deadline
        self.validatedIssuers = validatedIssuers
        self.chainValidator = chainValidator
        self.logger = logger
    }

    public func provisionApplePay(
        cardID: CardID, request: ApplePayProvisioningRequest, client: Client, provisioningID: ProvisioningID = .generate()
    ) async throws(GatewayError) -> ApplePayProvisioning {
        let started = ContinuousClock.now
        var logger = logger
        logger[metadataKey: "provisioning_id"] = "\(provisioningID)"
        logger[metadataKey: "card_id"] = "\(cardID)"
        logger[metadataKey: "client"] = "\(client.id)"
        var event = AuditEvent(
            provisioningID: provisioningID, at: Date(), client: client.id, cardID: cardID, wallet: .applePay, issuer: nil,
            endpoint: nil, attempt: 0, outcome: .failed, errorCode: nil, upstreamStatus: nil, latencyMS: 0)
        var failureRecorded = false

        do throws(GatewayError) {
            let card = try await card(cardID)
            guard client.mayUse(card) else {
                throw GatewayError(.forbidden, "card \(cardID) belongs to a program this client may not use")
            }
            guard let issuer = routing.issuer(for: card, wallet: .applePay) else {
                throw GatewayError(.walletNotSupported, "no issuer is routed for card \(cardID) and apple_pay")
            }
            logger[metadataKey: "issuer"] = "\(issuer)"
            let context = ProvisioningContext(provisioningID: provisioningID, deadline: started.advanced(by: deadline))
            do throws(GatewayError) {
                let payload = try await attempt(issuer, request: request, card: card, context: context, event: &event, started: started)
                logger.info("apple pay provisioned", metadata: ["latency_ms": "\(event.latencyMS)"])
                return ApplePayProvisioning(provisioningID: provisioningID, issuer: issuer, payload: payload)
            } catch where error.isRetryable && event.outcome != .succeeded {
                guard let fallback = routing.fallback(for: card, wallet: .applePay), fallback != issuer, connectors[fallback] != nil else {
                    throw error
                }
                // The failed attempt is on record; the fallback is the next attempt of the same provisioning.
                event.fail(with: error, since: started)
                try await record(event)
                logger.notice("falling back", metadata: ["fallback": "\(fallback)", "code": "\(error.code.rawValue)"])
                event.errorCode = nil
                event.upstreamStatus = nil
                do throws(GatewayError) {
                    let payload = try await attempt(fallback, request: request, card: card, context: context, event: &event, started: started)
                    return ApplePayProvisioning(provisioningID: provisioningID, issuer: fallback, payload: payload)
                } catch let fallbackError where fallbackError.code == .cardNotFound {
                    // The vault holds nothing for this card: its own attempt is audited as such, and
                    // the issuer's failure is the answer.
                    event.fail(with: fallbackError, since: started)
                    try? await record(event)
                    failureRecorded = true
                    throw error
                }
            }
        } catch {
            if event.outcome != .succeeded && !failureRecorded {
                event.fail(with: error, since: started)
                try? await record(event)
            }
            logger.notice("apple pay provisioning failed", metadata: ["code": "\(error.code.rawValue)", "detail": "\(error.detail)"])
            throw error.with(provisioningID: provisioningID)
        }
    }

    /// One attempt at one issuer; on success its audit event is written before returning.
    private func attempt(
        _ issuer: IssuerID, request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext,
        event: inout AuditEvent, started: ContinuousClock.Instant
    ) async throws(GatewayError) -> ApplePayPayload {
        guard let connector = connectors[issuer] else {
            throw GatewayError(.internal, "issuer \(issuer) of card \(card.id) has no connector")
        }
        event.issuer = issuer
        event.endpoint = connector.endpoint
        event.attempt += 1
        if validatedIssuers.contains(issuer), let chainValidator {
            do {
                _ = try await chainValidator.validate(leaf: request.leafCertificate.value, subordinate: request.subordinateCertificate.value)
            } catch {
                throw GatewayError(.invalidCertificateChain, error.reason)
            }
        }
        let payload = try await connector.provisionApplePay(request, card: card, context: context)
        event.outcome = .succeeded
        event.upstreamStatus = issuer == LocalConnector.issuerID ? nil : 200
        event.latencyMS = Int(started.duration(to: .now).wholeMilliseconds)
        try await record(event)
        return payload
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
