import Foundation
import HTTPTypes
import Gateway
import GatewayServer
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import ProvisioningGatewayClient
import Testing

/// Google Pay push provisioning, token activation and Apple Watch through the unified API, end to
/// end against the sandbox simulators.
struct WalletFlowTests {
    static func googlePay(_ client: GatewayClient, card: String, json: String, key: String = GatewayHarness.demoKey,
                          idempotencyKey: String? = nil) async throws -> GatewayResponse {
        var headers: HTTPFields = [.authorization: "Bearer \(key)", .contentType: "application/json"]
        if let idempotencyKey { headers[HTTPField.Name("Idempotency-Key")!] = idempotencyKey }
        return try await client.execute(uri: "/v1/cards/\(card)/wallet-provisioning/google-pay", method: .post, headers: headers,
                                        body: ByteBuffer(string: json))
    }

    static func activate(_ client: GatewayClient, _ json: String) async throws -> GatewayResponse {
        try await CardRegistryAPITests.send(client, .post, "/v1/token-activations", json: json)
    }

    static let ids = #"{"wallet_account_id":"WLT-2bB8p0e7LmQ","device_id":"hw-6c1f0a9e2d"}"#

    /// A sandbox opaque card's bytes, from base64 or base64url text (the simulators write both).
    static func opaqueCard(_ text: String) -> Data? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard)
    }

    @Test(arguments: [("card_bridge_demo", "bridge"), ("card_tmp_demo", "tmp")])
    func googlePayProvisionsThroughTheCardsIssuer(card: String, issuer: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let gateway = GatewayHarness.gateway(client)
            let answer = try await gateway.provisionGooglePay(card: card, walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d")
            #expect(answer.issuer == issuer)
            // As the issuer wrote it: the Bridge simulator's is base64url, TMP's base64.
            let opc = try #require(Self.opaqueCard(answer.opaquePaymentCard))
            #expect(opc.count > 16)
            if issuer == "tmp" {
                // TMP gives the display fields Android's PushTokenizeRequest takes.
                #expect(answer.lastDigits == "4444")
                #expect(answer.network == "MASTERCARD" && answer.tokenServiceProvider == "MASTERCARD")
                #expect(answer.userAddress?.country == "US")
            } else {
                #expect(answer.lastDigits == nil)
            }
            let instance = try #require(sandbox.instance(issuer: issuer))
            #expect(await instance.log.count == 1)
            let events = try await gateway.provisioning(answer.provisioningId).events
            #expect(events.map(\.wallet) == ["google_pay"])
            #expect(events.first?.outcome == .succeeded)
        }
    }

    @Test(arguments: ["card_crossmint_demo", "card_local_demo"])
    func anIssuerWithoutGooglePayIsRefusedWithoutBeingCalled(card: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let gateway = GatewayHarness.gateway(client)
            do {
                let answer = try await gateway.provisionGooglePay(card: card, walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d")
                Issue.record("provisioned through \(answer.issuer)")
            } catch let problem as GatewayProblem {
                #expect(problem.status == 422)
                #expect(problem.code == "wallet_not_supported")
                // No simulator was called (for the local card as for Crossmint's).
                var calls = 0
                for instance in sandbox.instances.values { calls += await instance.log.count }
                #expect(calls == 0)
                let events = try await gateway.provisioning(try #require(problem.provisioningID)).events
                #expect(events.map(\.attempt) == [0])
                #expect(events.first?.errorCode == "wallet_not_supported")
            }
        }
    }

    @Test func aGooglePayRetryWithTheSameKeyIsReplayed() async throws {
        try await GatewayHarness.run { client, sandbox in
            let gateway = GatewayHarness.gateway(client)
            let first = try await gateway.provisionGooglePay(card: "card_bridge_demo", walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d",
                                                             idempotencyKey: "gp-1")
            let second = try await gateway.provisionGooglePay(card: "card_bridge_demo", walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d",
                                                              idempotencyKey: "gp-1")
            #expect(first.provisioningId == second.provisioningId)
            #expect(first.opaquePaymentCard == second.opaquePaymentCard)
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    @Test func aReplayedGooglePayAnswerKeepsNoPersonalData() async throws {
        try await GatewayHarness.run { client, sandbox in
            let gateway = GatewayHarness.gateway(client)
            let first = try await gateway.provisionGooglePay(card: "card_tmp_demo", walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d",
                                                             idempotencyKey: "gp-tmp")
            let replay = try await gateway.provisionGooglePay(card: "card_tmp_demo", walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d",
                                                              idempotencyKey: "gp-tmp")
            #expect(first.userAddress != nil && first.displayName != nil)
            #expect(replay.userAddress == nil && replay.displayName == nil)
            #expect(replay.opaquePaymentCard == first.opaquePaymentCard)
            #expect(replay.lastDigits == "4444")
            #expect(await sandbox.tmp.log.count == 1)
        }
    }

    /// Within the API's 128 characters but over the gateway's own 64-character cap for Bridge
    /// (Bridge documents no length): 422, refused before calling Bridge.
    @Test func idsOverTheGatewaysCapForBridgeAreRefusedWithoutACall() async throws {
        try await GatewayHarness.run { client, sandbox in
            let json = #"{"wallet_account_id":"\#(String(repeating: "w", count: 65))","device_id":"d1"}"#
            let response = try await Self.googlePay(client, card: "card_bridge_demo", json: json)
            #expect(response.status == .unprocessableContent)
            #expect(response.json["code"] as? String == "issuer_limit_exceeded")
            #expect((response.json["detail"] as? String)?.contains("bridge accepts at most 64") == true)
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    @Test(arguments: [
        (#"{"device_id":"d1"}"#, "wallet_account_id"),
        (#"{"wallet_account_id":"w1"}"#, "device_id"),
        (#"{"wallet_account_id":"","device_id":"d1"}"#, "wallet_account_id"),
        (#"{"wallet_account_id":"\#(String(repeating: "w", count: 129))","device_id":"d1"}"#, "128"),
        (#"{"wallet_account_id":"w 1","device_id":"d1"}"#, "^[!-~]{1,128}$"),
    ])
    func badGooglePayRequestsAreClear400s(json: String, mentions: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let response = try await Self.googlePay(client, card: "card_bridge_demo", json: json)
            #expect(response.status == .badRequest, "\(String(buffer: response.body))")
            #expect(response.json["code"] as? String == "invalid_request")
            #expect((response.json["detail"] as? String)?.contains(mentions) == true, "\(response.json)")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    @Test func anUnknownWalletIsNotFound() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await CardRegistryAPITests.send(
                client, .post, "/v1/cards/card_bridge_demo/wallet-provisioning/paypal", json: Self.ids)
            #expect(response.status == .notFound)
            #expect(response.json["code"] as? String == "not_found")
            #expect(response.headers[.contentType] == "application/problem+json")
        }
    }

    @Test(arguments: [
        ("DWSPMC000000000132d72d4fcb2f4136a0532d3093ff1a45", "card_tmp_demo", "approved"),
        ("DECLINE-000132d72d4fcb2f", "card_tmp_demo", "declined"),
        ("FAIL-000132d72d4fcb2f", "card_tmp_demo", "failed"),
        // Without a card: routing.activations.issuer (tmp in the sandbox) decides.
        ("DWSPMC0000000002", nil, "approved"),
    ] as [(String, String?, String)])
    func eachActivationOutcome(reference: String, card: String?, result: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let gateway = GatewayHarness.gateway(client)
            let answer = try await gateway.raw.activateToken(body: .json(.init(tokenUniqueReference: reference, cardId: card))).checked().ok.body.json
            #expect(answer.result.rawValue == result)
            #expect(answer.issuer == "tmp")
            #expect(answer.tokenUniqueReference == reference)
            #expect(answer.cardLast4 == "4444")
            #expect(await sandbox.tmp.log.requests.map(\.path) == ["/issuer/push-provisioning/tokens/activations"])
            let events = try await gateway.provisioning(answer.provisioningId).events
            #expect(events.map(\.wallet) == ["token_activation"])
        }
    }

    @Test func anUndocumentedActivationStatusIsAnErrorNotAnApproval() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await Self.activate(client, #"{"token_unique_reference":"UNDOCUMENTED-1","card_id":"card_tmp_demo"}"#)
            #expect(response.status == .badGateway)
            #expect(response.json["code"] as? String == "upstream_protocol_error")
            #expect(response.json["result"] == nil)
        }
    }

    @Test func aTMPFailureIsAnErrorNotAnApproval() async throws {
        try await GatewayHarness.run(config: try ResilienceTests.config()) { client, _ in
            try await ResilienceTests.addFault(client, #"{"issuer":"tmp","mode":"rejected","count":1}"#)
            let response = try await Self.activate(client, #"{"token_unique_reference":"DWSPMC0000000003"}"#)
            #expect(response.status == .unprocessableContent)
            #expect(response.json["code"] as? String == "upstream_rejected")
        }
    }

    @Test(arguments: [
        (#"{"card_id":"card_tmp_demo"}"#, 400, "invalid_request"),
        (#"{"token_unique_reference":"","card_id":"card_tmp_demo"}"#, 400, "invalid_request"),
        (#"{"token_unique_reference":"\#(String(repeating: "T", count: 65))"}"#, 400, "invalid_request"),
        (#"{"token_unique_reference":"DWSPMC1","card_id":"card_bridge_demo"}"#, 422, "operation_not_supported"),
        (#"{"token_unique_reference":"DWSPMC1","card_id":"card_nobody"}"#, 404, "card_not_found"),
    ])
    func badActivationsAreClearProblems(json: String, status: Int, code: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let response = try await Self.activate(client, json)
            #expect(Int(response.status.code) == status, "\(String(buffer: response.body))")
            #expect(response.json["code"] as? String == code)
            #expect(await sandbox.tmp.log.count == 0)
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    @Test func anAppleWatchNeedsItsPrimaryAccountIdentifierAndIsAudited() async throws {
        try await GatewayHarness.run { client, sandbox in
            // Refused shapes are sent by hand: the generated client cannot build them.
            var body = try GatewayHarness.requestJSON()
            body["device"] = ["type": "watch"]
            let missing = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try JSONSerialization.data(withJSONObject: body))
            #expect(missing.status == .badRequest)
            #expect((missing.json["detail"] as? String)?.contains("primary_account_identifier") == true)
            // A device type no form takes is told every form's values (it was told "phone, tablet" alone).
            body["device"] = ["type": "WATCH"]
            let shouting = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try JSONSerialization.data(withJSONObject: body))
            #expect(shouting.status == .badRequest)
            #expect((shouting.json["detail"] as? String)?.contains("device.type: must be one of phone, tablet, watch") == true, "\(shouting.json)")
            body["device"] = ["type": "phone", "primary_account_identifier": String(repeating: "x", count: 129)]
            let tooLong = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try JSONSerialization.data(withJSONObject: body))
            #expect(tooLong.status == .badRequest)
            #expect(await sandbox.tmp.log.count == 0)

            // The watch form of the spec's Device, through the generated client.
            let gateway = GatewayHarness.gateway(client)
            let watch = try await gateway.provisionApplePay(card: "card_tmp_demo", try GatewayHarness.applePayRequest {
                $0["device"] = ["type": "watch", "primary_account_identifier": "V-3018253329239943005544"]
            })
            let events = try await gateway.provisioning(watch.provisioningId).events
            #expect(events.map(\.deviceType) == ["watch"])
            #expect(await sandbox.tmp.log.count == 1)
        }
    }

    @Test func activationsAreCountedInTheMetrics() async throws {
        try await GatewayHarness.run { client, _ in
            let gateway = GatewayHarness.gateway(client)
            _ = try await gateway.raw.activateToken(body: .json(.init(tokenUniqueReference: "DECLINE-9"))).checked()
            _ = try await gateway.provisionGooglePay(card: "card_bridge_demo", walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d")
            let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(text.contains(#"gateway_token_activations_total{issuer="tmp",result="declined"} 1"#))
            #expect(text.contains(#"gateway_requests_total{operation="google_pay",outcome="succeeded"} 1"#))
        }
    }
}
