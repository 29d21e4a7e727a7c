import Foundation
import ProvisioningCore

/// TMP: `POST /issuer/push-provisioning/signed-cards`, camelCase, base64.
public struct TMPConnector: IssuerConnector {
    public let issuer: IssuerID
    /// The base URL, taken apart once (`UpstreamBase`).
    let base: UpstreamBase
    /// The base URL as labels and audit events name it, rendered once.
    public let endpoint: String
    let token: Sensitive<String>
    let auth: TMPAuth
    let http: UpstreamHTTP

    /// `auth` is the config's `wire.auth` (bearer when absent).
    public init(issuer: IssuerID, baseURL: URL, token: Sensitive<String>, auth: TMPAuth = .bearer, http: UpstreamHTTP) {
        self.issuer = issuer
        self.base = UpstreamBase(baseURL)
        self.endpoint = EndpointLabel.render(baseURL)
        self.token = token
        self.auth = auth
        self.http = http
    }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        let cardID = try IssuerCardReference(card, kind: .tmp).issuerCardID
        let body = TMPWire.SignCardRequest(
            cardId: cardID, leafCertificate: request.leafCertificate.value, nonce: request.nonce.value,
            nonceSignature: request.nonceSignature.value)
        let response = try await post(body, to: TMPWire.signedCardsPath, context: context)
        let answer = try WireJSON.decode(TMPWire.SignCardResponse.self, from: response.body, issuer: issuer)
        return try ApplePayPayload(
            activationData: PayloadText.require(PayloadText.lenientBase64(answer.activationData), field: "activationData", issuer: issuer),
            encryptedPassData: PayloadText.require(PayloadText.lenientBase64(answer.encryptedData), field: "encryptedData", issuer: issuer),
            ephemeralPublicKey: PayloadText.require(PayloadText.ephemeralPublicKey(answer.ephemeralPublicKey), field: "ephemeralPublicKey", issuer: issuer))
    }

    public var wallets: Set<Wallet> { [.applePay, .googlePay] }
    public var activatesTokens: Bool { true }

    public func provisionGooglePay(_ request: GooglePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> GooglePayPayload
    {
        let cardID = try IssuerCardReference(card, kind: .tmp).issuerCardID
        try request.check(maxIDLength: TMPWire.maxIDLength, issuer: issuer)
        let body = TMPWire.SignCardGoogleRequest(cardId: cardID, clientWalletAccountId: request.walletAccountID,
                                                 clientDeviceId: request.deviceID)
        let response = try await post(body, to: TMPWire.signedCardsPath, context: context)
        let answer = try WireJSON.decode(TMPWire.SignCardGoogleResponse.self, from: response.body, issuer: issuer)
        let address = answer.userAddress.map {
            UserAddress(name: $0.name, address1: $0.address1, address2: $0.address2, city: $0.city, state: $0.state,
                        postalCode: $0.postalCode, country: $0.country, phone: $0.phone)
        }
        return try GooglePayPayload(
            opaquePaymentCard: answer.opaquePaymentCard,
            displayName: answer.displayName, lastDigits: answer.lastDigits, network: answer.network,
            tokenServiceProvider: answer.tokenServiceProvider, userAddress: address)
    }

    /// Only HTTP 200 with `APPROVED`, `DECLINED` or `FAILED` is an answer; any other status value
    /// is a protocol error, never read as an approval.
    public func activateToken(_ request: TokenActivationRequest, card: CardRecord?, context: ProvisioningContext)
        async throws(GatewayError) -> TokenActivationResult
    {
        let response = try await post(TMPWire.ActivationRequest(tokenUniqueReference: request.tokenUniqueReference),
                                      to: TMPWire.activationsPath, context: context)
        let answer = try WireJSON.decode(TMPWire.ActivationResponse.self, from: response.body, issuer: issuer)
        let outcome: TokenActivationResult.Outcome
        switch answer.issuerMobileAppAuthResponse {
        case "APPROVED": outcome = .approved
        case "DECLINED": outcome = .declined
        case "FAILED": outcome = .failed
        default:
            throw GatewayError(.upstreamProtocolError,
                "\(issuer) answered the activation with an undocumented status (not APPROVED, DECLINED or FAILED)", condition: .malformed)
        }
        if let echoed = answer.tokenUniqueReference, echoed != request.tokenUniqueReference {
            throw GatewayError(.upstreamProtocolError, "\(issuer) answered for another token", condition: .malformed)
        }
        let last4 = answer.cardLast4Digits.flatMap { InputRules.isLastFour($0) ? $0 : nil }
        return TokenActivationResult(outcome: outcome, tokenUniqueReference: request.tokenUniqueReference, cardLast4: last4,
                                     comment: answer.comment)
    }

    private func post(_ body: some Encodable, to path: [String], context: ProvisioningContext) async throws(GatewayError) -> UpstreamHTTP.Response {
        let response = try await http.send(
            method: .POST, base: base, segments: path,
            headers: [TMPWire.authHeader(auth, token: token.value)], body: WireJSON.encode(body), context: context)
        guard response.status == 200 else {
            let error = WireJSON.decodeError(TMPWire.ErrorBody.self, from: response.body)
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: error?.errorCode)
        }
        return response
    }
}
