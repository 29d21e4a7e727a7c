import Foundation
import ProvisioningCore

/// Marqeta: `POST /digitalwalletprovisionrequests/applepay` and `/androidpay` with HTTP Basic.
public struct MarqetaConnector: IssuerConnector {
    public let issuer: IssuerID
    /// The base URL, taken apart once (`UpstreamBase`).
    let base: UpstreamBase
    /// The base URL as labels and audit events name it, rendered once.
    public let endpoint: String
    let applicationToken: Sensitive<String>
    let accessToken: Sensitive<String>
    let provisioningAppVersion: String?
    let http: UpstreamHTTP

    public init(issuer: IssuerID, baseURL: URL, applicationToken: Sensitive<String>, accessToken: Sensitive<String>,
                provisioningAppVersion: String?, http: UpstreamHTTP) {
        self.issuer = issuer
        self.base = UpstreamBase(baseURL)
        self.endpoint = EndpointLabel.render(baseURL)
        self.applicationToken = applicationToken
        self.accessToken = accessToken
        self.provisioningAppVersion = provisioningAppVersion
        self.http = http
    }

    public var wallets: Set<Wallet> { [.applePay, .googlePay, .samsungPay] }
    public var managesTokens: Bool { true }

    public func provisionSamsungPay(_ request: SamsungPayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> SamsungPayPayload
    {
        let cardToken = try cardToken(card)
        try checkIDs(walletAccountID: request.walletAccountID, deviceID: request.deviceID)
        let body = MarqetaWire.SamsungPayRequest(
            cardToken: cardToken, deviceType: MarqetaWire.deviceType(request.deviceType), provisioningAppVersion: try configuredAppVersion(),
            walletUserID: request.walletAccountID, deviceID: request.deviceID)
        let response = try await post(body, to: MarqetaWire.samsungPayPath, context: context)
        let data = try WireJSON.decode(MarqetaWire.SamsungPayResponse.self, from: response.body, issuer: issuer).pushTokenizeRequestData
        return try SamsungPayPayload(
            provisionPayload: data.extraProvisionPayload, displayName: data.displayName, lastDigits: data.lastDigits,
            network: data.network, tokenServiceProvider: data.tokenServiceProvider, cardType: data.cardType)
    }

    /// Every page of the card's tokens (at most `maxTokenPages` of `tokensPageSize`). A card whose
    /// tokens go on past them is the issuer's protocol error, not a list answered short: a token
    /// past the bound would read as `token_not_found` (the connector audit).
    public func listWalletTokens(card: CardRecord, context: ProvisioningContext) async throws(GatewayError) -> [WalletToken] {
        let cardToken = try cardToken(card)
        var tokens: [WalletToken] = []
        for page in 0..<MarqetaWire.maxTokenPages {
            let response = try await http.send(
                method: .GET, base: base, segments: MarqetaWire.tokensPath(cardToken: cardToken),
                query: [("count", "\(MarqetaWire.tokensPageSize)"), ("start_index", "\(page * MarqetaWire.tokensPageSize)")],
                headers: [MarqetaWire.authorization(applicationToken: applicationToken.value, accessToken: accessToken.value)],
                body: nil, context: context)
            guard response.status == 200 else {
                let error = WireJSON.decodeError(MarqetaWire.ErrorBody.self, from: response.body)
                throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: error?.errorCode)
            }
            let list = try WireJSON.decode(MarqetaWire.TokenList.self, from: response.body, issuer: issuer)
            tokens += try ListedTokens.card(cardToken, (list.data ?? []).map { token in
                ListedTokens.Listed(cardToken: token.cardToken, token: WalletToken(
                    tokenID: token.token, status: MarqetaWire.status(token.state),
                    wallet: MarqetaWire.wallet(token.tokenServiceProvider?.tokenRequestorName),
                    tokenUniqueReference: token.tokenServiceProvider?.tokenReferenceID, deviceType: token.device?.type,
                    createdAt: token.createdTime.flatMap { ISO8601DateFormatter().date(from: $0) }))
            }, issuer: issuer)
            guard list.isMore == true, !(list.data ?? []).isEmpty else { return tokens }
        }
        throw ListedTokens.tooMany(issuer: issuer, bound: MarqetaWire.maxTokenPages * MarqetaWire.tokensPageSize)
    }

