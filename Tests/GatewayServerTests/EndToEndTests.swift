import Foundation
import Gateway
import GatewayServer
import HummingbirdTesting
import ProvisioningCore
import ProvisioningGatewayClient
import Sandbox
import Testing
import WalletCrypto

@Suite struct EndToEndTests {
    @Test(arguments: [("card_bridge_demo", "bridge"), ("card_tmp_demo", "tmp"), ("card_crossmint_demo", "crossmint")])
    func eachDemoCardProvisionsThroughItsOwnSimulator(card: String, issuer: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            // Through the generated client: a 200 whose JSON decodes as ApplePayProvisioningResponse.
            let answer = try await GatewayHarness.gateway(client).provisionApplePay(card: card, try GatewayHarness.applePayRequest())
            #expect(answer.issuer == issuer)
            #expect(answer.provisioningId.hasPrefix("prv_"))
            let key = try #require(Data(base64Encoded: answer.ephemeralPublicKey))
            #expect(key.count == 65 && key.first == 0x04)
            #expect(Data(base64Encoded: answer.encryptedPassData)?.isEmpty == false)
            #expect(Data(base64Encoded: answer.activationData)?.isEmpty == false)

            // It travelled to its own simulator and no other.
            let counts = [
                "bridge": await sandbox.bridge.log.requests.filter { $0.status == 200 }.count,
                "tmp": await sandbox.tmp.log.requests.filter { $0.status == 200 }.count,
                "crossmint": await sandbox.crossmint.log.requests.filter { $0.status == 200 }.count,
            ]
            #expect(counts == ["bridge": 0, "tmp": 0, "crossmint": 0].merging([issuer: 1]) { $1 })
        }
    }

    @Test func aCardWithoutAnExplicitIssuerFollowsTheRoutingRules() async throws {
        var yaml = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "  rules: []\n", with: """
              rules:
                - match: { card_id_prefix: card_routed_, wallet: apple_pay }
                  issuer: tmp

            """)
        yaml += """
                - card_id: card_routed_1
                  program: demo
                  issuer_reference: { issuer_card_id: tmp_card_routed_1 }

            """
        var config = try ConfigLoader.parse(yaml: yaml, source: "routed.yaml")
        config.baseDirectory = GatewayHarness.packageRoot.appendingPathComponent("Config")
        config.server.port = 0
        try await GatewayHarness.run(config: config) { client, sandbox in
            let answer = try await GatewayHarness.gateway(client).provisionApplePay(card: "card_routed_1", try GatewayHarness.applePayRequest())
            #expect(answer.issuer == "tmp")
            #expect(await sandbox.tmp.log.requests.map(\.status) == [200])
        }
    }

    @Test func bridgeGetsTheProvisioningIDAsItsIdempotencyKey() async throws {
        try await GatewayHarness.run { client, sandbox in
            let answer = try await GatewayHarness.gateway(client).provisionApplePay(card: "card_bridge_demo", try GatewayHarness.applePayRequest())
            #expect(await sandbox.bridge.log.requests.map(\.idempotencyKey) == [answer.provisioningId])
        }
    }

    @Test func hexEncodedRequestsWorkToo() async throws {
        let body = try GatewayHarness.requestJSON()
        let hex = { (text: String) in Data(base64Encoded: text)!.lowercaseHex }
        // The spec's hex form of the request, through the generated client (either case of hex digits).
        let request = ProvisioningGateway.ApplePayRequest.ApplePayHexRequest(.init(
            certificates: (body["certificates"] as! [String]).map(hex),
            nonce: hex(body["nonce"] as! String),
            nonceSignature: hex(body["nonce_signature"] as! String).uppercased(),
            encoding: .hex))
        try await GatewayHarness.run { client, sandbox in
            let answer = try await GatewayHarness.gateway(client).provisionApplePay(card: "card_tmp_demo", request)
            #expect(answer.issuer == "tmp")
            #expect(await sandbox.tmp.log.requests.map(\.status) == [200])
        }
    }

    @Test func healthAndTheSpecAreServed() async throws {
        try await GatewayHarness.run { client, _ in
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok && health.json["status"] as? String == "ok")
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .ok)
            let spec = try await client.execute(uri: "/openapi.yaml", method: .get)
            #expect(spec.status == .ok)
            let onDisk = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Sources/ProvisioningAPI/openapi.yaml"), encoding: .utf8)
            #expect(String(buffer: spec.body) == onDisk)
        }
    }

    @Test func theRequestIDIsEchoedAndNamedInProblems() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await client.execute(
                uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                headers: [.init("X-Request-Id")!: "support-ticket-42"])
            #expect(response.headers[.init("X-Request-Id")!] == "support-ticket-42")
            #expect(response.json["request_id"] as? String == "support-ticket-42")
        }
    }
}

/// As a wallet would: a fresh sandbox device, the gateway, each simulated issuer, and the device's
/// own key opening what came back.
@Suite struct WalletEndToEndTests {
    @Test(arguments: [
        ("card_bridge_demo", "4111111111111111"), ("card_tmp_demo", "5555555555554444"), ("card_crossmint_demo", "4000056655665556"),
    ])
    func theDeviceDecryptsTheCardAndItsNonce(card: String, number: String) async throws {
        let device = try SandboxDevice.make()
        let nonce = Data((0..<4).map { _ in UInt8.random(in: 0...255) })
        let nonceSignature = Data((0..<64).map { _ in UInt8.random(in: 0...255) })
        let body = try JSONSerialization.data(withJSONObject: [
            "certificates": [device.leafDER.base64EncodedString(), device.subordinateDER.base64EncodedString()],
            "nonce": nonce.base64EncodedString(), "nonce_signature": nonceSignature.base64EncodedString(),
        ])
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: card, body: body)
            #expect(response.status == .ok)
            let payload = ECCV2.Payload(
                encryptedPassData: try #require((response.json["encrypted_pass_data"] as? String).flatMap { Data(base64Encoded: $0) }),
                ephemeralPublicKey: try #require((response.json["ephemeral_public_key"] as? String).flatMap { Data(base64Encoded: $0) }))
            let plaintext = try ECCV2.decrypt(payload, with: try #require(device.leafPrivateKey))
            let pass = try JSONDecoder().decode(PassPlaintext.self, from: plaintext)
            #expect(pass.primaryAccountNumber == number)
            #expect(pass.nonce == nonce.map { String(format: "%02x", $0) }.joined())
            #expect(pass.nonceSignature == nonceSignature.map { String(format: "%02x", $0) }.joined())
            #expect(pass.expiration.count == 5 && pass.expiration.contains("/"))
        }
    }
}
