import Foundation
import Hummingbird
import Logging

/// Marqeta's digital wallet provision requests, read from its Core API swagger
/// (`digital_wallet_apple_pay_provision_request`, `digital_wallet_android_pay_provision_request`;
/// basePath `/v3`), not from the gateway's connector: HTTP Basic (application token as user,
/// access token as password), every required field with its type, enum and length, base64
/// certificates (leaf first), nonce and signature; 201 with the documented response fields.
public struct MarqetaSimulator: Sendable {
    public let applicationToken: String
    public let accessToken: String
    public let cardTokens: Set<String>
    /// Card data by card token; others get `DemoCard.testVisa`.
    public let cards: [String: DemoCard]
    public let log = SimulatorLog()
    public let faults = SimulatorFaults()
    /// The `device_type` and `provisioning_app_version` of each accepted request (no card data).
    public let seen = MarqetaSeen()
    /// Each known card's two wallet tokens, and the transitions applied to them.
    public let tokens = MarqetaTokens()

    public init(applicationToken: String, accessToken: String, cardTokens: Set<String>, cards: [String: DemoCard] = [:]) {
        self.applicationToken = applicationToken
        self.accessToken = accessToken
        self.cardTokens = cardTokens
        self.cards = cards
    }

    public func server(logger: Logger = Logger(label: "sandbox.marqeta")) -> SimulatorServer {
        SimulatorServer(name: "marqeta-simulator", basePath: "/v3", logger: logger, log: log, faults: faults,
                        errorResponse: { status, _, message in error(status, message) }) { router in
        router.post("/v3/digitalwalletprovisionrequests/applepay") { request, _ in
            await applePay(request)
        }
        router.post("/v3/digitalwalletprovisionrequests/androidpay") { request, _ in
            await androidPay(request)
        }
        router.post("/v3/digitalwalletprovisionrequests/samsungpay") { request, _ in
            await samsungPay(request)
        }
        router.get("/v3/digitalwallettokens/card/{card_token}") { request, context in
            await listTokens(request, cardToken: SimulatorHTTP.parameter(context, "card_token"))
        }
        router.post("/v3/digitalwallettokentransitions") { request, _ in
            await transition(request)
        }
        }
    }

    /// The swagger's `device_type` enum.
    static let deviceTypes: Set<String> = ["MOBILE_PHONE", "WATCH", "TABLET", "WEARABLE_DEVICE", "HOUSEHOLD_DEVICE", "AUTOMOBILE_DEVICE"]

    private var expectedAuthorization: String {
        "Basic " + Data("\(applicationToken):\(accessToken)".utf8).base64EncodedString()
    }

    /// The body after auth, or the error answer.
    private func body(_ request: Request) async -> Checked<[String: Any]> {
        guard SimulatorHTTP.header(request, "Authorization") == expectedAuthorization else {
            return .refused(error(.unauthorized, "Invalid application token or access token"))
        }
        guard let body = SimulatorHTTP.jsonObject(await SimulatorHTTP.body(request)) else {
            return .refused(error(.badRequest, "Request body must be a JSON object"))
        }
        return .ok(body)
    }

    /// A required string of `min...max` characters, or the 400 naming it.
    private func string(_ body: [String: Any], _ field: String, max: Int? = nil) -> Checked<String> {
        guard let value = body[field] as? String else { return .refused(error(.badRequest, "Invalid input(s): \(field) is required")) }
        guard !value.isEmpty, value.count <= (max ?? .max) else {
            return .refused(error(.badRequest, "Invalid input(s): \(field) must be 1 to \(max ?? .max) characters"))
        }
        return .ok(value)
    }

    typealias Common = (cardToken: String, deviceType: String, appVersion: String)

    /// A provision request's body and the fields every provision request shares, after auth.
    private func provisionRequest(_ request: Request) async -> Checked<(body: [String: Any], common: Common)> {
        switch await body(request) {
        case .refused(let answer): return .refused(answer)
        case .ok(let body):
            switch common(body) {
            case .refused(let answer): return .refused(answer)
            case .ok(let common): return .ok((body, common))
            }
        }
    }

