import Foundation
import GatewayTestSupport
import Gateway
import GatewayServer
import HummingbirdTesting
import ProvisioningCore
import Sandbox
import Testing
import WalletCrypto

/// Marqeta and Lithic through the unified API, end to end against their sandbox simulators: Apple
/// Pay payloads the device's own key opens, Google Pay opaque cards, the device type reaching
/// Marqeta, no resend of a request that may have arrived, and the config's required app version.
@Suite struct MarqetaLithicFlowTests {
    @Test(arguments: [("card_marqeta_demo", "marqeta", "5105105105105100"), ("card_lithic_demo", "lithic", "4012888888881881")])
    func applePayProvisionsAPayloadTheDeviceOpens(card: String, issuer: String, number: String) async throws {
        let device = try SandboxDevice.make()
        let nonce = Data((0..<4).map { _ in UInt8.random(in: 0...255) })
        let nonceSignature = Data((0..<64).map { _ in UInt8.random(in: 0...255) })
        let body = try JSONSerialization.data(withJSONObject: [
            "certificates": [device.leafDER.base64EncodedString(), device.subordinateDER.base64EncodedString()],
            "nonce": nonce.base64EncodedString(), "nonce_signature": nonceSignature.base64EncodedString(),
        ])
        try await GatewayHarness.run { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: card, body: body)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(response.json["issuer"] as? String == issuer)
            let payload = ECCV2.Payload(
                encryptedPassData: try #require((response.json["encrypted_pass_data"] as? String).flatMap { Data(base64Encoded: $0) }),
                ephemeralPublicKey: try #require((response.json["ephemeral_public_key"] as? String).flatMap { Data(base64Encoded: $0) }))
            let pass = try JSONDecoder().decode(PassPlaintext.self, from: try ECCV2.decrypt(payload, with: try #require(device.leafPrivateKey)))
            #expect(pass.primaryAccountNumber == number)
            #expect(pass.nonce == nonce.map { String(format: "%02x", $0) }.joined())
            #expect((response.json["activation_data"] as? String).flatMap { Data(base64Encoded: $0) }?.isEmpty == false)

            // It travelled to its own simulator and no other.
            let instance = try #require(sandbox.instance(issuer: issuer))
            #expect(await instance.log.requests.map(\.status) == [issuer == "marqeta" ? 201 : 200])
            for other in ["bridge", "tmp", "crossmint", "marqeta", "lithic"] where other != issuer {
                #expect(await sandbox.instance(issuer: other)?.log.count == 0, "\(other)")
            }
            let events = try await ResilienceTests.events(client, response)
            #expect(events.map { $0["issuer"] as? String } == [issuer])
            #expect(events.first?["outcome"] as? String == "succeeded")
        }
    }

    @Test(arguments: [("card_marqeta_demo", "marqeta"), ("card_lithic_demo", "lithic")])
    func googlePayProvisionsThroughTheCardsIssuer(card: String, issuer: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let response = try await WalletFlowTests.googlePay(client, card: card, json: WalletFlowTests.ids)
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let json = response.json
            #expect(json["issuer"] as? String == issuer)
            let opc = try #require((json["opaque_payment_card"] as? String).flatMap(WalletFlowTests.opaqueCard))
            #expect(opc.count > 16)
            if issuer == "marqeta" {
                // Marqeta's push_tokenize_request_data carries Android's display fields.
                #expect(json["last_digits"] as? String == "5100")
                #expect(json["network"] as? String == "MASTERCARD" && json["token_service_provider"] as? String == "MASTERCARD")
                #expect((json["user_address"] as? [String: Any])?["postal_code"] as? String == "94105")
                #expect(await sandbox.marqeta.seen.deviceTypes == ["MOBILE_PHONE"])
            } else {
                #expect(json["last_digits"] == nil)
            }
            #expect(await sandbox.instance(issuer: issuer)?.log.count == 1)
            let events = try await ResilienceTests.events(client, response)
            #expect(events.map { $0["wallet"] as? String } == ["google_pay"])
        }
    }

    /// The unified `device.type` reaches Marqeta as its `device_type`, and the config's
    /// `wire.provisioning_app_version` as `provisioning_app_version`.
    @Test func theDeviceTypeAndAppVersionReachMarqeta() async throws {
        try await GatewayHarness.run { client, sandbox in
            var body = try GatewayHarness.requestJSON()
            for device: [String: String] in [["type": "phone"], ["type": "watch", "primary_account_identifier": "V-3018253329239943005544"],
                                              ["type": "tablet"]] {
                body["device"] = device
                let response = try await GatewayHarness.provision(client, card: "card_marqeta_demo",
                                                                  body: try JSONSerialization.data(withJSONObject: body))
                #expect(response.status == .ok, "\(String(buffer: response.body))")
            }
            // The request's own app version wins; a bad one is the caller's 400, with no call.
            body["device"] = ["type": "phone", "app_version": "5.0.1"]
            let own = try await GatewayHarness.provision(client, card: "card_marqeta_demo", body: try JSONSerialization.data(withJSONObject: body))
            #expect(own.status == .ok, "\(String(buffer: own.body))")
            body["device"] = ["type": "phone", "app_version": String(repeating: "9", count: 51)]
            let tooLong = try await GatewayHarness.provision(client, card: "card_marqeta_demo", body: try JSONSerialization.data(withJSONObject: body))
            #expect(tooLong.status == .badRequest && (tooLong.json["detail"] as? String)?.contains("device.app_version") == true)
            #expect(await sandbox.marqeta.seen.deviceTypes == ["MOBILE_PHONE", "WATCH", "TABLET", "MOBILE_PHONE"])
            #expect(await sandbox.marqeta.seen.appVersions == ["1.0.0", "1.0.0", "1.0.0", "5.0.1"])
            #expect(await sandbox.marqeta.log.count == 4)
        }
    }

    /// Neither takes an idempotency key: a reset after the request arrived is not resent, nor is a
    /// 503 (a proxy in front of the issuer answers one after the request reached it), while a 429
    /// (throttled: nothing was done) is.
    @Test(arguments: ["marqeta", "lithic"])
    func aRequestThatMayHaveArrivedIsNeverSentAgain(issuer: String) async throws {
        let card = "card_\(issuer)_demo"
        try await GatewayHarness.run { client, sandbox in
            let faults = try #require(sandbox.faults(issuer: issuer))
            await faults.add(Fault(mode: .reset))
            let reset = try await GatewayHarness.provision(client, card: card, body: try GatewayHarness.requestBody())
            #expect(reset.status == .serviceUnavailable)
            #expect(reset.json["code"] as? String == "upstream_unavailable")
            #expect(await sandbox.instance(issuer: issuer)?.log.count == 1)

            await faults.add(Fault(mode: .unavailable))
            let unavailable = try await GatewayHarness.provision(client, card: card, body: try GatewayHarness.requestBody())
            #expect(unavailable.status == .serviceUnavailable && unavailable.json["retryable"] as? Bool == false)
            #expect(await sandbox.instance(issuer: issuer)?.log.count == 2)

            await faults.add(Fault(mode: .throttled, retryAfterSeconds: 0))
            let retried = try await GatewayHarness.provision(client, card: card, body: try GatewayHarness.requestBody())
            #expect(retried.status == .ok, "\(String(buffer: retried.body))")
            #expect(await sandbox.instance(issuer: issuer)?.log.count == 4)
        }
    }

    /// The sandbox file without Marqeta's app version does not start: the problem names its key path.
    @Test func aMarqetaIssuerWithoutItsAppVersionIsAConfigError() throws {
        let original = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
        let line = try #require(original.split(separator: "\n", omittingEmptySubsequences: false)
            .first { $0.contains("provisioning_app_version:") })
        let directory = TestDirectories.root.appendingPathComponent("gateway-mq-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("gateway.yaml")
        let without = original.replacingOccurrences(of: "    wire:\n" + String(line) + "\n", with: "")
        #expect(without != original)
        try without.write(to: file, atomically: true, encoding: .utf8)
        do {
            _ = try ConfigLoader.load(path: file.path)
            Issue.record("the file loaded without issuers.marqeta.wire.provisioning_app_version")
        } catch {
            #expect(error.problems.map(\.path).contains("issuers.marqeta.wire.provisioning_app_version"), "\(error.problems)")
        }
    }
}
