import Crypto
import Foundation
import Gateway
import OpenAPIRuntime
import ProvisioningAPI
import ProvisioningCore

/// The generated `APIProtocol`: decode the unified API's text into bytes once, hand them to the
/// services, encode their answers. Errors are thrown and rendered by `ProblemMiddleware`.
struct APIHandler: APIProtocol {
    let service: ProvisioningService
    let store: any GatewayStore
    let registration: CardRegistration
    let idempotency: IdempotencyGuard

    static func client() throws(GatewayError) -> Client {
        guard let client = RequestScope.client else { throw GatewayError(.unauthorized, "no API key") }
        return client
    }

    // MARK: Apple Pay

    func provisionApplePay(_ input: Operations.ProvisionApplePay.Input) async throws -> Operations.ProvisionApplePay.Output {
        let client = try Self.client()
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        let cardID = CardID(input.path.cardId)
        let request = try Self.decode(body)
        let outcome = try await idempotency.run(
            client: client.id, key: input.headers.idempotencyKey, requestHash: Self.requestHash(cardID: cardID, body: body)
        ) { () async throws(GatewayError) -> StoredResponse in
            let result = try await service.provisionApplePay(cardID: cardID, request: request, client: client)
            let answer = Components.Schemas.ApplePayProvisioningResponse(
                provisioningId: result.provisioningID.rawValue,
                issuer: result.issuer.rawValue,
                activationData: result.payload.activationData.value.base64EncodedString(),
                encryptedPassData: result.payload.encryptedPassData.value.base64EncodedString(),
                ephemeralPublicKey: result.payload.ephemeralPublicKey.value.base64EncodedString())
            return StoredResponse(status: 200, body: Self.encode(answer))
        }
        switch outcome {
        case .fresh(let stored):
            return .ok(.init(body: .json(try Self.decodeStored(stored))))
        case .replayed(let stored):
            let answer = try Self.decodeStored(stored)
            await service.recordReplay(provisioningID: ProvisioningID(answer.provisioningId), cardID: cardID, client: client, wallet: .applePay)
            return .ok(.init(body: .json(answer)))
        }
    }

    /// The same request, however its JSON is spaced or ordered, hashes the same.
    static func requestHash(cardID: CardID, body: some Encodable) -> String {
        var bytes = Data(cardID.rawValue.utf8)
        bytes.append(0)
        bytes.append(encode(body))
        return Data(SHA256.hash(data: bytes)).lowercaseHex
    }

