import ByteText
import Crypto
import Foundation
import Gateway
import OpenAPIRuntime
import ProvisioningAPI
import ProvisioningCore

/// The generated `APIProtocol`: decode the unified API's text into bytes once, hand them to the
/// services, encode their answers. Errors are thrown and rendered by `ProblemMiddleware`.
struct APIHandler: APIProtocol {
    /// The configuration generations; a request reads the one it arrived on.
    let live: LiveConfiguration
    let reloader: ConfigReloader
    let store: any GatewayStore
    let audit: SecurityAudit
    let health: UpstreamHealth
    let metrics: GatewayMetrics
    let readiness: Readiness
    /// Each client's requests in flight (`clients[].max_in_flight`), shown at each scrape.
    let clientsInFlight: InFlightLimiter<ClientID>
    /// Fault injection, which exists only in the sandbox composition.
    let faults: (any FaultInjection)?

    /// The request's config generation (`ConfigGenerationMiddleware`); the serving one outside a
    /// request. Nil only before the gateway has started, when no request can arrive.
    private var generation: ConfigGeneration {
        guard let generation = RequestScope.generation ?? live.current else {
            preconditionFailure("a request arrived before the gateway's configuration was installed")
        }
        return generation
    }
    var service: ProvisioningService { generation.service }
    var registration: CardRegistration { generation.registration }
    var idempotency: IdempotencyGuard { generation.idempotency }
    var upstreams: UpstreamDirectory { generation.upstreams }
    /// The routing as configured, for `GET /v1/admin/routes/explain`.
    var routes: RouteExplainer { generation.routes }

    /// The authenticated client. An admin client reaching a provisioning, token or activation
    /// route is refused by the service (403), which puts the refusal on the audit trail like any
    /// other: admin clients manage and never provision, and an admin key trying to is worth a record.
    /// The caller, as the configuration serving now says. A request is authenticated when its
    /// headers arrive, on the generation serving then, and its handler runs once its body is in,
    /// which a client can hold back for up to `server.read_timeout_ms`: a reload meanwhile that
    /// revoked the key, removed the client or moved its programs (the incident response to a
    /// leaked key) must not let the request act as before (the reload audit's slow body got a
    /// fresh provisioning 8.5 s after its key was removed). The key is checked again against the
    /// current generation, and the client it names now is the one the request acts as.
    func client() throws(GatewayError) -> Client {
        guard let client = RequestScope.client else { throw GatewayError(.unauthorized, "no API key") }
        return try Self.callerNow(client, live: live)
    }

    /// `client()`'s check, for any moment of the request: the service asks it again when an
    /// operation starts (after an Idempotency-Key's wait) and before each retry (`CallerNow`).
    static func callerNow(_ client: Client, live: LiveConfiguration) throws(GatewayError) -> Client {
        guard let arrivedOn = RequestScope.generation, let current = live.current, current.number != arrivedOn.number,
              let keyDigest = RequestScope.caller?.keyDigest
        else { return client }
        guard let now = current.authenticator.client(keyDigest: keyDigest), now.id == client.id else {
            throw GatewayError(.unauthorized, "the API key was revoked while the request was under way")
        }
        return now
    }

    /// The caller, when it is an admin client. Any other client is refused (403) and the attempt
    /// is a security event (`auth_failed`, the client as its actor, `reason: not_admin`, the
    /// operation): PCI DSS 10.2.1.4's invalid access attempts, which a 403 had left unrecorded.
    func adminClient(_ what: String) async throws(GatewayError) -> Client {
        let client = try client()
        guard client.admin else {
            // Best effort: a store that cannot take the event does not turn the 403 into a 500.
            try? await audit.record(event(.authFailed, client, detail: ["reason": "not_admin", "operation": what]))
            throw GatewayError(.forbidden, "only admin clients may \(what)")
        }
        return client
    }

    /// A path's card id, checked before it reaches a log line, the store or an upstream.
    static func cardID(_ text: String) throws(GatewayError) -> CardID {
        guard InputRules.isCardID(text) else { throw GatewayError(.invalidRequest, InputRules.cardIDRule) }
        return CardID(text)
    }

    /// An event about this request's caller.
    func event(_ kind: SecurityEvent.Kind, _ client: Client, card: CardID? = nil, detail: [String: String] = [:]) -> SecurityEvent {
        SecurityEvent(at: health.clock.date, kind: kind, actor: client.id.rawValue, source: SourceAddress(RequestScope.remoteAddress).description, cardID: card, detail: detail)
    }

    // MARK: Apple Pay

    func provisionApplePay(_ input: Operations.ProvisionApplePay.Input) async throws -> Operations.ProvisionApplePay.Output {
        let client = try client()
        let cardID = try Self.cardID(input.path.cardId)
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        let request = try Self.decode(body)
        let outcome = try await idempotency.run(
            client: client.id, key: input.headers.idempotencyKey, requestHash: Self.requestHash(cardID: cardID, body: body, operation: .applePay),
            asked: .init(.applePay, cardID: cardID),
            stored: { StoredResponse(status: 200, body: Self.encode($0)) }
        ) { (provisioningID: ProvisioningID) async throws(GatewayError) -> Components.Schemas.ApplePayProvisioningResponse in
            let result = try await service.provisionApplePay(cardID: cardID, request: request, client: client, provisioningID: provisioningID, logger: RequestScope.logger)
            return Components.Schemas.ApplePayProvisioningResponse(
                provisioningId: result.provisioningID.rawValue,
                issuer: result.issuer.rawValue,
                activationData: result.payload.activationData.value.base64EncodedString(),
                encryptedPassData: result.payload.encryptedPassData.value.base64EncodedString(),
                ephemeralPublicKey: result.payload.ephemeralPublicKey.value.base64EncodedString())
        }
        return .ok(.init(body: .json(try await answer(outcome, cardID: cardID, client: client, operation: .applePay,
                                                      deviceType: request.device.type, id: \.provisioningId, issuer: \.issuer))))
    }

