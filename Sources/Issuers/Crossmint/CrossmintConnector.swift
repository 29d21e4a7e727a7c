import Foundation
import ProvisioningCore

/// Crossmint: `GET /cards/{cardId}/apple-pay-payload` with `X-API-KEY`.
public struct CrossmintConnector: IssuerConnector {
    public let issuer: IssuerID
    /// The base URL, taken apart once (`UpstreamBase`).
    let base: UpstreamBase
    /// The base URL as labels and audit events name it, rendered once.
    public let endpoint: String
    let apiKey: Sensitive<String>
    let http: UpstreamHTTP

    public init(issuer: IssuerID, baseURL: URL, apiKey: Sensitive<String>, http: UpstreamHTTP) {
        self.issuer = issuer
        self.base = UpstreamBase(baseURL)
        self.endpoint = EndpointLabel.render(baseURL)
        self.apiKey = apiKey
        self.http = http
    }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        let cardID = try IssuerCardReference(card, kind: .crossmint).issuerCardID
        let response = try await http.send(
            method: .GET, base: base, segments: CrossmintWire.applePayPayloadPath(cardID: cardID), query: CrossmintWire.query(request),
            headers: [(CrossmintWire.apiKeyHeader, apiKey.value)], body: nil, context: context)

        guard response.status == 200 else {
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: nil)
        }
        let answer = try WireJSON.decode(CrossmintWire.PayloadResponse.self, from: response.body, issuer: issuer)
        return try ApplePayPayload(
            activationData: PayloadText.require(PayloadText.lenientBase64(answer.activationData), field: "activationData", issuer: issuer),
            encryptedPassData: PayloadText.require(PayloadText.lenientBase64(answer.encryptedPassData), field: "encryptedPassData", issuer: issuer),
            ephemeralPublicKey: PayloadText.require(PayloadText.ephemeralPublicKey(answer.ephemeralPublicKey), field: "ephemeralPublicKey", issuer: issuer))
    }
}