    static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)) ?? Data()
    }

    static func decodeStored(_ stored: StoredResponse) throws(GatewayError) -> Components.Schemas.ApplePayProvisioningResponse {
        do {
            return try JSONDecoder().decode(Components.Schemas.ApplePayProvisioningResponse.self, from: stored.body)
        } catch {
            throw GatewayError(.internal, "a stored answer could not be read")
        }
    }

    /// Text to bytes, naming the field that does not decode (never its value).
    static func decode(_ body: Components.Schemas.ApplePayProvisioningRequest) throws(GatewayError) -> ApplePayProvisioningRequest {
        if body.encryptionScheme == .rsaV2 {
            throw GatewayError(.unsupportedEncryptionScheme,
                "encryption_scheme: RSA_V2 has no public specification; configure PKAddPaymentPassRequestConfiguration with ECC_V2")
        }
        let encoding: BinaryEncoding = body.encoding == .hex ? .hex : .base64
        func bytes(_ text: String, _ field: String) throws(GatewayError) -> Data {
            guard let data = encoding.decode(text) else {
                throw GatewayError(.invalidRequest, "\(field): not valid \(encoding.rawValue)")
            }
            return data
        }
        guard ApplePayProvisioningRequest.certificateCountRange.contains(body.certificates.count) else {
            throw GatewayError(.invalidRequest,
                "certificates: expected the leaf and the subordinate CA (2 to 4 certificates), got \(body.certificates.count)")
        }
        var certificates: [Data] = []
        for (index, text) in body.certificates.enumerated() {
            certificates.append(try bytes(text, "certificates[\(index)]"))
        }
        let device = DeviceInfo(
            type: body.device?._type.flatMap { DeviceType(rawValue: $0.rawValue) } ?? .phone,
            primaryAccountIdentifier: body.device?.primaryAccountIdentifier)
        return try ApplePayProvisioningRequest(
            certificates: certificates,
            nonce: try bytes(body.nonce, "nonce"),
            nonceSignature: try bytes(body.nonceSignature, "nonce_signature"),
            device: device)
    }

    // MARK: Card registry

    func putCard(_ input: Operations.PutCard.Input) async throws -> Operations.PutCard.Output {
        let client = try Self.client()
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        let card = try registration.record(
            id: input.path.cardId, program: body.program, issuer: body.issuer, reference: body.issuerReference.additionalProperties)
        guard client.mayUse(card) else { throw GatewayError(.forbidden, "program \(card.program) is not one of this client's") }
        if let existing = try await store.card(card.id), !client.mayUse(existing) {
            throw GatewayError(.forbidden, "card \(card.id) belongs to a program this client may not use")
        }
        let created = try await store.putCard(card)
        return created ? .created(.init(body: .json(Self.schema(card)))) : .ok(.init(body: .json(Self.schema(card))))
    }

    func getCard(_ input: Operations.GetCard.Input) async throws -> Operations.GetCard.Output {
        .ok(.init(body: .json(Self.schema(try await ownCard(input.path.cardId)))))
    }

    func deleteCard(_ input: Operations.DeleteCard.Input) async throws -> Operations.DeleteCard.Output {
        let card = try await ownCard(input.path.cardId)
        try await store.deleteCard(card.id)
        return .noContent(.init())
    }

    func listCards(_ input: Operations.ListCards.Input) async throws -> Operations.ListCards.Output {
        let client = try Self.client()
        let limit = input.query.limit ?? 100
        guard (1...500).contains(limit) else { throw GatewayError(.invalidRequest, "limit: must be 1 to 500") }
        var programs = client.programs.sorted { $0.rawValue < $1.rawValue }
        if let program = input.query.program.map({ ProgramID($0) }) {
            guard client.programs.contains(program) else {
                throw GatewayError(.forbidden, "program \(program) is not one of this client's")
            }
            programs = [program]
        }
        let cards = try await store.cards(CardPageQuery(
            programs: programs, issuer: input.query.issuer.map { IssuerID($0) }, after: input.query.after.map { CardID($0) },
            limit: limit))
        return .ok(.init(body: .json(.init(
            cards: cards.map(Self.schema), nextAfter: cards.count == limit ? cards.last?.id.rawValue : nil))))
    }

    private func ownCard(_ id: String) async throws -> CardRecord {
        let client = try Self.client()
        guard let card = try await store.card(CardID(id)) else { throw GatewayError(.cardNotFound, "no card \(id) in the registry") }
        guard client.mayUse(card) else { throw GatewayError(.forbidden, "card \(id) belongs to a program this client may not use") }
        return card
    }

    static func schema(_ card: CardRecord) -> Components.Schemas.Card {
        .init(cardId: card.id.rawValue, issuer: card.issuer?.rawValue, program: card.program.rawValue,
              issuerReference: .init(additionalProperties: card.issuerReference.fields))
    }

    // MARK: Audit

    func getProvisioning(_ input: Operations.GetProvisioning.Input) async throws -> Operations.GetProvisioning.Output {
        let client = try Self.client()
        let events = try await store.auditEvents(ProvisioningID(input.path.provisioningId)).filter { $0.client == client.id }
        guard !events.isEmpty else {
            throw GatewayError(.notFound, "no provisioning \(input.path.provisioningId) for this client")
        }
        return .ok(.init(body: .json(.init(provisioningId: input.path.provisioningId, events: events.map { event in
            .init(at: event.at, clientId: event.client.rawValue, cardId: event.cardID.rawValue, wallet: event.wallet.rawValue,
                  issuer: event.issuer?.rawValue, endpoint: event.endpoint, attempt: event.attempt,
                  outcome: .init(rawValue: event.outcome.rawValue) ?? .failed, errorCode: event.errorCode?.rawValue,
                  upstreamStatus: event.upstreamStatus, latencyMs: event.latencyMS)
        }))))
    }

    // MARK: Health

    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        .ok(.init(body: .json(.init(status: "ok"))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        do {
            _ = try await store.schemaVersions()
        } catch {
            throw GatewayError(.upstreamUnavailable, "the store is not reachable")
        }
        return .ok(.init(body: .json(.init(status: "ready"))))
    }
}
