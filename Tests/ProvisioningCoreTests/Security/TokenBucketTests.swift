import ProvisioningCore
import Testing

/// The bucket is given every instant: these tests make their own timeline from one fixed origin
/// and never look at the clock again.
struct TokenBucketTests {
    let origin = ContinuousClock.now

    func at(_ offset: Duration) -> ContinuousClock.Instant { origin.advanced(by: offset) }

    @Test func aFullBucketGivesItsBurstThenRefuses() {
        var bucket = TokenBucket(requestsPerSecond: 1, burst: 3, now: at(.zero))
        #expect(bucket.tokens(at: at(.zero)) == 3)
        for _ in 0..<3 { #expect(bucket.take(at: at(.zero)) == .allowed) }
        #expect(bucket.take(at: at(.zero)) == .refused(retryAfter: .seconds(1)))
        // A refusal takes nothing: the wait does not grow with every refused request.
        #expect(bucket.take(at: at(.zero)) == .refused(retryAfter: .seconds(1)))
        #expect(bucket.tokens(at: at(.zero)) == 0)
    }

    /// The slowest and largest bucket the config allows (0.001 requests per second, a burst of
    /// 100,000) works its whole range: a smaller rate had trapped in `interval * burst`.
    @Test func theSlowestLargestBucketTheConfigAllowsHoldsItsArithmetic() {
        var bucket = TokenBucket(requestsPerSecond: 0.001, burst: 100_000, now: at(.zero))
        #expect(bucket.interval == .seconds(1_000))
        for _ in 0..<100_000 { _ = bucket.take(at: at(.zero)) }
        #expect(bucket.tokens(at: at(.zero)) == 0)
        #expect(bucket.take(at: at(.zero)) == .refused(retryAfter: .seconds(1_000)))
        #expect(bucket.tokens(at: at(.seconds(100_000 * 1_000))) == 100_000)
    }

    @Test func oneTokenComesBackAfterExactlyOneInterval() {
        var bucket = TokenBucket(requestsPerSecond: 4, burst: 2, now: at(.zero))
        #expect(bucket.interval == .milliseconds(250))
        #expect(bucket.take(at: at(.zero)) == .allowed)
        #expect(bucket.take(at: at(.zero)) == .allowed)
        #expect(bucket.take(at: at(.milliseconds(249))) == .refused(retryAfter: .milliseconds(1)))
        #expect(bucket.take(at: at(.milliseconds(250))) == .allowed)
        #expect(bucket.take(at: at(.milliseconds(250))) == .refused(retryAfter: .milliseconds(250)))
    }

    @Test func retryAfterIsTheTimeToTheNextToken() {
        var bucket = TokenBucket(requestsPerSecond: 0.5, burst: 1, now: at(.zero))
        #expect(bucket.take(at: at(.zero)) == .allowed)
        #expect(bucket.peek(at: at(.zero)) == .refused(retryAfter: .seconds(2)))
        #expect(bucket.peek(at: at(.milliseconds(1_500))) == .refused(retryAfter: .milliseconds(500)))
        #expect(bucket.peek(at: at(.seconds(2))) == .allowed)
        // Peeking took nothing.
        #expect(bucket.take(at: at(.seconds(2))) == .allowed)
        #expect(bucket.take(at: at(.seconds(2))) == .refused(retryAfter: .seconds(2)))
    }

    @Test func aLongIdleDoesNotFillBeyondTheBurst() {
        var bucket = TokenBucket(RateLimitConfig(requestsPerSecond: 10, burst: 5), now: at(.zero))
        for _ in 0..<5 { _ = bucket.take(at: at(.zero)) }
        #expect(!bucket.isFull(at: at(.zero)))
        let later = at(.seconds(3_600))
        #expect(bucket.isFull(at: later))
        #expect(bucket.tokens(at: later) == 5)
        for _ in 0..<5 { #expect(bucket.take(at: later) == .allowed) }
        #expect(bucket.take(at: later) == .refused(retryAfter: bucket.interval))
    }

    @Test func partialRefillCountsOnlyWholeTokens() {
        var bucket = TokenBucket(requestsPerSecond: 1, burst: 3, now: at(.zero))
        for _ in 0..<3 { _ = bucket.take(at: at(.zero)) }
        #expect(bucket.tokens(at: at(.milliseconds(1_999))) == 1)
        #expect(bucket.tokens(at: at(.seconds(2))) == 2)
        #expect(bucket.take(at: at(.milliseconds(1_999))) == .allowed)
        // The one token there was is gone; the next comes back at 2 s.
        #expect(bucket.take(at: at(.milliseconds(1_999))) == .refused(retryAfter: .milliseconds(1)))
    }
}
