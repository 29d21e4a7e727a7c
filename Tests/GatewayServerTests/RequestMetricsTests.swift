import Foundation
import GatewayTestSupport
import ProvisioningCore
import HTTPTypes
import NIOCore
import Testing

/// `/metrics` counts every HTTP request by route template, method and status class, beside the
/// upstream metrics, and never names a card.
struct RequestMetricsTests {
    @Test func requestsAreCountedByRouteTemplateNeverByCardID() async throws {
        try await GatewayHarness.run { client, _ in
            let ok = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(ok.status == .ok)
            let unknownCard = try await GatewayHarness.provision(client, card: "card_nobody_knows_42", body: try GatewayHarness.requestBody())
            #expect(unknownCard.status.code / 100 == 4)
            let unauthenticated = try await GatewayHarness.provision(
                client, card: "card_tmp_demo", body: try GatewayHarness.requestBody(), key: nil)
            #expect(unauthenticated.status == .unauthorized)
            let nowhere = try await client.execute(uri: "/nowhere/card_lost_in_path", method: .get)
            #expect(nowhere.status == .notFound)

            let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            let route = "/v1/cards/{card_id}/wallet-provisioning/apple-pay"
            #expect(text.contains(#"gateway_http_requests_total{route="\#(route)",method="POST",status="2xx"} 1"#), "\(text)")
            #expect(text.contains(#"gateway_http_requests_total{route="\#(route)",method="POST",status="4xx"} 2"#), "\(text)")
            #expect(text.contains(#"gateway_http_requests_total{route="unmatched",method="GET",status="4xx"} 1"#), "\(text)")
            #expect(text.contains(#"gateway_http_request_duration_seconds_bucket{route="\#(route)",method="POST",status="2xx",le="+Inf"} 1"#),
                    "\(text)")
            // The upstream metrics are still there, beside the request metrics.
            #expect(text.contains("gateway_upstream_attempts_total{"))
            for card in ["card_bridge_demo", "card_nobody_knows_42", "card_tmp_demo", "card_lost_in_path"] {
                #expect(!text.contains(card), "\(card) in /metrics")
            }
        }
    }

    /// The issuer's connection pool, as `/metrics` reads it when scraped: after one provisioning
    /// the connection that carried it is kept, idle, and nothing waits.
    @Test func eachIssuersConnectionPoolIsOnTheGauges() async throws {
        try await GatewayHarness.run { client, _ in
            func gauge(_ text: String, _ series: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
            }
            let before = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(gauge(before, #"gateway_upstream_connections{issuer="bridge",state="open"}"#) == 0, "\(before)")
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()).status == .ok)
            let after = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(gauge(after, #"gateway_upstream_connections{issuer="bridge",state="open"}"#) == 1, "\(after)")
            #expect(gauge(after, #"gateway_upstream_connections{issuer="bridge",state="idle"}"#) == 1, "\(after)")
            #expect(gauge(after, #"gateway_upstream_connection_waiters{issuer="bridge"}"#) == 0, "\(after)")
            #expect(gauge(after, #"gateway_upstream_connections{issuer="tmp",state="open"}"#) == 0, "\(after)")
        }
    }

    /// The SQLite store's group commit on `/metrics`: each scrape shows the commits and writes
    /// the store has counted, and every provisioning's audit write is among them.
    @Test func theStoresCommitsAndTheirWritesAreOnTheCounters() async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, _ in
            func scrape() async throws -> (commits: Double?, writes: Double?) {
                let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                func value(_ name: String) -> Double? {
                    text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
                }
                return (value("gateway_store_commits_total"), value("gateway_store_committed_writes_total"))
            }
            let before = try await scrape()
            let provisionings = Int.random(in: 2...5)
            for round in 0..<2 {
                for _ in 0..<provisionings {
                    #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()).status == .ok)
                }
                let after = try await scrape()
                let counts = try #require(store.commitCounts)
                #expect(after.commits == Double(counts.commits), "round \(round)")
                #expect(after.writes == Double(counts.writes), "round \(round)")
                #expect((after.writes ?? 0) - (before.writes ?? 0) >= Double(provisionings * (round + 1)))
                #expect((after.commits ?? 0) <= (after.writes ?? 0))
            }
        }
    }

    @Test func refusedRequestsAreCountedPerClientAndBreakersShowTheirState() async throws {
        let config = try GatewayHarness.withDemoRateLimit(RateLimitConfig(requestsPerSecond: 1, burst: 1), GatewayHarness.sandboxConfig())
        try await GatewayHarness.run(config: config, clock: TestClock()) { client, _ in
            #expect(try await RateLimitTests.get(client, "/v1/cards", key: GatewayHarness.demoKey).status == .ok)
            RateLimitTests.expectRateLimited(try await RateLimitTests.get(client, "/v1/cards", key: GatewayHarness.demoKey))

            let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(text.contains(#"gateway_rate_limited_total{client="demo"} 1"#), "\(text)")
            #expect(text.contains(#"gateway_http_requests_total{route="/v1/cards",method="GET",status="4xx"} 1"#), "\(text)")
            // Every registered endpoint has a breaker state from the start: 0, closed.
            let states = text.split(separator: "\n").filter { $0.hasPrefix(#"gateway_circuit_breaker_state{issuer="bridge","#) }
            #expect(!states.isEmpty, "\(text)")
            #expect(states.allSatisfy { Double($0.split(separator: " ").last ?? "") == 0 }, "\(states)")
        }
    }

    /// And once its open time has passed, the scrape reads it as half open (1) with no request in
    /// between: the gauge had changed only on a call, so a quiet issuer's breaker showed open,
    /// and paged, until traffic came back (ops audit).
    @Test func anOpenBreakerIsTwoOnTheGaugeAndTheOtherEndpointStaysZero() async throws {
        let clock = TestClock()
        try await ResilienceTests.runSkippingWaits(config: try FailoverTests.twoEndpoints(first: "sandbox://bridge/primary"), clock: clock) { client, _ in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","endpoint":0,"mode":"unavailable","count":100}"#)
            // Two 503s open the primary's breaker; the second endpoint serves the request.
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()).status == .ok)
            let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            let states = text.split(separator: "\n").filter { $0.hasPrefix(#"gateway_circuit_breaker_state{issuer="bridge","#) }
            #expect(states.count == 2, "\(states)")
            #expect(states.compactMap { Double($0.split(separator: " ").last ?? "") }.sorted() == [0, 2], "\(states)")
            #expect(text.contains(#"gateway_circuit_breaker_transitions_total{issuer="bridge","#), "\(text)")

            clock.advance(by: .seconds(3_600))
            let later = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            let now = later.split(separator: "\n").filter { $0.hasPrefix(#"gateway_circuit_breaker_state{issuer="bridge","#) }
            #expect(now.compactMap { Double($0.split(separator: " ").last ?? "") }.sorted() == [0, 1], "\(now)")
            // The latency histograms bound the default deadline's 80 % and 100 %.
            #expect(later.contains(#"le="12.0""#) && later.contains(#"le="15.0""#), "\(later.prefix(2000))")
        }
    }
}
