import Foundation
import Hummingbird
import Logging

/// TMP's `signed-cards` endpoint as the seeds show it: camelCase `cardId`, `certificate` (leaf),
/// `nonce`, `nonceSignature`; answers `activationData`, `ephemeralPublicKey`, `encryptedData`
/// (base64, which the seeds decode). The request's fields are read as base64 too: the working
/// assumption (UPSTREAMS.md, TMP: UNCERTAIN), not a fact of TMP's.
public struct TMPSimulator: Sendable {
    /// The notes do not say how TMP authenticates; the sandbox accepts what the config chooses.
    public enum Auth: Sendable {
        case bearer
        case header(String)
    }

    public let token: String
    public let auth: Auth
    public let cardIDs: Set<String>
    /// Card data by TMP card id; others get `DemoCard.testVisa`.
    public let cards: [String: DemoCard]
    public let log = SimulatorLog()
    public let faults = SimulatorFaults()

    public init(token: String, auth: Auth = .bearer, cardIDs: Set<String>, cards: [String: DemoCard] = [:]) {
        self.token = token
        self.auth = auth
        self.cardIDs = cardIDs
        self.cards = cards
    }

    public func server(logger: Logger = Logger(label: "sandbox.tmp")) -> SimulatorServer {
        SimulatorServer(name: "tmp-simulator", basePath: "", logger: logger, log: log, faults: faults,
                        errorResponse: { error($0, $1, $2) }) { router in
        router.post("/issuer/push-provisioning/signed-cards") { request, _ in
            await signCard(request)
        }
        router.post("/issuer/push-provisioning/tokens/activations") { request, _ in
            await activate(request)
        }
        }
    }

    private func authorized(_ request: Request) -> Bool {
        switch auth {
        case .bearer: SimulatorHTTP.header(request, "Authorization") == "Bearer \(token)"
        case .header(let name): SimulatorHTTP.header(request, name) == token
        }
    }

    private func signCard(_ request: Request) async -> Response {
        guard authorized(request) else { return error(.unauthorized, "UNAUTHORIZED", "Invalid credentials") }
        guard let body = SimulatorHTTP.jsonObject(await SimulatorHTTP.body(request)) else {
            return error(.badRequest, "INVALID_REQUEST", "Body must be a JSON object")
        }
        if body["walletProvider"] as? String == "GOOGLE_PAY" { return googlePay(body) }
        var decoded: [String: Data] = [:]
        for field in ["cardId", "certificate", "nonce", "nonceSignature"] {
            guard let text = body[field] as? String, !text.isEmpty else {
                return error(.badRequest, "MISSING_FIELD", "\(field) is required")
            }
            if field == "cardId" { continue }
            guard let bytes = Data(base64Encoded: text) else {
                return error(.badRequest, "INVALID_FIELD", "\(field) is not base64")
            }
            if field == "certificate", !SimulatorHTTP.looksLikeDER(bytes) {
                return error(.badRequest, "INVALID_FIELD", "certificate is not a DER certificate")
            }
            decoded[field] = bytes
        }
        guard let cardID = body["cardId"] as? String, cardIDs.contains(cardID) else {
            return error(.notFound, "CARD_NOT_FOUND", "Unknown cardId")
        }
        guard let payload = try? SandboxPayload.make(
            leafDER: decoded["certificate"]!, nonce: decoded["nonce"]!, nonceSignature: decoded["nonceSignature"]!,
            card: cards[cardID] ?? .testVisa)
        else { return error(.badRequest, "INVALID_FIELD", "certificate does not carry a P-256 key") }
        return SimulatorHTTP.json(.ok, [
            "activationData": payload.activationData.base64EncodedString(),
            "ephemeralPublicKey": payload.ephemeralPublicKey.base64EncodedString(),
            "encryptedData": payload.encryptedPassData.base64EncodedString(),
        ])
    }

    /// Ids longer than this are refused (TMP's limit is not documented; MDES and Google ids fit).
    static let maxIDLength = 64

    private func googlePay(_ body: [String: Any]) -> Response {
        var ids: [String: String] = [:]
        for field in ["cardId", "clientWalletAccountId", "clientDeviceId"] {
            guard let value = body[field] as? String, !value.isEmpty else { return error(.badRequest, "MISSING_FIELD", "\(field) is required") }
            guard value.count <= Self.maxIDLength else { return error(.badRequest, "INVALID_FIELD", "\(field) is too long") }
            ids[field] = value
        }
        guard cardIDs.contains(ids["cardId"]!) else { return error(.notFound, "CARD_NOT_FOUND", "Unknown cardId") }
        let card = cards[ids["cardId"]!] ?? .testVisa
        let network = SandboxOPC.network(card)
        return SimulatorHTTP.json(.ok, [
            "opaquePaymentCard": SandboxOPC.make(card: card, walletAccountID: ids["clientWalletAccountId"]!,
                                                 deviceID: ids["clientDeviceId"]!).base64EncodedString(),
            "displayName": "\(card.name) •••• \(card.number.suffix(4))",
            "lastDigits": String(card.number.suffix(4)),
            "network": network,
            "tokenServiceProvider": network,
            "userAddress": ["name": card.name, "address1": "1 Sandbox Way", "city": "San Francisco", "state": "CA",
                            "postalCode": "94105", "country": "US", "phone": "4155550100"],
        ])
    }

    /// Token activation, deterministic by the reference's prefix so the sandbox shows every outcome:
    /// `DECLINE...` -> DECLINED, `FAIL...` -> FAILED, `UNDOCUMENTED...` -> a status TMP does not
    /// document (`PENDING`), anything else -> APPROVED.
    private func activate(_ request: Request) async -> Response {
        guard authorized(request) else { return error(.unauthorized, "UNAUTHORIZED", "Invalid credentials") }
        guard let body = SimulatorHTTP.jsonObject(await SimulatorHTTP.body(request)) else {
            return error(.badRequest, "INVALID_REQUEST", "Body must be a JSON object")
        }
        guard let reference = body["tokenUniqueReference"] as? String, !reference.isEmpty else {
            return error(.badRequest, "MISSING_FIELD", "tokenUniqueReference is required")
        }
        guard reference.count <= Self.maxIDLength else { return error(.badRequest, "INVALID_FIELD", "tokenUniqueReference is too long") }
        let status: String
        let comment: String
        switch reference.uppercased() {
        case let value where value.hasPrefix("DECLINE"): (status, comment) = ("DECLINED", "The cardholder could not be verified")
        case let value where value.hasPrefix("FAIL"): (status, comment) = ("FAILED", "The token could not be activated")
        case let value where value.hasPrefix("UNDOCUMENTED"): (status, comment) = ("PENDING", "Not a documented status")
        default: (status, comment) = ("APPROVED", "Token activated")
        }
        let last4 = cards.keys.sorted().first.flatMap { cards[$0] }.map { String($0.number.suffix(4)) } ?? "1111"
        return SimulatorHTTP.json(.ok, [
            "tokenUniqueReference": reference, "cardLast4Digits": last4, "issuerMobileAppAuthResponse": status, "comment": comment,
        ])
    }

    private func error(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        SimulatorHTTP.json(status, ["errorCode": code, "errorMessage": message])
    }
}
