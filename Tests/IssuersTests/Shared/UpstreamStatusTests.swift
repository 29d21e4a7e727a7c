import Foundation
@testable import Issuers
import ProvisioningCore
import Testing

/// Reading an issuer's `Retry-After`: both of RFC 9110's forms, bounded, never trusted to be sane.
struct UpstreamStatusTests {
    static let answeredAt = "Thu, 26 Nov 2026 10:00:00 GMT"

    @Test func delaySecondsAreReadAsGivenUpToAnHour() {
        #expect(UpstreamStatus.retryAfter("0") == .zero)
        #expect(UpstreamStatus.retryAfter(" 30 ") == .seconds(30))
        #expect(UpstreamStatus.retryAfter("3600") == .seconds(3_600))
        #expect(UpstreamStatus.retryAfter("3601") == UpstreamStatus.longestRetryAfter)
        // Past Int's range, or at its end: still a number of seconds, and still at most an hour.
        for huge in ["9223372036854775807", "9223372036854775808", String(repeating: "9", count: 400)] {
            #expect(UpstreamStatus.retryAfter(huge) == .seconds(3_600), "\(huge.prefix(20))")
        }
        for unreadable in [nil, "", "-5", "1.5", "soon", "0x10", "+3"] as [String?] {
            #expect(UpstreamStatus.retryAfter(unreadable) == nil, "\(unreadable ?? "nil")")
        }
    }

    /// An HTTP date is read against the answer's own `Date` header (the issuer's clock against
    /// itself), else against the time given.
    @Test func anHTTPDateIsReadAgainstTheAnswersDate() throws {
        #expect(UpstreamStatus.retryAfter("Thu, 26 Nov 2026 10:02:30 GMT", answeredAt: Self.answeredAt) == .seconds(150))
        // In the past: no wait.
        #expect(UpstreamStatus.retryAfter("Thu, 26 Nov 2026 09:59:00 GMT", answeredAt: Self.answeredAt) == .zero)
        // Far ahead: an hour.
        #expect(UpstreamStatus.retryAfter("Fri, 27 Nov 2026 10:00:00 GMT", answeredAt: Self.answeredAt) == .seconds(3_600))
        // No (readable) Date header: against now.
        let now = try #require(UpstreamStatus.httpDate(Self.answeredAt))
        #expect(UpstreamStatus.retryAfter("Thu, 26 Nov 2026 10:00:20 GMT", now: now) == .seconds(20))
        #expect(UpstreamStatus.retryAfter("Thu, 26 Nov 2026 10:00:20 GMT", answeredAt: "yesterday", now: now) == .seconds(20))
        #expect(UpstreamStatus.retryAfter("Thursday, 26-Nov-26 10:00:20 GMT", now: now) == nil, "RFC 850 dates are not sent by current servers")
    }

    @Test func durationsReadAsWholeUnitsSaturateInsteadOfTrapping() {
        #expect(Duration.seconds(Int64.max).wholeMilliseconds == .max)
        #expect(Duration.seconds(Int64.min).wholeMilliseconds == .min)
        #expect(Duration.seconds(Int64.max / 1_000).wholeNanoseconds == .max)
        #expect(Duration.milliseconds(1_234).wholeMilliseconds == 1_234)
        #expect(Duration.milliseconds(-1_234).wholeMilliseconds == -1_234)
        #expect(Duration.nanoseconds(1_500).wholeNanoseconds == 1_500)
    }
}
