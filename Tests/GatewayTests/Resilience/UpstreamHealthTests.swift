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

    /// Failures of the gateway's own pool (every connection busy with other calls: a wait that
    /// ran out, or a timeout in the little time the wait left) do not open a breaker, however many
    /// come in a row, nor do they reset the count of the endpoint's own failures.
    @Test func theGatewaysOwnSaturationDoesNotOpenABreaker() {
        let health = UpstreamHealth()
        health.reconcile([.init(issuer: "marqeta", index: 0, url: "https://mq", policy: Self.policy)])
        let saturated = [
            GatewayError(.upstreamUnavailable, "no connection came free", condition: .connectFailed).waitedForAConnection(),
            GatewayError(.upstreamTimeout, "timed out after waiting", condition: .timedOut).waitedForAConnection(),
        ]
        for index in 0..<10 {
            #expect(health.acquire(issuer: "marqeta", index: 0, url: "https://mq") == .allowed)
            health.record(issuer: "marqeta", index: 0, url: "https://mq", error: saturated[index % 2])
        }
        #expect(health.snapshot().first?.state == "closed")
        // The endpoint's own failures still count, and the saturation between them does not reset them.
        let own = GatewayError(.upstreamTimeout, "timed out", condition: .timedOut)
        #expect(own.countsAgainstEndpoint)
        #expect(health.acquire(issuer: "marqeta", index: 0, url: "https://mq") == .allowed)
        health.record(issuer: "marqeta", index: 0, url: "https://mq", error: own)
        #expect(health.acquire(issuer: "marqeta", index: 0, url: "https://mq") == .allowed)
        health.record(issuer: "marqeta", index: 0, url: "https://mq", error: saturated[0])
        #expect(health.acquire(issuer: "marqeta", index: 0, url: "https://mq") == .allowed)
        health.record(issuer: "marqeta", index: 0, url: "https://mq", error: own)
        #expect(health.snapshot().first?.state == "open")
        // A retry table's recoding keeps the mark.
        #expect(saturated[1].recoded(.upstreamUnavailable).countsAgainstEndpoint == false)
    }
}