    // MARK: Google Pay

    func provisionGooglePay(_ input: Operations.ProvisionGooglePay.Input) async throws -> Operations.ProvisionGooglePay.Output {
        let client = try client()
        let cardID = try Self.cardID(input.path.cardId)
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        let request = try GooglePayProvisioningRequest(walletAccountID: body.walletAccountId, deviceID: body.deviceId)
        let outcome = try await idempotency.run(
            client: client.id, key: input.headers.idempotencyKey,
            requestHash: Self.requestHash(cardID: cardID, body: body, operation: .googlePay),
            asked: .init(.googlePay, cardID: cardID),
            stored: { (answer: Components.Schemas.GooglePayProvisioningResponse) in
                // The stored copy for replays leaves out the cardholder's name and address: they are
                // personal data the store should not keep in clear (the app can push tokenize without them).
                var stored = answer
                stored.displayName = nil
                stored.userAddress = nil
                return StoredResponse(status: 200, body: Self.encode(stored))
            }
        ) { (provisioningID: ProvisioningID) async throws(GatewayError) -> Components.Schemas.GooglePayProvisioningResponse in
            let result = try await service.provisionGooglePay(cardID: cardID, request: request, client: client, provisioningID: provisioningID, logger: RequestScope.logger)
            let payload = result.payload
            return Components.Schemas.GooglePayProvisioningResponse(
                provisioningId: result.provisioningID.rawValue, issuer: result.issuer.rawValue,
                opaquePaymentCard: payload.opaquePaymentCard.value, displayName: payload.displayName,
                lastDigits: payload.lastDigits, network: payload.network, tokenServiceProvider: payload.tokenServiceProvider,
                userAddress: payload.userAddress.map {
                    .init(name: $0.name, address1: $0.address1, address2: $0.address2, city: $0.city, state: $0.state,
                          postalCode: $0.postalCode, country: $0.country, phone: $0.phone)
                })
        }
        return .ok(.init(body: .json(try await answer(outcome, cardID: cardID, client: client, operation: .googlePay, id: \.provisioningId,
                                                      issuer: \.issuer))))
    }

    // MARK: Samsung Pay

    func provisionSamsungPay(_ input: Operations.ProvisionSamsungPay.Input) async throws -> Operations.ProvisionSamsungPay.Output {
        let client = try client()
        let cardID = try Self.cardID(input.path.cardId)
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        let request = try SamsungPayProvisioningRequest(
            walletAccountID: body.walletAccountId, deviceID: body.deviceId,
            deviceType: body.device?._type.flatMap { DeviceType(rawValue: $0.rawValue) })
        let outcome = try await idempotency.run(
            client: client.id, key: input.headers.idempotencyKey,
            requestHash: Self.requestHash(cardID: cardID, body: body, operation: .samsungPay),
            asked: .init(.samsungPay, cardID: cardID),
            stored: { (answer: Components.Schemas.SamsungPayProvisioningResponse) in
                // As for Google Pay, the replayed copy leaves out the cardholder's name.
                var stored = answer
                stored.displayName = nil
                return StoredResponse(status: 200, body: Self.encode(stored))
            }
        ) { (provisioningID: ProvisioningID) async throws(GatewayError) -> Components.Schemas.SamsungPayProvisioningResponse in
            let result = try await service.provisionSamsungPay(cardID: cardID, request: request, client: client, provisioningID: provisioningID, logger: RequestScope.logger)
            let payload = result.payload
            return Components.Schemas.SamsungPayProvisioningResponse(
                provisioningId: result.provisioningID.rawValue, issuer: result.issuer.rawValue, provisionPayload: payload.provisionPayload,
                displayName: payload.displayName, lastDigits: payload.lastDigits, network: payload.network,
                tokenServiceProvider: payload.tokenServiceProvider, cardType: payload.cardType)
        }
        return .ok(.init(body: .json(try await answer(outcome, cardID: cardID, client: client, operation: .samsungPay,
                                                      deviceType: request.deviceType, id: \.provisioningId, issuer: \.issuer))))
    }

    // MARK: Wallet tokens

    func listWalletTokens(_ input: Operations.ListWalletTokens.Input) async throws -> Operations.ListWalletTokens.Output {
        let client = try client()
        let cardID = try Self.cardID(input.path.cardId)
        let list = try await service.walletTokens(cardID: cardID, client: client, logger: RequestScope.logger)
        return .ok(.init(body: .json(.init(provisioningId: list.provisioningID.rawValue, tokens: list.tokens.map { token in
            .init(tokenId: token.tokenID, issuer: list.issuer.rawValue, status: .init(rawValue: token.status.rawValue) ?? .unknown,
                  wallet: .init(rawValue: token.wallet) ?? .other, tokenUniqueReference: token.tokenUniqueReference,
                  deviceType: token.deviceType, createdAt: token.createdAt)
        }))))
    }

