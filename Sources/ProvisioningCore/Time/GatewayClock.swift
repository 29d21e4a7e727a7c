import Foundation

/// The one clock the gateway reads wherever time decides behaviour (deadlines, backoff,
/// Retry-After, breaker open windows, idempotency waits, rate limits). It wraps any
/// `Clock<Duration>`: production passes `ContinuousClock`, tests a clock they move by hand.
/// Beside it, the wall time (`date`) for what is kept or compared as a date: idempotency keys'
/// expiry and abandon times, the purge of expired keys, certificate validity, audit and security
/// events' timestamps, provisioning ids, the breakers' times shown to admins. (An HTTP-date
/// `Retry-After` is read against its answer's own `Date` header.) Production reads the system's time;
/// tests pass their own (`wall:`), so a key's expiry is a time they choose.
///
/// `ContinuousClock.Instant` cannot be made by a test clock, so instants here are the time since
/// the clock was made: comparable, and the same type whatever clock is underneath.
public struct GatewayClock: Clock, Sendable {
    public typealias Duration = Swift.Duration

    public struct Instant: InstantProtocol, Sendable {
        public typealias Duration = Swift.Duration
        /// Time since the clock's origin.
        public let offset: Duration

        public init(offset: Duration) {
            self.offset = offset
        }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let elapsed: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void
    private let wall: @Sendable () -> Date
    public let minimumResolution: Duration

    /// Reads `clock` from now on; its current instant is this clock's origin. An `any Clock<Duration>`
    /// is opened and passed the same way. `wall`: the wall time (the system's when nil).
    public init<C: Clock<Duration>>(_ clock: C, wall: (@Sendable () -> Date)? = nil) {
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        sleeper = { try await clock.sleep(for: $0) }
        minimumResolution = clock.minimumResolution
        self.wall = wall ?? { Date() }
    }

    /// The wall time: what is stamped on records and compared with stored or certified dates.
    public var date: Date { wall() }

    /// The machine's monotonic clock.
    public static var continuous: GatewayClock { GatewayClock(ContinuousClock()) }

    public var now: Instant { Instant(offset: elapsed()) }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try await sleeper(now.duration(to: deadline))
    }

    /// Sleeps `duration` on the underlying clock; throws `CancellationError` when the task is cancelled.
    public func sleep(for duration: Duration) async throws {
        try await sleeper(duration)
    }
}
