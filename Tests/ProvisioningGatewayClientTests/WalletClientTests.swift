import Foundation
import ProvisioningGatewayClient
import SandboxGateway
import Testing

extension ClientSuites {
    /// The three wallets, the Idempotency-Key and the audit trail through the generated client.
    @Suite struct WalletClientTests {
        @Test func applePayAnswersThePassKitPayloadAndItsAuditTrail() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let pass = try await gateways.demo.provisionApplePay(card: "card_bridge_demo", try SandboxServer.applePayRequest())
                #expect(pass.issuer == "bridge")
                #expect(Data(base64Encoded: pass.ephemeralPublicKey)?.count == 65)
                #expect(Data(base64Encoded: pass.ephemeralPublicKey)?.first == 0x04)
                #expect((Data(base64Encoded: pass.encryptedPassData)?.count ?? 0) > 16)
                #expect(Data(base64Encoded: pass.activationData)?.isEmpty == false)
                #expect(await sandbox.bridge.log.count == 1)

                // getProvisioning: one attempt at bridge, succeeded, under apple_pay.
                let trail = try await gateways.demo.provisioning(pass.provisioningId)
                #expect(trail.provisioningId == pass.provisioningId)
                #expect(trail.events.map(\.wallet) == ["apple_pay"])
                #expect(trail.events.map(\.issuer) == ["bridge"])
                #expect(trail.events.map(\.outcome) == [.succeeded])
                #expect(trail.events.map(\.cardId) == ["card_bridge_demo"])
                #expect(trail.events.first?.clientId == "demo")

