import Foundation
import HTTPTypes
import Issuers
import ProvisioningCore
import Sandbox
import Testing

/// TMP's `tokens/activations`: `{"tokenUniqueReference"}` in, `issuerMobileAppAuthResponse` out,
/// where only APPROVED is an activation and any other HTTP status than 200 is a failure.
struct TMPTokenActivationContractTests {
    static let reference = "DWSPMC000000000132d72d4fcb2f4136a0532d3093ff1a45"

    func activate(status: HTTPResponse.Status = .ok, body: Data, reference: String = reference) async throws
        -> (Result<TokenActivationResult, GatewayError>, CapturedRequest?)
    {
        try await withReplay(status: status, body: body) { url, capture in
            let result: Result<TokenActivationResult, GatewayError>
            do {
                let value = try await withUpstreamHTTP("tmp") { http in
                    try await TMPContractTests.connector()(url, http)
                        .activateToken(try TokenActivationRequest(tokenUniqueReference: reference), card: nil, context: Fixtures.context())
                }
                result = .success(value)
            } catch let error as GatewayError {
                result = .failure(error)
            }
            return (result, await capture.requests.first)
        }
    }

    @Test func theDocumentedExchange() async throws {
        let (result, captured) = try await activate(body: try Fixtures.data("tmp-token-activation-response.json"))
        let answer = try result.get()
        #expect(answer == TokenActivationResult(outcome: .approved, tokenUniqueReference: Self.reference, cardLast4: "1234",
                                                comment: "Token activated"))
        let request = try #require(captured)
        #expect(request.method == "POST" && request.path == "/issuer/push-provisioning/tokens/activations")
        #expect(request.header("Authorization") == "Bearer tmp_token")
        #expect(try JSONSerialization.jsonObject(with: request.body) as? [String: String] == ["tokenUniqueReference": Self.reference])
    }

    @Test(arguments: [("DECLINED", TokenActivationResult.Outcome.declined), ("FAILED", .failed), ("APPROVED", .approved)])
    func eachDocumentedStatusIsItsOutcome(status: String, outcome: TokenActivationResult.Outcome) async throws {
        let body = Data(#"{"tokenUniqueReference":"\#(Self.reference)","issuerMobileAppAuthResponse":"\#(status)"}"#.utf8)
        #expect(try await activate(body: body).0.get().outcome == outcome)
    }

    @Test(arguments: ["PENDING", "approved", "", "APPROVED "])
    func anUndocumentedStatusIsAnErrorNeverAnApproval(status: String) async throws {
        let body = Data(#"{"tokenUniqueReference":"\#(Self.reference)","issuerMobileAppAuthResponse":"\#(status)"}"#.utf8)
        guard case .failure(let error) = try await activate(body: body).0 else {
            Issue.record("\(status) was read as an answer")
            return
        }
        #expect(error.code == .upstreamProtocolError)
    }

    @Test(arguments: [(201, GatewayError.Code.upstreamProtocolError), (400, .upstreamRejected), (401, .upstreamAuthFailed),
                      (500, .upstreamUnavailable), (503, .upstreamUnavailable)])
    func anyStatusButTwoHundredIsAFailure(status: Int, code: GatewayError.Code) async throws {
        // Even with an APPROVED body: the HTTP status decides first.
        let (result, _) = try await activate(status: .init(code: status), body: try Fixtures.data("tmp-token-activation-response.json"))
        guard case .failure(let error) = result else {
            Issue.record("HTTP \(status) was read as an answer")
            return
        }
        #expect(error.code == code)
    }

    @Test func anAnswerForAnotherTokenIsRefused() async throws {
        let body = Data(#"{"tokenUniqueReference":"DWSPMC0000000009","issuerMobileAppAuthResponse":"APPROVED"}"#.utf8)
        guard case .failure(let error) = try await activate(body: body).0 else {
            Issue.record("an approval for another token was accepted")
            return
        }
        #expect(error.code == .upstreamProtocolError)
    }

    @Test(arguments: [("DWSPMC0001", "approved"), ("DECLINE-7", "declined"), ("FAIL-7", "failed")])
    func theSimulatorProducesEachOutcomeByPrefix(reference: String, outcome: String) async throws {
        let simulator = TMPSimulator(token: "tmp_token", cardIDs: ["tmp_1"])
        let result = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("tmp") { http in
                try await TMPContractTests.connector()(url, http)
                    .activateToken(try TokenActivationRequest(tokenUniqueReference: reference), card: nil, context: Fixtures.context())
            }
        }
        #expect(result.outcome.rawValue == outcome)
        #expect(result.tokenUniqueReference == reference)
    }

    @Test func theTMPGooglePayRequestReachesTheSimulator() async throws {
        let simulator = TMPSimulator(token: "tmp_token", cardIDs: ["tmp_1"])
        let payload = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("tmp") { http in
                try await TMPContractTests.connector()(url, http).provisionGooglePay(
                    try GooglePayProvisioningRequest(walletAccountID: "w1", deviceID: "d1"), card: TMPContractTests.card,
                    context: Fixtures.context())
            }
        }
        #expect(!payload.opaquePaymentCard.value.isEmpty)
        #expect(payload.lastDigits?.count == 4 && payload.network != nil && payload.userAddress?.country == "US")
    }
}
