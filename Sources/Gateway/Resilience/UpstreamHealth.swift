import Foundation
import ProvisioningCore
import Synchronization

/// Every issuer endpoint's circuit breaker and recent failures, and which issuers ops paused,
/// shared by all requests of one gateway. The breakers and the pause switch are pure state
/// machines; this holds them under locks, reads the injected clock, and reports transitions and
/// pauses to the metrics.
public final class UpstreamHealth: Sendable {
    public struct EndpointKey: Hashable, Sendable {
        public let issuer: IssuerID
        public let index: Int
    }

    /// One failure, for the admin view (no request data).
    public struct Failure: Sendable {
        public let at: Date
        public let code: GatewayError.Code
        public let condition: String
    }

    struct Endpoint {
        var url: String
        var breaker: CircuitBreaker
        var recentFailures: [Failure] = []
        var calls = 0
        var failures = 0
        /// Failures that count against the endpoint since its last success, whatever the breaker's
        /// state (an open breaker's own state keeps no count, and the admin view had said 0).
        var consecutiveFailures = 0

        /// Whether a caller that names `url` (nil: any) means this endpoint.
        func isAt(_ url: String?) -> Bool { url.map { $0 == self.url } ?? true }
    }

    /// How many failures per endpoint the admin view keeps.
    static let recentFailureLimit = 20

    /// Open windows are measured on it.
    public let clock: GatewayClock
    private let wallClock: @Sendable () -> Date
    private let metrics: GatewayMetrics?
    private let endpoints: Mutex<[EndpointKey: Endpoint]>
    /// The gateway's one pause state: no issuer is paused until `applyPauses` reads the config.
    private let pauses = Mutex(PauseSwitch())

    public init(
        metrics: GatewayMetrics? = nil, clock: GatewayClock = .continuous,
        wallClock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.metrics = metrics
        self.clock = clock
        self.wallClock = wallClock
        self.endpoints = Mutex([:])
    }

    /// Registers an endpoint; called once per endpoint at start-up.
    public func register(issuer: IssuerID, index: Int, url: String, policy: CircuitBreaker.Policy) {
        endpoints.withLock { $0[EndpointKey(issuer: issuer, index: index)] = Endpoint(url: url, breaker: CircuitBreaker(policy: policy)) }
        metrics?.breakerState(issuer: issuer, endpoint: url, "closed")
    }

    /// One endpoint a config generation calls, as `reconcile` takes it.
    public struct EndpointSpec: Sendable {
        public let issuer: IssuerID
        public let index: Int
        public let url: String
        public let policy: CircuitBreaker.Policy
        public init(issuer: IssuerID, index: Int, url: String, policy: CircuitBreaker.Policy) {
            self.issuer = issuer
            self.index = index
            self.url = url
            self.policy = policy
        }
    }

    /// The endpoints of a new config generation (a reload): an endpoint with the same issuer,
    /// position, address and breaker policy keeps its breaker, counts and recent failures; a
    /// changed one starts closed; one the config no longer names is forgotten.
    /// An endpoint's breaker gauge no endpoint shows any more (its issuer or address gone) leaves
    /// the exposition, instead of showing its last state for ever.
    public func reconcile(_ specs: [EndpointSpec]) {
        let (fresh, gone) = endpoints.withLock { all -> ([EndpointSpec], Set<GaugeKey>) in
            var next: [EndpointKey: Endpoint] = [:]
            var fresh: [EndpointSpec] = []
            for spec in specs {
                let key = EndpointKey(issuer: spec.issuer, index: spec.index)
                if let kept = all[key], kept.url == spec.url, kept.breaker.policy == spec.policy {
                    next[key] = kept
                } else {
                    next[key] = Endpoint(url: spec.url, breaker: CircuitBreaker(policy: spec.policy))
                    fresh.append(spec)
                }
            }
            let shown = { (endpoints: [EndpointKey: Endpoint]) in Set(endpoints.map { GaugeKey(issuer: $0.key.issuer, url: $0.value.url) }) }
            let gone = shown(all).subtracting(shown(next))
            all = next
            return (fresh, gone)
        }
        for key in gone { metrics?.forgetBreakerState(issuer: key.issuer, endpoint: key.url) }
        for spec in fresh { metrics?.breakerState(issuer: spec.issuer, endpoint: spec.url, "closed") }
    }

    /// A breaker gauge's labels.
    private struct GaugeKey: Hashable {
        let issuer: IssuerID
        let url: String
    }

    /// May a call go to this endpoint now? Unknown endpoints are always allowed.
    ///
    /// `url`, here and below, is the address the caller's generation has at that position: a
    /// request that began before a reload changed the endpoint there is not the new endpoint's
    /// (its failures were charged to it, which opened a breaker on an address never called; the
    /// config audit found it), so its calls are let through and recorded nowhere.
    public func acquire(issuer: IssuerID, index: Int, url expected: String? = nil) -> CircuitBreaker.Permission {
        let now = clock.now
        let (permission, transition, url) = endpoints.withLock { all -> (CircuitBreaker.Permission, CircuitBreaker.Transition?, String) in
            guard var endpoint = all[EndpointKey(issuer: issuer, index: index)], endpoint.isAt(expected) else {
                return (.allowed, nil, "")
            }
            let (permission, transition) = endpoint.breaker.acquire(at: now)
            if permission == .allowed { endpoint.calls += 1 }
            all[EndpointKey(issuer: issuer, index: index)] = endpoint
            return (permission, transition, endpoint.url)
        }
        if let transition { metrics?.breakerTransition(issuer: issuer, endpoint: url, transition) }
        return permission
    }

