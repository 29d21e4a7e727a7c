import Foundation
@testable import Gateway
import GatewayTestSupport
import Issuers
import Logging
import ProvisioningCore
import Sandbox
import Synchronization
import Testing

/// The caller's time decisions (backoff, Retry-After, the deadline) driven by a test clock, with
/// the real Bridge connector against the Bridge simulator over loopback HTTP: every wait is
/// asserted exactly, and nothing waits in real time.
struct ResilientCallerTests {
    static let card = CardRecord(id: "card_1", program: "demo", issuer: "bridge",
                                 issuerReference: .init(["customer_id": "cust_1", "card_account_id": "ca_1"]))
    /// Backoff ceilings 100, 200, 400 ms; with the jitter fixed at 0.5 the waits are 50, 100, 200 ms.
    static let policy = RetryPolicy(maxAttempts: 3, baseBackoff: .milliseconds(100), maxBackoff: .seconds(1),
                                    minAttemptTime: .milliseconds(50))
    static let logger = Logger(label: "resilient-caller-tests")

    static func request() throws -> ApplePayProvisioningRequest {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let body = try JSONSerialization.jsonObject(
            with: Data(contentsOf: root.appendingPathComponent("Config/sandbox/apple-pay-request.json"))) as! [String: Any]
        return try ApplePayProvisioningRequest(
            certificates: (body["certificates"] as! [String]).map { Data(base64Encoded: $0)! },
            nonce: Data(base64Encoded: body["nonce"] as! String)!,
            nonceSignature: Data(base64Encoded: body["nonce_signature"] as! String)!)
    }

    /// A Bridge simulator on a loopback port, and the issuer as the caller sees it.
    struct Rig: Sendable {
        let simulator: BridgeSimulator
        let upstream: UpstreamIssuer
        let clock: TestClock
        let gatewayClock: GatewayClock

        func context(deadlineIn: Duration) -> ProvisioningContext {
            ProvisioningContext(provisioningID: "prv_caller_test", deadline: gatewayClock.now.advanced(by: deadlineIn), clock: gatewayClock)
        }
    }

    static func withBridge<T: Sendable>(requestMS: Int = 5_000, _ body: (Rig) async throws -> T) async throws -> T {
        let simulator = BridgeSimulator(apiKey: "bridge_key", accounts: [.init(customerID: "cust_1", cardAccountID: "ca_1")])
        let server = simulator.server()
        var timeouts = TimeoutConfig()
        timeouts.requestMS = requestMS
        let http = UpstreamHTTP(issuer: "bridge", timeouts: timeouts, logger: logger)
        let clock = TestClock()
        do {
            let result = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await server.run() }
                defer { group.cancelAll() }
                let connector = BridgeConnector(issuer: "bridge", baseURL: await server.baseURL(), apiKey: Sensitive("bridge_key"), http: http)
                let upstream = UpstreamIssuer(issuer: "bridge", kind: .bridge, endpoints: [connector], retry: policy,
                                              decisions: .defaults(resendSafe: true), breaker: .default)
                return try await body(Rig(simulator: simulator, upstream: upstream, clock: clock, gatewayClock: GatewayClock(clock)))
            }
            try await http.shutdown()
            return result
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    /// One Apple Pay call through the caller; `attemptTakes` is how far the gateway's clock moves
    /// during each attempt (what a slow upstream would cost).
    static func call(
        _ rig: Rig, health: UpstreamHealth? = nil, deadlineIn: Duration = .seconds(10), attemptTakes: Duration = .zero,
        attempted: @escaping @Sendable () -> Void = {}
    ) async -> Result<ApplePayPayload, GatewayError> {
        let caller = ResilientCaller(health: health ?? UpstreamHealth(clock: rig.gatewayClock), metrics: nil, unit: { 0.5 })
        let context = rig.context(deadlineIn: deadlineIn)
        let request: ApplePayProvisioningRequest
        do { request = try Self.request() } catch { return .failure(GatewayError(.internal, "fixture")) }
        do throws(GatewayError) {
            return .success(try await caller.call(rig.upstream, context: context, logger: logger, onAttempt: { _ in }) {
                (connector, attempt) async throws(GatewayError) in
                defer { rig.clock.advance(by: attemptTakes) }
                attempted()
                return try await connector.provisionApplePay(request, card: card, context: attempt)
            })
        } catch {
            return .failure(error)
        }
    }

