import Foundation
import GatewayServer
import GatewayStore
import GatewayTestSupport
import GRDB
import ProvisioningCore
import Testing

/// `store archive`, as ops run it: old audit and security events leave the store for a synced
/// file, each page's deletion recorded, and no event is ever in neither place.
extension StoreCommandLineTests {
    static let day: TimeInterval = 86_400

    /// Writes `audit` audit events and `security` security events recorded at `at`, in one
    /// transaction (the request path would sync each); answers their ids.
    static func seedEvents(_ database: String, audit: Int, security: Int, at: Date, tag: String) async throws -> (audit: [Int64], security: [Int64]) {
        try await seedEvents(database, audit: audit, security: security, milliseconds: Int64((at.timeIntervalSince1970 * 1000).rounded()), tag: tag)
    }

    static func seedEvents(_ database: String, audit: Int, security: Int, milliseconds: Int64, tag: String) async throws
        -> (audit: [Int64], security: [Int64])
    {
        return try await TestSQLite.queue(database).write { db in
            var ids: (audit: [Int64], security: [Int64]) = ([], [])
            for index in 0..<audit {
                try db.execute(sql: """
                    INSERT INTO audit_events (provisioning_id, at, client_id, card_id, wallet, device_type, token_id, issuer, endpoint, attempt,
                        outcome, error_code, upstream_status, latency_ms) VALUES (?, ?, 'demo', 'card_demo', 'apple_pay', 'phone', NULL, 'bridge',
                        'https://api.bridge.xyz/v0', 1, 'failed', 'upstream_unavailable', 503, ?)
                    """, arguments: ["prv_\(tag)_\(index)", milliseconds, index])
                ids.audit.append(db.lastInsertedRowID)
            }
            for index in 0..<security {
                try db.execute(sql: "INSERT INTO security_events (at, kind, actor, source, card_id, detail) VALUES (?, 'auth_failed', 'anonymous', ?, NULL, ?)",
                               arguments: [milliseconds, "10.0.0.\(index)", #"{"reason":"missing_key"}"#])
                ids.security.append(db.lastInsertedRowID)
            }
            return ids
        }
    }

    static func count(_ database: String, _ sql: String) async throws -> Int {
        try await TestSQLite.queue(database).read { db in try Int.fetchOne(db, sql: sql) ?? -1 }
    }

    /// The file's lines, parsed: each a JSON object.
    static func lines(_ file: String) throws -> [[String: Any]] {
        try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    static func archive(_ config: URL, before: String, to file: String) async throws -> Command.Result {
        try await CommandLineTests.run(["store", "archive", "--config", config.path, "--before", before, "--to", file])
    }

    /// Events recorded before `--before` leave the store for the file, over several pages, in id
    /// order and whole; later ones stay, and so does an old one recorded after them (the scan
    /// stops a day past `--before`). Each page's deletion wrote an `events_archived` event,
    /// the last holding the SHA-256 of the whole file as `sha256sum` reads it. The file is new
    /// and 0600; an existing file, a `--before` within 30 days or one that is no time are refused
    /// with nothing changed; a run with nothing to move writes no file.
    @Test func archiveMovesOldEventsIntoASyncedFileAndRecordsEachPage() async throws {
        let (config, database) = try Self.sandboxConfig()
        try await SQLiteGatewayStore(path: database).migrate()
        let now = Date()
        // A millisecond Foundation's fractional seconds wrote 1 ms early (…00.123 as …00.122).
        let oldMS = Int64((now.addingTimeInterval(-60 * Self.day).timeIntervalSince1970).rounded(.down)) * 1000 + 123
        let old = try await Self.seedEvents(database, audit: 2_300, security: 3, milliseconds: oldMS, tag: "old")
        let recent = try await Self.seedEvents(database, audit: 5, security: 2, at: now.addingTimeInterval(-Self.day), tag: "new")
        // Recorded as old, but after the recent ones (an instance whose clock was months behind):
        // past the scan's end, so it stays in the store, never lost.
        _ = try await Self.seedEvents(database, audit: 1, security: 0, at: now.addingTimeInterval(-60 * Self.day), tag: "straggler")
        let file = config.deletingLastPathComponent().appendingPathComponent("archive-1.jsonl").path
        let before = now.addingTimeInterval(-40 * Self.day).formatted(Date.ISO8601FormatStyle())

        let run = try await Self.archive(config, before: before, to: file)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("archived 2300 audit events and 3 security events"), "\(run.stdout)")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
        #expect(mode == 0o600)

        let lines = try Self.lines(file)
        #expect(lines.count == 2_303)
        #expect(lines.filter { $0["table"] as? String == "audit_events" }.compactMap { ($0["id"] as? NSNumber)?.int64Value } == old.audit)
        #expect(lines.filter { $0["table"] as? String == "security_events" }.compactMap { ($0["id"] as? NSNumber)?.int64Value } == old.security)
        let first = lines[0]
        #expect(first["provisioning_id"] as? String == "prv_old_0" && first["outcome"] as? String == "failed"
            && first["error_code"] as? String == "upstream_unavailable" && (first["upstream_status"] as? NSNumber)?.intValue == 503
            && first["device_type"] as? String == "phone" && first["endpoint"] as? String == "https://api.bridge.xyz/v0")
        // The time exactly as the store kept it, in both forms.
        #expect((first["at_ms"] as? NSNumber)?.int64Value == oldMS)
        let whole = Date(timeIntervalSince1970: TimeInterval(oldMS / 1000)).formatted(Date.ISO8601FormatStyle())
        #expect(first["at"] as? String == String(whole.dropLast()) + ".123Z", "\(String(describing: first["at"]))")
        let security = try #require(lines.last)
        #expect(security["kind"] as? String == "auth_failed" && security["source"] as? String == "10.0.0.2"
            && security["detail"] as? String == #"{"reason":"missing_key"}"#)

        // The store keeps the later events, and one record per page (3 pages of audit events, 1 of security events).
        #expect(try await Self.count(database, "SELECT count(*) FROM audit_events") == recent.audit.count + 1)
        #expect(try await Self.count(database, "SELECT min(id) FROM audit_events") == Int(recent.audit[0]))
        #expect(try await Self.count(database, "SELECT count(*) FROM audit_events WHERE provisioning_id = 'prv_straggler_0'") == 1)
        let store = try await SQLiteGatewayStore.open(path: database)
        let records = try await store.securityEvents(SecurityEventQuery(kind: .eventsArchived))
        #expect(records.map { $0.detail["written"] } == ["1000", "1000", "300", "3"])
        #expect(records.map { $0.detail["deleted"] } == ["1000", "1000", "300", "3"], "each record says what its transaction deleted")
        #expect(records.map { $0.detail["table"] } == ["audit_events", "audit_events", "audit_events", "security_events"])
        #expect(records.allSatisfy { $0.actor.hasPrefix("cli:") && $0.detail["file"] == "archive-1.jsonl" })
        #expect(records[0].detail["first_id"] == "\(old.audit[0])" && records[2].detail["last_id"] == "\(old.audit.last!)")
        let sum = try await Command.run("/usr/bin/sha256sum", [file])
        let digest = String(sum.stdout.prefix(64))
        #expect(digest.count == 64 && records.last?.detail["file_sha256"] == digest && run.stdout.contains(digest), "\(run.stdout)")
        #expect(try await store.securityEvents(SecurityEventQuery(kind: .authFailed)).map(\.id) == recent.security)

        // Refused, with nothing changed.
        let size = try #require(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)
        let again = try await Self.archive(config, before: before, to: file)
        #expect(again.status == 2 && again.stderr.contains("already exists") && again.stderr.contains("nothing archived"), "\(again.stderr)")
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int == size)
        let other = config.deletingLastPathComponent().appendingPathComponent("archive-2.jsonl").path
        let tooRecent = try await Self.archive(config, before: now.addingTimeInterval(-10 * Self.day).formatted(Date.ISO8601FormatStyle()), to: other)
        #expect(tooRecent.status == 2 && tooRecent.stderr.contains("too recent") && tooRecent.stderr.contains("30 days"), "\(tooRecent.stderr)")
        let notATime = try await Self.archive(config, before: "last month", to: other)
        #expect(notATime.status != 0 && notATime.stderr.contains("--before must be a day"), "\(notATime.stderr)")
        #expect(try await Self.count(database, "SELECT count(*) FROM audit_events") == recent.audit.count + 1)

        // A day (midnight UTC) is a time too; nothing older is found, so no file is written.
        let day = now.addingTimeInterval(-35 * Self.day).formatted(Date.ISO8601FormatStyle().year().month().day())
        let empty = try await Self.archive(config, before: day, to: other)
        #expect(empty.status == 0 && empty.stdout.contains("no event recorded before"), "\(empty.stdout)\(empty.stderr)")
        #expect(!FileManager.default.fileExists(atPath: other))
    }

