import Foundation
import Gateway
import GatewayTestSupport
import GatewayServer
import Hummingbird
import HummingbirdTesting
import ProvisioningCore
import Sandbox
import Synchronization
import SandboxGateway
import Testing

/// Faults played by the real simulators over real HTTP, and what the gateway answers: the final
/// status and code, the attempts the simulator counted, the waits the gateway asked its clock for,
/// and the audit trail. The gateway's clock is a test clock that jumps over every wait, so
/// backoffs and Retry-After cost no real time; the exact timing decisions are asserted in
/// `ResilientCallerTests`. Only a generous real-time upper bound remains here.
struct ResilienceTests {
    static let deadlineMS = 3_000
    /// Real time: generous, so a loaded CI machine answering slowly is not taken for a timeout.
    static let perTryMS = 2_000

    /// The sandbox with millisecond-scale timing.
    static func config(_ mutate: (inout GatewayConfig) -> Void = { _ in }) throws -> GatewayConfig {
        var config = try GatewayHarness.sandboxConfig()
        config.server.deadlineMS = deadlineMS
        for name in config.issuers.keys {
            config.issuers[name]!.timeouts.requestMS = perTryMS
            config.issuers[name]!.retry.baseBackoffMS = 10
            config.issuers[name]!.retry.maxBackoffMS = 40
            config.issuers[name]!.retry.minAttemptMS = 50
        }
        mutate(&config)
        return config
    }

    static func addFault(_ client: GatewayClient, _ json: String) async throws {
        let response = try await CardRegistryAPITests.send(client, .post, "/v1/sandbox/faults", json: json, key: GatewayHarness.opsKey)
        #expect(response.status == .ok, "fault \(json) refused: \(String(buffer: response.body))")
    }

    /// Runs `body` against the sandbox gateway whose clock is `clock`, moved on over each wait as
    /// soon as someone sleeps on it.
    static func runSkippingWaits(
        config: GatewayConfig, clock: TestClock = TestClock(), wallClock: (@Sendable () -> Date)? = nil,
        _ body: @escaping @Sendable (GatewayClient, SandboxUpstreams) async throws -> Void
    ) async throws {
        let driver = Task {
            // Waits of a request (backoff, Retry-After) are skipped; the purge job's 10-minute interval is not.
            while !Task.isCancelled { _ = await clock.advanceToNextSleeper(upTo: .seconds(120), limit: .seconds(3_600)) }
        }
        defer { driver.cancel() }
        try await GatewayHarness.run(config: config, clock: clock, wallClock: wallClock, body)
    }

    /// The waits a request asked for (backoff, Retry-After), without the purge job's interval.
    static func requestWaits(_ clock: TestClock) -> [Duration] {
        clock.requestedSleeps.filter { $0 <= .seconds(120) }
    }

