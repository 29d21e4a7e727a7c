import Synchronization

/// A clock that moves only when a test says so. `sleep` suspends until the test advances the
/// clock past its deadline (or the sleeping task is cancelled), so backoffs, Retry-After waits,
/// breaker open windows and idempotency polls are driven step by step, without real waiting.
public final class TestClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Sendable {
        public var offset: Duration
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var nextID = 0
        /// Sleeps cancelled before their continuation was stored.
        var cancelled: Set<Int> = []
        /// Every sleep asked for, as a duration from the instant it was asked.
        var requested: [Duration] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// The durations of every sleep asked for so far, in order.
    public var requestedSleeps: [Duration] { state.withLock { $0.requested } }

    /// Tasks sleeping on this clock now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        // Recorded even when cancelled already, so a test sees a loop that keeps asking.
        let id = state.withLock { state -> Int in
            state.nextID += 1
            state.requested.append(state.now.duration(to: deadline))
            return state.nextID
        }
        try Task.checkCancellation()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time on and wakes every sleeper whose deadline has come.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return due.sorted { $0.value.deadline < $1.value.deadline }.map(\.value)
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Waits (in real time, up to `limit`) until at least `count` tasks sleep on this clock; false
    /// if they never did.
    @discardableResult
    public func waitForSleepers(_ count: Int = 1, limit: Duration = .seconds(10)) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: limit)
        while sleeperCount < count {
            guard clock.now < end else { return false }
            do { try await Task.sleep(for: .milliseconds(1)) } catch { return false }
        }
        return true
    }

    /// Waits until someone sleeps for at most `maxWait`, then advances the clock by exactly that
    /// sleep; returns it. Longer sleeps (a background job's interval) are left alone. Nil if no
    /// such sleep came within `limit` of real time.
    public func advanceToNextSleeper(upTo maxWait: Duration = .seconds(3_600), limit: Duration = .seconds(10)) async -> Duration? {
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: limit)
        while true {
            let wait = state.withLock { state in
                state.sleepers.values.map { state.now.duration(to: $0.deadline) }.filter { $0 <= maxWait }.min()
            }
            if let wait {
                advance(by: wait)
                return wait
            }
            guard clock.now < end else { return nil }
            do { try await Task.sleep(for: .milliseconds(1)) } catch { return nil }
        }
    }
}