    /// Two runs at once are kept apart by the store's archive lease (`EventArchive.leaseKey`, a
    /// hold of the store): a run while another run's lease stands (here the row another host's
    /// run left, as the store holds it) makes no file and moves nothing; once that lease has
    /// passed its time (its run was killed) a run goes ahead, and lets its own lease go when it
    /// ends, so the next run need not wait. (Two runs had each written every old event to their
    /// own file.)
    @Test func aRunBesideAnotherRunIsRefusedUntilThatRunsLeaseEnds() async throws {
        let (config, database) = try Self.sandboxConfig()
        try await SQLiteGatewayStore(path: database).migrate()
        let now = Date()
        _ = try await Self.seedEvents(database, audit: 3, security: 0, at: now.addingTimeInterval(-60 * Self.day), tag: "old")
        let before = now.addingTimeInterval(-40 * Self.day).formatted(Date.ISO8601FormatStyle())
        let directory = config.deletingLastPathComponent()
        func otherRunsLease(until: Date) async throws {
            try await TestSQLite.queue(database).write { db in
                try db.execute(sql: "INSERT OR REPLACE INTO token_transition_holds (hold_key, holder, until_ms) VALUES (?, ?, ?)",
                               arguments: [EventArchive.leaseKey, "cli:other on host-b pid 7 run 1", Int64(until.timeIntervalSince1970 * 1000)])
            }
        }
        try await otherRunsLease(until: now.addingTimeInterval(600))
        let besideFile = directory.appendingPathComponent("archive-beside.jsonl").path
        let beside = try await Self.archive(config, before: before, to: besideFile)
        #expect(beside.status != 0 && beside.stderr.contains("another archive run is under way") && beside.stderr.contains("nothing archived"),
                "\(beside.stderr)")
        #expect(!FileManager.default.fileExists(atPath: besideFile))
        #expect(try await Self.count(database, "SELECT count(*) FROM audit_events") == 3)
        #expect(try await Self.count(database, "SELECT count(*) FROM security_events WHERE kind = 'events_archived'") == 0)