    /// The fields every provision request shares: `card_token` (max 36), `device_type` (enum), `provisioning_app_version` (max 50).
    private func common(_ body: [String: Any]) -> Checked<Common> {
        let cardToken: String
        switch string(body, "card_token", max: 36) {
        case .ok(let value): cardToken = value
        case .refused(let answer): return .refused(answer)
        }
        guard let deviceType = body["device_type"] as? String, Self.deviceTypes.contains(deviceType) else {
            return .refused(error(.badRequest, "Invalid input(s): device_type must be one of \(Self.deviceTypes.sorted().joined(separator: ", "))"))
        }
        switch string(body, "provisioning_app_version", max: 50) {
        case .ok(let version): return .ok((cardToken, deviceType, version))
        case .refused(let answer): return .refused(answer)
        }
    }

    private func applePay(_ request: Request) async -> Response {
        let body: [String: Any]
        let common: Common
        switch await provisionRequest(request) {
        case .ok(let value): (body, common) = value
        case .refused(let answer): return answer
        }
        let cardToken = common.cardToken
        guard let certificates = body["certificates"] as? [String], !certificates.isEmpty else {
            return error(.badRequest, "Invalid input(s): certificates is required")
        }
        var chain: [Data] = []
        for text in certificates {
            guard let der = Data(base64Encoded: text), SimulatorHTTP.looksLikeDER(der) else {
                return error(.badRequest, "Invalid input(s): certificates must be base64 DER certificates")
            }
            chain.append(der)
        }
        var decoded: [String: Data] = [:]
        for field in ["nonce", "nonce_signature"] {
            guard let text = body[field] as? String, !text.isEmpty else { return error(.badRequest, "Invalid input(s): \(field) is required") }
            guard let bytes = Data(base64Encoded: text) else { return error(.badRequest, "Invalid input(s): \(field) is not base64") }
            decoded[field] = bytes
        }
        guard cardTokens.contains(cardToken) else { return error(.notFound, "Card not found", code: "404") }
        // The leaf comes first.
        guard let payload = try? SandboxPayload.make(leafDER: chain[0], nonce: decoded["nonce"]!, nonceSignature: decoded["nonce_signature"]!,
                                                     card: cards[cardToken] ?? .testVisa)
        else { return error(.badRequest, "Invalid input(s): certificates[0] does not carry a P-256 key") }
        await seen.record(deviceType: common.deviceType, appVersion: common.appVersion)
        let now = Self.timestamp()
        return SimulatorHTTP.json(.created, [
            "card_token": cardToken,
            "activation_data": payload.activationData.base64EncodedString(),
            "encrypted_pass_data": payload.encryptedPassData.base64EncodedString(),
            "ephemeral_public_key": payload.ephemeralPublicKey.base64EncodedString(),
            "created_time": now, "last_modified_time": now,
        ])
    }

    private func androidPay(_ request: Request) async -> Response {
        let body: [String: Any]
        let common: Common
        switch await provisionRequest(request) {
        case .ok(let value): (body, common) = value
        case .refused(let answer): return answer
        }
        let cardToken = common.cardToken
        var ids: [String: String] = [:]
        for (field, limit) in [("wallet_account_id", 50), ("device_id", 24)] {
            switch string(body, field, max: limit) {
            case .ok(let value): ids[field] = value
            case .refused(let answer): return answer
            }
        }
        guard cardTokens.contains(cardToken) else { return error(.notFound, "Card not found", code: "404") }
        await seen.record(deviceType: common.deviceType, appVersion: common.appVersion)
        let card = cards[cardToken] ?? .testVisa
        let network = SandboxOPC.network(card)
        let now = Self.timestamp()
        return SimulatorHTTP.json(.created, [
            "card_token": cardToken, "created_time": now, "last_modified_time": now,
            "push_tokenize_request_data": [
                "display_name": "\(card.name) •••• \(card.number.suffix(4))",
                "last_digits": String(card.number.suffix(4)),
                "network": network,
                "token_service_provider": network,
                "opaque_payment_card": SandboxOPC.make(card: card, walletAccountID: ids["wallet_account_id"]!,
                                                       deviceID: ids["device_id"]!).base64EncodedString(),
                "user_address": ["name": card.name, "address1": "1 Sandbox Way", "city": "San Francisco", "state": "CA",
                                 "postal_code": "94105", "country": "US", "phone": "4155550100"],
            ] as [String: Any],
        ])
    }

