import Foundation
import ProvisioningCore

/// Lithic: `POST /v1/cards/{card_token}/provision` with the raw API key in `Authorization`.
public struct LithicConnector: IssuerConnector {
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

    public var wallets: Set<Wallet> { [.applePay, .googlePay, .samsungPay] }
    public var managesTokens: Bool { true }

    /// Samsung Pay: `provisioning_payload` is a string for Samsung Pay's add-card call, passed on
    /// exactly as received (UPSTREAMS.md: "for Google/Samsung a STRING").
    public func provisionSamsungPay(_ request: SamsungPayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> SamsungPayPayload
    {
        let cardToken = try IssuerCardReference(card, kind: .lithic).issuerCardID
        let body = LithicWire.SamsungPayRequest(clientDeviceID: request.deviceID, clientWalletAccountID: request.walletAccountID)
        let response = try await post(body, cardToken: cardToken, context: context)
        let answer = try WireJSON.decode(LithicWire.GooglePayResponse.self, from: response.body, issuer: issuer)
        return try SamsungPayPayload(provisionPayload: answer.provisioningPayload)
    }

    /// The card's digital-wallet tokenizations, every page up to `maxTokenizationPages`. No
    /// `tokenization_channel` is sent, and Lithic then lists only `DIGITAL_WALLET` ones (its SDKs:
    /// "If this is not specified, only DIGITAL_WALLET tokenizations will be returned"); a requestor
    /// that is no known wallet is shown as `other`.
    public func listWalletTokens(card: CardRecord, context: ProvisioningContext) async throws(GatewayError) -> [WalletToken] {
        let cardToken = try IssuerCardReference(card, kind: .lithic).issuerCardID
        var tokens: [WalletToken] = []
        var after: String?
        for _ in 0..<LithicWire.maxTokenizationPages {
            let query = [("card_token", cardToken), ("page_size", "\(LithicWire.tokenizationsPageSize)")] + (after.map { [("starting_after", $0)] } ?? [])
            let response = try await http.send(method: .GET, base: base, segments: LithicWire.tokenizationsPath, query: query,
                                               headers: [(LithicWire.authorizationHeader, apiKey.value)], body: nil, context: context)
            guard response.status == LithicWire.successStatus else {
                throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: nil)
            }
            let page = try WireJSON.decode(LithicWire.TokenizationPage.self, from: response.body, issuer: issuer)
            tokens += try ListedTokens.card(cardToken, page.data.map { token in
                ListedTokens.Listed(cardToken: token.cardToken, token: WalletToken(
                    tokenID: token.token, status: LithicWire.status(token.status), wallet: LithicWire.wallet(token.tokenRequestorName),
                    tokenUniqueReference: token.tokenUniqueReference, deviceType: nil,
                    createdAt: token.createdAt.flatMap { ISO8601DateFormatter().date(from: $0) }))
            }, issuer: issuer)
            guard page.hasMore == true, let last = page.data.last?.token else { return tokens }
            after = last
        }
        // More pages than the bound: never a list answered short (a token past it would read as
        // `token_not_found`; the connector audit).
        throw ListedTokens.tooMany(issuer: issuer, bound: LithicWire.maxTokenizationPages * LithicWire.tokenizationsPageSize)
    }

    /// Lithic applies transitions asynchronously: a success is `requested`, with the state the
    /// token was in. `pause` applies to an ACTIVE token only; Lithic's refusal is its 4xx.
    public func transitionWalletToken(_ token: WalletToken, _ action: WalletTokenAction, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> WalletTokenTransition
    {
        let response = try await http.send(
            method: .POST, base: base, segments: LithicWire.transitionPath(token: token.tokenID, action: action),
            headers: [(LithicWire.authorizationHeader, apiKey.value)], body: nil, context: context)
        guard (200..<300).contains(response.status) else {
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: nil)
        }
        return WalletTokenTransition(outcome: .requested, status: token.status)
    }

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
        return try GooglePayPayload(opaquePaymentCard: answer.provisioningPayload)
    }

    /// One POST; no idempotency key exists, so the retry table never resends one that may have arrived.
    private func post(_ body: some Encodable, cardToken: String, context: ProvisioningContext) async throws(GatewayError) -> UpstreamHTTP.Response {
        let response = try await http.send(
            method: .POST, base: base, segments: LithicWire.provisionPath(cardToken: cardToken),
            headers: [(LithicWire.authorizationHeader, apiKey.value)], body: WireJSON.encode(body), context: context)
        guard response.status == LithicWire.successStatus else {
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: nil)
        }
        return response
    }
}