    func suspendWalletToken(_ input: Operations.SuspendWalletToken.Input) async throws -> Operations.SuspendWalletToken.Output {
        .ok(.init(body: .json(try await transition(cardID: input.path.cardId, tokenID: input.path.tokenId, .suspend,
                                                   idempotencyKey: input.headers.idempotencyKey))))
    }

    func resumeWalletToken(_ input: Operations.ResumeWalletToken.Input) async throws -> Operations.ResumeWalletToken.Output {
        .ok(.init(body: .json(try await transition(cardID: input.path.cardId, tokenID: input.path.tokenId, .resume,
                                                   idempotencyKey: input.headers.idempotencyKey))))
    }

    func deactivateWalletToken(_ input: Operations.DeactivateWalletToken.Input) async throws -> Operations.DeactivateWalletToken.Output {
        .ok(.init(body: .json(try await transition(cardID: input.path.cardId, tokenID: input.path.tokenId, .deactivate,
                                                   idempotencyKey: input.headers.idempotencyKey))))
    }

    /// A token's transition, under the Idempotency-Key when one is sent: a retry of one whose
    /// outcome is unknown is never sent again (neither Marqeta nor Lithic has a key of its own),
    /// and a retry of one that was answered replays that answer.
    private func transition(cardID text: String, tokenID: String, _ action: WalletTokenAction, idempotencyKey: String?)
        async throws -> Components.Schemas.WalletTokenTransition
    {
        let client = try client()
        let cardID = try Self.cardID(text)
        let operation = AuditOperation(action)
        let outcome = try await idempotency.run(
            client: client.id, key: idempotencyKey, requestHash: Self.requestHash(cardID: cardID, body: ["token_id": tokenID], operation: operation),
            // The token id only once it passed its rule (the service checks it in the run).
            asked: .init(operation, cardID: cardID, tokenID: WalletToken.isTokenID(tokenID) ? tokenID : nil),
            stored: { StoredResponse(status: 200, body: Self.encode($0)) }
        ) { (provisioningID: ProvisioningID) async throws(GatewayError) -> Components.Schemas.WalletTokenTransition in
            // The service checks the token id before anything else.
            let change = try await service.transitionWalletToken(cardID: cardID, tokenID: tokenID, action: action, client: client,
                                                                 provisioningID: provisioningID, logger: RequestScope.logger)
            return .init(provisioningId: change.provisioningID.rawValue, tokenId: change.tokenID, issuer: change.issuer.rawValue,
                         action: .init(rawValue: action.rawValue)!,
                         outcome: .init(rawValue: change.result.outcome.rawValue)!, status: .init(rawValue: change.result.status.rawValue)!)
        }
        return try await answer(outcome, cardID: cardID, client: client, operation: operation, tokenID: tokenID, id: \.provisioningId,
                                issuer: \.issuer)
    }

    // MARK: Token activation

    func activateToken(_ input: Operations.ActivateToken.Input) async throws -> Operations.ActivateToken.Output {
        let client = try client()
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        let request = try TokenActivationRequest(tokenUniqueReference: body.tokenUniqueReference)
        if let cardID = body.cardId, !InputRules.isCardID(cardID) { throw GatewayError(.invalidRequest, InputRules.cardIDRule) }
        let cardID = body.cardId.map { CardID($0) }
        let outcome = try await idempotency.run(
            client: client.id, key: input.headers.idempotencyKey,
            requestHash: Self.requestHash(cardID: cardID ?? CardID(""), body: body, operation: .tokenActivation),
            asked: .init(.tokenActivation, cardID: cardID, tokenID: request.tokenUniqueReference),
            stored: { StoredResponse(status: 200, body: Self.encode($0)) }
        ) { (provisioningID: ProvisioningID) async throws(GatewayError) -> Components.Schemas.TokenActivationResponse in
            let activation = try await service.activateToken(request, cardID: cardID, client: client, provisioningID: provisioningID, logger: RequestScope.logger)
            let result = activation.result
            return .init(
                provisioningId: activation.provisioningID.rawValue, issuer: activation.issuer.rawValue,
                result: .init(rawValue: result.outcome.rawValue)!, tokenUniqueReference: result.tokenUniqueReference,
                cardLast4: result.cardLast4, comment: result.comment)
        }
        return .ok(.init(body: .json(try await answer(outcome, cardID: cardID, client: client, operation: .tokenActivation,
                                                      tokenID: request.tokenUniqueReference, id: \.provisioningId, issuer: \.issuer))))
    }

    /// A provisioning's answer: the fresh one as it is; a replay only for a caller that may still
    /// use the card, read back from its stored form and put on record as a replay, with the
    /// issuer that answered and the device the request named, as its first event has them.
    func answer<Answer: Decodable & Sendable>(
        _ outcome: IdempotencyGuard.Answer<Answer>, cardID: CardID?, client: Client, operation: AuditOperation, tokenID: String? = nil,
        deviceType: DeviceType? = nil, id: KeyPath<Answer, String>, issuer: KeyPath<Answer, String>
    ) async throws -> Answer {
        switch outcome {
        case .fresh(let answer):
            return answer
        case .replayed(let stored):
            let answer = try Self.decodeStored(Answer.self, stored)
            try await service.replay(provisioningID: ProvisioningID(answer[keyPath: id]), cardID: cardID, client: client,
                                     operation: operation, tokenID: tokenID, issuer: IssuerID(answer[keyPath: issuer]), deviceType: deviceType,
                                     logger: RequestScope.logger)
            return answer
        }
    }

