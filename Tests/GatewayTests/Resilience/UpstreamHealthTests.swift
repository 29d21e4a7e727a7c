import Gateway
import ProvisioningCore
import Testing

/// The breakers' bookkeeping across a reload.
@Suite struct UpstreamHealthTests {
    static let policy = CircuitBreaker.Policy(failureThreshold: 2, openDuration: .seconds(30), halfOpenProbes: 1)

    /// A request that began before a reload moved an issuer's endpoint to another address keeps
    /// calling the old one; its calls and failures are not the new endpoint's. They had opened
    /// the new address's breaker, which had never been called (config audit V5), and every new
    /// request was refused until it closed.
    @Test func aRequestFromBeforeAReloadIsNotChargedToTheEndpointThatReplacedItsOwn() {
        let health = UpstreamHealth()
        health.reconcile([.init(issuer: "bridge", index: 0, url: "https://old", policy: Self.policy)])
        #expect(health.acquire(issuer: "bridge", index: 0, url: "https://old") == .allowed)
        // The reload: position 0 is now another address, whose breaker starts closed.
        health.reconcile([.init(issuer: "bridge", index: 0, url: "https://new", policy: Self.policy)])
        let failure = GatewayError(.upstreamUnavailable, "503", condition: .status(503))
        for _ in 0..<3 {
            health.record(issuer: "bridge", index: 0, url: "https://old", error: failure)
            #expect(health.acquire(issuer: "bridge", index: 0, url: "https://old") == .allowed)
        }
        let new = health.snapshot().first { $0.index == 0 }
        #expect(new?.url == "https://new" && new?.state == "closed" && new?.failures == 0 && new?.calls == 0, "\(String(describing: new))")
        #expect(health.acquire(issuer: "bridge", index: 0, url: "https://new") == .allowed)

        // The new endpoint's own failures still open its breaker.
        for _ in 0..<2 {
            health.record(issuer: "bridge", index: 0, url: "https://new", error: failure)
            _ = health.acquire(issuer: "bridge", index: 0, url: "https://new")
        }
        #expect(health.snapshot().first { $0.index == 0 }?.state == "open")
    }
}
