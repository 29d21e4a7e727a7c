import AsyncHTTPClient
import Foundation
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

/// A thin façade over the generated `Client`: it sends the API key, and its calls answer the
/// operation's success body or throw `GatewayProblem`. Everything else is on `raw`, the generated
/// client, whose outputs `checked()` turns into the same errors.
///
///     let gateway = ProvisioningGateway(baseURL: URL(string: "https://gateway.example")!, apiKey: key)
///     do {
///         try await gateway.registerCard("acme:1234", issuer: "bridge", program: "acme",
///                                        issuerReference: ["customer_id": "cust_1", "card_account_id": "ca_1"])
///         let pass = try await gateway.provisionApplePay(card: "acme:1234", request, idempotencyKey: attemptID)
///     } catch let problem as GatewayProblem where problem.retryable {
///         // send again later (after problem.retryAfter seconds when given), with the same Idempotency-Key
///     }
public struct ProvisioningGateway: Sendable {
    public typealias Card = Components.Schemas.Card
    public typealias ApplePayRequest = Components.Schemas.ApplePayProvisioningRequest
    public typealias ApplePayResponse = Components.Schemas.ApplePayProvisioningResponse
    public typealias GooglePayResponse = Components.Schemas.GooglePayProvisioningResponse
    public typealias SamsungPayResponse = Components.Schemas.SamsungPayProvisioningResponse
    public typealias WalletTokenTransition = Components.Schemas.WalletTokenTransition
    public typealias Provisioning = Components.Schemas.Provisioning

    /// The generated client (every operation of the spec), with the API key middleware installed.
    public let raw: Client

    /// - Parameters:
    ///   - baseURL: The gateway's base URL, e.g. `http://127.0.0.1:8080`.
    ///   - apiKey: The client's API key (`sk_...`), sent as `Authorization: Bearer`.
    ///   - httpClient: The AsyncHTTPClient to send with; its lifecycle stays the caller's.
    public init(baseURL: URL, apiKey: String, httpClient: HTTPClient = .shared) {
        raw = Client(
            serverURL: baseURL,
            transport: AsyncHTTPClientTransport(configuration: .init(client: httpClient)),
            middlewares: [BearerAuthMiddleware(apiKey: apiKey)])
    }

    // MARK: Cards

    /// Registers the card, or changes which issuer holds it (`PUT /v1/cards/{card_id}`).
    @discardableResult
    public func registerCard(_ cardID: String, issuer: String, program: String, issuerReference: [String: String]) async throws -> Card {
        let body = Components.Schemas.CardRegistration(
            issuer: issuer, program: program, issuerReference: .init(additionalProperties: issuerReference))
        let output = try await raw.putCard(path: .init(cardId: cardID), body: .json(body)).checked()
        if case .created(let registered) = output { return try registered.body.json }
        return try output.ok.body.json
    }

    /// The card's registration (`card_not_found` for another program's card).
    public func card(_ cardID: String) async throws -> Card {
        try await raw.getCard(path: .init(cardId: cardID)).checked().ok.body.json
    }

    /// Removes the card from the registry.
    public func deleteCard(_ cardID: String) async throws {
        _ = try await raw.deleteCard(path: .init(cardId: cardID)).checked().noContent
    }

    // MARK: Wallets

    /// The Apple Pay payload for `PKAddPaymentPassRequest`. Send a retry with the same
    /// `idempotencyKey` and body: it replays the first answer (same `provisioningId`) without calling
    /// the issuer again.
    public func provisionApplePay(card cardID: String, _ request: ApplePayRequest, idempotencyKey: String? = nil) async throws -> ApplePayResponse {
        try await raw.provisionApplePay(
            path: .init(cardId: cardID), headers: .init(idempotencyKey: idempotencyKey), body: .json(request)
        ).checked().ok.body.json
    }

    /// Google Pay's opaque payment card for `PushTokenizeRequest`.
    public func provisionGooglePay(card cardID: String, walletAccountID: String, deviceID: String,
                                   idempotencyKey: String? = nil) async throws -> GooglePayResponse {
        try await raw.provisionGooglePay(
            path: .init(cardId: cardID), headers: .init(idempotencyKey: idempotencyKey),
            body: .json(.init(walletAccountId: walletAccountID, deviceId: deviceID))
        ).checked().ok.body.json
    }

    /// The card's wallet tokens at its issuer.
    public func walletTokens(card cardID: String) async throws -> [Components.Schemas.WalletToken] {
        try await raw.listWalletTokens(path: .init(cardId: cardID)).checked().ok.body.json.tokens
    }

    /// Suspends, resumes or deactivates one of the card's wallet tokens.
    public func transition(card cardID: String, token tokenID: String, _ action: WalletTokenTransition.ActionPayload) async throws -> WalletTokenTransition {
        switch action {
        case .suspend:
            return try await raw.suspendWalletToken(path: .init(cardId: cardID, tokenId: tokenID)).checked().ok.body.json
        case .resume:
            return try await raw.resumeWalletToken(path: .init(cardId: cardID, tokenId: tokenID)).checked().ok.body.json
        case .deactivate:
            return try await raw.deactivateWalletToken(path: .init(cardId: cardID, tokenId: tokenID)).checked().ok.body.json
        }
    }

    /// The audit trail of one provisioning (attempts, issuers, outcomes), oldest event first.
    public func provisioning(_ provisioningID: String) async throws -> Provisioning {
        try await raw.getProvisioning(path: .init(provisioningId: provisioningID)).checked().ok.body.json
    }
}
