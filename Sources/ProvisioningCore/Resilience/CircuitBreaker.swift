/// One upstream endpoint's circuit breaker, as a pure state machine: no clock, no locks, no I/O.
/// The caller passes the time of every event, so tests drive it with instants they choose.
///
/// - closed: calls flow; `failureThreshold` consecutive failures open it.
/// - open: calls are refused until `openDuration` has passed since it opened.
/// - half-open: up to `halfOpenProbes` calls are let through at once; a probe's failure opens it
///   again, `halfOpenProbes` successes close it.
public struct CircuitBreaker: Sendable, Equatable {
    public struct Policy: Sendable, Equatable {
        public var failureThreshold: Int
        public var openDuration: Duration
        public var halfOpenProbes: Int

        /// Resilience4j opens at a 50 % failure rate over 100 calls, waits 60 s and probes with 10;
        /// Envoy's outlier detection ejects after 5 consecutive 5xx for 30 s. A provisioning
        /// gateway sees few calls per endpoint, so a count-based breaker fits better than a rate:
        /// Envoy's 5 consecutive failures and 30 s, and one probe (a probe is a real card's request).
        public static let `default` = Policy(failureThreshold: 5, openDuration: .seconds(30), halfOpenProbes: 1)

        public init(failureThreshold: Int, openDuration: Duration, halfOpenProbes: Int) {
            self.failureThreshold = failureThreshold
            self.openDuration = openDuration
            self.halfOpenProbes = halfOpenProbes
        }
    }

    public enum State: Sendable, Equatable {
        case closed(consecutiveFailures: Int)
        case open(until: GatewayClock.Instant)
        case halfOpen(probesInFlight: Int, successes: Int)

        public var name: String {
            switch self {
            case .closed: "closed"
            case .open: "open"
            case .halfOpen: "half_open"
            }
        }
    }

    /// Whether a call may go out now.
    public enum Permission: Sendable, Equatable {
        case allowed
        /// Refused; the breaker may let a probe through at this instant.
        case refused(until: GatewayClock.Instant)
    }

    /// A change of state, for metrics and logs.
    public struct Transition: Sendable, Equatable {
        public let from: String
        public let to: String
        public init(from: String, to: String) {
            self.from = from
            self.to = to
        }
    }

    public let policy: Policy
    public private(set) var state: State = .closed(consecutiveFailures: 0)

    public init(policy: Policy = .default) {
        self.policy = policy
    }

    /// Asks to make a call at `now`. An open breaker whose time is up turns half-open and the call
    /// becomes a probe; every allowed call must be followed by `record`.
    public mutating func acquire(at now: GatewayClock.Instant) -> (Permission, Transition?) {
        switch state {
        case .closed:
            return (.allowed, nil)
        case .open(let until):
            guard now >= until else { return (.refused(until: until), nil) }
            state = .halfOpen(probesInFlight: 1, successes: 0)
            return (.allowed, Transition(from: "open", to: "half_open"))
        case .halfOpen(let inFlight, let successes):
            guard inFlight + successes < policy.halfOpenProbes else { return (.refused(until: now), nil) }
            state = .halfOpen(probesInFlight: inFlight + 1, successes: successes)
            return (.allowed, nil)
        }
    }

    /// The outcome of an allowed call. `failure` means the endpoint looked unhealthy (5xx,
    /// timeout, connection failure, malformed answer), not that the request was refused (4xx).
    public mutating func record(success: Bool, at now: GatewayClock.Instant) -> Transition? {
        switch state {
        case .closed(let failures):
            if success {
                state = .closed(consecutiveFailures: 0)
                return nil
            }
            guard failures + 1 >= policy.failureThreshold else {
                state = .closed(consecutiveFailures: failures + 1)
                return nil
            }
            state = .open(until: now.advanced(by: policy.openDuration))
            return Transition(from: "closed", to: "open")
        case .open:
            // A call allowed before the breaker opened ends late: it changes nothing.
            return nil
        case .halfOpen(let inFlight, let successes):
            guard success else {
                state = .open(until: now.advanced(by: policy.openDuration))
                return Transition(from: "half_open", to: "open")
            }
            guard successes + 1 >= policy.halfOpenProbes else {
                state = .halfOpen(probesInFlight: max(0, inFlight - 1), successes: successes + 1)
                return nil
            }
            state = .closed(consecutiveFailures: 0)
            return Transition(from: "half_open", to: "closed")
        }
    }

    /// An allowed call that ended without telling anything about the endpoint's health (a 4xx,
    /// or the caller gave up): a half-open probe slot is given back.
    public mutating func release() {
        if case .halfOpen(let inFlight, let successes) = state {
            state = .halfOpen(probesInFlight: max(0, inFlight - 1), successes: successes)
        }
    }
}
