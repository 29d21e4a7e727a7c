import Foundation
import Logging
import ProvisioningCore
import Synchronization

/// Writes the `auth_failed` security events of failed authentications, at most `limit` of them
/// (a token bucket over every source together). Each source address already has its own bucket
/// (`server.auth_failure_limit`), but an attacker with many addresses (an IPv6 range, a botnet)
/// multiplied it: 300 loopback addresses wrote 3,000 events in 5 s without a key, each a synced
/// commit and a row kept for good (resource audit). Past the limit a failure is counted, not
/// written: the next event written carries the count (`suppressed` in its detail; a count whose
/// event cannot be written goes to the next), and the counting is logged at warning, at most once
/// a minute. Every failure is still answered 401
/// (and counted with the other answers in `/metrics`), whatever is written.
public final class AuthFailureEvents: Sendable {
    /// 10 events a second, bursts of 100: far above a fleet's misconfigured clients, far below
    /// what a store can be made to keep.
    public static let defaultLimit = RateLimitConfig(requestsPerSecond: 10, burst: 100)

    private let audit: SecurityAudit
    private let clock: GatewayClock
    private let limit: RateLimitConfig
    private let limiter: RateLimiter<Int, GatewayClock>
    private let suppressed = Mutex(0)
    /// When the counting was last said in the log: at most once a minute.
    private let warned = Mutex<GatewayClock.Instant?>(nil)
    private let logger: Logger

    public init(audit: SecurityAudit, clock: GatewayClock, limit: RateLimitConfig = defaultLimit, logger: Logger) {
        self.audit = audit
        self.clock = clock
        self.limit = limit
        self.limiter = RateLimiter(clock: clock, defaultLimit: limit, capacity: 1)
        self.logger = logger
    }

    /// Records one failed authentication from `source` (an address) for `reason`.
    public func note(source: String, reason: String) async {
        guard limiter.take(0).isAllowed else {
            suppressed.withLock { $0 += 1 }
            let now = clock.now
            let say = warned.withLock { last in
                guard last.map({ $0.duration(to: now) >= .seconds(60) }) ?? true else { return false }
                last = now
                return true
            }
            if say {
                logger.warning("failed authentications past \(Self.shown(limit.requestsPerSecond)) a second (bursts of \(limit.burst)) are counted, not written one by one: the next event written carries their count")
            }
            return
        }
        let skipped = suppressed.withLock { count in
            defer { count = 0 }
            return count
        }
        var detail = ["reason": reason]
        if skipped > 0 { detail["suppressed"] = "\(skipped)" }
        do {
            try await audit.record(SecurityEvent(at: clock.date, kind: .authFailed, actor: "anonymous", source: source, detail: detail))
        } catch {
            // Logged by `record`; the count goes back for the next event to carry, with this one.
            suppressed.withLock { $0 += skipped + 1 }
        }
    }

    /// `10`, not `10.0`; a fraction as it is.
    private static func shown(_ rate: Double) -> String {
        rate == rate.rounded() && abs(rate) < 1e15 ? String(Int(rate)) : String(rate)
    }
}
