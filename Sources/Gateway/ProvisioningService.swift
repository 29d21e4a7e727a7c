import Foundation
import Logging
import ProvisioningCore

public struct ApplePayProvisioning: Sendable {
    public let provisioningID: ProvisioningID
    public let issuer: IssuerID
    public let payload: ApplePayPayload
}

/// One provisioning: resolve the card, check the client may use it, call the card's issuer within
/// the request's deadline, and log the outcome (never the payload).
public struct ProvisioningService: Sendable {
    let registry: any CardRegistry
    let upstreams: UpstreamDirectory
    let deadline: Duration
    let logger: Logger

    public init(registry: any CardRegistry, upstreams: UpstreamDirectory, deadline: Duration, logger: Logger) {
        self.registry = registry
        self.upstreams = upstreams
        self.deadline = deadline
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

        do throws(GatewayError) {
            let card = try await card(cardID)
            guard client.mayUse(card) else {
                throw GatewayError(.forbidden, "card \(cardID) belongs to a program this client may not use")
            }
            guard let connector = upstreams.connectors[card.issuer] else {
                throw GatewayError(.internal, "issuer \(card.issuer) of card \(cardID) has no connector")
            }
            logger[metadataKey: "issuer"] = "\(card.issuer)"
            let context = ProvisioningContext(provisioningID: provisioningID, deadline: started.advanced(by: deadline))
            let payload = try await connector.provisionApplePay(request, card: card, context: context)
            logger.info("apple pay provisioned", metadata: ["latency_ms": "\(started.duration(to: .now).wholeMilliseconds)"])
            return ApplePayProvisioning(provisioningID: provisioningID, issuer: card.issuer, payload: payload)
        } catch {
            logger.notice("apple pay provisioning failed", metadata: ["code": "\(error.code.rawValue)", "detail": "\(error.detail)"])
            throw error
        }
    }

    private func card(_ id: CardID) async throws(GatewayError) -> CardRecord {
        let record: CardRecord?
        do {
            record = try await registry.card(id)
        } catch {
            throw GatewayError(.internal, "the card registry failed")
        }
        guard let record else { throw GatewayError(.cardNotFound, "no card \(id) in the registry") }
        return record
    }
}