    /// The end of an allowed call: nil error for a success.
    public func record(issuer: IssuerID, index: Int, url expected: String? = nil, error: GatewayError?) {
        let now = clock.now
        let wall = wallClock()
        let (transition, url) = endpoints.withLock { all -> (CircuitBreaker.Transition?, String) in
            let key = EndpointKey(issuer: issuer, index: index)
            guard var endpoint = all[key], endpoint.isAt(expected) else { return (nil, "") }
            var transition: CircuitBreaker.Transition?
            if let error {
                endpoint.failures += 1
                endpoint.recentFailures.append(Failure(at: wall, code: error.code, condition: error.condition?.description ?? "other"))
                if endpoint.recentFailures.count > Self.recentFailureLimit { endpoint.recentFailures.removeFirst() }
                if error.countsAgainstEndpoint {
                    endpoint.consecutiveFailures += 1
                    transition = endpoint.breaker.record(success: false, at: now)
                } else {
                    endpoint.breaker.release()
                }
            } else {
                endpoint.consecutiveFailures = 0
                transition = endpoint.breaker.record(success: true, at: now)
            }
            all[key] = endpoint
            return (transition, endpoint.url)
        }
        if let transition { metrics?.breakerTransition(issuer: issuer, endpoint: url, transition) }
    }

    /// A call that was allowed but never made (the deadline came first): its probe slot is freed.
    public func release(issuer: IssuerID, index: Int, url expected: String? = nil) {
        endpoints.withLock { all in
            let key = EndpointKey(issuer: issuer, index: index)
            guard let endpoint = all[key], endpoint.isAt(expected) else { return }
            all[key]?.breaker.release()
        }
    }

    // MARK: Paused issuers

    /// The config file's `issuers.<name>.paused` (issuer -> paused), once at start-up. A config
    /// reload calls it again with the new file: only what the file changed takes effect, so an
    /// admin's pause is kept (`PauseSwitch.apply`).
    /// An issuer the file no longer names leaves the pause gauge.
    public func applyPauses(config: [IssuerID: Bool]) {
        let (all, gone) = pauses.withLock { pauses in
            let before = Set(pauses.all.map(\.issuer))
            pauses.apply(config: config)
            return (pauses.all, before.subtracting(config.keys))
        }
        for issuer in gone { metrics?.forgetIssuerPaused(issuer) }
        for (issuer, state) in all { metrics?.issuerPaused(issuer, state.paused) }
    }

    /// A paused issuer gets no calls.
    public func isPaused(_ issuer: IssuerID) -> Bool {
        pauses.withLock { $0.isPaused(issuer) }
    }

    public func pauseState(_ issuer: IssuerID) -> PauseSwitch.State? {
        pauses.withLock { $0.state(issuer) }
    }

    /// An admin's pause or resume; nil for an issuer the config does not name.
    public func setPaused(_ issuer: IssuerID, _ paused: Bool, by admin: String) -> PauseSwitch.State? {
        let state = pauses.withLock { $0.set(issuer, paused: paused, by: admin) }
        if state != nil { metrics?.issuerPaused(issuer, paused) }
        return state
    }

    public struct EndpointSnapshot: Sendable {
        public let issuer: IssuerID
        public let index: Int
        public let url: String
        public let state: String
        public let openUntil: Date?
        public let consecutiveFailures: Int
        public let calls: Int
        public let failures: Int
        public let recentFailures: [Failure]
    }

    /// Every endpoint's state now, ordered by issuer then failover order.
    public func snapshot() -> [EndpointSnapshot] {
        let now = clock.now
        let wall = wallClock()
        return endpoints.withLock { all in
            all.sorted { ($0.key.issuer.rawValue, $0.key.index) < ($1.key.issuer.rawValue, $1.key.index) }.map { key, endpoint in
                var state = endpoint.breaker.state.name
                var openUntil: Date?
                switch endpoint.breaker.state {
                case .open(let until):
                    if until <= now {
                        state = "half_open"  // the next call will be a probe
                    } else {
                        openUntil = wall.addingTimeInterval(Double(now.duration(to: until).wholeMilliseconds) / 1000)
                    }
                case .closed, .halfOpen:
                    break
                }
                return EndpointSnapshot(issuer: key.issuer, index: key.index, url: endpoint.url, state: state, openUntil: openUntil,
                                        consecutiveFailures: endpoint.consecutiveFailures, calls: endpoint.calls, failures: endpoint.failures,
                                        recentFailures: endpoint.recentFailures)
            }
        }
    }
}