        // That run was killed: its lease passed its time.
        try await otherRunsLease(until: now.addingTimeInterval(-1))
        let file = directory.appendingPathComponent("archive-after.jsonl").path
        let run = try await Self.archive(config, before: before, to: file)
        #expect(run.status == 0 && run.stdout.contains("archived 3 audit events"), "\(run.stdout)\(run.stderr)")
        #expect(try await Self.count(database, "SELECT count(*) FROM audit_events") == 0)
        // Its own lease went with it.
        #expect(try await Self.count(database, "SELECT count(*) FROM token_transition_holds") == 0)
    }

    /// A row is archived as its columns hold it: values this version does not know (a code, a
    /// device type, an outcome or kind of another version, a detail that is not JSON) reach the
    /// line unchanged, where a typed reading had dropped or changed some, and stopped every run
    /// at a row whose outcome or kind it did not know (the archive audit).
    @Test func rowsAreArchivedAsTheirColumnsHoldThem() async throws {
        let (config, database) = try Self.sandboxConfig()
        try await SQLiteGatewayStore(path: database).migrate()
        let at = Int64(Date().addingTimeInterval(-90 * Self.day).timeIntervalSince1970 * 1000)
        try await TestSQLite.queue(database).write { db in
            try db.execute(sql: """
                INSERT INTO audit_events (provisioning_id, at, client_id, card_id, wallet, device_type, token_id, issuer, endpoint, attempt,
                    outcome, error_code, upstream_status, latency_ms) VALUES ('prv_future', ?, 'demo', 'card_demo', 'vision_pay', 'vision',
                    NULL, 'bridge', NULL, 1, 'cancelled', 'some_future_code', 299, 7)
                """, arguments: [at])
            try db.execute(sql: "INSERT INTO security_events (at, kind, actor, source, card_id, detail) VALUES (?, 'session_revoked', 'x', NULL, NULL, 'not json')",
                           arguments: [at])
            try db.execute(sql: #"INSERT INTO security_events (at, kind, actor, source, card_id, detail) VALUES (?, 'auth_failed', 'y', NULL, NULL, '{"count":3,"nested":{"a":1}}')"#,
                           arguments: [at])
        }
        let file = config.deletingLastPathComponent().appendingPathComponent("raw.jsonl").path
        let run = try await Self.archive(config, before: Date().addingTimeInterval(-31 * Self.day).formatted(Date.ISO8601FormatStyle()), to: file)
        #expect(run.status == 0 && run.stdout.contains("archived 1 audit events and 2 security events"), "\(run.stdout)\(run.stderr)")
        let lines = try Self.lines(file)
        #expect(lines.count == 3)
        let audit = lines[0]
        #expect(audit["wallet"] as? String == "vision_pay" && audit["device_type"] as? String == "vision" && audit["outcome"] as? String == "cancelled"
            && audit["error_code"] as? String == "some_future_code" && (audit["upstream_status"] as? NSNumber)?.intValue == 299)
        #expect(audit["endpoint"] is NSNull && audit["token_id"] is NSNull, "a NULL column is a null, not left out")
        #expect(lines[1]["kind"] as? String == "session_revoked" && lines[1]["detail"] as? String == "not json")
        #expect(lines[2]["detail"] as? String == #"{"count":3,"nested":{"a":1}}"#)
        #expect(lines.allSatisfy { ($0["at_ms"] as? NSNumber)?.int64Value == at })
    }

    /// A page whose deletion cannot write its `events_archived` record is not deleted: the run
    /// stops saying so, its events are both in the file and still in the store, and a later run
    /// moves them (to a new file). No event is ever in neither.
    @Test func aPageWhoseDeletionCannotBeRecordedStaysInTheStore() async throws {
        let (config, database) = try Self.sandboxConfig()
        try await SQLiteGatewayStore(path: database).migrate()
        let old = try await Self.seedEvents(database, audit: 3, security: 0, at: Date().addingTimeInterval(-90 * Self.day), tag: "old")
        try await TestSQLite.queue(database).write { db in
            try db.execute(sql: """
                CREATE TRIGGER refuse_archive_record BEFORE INSERT ON security_events WHEN NEW.kind = 'events_archived'
                BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                """)
        }
        let before = Date().addingTimeInterval(-31 * Self.day).formatted(Date.ISO8601FormatStyle())
        let first = config.deletingLastPathComponent().appendingPathComponent("first.jsonl").path
        let stopped = try await Self.archive(config, before: before, to: first)
        #expect(stopped.status == 2 && stopped.stderr.contains("may or may not still be in the store")
            && stopped.stderr.contains("keep \(first)"), "\(stopped.stdout)\(stopped.stderr)")
        #expect(try await Self.count(database, "SELECT count(*) FROM audit_events") == 3)
        #expect(try Self.lines(first).compactMap { ($0["id"] as? NSNumber)?.int64Value } == old.audit)

        try await TestSQLite.queue(database).write { db in try db.execute(sql: "DROP TRIGGER refuse_archive_record") }
        let second = config.deletingLastPathComponent().appendingPathComponent("second.jsonl").path
        let moved = try await Self.archive(config, before: before, to: second)
        #expect(moved.status == 0 && moved.stdout.contains("archived 3 audit events"), "\(moved.stderr)")
        #expect(try await Self.count(database, "SELECT count(*) FROM audit_events") == 0)
        #expect(try Self.lines(second).compactMap { ($0["id"] as? NSNumber)?.int64Value } == old.audit)
    }
}
