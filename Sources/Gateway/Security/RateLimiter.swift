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
    private let table: Mutex<Table>

    private struct Table {
        var defaultLimit: RateLimitConfig
        var limits: [Key: RateLimitConfig]
        var entries: [Key: Entry] = [:]
        /// Set when the table is full of empty buckets: new keys are refused until then, without
        /// scanning the table again for each of them.
        var fullUntil: C.Instant?
    }

    /// `limits` names the keys with their own limit; every other key gets `defaultLimit`.
    public init(clock: C, defaultLimit: RateLimitConfig, limits: [Key: RateLimitConfig] = [:], capacity: Int = 10_000) {
        precondition(capacity >= 1)
        self.clock = clock
        self.table = Mutex(Table(defaultLimit: defaultLimit, limits: limits))
        self.capacity = capacity
    }

    /// New limits (a config reload). A key whose limit is unchanged keeps its bucket, so a reload
    /// neither refills an exhausted client nor empties a quiet one; a key whose limit changed
    /// starts a fresh bucket under its new limit.
    public func update(defaultLimit: RateLimitConfig, limits: [Key: RateLimitConfig]) {
        table.withLock { table in
            let before = table
            table.defaultLimit = defaultLimit
            table.limits = limits
            table.entries = table.entries.filter { key, _ in
                (before.limits[key] ?? before.defaultLimit) == (limits[key] ?? defaultLimit)
            }
            table.fullUntil = nil
        }
    }

    /// Takes one token from `key`'s bucket, making the bucket if it has none.
    public func take(_ key: Key) -> Decision {
        let now = clock.now
        return table.withLock { table in
            if var entry = table.entries[key] {
                let decision = entry.bucket.take(at: now)
                entry.lastUsed = now
                table.entries[key] = entry
                return decision
            }
            if let until = table.fullUntil, now < until { return .refused(retryAfter: now.duration(to: until)) }
            table.fullUntil = nil
            if table.entries.count >= capacity, let refill = Self.evict(&table.entries, now: now, capacity: capacity) {
                // Every bucket is empty: the soonest refill is when there is room again.
                table.fullUntil = now.advanced(by: refill)
                return .refused(retryAfter: refill)
            }
            var bucket = TokenBucket(table.limits[key] ?? table.defaultLimit, now: now)
            let decision = bucket.take(at: now)
            table.entries[key] = Entry(bucket: bucket, lastUsed: now)
            return decision
        }
    }

    /// What `take` would answer, without taking a token or making a bucket.
    public func peek(_ key: Key) -> Decision {
        let now = clock.now
        return table.withLock { $0.entries[key]?.bucket.peek(at: now) } ?? .allowed
    }

    /// Buckets held now.
    public var count: Int { table.withLock { $0.entries.count } }

    /// Makes room: full buckets first, then the least recently used tenth of those holding a token.
    /// Nil when there is room now; else every bucket is empty and this is the soonest refill.
    private static func evict(_ table: inout [Key: Entry], now: C.Instant, capacity: Int) -> Duration? {
        var holding: [(key: Key, lastUsed: C.Instant)] = []
        var soonest: Duration?
        for (key, entry) in table {
            switch entry.bucket.peek(at: now) {
            case .allowed:
                if entry.bucket.isFull(at: now) { table.removeValue(forKey: key) } else { holding.append((key, entry.lastUsed)) }
            case .refused(let wait):
                soonest = min(soonest ?? wait, wait)
            }
        }
        guard table.count >= capacity else { return nil }
        guard !holding.isEmpty else { return soonest }
        for (key, _) in holding.sorted(by: { $0.lastUsed < $1.lastUsed }).prefix(max(1, capacity / 10)) { table.removeValue(forKey: key) }
        return nil
    }
}
