import ByteText
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

    /// The spec's hex form of the request (either case of hex digits), through the generated
    /// client: the issuer received the same bytes, which the device proves by opening the pass
    /// (sealed to its leaf's key) and finding its own nonce and nonce signature inside.
    @Test(arguments: [("card_tmp_demo", "tmp"), ("card_bridge_demo", "bridge")])
    func hexEncodedRequestsWorkToo(card: String, issuer: String) async throws {
        let device = try SandboxDevice.make()
        let nonce = Data((0..<4).map { _ in UInt8.random(in: 0...255) })
        let nonceSignature = Data((0..<64).map { _ in UInt8.random(in: 0...255) })
        let request = ProvisioningGateway.ApplePayRequest.ApplePayHexRequest(.init(
            certificates: [device.leafDER.lowercaseHex, device.subordinateDER.lowercaseHex],
            nonce: nonce.lowercaseHex,
            nonceSignature: nonceSignature.lowercaseHex.uppercased(),
            encoding: .hex))
        try await GatewayHarness.run { client, sandbox in
            let answer = try await GatewayHarness.gateway(client).provisionApplePay(card: card, request)
            #expect(answer.issuer == issuer)
            #expect(await sandbox.instance(issuer: issuer)?.log.requests.map(\.status) == [200])
            let payload = ECCV2.Payload(
                encryptedPassData: try #require(Data(base64Encoded: answer.encryptedPassData)),
                ephemeralPublicKey: try #require(Data(base64Encoded: answer.ephemeralPublicKey)))
            let pass = try JSONDecoder().decode(PassPlaintext.self, from: try ECCV2.decrypt(payload, with: try #require(device.leafPrivateKey)))
            #expect(pass.nonce == nonce.lowercaseHex)
            #expect(pass.nonceSignature == nonceSignature.lowercaseHex)
        }
    }

    @Test func healthAndTheSpecAreServed() async throws {
        try await GatewayHarness.run { client, _ in
            let probes = GatewayHarness.gateway(client).raw
            #expect(try await probes.getHealth().ok.body.json.status == .ok)
            #expect(try await probes.getReadiness().checked().ok.body.json.status == .ready)
            // The document is an operation of its own, byte for byte the file.
            let spec = try await probes.getContract().ok.body.yaml
            let onDisk = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Sources/ProvisioningAPI/openapi.yaml"), encoding: .utf8)
            #expect(try await String(collecting: spec, upTo: 1 << 22) == onDisk)
            let raw = try await client.execute(uri: "/openapi.yaml", method: .get)
            #expect(raw.status == .ok && raw.headers[.contentType] == "application/yaml")
        }
    }

    @Test func theRequestIDIsEchoedAndNamedInProblems() async throws {
        try await GatewayHarness.run { client, _ in
            // The spec's X-Request-Id parameter, sent by the generated client: the problem names it.
            let ticket = "support-ticket-\(Int.random(in: 1...99_999))"
            do {
                _ = try await GatewayHarness.gateway(client).raw.getCard(path: .init(cardId: "card_nobody"), headers: .init(xRequestId: ticket)).checked()
                Issue.record("an unknown card was found")
            } catch let problem as GatewayProblem {
                #expect(problem.code == "card_not_found")
                #expect(problem.requestID == ticket)
            }
            // The response header echoes it; a value the spec says is replaced gets a generated id.
            let echoed = try await client.execute(uri: "/healthz", method: .get, headers: [.init("X-Request-Id")!: ticket])
            #expect(echoed.headers[.init("X-Request-Id")!] == ticket)
            for unusable in ["has space", String(repeating: "a", count: 65), "semi;colon"] {
                let replaced = try await client.execute(
                    uri: "/v1/cards/card_nobody", method: .get,
                    headers: [.init("X-Request-Id")!: unusable, .authorization: "Bearer \(GatewayHarness.demoKey)"])
                let id = try #require(replaced.headers[.init("X-Request-Id")!])
                #expect(id != unusable && id.hasPrefix("req_"))
                #expect(replaced.json["request_id"] as? String == id)
            }
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
        let request = try GatewayHarness.applePayRequest {
            $0 = ["certificates": [device.leafDER.base64EncodedString(), device.subordinateDER.base64EncodedString()],
                  "nonce": nonce.base64EncodedString(), "nonce_signature": nonceSignature.base64EncodedString()]
        }
        try await GatewayHarness.run { client, _ in
            let answer = try await GatewayHarness.gateway(client).provisionApplePay(card: card, request)
            let payload = ECCV2.Payload(
                encryptedPassData: try #require(Data(base64Encoded: answer.encryptedPassData)),
                ephemeralPublicKey: try #require(Data(base64Encoded: answer.ephemeralPublicKey)))
            let plaintext = try ECCV2.decrypt(payload, with: try #require(device.leafPrivateKey))
            let pass = try JSONDecoder().decode(PassPlaintext.self, from: plaintext)
            #expect(pass.primaryAccountNumber == number)
            #expect(pass.nonce == nonce.map { String(format: "%02x", $0) }.joined())
            #expect(pass.nonceSignature == nonceSignature.map { String(format: "%02x", $0) }.joined())
            #expect(pass.expiration.count == 5 && pass.expiration.contains("/"))
        }
    }
}
