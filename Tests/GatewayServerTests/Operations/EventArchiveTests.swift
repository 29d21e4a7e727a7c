import Foundation
@testable import GatewayServer
import GatewayTestSupport
import ProvisioningCore
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

    /// A run renews its lease before each page only while the lease is still its own: one that
    /// lapsed while the run was held up (purged, or taken by another run, which may already have
    /// moved the rows this run read) is not taken again, and the run stops before its next page
    /// with what it moved in the file. (Renewing by taking the lease anew had let a run that
    /// found it free carry on, writing rows another run had already archived.)
    @Test(arguments: ["purged", "taken by another run"])
    func aRunWhoseLeaseLapsedStopsBeforeItsNextPage(_ lapse: String) async throws {
        let inner = try await GatewayHarness.temporaryStore()
        let store = LostAcknowledgementStore(inner)
        let old = Date().addingTimeInterval(-60 * 86_400)
        for index in 0..<3 {
            try await inner.appendAudit(AuditEvent(provisioningID: ProvisioningID("prv_archive_\(index)"), at: old, client: "demo",
                                                   cardID: "card_demo", operation: .applePay, issuer: "bridge", endpoint: nil, attempt: 1,
                                                   outcome: .succeeded, errorCode: nil, upstreamStatus: 200, latencyMS: 1))
        }
        let later = Date().addingTimeInterval(EventArchive.leaseTime + 60)
        store.afterArchivedDeletion.withLock {
            $0 = {
                // The run was held up past its lease after its first page.
                if lapse == "purged" {
                    _ = try await inner.purgeExpired(now: later)
                } else {
                    #expect(try await inner.takeHold(EventArchive.leaseKey, holder: "another run", now: later, until: later.addingTimeInterval(900)))
                }
            }
        }
        let file = TestDirectories.root.appendingPathComponent("archive-\(UUID().uuidString).jsonl").path
        let outcome = try await EventArchive.run(store: store, before: Date().addingTimeInterval(-40 * 86_400), file: file, actor: "cli:test",
                                                 pageSize: 1, now: { Date() })
        #expect(outcome.failure?.contains("archive lease lapsed") == true, "\(outcome)")
        #expect(try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").count == 1, "only the first page was moved")
        #expect(try await inner.archivedRows(.audit, after: 0, limit: 10).count == 2)
        try? FileManager.default.removeItem(atPath: file)
    }

    @Test(arguments: ["", "2000-01-01garbage", "2000-01-01 junk", "2000-01-01T99:99:99Z", "2016-12-31T23:59:60Z", "2000-02-30",
                      "2025-02-29", "20000101", "2000-13-01", "2025-11-01T12:00:00", "2025-11-01T12:00Z", "2025-11-01T12:00:00.Z",
                      "2025-11-01T12:00:00.1234Z", "2025-11-01T12:00:00+0100", "2025-11-01T12:00:00+24:00", "2025-11-01t12:00:00z",
                      "２０２５-11-01", "0000-01-01", "2025-11-01T12:00:00Z ", " 2025-11-01"])
    func anythingElseIsRefused(text: String) {
        #expect(EventArchive.parseTime(text) == nil, "\(text)")
    }
}
