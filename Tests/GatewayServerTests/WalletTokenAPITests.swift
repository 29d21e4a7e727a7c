import Foundation
import GatewayServer
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import Testing

/// Samsung Pay and the wallet-token routes, through issuers that have neither: every refusal is
/// made before any call, and every bad input is a 4xx with its code. (The issuers that have them,
/// Marqeta and Lithic, are exercised in their own flow tests.)
@Suite struct WalletTokenAPITests {
    static let samsungIDs = #"{"wallet_account_id":"SPAY-7f3a9c","device_id":"sp-dev-41e2","device":{"type":"phone"}}"#

    static func samsungPay(_ client: GatewayClient, card: String, json: String = samsungIDs,
                           key: String = GatewayHarness.demoKey) async throws -> GatewayResponse {
        try await CardRegistryAPITests.send(client, .post, "/v1/cards/\(card)/wallet-provisioning/samsung-pay", json: json, key: key)
    }

    static func tokens(_ client: GatewayClient, card: String, key: String = GatewayHarness.demoKey) async throws -> GatewayResponse {
        try await CardRegistryAPITests.send(client, .get, "/v1/cards/\(card)/wallet-tokens", key: key)
    }

    static func transition(_ client: GatewayClient, card: String, token: String, _ action: String,
                           key: String = GatewayHarness.demoKey) async throws -> GatewayResponse {
        try await CardRegistryAPITests.send(client, .post, "/v1/cards/\(card)/wallet-tokens/\(token)/\(action)", key: key)
    }

    @Test func issuersWithoutSamsungPayOrTokenManagementRefuseWithoutACall() async throws {
        try await GatewayHarness.run { client, sandbox in
            for card in ["card_bridge_demo", "card_tmp_demo", "card_crossmint_demo", "card_local_demo"] {
                let samsung = try await Self.samsungPay(client, card: card)
                #expect(samsung.status == .unprocessableContent, "\(card): \(String(buffer: samsung.body))")
                #expect(samsung.json["code"] as? String == "wallet_not_supported", "\(card)")

                let listed = try await Self.tokens(client, card: card)
                #expect(listed.status == .unprocessableContent, "\(card): \(String(buffer: listed.body))")
                #expect(listed.json["code"] as? String == "operation_not_supported", "\(card)")

                var refusals = [("samsung_pay", samsung), ("wallet_tokens", listed)]
                for action in ["suspend", "resume", "deactivate"] {
                    let changed = try await Self.transition(client, card: card, token: "tok_1", action)
                    #expect(changed.status == .unprocessableContent, "\(card) \(action)")
                    #expect(changed.json["code"] as? String == "operation_not_supported", "\(card) \(action)")
                    refusals.append(("token_\(action)", changed))
                }
                // Each refusal is on record under its operation, as attempt 0: no issuer was called.
                for (operation, response) in refusals {
                    let events = try await ResilienceTests.events(client, response)
                    #expect(events.map { $0["wallet"] as? String } == [operation], "\(card) \(operation)")
                    #expect(events.map { $0["attempt"] as? Int } == [0], "\(card) \(operation)")
                }
            }
            #expect(await sandbox.bridge.log.count == 0)
            #expect(await sandbox.tmp.log.count == 0)
            #expect(await sandbox.crossmint.log.count == 0)
        }
    }

    @Test func badInputIsRefusedWithItsCodeAndOtherTenantsCardsDoNotExist() async throws {
        try await GatewayHarness.run { client, _ in
            // Ids the Samsung Pay request must carry, printable and bounded.
            for json in [#"{"device_id":"d"}"#, #"{"wallet_account_id":"w"}"#, #"{"wallet_account_id":"w x","device_id":"d"}"#,
                         #"{"wallet_account_id":"\#(String(repeating: "w", count: 129))","device_id":"d"}"#,
                         #"{"wallet_account_id":"w","device_id":"d","device":{"type":"toaster"}}"#] {
                let refused = try await Self.samsungPay(client, card: "card_bridge_demo", json: json)
                #expect(refused.status == .badRequest, "\(json): \(String(buffer: refused.body))")
                #expect(refused.json["code"] as? String == "invalid_request", "\(json)")
            }
            // A token id outside the path rule.
            let badToken = try await Self.transition(client, card: "card_bridge_demo", token: "tok%20one", "suspend")
            #expect(badToken.status == .badRequest, "\(String(buffer: badToken.body))")
            // Dots alone are path segments to URL tools (and the token id is one of the issuer's
            // path): refused by the rule, as card ids are, not looked up.
            for dots in ["..", "."] {
                let refused = try await Self.transition(client, card: "card_marqeta_demo", token: dots, "deactivate")
                #expect(refused.status == .badRequest && refused.json["code"] as? String == "invalid_request", "\(refused.json)")
                #expect((refused.json["detail"] as? String)?.contains("token_id") == true, "\(refused.json)")
            }
            // Another tenant's card is answered as a card that does not exist.
            let foreign = try await Self.tokens(client, card: GatewayHarness.otherBridgeCard)
            #expect(foreign.status == .notFound)
            #expect(foreign.json["code"] as? String == "card_not_found")
            // Admin clients manage the registry; they do not act on a program's tokens.
            #expect(try await Self.tokens(client, card: "card_bridge_demo", key: GatewayHarness.opsKey).status == .forbidden)
            #expect(try await Self.tokens(client, card: "card_bridge_demo", key: "sk_wrong").status == .unauthorized)
        }
    }
}