    /// The same request, however its JSON is spaced or ordered, hashes the same; the operation is
    /// part of it, so one key cannot replay an Apple Pay answer for a Google Pay request.
    static func requestHash(cardID: CardID, body: some Encodable, operation: AuditOperation) -> String {
        var bytes = Data("\(operation.rawValue):\(cardID.rawValue)".utf8)
        bytes.append(0)
        bytes.append(encode(body))
        return Data(SHA256.hash(data: bytes)).lowercaseHex
    }

    static func encode(_ value: some Encodable) -> Data {
        (try? SharedJSON.canonicalEncoder.encode(value)) ?? Data()
    }

    static func decodeStored<Answer: Decodable>(_ type: Answer.Type, _ stored: StoredResponse) throws(GatewayError) -> Answer {
        do {
            return try SharedJSON.decoder.decode(type, from: stored.body)
        } catch {
            throw GatewayError(.internal, "a stored answer could not be read", cause: error)
        }
    }

    /// Text to bytes, naming the field that does not decode (never its value).
    static func decode(_ request: Components.Schemas.ApplePayProvisioningRequest) throws(GatewayError) -> ApplePayProvisioningRequest {
        let body: (certificates: [String], nonce: String, nonceSignature: String, encryptionScheme: Components.Schemas.EncryptionScheme?,
                   device: Components.Schemas.Device?)
        let encoding: BinaryEncoding
        switch request {
        case .ApplePayBase64Request(let fields):
            body = (fields.certificates, fields.nonce, fields.nonceSignature, fields.encryptionScheme, fields.device)
            encoding = .base64
        case .ApplePayHexRequest(let fields):
            body = (fields.certificates, fields.nonce, fields.nonceSignature, fields.encryptionScheme, fields.device)
            encoding = .hex
        }
        if body.encryptionScheme == .rsaV2 {
            throw GatewayError(.unsupportedEncryptionScheme,
                "encryption_scheme: RSA_V2 has no public specification; configure PKAddPaymentPassRequestConfiguration with ECC_V2")
        }
        func bytes(_ text: String, _ field: String) throws(GatewayError) -> Data {
            guard let data = encoding.decode(text) else {
                throw GatewayError(.invalidRequest, "\(field): not valid \(encoding.rawValue)")
            }
            return data
        }
        var certificates: [Data] = []
        for (index, text) in body.certificates.enumerated() {
            certificates.append(try bytes(text, "certificates[\(index)]"))
        }
        let device = switch body.device {
        case nil: DeviceInfo()
        case .PhoneOrTabletDevice(let device)?:
            DeviceInfo(type: device._type.flatMap { DeviceType(rawValue: $0.rawValue) } ?? .phone,
                       primaryAccountIdentifier: device.primaryAccountIdentifier, appVersion: device.appVersion)
        case .WatchDevice(let device)?:
            DeviceInfo(type: .watch, primaryAccountIdentifier: device.primaryAccountIdentifier, appVersion: device.appVersion)
        }
        return try ApplePayProvisioningRequest(
            certificates: certificates,
            nonce: try bytes(body.nonce, "nonce"),
            nonceSignature: try bytes(body.nonceSignature, "nonce_signature"),
            device: device)
    }

    // MARK: Card registry

    func putCard(_ input: Operations.PutCard.Input) async throws -> Operations.PutCard.Output {
        let client = try client()
        let id = try Self.cardID(input.path.cardId)
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        func refuse(_ error: GatewayError, _ reason: String) async -> GatewayError {
            // Only names that passed their rule go on record, never a caller's raw text.
            // (and a name that may be a card number only masked, as `short` shows it)
            let program = InputRules.isName(body.program) ? InputRules.short(body.program) : ""
            let issuer = InputRules.isName(body.issuer) ? InputRules.short(body.issuer) : ""
            await audit.note(event(.cardChangeRefused, client, card: id, detail: ["reason": reason, "after_issuer": issuer,
                                                                                   "after_program": program]))
            return error
        }
        // Who may ask comes before what is asked: a tenant naming another program, or the gateway's
        // own issuer, is refused before the registration rules run, so their answers (which issuer
        // serves which program, which issuers exist) never tell a tenant about other programs.
        if !client.admin {
            // The gateway's own issuer encrypts card data the gateway holds: only ops (admin
            // clients and the CLI) decide which cards it serves, never a tenant.
            if body.issuer == "local" {
                throw await refuse(GatewayError(.forbidden, "issuer local is set only by admin clients or the CLI"), "local_not_admin")
            }
            if !client.programs.contains(ProgramID(body.program)) {
                throw await refuse(GatewayError(.forbidden, "the program is not one of this client's"), "foreign_program")
            }
        }
        // A registration the rules refuse (an issuer that serves none of the client's programs, a
        // reference of the wrong shape) is a refused change too: a tenant probing which issuers
        // exist leaves a trace (the observability audit found none).
        let recorded = Result { () throws(GatewayError) -> CardRecord in
            try registration.record(
                id: id.rawValue, program: body.program, issuer: body.issuer, reference: body.issuerReference.additionalProperties,
                namingIssuers: client.admin)
        }
        let card: CardRecord
        switch recorded {
        case .success(let record): card = record
        case .failure(let error): throw await refuse(error, error.code.rawValue)
        }
        // The ownership check, the write and its security event are one transaction in the store:
        // another tenant racing for the same id cannot take the card, and no change goes unaudited.
        let change = event(.cardUpdated, client, card: id, detail: [
            "after_issuer": card.issuer?.rawValue ?? "", "after_program": card.program.rawValue,
        ])
        let created: Bool
        do {
            switch try await store.putCard(card, owners: client.admin ? nil : client.programs, event: change) {
            case .created: created = true
            case .updated: created = false
            case .notOwned:
                // Another program's card: answered as if the id were free of cards this client can see.
                throw await refuse(GatewayError.cardNotAmongClients(id), "foreign_card")
            }
        } catch CardRegistryError.issuerReferenceInUse {
            throw await refuse(GatewayError(
                .issuerReferenceInUse, "this issuer reference is another card's, or was until that card was deleted or changed"), "reference_in_use")
        }
        return created ? .created(.init(body: .json(Self.schema(card)))) : .ok(.init(body: .json(Self.schema(card))))
    }

