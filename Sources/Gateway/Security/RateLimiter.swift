import ProvisioningCore
import Synchronization

/// Token buckets by key (a client id, a source address), shared by every request in flight.
///
/// Memory is bounded: at most `capacity` buckets. When a new key would go over it, the buckets that
/// have refilled to `burst` are dropped first (forgetting a full bucket changes nothing: a new one
/// starts full); if that frees nothing, the least recently used tenth of the buckets that still
/// hold a token is dropped (those sources get a fresh, full bucket when they come back). An empty
/// bucket is never dropped, so a flood of new keys cannot wash an attacker's exhausted bucket out
/// of the table; when every bucket is empty, a new key is refused until one refills. Dropping a
/// tenth at once keeps a flood of new keys from paying a scan of the table on every request.
public final class RateLimiter<Key: Hashable & Sendable, C: Clock>: Sendable where C.Duration == Duration {
    public typealias Decision = TokenBucket<C.Instant>.Decision

    private struct Entry {
        var bucket: TokenBucket<C.Instant>
        var lastUsed: C.Instant
    }

    public let clock: C
    public let capacity: Int
    private let defaultLimit: RateLimitConfig
    private let limits: [Key: RateLimitConfig]
    private let table = Mutex<[Key: Entry]>([:])

    /// `limits` names the keys with their own limit; every other key gets `defaultLimit`.
    public init(clock: C, defaultLimit: RateLimitConfig, limits: [Key: RateLimitConfig] = [:], capacity: Int = 10_000) {
        precondition(capacity >= 1)
        self.clock = clock
        self.defaultLimit = defaultLimit
        self.limits = limits
        self.capacity = capacity
    }

    /// Takes one token from `key`'s bucket, making the bucket if it has none.
    public func take(_ key: Key) -> Decision {
        let now = clock.now
        return table.withLock { table in
            if var entry = table[key] {
                let decision = entry.bucket.take(at: now)
                entry.lastUsed = now
                table[key] = entry
                return decision
            }
            if table.count >= capacity { Self.evict(&table, now: now, capacity: capacity) }
            if table.count >= capacity {
                // Every bucket is empty: the soonest refill is when there is room again.
                let wait = table.values.compactMap { entry -> Duration? in
                    if case .refused(let wait) = entry.bucket.peek(at: now) { return wait }
                    return nil
                }.min() ?? .seconds(1)
                return .refused(retryAfter: wait)
            }
            var bucket = TokenBucket(limits[key] ?? defaultLimit, now: now)
            let decision = bucket.take(at: now)
            table[key] = Entry(bucket: bucket, lastUsed: now)
            return decision
        }
    }

    /// What `take` would answer, without taking a token or making a bucket.
    public func peek(_ key: Key) -> Decision {
        let now = clock.now
        return table.withLock { $0[key]?.bucket.peek(at: now) } ?? .allowed
    }

    /// Buckets held now.
    public var count: Int { table.withLock { $0.count } }

    private static func evict(_ table: inout [Key: Entry], now: C.Instant, capacity: Int) {
        table = table.filter { !$0.value.bucket.isFull(at: now) }
        guard table.count >= capacity else { return }
        let holding = table.filter { entry in
            if case .allowed = entry.value.bucket.peek(at: now) { return true }
            return false
        }
        let oldest = holding.sorted { $0.value.lastUsed < $1.value.lastUsed }.prefix(max(1, capacity / 10))
        for (key, _) in oldest { table.removeValue(forKey: key) }
    }
}
