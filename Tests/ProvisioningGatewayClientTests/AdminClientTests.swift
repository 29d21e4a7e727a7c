import Crypto
import Foundation
import GatewayTestSupport
import Gateway
import GatewayServer
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import ProvisioningCore
import ProvisioningGatewayClient
import Testing

extension ClientSuites {
    /// The sandbox fault routes, the admin routes and the probes through the generated client.
    @Suite struct AdminClientTests {
        @Test func faultsAreQueuedListedPlayedAndCleared() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let ops = gateways.ops.raw
                let queued = try await ops.addSandboxFault(body: .json(SandboxFaults.unavailable(issuer: "bridge", count: 3))).checked().ok.body.json
                #expect(queued.faults.count == 1)
                #expect(queued.faults.first?.mode == "unavailable" && queued.faults.first?.remaining == 3)
                #expect(queued.faults.first?.simulator.contains("bridge") == true)
                _ = try await ops.addSandboxFault(body: .json(SandboxFaults.slow(issuer: "tmp", delayMS: 10, count: 2))).checked()
                let listed = try await ops.listSandboxFaults().checked().ok.body.json
                #expect(listed.faults.map(\.mode) == ["unavailable", "slow"] || listed.faults.map(\.mode) == ["slow", "unavailable"])
                #expect(listed.faults.first { $0.mode == "slow" }?.delayMs == 10)

                // Three attempts meet three 503s: a problem with its provisioning id, not retryable
                // (the last 503 may have come from a proxy after Bridge had the request), and the
                // audit trail has the three attempts.
                let failed = await problem { try await gateways.demo.provisionApplePay(card: "card_bridge_demo", try SandboxServer.applePayRequest()) }
                #expect(failed?.status == 503)
                #expect(failed?.code == "upstream_unavailable")
                #expect(failed?.retryable == false)
                let id = try #require(failed?.provisioningID)
                let trail = try await gateways.demo.provisioning(id)
                #expect(trail.events.map(\.attempt) == [1, 2, 3])
                #expect(trail.events.last?.errorCode == "upstream_unavailable")
                #expect(trail.events.map(\.upstreamStatus) == [503, 503, 503])
                #expect(await sandbox.bridge.log.count == 3)

                let health = try await ops.listIssuerHealth().checked().ok.body.json
                let bridge = try #require(health.issuers.first { $0.issuer == "bridge" })
                #expect(bridge.endpoints.first?.failures == 3)
                #expect(bridge.endpoints.first?.breaker == .closed)

