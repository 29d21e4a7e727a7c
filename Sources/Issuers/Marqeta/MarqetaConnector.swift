import Foundation
import ProvisioningCore

/// Marqeta: `POST /digitalwalletprovisionrequests/applepay` and `/androidpay` with HTTP Basic.
public struct MarqetaConnector: IssuerConnector {
    public let issuer: IssuerID
    let baseURL: URL
    /// The base URL as labels and audit events name it, rendered once.
    public let endpoint: String
    let applicationToken: Sensitive<String>
    let accessToken: Sensitive<String>
    let provisioningAppVersion: String?
    let http: UpstreamHTTP

    public init(issuer: IssuerID, baseURL: URL, applicationToken: Sensitive<String>, accessToken: Sensitive<String>,
                provisioningAppVersion: String?, http: UpstreamHTTP) {
        self.issuer = issuer
        self.baseURL = baseURL
        self.endpoint = EndpointLabel.render(baseURL)
        self.applicationToken = applicationToken
        self.accessToken = accessToken
        self.provisioningAppVersion = provisioningAppVersion
        self.http = http
    }

    public var wallets: Set<Wallet> { [.applePay, .googlePay] }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        let cardToken = try IssuerCardReference(card, kind: .marqeta).issuerCardID
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
        let cardToken = try IssuerCardReference(card, kind: .marqeta).issuerCardID
        for (field, value, limit) in [("wallet_account_id", request.walletAccountID, MarqetaWire.maxWalletAccountIDLength),
                                      ("device_id", request.deviceID, MarqetaWire.maxDeviceIDLength)] where value.count > limit {
            throw GatewayError(.invalidRequest, "\(field): \(issuer) accepts at most \(limit) characters (got \(value.count))")
        }
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
            opaquePaymentCard: PayloadText.require(PayloadText.lenientBase64(data.opaquePaymentCard), field: "opaque_payment_card", issuer: issuer),
            displayName: data.displayName, lastDigits: data.lastDigits, network: data.network,
            tokenServiceProvider: data.tokenServiceProvider, userAddress: address)
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
            method: .POST, url: baseURL.appending(segments: path),
            headers: [MarqetaWire.authorization(applicationToken: applicationToken.value, accessToken: accessToken.value)],
            body: WireJSON.encode(body), context: context)
        guard MarqetaWire.successStatuses.contains(response.status) else {
            let error = WireJSON.decodeError(MarqetaWire.ErrorBody.self, from: response.body)
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: error?.errorCode)
        }
        return response
    }
}
