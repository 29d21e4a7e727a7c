import Foundation
import Hummingbird
import Logging

/// Lithic's `POST /v1/cards/{card_token}/provision`, read from UPSTREAMS.md (facts from Lithic's
/// SDKs), not from the gateway's connector: the raw key in `Authorization`, `digital_wallet`,
/// Apple Pay's `certificate` as the leaf's PEM body (base64 DER, no BEGIN/END lines), base64
/// `nonce` and `nonce_signature`; Google Pay's `client_device_id` and `client_wallet_account_id`.
public struct LithicSimulator: Sendable {
    public let apiKey: String
    public let cardTokens: Set<String>
    /// Card data by card token; others get `DemoCard.testVisa`.
    public let cards: [String: DemoCard]
    public let log = SimulatorLog()
    public let faults = SimulatorFaults()
    /// Each known card's two tokenizations, and the transitions asked for.
    public let tokenizations = LithicTokenizations()
    /// The Samsung Pay payloads it answered with, in order.
    public let samsungPayloads = LithicPayloads()

    public init(apiKey: String, cardTokens: Set<String>, cards: [String: DemoCard] = [:]) {
        self.apiKey = apiKey
        self.cardTokens = cardTokens
        self.cards = cards
    }

    public func server(logger: Logger = Logger(label: "sandbox.lithic")) -> SimulatorServer {
        SimulatorServer(name: "lithic-simulator", basePath: "", logger: logger, log: log, faults: faults,
                        errorResponse: { status, _, message in error(status, message) }) { router in
        router.post("/v1/cards/{card_token}/provision") { request, context in
            await provision(request, cardToken: SimulatorHTTP.parameter(context, "card_token"))
        }
        router.get("/v1/tokenizations") { request, _ in
            await listTokenizations(request)
        }
        for verb in ["pause", "unpause", "deactivate"] {
            router.post("/v1/tokenizations/{token}/\(verb)") { request, context in
                await transition(request, token: SimulatorHTTP.parameter(context, "token"), verb: verb)
            }
        }
        }
    }

    private func provision(_ request: Request, cardToken: String) async -> Response {
        // The raw key, no scheme word.
        guard SimulatorHTTP.header(request, "Authorization") == apiKey else { return error(.unauthorized, "Invalid API key") }
        guard let body = SimulatorHTTP.jsonObject(await SimulatorHTTP.body(request)) else {
            return error(.badRequest, "Request body must be a JSON object")
        }
        guard let wallet = body["digital_wallet"] as? String, ["APPLE_PAY", "GOOGLE_PAY", "SAMSUNG_PAY"].contains(wallet) else {
            return error(.badRequest, "digital_wallet must be APPLE_PAY, GOOGLE_PAY or SAMSUNG_PAY")
        }
        if wallet == "APPLE_PAY" { return applePay(body, cardToken: cardToken) }
        var ids: [String: String] = [:]
        for field in ["client_device_id", "client_wallet_account_id"] {
            guard let value = body[field] as? String, !value.isEmpty else { return error(.badRequest, "\(field) is required") }
            ids[field] = value
        }
        guard cardTokens.contains(cardToken) else { return error(.notFound, "Card not found") }
        let opc = SandboxOPC.make(card: cards[cardToken] ?? .testVisa, walletAccountID: ids["client_wallet_account_id"]!,
                                  deviceID: ids["client_device_id"]!)
        let payload = opc.base64EncodedString()
        if wallet == "SAMSUNG_PAY" { await samsungPayloads.record(payload) }
        return SimulatorHTTP.json(.ok, ["provisioning_payload": payload])
    }

    /// `GET /v1/tokenizations?card_token&page_size&starting_after`: a cursor page.
    private func listTokenizations(_ request: Request) async -> Response {
        guard SimulatorHTTP.header(request, "Authorization") == apiKey else { return error(.unauthorized, "Invalid API key") }
        let query = request.uri.queryParameters
        guard let cardToken = query.get("card_token").map({ String($0) }), cardTokens.contains(cardToken) else {
            return SimulatorHTTP.json(.ok, ["data": [Any](), "has_more": false])
        }
        let size = query.get("page_size").flatMap { Int(String($0)) } ?? 50
        guard (1...100).contains(size) else { return error(.badRequest, "page_size must be 1 to 100") }
        var all = await tokenizations.list(cardToken: cardToken)
        if let after = query.get("starting_after").map({ String($0) }), let index = all.firstIndex(where: { $0.token == after }) {
            all = Array(all[(index + 1)...])
        }
        let page = Array(all.prefix(size))
        return SimulatorHTTP.json(.ok, [
            "data": page.map { token in
                ["token": token.token, "card_token": cardToken, "account_token": "acct-sandbox", "status": token.status,
                 "token_requestor_name": token.requestor, "token_unique_reference": token.reference,
                 "tokenization_channel": "DIGITAL_WALLET", "created_at": token.created, "updated_at": token.created] as [String: Any]
            },
            "has_more": all.count > size,
        ])
    }

