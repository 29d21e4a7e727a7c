import ByteText
import Crypto
import Foundation
import Hummingbird
import Logging

/// Bridge's Cards API push-provisioning endpoint, read from Bridge's guide and OpenAPI file (not
/// from the gateway's connector): path with customer and card account, `Api-Key`, required
/// `Idempotency-Key`, snake_case, `encoding` hex by default, Bridge's error shapes.
public struct BridgeSimulator: Sendable {
    public struct Account: Hashable, Sendable {
        public let customerID: String
        public let cardAccountID: String
        public init(customerID: String, cardAccountID: String) {
            self.customerID = customerID
            self.cardAccountID = cardAccountID
        }
    }

    /// Bridge documents both: the guide's example (hex key, plain `MBPAC-...` activation data) and
    /// the OpenAPI file's "always Base64".
    public enum ResponseStyle: Sendable {
        case guideExample
        case allBase64
    }

    public let apiKey: String
    public let accounts: Set<Account>
    /// Card data by card account id; others get `DemoCard.testVisa`.
    public let cards: [String: DemoCard]
    public let responseStyle: ResponseStyle
    public let log = SimulatorLog()
    public let faults = SimulatorFaults()
    private let replays = IdempotencyReplays()

    public init(apiKey: String, accounts: Set<Account>, cards: [String: DemoCard] = [:], responseStyle: ResponseStyle = .guideExample) {
        self.apiKey = apiKey
        self.accounts = accounts
        self.cards = cards
        self.responseStyle = responseStyle
    }

    public func server(logger: Logger = Logger(label: "sandbox.bridge")) -> SimulatorServer {
        SimulatorServer(name: "bridge-simulator", basePath: "/v0", logger: logger, log: log, faults: faults,
                        errorResponse: { error($0, $1, $2, location: "body", key: nil) }) { router in
        router.post("/v0/customers/{customerID}/card_accounts/{cardAccountID}/create_mobile_wallet_provisioning_request") {
            request, context in
            await handle(request, customerID: SimulatorHTTP.parameter(context, "customerID"),
                         cardAccountID: SimulatorHTTP.parameter(context, "cardAccountID"))
        }
        }
    }

    private func handle(_ request: Request, customerID: String, cardAccountID: String) async -> Response {
        guard SimulatorHTTP.header(request, "Api-Key") == apiKey else {
            return error(.unauthorized, "unauthorized", "Missing or invalid Api-Key", location: "header", key: "Api-Key")
        }
        guard let idempotencyKey = SimulatorHTTP.header(request, "Idempotency-Key"), !idempotencyKey.isEmpty else {
            return error(.badRequest, "missing_idempotency_key", "Idempotency-Key header is required",
                         location: "header", key: "Idempotency-Key")
        }
        let raw = await SimulatorHTTP.body(request)
        guard let body = SimulatorHTTP.jsonObject(raw) else {
            return error(.badRequest, "invalid_json", "Request body must be a JSON object", location: "body", key: nil)
        }
        if body["wallet_provider"] as? String == "google_pay" {
            return await googlePay(body, customerID: customerID, cardAccountID: cardAccountID, idempotencyKey: idempotencyKey)
        }
        guard body["wallet_provider"] as? String == "apple_pay" else {
            return error(.badRequest, "invalid_parameter", "wallet_provider must be apple_pay or google_pay",
                         location: "body", key: "wallet_provider")
        }
        guard let applePay = body["apple_pay"] as? [String: Any] else {
            return error(.badRequest, "missing_parameter", "apple_pay is required", location: "body", key: "apple_pay")
        }
        let encoding = applePay["encoding"] as? String ?? "hex"
        guard encoding == "hex" || encoding == "base64" else {
            return error(.badRequest, "invalid_parameter", "encoding must be hex or base64", location: "body", key: "encoding")
        }
        var decoded: [String: Data] = [:]
        for key in ["leaf_cert", "subordinate_cert", "nonce", "nonce_signature"] {
            guard let text = applePay[key] as? String, !text.isEmpty else {
                return error(.badRequest, "missing_parameter", "\(key) is required", location: "body", key: key)
            }
            let bytes = encoding == "hex" ? Data(hex: text) : Data(base64Encoded: text)
            guard let bytes else {
                return error(.badRequest, "invalid_parameter", "\(key) is not valid \(encoding)", location: "body", key: key)
            }
            if key.hasSuffix("_cert"), !SimulatorHTTP.looksLikeDER(bytes) {
                return error(.badRequest, "invalid_parameter", "\(key) is not a DER certificate", location: "body", key: key)
            }
            decoded[key] = bytes
        }
        // Not documented: the OpenAPI lists 200, 400, 401 and 500 only. An unknown account and a
        // reused Idempotency-Key (below) are the simulator's own answers, so the gateway's mapping
        // of statuses Bridge never promised is exercised (as `upstream_rejected`).
        guard accounts.contains(Account(customerID: customerID, cardAccountID: cardAccountID)) else {
            return error(.notFound, "not_found", "Card account not found", location: "path", key: "cardAccountID")
        }
        let fingerprint = "\(customerID)/\(cardAccountID)/" + SHA256.hash(data: SimulatorHTTP.canonicalJSON(body)).description
        guard let fields = payloadFields(leaf: decoded["leaf_cert"]!, nonce: decoded["nonce"]!, nonceSignature: decoded["nonce_signature"]!,
                                         card: cards[cardAccountID] ?? .testVisa) else {
            return error(.badRequest, "invalid_parameter", "leaf_cert does not carry a P-256 key", location: "body", key: "leaf_cert")
        }
        guard let answer = await replays.answer(key: idempotencyKey, fingerprint: fingerprint, fresh: fields) else {
            return error(.unprocessableContent, "idempotency_key_reused", "Idempotency-Key was used with another request",
                         location: "header", key: "Idempotency-Key")
        }
        return SimulatorHTTP.json(.ok, ["wallet_provider": "apple_pay", "apple_pay": answer])
    }