    func getCard(_ input: Operations.GetCard.Input) async throws -> Operations.GetCard.Output {
        .ok(.init(body: .json(Self.schema(try await ownCard(input.path.cardId)))))
    }

    func deleteCard(_ input: Operations.DeleteCard.Input) async throws -> Operations.DeleteCard.Output {
        let client = try client()
        let id = try Self.cardID(input.path.cardId)
        // Ownership, deletion (with the vault entry) and the security event in one transaction.
        guard try await store.deleteCard(id, owners: client.admin ? nil : client.programs, event: event(.cardDeleted, client, card: id)) != nil
        else {
            // Refused, as a PUT to another program's card is: on record, with whether the id was
            // another program's card (the caller hears 404 either way; only admins read this).
            let foreign = (try? await store.card(id)) != nil
            await audit.note(event(.cardChangeRefused, client, card: id, detail: ["reason": foreign ? "foreign_card" : "no_card",
                                                                                   "operation": "delete"]))
            throw GatewayError.cardNotAmongClients(id)
        }
        return .noContent(.init())
    }

    func listCards(_ input: Operations.ListCards.Input) async throws -> Operations.ListCards.Output {
        let client = try client()
        let limit = input.query.limit ?? 100
        guard (1...500).contains(limit) else { throw GatewayError(.invalidRequest, "limit: must be 1 to 500") }
        if let program = input.query.program, !InputRules.isName(program) {
            throw GatewayError(.invalidRequest, InputRules.nameRule("program"))
        }
        if let issuer = input.query.issuer, !InputRules.isName(issuer) {
            throw GatewayError(.invalidRequest, InputRules.nameRule("issuer"))
        }
        // The cursor is the server's own `next_after` (a stored id, perhaps one registered before
        // the card-number rule): its shape is checked, and it is never echoed.
        if let after = input.query.after, !InputRules.hasCardIDShape(after) { throw GatewayError(.invalidRequest, "after: not a card id") }
        // An admin sees every program (nil); a client only its own programs, none if it has none.
        var programs = client.admin ? nil : client.programs.sorted { $0.rawValue < $1.rawValue }
        if let program = input.query.program.map({ ProgramID($0) }) {
            guard client.admin || client.programs.contains(program) else {
                throw GatewayError(.forbidden, "program \(InputRules.short(program.rawValue)) is not one of this client's")
            }
            programs = [program]
        }
        let cards = try await store.cards(CardPageQuery(
            programs: programs, issuer: input.query.issuer.map { IssuerID($0) }, after: input.query.after.map { CardID($0) },
            limit: limit))
        if client.admin {
            try await audit.record(event(.adminRead, client, detail: ["path": "/v1/cards", "program": input.query.program ?? "",
                                                                      "count": "\(cards.count)"]))
        }
        return .ok(.init(body: .json(.init(
            cards: cards.map(Self.schema), nextAfter: cards.count == limit ? cards.last?.id.rawValue : nil))))
    }

    /// A card the caller may see: its own programs' (or any, for an admin, whose read is audited).
    /// Another program's card is 404, exactly as a card that does not exist.
    private func ownCard(_ text: String) async throws -> CardRecord {
        let client = try client()
        let id = try Self.cardID(text)
        guard let card = try await store.card(id), client.manages(card) else {
            throw GatewayError.cardNotAmongClients(id)
        }
        if client.admin {
            try await audit.record(event(.adminRead, client, card: id, detail: ["path": "/v1/cards/{card_id}"]))
        }
        return card
    }

    static func schema(_ card: CardRecord) -> Components.Schemas.Card {
        .init(cardId: card.id.rawValue, issuer: card.issuer?.rawValue, program: card.program.rawValue,
              issuerReference: .init(additionalProperties: card.issuerReference.fields))
    }

    // MARK: Audit

