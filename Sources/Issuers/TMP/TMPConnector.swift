import Foundation
import ProvisioningCore

/// TMP: `POST /issuer/push-provisioning/signed-cards`, camelCase, base64.
public struct TMPConnector: IssuerConnector {
    public let issuer: IssuerID
    let baseURL: URL
    public var endpoint: String { baseURL.absoluteString }
    let token: Sensitive<String>
    let auth: TMPWire.Auth
    let http: UpstreamHTTP

    /// `authOption` is the config's `wire.auth`: nil or `bearer`, or `header:<Name>`.
    public init(issuer: IssuerID, baseURL: URL, token: Sensitive<String>, authOption: String?, http: UpstreamHTTP) {
        self.issuer = issuer
        self.baseURL = baseURL
        self.token = token
        self.auth = TMPWire.Auth(option: authOption) ?? .bearer
        self.http = http
    }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        guard let cardID = card.issuerReference["issuer_card_id"] else {
            throw GatewayError(.internal, "card \(card.id) lacks the TMP issuer_card_id")
        }
        let body = TMPWire.SignCardRequest(
            cardId: cardID,
            certificate: request.leafCertificate.value.base64EncodedString(),
            nonce: request.nonce.value.base64EncodedString(),
            nonceSignature: request.nonceSignature.value.base64EncodedString())
        let response = try await http.send(
            method: .POST, url: baseURL.appending(segments: TMPWire.signedCardsPath),
            headers: [auth.header(token: token.value)], body: WireJSON.encode(body), context: context)

        guard response.status == 200 else {
            let error = WireJSON.decodeError(TMPWire.ErrorBody.self, from: response.body)
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: error?.errorCode)
        }
        let answer = try WireJSON.decode(TMPWire.SignCardResponse.self, from: response.body, issuer: issuer)
        return try ApplePayPayload(
            activationData: PayloadText.require(PayloadText.lenientBase64(answer.activationData), field: "activationData", issuer: issuer),
            encryptedPassData: PayloadText.require(PayloadText.lenientBase64(answer.encryptedData), field: "encryptedData", issuer: issuer),
            ephemeralPublicKey: PayloadText.require(PayloadText.ephemeralPublicKey(answer.ephemeralPublicKey), field: "ephemeralPublicKey", issuer: issuer))
    }
}