    static func events(_ client: GatewayClient, _ response: GatewayResponse) async throws -> [[String: Any]] {
        let id = try #require(response.json["provisioning_id"] as? String)
        let audit = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)")
        return try #require(audit.json["events"] as? [[String: Any]])
    }

    struct Scenario: Sendable, CustomTestStringConvertible {
        let issuer: String
        let fault: String
        /// nil: 200.
        let code: String?
        let status: Int
        let attempts: Int
        /// The upstream's Retry-After, when the gateway must wait exactly that.
        var waits: [Duration]? = nil
        /// The last attempt ended without saying whether the issuer acted (a timeout, a reset
        /// after sending): the answer is then never `retryable`, whatever its code.
        var outcomeUnknown = false
        var testDescription: String { "\(issuer) \(fault) -> \(code ?? "200") in \(attempts)" }
    }

    static let scenarios: [Scenario] = [
        // Bridge honours Idempotency-Key: whatever may have reached it is sent again.
        Scenario(issuer: "bridge", fault: #""mode":"unavailable","count":2"#, code: nil, status: 200, attempts: 3),
        // A last 503 may have come from a proxy after the request reached Bridge: the caller's
        // retry would be another provisioning (another idempotency key at Bridge), so not retryable.
        Scenario(issuer: "bridge", fault: #""mode":"unavailable","count":5"#, code: "upstream_unavailable", status: 503, attempts: 3,
                 outcomeUnknown: true),
        Scenario(issuer: "bridge", fault: #""mode":"throttled","count":1,"retry_after_seconds":1"#, code: nil, status: 200, attempts: 2,
                 waits: [.seconds(1)]),
        Scenario(issuer: "bridge", fault: #""mode":"timeout","count":1,"delay_ms":6000"#, code: nil, status: 200, attempts: 2),
        Scenario(issuer: "bridge", fault: #""mode":"timeout","count":5,"delay_ms":6000"#, code: "upstream_timeout", status: 504,
                 attempts: 3, outcomeUnknown: true),
        Scenario(issuer: "bridge", fault: #""mode":"reset","count":1"#, code: nil, status: 200, attempts: 2),
        Scenario(issuer: "bridge", fault: #""mode":"slow","count":1,"delay_ms":100"#, code: nil, status: 200, attempts: 1),
        Scenario(issuer: "bridge", fault: #""mode":"garbage","count":1"#, code: nil, status: 200, attempts: 2),
        Scenario(issuer: "bridge", fault: #""mode":"rejected","count":1"#, code: "upstream_rejected", status: 422, attempts: 1),
        // TMP's POST has no idempotency key: sent again only when TMP said it did not handle it
        // (429); a 503 may have come from a proxy after the request reached TMP.
        Scenario(issuer: "tmp", fault: #""mode":"unavailable","count":1"#, code: "upstream_unavailable", status: 503, attempts: 1,
                 outcomeUnknown: true),
        Scenario(issuer: "tmp", fault: #""mode":"throttled","count":1,"retry_after_seconds":0"#, code: nil, status: 200, attempts: 2),
        Scenario(issuer: "tmp", fault: #""mode":"timeout","count":1,"delay_ms":6000"#, code: "upstream_timeout", status: 504, attempts: 1,
                 outcomeUnknown: true),
        Scenario(issuer: "tmp", fault: #""mode":"reset","count":1"#, code: "upstream_unavailable", status: 503, attempts: 1,
                 outcomeUnknown: true),
        Scenario(issuer: "tmp", fault: #""mode":"garbage","count":1"#, code: "upstream_protocol_error", status: 502, attempts: 1),
        Scenario(issuer: "tmp", fault: #""mode":"rejected","count":1"#, code: "upstream_rejected", status: 422, attempts: 1),
        // Crossmint's call is a GET: safe to send again.
        Scenario(issuer: "crossmint", fault: #""mode":"reset","count":1"#, code: nil, status: 200, attempts: 2),
        Scenario(issuer: "crossmint", fault: #""mode":"unavailable","count":3"#, code: "upstream_unavailable", status: 503, attempts: 3,
                 outcomeUnknown: true),
    ]

    @Test(arguments: scenarios)
    func eachFaultEndsInTimeWithTheRightAnswer(_ scenario: Scenario) async throws {
        let clock = TestClock()
        try await Self.runSkippingWaits(config: try Self.config(), clock: clock) { client, sandbox in
            try await Self.addFault(client, #"{"issuer":"\#(scenario.issuer)",\#(scenario.fault)}"#)
            let simulator = try #require(sandbox.instance(issuer: scenario.issuer))
            let before = await simulator.log.count
            let started = ContinuousClock.now
            let response = try await GatewayHarness.provision(client, card: "card_\(scenario.issuer)_demo", body: try GatewayHarness.requestBody())
            let elapsed = started.duration(to: .now)

            #expect(Int(response.status.code) == scenario.status, "\(String(buffer: response.body))")
            if let code = scenario.code {
                #expect(response.json["code"] as? String == code)
                #expect(response.headers[.contentType] == "application/problem+json")
                let retryable = try #require(GatewayError.Code(rawValue: code)).isRetryable && !scenario.outcomeUnknown
                #expect(response.json["retryable"] as? Bool == retryable)
            } else {
                #expect(response.json["issuer"] as? String == scenario.issuer)
            }
            #expect(await simulator.log.count - before == scenario.attempts, "attempts counted at the simulator")
            // Real time is only what the upstream's own delays and per-try timeouts cost (at most
            // three 2 s timeouts); the bound is generous for a loaded machine.
            #expect(elapsed < .seconds(20), "took \(elapsed)")
            // One wait before each attempt after the first (a backoff, or the Retry-After).
            let requestWaits = Self.requestWaits(clock)
            #expect(requestWaits.count == scenario.attempts - 1, "waits: \(requestWaits)")
            if let waits = scenario.waits { #expect(requestWaits == waits) }

            let events = try await Self.events(client, response)
            let attemptEvents = events.filter { ($0["attempt"] as? Int ?? 0) > 0 }
            #expect(attemptEvents.map { $0["attempt"] as? Int } == Array(1...scenario.attempts).map { $0 })
            #expect(attemptEvents.allSatisfy { $0["issuer"] as? String == scenario.issuer && $0["endpoint"] is String })
            #expect(attemptEvents.dropLast().allSatisfy { $0["outcome"] as? String == "failed" && $0["error_code"] is String })
            // A failed attempt never claims the upstream said 200 (a timeout or reset has no status).
            #expect(attemptEvents.filter { $0["outcome"] as? String == "failed" }.allSatisfy { $0["upstream_status"] as? Int != 200 })
            #expect(attemptEvents.last?["outcome"] as? String == (scenario.code == nil ? "succeeded" : "failed"))
            if let code = scenario.code { #expect(events.last?["error_code"] as? String == code) }
        }
    }

    @Test func bridgeGetsTheSameIdempotencyKeyOnEveryRetry() async throws {
        try await GatewayHarness.run(config: try Self.config()) { client, sandbox in
            try await Self.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":2}"#)
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .ok)
            let seen = await sandbox.bridge.log.requests
            #expect(seen.map(\.status) == [503, 503, 200])
            let keys = Set(seen.compactMap(\.idempotencyKey))
            #expect(seen.allSatisfy { $0.idempotencyKey != nil } && keys.count == 1, "keys seen: \(keys)")
        }
    }

    /// The upstream's own answer, with its Retry-After passed on, not a wait past the deadline.
    @Test func aRetryAfterLongerThanTheDeadlineIsNotWaitedFor() async throws {
        let clock = TestClock()
        try await Self.runSkippingWaits(config: try Self.config(), clock: clock) { client, sandbox in
            try await Self.addFault(client, #"{"issuer":"bridge","mode":"throttled","count":1,"retry_after_seconds":30}"#)
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(Self.requestWaits(clock).isEmpty)
            #expect(response.status == .serviceUnavailable)
            #expect(response.json["code"] as? String == "upstream_unavailable")
            #expect(response.json["retryable"] as? Bool == true)
            #expect(response.headers[.retryAfter] == "30")
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    /// An issuer's Retry-After is read as at most an hour: 2^63 - 1 seconds once overflowed the
    /// problem's header arithmetic and brought the whole process down. The caller is told an hour,
    /// and the gateway goes on serving.
    @Test(arguments: [Int.max, 9_223_372_036_854_776])
    func aHugeRetryAfterIsCappedAndCrashesNothing(seconds: Int) async throws {
        let clock = TestClock()
        try await Self.runSkippingWaits(config: try Self.config(), clock: clock) { client, sandbox in
            // Past what the sandbox's fault API takes from a caller: set on the simulator itself.
            await sandbox.bridge.faults.add(Fault(mode: .throttled, count: 1, retryAfterSeconds: seconds))
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .serviceUnavailable)
            #expect(response.json["code"] as? String == "upstream_unavailable")
            #expect(response.headers[.retryAfter] == "3600")
            #expect(Self.requestWaits(clock).isEmpty)
            let next = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(next.status == .ok)
            #expect(await sandbox.bridge.log.requests.map(\.status) == [429, 200])
        }
    }

    /// A route's own deadline replaces the server's: 40 ms leaves no time for an attempt (50 ms
    /// minimum), where the server's 3 s would. The clock does not move, so this is exact.
    @Test func aRouteDeadlineBoundsEveryAttempt() async throws {
        let config = try Self.config { config in
            config.routing.rules = [RoutingRuleConfig(match: .init(program: "demo"), issuer: "bridge", deadlineMS: 40)]
        }
        try await GatewayHarness.run(config: config, clock: TestClock()) { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .gatewayTimeout)
            #expect(response.json["code"] as? String == "deadline_exceeded")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }
}
