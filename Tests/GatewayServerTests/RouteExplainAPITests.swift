import Foundation
import GatewayServer
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import Testing

/// `GET /v1/admin/routes/explain` against a live sandbox gateway.
struct RouteExplainAPITests {
    static func explain(_ client: GatewayClient, card: String, wallet: String = "apple_pay",
                        key: String = GatewayHarness.opsKey) async throws -> GatewayResponse {
        try await CardRegistryAPITests.send(client, .get, "/v1/admin/routes/explain?card_id=\(card)&wallet=\(wallet)", key: key)
    }

    /// The sandbox with two rules, and two registry cards that name no issuer.
    static func routedConfig() throws -> GatewayConfig {
        var config = try GatewayHarness.sandboxConfig()
        config.routing.rules = [
            RoutingRuleConfig(match: .init(cardIDPrefix: "card_routed_", wallet: .applePay), issuer: "tmp", deadlineMS: 9_000),
            RoutingRuleConfig(match: .init(program: "acme"), issuer: "crossmint"),
        ]
        return config
    }

    static let routedCards = [
        CardRecord(id: "card_routed_1", program: "demo", issuer: nil, issuerReference: .init(["issuer_card_id": "tmp_routed_1"])),
    ]

    @Test func theCardsExplicitIssuerDecides() async throws {
        try await GatewayHarness.run(config: try Self.routedConfig(), extraCards: Self.routedCards) { client, _ in
            let response = try await Self.explain(client, card: "card_bridge_demo")
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            let answer = response.json
            #expect(answer["issuer"] as? String == "bridge")
            #expect(answer["decided_by"] as? String == "card")
            #expect(answer["rule"] == nil)
            #expect(answer["fallback"] == nil)
            #expect(answer["deadline_ms"] as? Int == 15_000)
            #expect((answer["rules_checked"] as? [[String: Any]])?.compactMap { $0["matched"] as? Bool } == [false, false])
            let endpoints = try #require(answer["endpoints"] as? [[String: Any]])
            #expect(endpoints.count == 1)
            #expect(endpoints.first?["breaker"] as? String == "closed")
            #expect((endpoints.first?["url"] as? String)?.isEmpty == false)
        }
    }

    /// The local issuer encrypts Apple Pay only: a route to it for another wallet says so, as an
    /// upstream's does (it said nothing, and the provisioning answered `wallet_not_supported`);
    /// it has no pause state.
    @Test func aRouteToTheLocalIssuerSaysWhichWalletsItServes() async throws {
        try await GatewayHarness.run { client, _ in
            for (wallet, supported) in [("apple_pay", true), ("google_pay", false), ("samsung_pay", false)] {
                let answer = try await Self.explain(client, card: "card_local_demo", wallet: wallet).json
                #expect(answer["issuer"] as? String == "local", "\(answer)")
                #expect(answer["wallet_supported"] as? Bool == supported, "\(wallet): \(answer)")
                #expect(answer["paused"] == nil, "\(answer)")
            }
        }
    }

    @Test func aRuleMatchNamesTheRuleAndWhyEarlierOnesDidNot() async throws {
        try await GatewayHarness.run(config: try Self.routedConfig(), extraCards: Self.routedCards) { client, _ in
            let matched = try await Self.explain(client, card: "card_routed_1").json
            #expect(matched["issuer"] as? String == "tmp")
            #expect(matched["decided_by"] as? String == "rule")
            let rule = try #require(matched["rule"] as? [String: Any])
            #expect(rule["index"] as? Int == 0)
            #expect((rule["match"] as? [String: Any])?["card_id_prefix"] as? String == "card_routed_")
            #expect(matched["deadline_ms"] as? Int == 9_000)
            let endpoints = try #require(matched["endpoints"] as? [[String: Any]])
            #expect(!endpoints.isEmpty && endpoints.allSatisfy { $0["breaker"] as? String == "closed" })

            // Google Pay: the first rule wants apple_pay, the second another program; nothing routes it.
            let unmatched = try await Self.explain(client, card: "card_routed_1", wallet: "google_pay").json
            #expect(unmatched["issuer"] == nil)
            #expect(unmatched["decided_by"] as? String == "none")
            #expect((unmatched["endpoints"] as? [Any])?.isEmpty == true)
            let checked = try #require(unmatched["rules_checked"] as? [[String: Any]])
            #expect(checked.map { $0["mismatches"] as? [String] } == [
                ["wallet is google_pay, the rule wants apple_pay"], ["program is demo, the rule wants acme"],
            ])
        }
    }

    @Test func anOpenBreakerShowsOnTheIssuersEndpoints() async throws {
        let config = try FailoverTests.twoEndpoints(first: "sandbox://bridge/primary")
        try await GatewayHarness.run(config: config) { client, _ in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","endpoint":0,"mode":"unavailable","count":100}"#)
            // Two 503s open the primary's breaker; the request is served by the second endpoint.
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()).status == .ok)
            let answer = try await Self.explain(client, card: "card_bridge_demo").json
            let endpoints = try #require(answer["endpoints"] as? [[String: Any]])
            #expect(endpoints.map { $0["breaker"] as? String } == ["open", "closed"])
            #expect(endpoints.first?["open_until"] is String)
        }
    }

    @Test func aPausedIssuerIsShownPausedWithWhoPausedIt() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.issuers["tmp"]?.paused = true
        config.issuers["crossmint"]?.wallets = [.applePay]
        try await GatewayHarness.run(config: config) { client, _ in
            // The file paused tmp; an admin pauses bridge through the API.
            let byFile = try await Self.explain(client, card: "card_tmp_demo").json
            #expect(byFile["issuer"] as? String == "tmp")
            #expect(byFile["paused"] as? Bool == true)
            #expect(byFile["paused_by"] as? String == "config")

            let running = try await Self.explain(client, card: "card_bridge_demo").json
            #expect(running["paused"] as? Bool == false)
            let pause = try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/bridge/pause", key: GatewayHarness.opsKey)
            #expect(pause.status == .ok)
            let paused = try await Self.explain(client, card: "card_bridge_demo").json
            #expect(paused["paused"] as? Bool == true)
            #expect(paused["paused_by"] as? String == "ops")
            #expect(paused["wallet_supported"] as? Bool == true)

            // An issuer narrowed to Apple Pay is shown as not used for Google Pay.
            let narrowed = try await Self.explain(client, card: "card_crossmint_demo", wallet: "google_pay").json
            #expect(narrowed["issuer"] as? String == "crossmint")
            #expect(narrowed["wallet_supported"] as? Bool == false)
        }
    }

    @Test func onlyAdminClientsWithGoodParameters() async throws {
        try await GatewayHarness.run { client, _ in
            let forbidden = try await Self.explain(client, card: "card_bridge_demo", key: GatewayHarness.demoKey)
            #expect(forbidden.status == .forbidden)
            let unknown = try await Self.explain(client, card: "card_nobody")
            #expect(unknown.status == .notFound)
            #expect(unknown.json["code"] as? String == "card_not_found")
            #expect(try await Self.explain(client, card: "card_bridge_demo", wallet: "paypal").status == .badRequest)
            #expect(try await Self.explain(client, card: "bad%20id").status == .badRequest)
            let missing = try await CardRegistryAPITests.send(client, .get, "/v1/admin/routes/explain?card_id=card_bridge_demo",
                                                              key: GatewayHarness.opsKey)
            #expect(missing.status == .badRequest)
        }
    }
}
