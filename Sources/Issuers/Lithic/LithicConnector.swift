import Foundation
import ProvisioningCore

/// Lithic: `POST /v1/cards/{card_token}/provision` with the raw API key in `Authorization`.
public struct LithicConnector: IssuerConnector {
    public let issuer: IssuerID
    let baseURL: URL
    /// The base URL as labels and audit events name it, rendered once.
    public let endpoint: String
    let apiKey: Sensitive<String>
    let http: UpstreamHTTP

    public init(issuer: IssuerID, baseURL: URL, apiKey: Sensitive<String>, http: UpstreamHTTP) {
        self.issuer = issuer
        self.baseURL = baseURL
        self.endpoint = EndpointLabel.render(baseURL)
        self.apiKey = apiKey
        self.http = http
    }

    public var wallets: Set<Wallet> { [.applePay, .googlePay] }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        let cardToken = try IssuerCardReference(card, kind: .lithic).issuerCardID
        let body = LithicWire.ApplePayRequest(
            certificate: LithicWire.pemBody(request.leafCertificate.value),
            nonce: request.nonce.value.base64EncodedString(),
            nonceSignature: request.nonceSignature.value.base64EncodedString())
        let response = try await post(body, cardToken: cardToken, context: context)
        let answer = try WireJSON.decode(LithicWire.ApplePayResponse.self, from: response.body, issuer: issuer).provisioningPayload
        return try ApplePayPayload(
            activationData: PayloadText.require(PayloadText.lenientBase64(answer.activationData), field: "activationData", issuer: issuer),
            encryptedPassData: PayloadText.require(PayloadText.lenientBase64(answer.encryptedData), field: "encryptedData", issuer: issuer),
            ephemeralPublicKey: PayloadText.require(PayloadText.ephemeralPublicKey(answer.ephemeralPublicKey), field: "ephemeralPublicKey", issuer: issuer))
    }

    public func provisionGooglePay(_ request: GooglePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> GooglePayPayload
    {
        let cardToken = try IssuerCardReference(card, kind: .lithic).issuerCardID
        let body = LithicWire.GooglePayRequest(clientDeviceID: request.deviceID, clientWalletAccountID: request.walletAccountID)
        let response = try await post(body, cardToken: cardToken, context: context)
        let answer = try WireJSON.decode(LithicWire.GooglePayResponse.self, from: response.body, issuer: issuer)
        return try GooglePayPayload(opaquePaymentCard: PayloadText.require(
            PayloadText.lenientBase64(answer.provisioningPayload), field: "provisioning_payload", issuer: issuer))
    }

    /// One POST; no idempotency key exists, so the retry table never resends one that may have arrived.
    private func post(_ body: some Encodable, cardToken: String, context: ProvisioningContext) async throws(GatewayError) -> UpstreamHTTP.Response {
        let response = try await http.send(
            method: .POST, url: baseURL.appending(segments: LithicWire.provisionPath(cardToken: cardToken)),
            headers: [(LithicWire.authorizationHeader, apiKey.value)], body: WireJSON.encode(body), context: context)
        guard response.status == LithicWire.successStatus else {
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: nil)
        }
        return response
    }
}
