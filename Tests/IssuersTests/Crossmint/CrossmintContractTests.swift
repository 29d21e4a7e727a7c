import Foundation
import Issuers
import ProvisioningCore
import Sandbox
import Testing

@Suite struct CrossmintContractTests {
    static let card = CardRecord(id: "card_1", program: "demo", issuer: "crossmint", issuerReference: .init(["issuer_card_id": "cm 1/x"]))

    static func connector(apiKey: String = "cm_key") -> ConnectorScenarios.MakeConnector {
        { url, http in CrossmintConnector(issuer: "crossmint", baseURL: url, apiKey: Sensitive(apiKey), http: http) }
    }

    @Test func theSimulatorAcceptsTheConnectorsRequest() async throws {
        let simulator = CrossmintSimulator(apiKey: "cm_key", cardIDs: ["cm 1/x"])
        let payload = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("crossmint") { http in
                try await Self.connector()(url, http)
                    .provisionApplePay(try Fixtures.deviceRequest(), card: Self.card, context: Fixtures.context())
            }
        }
        #expect(payload.ephemeralPublicKey.value.count == 65)
        let requests = await simulator.log.requests
        #expect(requests.count == 1 && requests.first?.method == "GET" && requests.first?.status == 200)
    }

    /// UPSTREAMS.md, Crossmint: the path and `X-API-KEY` are the guide's; how the device data
    /// travels on a GET is ASSUMED there ("UNCERTAIN ... Assume query parameters `certificate`
    /// (leaf), `nonce`, `nonceSignature`, each base64url without padding"). This checks that
    /// assumption is what is sent.
    @Test func theRequestHasTheAssumedShape() async throws {
        let (_, captured) = try await ConnectorScenarios.replay(
            status: .ok, body: try Fixtures.data("crossmint-apple-pay-payload-response.json"), card: Self.card, make: Self.connector())
        #expect(captured.method == "GET")
        // The card id is one percent-encoded path segment, whatever it contains.
        #expect(captured.path == "/cards/cm%201%2Fx/apple-pay-payload")
        #expect(captured.header("X-API-KEY") == "cm_key")
        #expect(captured.body.isEmpty)
        let items = URLComponents(string: "http://x/?\(captured.query ?? "")")?.queryItems ?? []
        let query = Dictionary(uniqueKeysWithValues: items.map { ($0.name, $0.value ?? "") })
        #expect(Set(query.keys) == ["certificate", "nonce", "nonceSignature"])
        let device = try Fixtures.deviceRequest()
        #expect(BinaryEncoding.base64URL.decode(query["certificate"]!) == device.leafCertificate.value)
        #expect(BinaryEncoding.base64URL.decode(query["nonce"]!) == device.nonce.value)
        #expect(BinaryEncoding.base64URL.decode(query["nonceSignature"]!) == device.nonceSignature.value)
    }

    @Test func theDocumentedResponseDecodesToTheExpectedBytes() async throws {
        try await ConnectorScenarios.documentedResponseDecodes(fixture: "crossmint-apple-pay-payload-response.json",
                                                               card: Self.card, make: Self.connector())
    }

    @Test(arguments: [(401, GatewayError.Code.upstreamAuthFailed), (404, .upstreamRejected), (500, .upstreamUnavailable)])
    func errorsMapToUnifiedCodes(status: Int, code: GatewayError.Code) async throws {
        try await ConnectorScenarios.errorMaps(status: status, body: try Fixtures.data("crossmint-error-401.json"), to: code,
                                               card: Self.card, make: Self.connector())
    }

    @Test func malformedAnswersAreProtocolErrors() async throws {
        let badKey = #"{"encryptedPassData":"AAAA","activationData":"AAAA","ephemeralPublicKey":"not base64 at all!"}"#
        try await ConnectorScenarios.malformedAnswersAreProtocolErrors(ConnectorScenarios.garbageBodies + [badKey],
                                                                       card: Self.card, make: Self.connector())
    }

    @Test(.enabled(if: LiveUpstream.crossmint != nil,
                   "live Crossmint test skipped: set CROSSMINT_BASE_URL, CROSSMINT_API_KEY and CROSSMINT_CARD_ID"))
    func liveCrossmintAnswersInTheDocumentedShape() async throws {
        let live = try #require(LiveUpstream.crossmint)
        let card = CardRecord(id: "live", program: "live", issuer: "crossmint", issuerReference: .init(["issuer_card_id": live.reference[0]]))
        let request = try LiveUpstream.deviceRequest("CROSSMINT")
        try await withUpstreamHTTP("crossmint", requestMS: 15_000) { http in
            let connector = CrossmintConnector(issuer: "crossmint", baseURL: live.baseURL, apiKey: Sensitive(live.key), http: http)
            // Crossmint documents no error answer (UPSTREAMS.md): only a payload proves the contract.
            let error = await gatewayError { try await connector.provisionApplePay(request, card: card, context: Fixtures.context()) }
            LiveVerdict.expectDocumentedAnswer(error, issuer: "crossmint", documentedRejections: [])
        }
    }
}