    /// One transition (`POST /digitalwallettokentransitions`), applied at once: the answer's state.
    public func transitionWalletToken(_ token: WalletToken, _ action: WalletTokenAction, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> WalletTokenTransition
    {
        let body = MarqetaWire.TransitionRequest(
            digitalWalletToken: .init(token: token.tokenID), state: MarqetaWire.state(for: action),
            reasonCode: MarqetaWire.transitionReasonCode, channel: "API")
        let response = try await post(body, to: MarqetaWire.transitionsPath, context: context)
        let answer = try WireJSON.decode(MarqetaWire.TransitionResponse.self, from: response.body, issuer: issuer)
        // The answer names the token it acted on, and may name its card: another token or card
        // than the one asked about is an issuer acting on someone else's, never reported as
        // applied to this one (the token audit saw a transition change another tenant's token
        // and answer 200 "applied", the listing's card check having no match here).
        let actedOn = answer.digitalWalletToken
        if actedOn.token != token.tokenID || actedOn.cardToken.map({ $0 != (try? cardToken(card)) }) == true {
            throw GatewayError(.upstreamProtocolError, "\(issuer) answered the transition naming another wallet token or card than the one asked about",
                               upstreamStatus: response.status, condition: .malformed)
        }
        // The swagger's states: the one asked for (applied), REQUESTED (applied later),
        // REQUEST_DECLINED (refused), or another, which is no transition to what was asked.
        let asked = MarqetaWire.state(for: action)
        switch answer.state {
        case asked:
            return WalletTokenTransition(outcome: .applied, status: MarqetaWire.status(answer.state))
        case "REQUESTED":
            // The transition's state, not the token's: the token is still in the state it was in
            // (`WalletTokenTransition.Outcome.requested`), as for Lithic.
            return WalletTokenTransition(outcome: .requested, status: token.status)
        case "REQUEST_DECLINED":
            // A refusal said in a 201: the outcome is known (nothing changed), so it is read as
            // Marqeta's own refusal of a transition, its 409, and an Idempotency-Key is released.
            throw GatewayError(.upstreamRejected, "\(issuer) declined the transition to \(asked)", upstreamStatus: response.status,
                               condition: .status(409))
        default:
            throw GatewayError(.upstreamProtocolError,
                               "\(issuer) answered a transition to \(asked) with state \(UpstreamStatus.shownCode(answer.state) ?? "(unreadable)")",
                               upstreamStatus: response.status)
        }
    }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        let cardToken = try cardToken(card)
        // The request's own app version wins over the configured one.
        let version: String
        if let requested = request.device.appVersion { version = requested } else { version = try configuredAppVersion() }
        let body = MarqetaWire.ApplePayRequest(
            cardToken: cardToken,
            deviceType: MarqetaWire.deviceType(request.device.type),
            provisioningAppVersion: version,
            certificates: [request.leafCertificate.value.base64EncodedString(), request.subordinateCertificate.value.base64EncodedString()],
            nonce: request.nonce.value.base64EncodedString(),
            nonceSignature: request.nonceSignature.value.base64EncodedString())
        let response = try await post(body, to: MarqetaWire.applePayPath, context: context)
        let answer = try WireJSON.decode(MarqetaWire.ApplePayResponse.self, from: response.body, issuer: issuer)
        return try ApplePayPayload(
            activationData: PayloadText.require(PayloadText.lenientBase64(answer.activationData), field: "activation_data", issuer: issuer),
            encryptedPassData: PayloadText.require(PayloadText.lenientBase64(answer.encryptedPassData), field: "encrypted_pass_data", issuer: issuer),
            ephemeralPublicKey: PayloadText.require(PayloadText.ephemeralPublicKey(answer.ephemeralPublicKey), field: "ephemeral_public_key", issuer: issuer))
    }

    public func provisionGooglePay(_ request: GooglePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> GooglePayPayload
    {
        let cardToken = try cardToken(card)
        try checkIDs(walletAccountID: request.walletAccountID, deviceID: request.deviceID)
        let body = MarqetaWire.GooglePayRequest(
            cardToken: cardToken, deviceType: MarqetaWire.googlePayDeviceType, provisioningAppVersion: try configuredAppVersion(),
            walletAccountID: request.walletAccountID, deviceID: request.deviceID)
        let response = try await post(body, to: MarqetaWire.googlePayPath, context: context)
        let data = try WireJSON.decode(MarqetaWire.GooglePayResponse.self, from: response.body, issuer: issuer).pushTokenizeRequestData
        let address = data.userAddress.map {
            UserAddress(name: $0.name, address1: $0.address1, address2: $0.address2, city: $0.city, state: $0.state,
                        postalCode: $0.postalCode ?? $0.zip, country: $0.country, phone: $0.phone)
        }
        return try GooglePayPayload(
            opaquePaymentCard: data.opaquePaymentCard,
            displayName: data.displayName, lastDigits: data.lastDigits, network: data.network,
            tokenServiceProvider: data.tokenServiceProvider, userAddress: address)
    }

    /// The card's `card_token`, at most `MarqetaIssuer.maxCardTokenLength` characters. Registration
    /// refuses a longer one; a card registered before it did is refused here, before any call.
    private func cardToken(_ card: CardRecord) throws(GatewayError) -> String {
        let token = try IssuerCardReference(card, kind: .marqeta).issuerCardID
        guard token.count <= MarqetaIssuer.maxCardTokenLength else {
            throw GatewayError(.issuerLimitExceeded,
                               "card_token: \(issuer) accepts at most \(MarqetaIssuer.maxCardTokenLength) characters (the card's has \(token.count)); register the card again")
        }
        return token
    }

    /// `wallet_account_id`/`wallet_user_id` (max 50) and `device_id` (max 24), refused before any call.
    private func checkIDs(walletAccountID: String, deviceID: String) throws(GatewayError) {
        for (field, value, limit) in [("wallet_account_id", walletAccountID, MarqetaWire.maxWalletAccountIDLength),
                                      ("device_id", deviceID, MarqetaWire.maxDeviceIDLength)] where value.count > limit {
            throw GatewayError(.issuerLimitExceeded, "\(field): \(issuer) accepts at most \(limit) characters (got \(value.count))")
        }
    }

    private func configuredAppVersion() throws(GatewayError) -> String {
        guard let provisioningAppVersion else {
            throw GatewayError(.internal, "issuers.\(issuer).wire.provisioning_app_version is not set")
        }
        return provisioningAppVersion
    }

    /// One POST; no idempotency key exists, so the retry table never resends one that may have arrived.
    private func post(_ body: some Encodable, to path: [String], context: ProvisioningContext) async throws(GatewayError) -> UpstreamHTTP.Response {
        let response = try await http.send(
            method: .POST, base: base, segments: path,
            headers: [MarqetaWire.authorization(applicationToken: applicationToken.value, accessToken: accessToken.value)],
            body: WireJSON.encode(body), context: context)
        guard MarqetaWire.successStatuses.contains(response.status) else {
            let error = WireJSON.decodeError(MarqetaWire.ErrorBody.self, from: response.body)
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: error?.errorCode)
        }
        return response
    }
}
