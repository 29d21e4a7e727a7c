@testable import Gateway
import Testing

/// Requests in flight per client: the count each request is let in against, and what a lower
/// limit (a reload) does to a client already over it.
struct InFlightLimiterTests {
    @Test func aKeyIsLetInUpToItsLimitAndAgainOnceOneLeaves() {
        let limiter = InFlightLimiter<String>()
        #expect(limiter.enter("a", limit: 2))
        #expect(limiter.enter("a", limit: 2))
        #expect(!limiter.enter("a", limit: 2))
        // A refusal counts nothing.
        #expect(limiter.inFlight("a") == 2)
        // Another key has its own count.
        #expect(limiter.enter("b", limit: 1))
        #expect(!limiter.enter("b", limit: 1))

        limiter.leave("a")
        #expect(limiter.inFlight("a") == 1)
        #expect(limiter.enter("a", limit: 2))
        #expect(limiter.snapshot == ["a": 2, "b": 1])
    }

    @Test func aLowerLimitRefusesUntilTheKeyIsUnderItAndAnIdleKeyHoldsNoEntry() {
        let limiter = InFlightLimiter<String>()
        for _ in 0..<3 { #expect(limiter.enter("a", limit: 3)) }
        // The limit each request states is the one its generation holds: lowered to 1 while 3 run.
        #expect(!limiter.enter("a", limit: 1))
        limiter.leave("a")
        limiter.leave("a")
        #expect(!limiter.enter("a", limit: 1))
        limiter.leave("a")
        #expect(limiter.snapshot.isEmpty)
        #expect(limiter.enter("a", limit: 1))
    }
}
