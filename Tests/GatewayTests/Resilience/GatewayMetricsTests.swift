import Gateway
import Issuers
import ProvisioningCore
import Testing

/// The connection-pool gauges follow the issuers the gateway has now.
@Suite struct GatewayMetricsTests {
    /// The exposition's sample lines of one metric family, sorted.
    static func samples(_ metrics: GatewayMetrics, _ family: String) -> [String] {
        metrics.exposition().split(separator: "\n").map(String.init).filter { $0.hasPrefix(family + "{") }.sorted()
    }

    /// The value of a metric without labels, nil when the exposition has no such series.
    static func value(_ metrics: GatewayMetrics, _ name: String) -> Double? {
        metrics.exposition().split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    /// The store's cumulative figures, read at each scrape, become counters that show them: a
    /// scrape adds only what is new, however often it runs; a store without a group commit adds
    /// no series.
    @Test func theStoresCommitCountsAreCountersThatFollowThem() {
        let metrics = GatewayMetrics()
        metrics.storeCommits(nil)
        #expect(Self.value(metrics, "gateway_store_commits_total") == nil)
        #expect(Self.value(metrics, "gateway_store_committed_writes_total") == nil)
        var counts = StoreCommitCounts(commits: 0, writes: 0)
        for _ in 0..<Int.random(in: 2...5) {
            let commits = Int.random(in: 0...40)
            counts.commits += commits
            counts.writes += commits + Int.random(in: 0...commits * 3)
            // Scraped twice in a row: the second adds nothing.
            for _ in 0..<2 {
                metrics.storeCommits(counts)
                #expect(Self.value(metrics, "gateway_store_commits_total") == Double(counts.commits))
                #expect(Self.value(metrics, "gateway_store_committed_writes_total") == Double(counts.writes))
            }
        }
    }

    @Test func eachIssuersPoolIsRecordedAndARemovedIssuerLeavesTheExposition() {
        let metrics = GatewayMetrics()
        metrics.upstreamConnections([
            "bridge": UpstreamHTTP.ConnectionCounts(open: 3, idle: 1, waiting: 0),
            "tmp": UpstreamHTTP.ConnectionCounts(open: 8, idle: 0, waiting: 5),
        ])
        #expect(Self.samples(metrics, "gateway_upstream_connections") == [
            #"gateway_upstream_connections{issuer="bridge",state="idle"} 1.0"#,
            #"gateway_upstream_connections{issuer="bridge",state="open"} 3.0"#,
            #"gateway_upstream_connections{issuer="tmp",state="idle"} 0.0"#,
            #"gateway_upstream_connections{issuer="tmp",state="open"} 8.0"#,
        ])
        #expect(Self.samples(metrics, "gateway_upstream_connection_waiters") == [
            #"gateway_upstream_connection_waiters{issuer="bridge"} 0.0"#,
            #"gateway_upstream_connection_waiters{issuer="tmp"} 5.0"#,
        ])

        // A reload removed tmp: its series go, bridge's show its counts now.
        metrics.upstreamConnections(["bridge": UpstreamHTTP.ConnectionCounts(open: 2, idle: 2, waiting: 0)])
        #expect(Self.samples(metrics, "gateway_upstream_connections") == [
            #"gateway_upstream_connections{issuer="bridge",state="idle"} 2.0"#,
            #"gateway_upstream_connections{issuer="bridge",state="open"} 2.0"#,
        ])
        #expect(Self.samples(metrics, "gateway_upstream_connection_waiters") == [#"gateway_upstream_connection_waiters{issuer="bridge"} 0.0"#])

        // An issuer added back is recorded again.
        metrics.upstreamConnections(["bridge": .init(), "tmp": UpstreamHTTP.ConnectionCounts(open: 1, idle: 1, waiting: 0)])
        #expect(Self.samples(metrics, "gateway_upstream_connection_waiters").count == 2)
    }

    /// A reload that removes an issuer, or moves an endpoint, takes its breaker and pause series
    /// out of the exposition (they had shown the last state for ever); what stays keeps its series.
    @Test func aRemovedIssuersBreakerAndPauseSeriesLeaveTheExposition() {
        let metrics = GatewayMetrics()
        let health = UpstreamHealth(metrics: metrics)
        let policy = CircuitBreaker.Policy(failureThreshold: 3, openDuration: .seconds(30), halfOpenProbes: 1)
        health.reconcile([.init(issuer: "bridge", index: 0, url: "https://b1", policy: policy),
                          .init(issuer: "bridge", index: 1, url: "https://b2", policy: policy),
                          .init(issuer: "tmp", index: 0, url: "https://t1", policy: policy)])
        health.applyPauses(config: ["bridge": false, "tmp": true])
        #expect(Self.samples(metrics, "gateway_circuit_breaker_state").count == 3)
        #expect(Self.samples(metrics, "gateway_issuer_paused") == [
            #"gateway_issuer_paused{issuer="bridge"} 0.0"#, #"gateway_issuer_paused{issuer="tmp"} 1.0"#,
        ])

        // tmp removed, bridge's second endpoint moved to another address.
        health.reconcile([.init(issuer: "bridge", index: 0, url: "https://b1", policy: policy),
                          .init(issuer: "bridge", index: 1, url: "https://b3", policy: policy)])
        health.applyPauses(config: ["bridge": false])
        #expect(Self.samples(metrics, "gateway_circuit_breaker_state") == [
            #"gateway_circuit_breaker_state{issuer="bridge",endpoint="https://b1"} 0.0"#,
            #"gateway_circuit_breaker_state{issuer="bridge",endpoint="https://b3"} 0.0"#,
        ])
        #expect(Self.samples(metrics, "gateway_issuer_paused") == [#"gateway_issuer_paused{issuer="bridge"} 0.0"#])
    }
}