    /// `digital_wallet_samsung_pay_provision_request`: the common fields, `wallet_user_id` (max
    /// 50) and `device_id` (max 24); 201 with `push_tokenize_request_data.extra_provision_payload`.
    private func samsungPay(_ request: Request) async -> Response {
        let body: [String: Any]
        let common: Common
        switch await provisionRequest(request) {
        case .ok(let value): (body, common) = value
        case .refused(let answer): return answer
        }
        var ids: [String: String] = [:]
        for (field, limit) in [("wallet_user_id", 50), ("device_id", 24)] {
            switch string(body, field, max: limit) {
            case .ok(let value): ids[field] = value
            case .refused(let answer): return answer
            }
        }
        guard cardTokens.contains(common.cardToken) else { return error(.notFound, "Card not found", code: "404") }
        await seen.record(deviceType: common.deviceType, appVersion: common.appVersion)
        let card = cards[common.cardToken] ?? .testVisa
        let network = SandboxOPC.network(card)
        // An opaque string for Samsung Pay's add-card call: the gateway must pass it on untouched.
        let payload = "spay." + SandboxOPC.make(card: card, walletAccountID: ids["wallet_user_id"]!, deviceID: ids["device_id"]!)
            .base64EncodedString()
        await seen.recordSamsungPayload(payload)
        let now = Self.timestamp()
        return SimulatorHTTP.json(.created, [
            "card_token": common.cardToken, "created_time": now, "last_modified_time": now,
            "push_tokenize_request_data": [
                "display_name": "\(card.name) •••• \(card.number.suffix(4))",
                "last_digits": String(card.number.suffix(4)),
                "network": network, "token_service_provider": network,
                "extra_provision_payload": payload, "card_type": "CREDIT",
            ] as [String: Any],
        ])
    }

    /// `GET /digitalwallettokens/card/{card_token}?count&start_index`: a page of the card's tokens.
    private func listTokens(_ request: Request, cardToken: String) async -> Response {
        guard SimulatorHTTP.header(request, "Authorization") == expectedAuthorization else {
            return error(.unauthorized, "Invalid application token or access token")
        }
        guard cardTokens.contains(cardToken) else { return error(.notFound, "Card not found", code: "404") }
        let count = request.uri.queryParameters.get("count").flatMap { Int($0) } ?? 5
        let start = request.uri.queryParameters.get("start_index").flatMap { Int($0) } ?? 0
        guard count > 0, start >= 0 else { return error(.badRequest, "Invalid input(s): count and start_index") }
        let all = await tokens.list(cardToken: cardToken)
        let page = Array(all.dropFirst(start).prefix(count))
        return SimulatorHTTP.json(.ok, [
            "count": page.count, "start_index": start, "end_index": start + max(page.count - 1, 0),
            "is_more": start + page.count < all.count,
            "data": page.map { token in
                [
                    "token": token.token, "card_token": cardToken, "state": token.state, "fulfillment_status": "PROVISIONED",
                    "created_time": token.created,
                    "device": ["type": token.deviceType],
                    "token_service_provider": ["token_reference_id": token.reference, "pan_reference_id": "V-\(token.token)",
                                               "token_requestor_name": token.requestor],
                ] as [String: Any]
            },
        ])
    }

