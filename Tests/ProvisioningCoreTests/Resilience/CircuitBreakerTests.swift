import ProvisioningCore
import Testing

/// Every transition of the breaker, driven by instants the test chooses (no sleeping).
struct CircuitBreakerTests {
    let t0 = GatewayClock.Instant(offset: .seconds(1_000))
    let policy = CircuitBreaker.Policy(failureThreshold: 3, openDuration: .seconds(30), halfOpenProbes: 2)

    func at(_ seconds: Double) -> GatewayClock.Instant { t0.advanced(by: .milliseconds(Int(seconds * 1000))) }

    /// Calls `acquire` then `record(success:)` at `time`, as a real call would.
    func call(_ breaker: inout CircuitBreaker, success: Bool, at time: Double) -> CircuitBreaker.Transition? {
        let (permission, _) = breaker.acquire(at: at(time))
        #expect(permission == .allowed)
        return breaker.record(success: success, at: at(time))
    }

    @Test func closedStaysClosedBelowTheThresholdAndASuccessResetsTheCount() {
        var breaker = CircuitBreaker(policy: policy)
        #expect(call(&breaker, success: false, at: 0) == nil)
        #expect(call(&breaker, success: false, at: 1) == nil)
        #expect(breaker.state == .closed(consecutiveFailures: 2))
        #expect(call(&breaker, success: true, at: 2) == nil)
        #expect(breaker.state == .closed(consecutiveFailures: 0))
        // Failures must be consecutive: two more still leave it closed.
        _ = call(&breaker, success: false, at: 3)
        _ = call(&breaker, success: false, at: 4)
        #expect(breaker.state == .closed(consecutiveFailures: 2))
    }

    @Test func closedOpensAtTheThresholdAndRefusesUntilTheOpenDurationPasses() {
        var breaker = CircuitBreaker(policy: policy)
        _ = call(&breaker, success: false, at: 0)
        _ = call(&breaker, success: false, at: 1)
        #expect(call(&breaker, success: false, at: 2) == .init(from: "closed", to: "open"))
        #expect(breaker.state == .open(until: at(32)))
        #expect(breaker.acquire(at: at(2.5)).0 == .refused(until: at(32)))
        #expect(breaker.acquire(at: at(31.999)).0 == .refused(until: at(32)))
    }

    @Test func openTurnsHalfOpenWhenItsTimeIsUpAndLetsOnlyTheProbesThrough() {
        var breaker = CircuitBreaker(policy: policy)
        for second in 0..<3 { _ = call(&breaker, success: false, at: Double(second)) }
        let (first, transition) = breaker.acquire(at: at(32))
        #expect(first == .allowed)
        #expect(transition == .init(from: "open", to: "half_open"))
        #expect(breaker.state == .halfOpen(probesInFlight: 1, successes: 0))
        #expect(breaker.acquire(at: at(32)).0 == .allowed)  // the second probe
        if case .refused = breaker.acquire(at: at(32)).0 {} else { Issue.record("a third concurrent probe was let through") }
    }

    @Test func halfOpenClosesAfterEnoughSuccessfulProbes() {
        var breaker = CircuitBreaker(policy: policy)
        for second in 0..<3 { _ = call(&breaker, success: false, at: Double(second)) }
        #expect(breaker.acquire(at: at(40)).0 == .allowed)
        #expect(breaker.record(success: true, at: at(40)) == nil)
        #expect(breaker.state == .halfOpen(probesInFlight: 0, successes: 1))
        #expect(breaker.acquire(at: at(41)).0 == .allowed)
        #expect(breaker.record(success: true, at: at(41)) == .init(from: "half_open", to: "closed"))
        #expect(breaker.state == .closed(consecutiveFailures: 0))
    }

    @Test func halfOpenReopensOnAFailedProbeForAnotherFullOpenDuration() {
        var breaker = CircuitBreaker(policy: policy)
        for second in 0..<3 { _ = call(&breaker, success: false, at: Double(second)) }
        #expect(breaker.acquire(at: at(50)).0 == .allowed)
        #expect(breaker.record(success: false, at: at(50)) == .init(from: "half_open", to: "open"))
        #expect(breaker.state == .open(until: at(80)))
        #expect(breaker.acquire(at: at(79)).0 == .refused(until: at(80)))
    }

    @Test func aProbeThatTellsNothingGivesItsSlotBack() {
        var breaker = CircuitBreaker(policy: CircuitBreaker.Policy(failureThreshold: 1, openDuration: .seconds(1), halfOpenProbes: 1))
        _ = call(&breaker, success: false, at: 0)
        #expect(breaker.acquire(at: at(1)).0 == .allowed)
        if case .refused = breaker.acquire(at: at(1)).0 {} else { Issue.record("a second probe was let through") }
        breaker.release()  // e.g. the upstream answered 400: nothing about its health
        #expect(breaker.acquire(at: at(1)).0 == .allowed)
    }

    @Test func aLateResultWhileOpenChangesNothing() {
        var breaker = CircuitBreaker(policy: policy)
        for second in 0..<3 { _ = call(&breaker, success: false, at: Double(second)) }
        let open = breaker.state
        #expect(breaker.record(success: true, at: at(5)) == nil)
        #expect(breaker.record(success: false, at: at(6)) == nil)
        #expect(breaker.state == open)
    }
}