    /// `POST /v1/tokenizations/{token}/pause|unpause|deactivate`: no body either way; accepted
    /// with an empty 200 and applied later (here: at once, so a later list shows it). `pause` only
    /// applies to an ACTIVE token.
    private func transition(_ request: Request, token: String, verb: String) async -> Response {
        guard SimulatorHTTP.header(request, "Authorization") == apiKey else { return error(.unauthorized, "Invalid API key") }
        switch await tokenizations.apply(token: token, verb: verb) {
        case .unknown: return error(.notFound, "Tokenization not found")
        case .refused(let reason): return error(.badRequest, reason)
        case .accepted: return Response(status: .ok)
        }
    }

    private func applePay(_ body: [String: Any], cardToken: String) -> Response {
        var decoded: [String: Data] = [:]
        for field in ["certificate", "nonce", "nonce_signature"] {
            guard let text = body[field] as? String, !text.isEmpty else { return error(.badRequest, "\(field) is required") }
            if field == "certificate", text.contains("-----") {
                return error(.badRequest, "certificate must be the PEM body without its header lines")
            }
            // Whether PEM's line breaks are wanted is not stated: the body is read with or without them.
            let body = field == "certificate" ? text.replacingOccurrences(of: "\r", with: "").replacingOccurrences(of: "\n", with: "") : text
            guard let bytes = Data(base64Encoded: body) else { return error(.badRequest, "\(field) is not base64") }
            if field == "certificate", !SimulatorHTTP.looksLikeDER(bytes) {
                return error(.badRequest, "certificate is not a certificate")
            }
            decoded[field] = bytes
        }
        guard cardTokens.contains(cardToken) else { return error(.notFound, "Card not found") }
        guard let payload = try? SandboxPayload.make(leafDER: decoded["certificate"]!, nonce: decoded["nonce"]!,
                                                     nonceSignature: decoded["nonce_signature"]!, card: cards[cardToken] ?? .testVisa)
        else { return error(.badRequest, "certificate does not carry a P-256 key") }
        return SimulatorHTTP.json(.ok, ["provisioning_payload": [
            "activationData": payload.activationData.base64EncodedString(),
            "encryptedData": payload.encryptedPassData.base64EncodedString(),
            "ephemeralPublicKey": payload.ephemeralPublicKey.base64EncodedString(),
        ]])
    }

    /// UNCERTAIN: UPSTREAMS.md does not describe Lithic's error body; a `message` is answered.
    private func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        SimulatorHTTP.json(status, ["message": message])
    }
}

/// The simulator's tokenizations: two per card (Apple Pay, Google), made the first time the card's
/// tokens are asked for, and every transition asked for.
public actor LithicTokenizations {
    public struct Token: Sendable {
        public let token: String
        public var status: String
        public let requestor: String
        public let reference: String
        public let created: String
    }
    public private(set) var transitions: [(token: String, verb: String)] = []
    private var byCard: [String: [Token]] = [:]

    public func list(cardToken: String) -> [Token] {
        if let tokens = byCard[cardToken] { return tokens }
        let formatter = ISO8601DateFormatter()
        let created = formatter.string(from: Date())
        let tokens = ["APPLE_PAY", "GOOGLE"].enumerated().map { index, requestor in
            Token(token: "\(UUID().uuidString.lowercased())", status: "ACTIVE", requestor: requestor,
                  reference: "DNITHE\(String(format: "%015d", index + 1))", created: created)
        }
        byCard[cardToken] = tokens
        return tokens
    }

    enum Applied { case accepted, unknown, refused(String) }

    func apply(token: String, verb: String) -> Applied {
        for (card, tokens) in byCard {
            guard let index = tokens.firstIndex(where: { $0.token == token }) else { continue }
            let status = tokens[index].status
            switch verb {
            case "pause" where status != "ACTIVE": return .refused("pause applies to an ACTIVE token only")
            case "unpause" where status != "PAUSED": return .refused("unpause applies to a PAUSED token only")
            case _ where status == "DEACTIVATED": return .refused("the token is deactivated")
            default: break
            }
            byCard[card]![index].status = ["pause": "PAUSED", "unpause": "ACTIVE", "deactivate": "DEACTIVATED"][verb]!
            transitions.append((token, verb))
            return .accepted
        }
        return .unknown
    }
}

public actor LithicPayloads {
    public private(set) var all: [String] = []
    func record(_ payload: String) { all.append(payload) }
}
