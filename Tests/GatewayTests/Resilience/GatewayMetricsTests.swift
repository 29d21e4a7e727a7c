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
}
