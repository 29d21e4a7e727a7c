/// What happened to one upstream call that did not succeed, as the retry table reads it.
public enum UpstreamCondition: Sendable, Hashable, CustomStringConvertible {
    /// No connection was made: the request provably never left.
    case connectFailed
    /// Sent (perhaps), but no answer within the per-try timeout.
    case timedOut
    /// The connection closed before a whole answer came back.
    case connectionReset
    /// The upstream answered with this HTTP status.
    case status(Int)
    /// A 200 whose body is not the upstream's documented answer.
    case malformed

    public var description: String {
        switch self {
        case .connectFailed: "connect_failed"
        case .timedOut: "timeout"
        case .connectionReset: "reset"
        case .status(let status): "\(status)"
        case .malformed: "malformed"
        }
    }

    /// True when the attempt may have reached the issuer and been acted on, with no answer that
    /// says so: what the default table sends again only where resending is safe. A connection never
    /// made, a 429 (throttled before anything was done) and a 4xx (it refused) say what happened; a
    /// timeout, a lost connection, an undocumented answer and any other status do not: a 5xx, a 503
    /// included (a proxy in front of the issuer answers 503 when the issuer's connection reset
    /// after the request reached it, as Envoy's "upstream connect error or disconnect/reset before
    /// headers" does; the upstream audit), and also a 2xx other than the call's documented one (a
    /// 201 or 202 to a POST may well mean it was done) or a 3xx (the gateway follows no redirect).
    public var leavesOutcomeUnknown: Bool {
        switch self {
        case .connectFailed: false
        case .timedOut, .connectionReset, .malformed: true
        case .status(let status): !(400..<500).contains(status)
        }
    }

    /// True when the endpoint looked unhealthy, which is what a circuit breaker counts. A 4xx is
    /// the request's fault (or our credentials'), and a 429 is the upstream shedding load on
    /// purpose: neither opens a breaker.
    public var countsAgainstEndpoint: Bool {
        switch self {
        case .connectFailed, .timedOut, .connectionReset, .malformed: true
        case .status(let status): status >= 500 || status == 408
        }
    }
}

/// What to do after a failed attempt.
public enum RetryAction: String, Sendable, Codable, CaseIterable {
    /// Try again, at the same endpoint if its breaker allows, after a backoff.
    case retry
    /// Try the next endpoint in failover order at once (the same one after a backoff if it is the
    /// only one).
    case failover
    /// Stop: the answer is this attempt's error (a route's `fallback: local` may still serve it).
    case fail
}

/// One row of an issuer's retry decision table: which failures it matches, the unified code the
/// caller sees, and the action. Modelled on hyperswitch's gateway status mapping (GSM): data, not
/// code, so ops can read it, override it per issuer, and the admin API can show it.
public struct RetryRule: Sendable, Equatable, CustomStringConvertible {
    public enum Match: Sendable, Equatable, CustomStringConvertible {
        case condition(UpstreamCondition)
        /// `4xx` or `5xx`.
        case statusClass(Int)

        /// `connect_failed`, `timeout`, `reset`, `malformed`, an HTTP status such as `503`, or a
        /// class `4xx` / `5xx`.
        public init?(parsing text: String) {
            switch text.lowercased() {
            case "connect_failed": self = .condition(.connectFailed)
            case "timeout": self = .condition(.timedOut)
            case "reset": self = .condition(.connectionReset)
            case "malformed": self = .condition(.malformed)
            case "4xx": self = .statusClass(4)
            case "5xx": self = .statusClass(5)
            default:
                guard let status = Int(text), (100...599).contains(status) else { return nil }
                self = .condition(.status(status))
            }
        }

        func matches(_ condition: UpstreamCondition) -> Bool {
            switch (self, condition) {
            case (.condition(let expected), _): expected == condition
            case (.statusClass(let hundreds), .status(let status)): status / 100 == hundreds
            case (.statusClass, _): false
            }
        }

        public var description: String {
            switch self {
            case .condition(let condition): condition.description
            case .statusClass(let hundreds): "\(hundreds)xx"
            }
        }
    }

    public let match: Match
    public let code: GatewayError.Code
    public let action: RetryAction

