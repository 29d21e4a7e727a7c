import Foundation
import Gateway
import GatewayServer
import ProvisioningCore
import Testing

/// Per-issuer capabilities ops set: `issuers.<name>.wallets` narrows what an issuer is used for,
/// `issuers.<name>.paused` and the admin pause/resume routes stop every call to it.
@Suite struct IssuerCapabilityTests {
    static let opsKey = GatewayHarness.opsKey

    static func adminIssuer(_ client: GatewayClient, _ name: String) async throws -> [String: Any] {
        let view = try await CardRegistryAPITests.send(client, .get, "/v1/admin/issuers", key: Self.opsKey)
        return try #require((view.json["issuers"] as? [[String: Any]])?.first { $0["issuer"] as? String == name })
    }

    static func securityEvents(_ client: GatewayClient, kind: String) async throws -> [[String: Any]] {
        let response = try await CardRegistryAPITests.send(client, .get, "/v1/admin/audit?kind=\(kind)", key: Self.opsKey)
        return try #require(response.json["events"] as? [[String: Any]])
    }

    @Test func anIssuerNarrowedToOneWalletRefusesTheOtherWithoutACall() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.issuers["bridge"]!.wallets = [.applePay]
        config.issuers["tmp"]!.wallets = [.googlePay]
        try await GatewayHarness.run(config: config) { client, sandbox in
            let google = try await WalletFlowTests.googlePay(client, card: "card_bridge_demo", json: WalletFlowTests.ids)
            #expect(google.status == .unprocessableContent)
            #expect(google.json["code"] as? String == "wallet_not_supported")
            #expect((google.json["detail"] as? String)?.contains("issuers.bridge.wallets") == true)
            #expect(await sandbox.bridge.log.count == 0)
            let events = try await ResilienceTests.events(client, google)
            #expect(events.map { $0["attempt"] as? Int } == [0])

            let apple = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(apple.status == .ok)
            #expect(await sandbox.bridge.log.count == 1)

            // TMP narrowed to Google Pay: Apple Pay is refused, token activation is no wallet and goes through.
            let tmpApple = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
            #expect(tmpApple.status == .unprocessableContent && tmpApple.json["code"] as? String == "wallet_not_supported")
            #expect(await sandbox.tmp.log.count == 0)
            let activation = try await WalletFlowTests.activate(client, #"{"token_unique_reference":"DWSPMC0000000002","card_id":"card_tmp_demo"}"#)
            #expect(activation.status == .ok, "\(String(buffer: activation.body))")
            #expect(await sandbox.tmp.log.count == 1)

            #expect(try await Self.adminIssuer(client, "bridge")["wallets"] as? [String] == ["apple_pay"])
            #expect(try await Self.adminIssuer(client, "crossmint")["wallets"] as? [String] == ["apple_pay"])
            #expect(try await Self.adminIssuer(client, "tmp")["wallets"] as? [String] == ["google_pay"])
        }
    }

    /// TMP documents Apple Pay only (UPSTREAMS.md, TMP: "Google Pay through signed-cards is NOT
    /// documented anywhere and must stay off unless ops opt in").
    @Test func tmpServesGooglePayOnlyWhenItsWalletsAskForIt() async throws {
        var config = try GatewayHarness.sandboxConfig()
        #expect(config.issuers["tmp"]?.wallets == [.applePay, .googlePay], "the sandbox opts in explicitly")
        config.issuers["tmp"]!.wallets = nil
        try await GatewayHarness.run(config: config) { client, sandbox in
            let google = try await WalletFlowTests.googlePay(client, card: "card_tmp_demo", json: WalletFlowTests.ids)
            #expect(google.status == .unprocessableContent)
            #expect(google.json["code"] as? String == "wallet_not_supported")
            #expect(await sandbox.tmp.log.count == 0)
            let apple = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
            #expect(apple.status == .ok, "\(String(buffer: apple.body))")
            #expect(try await Self.adminIssuer(client, "tmp")["wallets"] as? [String] == ["apple_pay"])
        }
        // Opted in (as the sandbox file does), Google Pay goes to TMP.
        try await GatewayHarness.run { client, sandbox in
            let google = try await WalletFlowTests.googlePay(client, card: "card_tmp_demo", json: WalletFlowTests.ids)
            #expect(google.status == .ok, "\(String(buffer: google.body))")
            #expect(await sandbox.tmp.log.count == 1)
        }
    }

    /// A card still registered to an issuer the configuration no longer has (removed or renamed
    /// in the file) is an ops problem, answered as one: 503 naming the missing issuer, not 422
    /// `wallet_not_supported`, for provisioning and token routes alike.
    @Test func aCardWhoseIssuerIsNoLongerConfiguredIsAnOpsProblem() async throws {
        let retired = CardRecord(id: "card_retired", program: "demo", issuer: "retired",
                                 issuerReference: .init(["issuer_card_id": "r_1"]))
        try await GatewayHarness.run(extraCards: [retired]) { client, _ in
            let provisioned = try await GatewayHarness.provision(client, card: "card_retired", body: try GatewayHarness.requestBody())
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_retired")
            for response in [provisioned, listed] {
                #expect(response.status == .serviceUnavailable, "\(String(buffer: response.body))")
                #expect(response.json["code"] as? String == "upstream_unavailable")
                #expect((response.json["detail"] as? String)?.contains("issuers.retired") == true)
            }
        }
    }

