import Foundation
import Hummingbird
import Logging

/// TMP's `signed-cards` endpoint, read from TMP's integration notes: camelCase `cardId`,
/// `certificate` (leaf), `nonce`, `nonceSignature`, all base64; answers `activationData`,
/// `ephemeralPublicKey`, `encryptedData`.
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

    private func error(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        SimulatorHTTP.json(status, ["errorCode": code, "errorMessage": message])
    }
}