                let unknown = await problem { try await gateways.demo.provisioning("prv_nothing") }
                #expect(unknown?.status == 404 && unknown?.code == "not_found")
                // Another client's provisioning is not found either.
                let foreign = await problem { try await gateways.other.provisioning(pass.provisioningId) }
                #expect(foreign?.status == 404 && foreign?.code == "not_found")
            }
        }

        /// The request schema is a oneOf (base64 or hex; a phone/tablet or a watch device): the
        /// generated enum picks the variant, and each variant provisions.
        @Test func theRequestVariantsOfTheOneOfsProvision() async throws {
            let hex = { (text: Any?) in Data(base64Encoded: text as! String)!.map { String(format: "%02x", $0) }.joined() }
            let base64 = try SandboxServer.applePayRequest()
            let hexRequest = try SandboxServer.applePayRequest { json in
                json["certificates"] = (json["certificates"] as! [String]).map(hex)
                json["nonce"] = hex(json["nonce"])
                json["nonce_signature"] = hex(json["nonce_signature"])
                json["encoding"] = "hex"
            }
            let watch = try SandboxServer.applePayRequest { $0["device"] = ["type": "watch", "primary_account_identifier": "V-3018253329239943005544"] }
            guard case .ApplePayBase64Request(let plain) = base64, case .ApplePayHexRequest = hexRequest,
                  case .ApplePayBase64Request(let forWatch) = watch else {
                Issue.record("the oneOf picked the wrong variant")
                return
            }
            guard case .PhoneOrTabletDevice = plain.device, case .WatchDevice = forWatch.device else {
                Issue.record("the device oneOf picked the wrong variant")
                return
            }
            try await SandboxServer.run { (gateways, sandbox) async throws in
                #expect(try await gateways.demo.provisionApplePay(card: "card_tmp_demo", hexRequest).issuer == "tmp")
                #expect(try await gateways.demo.provisionApplePay(card: "card_marqeta_demo", watch).issuer == "marqeta")
                #expect(try await gateways.demo.provisionApplePay(card: "card_marqeta_demo", base64).issuer == "marqeta")
                #expect(await sandbox.marqeta.seen.deviceTypes == ["WATCH", "MOBILE_PHONE"])
                let trail = try await gateways.demo.provisioning(try await gateways.demo.provisionApplePay(card: "card_marqeta_demo", watch).provisioningId)
                #expect(trail.events.map(\.deviceType) == ["watch"])
            }
        }

        @Test func anIdempotencyKeyReplaysTheAnswerAndRefusesAnotherBody() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let request = try SandboxServer.applePayRequest()
                let key = "order-\(UUID().uuidString)"
                let first = try await gateways.demo.provisionApplePay(card: "card_tmp_demo", request, idempotencyKey: key)
                let replay = try await gateways.demo.provisionApplePay(card: "card_tmp_demo", request, idempotencyKey: key)
                #expect(replay.provisioningId == first.provisioningId)
                #expect(replay.encryptedPassData == first.encryptedPassData)
                #expect(await sandbox.tmp.log.count == 1, "a replay makes no call")
                let trail = try await gateways.demo.provisioning(first.provisioningId)
                #expect(trail.events.map(\.outcome) == [.succeeded, .replayed])

                // The same key with another body (another nonce) is another request: refused, not replayed.
                let other = try SandboxServer.applePayRequest { $0["nonce"] = "AAECAw==" }
                let reused = await problem { try await gateways.demo.provisionApplePay(card: "card_tmp_demo", other, idempotencyKey: key) }
                #expect(reused?.status == 422)
                #expect(reused?.code == "idempotency_key_reused")
                #expect(reused?.retryable == false)
                // And for another card too.
                let elsewhere = await problem { try await gateways.demo.provisionApplePay(card: "card_bridge_demo", request, idempotencyKey: key) }
                #expect(elsewhere?.code == "idempotency_key_reused")
                #expect(await sandbox.tmp.log.count == 1)
                #expect(await sandbox.bridge.log.count == 0)
            }
        }

        @Test func googlePayAnswersTheOpaqueCardAndDisplayFields() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let answer = try await gateways.demo.provisionGooglePay(card: "card_tmp_demo", walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d")
                #expect(answer.issuer == "tmp")
                #expect((Data(base64Encoded: answer.opaquePaymentCard)?.count ?? 0) > 16)
                #expect(answer.lastDigits == "4444")
                #expect(await sandbox.tmp.log.count == 1)
                // Crossmint has no Google Pay: refused before any call.
                let refused = await problem {
                    try await gateways.demo.provisionGooglePay(card: "card_crossmint_demo", walletAccountID: "w", deviceID: "d")
                }
                #expect(refused?.status == 422 && refused?.code == "wallet_not_supported" && refused?.retryable == false)
                #expect(await sandbox.crossmint.log.count == 0)
            }
        }

        @Test func samsungPayPassesTheIssuersPayloadThrough() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let answer = try await gateways.demo.raw.provisionSamsungPay(
                    path: .init(cardId: "card_marqeta_demo"), headers: .init(idempotencyKey: "spay-1"),
                    body: .json(.init(walletAccountId: "SPAY-7f3a9c", deviceId: "sp-dev-41e2"))
                ).checked().ok.body.json
                #expect(answer.issuer == "marqeta")
                #expect(answer.provisionPayload == (await sandbox.marqeta.seen.samsungPayloads.first))
                #expect(answer.lastDigits == "5100")
                #expect(answer.displayName?.isEmpty == false)
                // The same key again: the stored answer, without the cardholder's name, and no call.
                let replay = try await gateways.demo.raw.provisionSamsungPay(
                    path: .init(cardId: "card_marqeta_demo"), headers: .init(idempotencyKey: "spay-1"),
                    body: .json(.init(walletAccountId: "SPAY-7f3a9c", deviceId: "sp-dev-41e2"))
                ).checked().ok.body.json
                #expect(replay.provisioningId == answer.provisioningId && replay.provisionPayload == answer.provisionPayload)
                #expect(replay.displayName == nil && replay.lastDigits == "5100")
                #expect(await sandbox.marqeta.seen.samsungPayloads.count == 1, "a replay makes no call")
                let trail = try await gateways.demo.provisioning(answer.provisioningId)
                #expect(trail.events.map(\.outcome) == [.succeeded, .replayed])
                let refused = await problem {
                    try await gateways.demo.raw.provisionSamsungPay(
                        path: .init(cardId: "card_bridge_demo"), body: .json(.init(walletAccountId: "w", deviceId: "d"))).checked()
                }
                #expect(refused?.code == "wallet_not_supported")
            }
        }

        @Test func walletTokensAreListedSuspendedResumedAndDeactivated() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let demo = gateways.demo
                let listed = try await demo.raw.listWalletTokens(path: .init(cardId: "card_marqeta_demo")).checked().ok.body.json
                #expect(listed.tokens.map(\.status) == [.active, .active])
                #expect(listed.tokens.map(\.wallet) == [.applePay, .googlePay])
                #expect(listed.tokens.allSatisfy { $0.issuer == "marqeta" && $0.tokenUniqueReference?.isEmpty == false })
                let token = try #require(listed.tokens.first?.tokenId)

                let suspended = try await demo.raw.suspendWalletToken(path: .init(cardId: "card_marqeta_demo", tokenId: token)).checked().ok.body.json
                #expect(suspended.action == .suspend && suspended.outcome == .applied && suspended.status == .suspended)
                #expect(suspended.tokenId == token && suspended.issuer == "marqeta")
                #expect(try await demo.walletTokens(card: "card_marqeta_demo").first?.status == .suspended)
                let resumed = try await demo.raw.resumeWalletToken(path: .init(cardId: "card_marqeta_demo", tokenId: token)).checked().ok.body.json
                #expect(resumed.action == .resume && resumed.status == .active)
                let ended = try await demo.transition(card: "card_marqeta_demo", token: token, .deactivate)
                #expect(ended.action == .deactivate && ended.status == .deactivated)
                #expect(await sandbox.marqeta.tokens.transitions.map(\.state) == ["SUSPENDED", "ACTIVE", "TERMINATED"])

                // Another card's token: 404 token_not_found, nothing sent.
                let unknown = await problem { try await demo.transition(card: "card_marqeta_demo", token: "dwt-9-someone-else", .suspend) }
                #expect(unknown?.status == 404 && unknown?.code == "token_not_found")
                #expect(await sandbox.marqeta.tokens.transitions.count == 3)
                // An issuer without token management.
                let unsupported = await problem { try await demo.walletTokens(card: "card_bridge_demo") }
                #expect(unsupported?.status == 422 && unsupported?.code == "operation_not_supported")
            }
        }

        @Test func aTokenIsActivatedFromTheIssuersApp() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let approved = try await gateways.demo.raw.activateToken(
                    body: .json(.init(tokenUniqueReference: "DWSPMC000000000132d72d4fcb2f4136a0532d3093ff1a45", cardId: "card_tmp_demo"))
                ).checked().ok.body.json
                #expect(approved.result == .approved)
                #expect(approved.issuer == "tmp")
                #expect(approved.tokenUniqueReference == "DWSPMC000000000132d72d4fcb2f4136a0532d3093ff1a45")
                #expect(approved.cardLast4 == "4444")
                let declined = try await gateways.demo.raw.activateToken(body: .json(.init(tokenUniqueReference: "DECLINE-000132d72d4fcb2f")))
                    .checked().ok.body.json
                #expect(declined.result == .declined)
                #expect(await sandbox.tmp.log.count == 2)
                let refused = await problem {
                    try await gateways.demo.raw.activateToken(body: .json(.init(tokenUniqueReference: "DWSPMC1", cardId: "card_bridge_demo"))).checked()
                }
                #expect(refused?.status == 422 && refused?.code == "operation_not_supported")
            }
        }
    }
}