                let cleared = try await ops.clearSandboxFaults().checked().ok.body.json
                #expect(cleared.faults.isEmpty)
                #expect(try await ops.listSandboxFaults().checked().ok.body.json.faults.isEmpty)
                // A fault for an issuer that is not configured: 404 not_found.
                let unknown = await problem { try await ops.addSandboxFault(body: .json(SandboxFaults.unavailable(issuer: "nowhere", count: 1))).checked() }
                #expect(unknown?.status == 404 && unknown?.code == "not_found")
            }
        }

        @Test func issuersAreListedPausedAndResumed() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let ops = gateways.ops.raw
                let health = try await ops.listIssuerHealth().checked().ok.body.json
                #expect(health.issuers.map(\.issuer) == ["bridge", "crossmint", "lithic", "marqeta", "tmp"])
                let tmp = try #require(health.issuers.first { $0.issuer == "tmp" })
                #expect(tmp.kind == "tmp" && tmp.paused == false && tmp.pausedBy == "config")
                #expect(tmp.wallets == [.applePay, .googlePay])
                #expect(tmp.retry.maxAttempts == 3)
                #expect(tmp.endpoints.map(\.breaker) == [.closed])

                let paused = try await ops.pauseIssuer(path: .init(name: "bridge")).checked().ok.body.json
                #expect(paused.issuer == "bridge" && paused.paused && paused.pausedBy == "ops")
                // A paused issuer gets no call: a retryable 503 at once.
                let refused = await problem { try await gateways.demo.provisionApplePay(card: "card_bridge_demo", try SandboxServer.applePayRequest()) }
                #expect(refused?.status == 503 && refused?.code == "upstream_unavailable" && refused?.retryable == true)
                #expect(await sandbox.bridge.log.count == 0)

                let resumed = try await ops.resumeIssuer(path: .init(name: "bridge")).checked().ok.body.json
                #expect(resumed.paused == false && resumed.pausedBy == "ops")
                #expect(try await gateways.demo.provisionApplePay(card: "card_bridge_demo", try SandboxServer.applePayRequest()).issuer == "bridge")

                let notAdmin = await problem { try await gateways.demo.raw.pauseIssuer(path: .init(name: "bridge")).checked() }
                #expect(notAdmin?.status == 403 && notAdmin?.code == "forbidden")
                let unknown = await problem { try await ops.pauseIssuer(path: .init(name: "nowhere")).checked() }
                #expect(unknown?.status == 404)
            }
        }

        @Test func aRouteIsExplained() async throws {
            try await SandboxServer.run { (gateways, _) async throws in
                let route = try await gateways.ops.raw.explainRoute(query: .init(cardId: "card_bridge_demo", wallet: .applePay)).checked().ok.body.json
                #expect(route.cardId == "card_bridge_demo" && route.program == "demo" && route.wallet == .applePay)
                #expect(route.issuer == "bridge")
                #expect(route.decidedBy == .card)
                #expect(route.rule == nil)
                #expect(route.deadlineMs == 15_000)
                #expect(route.endpoints.count == 1)
                #expect(route.endpoints.first?.breaker == .closed)
                #expect(route.walletSupported == true)
                let crossmintGoogle = try await gateways.ops.raw.explainRoute(query: .init(cardId: "card_crossmint_demo", wallet: .googlePay))
                    .checked().ok.body.json
                #expect(crossmintGoogle.walletSupported == false)
                let unknown = await problem { try await gateways.ops.raw.explainRoute(query: .init(cardId: "card_nobody", wallet: .applePay)).checked() }
                #expect(unknown?.status == 404 && unknown?.code == "card_not_found")
            }
        }

        @Test func securityEventsAreListedByKind() async throws {
            try await SandboxServer.run { (gateways, _) async throws in
                try await gateways.demo.registerCard("card_audited", issuer: "tmp", program: "demo", issuerReference: ["issuer_card_id": "tmp_audited"])
                try await gateways.demo.deleteCard("card_audited")
                let registered = try await gateways.ops.raw.listSecurityEvents(query: .init(kind: .cardRegistered)).checked().ok.body.json
                #expect(registered.events.map(\.cardId) == ["card_audited"])
                #expect(registered.events.first?.actor == "demo")
                #expect(registered.events.first?.kind == "card_registered")
                let deleted = try await gateways.ops.raw.listSecurityEvents(query: .init(kind: .cardDeleted, actor: "demo")).checked().ok.body.json
                #expect(deleted.events.map(\.cardId) == ["card_audited"])
                // A failed authentication is on record, as `anonymous`.
                _ = await problem { try await gateways.with(key: "sk_wrong").card("card_bridge_demo") }
                let failures = try await gateways.ops.raw.listSecurityEvents(query: .init(kind: .authFailed)).checked().ok.body.json
                #expect(failures.events.map(\.actor) == ["anonymous"])
                let notAdmin = await problem { try await gateways.demo.raw.listSecurityEvents().checked() }
                #expect(notAdmin?.status == 403 && notAdmin?.code == "forbidden")
            }
        }

        @Test func aConfigReloadAppliesTheFile() async throws {
            let directory = TestDirectories.root.appendingPathComponent("client-reload-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("gateway.yaml")
            let base = try String(contentsOf: SandboxServer.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
                .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(SandboxServer.packageRoot.path)/Config/sandbox/")
            try Data(base.utf8).write(to: file)
            var config = try ConfigLoader.load(path: file.path)
            config.server.port = 0
            let source = ConfigSource(path: file.path) { $0.server.port = 0 }
            try await SandboxServer.run(config: config, configSource: source) { (gateways, _) async throws in
                #expect(base.contains("deadline_ms: 15000"))
                let edited = Data(base.replacingOccurrences(of: "deadline_ms: 15000", with: "deadline_ms: 9000").utf8)
                try edited.write(to: file)
                let result = try await gateways.ops.raw.reloadConfig().checked().ok.body.json
                #expect(result.result == .applied)
                #expect(result.generation == 2)
                #expect(result.fileSha256 == SHA256.hash(data: edited).map { String(format: "%02x", $0) }.joined())
                #expect(result.changed == ["server.deadline_ms"])
                #expect(result.restartRequired == [])
                let route = try await gateways.ops.raw.explainRoute(query: .init(cardId: "card_bridge_demo", wallet: .applePay)).checked().ok.body.json
                #expect(route.deadlineMs == 9_000)

                try Data("clients: [".utf8).write(to: file)
                let broken = await problem { try await gateways.ops.raw.reloadConfig().checked() }
                #expect(broken?.status == 422 && broken?.code == "config_invalid" && broken?.retryable == false)
                let notAdmin = await problem { try await gateways.demo.raw.reloadConfig().checked() }
                #expect(notAdmin?.status == 403)
            }
        }

        @Test func probesAndMetricsAnswer() async throws {
            try await SandboxServer.run { (gateways, _) async throws in
                // The probes need no key: a client without one.
                let anonymous = ProvisioningGatewayClient.Client(serverURL: gateways.baseURL, transport: AsyncHTTPClientTransport())
                #expect(try await anonymous.getHealth().ok.body.json.status == .ok)
                #expect(try await anonymous.getReadiness().checked().ok.body.json.status == .ready)
                // So is the document, which names every answer's X-Request-Id.
                let document = try await anonymous.getContract().ok
                #expect(try await String(collecting: document.body.yaml, upTo: 1 << 22).hasPrefix("openapi: 3.1.0\n"))
                #expect(document.headers.xRequestId?.hasPrefix("req_") == true)

                _ = try await gateways.demo.provisionApplePay(card: "card_tmp_demo", try SandboxServer.applePayRequest())
                _ = try await gateways.ops.raw.pauseIssuer(path: .init(name: "lithic")).checked()
                // The sandbox serves /metrics without a key.
                let body = try await anonymous.getMetrics().checked().ok.body.plainText
                let text = try await String(collecting: body, upTo: 1 << 22)
                let lines = text.split(separator: "\n")
                #expect(lines.contains { $0.hasPrefix("gateway_upstream_attempts_total{") && $0.contains(#"issuer="tmp""#)
                    && $0.contains(#"outcome="succeeded""#) && $0.hasSuffix(" 1") }, "\(text.prefix(2000))")
                #expect(lines.contains(#"gateway_issuer_paused{issuer="lithic"} 1.0"#))
                #expect(lines.contains("gateway_config_generation 1.0"))
            }
        }

        @Test func aRateLimitedClientGetsRetryAfter() async throws {
            var config = try SandboxServer.sandboxConfig()
            let demo = try #require(config.clients.firstIndex { $0.id == "demo" })
            config.clients[demo].rateLimit = RateLimitConfig(requestsPerSecond: 0.4, burst: 1)
            try await SandboxServer.run(config: config) { (gateways, _) async throws in
                #expect(try await gateways.demo.card("card_bridge_demo").issuer == "bridge")
                let limited = await problem { try await gateways.demo.card("card_bridge_demo") }
                #expect(limited?.status == 429)
                #expect(limited?.code == "rate_limited")
                #expect(limited?.retryable == true)
                // 0.4 tokens a second into a bucket of 1: 3 s when the second request follows at once,
                // less when the machine is slow between the two (the header, read as typed, is never absent).
                #expect((1...3).contains(limited?.retryAfter ?? 0), "\(String(describing: limited))")
                // Other clients have their own budget.
                #expect(try await gateways.ops.card("card_bridge_demo").program == "demo")
            }
        }

        /// An issuer that asks the gateway to wait longer than the request's deadline: the gateway
        /// does not wait, it answers 503 with the issuer's wait as the spec's `Retry-After`, which
        /// the generated client reads as typed.
        @Test func anIssuersLongRetryAfterIsPassedOnAsTyped() async throws {
            try await SandboxServer.run { (gateways, sandbox) async throws in
                let wait = Int.random(in: 120...3600)
                _ = try await gateways.ops.raw.addSandboxFault(body: .json(
                    .SandboxFaultThrottled(.init(issuer: "bridge", mode: .throttled, count: 1, retryAfterSeconds: wait)))).checked()
                let throttled = await problem { try await gateways.demo.provisionApplePay(card: "card_bridge_demo", try SandboxServer.applePayRequest()) }
                #expect(throttled?.status == 503)
                #expect(throttled?.code == "upstream_unavailable")
                #expect(throttled?.retryable == true)
                #expect(throttled?.retryAfter == wait, "\(String(describing: throttled))")
                #expect(await sandbox.bridge.log.count == 1)
            }
        }
    }
}

/// The sandbox faults the tests queue, written once: the `SandboxFault` schema's shape lives here.
enum SandboxFaults {
    static func unavailable(issuer: String, count: Int) -> Components.Schemas.SandboxFault {
        .SandboxFaultPlain(.init(issuer: issuer, mode: .unavailable, count: count))
    }

    static func slow(issuer: String, delayMS: Int, count: Int) -> Components.Schemas.SandboxFault {
        .SandboxFaultSlow(.init(issuer: issuer, mode: .slow, count: count, delayMs: delayMS))
    }
}