    func getProvisioning(_ input: Operations.GetProvisioning.Input) async throws -> Operations.GetProvisioning.Output {
        let client = try client()
        guard InputRules.isProvisioningID(input.path.provisioningId) else {
            throw GatewayError(.invalidRequest, "provisioning_id: 1 to 64 characters of A-Z, a-z, 0-9, _")
        }
        let notFound = GatewayError(.notFound, "no provisioning \(InputRules.short(input.path.provisioningId)) for this client")
        // Bounded: every replay of the provisioning's key adds an event (one more than shown tells
        // that there are more).
        let read = try await store.auditEvents(ProvisioningID(input.path.provisioningId), limit: Self.maxTrailEvents + 1)
        let events = read.prefix(Self.maxTrailEvents).filter { $0.client == client.id }
        guard !events.isEmpty else { throw notFound }
        // A trail names its card, issuer and endpoint: it is read only while the client holds the
        // program its card was in when the requests found the card theirs (the events name it),
        // so a client whose program was taken away reads it no more (the config audit read one
        // after its program was removed). What became of the card since does not count: held to
        // the card's owner now, a trail had turned 404 once another tenant registered an id its
        // client had deleted, a read that told of another tenant's registration (the identifier
        // audit).
        let programs = Set(events.compactMap(\.program))
        if !programs.isEmpty {
            guard client.admin || programs.isSubset(of: client.programs) else { throw notFound }
            return .ok(Self.trail(input.path.provisioningId, events, truncated: read.count > Self.maxTrailEvents))
        }
        // Events written before schema 011 that schema 012 could give no program (their card was
        // gone when it ran) name none: such a trail is read while its card is still among the
        // client's programs (or gone). Only events that reached an issuer are held
        // to it: a refusal before any issuer (`card_not_found`, ...) tells nothing of the card,
        // and holding it to the card's owner made the trail of a refused probe an oracle: 404
        // once another tenant registered the id, 200 while it was free (the observability audit).
        for cardID in Set(events.filter { $0.issuer != nil || $0.endpoint != nil }.map(\.cardID)) where !cardID.rawValue.isEmpty {
            let card: CardRecord?
            do { card = try await store.card(cardID) } catch { throw GatewayError(.internal, "the card registry failed", cause: error) }
            if let card, !client.manages(card) { throw notFound }
        }
        return .ok(Self.trail(input.path.provisioningId, events, truncated: read.count > Self.maxTrailEvents))
    }

    private static func trail(_ provisioningID: String, _ events: some Sequence<AuditEvent>, truncated: Bool)
        -> Operations.GetProvisioning.Output.Ok {
        .init(body: .json(.init(provisioningId: provisioningID, events: events.map { event in
            .init(at: event.at, clientId: event.client.rawValue, cardId: event.cardID.rawValue, wallet: event.operation.rawValue,
                  deviceType: event.deviceType?.rawValue, tokenId: event.tokenID,
                  issuer: event.issuer?.rawValue, endpoint: event.endpoint, attempt: event.attempt,
                  outcome: .init(rawValue: event.outcome.rawValue) ?? .failed, errorCode: event.errorCode?.rawValue,
                  upstreamStatus: event.upstreamStatus, latencyMs: event.latencyMS)
        }, truncated: truncated ? true : nil)))
    }

    /// The most events `GET /v1/provisionings/{id}` answers (the spec's `maxItems`).
    static let maxTrailEvents = 1_000

    // MARK: The contract

    /// The served document: read once per process, its bytes shared by every answer.
    private static let contractBytes: Result<[UInt8], any Error> = Result { [UInt8](try ServedContract.document()) }

    func getContract(_ input: Operations.GetContract.Input) async throws -> Operations.GetContract.Output {
        .ok(.init(body: .yaml(HTTPBody(try Self.contractBytes.get()))))
    }

    // MARK: Health

    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        .ok(.init(body: .json(.init(status: .ok))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        guard !readiness.isDraining else {
            throw GatewayError(.shuttingDown, "the gateway is shutting down; requests in flight finish, new ones go elsewhere")
        }
        do {
            _ = try await store.schemaVersions()
        } catch {
            throw GatewayError(.upstreamUnavailable, "the store is not reachable")
        }
        if let problem = await store.writeProblem() {
            // The probe is unauthenticated: the file's path goes to the log, not to the answer.
            RequestScope.logger?.error("the store cannot take writes: not ready", metadata: ["problem": "\(problem)"])
            throw GatewayError(.upstreamUnavailable, "the store cannot take writes (the log says why)")
        }
        return .ok(.init(body: .json(.init(status: .ready))))
    }
}

// MARK: Resilience: metrics, upstream health, sandbox faults

extension APIHandler {
    func getMetrics(_ input: Operations.GetMetrics.Input) async throws -> Operations.GetMetrics.Output {
        metrics.upstreamConnections(upstreams.connections())
        metrics.storeCommits(store.commitCounts)
        metrics.requestsInFlight(live.requestsInFlight)
        // Every configured client, 0 included, so a graph shows a client's figure fall back.
        var perClient = Dictionary(uniqueKeysWithValues: generation.config.clients.map { ($0.id, 0) })
        for (client, count) in clientsInFlight.snapshot { perClient[client.rawValue] = count }
        metrics.clientRequestsInFlight(perClient)
        // A breaker's state moves from open to half open with time, not with a call: read at the
        // scrape, so a quiet issuer's (or a standby endpoint's) breaker does not show open, and
        // page, until traffic comes back.
        for endpoint in health.snapshot() { metrics.breakerState(issuer: endpoint.issuer, endpoint: endpoint.url, endpoint.state) }
        return .ok(.init(body: .plainText(.init(metrics.exposition()))))
    }

    func listIssuerHealth(_ input: Operations.ListIssuerHealth.Input) async throws -> Operations.ListIssuerHealth.Output {
        let client = try await adminClient("read upstream health")
        try await audit.record(event(.adminRead, client, detail: ["path": "/v1/admin/issuers"]))
        let snapshot = health.snapshot()
        let issuers = upstreams.issuers.values.sorted { $0.issuer.rawValue < $1.issuer.rawValue }.map { issuerHealth($0, snapshot) }
        return .ok(.init(body: .json(.init(issuers: issuers))))
    }

