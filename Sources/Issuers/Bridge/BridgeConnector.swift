import Foundation
import ProvisioningCore

/// Bridge: `POST .../create_mobile_wallet_provisioning_request` with `Api-Key` and `Idempotency-Key`.
public struct BridgeConnector: IssuerConnector {
    public let issuer: IssuerID
    /// The base URL, taken apart once (`UpstreamBase`).
    let base: UpstreamBase
    /// The base URL as labels and audit events name it, rendered once.
    public let endpoint: String
    let apiKey: Sensitive<String>
    /// Hex is Bridge's default; a per-issuer wire option may choose base64.
    let encoding: BinaryEncoding
    let http: UpstreamHTTP

    public init(issuer: IssuerID, baseURL: URL, apiKey: Sensitive<String>, encoding: BinaryEncoding = .hex, http: UpstreamHTTP) {
        self.issuer = issuer
        self.base = UpstreamBase(baseURL)
        self.endpoint = EndpointLabel.render(baseURL)
        self.apiKey = apiKey
        self.encoding = encoding
        self.http = http
    }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        let account = try BridgeReference(card)
        let body = BridgeWire.ProvisioningRequest(applePay: .init(
            encoding: encoding.rawValue,
            leafCert: encoding.encode(request.leafCertificate.value),
            subordinateCert: encoding.encode(request.subordinateCertificate.value),
            nonce: encoding.encode(request.nonce.value),
            nonceSignature: encoding.encode(request.nonceSignature.value)))
        let response = try await send(body, account: account, context: context)
        let answer = try WireJSON.decode(BridgeWire.ProvisioningResponse.self, from: response.body, issuer: issuer).applePay
        return try ApplePayPayload(
            activationData: PayloadText.require(BridgeWire.activationData(answer.activationData), field: "activation_data", issuer: issuer),
            encryptedPassData: PayloadText.require(PayloadText.lenientBase64(answer.encryptedPassData), field: "encrypted_pass_data", issuer: issuer),
            ephemeralPublicKey: PayloadText.require(PayloadText.ephemeralPublicKey(answer.ephemeralPublicKey), field: "ephemeral_public_key", issuer: issuer))
    }

    public var wallets: Set<Wallet> { [.applePay, .googlePay] }

    public func provisionGooglePay(_ request: GooglePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> GooglePayPayload
    {
        let account = try BridgeReference(card)
        try request.check(maxIDLength: BridgeWire.maxGoogleIDLength, issuer: issuer)
        let body = BridgeWire.GooglePayProvisioningRequest(googlePay: .init(
            clientWalletAccountID: request.walletAccountID, clientDeviceID: request.deviceID))
        let response = try await send(body, account: account, context: context)
        let answer = try WireJSON.decode(BridgeWire.GooglePayProvisioningResponse.self, from: response.body, issuer: issuer).googlePay
        // As Bridge wrote it, base64 or base64url: the phone hands Google that text.
        return try GooglePayPayload(opaquePaymentCard: answer.opaquePaymentCard)
    }

    /// One call to the provisioning endpoint with the stable Idempotency-Key; a non-200 is mapped
    /// to its unified error.
    private func send(_ body: some Encodable, account: BridgeReference, context: ProvisioningContext)
        async throws(GatewayError) -> UpstreamHTTP.Response
    {
        let response = try await http.send(
            method: .POST,
            base: base, segments: BridgeWire.applePayPath(customerID: account.customerID, cardAccountID: account.cardAccountID),
            headers: [(BridgeWire.apiKeyHeader, apiKey.value), (BridgeWire.idempotencyKeyHeader, context.idempotencyKey)],
            body: WireJSON.encode(body),
            context: context)
        guard response.status == 200 else {
            let error = WireJSON.decodeError(BridgeWire.ErrorBody.self, from: response.body)
            throw UpstreamStatus.error(issuer: issuer, response: response, upstreamCode: error?.summary)
        }
        return response
    }
}