    /// A call cancelled while its request is out (a shutdown past its timeout) may have reached
    /// the issuer: it is reported as an attempt at its endpoint, for the audit trail, and the
    /// caller gets the cancellation's failure; nothing is sent again.
    @Test func aCallCancelledWhileOutIsReportedAsAnAttempt() async throws {
        try await Self.withBridge { rig in
            // Held at the simulator, recorded on arrival, until the caller closes the connection.
            await rig.simulator.faults.add(Fault(mode: .timeout, count: 1, delay: .seconds(30)))
            let reports = Mutex<[AttemptReport]>([])
            let attempts = Mutex(0)
            let caller = ResilientCaller(health: UpstreamHealth(clock: rig.gatewayClock), metrics: nil, unit: { 0.5 })
            let request = try Self.request()
            let call = Task { () -> GatewayError? in
                do throws(GatewayError) {
                    _ = try await caller.call(rig.upstream, context: rig.context(deadlineIn: .seconds(10)), logger: Self.logger, onAttempt: {
                        report in reports.withLock { $0.append(report) }
                    }) { (connector, attempt) async throws(GatewayError) in
                        attempts.withLock { $0 += 1 }
                        return try await connector.provisionApplePay(request, card: Self.card, context: attempt)
                    }
                    return nil
                } catch {
                    return error
                }
            }
            // The request is at the simulator (held there by the fault) before the call is cancelled.
            let arrival = ContinuousClock.now + .seconds(5)
            while await rig.simulator.log.count == 0, ContinuousClock.now < arrival { try await Task.sleep(for: .milliseconds(10)) }
            #expect(await rig.simulator.log.count == 1)
            call.cancel()
            let failure = await call.value
            #expect(failure?.code == .upstreamUnavailable)
            let recorded = reports.withLock { $0 }
            #expect(recorded.count == 1)
            #expect(recorded.first?.endpoint == rig.upstream.endpoints.first?.endpoint)
            #expect(recorded.first?.error?.code == .upstreamUnavailable)
            #expect(attempts.withLock { $0 } == 1)
            #expect(await rig.simulator.log.count == 1)
        }
    }

    @Test func aRetryWaitsItsJitteredBackoffOnTheClockBeforeTheNextAttempt() async throws {
        try await Self.withBridge { rig in
            await rig.simulator.faults.add(Fault(mode: .unavailable, count: 2))
            let call = Task { await Self.call(rig) }

            // First 503: the caller sleeps 50 ms (ceiling 100 ms, jitter 0.5) and sends nothing meanwhile.
            try #require(await rig.clock.waitForSleepers())
            #expect(rig.clock.requestedSleeps == [.milliseconds(50)])
            rig.clock.advance(by: .milliseconds(49))
            #expect(rig.clock.sleeperCount == 1)
            #expect(await rig.simulator.log.count == 1)
            rig.clock.advance(by: .milliseconds(1))

            // Second 503: 100 ms (ceiling 200 ms).
            try #require(await rig.clock.waitForSleepers())
            #expect(rig.clock.requestedSleeps == [.milliseconds(50), .milliseconds(100)])
            #expect(await rig.simulator.log.count == 2)
            rig.clock.advance(by: .milliseconds(100))

            let result = await call.value
            #expect((try? result.get()) != nil, "\(result)")
            #expect(await rig.simulator.log.requests.map(\.status) == [503, 503, 200])
        }
    }

