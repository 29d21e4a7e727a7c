import Crypto
import Foundation
import Logging
import GatewayTestSupport
import Gateway
import GatewayServer
import Hummingbird
import HummingbirdTesting
import ProvisioningCore
import Sandbox
import Testing
import WalletCrypto
import X509

@Suite struct LocalIssuerTests {
    /// The sandbox config, also trusting `device`'s root.
    static func config(trusting device: SandboxDevice) throws -> GatewayConfig {
        var config = try GatewayHarness.sandboxConfig()
        let root = TestDirectories.root.appendingPathComponent("root-\(UUID().uuidString).pem")
        try device.root.serializeAsPEM().pemString.write(to: root, atomically: true, encoding: .utf8)
        config.trust.anchors.append(root.path)
        return config
    }

    static func body(_ device: SandboxDevice, nonce: Data) throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "certificates": [device.leafDER.base64EncodedString(), device.subordinateDER.base64EncodedString()],
            "nonce": nonce.base64EncodedString(), "nonce_signature": Data(repeating: 7, count: 64).base64EncodedString(),
        ])
    }

    static func open(_ json: [String: Any], with key: P256.KeyAgreement.PrivateKey) throws -> PassPlaintext {
        let payload = ECCV2.Payload(
            encryptedPassData: try #require((json["encrypted_pass_data"] as? String).flatMap { Data(base64Encoded: $0) }),
            ephemeralPublicKey: try #require((json["ephemeral_public_key"] as? String).flatMap { Data(base64Encoded: $0) }))
        return try JSONDecoder().decode(PassPlaintext.self, from: ECCV2.decrypt(payload, with: key))
    }

    @Test func theREADMEsRequestProvisionsTheLocalDemoCard() async throws {
        let keyPEM = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Config/sandbox/device-leaf-key.pem"), encoding: .utf8)
        let leafKey = try P256.KeyAgreement.PrivateKey(pemRepresentation: keyPEM)
        let request = try GatewayHarness.requestJSON()
        let nonceHex = Data(base64Encoded: request["nonce"] as! String)!.map { String(format: "%02x", $0) }.joined()
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_local_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .ok)
            #expect(response.json["issuer"] as? String == "local")
            #expect((response.json["activation_data"] as? String).flatMap { Data(base64Encoded: $0) }?.count == 32)
            let pass = try Self.open(response.json, with: leafKey)
            #expect(pass.primaryAccountNumber == "4242424242424242")
            #expect(pass.expiration == "09/30")
            #expect(pass.nonce == nonceHex)
        }
    }

    @Test func aFreshTrustedDeviceDecryptsTheLocalCard() async throws {
        let device = try SandboxDevice.make()
        let nonce = Data([0xca, 0xfe, 0xba, 0xbe])
        try await GatewayHarness.run(config: try Self.config(trusting: device)) { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_local_demo", body: try Self.body(device, nonce: nonce))
            #expect(response.status == .ok)
            let pass = try Self.open(response.json, with: try #require(device.leafPrivateKey))
            #expect(pass.primaryAccountNumber == "4242424242424242" && pass.nonce == "cafebabe")
        }
    }

    @Test(arguments: [
        (SandboxDevice.Flaw.expiredLeaf, "certificates[0] is expired or not yet valid"),
        (.missingMarker, "lacks the Apple Pay marker extension"),
        (.leafNotP256, "not a P-256 key"),
        (.wrongSignature, "certificates[0]'s signature does not verify with the key of certificates[1]"),
        (.leafNotForKeyAgreement, "not for key agreement"),
    ])
    func aBrokenChainIsRefusedWithItsReason(flaw: SandboxDevice.Flaw, reason: String) async throws {
        let device = try SandboxDevice.make(flaw: flaw)
        try await GatewayHarness.run(config: try Self.config(trusting: device)) { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_local_demo", body: try Self.body(device, nonce: Data([1])))
            #expect(response.status == .unprocessableContent)
            #expect(response.json["code"] as? String == "invalid_certificate_chain")
            #expect((response.json["detail"] as? String)?.contains(reason) == true, "\(response.json)")
        }
    }

    @Test func anUntrustedRootIsRefusedBeforeAnUpstreamThatAsksForValidation() async throws {
        let stranger = try SandboxDevice.make()
        var config = try GatewayHarness.sandboxConfig()
        config.issuers["bridge"]?.validateChain = true
        try await GatewayHarness.run(config: config) { client, sandbox in
            let bridge = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try Self.body(stranger, nonce: Data([1])))
            #expect(bridge.status == .unprocessableContent && bridge.json["code"] as? String == "invalid_certificate_chain")
            #expect((bridge.json["detail"] as? String)?.contains("trusted root") == true)
            #expect(await sandbox.bridge.log.count == 0)
            // TMP does not ask for validation: the same chain goes through.
            let tmp = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try Self.body(stranger, nonce: Data([1])))
            #expect(tmp.status == .ok)
        }
    }

    static func configWithBridgeDown(fallback: Bool) throws -> GatewayConfig {
        var yaml = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "sandbox://bridge", with: "http://127.0.0.1:1/v0")
        yaml = yaml.replacingOccurrences(of: "  rules: []\n", with: """
              rules:
                - match: { program: demo }
                  issuer: bridge
            \(fallback ? "      fallback: local\n" : "")
            """)
        yaml = yaml.replacingOccurrences(of: "      api_key: sandbox                 # production: env:BRIDGE_API_KEY",
                                         with: "      api_key: env:TEST_BRIDGE_KEY")
        var config = try ConfigLoader.parse(yaml: yaml, source: "bridge-down.yaml")
        config.baseDirectory = GatewayHarness.packageRoot.appendingPathComponent("Config")
        config.server.port = 0
        return config
    }

    @Test func aDownIssuerFallsBackToLocalWhenTheRouteSaysSo() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        try await GatewayHarness.run(config: try Self.configWithBridgeDown(fallback: true), environment: ["TEST_BRIDGE_KEY": "k"],
                                     logger: logger) { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .ok)
            #expect(response.json["issuer"] as? String == "local")
            let id = try #require(response.json["provisioning_id"] as? String)
            let audit = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)")
            let events = try #require(audit.json["events"] as? [[String: Any]])
            // Bridge's retry policy (3 attempts, its one endpoint refusing connections), then local.
            #expect(events.map { $0["issuer"] as? String } == ["bridge", "bridge", "bridge", "local"])
            #expect(events.map { $0["attempt"] as? Int } == [1, 2, 3, 4])
            #expect(events.map { $0["outcome"] as? String } == ["failed", "failed", "failed", "succeeded"])
            #expect(events.first?["error_code"] as? String == "upstream_unavailable")
            // The success line names who answered, beside the routed issuer.
            let success = captured.lines.filter { $0.contains("apple_pay succeeded") }
            #expect(success.count == 1 && success.allSatisfy { $0.contains("answered_by=local") }, "\(success)")
        }
    }

    @Test func aFallbackWithoutVaultDataAnswersTheIssuersOwnFailure() async throws {
        let card = CardRecord(id: "card_not_vaulted", program: "demo", issuer: "bridge",
                              issuerReference: .init(["customer_id": "cust_not_vaulted", "card_account_id": "ca_not_vaulted"]))
        try await GatewayHarness.run(config: try Self.configWithBridgeDown(fallback: true), extraCards: [card],
                                     environment: ["TEST_BRIDGE_KEY": "k"]) { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_not_vaulted", body: try GatewayHarness.requestBody())
            #expect(response.status == .serviceUnavailable)
            #expect(response.json["code"] as? String == "upstream_unavailable")
            let id = try #require(response.json["provisioning_id"] as? String)
            let audit = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)")
            let events = try #require(audit.json["events"] as? [[String: Any]])
            // Three attempts at Bridge, local's, then the request's own answer (attempt 0): Bridge's failure.
            #expect(events.map { $0["issuer"] as? String } == ["bridge", "bridge", "bridge", "local", "bridge"])
            #expect(events.map { $0["error_code"] as? String }
                == ["upstream_unavailable", "upstream_unavailable", "upstream_unavailable", "card_not_found", "upstream_unavailable"])
            #expect(events.map { $0["attempt"] as? Int } == [1, 2, 3, 4, 0])
        }
    }

    @Test func withoutAFallbackADownIssuerIsUpstreamUnavailable() async throws {
        try await GatewayHarness.run(config: try Self.configWithBridgeDown(fallback: false), environment: ["TEST_BRIDGE_KEY": "k"]) { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .serviceUnavailable)
            #expect(response.json["code"] as? String == "upstream_unavailable" && response.json["retryable"] as? Bool == true)
        }
    }
}
