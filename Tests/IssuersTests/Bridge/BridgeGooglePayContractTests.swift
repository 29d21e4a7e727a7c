import Foundation
import Issuers
import ProvisioningCore
import Sandbox
import Testing

/// Bridge's Google Pay request: the same endpoint as Apple Pay with `wallet_provider: google_pay`
/// and Google's two ids; the answer's `opaque_payment_card` ("A Base64-encoded or
/// Base64url-encoded opaque string", the OpenAPI) is passed on exactly as Bridge wrote it.
struct BridgeGooglePayContractTests {
    static let request = try! GooglePayProvisioningRequest(walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d")

    @Test func theRequestHasTheDocumentedShapeAndTheAnswerDecodes() async throws {
        let (payload, captured) = try await withReplay(status: .ok, body: try Fixtures.data("bridge-google-pay-response.json")) { url, capture in
            let payload = try await withUpstreamHTTP("bridge") { http in
                try await BridgeContractTests.connector()(url, http)
                    .provisionGooglePay(Self.request, card: BridgeContractTests.card, context: Fixtures.context(id: "prv_g1"))
            }
            return (payload, try #require(await capture.requests.first))
        }
        #expect(captured.method == "POST")
        #expect(captured.path.hasSuffix("/create_mobile_wallet_provisioning_request"))
        #expect(captured.header("Api-Key") == "bridge_key" && captured.header("Idempotency-Key") == "prv_g1")
        let sent = try #require(try JSONSerialization.jsonObject(with: captured.body) as? [String: Any])
        #expect(sent["wallet_provider"] as? String == "google_pay")
        #expect(sent["google_pay"] as? [String: String]
            == ["client_wallet_account_id": "WLT-2bB8p0e7LmQ", "client_device_id": "hw-6c1f0a9e2d"])
        #expect(sent["apple_pay"] == nil)
        // The fixture's base64url without padding, passed on as it is: the phone hands Google that text.
        let answer = try #require(try JSONSerialization.jsonObject(with: try Fixtures.data("bridge-google-pay-response.json")) as? [String: Any])
        let written = try #require((answer["google_pay"] as? [String: Any])?["opaque_payment_card"] as? String)
        #expect(written.contains("-") || written.contains("_") || !written.hasSuffix("="), "the fixture is no longer base64url")
        #expect(payload.opaquePaymentCard.value == written)
        #expect(payload.displayName == nil && payload.lastDigits == nil)
    }

    @Test func theSimulatorAcceptsTheConnectorsRequest() async throws {
        let simulator = BridgeContractTests.simulator()
        let payload = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("bridge") { http in
                try await BridgeContractTests.connector()(url, http)
                    .provisionGooglePay(Self.request, card: BridgeContractTests.card, context: Fixtures.context())
            }
        }
        #expect(payload.opaquePaymentCard.value.count > 16)
        #expect(await simulator.log.requests.map(\.status) == [200])
    }

    /// The 64-character cap is the gateway's own (`BridgeWire.maxGoogleIDLength`): Bridge documents
    /// no length for these ids. Over it, the request is refused before calling.
    @Test func idsOverTheGatewaysOwnCapForBridgeAreRefusedBeforeCalling() async throws {
        let long = try GooglePayProvisioningRequest(walletAccountID: String(repeating: "w", count: 65), deviceID: "d1")
        let (error, calls) = try await withReplay(status: .ok, body: try Fixtures.data("bridge-google-pay-response.json")) { url, capture in
            let error = await gatewayError {
                try await withUpstreamHTTP("bridge") { http in
                    try await BridgeContractTests.connector()(url, http)
                        .provisionGooglePay(long, card: BridgeContractTests.card, context: Fixtures.context())
                }
            }
            return (error, await capture.requests.count)
        }
        #expect(error?.code == .issuerLimitExceeded)
        #expect(error?.detail.contains("wallet_account_id") == true)
        #expect(calls == 0)
    }

    @Test func anEmptyOpaqueCardIsAProtocolError() async throws {
        let body = Data(#"{"wallet_provider":"google_pay","google_pay":{"opaque_payment_card":""}}"#.utf8)
        let error = try await withReplay(status: .ok, body: body) { url, _ in
            await gatewayError {
                try await withUpstreamHTTP("bridge") { http in
                    try await BridgeContractTests.connector()(url, http)
                        .provisionGooglePay(Self.request, card: BridgeContractTests.card, context: Fixtures.context())
                }
            }
        }
        #expect(error?.code == .upstreamProtocolError)
    }
}