    public init(_ match: Match, _ code: GatewayError.Code, _ action: RetryAction) {
        self.match = match
        self.code = code
        self.action = action
    }

    public var description: String { "\(match) -> \(code.rawValue), \(action.rawValue)" }
}

/// An issuer's retry decision table: the first matching row decides; a failure no row matches
/// fails with its own code.
public struct RetryDecisionTable: Sendable, Equatable {
    public let rules: [RetryRule]

    public init(rules: [RetryRule]) { self.rules = rules }

    public func decide(_ condition: UpstreamCondition) -> RetryRule? {
        rules.first { $0.match.matches(condition) }
    }

    /// The default table. `resendSafe` is true when sending the same request twice cannot
    /// provision twice: the upstream honours an idempotency key that stays the same across
    /// attempts (Bridge), or the call is a safe method (Crossmint's GET). Otherwise a request is
    /// sent again only when it provably never left (no connection) or the upstream throttled it
    /// (429); a 503 may come from a proxy after the request reached the issuer, so it is sent again
    /// only where resending is safe.
    public static func defaults(resendSafe: Bool) -> RetryDecisionTable {
        let ifSafe: RetryAction = resendSafe ? .retry : .fail
        return RetryDecisionTable(rules: [
            RetryRule(.condition(.connectFailed), .upstreamUnavailable, .failover),
            RetryRule(.condition(.status(429)), .upstreamUnavailable, .retry),
            RetryRule(.condition(.status(503)), .upstreamUnavailable, ifSafe),
            RetryRule(.condition(.status(504)), .upstreamTimeout, ifSafe),
            // A 4xx, even 408, is never sent again (only 429, which says "later").
            RetryRule(.condition(.status(408)), .upstreamTimeout, .fail),
            RetryRule(.condition(.timedOut), .upstreamTimeout, ifSafe),
            RetryRule(.condition(.connectionReset), .upstreamUnavailable, ifSafe),
            RetryRule(.condition(.malformed), .upstreamProtocolError, ifSafe),
            RetryRule(.statusClass(5), .upstreamUnavailable, ifSafe),
            RetryRule(.condition(.status(401)), .upstreamAuthFailed, .fail),
            RetryRule(.condition(.status(403)), .upstreamAuthFailed, .fail),
            RetryRule(.statusClass(4), .upstreamRejected, .fail),
        ])
    }

    /// Rows from the config go first, so they override the defaults they overlap.
    public func overridden(by rows: [RetryRule]) -> RetryDecisionTable {
        RetryDecisionTable(rules: rows + rules)
    }
}

/// How often and how patiently one issuer is retried.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts at this issuer per request, the first included.
    public var maxAttempts: Int
    public var baseBackoff: Duration
    public var maxBackoff: Duration
    /// No attempt starts with less time than this left before the deadline: it could not finish.
    public var minAttemptTime: Duration

    /// Envoy retries once by default with a 25 ms base and 250 ms cap; gRPC's retry examples use 3
    /// attempts. A provisioning has a 15 s budget the phone is waiting on, so: 3 attempts, 100 ms
    /// base, 2 s cap (full jitter keeps the average wait half of that), and no attempt with under
    /// 250 ms left.
    public static let `default` = RetryPolicy(
        maxAttempts: 3, baseBackoff: .milliseconds(100), maxBackoff: .seconds(2), minAttemptTime: .milliseconds(250))

    public init(maxAttempts: Int, baseBackoff: Duration, maxBackoff: Duration, minAttemptTime: Duration) {
        self.maxAttempts = maxAttempts
        self.baseBackoff = baseBackoff
        self.maxBackoff = maxBackoff
        self.minAttemptTime = minAttemptTime
    }

    /// Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff and
    /// Jitter"): uniform in 0 ... min(maxBackoff, baseBackoff * 2^(attempt-1)), where `attempt` is
    /// the number of the attempt that just failed. `unit` draws from 0...1.
    public func backoff(afterAttempt attempt: Int, unit: () -> Double) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let ceiling = min(maxBackoff, baseBackoff * (1 << exponent))
        return ceiling * min(max(unit(), 0), 1)
    }
}