    /// Failing over with no other endpoint open (the first refuses connections, which fails
    /// over, and the second's breaker is open) backs off before the same endpoint again, on the
    /// clock, as a retry does: an endpoint that refuses is not called again at once.
    @Test func aFailoverWithNoOtherEndpointOpenBacksOffBeforeTheSameOne() async throws {
        try await Self.withBridge { rig in
            let http = UpstreamHTTP(issuer: "bridge", timeouts: TimeoutConfig(), logger: Self.logger)
            // Port 1: nothing listens there, so every connect is refused.
            let refusing = BridgeConnector(issuer: "bridge", baseURL: URL(string: "http://127.0.0.1:1")!, apiKey: Sensitive("bridge_key"), http: http)
            let open = rig.upstream.endpoints[0]
            let upstream = UpstreamIssuer(issuer: "bridge", kind: .bridge, endpoints: [refusing, open], retry: Self.policy,
                                          decisions: .defaults(resendSafe: true), breaker: .default)
            let health = UpstreamHealth(clock: rig.gatewayClock)
            let once = CircuitBreaker.Policy(failureThreshold: 1, openDuration: .seconds(60), halfOpenProbes: 1)
            health.register(issuer: "bridge", index: 0, url: refusing.endpoint, policy: .default)
            health.register(issuer: "bridge", index: 1, url: open.endpoint, policy: once)
            #expect(health.acquire(issuer: "bridge", index: 1, url: open.endpoint) == .allowed)
            health.record(issuer: "bridge", index: 1, url: open.endpoint,
                          error: GatewayError(.upstreamUnavailable, "refused", condition: .connectFailed))
            #expect(health.acquire(issuer: "bridge", index: 1, url: open.endpoint) != .allowed, "the second endpoint's breaker is open")

            let attempts = Mutex(0)
            let caller = ResilientCaller(health: health, metrics: nil, unit: { 0.5 })
            let request = try Self.request()
            let call = Task { () -> GatewayError? in
                do throws(GatewayError) {
                    _ = try await caller.call(upstream, context: rig.context(deadlineIn: .seconds(10)), logger: Self.logger, onAttempt: { _ in }) {
                        (connector, attempt) async throws(GatewayError) in
                        attempts.withLock { $0 += 1 }
                        return try await connector.provisionApplePay(request, card: Self.card, context: attempt)
                    }
                    return nil
                } catch {
                    return error
                }
            }
            try #require(await rig.clock.waitForSleepers())
            #expect(rig.clock.requestedSleeps.filter { $0 > .zero } == [.milliseconds(50)])
            #expect(attempts.withLock { $0 } == 1)
            rig.clock.advance(by: .milliseconds(50))
            try #require(await rig.clock.waitForSleepers())
            #expect(rig.clock.requestedSleeps.filter { $0 > .zero } == [.milliseconds(50), .milliseconds(100)])
            #expect(attempts.withLock { $0 } == 2)
            rig.clock.advance(by: .milliseconds(100))
            let failure = await call.value
            #expect(failure?.code == .upstreamUnavailable, "\(String(describing: failure))")
            #expect(attempts.withLock { $0 } == 3)
            #expect(await rig.simulator.log.count == 0, "the endpoint whose breaker is open was called")
            try await http.shutdown()
        }
    }

    /// Ops pause the issuer while a request waits to retry it: the wait ends with no further
    /// attempt, and the caller gets the issuer's last failure. The same holds when a reload drops
    /// the paused issuer from the config while the request still holds its connector.
    @Test(arguments: [false, true])
    func aPauseDuringABackoffStopsTheRetries(dropFromConfig: Bool) async throws {
        try await Self.withBridge { rig in
            await rig.simulator.faults.add(Fault(mode: .unavailable, count: 2))
            let health = UpstreamHealth(clock: rig.gatewayClock)
            health.applyPauses(config: ["bridge": false])
            let call = Task { await Self.call(rig, health: health) }
            try #require(await rig.clock.waitForSleepers())
            #expect(await rig.simulator.log.count == 1)
            #expect(health.setPaused("bridge", true, by: "ops") != nil)
            if dropFromConfig { health.applyPauses(config: [:]) }
            rig.clock.advance(by: .milliseconds(50))
            // Were it to retry anyway, let its next waits pass, so that the test fails instead of hanging.
            for _ in 0..<3 where await rig.clock.waitForSleepers(limit: .milliseconds(300)) {
                rig.clock.advance(by: .seconds(1))
            }
            let result = await call.value
            guard case .failure(let failure) = result else {
                Issue.record("a paused issuer was called again: \(result)")
                return
            }
            #expect(failure.code == .upstreamUnavailable)
            #expect(failure.upstreamStatus == 503, "the issuer's own last answer, not a made-up one")
            #expect(await rig.simulator.log.count == 1, "no attempt after the pause")
            // And a request that starts now is refused before any call.
            let next = await Self.call(rig, health: health)
            #expect((try? next.get()) == nil)
            #expect(await rig.simulator.log.count == 1)
        }
    }