    /// One issuer's entry of the admin view.
    private func issuerHealth(_ upstream: UpstreamIssuer, _ snapshot: [UpstreamHealth.EndpointSnapshot]) -> Components.Schemas.IssuerHealth {
        let pause = health.pauseState(upstream.issuer)
        return Components.Schemas.IssuerHealth(
            issuer: upstream.issuer.rawValue, kind: upstream.kind.rawValue,
            paused: pause?.paused ?? false, pausedBy: (pause?.setBy ?? .config).description,
            wallets: Wallet.allCases.filter { upstream.wallets.contains($0) }.compactMap { .init(rawValue: $0.rawValue) },
            retry: .init(
                maxAttempts: upstream.retry.maxAttempts, baseBackoffMs: Int(upstream.retry.baseBackoff.wholeMilliseconds),
                maxBackoffMs: Int(upstream.retry.maxBackoff.wholeMilliseconds),
                decisions: upstream.decisions.rules.map {
                    .init(on: $0.match.description, code: $0.code.rawValue, action: .init(rawValue: $0.action.rawValue) ?? .fail)
                }),
            endpoints: snapshot.filter { $0.issuer == upstream.issuer }.map { endpoint in
                .init(index: endpoint.index, url: endpoint.url, breaker: .init(rawValue: endpoint.state) ?? .closed,
                      openUntil: endpoint.openUntil, calls: endpoint.calls, failures: endpoint.failures,
                      consecutiveFailures: endpoint.consecutiveFailures, lastErrorCode: endpoint.recentFailures.last?.code.rawValue,
                      lastErrorAt: endpoint.recentFailures.last?.at,
                      recentFailures: endpoint.recentFailures.map { .init(at: $0.at, code: $0.code.rawValue, condition: $0.condition) })
            })
    }

    func pauseIssuer(_ input: Operations.PauseIssuer.Input) async throws -> Operations.PauseIssuer.Output {
        .ok(.init(body: .json(try await setPaused(input.path.name, true))))
    }

    func resumeIssuer(_ input: Operations.ResumeIssuer.Input) async throws -> Operations.ResumeIssuer.Output {
        .ok(.init(body: .json(try await setPaused(input.path.name, false))))
    }

    /// An admin's pause or resume: recorded as a security event before it takes effect, so a
    /// change nobody could audit is never made.
    private func setPaused(_ name: String, _ paused: Bool) async throws(GatewayError) -> Components.Schemas.IssuerHealth {
        let client = try await adminClient(paused ? "pause issuers" : "resume issuers")
        let issuer = IssuerID(name)
        guard let upstream = upstreams.issuer(issuer), let before = health.pauseState(issuer) else {
            guard issuer != LocalIssuer.issuerID else {
                throw GatewayError(.notFound, "local is the gateway's own encryptor, not an upstream issuer: it has no pause "
                    + "(local.enabled: false in the file, and a reload, stops it)")
            }
            throw GatewayError(.notFound, "no issuer \(InputRules.short(name)) is configured")
        }
        try await audit.record(event(paused ? .issuerPaused : .issuerResumed, client,
                                     detail: ["issuer": name, "was_paused": "\(before.paused)"]))
        // A reload that removed the issuer since the look-up above leaves nothing to pause: the
        // caller hears so, not a 200 for a switch that is gone (the reload audit, from the code).
        guard health.setPaused(issuer, paused, by: client.id.rawValue) != nil else {
            throw GatewayError(.notFound, "no issuer \(InputRules.short(name)) is configured: a reload removed it while this request ran")
        }
        RequestScope.logger?.notice(paused ? "issuer paused" : "issuer resumed", metadata: ["issuer": "\(name)", "by": "\(client.id)"])
        return issuerHealth(upstream, health.snapshot())
    }

    func reloadConfig(_ input: Operations.ReloadConfig.Input) async throws -> Operations.ReloadConfig.Output {
        let client = try await adminClient("reload the configuration")
        let outcome = await reloader.reload(.admin(client, source: SourceAddress(RequestScope.remoteAddress).description))
        guard outcome.applied else {
            let listed = outcome.problems.prefix(20).map(\.description).joined(separator: "; ")
            let more = outcome.problems.count > 20 ? " (and \(outcome.problems.count - 20) more)" : ""
            guard outcome.failure == .configInvalid else { throw GatewayError(outcome.failure, listed) }
            throw GatewayError(.configInvalid, "nothing was changed: \(outcome.problems.count) problem(s): \(listed)\(more)")
        }
        return .ok(.init(body: .json(.init(
            result: .applied, generation: outcome.generation, fileSha256: outcome.fileSHA256 ?? "",
            changed: outcome.changed, restartRequired: outcome.restartRequired))))
    }

    func explainRoute(_ input: Operations.ExplainRoute.Input) async throws -> Operations.ExplainRoute.Output {
        let client = try await adminClient("explain routes")
        let id = try Self.cardID(input.query.cardId)
        guard let wallet = Wallet(rawValue: input.query.wallet.rawValue) else {
            throw GatewayError(.invalidRequest, "wallet: must be apple_pay, google_pay or samsung_pay")
        }
        try await audit.record(event(.adminRead, client, card: id, detail: ["path": "/v1/admin/routes/explain"]))
        guard let card = try await store.card(id) else { throw GatewayError(.cardNotFound, "no card \(id) in the registry") }
        return .ok(.init(body: .json(routes.explain(card, wallet: wallet, health: health.snapshot(), pause: health.pauseState))))
    }

