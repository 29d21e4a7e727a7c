import Foundation
import Gateway
import GatewayTestSupport
import GatewayServer
import Hummingbird
import Issuers
import HummingbirdTesting
import ProvisioningCore
import Sandbox
import Synchronization
import Testing

/// Endpoints in failover order, circuit breakers per endpoint, the admin view and the metrics.
struct FailoverTests {
    static let opsKey = GatewayHarness.opsKey

    /// Bridge with two endpoints: `first` (a URL) then the sandbox simulator.
    static func twoEndpoints(first: String, threshold: Int = 2) throws -> GatewayConfig {
        try ResilienceTests.config { config in
            config.issuers["bridge"]!.endpoints = [EndpointConfig(url: first), EndpointConfig(url: "sandbox://bridge")]
            config.issuers["bridge"]!.circuitBreaker.failureThreshold = threshold
            config.issuers["bridge"]!.circuitBreaker.openMS = 30_000
        }
    }

    @Test func aDownFirstEndpointFailsOverToTheSecond() async throws {
        // Nothing listens on port 1: the connection is refused, so the request provably never left.
        try await GatewayHarness.run(config: try Self.twoEndpoints(first: "http://127.0.0.1:1/v0")) { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .ok)
            #expect(await sandbox.bridge.log.count == 1)
            let events = try await ResilienceTests.events(client, response)
            #expect(events.map { $0["endpoint"] as? String }.first == "http://127.0.0.1:1/v0")
            #expect(events.map { $0["error_code"] as? String } == [.some("upstream_unavailable"), nil])
            #expect(events.map { $0["outcome"] as? String } == ["failed", "succeeded"])
            #expect((events.last?["endpoint"] as? String)?.hasPrefix("http://127.0.0.1:") == true)
        }
    }

    @Test func anOpenBreakerSkipsItsEndpointUntilHalfOpen() async throws {
        // The breakers' clock, moved by hand: open durations pass without sleeping. (The rest of
        // the gateway keeps real time, so the retries' backoffs run as usual.)
        let time = TestClock()
        let health = UpstreamHealth(clock: GatewayClock(time))
        let config = try Self.twoEndpoints(first: "sandbox://bridge/primary")
        try await GatewayHarness.run(config: config, health: health) { client, sandbox in
            let primary = try #require(sandbox.instance(issuer: "bridge", endpoint: 0))
            #expect(primary.url == "sandbox://bridge/primary")
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","endpoint":0,"mode":"unavailable","count":100}"#)
            let body = try GatewayHarness.requestBody()

            // Two 503s open the primary's breaker; the third attempt goes to the second endpoint.
            let first = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            #expect(first.status == .ok)
            #expect(await primary.log.count == 2)
            #expect(await sandbox.bridge.log.count == 1)

            // While open: no call to the primary at all.
            for _ in 0..<3 {
                #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            }
            #expect(await primary.log.count == 2)
            #expect(await sandbox.bridge.log.count == 4)

            let open = try await CardRegistryAPITests.send(client, .get, "/v1/admin/issuers", key: Self.opsKey)
            let bridge = try #require((open.json["issuers"] as? [[String: Any]])?.first { $0["issuer"] as? String == "bridge" })
            let endpoints = try #require(bridge["endpoints"] as? [[String: Any]])
            #expect(endpoints.map { $0["breaker"] as? String } == ["open", "closed"])
            #expect(endpoints.first?["last_error_code"] as? String == "upstream_unavailable")
            #expect((endpoints.first?["recent_failures"] as? [[String: Any]])?.count == 2)
            #expect(endpoints.first?["open_until"] is String)
            // The open breaker still says how many failures in a row opened it (it had said 0).
            #expect(endpoints.map { $0["consecutive_failures"] as? Int } == [2, 0])

            // The open duration passes: one probe goes to the primary, fails, and it opens again.
            time.advance(by: .seconds(31))
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            #expect(await primary.log.count == 3)
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            #expect(await primary.log.count == 3)
            let reopened = try await CardRegistryAPITests.send(client, .get, "/v1/admin/issuers", key: Self.opsKey)
            let primaryView = ((reopened.json["issuers"] as? [[String: Any]])?.first { $0["issuer"] as? String == "bridge" }?["endpoints"]
                as? [[String: Any]])?.first
            #expect(primaryView?["breaker"] as? String == "open" && primaryView?["consecutive_failures"] as? Int == 3)

            // Healed: the next probe succeeds and closes the breaker; the primary serves again.
            _ = try await CardRegistryAPITests.send(client, .delete, "/v1/sandbox/faults", key: GatewayHarness.opsKey)
            time.advance(by: .seconds(31))
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body).status == .ok)
            #expect(await primary.log.count == 5)
            let healed = try await CardRegistryAPITests.send(client, .get, "/v1/admin/issuers", key: Self.opsKey)
            let states = ((healed.json["issuers"] as? [[String: Any]])?.first { $0["issuer"] as? String == "bridge" }?["endpoints"]
                as? [[String: Any]])?.map { $0["breaker"] as? String }
            #expect(states == ["closed", "closed"])
            let counts = ((healed.json["issuers"] as? [[String: Any]])?.first { $0["issuer"] as? String == "bridge" }?["endpoints"]
                as? [[String: Any]])?.map { $0["consecutive_failures"] as? Int }
            #expect(counts == [0, 0])
        }
    }

    @Test func everyBreakerOpenFallsBackToLocalWhenTheRouteAllows() async throws {
        let config = try ResilienceTests.config { config in
            config.issuers["bridge"]!.circuitBreaker.failureThreshold = 1
            config.routing.rules = [RoutingRuleConfig(match: .init(program: "demo"), issuer: "bridge", fallback: "local")]
        }
        try await GatewayHarness.run(config: config) { client, sandbox in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":100}"#)
            let body = try GatewayHarness.requestBody()
            let first = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            #expect(first.json["issuer"] as? String == "local")
            #expect(await sandbox.bridge.log.count == 1)
            // Open: Bridge is not called; local serves at once.
            let second = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            #expect(second.status == .ok && second.json["issuer"] as? String == "local")
            #expect(await sandbox.bridge.log.count == 1)
            // The trail says Bridge was passed over (no endpoint, no status: no call), then local.
            let events = try await ResilienceTests.events(client, second)
            #expect(events.map { $0["issuer"] as? String } == ["bridge", "local"])
            #expect(events.map { $0["attempt"] as? Int } == [1, 2])
            #expect(events.map { $0["outcome"] as? String } == ["failed", "succeeded"])
            #expect(events.first?["error_code"] as? String == "upstream_unavailable")
            #expect(events.first?["endpoint"] == nil && events.first?["upstream_status"] == nil)
            // A called issuer's trail is unchanged: its failed attempt, then local.
            let firstEvents = try await ResilienceTests.events(client, first)
            #expect(firstEvents.map { $0["issuer"] as? String } == ["bridge", "local"])
            #expect(firstEvents.first?["upstream_status"] as? Int == 503)
        }
    }

    /// A paused issuer passed over for the fallback (IssuerCapabilityTests has the served case):
    /// without vault data the local attempt fails, and the request's answer (attempt 0) is the
    /// issuer's code, after the passed-over event and the local one.
    @Test func aPausedIssuerWithoutVaultDataIsOnTheTrailThreeTimes() async throws {
        let unvaulted = CardRecord(id: "card_not_vaulted", program: "demo", issuer: "bridge",
                                   issuerReference: .init(["customer_id": "cust_not_vaulted", "card_account_id": "ca_not_vaulted"]))
        let config = try ResilienceTests.config { config in
            config.issuers["bridge"]!.paused = true
            config.routing.rules = [RoutingRuleConfig(match: .init(program: "demo"), issuer: "bridge", fallback: "local")]
        }
        try await GatewayHarness.run(config: config, extraCards: [unvaulted]) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            let refused = try await GatewayHarness.provision(client, card: "card_not_vaulted", body: body)
            #expect(refused.status == .serviceUnavailable && refused.json["code"] as? String == "upstream_unavailable")
            let refusedEvents = try await ResilienceTests.events(client, refused)
            #expect(refusedEvents.map { $0["issuer"] as? String } == ["bridge", "local", "bridge"])
            #expect(refusedEvents.map { $0["attempt"] as? Int } == [1, 2, 0])
            #expect(refusedEvents.map { $0["error_code"] as? String } == ["upstream_unavailable", "card_not_found", "upstream_unavailable"])
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    /// A card an admin moves to another tenant's program, or points at another card at its
    /// issuer in the same program, while its request waits to retry is not sent again: the retry
    /// reads the card first, and the caller hears `card_not_found`, saying which.
    @Test(arguments: [("other", "ca_demo_001", "among this client's programs"), ("demo", "ca_demo_999", "changed while the request ran")])
    func aCardMovedAwayWhileItsRequestWaitsIsNotSentAgain(program: String, account: String, detail: String) async throws {
        let config = try ResilienceTests.config { $0.issuers["bridge"]!.timeouts.requestMS = 400 }
        // The backoff before the retry is waited on this clock, moved only once the card moved:
        // the move comes before the retry's card read whatever the machine's speed.
        let clock = TestClock()
        try await GatewayHarness.run(config: config, clock: clock) { client, sandbox in
            // Bridge's first answer takes longer than the per-try timeout: Bridge's POST carries an
            // Idempotency-Key, so the timed-out attempt would be retried.
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"slow","delay_ms":1200,"count":1}"#)
            let body = try GatewayHarness.requestBody()
            let port = client.port
            async let answer = GatewayClient.with(port: port) { own in
                try await GatewayHarness.provision(own, card: "card_bridge_demo", body: body)
            }
            try await ConfigReloadTests.waitUntilTheFaultIsTaken(client)
            let card = #"{"issuer":"bridge","program":"\#(program)","issuer_reference":{"customer_id":"cust_demo_001","card_account_id":"\#(account)"}}"#
            let moved = try await CardRegistryAPITests.send(client, .put, "/v1/cards/card_bridge_demo", json: card, key: Self.opsKey)
            #expect(moved.status.code < 300, "\(moved.json)")
            // The first try timed out (real time, the connection pool's timer) and its retry waits.
            let backoff = await clock.advanceToNextSleeper(upTo: .seconds(120))
            #expect(backoff.map { $0 > .zero && $0 <= .milliseconds(40) } == true, "the retry's backoff: \(String(describing: backoff))")
            let response = try await answer
            #expect(response.status == .notFound && response.json["code"] as? String == "card_not_found", "\(response.json)")
            #expect((response.json["detail"] as? String)?.contains(detail) == true, "\(response.json)")
            // The trail has one attempt at the issuer, the timed-out first, and the refusal: a retry
            // sent would be an attempt of its own, on record before the answer.
            let events = try await ResilienceTests.events(client, response)
            #expect(events.compactMap { $0["attempt"] as? Int }.filter { $0 >= 1 } == [1], "\(events)")
            #expect(events.first?["error_code"] as? String == "upstream_timeout" && events.last?["error_code"] as? String == "card_not_found")
            // And Bridge saw that one request (it logs the slow one once it has answered).
            for _ in 0..<500 where await sandbox.bridge.log.count == 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    @Test func theAdminViewIsForAdminClientsOnly() async throws {
        try await GatewayHarness.run(config: try ResilienceTests.config()) { client, _ in
            let refused = try await CardRegistryAPITests.send(client, .get, "/v1/admin/issuers")
            #expect(refused.status == .forbidden && refused.json["code"] as? String == "forbidden")
            let view = try await CardRegistryAPITests.send(client, .get, "/v1/admin/issuers", key: Self.opsKey)
            #expect(view.status == .ok)
            let issuers = try #require(view.json["issuers"] as? [[String: Any]])
            #expect(issuers.map { $0["issuer"] as? String } == ["bridge", "crossmint", "lithic", "marqeta", "tmp"])
            let tmp = try #require(issuers.last)
            let decisions = try #require((tmp["retry"] as? [String: Any])?["decisions"] as? [[String: Any]])
            #expect(decisions.first { $0["on"] as? String == "timeout" }?["action"] as? String == "fail")
            // The ops client touches no cards.
            let card = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody(), key: Self.opsKey)
            #expect(card.status == .forbidden)
        }
    }

    @Test func metricsCountAttemptsRetriesAndTransitions() async throws {
        let config = try ResilienceTests.config { $0.issuers["bridge"]!.circuitBreaker.failureThreshold = 2 }
        try await GatewayHarness.run(config: config) { client, _ in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":2}"#)
            // Two 503s open Bridge's only breaker: the third attempt is not made.
            let failed = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(failed.status == .serviceUnavailable)
            #expect((failed.json["detail"] as? String)?.contains("circuit breaker") == true)
            // The breaker opened on this request's own failures: the last of them is named.
            #expect((failed.json["detail"] as? String)?.contains("after upstream_unavailable") == true, "\(failed.json)")
            _ = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
            let metrics = try await client.execute(uri: "/metrics", method: .get)
            #expect(metrics.status == .ok)
            let text = String(buffer: metrics.body)
            let lines = text.split(separator: "\n")
            func value(_ prefix: String, _ parts: [String]) -> Double? {
                lines.first { $0.hasPrefix(prefix) && parts.allSatisfy($0.contains) }.flatMap { Double($0.split(separator: " ").last ?? "") }
            }
            #expect(value("gateway_upstream_attempts_total", [#"issuer="bridge""#, #"outcome="upstream_unavailable""#]) == 2)
            #expect(value("gateway_upstream_attempts_total", [#"issuer="bridge""#, #"outcome="succeeded""#]) == nil)
            #expect(value("gateway_upstream_attempts_total", [#"issuer="tmp""#, #"outcome="succeeded""#]) == 1)
            #expect(value("gateway_upstream_retries_total", [#"issuer="bridge""#, #"reason="503""#]) == 1)
            #expect(value("gateway_circuit_breaker_transitions_total", [#"issuer="bridge""#, #"from="closed""#, #"to="open""#]) == 1)
            #expect(value("gateway_upstream_latency_seconds_count", [#"issuer="bridge""#]) == 2)
            #expect(value("gateway_requests_total", [#"operation="apple_pay""#, #"outcome="upstream_unavailable""#]) == 1)
            #expect(value("gateway_requests_total", [#"operation="apple_pay""#, #"outcome="succeeded""#]) == 1)
        }
    }

    @Test(arguments: [
        (#"{"issuer":"bridge","mode":"sometimes"}"#, "mode", 400),
        (#"{"issuer":"bridge","mode":"slow"}"#, "delay_ms", 400),
        (#"{"issuer":"bridge","mode":"unavailable","count":0}"#, "count", 400),
        (#"{"issuer":"bridge","mode":"unavailable","delay_ms":5}"#, "delay_ms", 400),
        // Well-formed, but nothing here to fault: the issuer or its endpoint does not exist.
        (#"{"issuer":"nobody","mode":"unavailable"}"#, "unknown issuer", 404),
        (#"{"issuer":"bridge","mode":"unavailable","endpoint":3}"#, "endpoint", 404),
    ])
    func badFaultsAreClearProblems(json: String, mentions: String, status: Int) async throws {
        try await GatewayHarness.run(config: try ResilienceTests.config()) { client, _ in
            let response = try await CardRegistryAPITests.send(client, .post, "/v1/sandbox/faults", json: json, key: GatewayHarness.opsKey)
            #expect(response.status.code == status)
            #expect(response.json["code"] as? String == (status == 400 ? "invalid_request" : "not_found"))
            #expect((response.json["detail"] as? String)?.contains(mentions) == true, "\(response.json)")
            let queued = try await CardRegistryAPITests.send(client, .get, "/v1/sandbox/faults", key: GatewayHarness.opsKey)
            #expect((queued.json["faults"] as? [Any])?.isEmpty == true)
        }
    }

    @Test func faultsQueueListAndClear() async throws {
        try await GatewayHarness.run(config: try ResilienceTests.config()) { client, sandbox in
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":2}"#)
            try await ResilienceTests.addFault(client, #"{"issuer":"tmp","mode":"slow","delay_ms":10}"#)
            let listed = try await CardRegistryAPITests.send(client, .get, "/v1/sandbox/faults", key: GatewayHarness.opsKey)
            let faults = try #require(listed.json["faults"] as? [[String: Any]])
            #expect(faults.map { $0["simulator"] as? String } == ["sandbox://bridge", "sandbox://tmp"])
            #expect(faults.map { $0["remaining"] as? Int } == [2, 1])
            let cleared = try await CardRegistryAPITests.send(client, .delete, "/v1/sandbox/faults", key: GatewayHarness.opsKey)
            #expect((cleared.json["faults"] as? [Any])?.isEmpty == true)
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody()).status == .ok)
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    /// The queue is memory every client that reaches the simulator can add to: one simulator holds at most
    /// `SimulatorFaults.maxQueued` faults, the next is refused and nothing is added, and clearing
    /// makes room again. A config that lists more for one simulator is refused at start-up.
    @Test func aSimulatorsFaultQueueIsBounded() async throws {
        try await GatewayHarness.run(config: try ResilienceTests.config()) { client, _ in
            for _ in 0..<SimulatorFaults.maxQueued {
                try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable"}"#)
            }
            let refused = try await CardRegistryAPITests.send(client, .post, "/v1/sandbox/faults", json: #"{"issuer":"bridge","mode":"unavailable"}"#, key: GatewayHarness.opsKey)
            #expect(refused.status == .badRequest && refused.json["code"] as? String == "invalid_request")
            #expect((refused.json["detail"] as? String)?.contains("already holds \(SimulatorFaults.maxQueued) faults") == true, "\(refused.json)")
            let listed = try await CardRegistryAPITests.send(client, .get, "/v1/sandbox/faults", key: GatewayHarness.opsKey)
            #expect((listed.json["faults"] as? [Any])?.count == SimulatorFaults.maxQueued)
            // Another simulator has its own room.
            try await ResilienceTests.addFault(client, #"{"issuer":"tmp","mode":"unavailable"}"#)
            _ = try await CardRegistryAPITests.send(client, .delete, "/v1/sandbox/faults", key: GatewayHarness.opsKey)
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable"}"#)
        }
        #expect(SandboxFaultConfig.maxQueued == SimulatorFaults.maxQueued)
        var config = try ResilienceTests.config()
        config.sandbox.faults = Array(repeating: SandboxFaultConfig(issuer: "bridge", mode: .unavailable), count: SandboxFaultConfig.maxQueued + 1)
        let problems = config.validate(profiles: IssuerCatalog.profiles)
        #expect(problems.contains { $0.path == "sandbox.faults" && $0.reason.contains("at most \(SandboxFaultConfig.maxQueued)") }, "\(problems)")
    }

    @Test func faultsFromTheConfigArePlayedFromTheStart() async throws {
        let config = try ResilienceTests.config { $0.sandbox.faults = [SandboxFaultConfig(issuer: "crossmint", mode: .unavailable, count: 1)] }
        try await GatewayHarness.run(config: config) { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_crossmint_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .ok)
            #expect(await sandbox.crossmint.log.requests.map(\.status) == [503, 200])
        }
    }

    @Test func theProductionCompositionHasNoFaultRoutes() async throws {
        var config = try LocalIssuerTests.configWithBridgeDown(fallback: false)
        config.sandbox.enabled = false
        // Production trust: the sandbox device root is the sandbox's only.
        config.trust.anchors = ["apple"]
        config.issuers = [:]
        config.sandbox.cards = []
        config.local.enabled = false
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.serve({ onServerRunning in
            try buildGateway(config: config, environment: [:], logger: GatewayHarness.logger, store: store, onServerRunning: onServerRunning)
        }) { port in
            try await GatewayClient.with(port: port) { client in
                // The issuers are gone too, so a mounted route would also answer 404 (no such
                // issuer): the detail, and the listing, which names no issuer, tell them apart.
                let response = try await CardRegistryAPITests.send(client, .post, "/v1/sandbox/faults", json: #"{"issuer":"bridge","mode":"reset"}"#, key: GatewayHarness.opsKey)
                #expect(response.status == .notFound)
                #expect(response.json["code"] as? String == "not_found")
                #expect(response.json["detail"] as? String == "fault injection exists only in the sandbox", "\(response.json)")
                let listing = try await CardRegistryAPITests.send(client, .get, "/v1/sandbox/faults", key: GatewayHarness.opsKey)
                #expect(listing.status == .notFound && listing.json["detail"] as? String == "fault injection exists only in the sandbox",
                        "\(listing.json)")
            }
        }
    }
}