    /// Google Pay: `google_pay.client_wallet_account_id` and `client_device_id`, both required;
    /// answers `opaque_payment_card` (base64url, as Bridge may send it).
    private func googlePay(_ body: [String: Any], customerID: String, cardAccountID: String, idempotencyKey: String) async -> Response {
        guard let googlePay = body["google_pay"] as? [String: Any] else {
            return error(.badRequest, "missing_parameter", "google_pay is required", location: "body", key: "google_pay")
        }
        var ids: [String: String] = [:]
        for key in ["client_wallet_account_id", "client_device_id"] {
            guard let value = googlePay[key] as? String, !value.isEmpty else {
                return error(.badRequest, "missing_parameter", "\(key) is required", location: "body", key: key)
            }
            guard value.count <= Self.maxGoogleIDLength else {
                return error(.badRequest, "invalid_parameter", "\(key) is too long", location: "body", key: key)
            }
            ids[key] = value
        }
        guard accounts.contains(Account(customerID: customerID, cardAccountID: cardAccountID)) else {
            return error(.notFound, "not_found", "Card account not found", location: "path", key: "cardAccountID")
        }
        let opc = SandboxOPC.make(card: cards[cardAccountID] ?? .testVisa, walletAccountID: ids["client_wallet_account_id"]!,
                                  deviceID: ids["client_device_id"]!)
        let text = opc.base64URLEncodedString()
        let fingerprint = "\(customerID)/\(cardAccountID)/" + SHA256.hash(data: SimulatorHTTP.canonicalJSON(body)).description
        guard let answer = await replays.answer(key: idempotencyKey, fingerprint: fingerprint, fresh: ["opaque_payment_card": text]) else {
            return error(.unprocessableContent, "idempotency_key_reused", "Idempotency-Key was used with another request",
                         location: "header", key: "Idempotency-Key")
        }
        return SimulatorHTTP.json(.ok, ["wallet_provider": "google_pay", "google_pay": answer])
    }

    /// Google's ids are short; the simulator refuses longer ones. The bound is the gateway's own
    /// (`BridgeWire`, UNCERTAIN): Bridge's OpenAPI declares no `maxLength` for them.
    static let maxGoogleIDLength = 64

    private func payloadFields(leaf: Data, nonce: Data, nonceSignature: Data, card: DemoCard) -> [String: String]? {
        guard let payload = try? SandboxPayload.make(leafDER: leaf, nonce: nonce, nonceSignature: nonceSignature, card: card) else {
            return nil
        }
        switch responseStyle {
        case .guideExample:
            return ["activation_data": String(decoding: payload.activationData, as: UTF8.self),
                    "encrypted_pass_data": payload.encryptedPassData.base64EncodedString(),
                    "ephemeral_public_key": payload.ephemeralPublicKey.map { String(format: "%02x", $0) }.joined()]
        case .allBase64:
            return ["activation_data": payload.activationData.base64EncodedString(),
                    "encrypted_pass_data": payload.encryptedPassData.base64EncodedString(),
                    "ephemeral_public_key": payload.ephemeralPublicKey.base64EncodedString()]
        }
    }

    private func error(_ status: HTTPResponse.Status, _ code: String, _ message: String, location: String, key: String?) -> Response {
        var source: [String: Any] = ["location": location]
        if let key { source["key"] = key }
        return SimulatorHTTP.json(status, ["code": code, "message": message, "source": source])
    }
}

/// Bridge honours `Idempotency-Key`: the same key with the same request replays the first answer;
/// with another request it is refused (nil).
actor IdempotencyReplays {
    private var answers: [String: (fingerprint: String, fields: [String: String])] = [:]

    func answer(key: String, fingerprint: String, fresh: [String: String]) -> [String: String]? {
        if let stored = answers[key] {
            return stored.fingerprint == fingerprint ? stored.fields : nil
        }
        answers[key] = (fingerprint, fresh)
        return fresh
    }
}