    func listSecurityEvents(_ input: Operations.ListSecurityEvents.Input) async throws -> Operations.ListSecurityEvents.Output {
        let client = try await adminClient("read the security audit")
        let query = input.query
        let limit = query.limit ?? 100
        guard (1...500).contains(limit) else { throw GatewayError(.invalidRequest, "limit: must be 1 to 500") }
        if let cardID = query.cardId, !InputRules.isCardID(cardID) { throw GatewayError(.invalidRequest, InputRules.cardIDRule) }
        if let actor = query.actor, actor.isEmpty || actor.count > 64 { throw GatewayError(.invalidRequest, "actor: 1 to 64 characters") }
        if let after = query.after, after < 0 { throw GatewayError(.invalidRequest, "after: must not be negative") }
        // What was looked for, not only where: the kind, the actor (as `short` shows a caller's
        // text) and the card (the event's own card id).
        var looked = ["path": "/v1/admin/audit", "kind": query.kind?.rawValue ?? ""]
        if let actor = query.actor { looked["actor"] = InputRules.short(actor) }
        try await audit.record(event(.adminRead, client, card: query.cardId.map { CardID($0) }, detail: looked))
        let events = try await store.securityEvents(SecurityEventQuery(
            kind: query.kind.flatMap { SecurityEvent.Kind(rawValue: $0.rawValue) }, actor: query.actor,
            cardID: query.cardId.map { CardID($0) }, after: query.after, limit: limit))
        return .ok(.init(body: .json(.init(
            events: events.map {
                .init(id: $0.id, at: $0.at, kind: $0.kind.rawValue, actor: $0.actor, source: $0.source, cardId: $0.cardID?.rawValue,
                      detail: .init(additionalProperties: $0.detail))
            },
            nextAfter: events.count == limit ? events.last?.id : nil))))
    }

    /// The fault-injection routes and the caller's scope in them, or 404 outside the sandbox (the
    /// paths do not exist there).
    private func faultInjection() throws(GatewayError) -> (faults: any FaultInjection, scope: FaultScope) {
        let client = try client()
        guard let faults else { throw GatewayError(.notFound, "fault injection exists only in the sandbox") }
        return (faults, FaultScope(client, config: generation.config))
    }

    func addSandboxFault(_ input: Operations.AddSandboxFault.Input) async throws -> Operations.AddSandboxFault.Output {
        let (faults, scope) = try faultInjection()
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        return .ok(.init(body: .json(try await faults.add(body, scope: scope))))
    }

    func listSandboxFaults(_ input: Operations.ListSandboxFaults.Input) async throws -> Operations.ListSandboxFaults.Output {
        let (faults, scope) = try faultInjection()
        return .ok(.init(body: .json(await faults.pending(scope: scope))))
    }

    func clearSandboxFaults(_ input: Operations.ClearSandboxFaults.Input) async throws -> Operations.ClearSandboxFaults.Output {
        let (faults, scope) = try faultInjection()
        await faults.clear(scope: scope)
        return .ok(.init(body: .json(await faults.pending(scope: scope))))
    }
}

/// The issuers at whose simulators a client may queue, see and clear faults. A simulator's fault
/// plays on the next requests any client sends there, so a client reaches only the issuers whose
/// account serves none of another client's programs: each of its `issuers.<name>.programs` this
/// client's or no client's, or, for an account that lists none (it serves every program), no other
/// client holding a program this one does not. That is the rule activations follow (an account
/// shared with another tenant is off limits), and the sandbox a single tenant runs (`demo` and the
/// admin `ops`) keeps every issuer. An admin client reaches every issuer; it provisions nothing, so
/// a fault it queues is an operator's test. Made from the configuration serving the request.
public struct FaultScope: Sendable, Equatable {
    /// The endpoint URLs of the issuers the client does not reach: a simulator one of them sends
    /// requests to is outside the scope, whichever other issuer also names it. Empty for an admin.
    public let unreachableEndpoints: Set<String>

    public init(_ client: Client, config: GatewayConfig) {
        guard !client.admin else {
            unreachableEndpoints = []
            return
        }
        let served = config.issuerPrograms, everyClientProgram = config.clientPrograms
        unreachableEndpoints = Set(config.issuers
            .filter { client.sharesAccount(serving: served[IssuerID($0.key)], everyClientProgram: everyClientProgram) }
            .flatMap { $0.value.endpoints.map(\.url) })
    }

    /// Whether faults at the simulator behind `url` are this client's to queue, see and clear.
    public func reaches(_ url: String) -> Bool { !unreachableEndpoints.contains(url) }
}

/// What the sandbox composition plugs into the fault routes of the unified API. Each call names
/// the caller's `FaultScope`: faults are queued, listed and cleared only at simulators it reaches.
public protocol FaultInjection: Sendable {
    /// Queues a fault; a `GatewayError(.invalidRequest)` names what is wrong with it, and
    /// `GatewayError(.forbidden)` an issuer outside `scope`.
    func add(_ fault: Components.Schemas.SandboxFault, scope: FaultScope) async throws(GatewayError) -> Components.Schemas.SandboxFaults
    func pending(scope: FaultScope) async -> Components.Schemas.SandboxFaults
    func clear(scope: FaultScope) async
}