    @Test func aRetryAfterLongerThanTheBackoffIsWaitedExactly() async throws {
        try await Self.withBridge { rig in
            await rig.simulator.faults.add(Fault(mode: .throttled, count: 1, retryAfterSeconds: 2))
            let call = Task { await Self.call(rig) }
            try #require(await rig.clock.waitForSleepers())
            #expect(rig.clock.requestedSleeps == [.seconds(2)], "the upstream's Retry-After, not the 50 ms backoff")
            rig.clock.advance(by: .milliseconds(1_999))
            #expect(await rig.simulator.log.count == 1)
            rig.clock.advance(by: .milliseconds(1))
            let result = await call.value
            #expect((try? result.get()) != nil, "\(result)")
            #expect(await rig.simulator.log.requests.map(\.status) == [429, 200])
        }
    }

    @Test func aRetryAfterPastTheDeadlineIsNotWaitedForAndIsPassedOn() async throws {
        try await Self.withBridge { rig in
            await rig.simulator.faults.add(Fault(mode: .throttled, count: 1, retryAfterSeconds: 3))
            // 3 s + the 50 ms an attempt needs do not fit in 3 s.
            let result = await Self.call(rig, deadlineIn: .seconds(3))
            guard case .failure(let error) = result else { Issue.record("expected a failure, got \(result)"); return }
            #expect(error.code == .upstreamUnavailable)
            #expect(error.retryAfter == .seconds(3))
            #expect(rig.clock.requestedSleeps.isEmpty)
            #expect(await rig.simulator.log.count == 1)
        }
    }

    @Test func noAttemptStartsWithLessThanItsMinimumTimeLeft() async throws {
        try await Self.withBridge { rig in
            let result = await Self.call(rig, deadlineIn: .milliseconds(49))
            guard case .failure(let error) = result else { Issue.record("expected a failure, got \(result)"); return }
            #expect(error.code == .deadlineExceeded)
            #expect(await rig.simulator.log.count == 0)
        }
    }

    /// 6 s per attempt (on the test clock) within 12 s: the first attempt ends at 6 s, waits 50 ms,
    /// the second ends at 12.05 s, and no wait that leaves no time for an attempt is started. (The
    /// scale is the clock's, not real time: the second try's real HTTP timeout is the ~6 s left,
    /// which a loaded machine cannot miss, where 550 ms once was missed.)
    @Test func theDeadlineEndsRetriesWithTheLastFailureNamed() async throws {
        try await Self.withBridge { rig in
            await rig.simulator.faults.add(Fault(mode: .unavailable, count: 5))
            let call = Task { await Self.call(rig, deadlineIn: .milliseconds(12_000), attemptTakes: .milliseconds(6_000)) }
            try #require(await rig.clock.advanceToNextSleeper() == .milliseconds(50))
            let result = await call.value
            guard case .failure(let error) = result else { Issue.record("expected a failure, got \(result)"); return }
            #expect(error.code == .deadlineExceeded)
            #expect(error.detail.contains("after upstream_unavailable"), "\(error.detail)")
            #expect(error.upstreamStatus == 503)
            #expect(rig.clock.requestedSleeps == [.milliseconds(50)])
            #expect(await rig.simulator.log.count == 2)
        }
    }

    /// The same with upstream timeouts (a real 1 s per-try timeout): the answer is the last
    /// try's own timeout. (With 400 ms, a connect slowed past it by a loaded machine made the
    /// first attempt a connection failure, and the answer `deadline_exceeded` after it.)
    @Test func theDeadlineAfterTimeoutsAnswersTheTimeout() async throws {
        try await Self.withBridge(requestMS: 1_000) { rig in
            await rig.simulator.faults.add(Fault(mode: .timeout, count: 5, delay: .seconds(3)))
            let attempts = Mutex(0)
            let call = Task {
                await Self.call(rig, deadlineIn: .milliseconds(3_000), attemptTakes: .milliseconds(1_500),
                                attempted: { attempts.withLock { $0 += 1 } })
            }
            try #require(await rig.clock.advanceToNextSleeper() == .milliseconds(50))
            let result = await call.value
            guard case .failure(let error) = result else { Issue.record("expected a failure, got \(result)"); return }
            #expect(error.code == .upstreamTimeout)
            #expect(rig.clock.requestedSleeps == [.milliseconds(50)])
            // Exactly two attempts: the deadline left room for a second, not a third. (Whether the
            // second reached the simulator within its real 1 s depends on the machine's load:
            // on a busy CI machine the connect alone can take that long, so only "at most two" is
            // asserted there.)
            #expect(attempts.withLock { $0 } == 2)
            #expect(await rig.simulator.log.count <= 2)
        }
    }
}
