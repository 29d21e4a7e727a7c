import Synchronization

/// Requests in flight by key (a client id), against a limit each request states: one more is let
/// in only while fewer than its limit run. Shared by every config generation, so a reload that
/// lowers a client's limit applies to its next request, counted against everything it already
/// has in flight. Holds an entry only for a key with a request in flight.
public final class InFlightLimiter<Key: Hashable & Sendable>: Sendable {
    private let counts = Mutex<[Key: Int]>([:])

    public init() {}

    /// Counts one more request for `key` and returns true, when `key` has fewer than `limit` in
    /// flight; otherwise counts nothing and returns false. Each true is paired with one `leave`.
    public func enter(_ key: Key, limit: Int) -> Bool {
        counts.withLock { counts in
            let held = counts[key, default: 0]
            guard held < limit else { return false }
            counts[key] = held + 1
            return true
        }
    }

    /// One of `key`'s requests has ended.
    public func leave(_ key: Key) {
        counts.withLock { counts in
            guard let held = counts[key] else {
                assertionFailure("InFlightLimiter.leave without enter")
                return
            }
            counts[key] = held > 1 ? held - 1 : nil
        }
    }

    /// Requests `key` has in flight now.
    public func inFlight(_ key: Key) -> Int { counts.withLock { $0[key, default: 0] } }

    /// Every key with a request in flight, and how many.
    public var snapshot: [Key: Int] { counts.withLock { $0 } }
}
