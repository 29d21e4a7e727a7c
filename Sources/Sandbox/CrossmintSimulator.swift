import ByteText
import Foundation
import Hummingbird
import Logging

/// Crossmint's `GET /api/v1/cards/{cardId}/apple-pay-payload`: the path, `X-API-KEY` and the
/// camelCase base64 answer come from the guide (seed 004). How the device's certificate, nonce and
/// nonce signature travel on a GET the guide does not say: the query parameters `certificate`,
/// `nonce`, `nonceSignature` (base64url, no padding) are this gateway's ASSUMPTION (UPSTREAMS.md,
/// Crossmint, UNCERTAIN), which the simulator enforces so connector and simulator agree on it.
public struct CrossmintSimulator: Sendable {
    public let apiKey: String
    public let cardIDs: Set<String>
    /// Card data by Crossmint card id; others get `DemoCard.testVisa`.
    public let cards: [String: DemoCard]
    public let log = SimulatorLog()
    public let faults = SimulatorFaults()

    public init(apiKey: String, cardIDs: Set<String>, cards: [String: DemoCard] = [:]) {
        self.apiKey = apiKey
        self.cardIDs = cardIDs
        self.cards = cards
    }

    public func server(logger: Logger = Logger(label: "sandbox.crossmint")) -> SimulatorServer {
        SimulatorServer(name: "crossmint-simulator", basePath: "/api/v1", logger: logger, log: log, faults: faults,
                        errorResponse: { status, _, message in error(status, message) }) { router in
        router.get("/api/v1/cards/{cardId}/apple-pay-payload") { request, context in
            payload(request, cardID: SimulatorHTTP.parameter(context, "cardId"))
        }
        }
    }

    private func payload(_ request: Request, cardID: String) -> Response {
        guard SimulatorHTTP.header(request, "X-API-KEY") == apiKey else { return error(.unauthorized, "Unauthorized") }
        let query = request.uri.queryParameters
        var decoded: [String: Data] = [:]
        for name in ["certificate", "nonce", "nonceSignature"] {
            guard let text = query.get(name), !text.isEmpty else { return error(.badRequest, "\(name) is required") }
            guard let bytes = Data(base64URLEncoded: text) else {
                return error(.badRequest, "\(name) must be base64url without padding")
            }
            if name == "certificate", !SimulatorHTTP.looksLikeDER(bytes) {
                return error(.badRequest, "certificate is not a DER certificate")
            }
            decoded[name] = bytes
        }
        guard cardIDs.contains(cardID) else { return error(.notFound, "Card not found") }
        guard let payload = try? SandboxPayload.make(
            leafDER: decoded["certificate"]!, nonce: decoded["nonce"]!, nonceSignature: decoded["nonceSignature"]!,
            card: cards[cardID] ?? .testVisa)
        else { return error(.badRequest, "certificate does not carry a P-256 key") }
        return SimulatorHTTP.json(.ok, [
            "encryptedPassData": payload.encryptedPassData.base64EncodedString(),
            "activationData": payload.activationData.base64EncodedString(),
            "ephemeralPublicKey": payload.ephemeralPublicKey.base64EncodedString(),
        ])
    }

    private func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        SimulatorHTTP.json(status, ["error": true, "message": message])
    }
}
