import Foundation
import GatewayTestSupport
import NIOCore
import ProvisioningCore
import Testing

/// The dashboard and alert rules in `deploy/` name only metrics the gateway exports: after
/// traffic that exercises every metric (a retry, an open breaker, a fallback, an activation, a
/// rate limit), each name they use is in `/metrics`.
struct DeployFilesTests {
    static func metricNames(in text: String) throws -> Set<String> {
        Set(text.matches(of: try Regex("gateway_[a-z0-9_]+")).map { String(text[$0.range]) })
    }

    /// `# TYPE name kind` lines; a histogram's series are its name with `_bucket`, `_sum`, `_count`.
    static func exported(_ exposition: String) -> Set<String> {
        var names: Set<String> = []
        for line in exposition.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            guard parts.count == 4 else { continue }
            let name = String(parts[2])
            names.insert(name)
            if parts[3] == "histogram" { names.formUnion(["_bucket", "_sum", "_count"].map { name + $0 }) }
        }
        return names
    }

    @Test func everyMetricTheAlertsAndTheDashboardUseIsExported() async throws {
        let deploy = GatewayHarness.packageRoot.appendingPathComponent("deploy")
        let alerts = try String(contentsOf: deploy.appendingPathComponent("prometheus/alerts.yml"), encoding: .utf8)
        let dashboard = try Data(contentsOf: deploy.appendingPathComponent("grafana/provisioning-gateway.json"))
        #expect(try JSONSerialization.jsonObject(with: dashboard) is [String: Any])
        let used = try Self.metricNames(in: alerts).union(Self.metricNames(in: String(decoding: dashboard, as: UTF8.self)))
        #expect(used.count > 5)

        var config = try ResilienceTests.config { config in
            config.issuers["bridge"]!.circuitBreaker.failureThreshold = 2
            config.routing.rules = [RoutingRuleConfig(match: .init(program: "demo"), issuer: "bridge", fallback: "local")]
        }
        let other = try #require(config.clients.firstIndex { $0.id == "other" })
        config.clients[other].rateLimit = RateLimitConfig(requestsPerSecond: 0.01, burst: 1)
        let exposition = Locked<String>("")
        try await GatewayHarness.run(config: config) { client, _ in
            // Two 503s: a retry, Bridge's breaker opens, the request falls back to local.
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":2}"#)
            let provisioned = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(provisioned.status == .ok && provisioned.json["issuer"] as? String == "local")
            _ = try await WalletFlowTests.activate(client, #"{"token_unique_reference":"DECLINE-9"}"#)
            _ = try await RateLimitTests.get(client, "/v1/cards", key: GatewayHarness.otherKey)
            RateLimitTests.expectRateLimited(try await RateLimitTests.get(client, "/v1/cards", key: GatewayHarness.otherKey), retryAfter: "100")
            let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            exposition.withLock { $0 = text }
        }
        let exported = Self.exported(exposition.withLock { $0 })
        let missing = used.subtracting(exported)
        #expect(missing.isEmpty, "named in deploy/ but not in /metrics: \(missing.sorted())")
    }
}