    @Test func anIssuerPausedInTheConfigGetsNoCallAndAnswersARetryable503() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.issuers["bridge"]!.paused = true
        try await GatewayHarness.run(config: config) { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .serviceUnavailable)
            #expect(response.json["code"] as? String == "upstream_unavailable")
            #expect(response.json["retryable"] as? Bool == true)
            #expect((response.json["detail"] as? String)?.contains("paused") == true)
            #expect(await sandbox.bridge.log.count == 0)
            let events = try await ResilienceTests.events(client, response)
            #expect(events.map { $0["attempt"] as? Int } == [0])
            #expect(events.first?["error_code"] as? String == "upstream_unavailable")

            // Only Bridge is paused.
            let tmp = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
            #expect(tmp.status == .ok)

            let bridge = try await Self.adminIssuer(client, "bridge")
            #expect(bridge["paused"] as? Bool == true && bridge["paused_by"] as? String == "config")
            #expect(try await Self.adminIssuer(client, "tmp")["paused"] as? Bool == false)
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_issuer_paused{issuer="bridge"} 1"#))
            #expect(metrics.contains(#"gateway_issuer_paused{issuer="tmp"} 0"#))
        }
    }

    @Test func adminsPauseAndResumeAnIssuerAndEachIsASecurityEvent() async throws {
        try await GatewayHarness.run { client, sandbox in
            let body = try GatewayHarness.requestBody()
            // Admin clients only; an unknown issuer is 404.
            let refused = try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/bridge/pause")
            #expect(refused.status == .forbidden && refused.json["code"] as? String == "forbidden")
            let unknown = try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/stripe/pause", key: Self.opsKey)
            #expect(unknown.status == .notFound && unknown.json["code"] as? String == "not_found")
            // The local issuer is enabled, yet has no pause: said as such, not as unconfigured.
            let local = try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/local/pause", key: Self.opsKey)
            #expect(local.status == .notFound && (local.json["detail"] as? String)?.contains("it has no pause") == true, "\(local.json)")
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            #expect(await sandbox.bridge.log.count == 1)

            let paused = try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/bridge/pause", key: Self.opsKey)
            #expect(paused.status == .ok, "\(String(buffer: paused.body))")
            #expect(paused.json["issuer"] as? String == "bridge")
            #expect(paused.json["paused"] as? Bool == true && paused.json["paused_by"] as? String == "ops")
            let failed = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            #expect(failed.status == .serviceUnavailable && failed.json["code"] as? String == "upstream_unavailable")
            #expect(await sandbox.bridge.log.count == 1)

            // A non-admin cannot resume it either.
            let notResumed = try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/bridge/resume")
            #expect(notResumed.status == .forbidden)
            #expect(try await Self.adminIssuer(client, "bridge")["paused"] as? Bool == true)

            let resumed = try await CardRegistryAPITests.send(client, .post, "/v1/admin/issuers/bridge/resume", key: Self.opsKey)
            #expect(resumed.status == .ok)
            #expect(resumed.json["paused"] as? Bool == false && resumed.json["paused_by"] as? String == "ops")
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            #expect(await sandbox.bridge.log.count == 2)

            let pauses = try await Self.securityEvents(client, kind: "issuer_paused")
            #expect(pauses.count == 1)
            #expect(pauses.first?["actor"] as? String == "ops")
            #expect((pauses.first?["detail"] as? [String: Any])?["issuer"] as? String == "bridge")
            let resumes = try await Self.securityEvents(client, kind: "issuer_resumed")
            #expect(resumes.map { $0["actor"] as? String } == ["ops"])
            #expect((resumes.first?["detail"] as? [String: Any])?["was_paused"] as? String == "true")
        }
    }

    @Test func aPausedIssuerFallsBackToLocalWhenTheRouteSaysSo() async throws {
        let config = try ResilienceTests.config { config in
            config.issuers["bridge"]!.paused = true
            config.routing.rules = [RoutingRuleConfig(match: .init(program: "demo"), issuer: "bridge", fallback: "local")]
        }
        try await GatewayHarness.run(config: config) { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(response.json["issuer"] as? String == "local")
            #expect(await sandbox.bridge.log.count == 0)
            let events = try await ResilienceTests.events(client, response)
            // Bridge, not called, is on the trail first: its code, no endpoint, no status, 0 ms.
            #expect(events.map { $0["issuer"] as? String } == ["bridge", "local"])
            #expect(events.map { $0["attempt"] as? Int } == [1, 2])
            #expect(events.map { $0["outcome"] as? String } == ["failed", "succeeded"])
            #expect(events.map { $0["error_code"] as? String } == ["upstream_unavailable", nil])
            #expect(events.first?["endpoint"] == nil && events.first?["upstream_status"] == nil && events.first?["latency_ms"] as? Int == 0)
            #expect(events.last?["endpoint"] != nil)
        }
    }
}
