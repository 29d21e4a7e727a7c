import Foundation
import GatewayServer
import Testing

/// `store archive --before`: read whole and exactly, or refused (the archive audit: Foundation's
/// parser had read any string that began with a day, and a time as its day's midnight).
@Suite struct EventArchiveTests {
    static let day = 1_761_955_200.0  // 2025-11-01T00:00:00Z

    static let times: [(text: String, seconds: Double)] = [
        ("2025-11-01", day),
        ("2025-11-01T00:00:00Z", day),
        ("2025-11-01T12:34:56Z", day + 45_296),
        ("2025-11-01T12:00:00+01:00", day + 39_600),
        ("2025-11-01T12:00:00.250-05:30", day + 63_000.25),
        ("2025-11-01T12:00:00.5Z", day + 43_200.5),
        ("2016-12-31T23:59:59Z", 1_483_228_799),
    ]

    @Test(arguments: times)
    func aTimeIsReadWholeWithItsOffset(text: String, seconds: Double) throws {
        let time = try #require(EventArchive.parseTime(text), "\(text)")
        #expect(abs(time.timeIntervalSince1970 - seconds) < 0.0005, "\(text): \(time.timeIntervalSince1970)")
    }

    @Test(arguments: ["", "2000-01-01garbage", "2000-01-01 junk", "2000-01-01T99:99:99Z", "2016-12-31T23:59:60Z", "2000-02-30",
                      "2025-02-29", "20000101", "2000-13-01", "2025-11-01T12:00:00", "2025-11-01T12:00Z", "2025-11-01T12:00:00.Z",
                      "2025-11-01T12:00:00.1234Z", "2025-11-01T12:00:00+0100", "2025-11-01T12:00:00+24:00", "2025-11-01t12:00:00z",
                      "２０２５-11-01", "0000-01-01", "2025-11-01T12:00:00Z ", " 2025-11-01"])
    func anythingElseIsRefused(text: String) {
        #expect(EventArchive.parseTime(text) == nil, "\(text)")
    }
}
