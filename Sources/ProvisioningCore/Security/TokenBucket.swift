/// A token bucket: `burst` tokens at most, refilled one every `interval` (`1 / requestsPerSecond`).
///
/// Pure state, no clock: every call is given the time, so tests drive it and the caller decides
/// which clock is the truth. Kept as a "theoretical arrival time" (GCRA): `emptyAt` is the instant
/// at which the bucket would be empty had nothing refilled it, so the arithmetic is exact
/// `Duration` arithmetic with no floating-point token counts drifting across refills.
public struct TokenBucket<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    public enum Decision: Sendable, Equatable {
        case allowed
        /// No token now; one will be there after `retryAfter`.
        case refused(retryAfter: Duration)

        public var isAllowed: Bool { self == .allowed }
    }

    /// The time one token takes to come back.
    public let interval: Duration
    public let burst: Int
    /// Each token taken pushes this one `interval` later; never earlier than now (a bucket does
    /// not fill beyond `burst`).
    private var emptyAt: Instant

    /// A full bucket at `now`.
    public init(requestsPerSecond: Double, burst: Int, now: Instant) {
        precondition(requestsPerSecond > 0 && requestsPerSecond.isFinite && burst >= 1, "validated by the config")
        self.interval = .seconds(1 / requestsPerSecond)
        self.burst = burst
        self.emptyAt = now
    }

    public init(_ limit: RateLimitConfig, now: Instant) {
        self.init(requestsPerSecond: limit.requestsPerSecond, burst: limit.burst, now: now)
    }

    /// Takes one token if there is one.
    public mutating func take(at now: Instant) -> Decision {
        let decision = peek(at: now)
        if decision.isAllowed { emptyAt = Self.later(emptyAt, now).advanced(by: interval) }
        return decision
    }

    /// What `take(at:)` would answer, without taking anything.
    public func peek(at now: Instant) -> Decision {
        // After one more token, the bucket's debt would be `after - now`; at most `burst` tokens' worth.
        let after = Self.later(emptyAt, now).advanced(by: interval)
        let excess = now.duration(to: after) - interval * burst
        return excess <= .zero ? .allowed : .refused(retryAfter: excess)
    }

    /// Whole tokens available at `now`.
    public func tokens(at now: Instant) -> Int {
        let debt = now.duration(to: Self.later(emptyAt, now))
        return burst - Int((debt / interval).rounded(.up))
    }

    /// Holds `burst` tokens: forgetting it is the same as starting a new one.
    public func isFull(at now: Instant) -> Bool { emptyAt <= now }

    private static func later(_ a: Instant, _ b: Instant) -> Instant { a > b ? a : b }
}
