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
        return SimulatorHTTP.json(.ok, ["provisioning_payload": opc.base64EncodedString()])
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
