import Foundation
import Gateway
import GatewayTestSupport
@testable import GatewayServer
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import Synchronization
import Testing

/// Per-client rate limits, the failed-authentication throttle per source address, and `/metrics`
/// behind an admin key, through the real HTTP stack with a clock the tests move.
struct RateLimitTests {
    static let opsKey = GatewayHarness.opsKey

    static func get(_ client: GatewayClient, _ uri: String, key: String?) async throws -> GatewayResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        return try await client.execute(uri: uri, method: .get, headers: headers)
    }

    static func expectRateLimited(_ response: GatewayResponse, retryAfter: String = "1", sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == .tooManyRequests, sourceLocation: sourceLocation)
        #expect(response.headers[.contentType] == "application/problem+json", sourceLocation: sourceLocation)
        #expect(response.json["code"] as? String == "rate_limited", sourceLocation: sourceLocation)
        #expect(response.json["retryable"] as? Bool == true, sourceLocation: sourceLocation)
        #expect(response.json["status"] as? Int == 429, sourceLocation: sourceLocation)
        #expect(response.headers[.retryAfter] == retryAfter, sourceLocation: sourceLocation)
    }

    // MARK: Per client

    @Test func aClientOverItsLimitIsRefusedUntilATokenComesBackAndOthersAreNot() async throws {
        let config = try GatewayHarness.withDemoRateLimit(RateLimitConfig(requestsPerSecond: 1, burst: 3), GatewayHarness.sandboxConfig())
        let clock = TestClock()
        try await GatewayHarness.run(config: config, clock: clock) { client, _ in
            for _ in 0..<3 {
                #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey).status == .ok)
            }
            Self.expectRateLimited(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey))
            // Every route under /v1 counts against the same bucket.
            Self.expectRateLimited(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()))

            // Another client has its own bucket (the default, 50/s burst 100).
            for _ in 0..<5 {
                #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.otherKey).status == .ok)
            }

            clock.advance(by: .seconds(1))
            #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey).status == .ok)
            Self.expectRateLimited(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey))
        }
    }

    /// A client's requests at once are bounded (`clients[].max_in_flight`): requests held in
    /// flight (here, bodies held back after their headers) make its next one 429 at once, without
    /// touching another client or the issuer, and the count falls back as they are answered.
    @Test func aClientWithMaxInFlightRequestsIsRefusedAtOnceAndOthersAreNot() async throws {
        var config = try GatewayHarness.sandboxConfig()
        let demo = try #require(config.clients.firstIndex { $0.id == "demo" })
        config.clients[demo].maxInFlight = 2
        try await GatewayHarness.run(config: config) { client, sandbox in
            let body = Array(try GatewayHarness.requestBody())
            var held: [RawConnection] = []
            defer { for connection in held { connection.close() } }
            for _ in 0..<2 {
                let connection = try await RawConnection.open(port: client.port)
                held.append(connection)
                try await connection.send("POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: x\r\n"
                    + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n")
                try await connection.send(bytes: Array(body.prefix(10)))
            }
            let demoInFlight = #"gateway_client_requests_in_flight{client="demo"}"#
            #expect(await RawConnection.eventually { ((try? await ConfigReloadTests.metric(client, demoInFlight)) ?? 0) == 2 })

            let refused = try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey)
            Self.expectRateLimited(refused)
            #expect((refused.json["detail"] as? String)?.contains("max_in_flight") == true, "\(refused.json)")
            Self.expectRateLimited(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: Data(body)))
            #expect(try await ConfigReloadTests.metric(client, #"gateway_rate_limited_total{client="demo"}"#) == 2)
            // Another client is not held back by demo's requests.
            #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.otherKey).status == .ok)
            #expect(await sandbox.bridge.log.count == 0)

            for connection in held {
                try await connection.send(bytes: Array(body.dropFirst(10)))
                #expect(await connection.eventually { $0.text.contains("\r\n\r\n{") && $0.text.hasSuffix("}") }, "\(connection.text)")
                #expect(connection.text.hasPrefix("HTTP/1.1 200 "), "\(connection.text)")
            }
            #expect(await RawConnection.eventually { ((try? await ConfigReloadTests.metric(client, demoInFlight)) ?? -1) == 0 })
            #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey).status == .ok)

            // A request whose client goes away before its body is in gives its place back too.
            let dropped = try await RawConnection.open(port: client.port)
            try await dropped.send("POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: x\r\n"
                + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n")
            #expect(await RawConnection.eventually { ((try? await ConfigReloadTests.metric(client, demoInFlight)) ?? 0) == 1 })
            dropped.close()
            #expect(await RawConnection.eventually { ((try? await ConfigReloadTests.metric(client, demoInFlight)) ?? -1) == 0 })
            // Only the two held requests reached the issuer.
            #expect(await sandbox.bridge.log.count == 2)
        }
    }

    @Test func retryAfterIsWholeSecondsRoundedUp() async throws {
        let config = try GatewayHarness.withDemoRateLimit(RateLimitConfig(requestsPerSecond: 0.4, burst: 1), GatewayHarness.sandboxConfig())
        let clock = TestClock()
        try await GatewayHarness.run(config: config, clock: clock) { client, _ in
            #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey).status == .ok)
            Self.expectRateLimited(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey), retryAfter: "3")
            clock.advance(by: .milliseconds(2_400))
            // 100 ms to go is still "1", never "0".
            Self.expectRateLimited(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey), retryAfter: "1")
            clock.advance(by: .milliseconds(100))
            #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey).status == .ok)
        }
    }

    // MARK: Failed authentication, per source address

    @Test func failedAuthenticationIsThrottledPerSourceButAValidKeyStillWorks() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.server.authFailureLimit = RateLimitConfig(requestsPerSecond: 1, burst: 3)
        let clock = TestClock()
        let failures = Locked<[String]>([])
        try await GatewayHarness.run(config: config, clock: clock, onAuthFailure: { source, reason in
            failures.withLock { $0.append("\(source) \(reason)") }
        }) { client, _ in
            #expect(try await Self.get(client, "/v1/cards", key: nil).status == .unauthorized)
            #expect(try await Self.get(client, "/v1/cards", key: "sk_wrong_1").status == .unauthorized)
            #expect(try await Self.get(client, "/v1/cards", key: "sk_wrong_2").status == .unauthorized)
            // The source's bucket is empty: a wrong key is refused without a report.
            Self.expectRateLimited(try await Self.get(client, "/v1/cards", key: "sk_wrong_3"))
            Self.expectRateLimited(try await Self.get(client, "/v1/cards", key: nil))
            Self.expectRateLimited(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: Data(), key: "sk_wrong_4"))

            // Only the failures that were not throttled reach the hook: the source, a reason, never the key.
            let seen = failures.withLock { $0 }
            #expect(seen == ["127.0.0.1 missing_key", "127.0.0.1 invalid_key", "127.0.0.1 invalid_key"])
            #expect(!seen.contains { $0.contains("sk_") })

            // Someone else's failures from the same address (a NAT, a proxy) do not lock out a valid key.
            #expect(try await Self.get(client, "/v1/cards", key: GatewayHarness.demoKey).status == .ok)

            clock.advance(by: .seconds(1))
            #expect(try await Self.get(client, "/v1/cards", key: "sk_wrong_5").status == .unauthorized)
            Self.expectRateLimited(try await Self.get(client, "/v1/cards", key: "sk_wrong_6"))
            #expect(failures.withLock { $0.count } == 4)
        }
    }

    /// Two `Authorization` lines were read joined, hashed as an unknown key, reported as a failed
    /// login and took from the address's failure budget: a careless SDK behind a shared address
    /// locked out its neighbours' wrong-key retries. They are a malformed request (400), with no
    /// key checked and no failure reported; one or more spaces after `Bearer` are one separator.
    @Test func twoAuthorizationLinesAreAMalformedRequestNotAFailedLogin() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.server.authFailureLimit = RateLimitConfig(requestsPerSecond: 1, burst: 1)
        let failures = Locked<[String]>([])
        try await GatewayHarness.run(config: config, clock: TestClock(), onAuthFailure: { source, reason in
            failures.withLock { $0.append("\(source) \(reason)") }
        }) { client, _ in
            var doubled = HTTPFields()
            doubled.append(HTTPField(name: .authorization, value: "Bearer \(GatewayHarness.demoKey)"))
            doubled.append(HTTPField(name: .authorization, value: "Bearer \(GatewayHarness.demoKey)"))
            for _ in 0..<3 {
                let response = try await client.execute(uri: "/v1/cards", method: .get, headers: doubled)
                #expect(response.status == .badRequest && response.json["code"] as? String == "invalid_request", "\(response.json)")
                #expect((response.json["detail"] as? String)?.contains("Authorization is given more than once") == true)
            }
            #expect(failures.withLock { $0 }.isEmpty)
            #expect(try await client.execute(uri: "/v1/cards", method: .get,
                                              headers: [.authorization: "Bearer   \(GatewayHarness.demoKey)"]).status == .ok)
            // The address's one failure is still there to spend.
            #expect(try await Self.get(client, "/v1/cards", key: "sk_wrong").status == .unauthorized)
            #expect(failures.withLock { $0.count } == 1)
        }
    }

    // MARK: /metrics

    @Test func metricsNeedAnAdminKeyUnlessPublic() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.server.metricsPublic = false
        try await GatewayHarness.run(config: config) { client, _ in
            let anonymous = try await Self.get(client, "/metrics", key: nil)
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.json["code"] as? String == "unauthorized")
            let demo = try await Self.get(client, "/metrics", key: GatewayHarness.demoKey)
            #expect(demo.status == .forbidden)
            #expect(demo.json["code"] as? String == "forbidden")
            let ops = try await Self.get(client, "/metrics", key: Self.opsKey)
            #expect(ops.status == .ok)
            #expect(ops.headers[.contentType]?.hasPrefix("text/plain") == true)
            // Other spellings the router takes for the same path are checked too.
            for uri in ["/metrics/", "//metrics", "/metrics//", "/metrics?x=1"] {
                #expect(try await Self.get(client, uri, key: nil).status == .unauthorized, "\(uri)")
                #expect(try await Self.get(client, uri, key: GatewayHarness.demoKey).status == .forbidden, "\(uri)")
            }
            // Other public paths stay public.
            #expect(try await Self.get(client, "/healthz", key: nil).status == .ok)
        }
    }

    @Test func publicMetricsNeedNoKey() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.server.metricsPublic = true
        try await GatewayHarness.run(config: config) { client, _ in
            let response = try await Self.get(client, "/metrics", key: nil)
            #expect(response.status == .ok)
        }
    }

    // MARK: The limiter's table

    @Test func theSourceTableIsBoundedDroppingFullBucketsFirstThenTheOldest() {
        let clock = TestClock()
        let limiter = RateLimiter<String, TestClock>(clock: clock, defaultLimit: RateLimitConfig(requestsPerSecond: 1, burst: 2), capacity: 10)
        for index in 0..<10 {
            #expect(limiter.take("source-\(index)") == .allowed)
            clock.advance(by: .milliseconds(10))
        }
        #expect(limiter.count == 10)
        // Nothing has refilled yet: the oldest tenth (one bucket) goes.
        #expect(limiter.take("source-new") == .allowed)
        #expect(limiter.count == 10)
        // Only a fresh bucket (burst 2) gives two tokens now: source-0 had one left.
        #expect(limiter.take("source-0") == .allowed && limiter.take("source-0") == .allowed, "source-0 was not dropped")

        // Two seconds later every bucket is full again (source-0's too): all of them can go, and do.
        clock.advance(by: .seconds(2))
        #expect(limiter.take("source-newer") == .allowed)
        #expect(limiter.count == 1)
    }

    @Test func anEmptyBucketIsNeverDroppedSoAFloodOfNewSourcesCannotResetIt() {
        let clock = TestClock()
        let limiter = RateLimiter<String, TestClock>(clock: clock, defaultLimit: RateLimitConfig(requestsPerSecond: 1, burst: 1), capacity: 10)
        // The attacker's own source, exhausted, then the table filled with fresh sources (each empty too).
        #expect(limiter.take("attacker") == .allowed)
        #expect(limiter.take("attacker") != .allowed)
        for index in 0..<9 { _ = limiter.take("flood-\(index)") }
        // Every bucket is empty: a new source is refused rather than dropping one, until the
        // soonest refill (the table is not scanned again for each newcomer meanwhile)...
        clock.advance(by: .milliseconds(300))
        #expect(limiter.take("flood-new") == .refused(retryAfter: .milliseconds(700)))
        clock.advance(by: .milliseconds(200))
        #expect(limiter.take("flood-newer") == .refused(retryAfter: .milliseconds(500)))
        // ...so the attacker's bucket is still empty.
        #expect(limiter.peek("attacker") != .allowed)
        // Once buckets refill there is room again.
        clock.advance(by: .milliseconds(500))
        #expect(limiter.take("flood-new") == .allowed)
    }

    /// The throttle's key: an IPv4 address as it is, an IPv4-mapped IPv6 address as its IPv4, and
    /// an IPv6 address by its /64 (a host owns a whole /64 and could rotate within it).
    @Test func sourceAddressesAreCountedPerIPv4AddressOrIPv6Slash64() throws {
        let v4 = SourceAddress(try SocketAddress(ipAddress: "203.0.113.7", port: 1))
        #expect(v4.key == "203.0.113.7" && v4.description == "203.0.113.7")
        #expect(SourceAddress(try SocketAddress(ipAddress: "::ffff:203.0.113.7", port: 1)).key == "203.0.113.7")
        let one = SourceAddress(try SocketAddress(ipAddress: "2001:db8:1:2::1", port: 1))
        let sameSlash64 = SourceAddress(try SocketAddress(ipAddress: "2001:db8:1:2:ffff::9", port: 1))
        let otherSlash64 = SourceAddress(try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 1))
        #expect(one.key == "2001:db8:1:2::/64" && one.key == sameSlash64.key && one.key != otherSlash64.key)
        #expect(one.description != sameSlash64.description, "the audit keeps the full address")
        #expect(SourceAddress(nil).key == "unknown")
    }

    @Test func peekingMakesNoBucket() {
        let limiter = RateLimiter<String, TestClock>(clock: TestClock(), defaultLimit: RateLimitConfig(requestsPerSecond: 1, burst: 1))
        #expect(limiter.peek("somebody") == .allowed)
        #expect(limiter.count == 0)
        #expect(limiter.take("somebody") == .allowed)
        #expect(limiter.take("somebody") == .refused(retryAfter: .seconds(1)))
        #expect(limiter.peek("somebody") == .refused(retryAfter: .seconds(1)))
    }
}