    /// `digital_wallet_token_transition_request`: `digital_wallet_token.token` (max 36), `state`
    /// (ACTIVE, SUSPENDED, TERMINATED), optional `reason_code` ("00"..."32") and `channel` (enum);
    /// 201 with the state applied. A terminated token cannot change again.
    private func transition(_ request: Request) async -> Response {
        let body: [String: Any]
        switch await self.body(request) {
        case .ok(let value): body = value
        case .refused(let answer): return answer
        }
        guard let hash = body["digital_wallet_token"] as? [String: Any], let token = hash["token"] as? String,
              (1...36).contains(token.count) else {
            return error(.badRequest, "Invalid input(s): digital_wallet_token.token is required")
        }
        guard let state = body["state"] as? String, ["ACTIVE", "SUSPENDED", "TERMINATED"].contains(state) else {
            return error(.badRequest, "Invalid input(s): state must be ACTIVE, SUSPENDED or TERMINATED")
        }
        if let code = body["reason_code"], !((code as? String).flatMap(Int.init).map { (0...32).contains($0) } ?? false) || (code as? String)?.count != 2 {
            return error(.badRequest, "Invalid input(s): reason_code must be 00 to 32")
        }
        let channels: Set<String> = ["TOKEN_SERVICE_PROVIDER", "TOKEN_SERVICE_PROVIDER_API", "DIGITAL_WALLET", "API", "IVR", "FRAUD", "ADMIN", "SYSTEM"]
        if let channel = body["channel"], !((channel as? String).map(channels.contains) ?? false) {
            return error(.badRequest, "Invalid input(s): channel")
        }
        switch await tokens.apply(token: token, state: state) {
        case .unknown: return error(.badRequest, "Invalid input(s): no such digital wallet token")
        case .terminated: return error(.conflict, "Token is terminated", code: "409")
        case .applied(let cardToken):
            return SimulatorHTTP.json(.created, [
                "token": "dwtt-\(UUID().uuidString.prefix(8).lowercased())", "type": "state.\(state.lowercased())",
                "channel": body["channel"] as? String ?? "API", "state": state, "fulfillment_status": "PROVISIONED",
                "digital_wallet_token": ["token": token, "card_token": cardToken], "created_time": Self.timestamp(),
            ])
        }
    }

    /// `yyyy-MM-ddTHH:mm:ssZ`, as the swagger describes `created_time`.
    static func timestamp() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date())
    }

    /// `{"error_code","error_message"}`, the swagger's error definition.
    private func error(_ status: HTTPResponse.Status, _ message: String, code: String? = nil) -> Response {
        SimulatorHTTP.json(status, ["error_code": code ?? "\(status.code)", "error_message": message])
    }
}

/// What the Marqeta simulator was told about devices and app versions, for tests.
public actor MarqetaSeen {
    public private(set) var deviceTypes: [String] = []
    public private(set) var appVersions: [String] = []
    /// The Samsung Pay payloads it answered with, in order.
    public private(set) var samsungPayloads: [String] = []
    func record(deviceType: String, appVersion: String) {
        deviceTypes.append(deviceType)
        appVersions.append(appVersion)
    }
    func recordSamsungPayload(_ payload: String) { samsungPayloads.append(payload) }
}

/// The simulator's wallet tokens: two per card (Apple Pay on a phone, Google Pay on a watch),
/// made the first time the card's tokens are asked for, and every transition applied to them.
public actor MarqetaTokens {
    public struct Token: Sendable {
        public let token: String
        public let cardToken: String
        public var state: String
        public let deviceType: String
        public let requestor: String
        public let reference: String
        public let created: String
    }
    public private(set) var transitions: [(token: String, state: String)] = []
    private var byCard: [String: [Token]] = [:]

    public func list(cardToken: String) -> [Token] {
        if let tokens = byCard[cardToken] { return tokens }
        let created = MarqetaSimulator.timestamp()
        // Ids unique over every card, as Marqeta's are: cards whose tokens share their first 24
        // characters had got the same ids, and a transition changed the first card's (the token audit).
        let taken = Set(byCard.values.flatMap { $0.map(\.token) })
        let tokens = [("APPLE_PAY", "MOBILE_PHONE"), ("GOOGLE_PAY", "WATCH")].enumerated().map { index, kind in
            var id = "dwt-\(index + 1)-\(cardToken.prefix(24))"
            var salt = 0
            while taken.contains(id) {
                salt += 1
                id = "dwt-\(index + 1)-\(cardToken.prefix(20))-x\(salt)"
            }
            return Token(token: id, cardToken: cardToken, state: "ACTIVE", deviceType: kind.1,
                         requestor: kind.0, reference: "DM4MMC\(String(format: "%010d", index + 1))", created: created)
        }
        byCard[cardToken] = tokens
        return tokens
    }

    enum Applied { case applied(cardToken: String), unknown, terminated }

    func apply(token: String, state: String) -> Applied {
        for (card, tokens) in byCard {
            guard let index = tokens.firstIndex(where: { $0.token == token }) else { continue }
            guard tokens[index].state != "TERMINATED" else { return .terminated }
            byCard[card]![index].state = state
            transitions.append((token, state))
            return .applied(cardToken: card)
        }
        return .unknown
    }
}

/// A checked value, or the upstream's own refusal to answer with.
enum Checked<Value> {
    case ok(Value)
    case refused(Response)
}
