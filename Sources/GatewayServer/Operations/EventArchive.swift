import ByteText
import Crypto
import Foundation
import ProvisioningCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `store archive`: moves the audit trail's and the security events' rows recorded before a time
/// out of the store, into a file of JSON lines, so that the store stops growing without an
/// audit record ever being lost.
///
/// A page at a time (audit events, then security events): the page's lines are written and synced
/// to the file (`fsync`) before the page is deleted, and its deletion writes an `events_archived`
/// security event in the same transaction, naming the file, the page's first and last id, how
/// many lines it wrote and rows it deleted, and the file's SHA-256 so far. A crash or a failure
/// therefore leaves every row in the store, in the file, or in both (a later run archives the
/// rest again, to another file; each line names its table and id, so a row in two files is told
/// as one), never in neither.
public enum EventArchive {
    /// Rows per page (each page one synced write of the file and one transaction).
    public static let defaultPageSize = 1_000

    /// The scan of a table stops at the first event recorded this long after `before`. Ids
    /// follow the time events are recorded at, but for instances whose clocks differ and events
    /// written a few seconds late (`LateAudit`): a day covers both. An older event after that
    /// point (clocks a day apart) stays in the store, where a later run finds it.
    static let scanSlack: TimeInterval = 86_400

    /// The store's hold that keeps two archive runs apart (`GatewayStore.takeHold`; no token's
    /// key, which is three lines, can be it). Two runs at once had each written every old event
    /// they read to their own file: both files held them.
    public static let leaseKey = "store archive"
    /// How long a run's lease lasts past its last renewal (at the start and before each page):
    /// a run killed outright keeps others out this long at most.
    public static let leaseTime: TimeInterval = 900

    /// How recent `--before` may be: 30 days, the longest an Idempotency-Key lives
    /// (`store.idempotency_ttl_seconds`' bound), since a key's replays and refused repeats read
    /// the first event of its provisioning's trail, and an abandoned claim points its retry there.
    public static let minimumAge: TimeInterval = TimeInterval(GatewayConfig.maxIdempotencyTTLSeconds)

    /// `--before` as given, read whole and exactly: a day (`2025-11-01`, its midnight in UTC), or
    /// a time with its offset (`2025-11-01T12:00:00Z`, `2025-11-01T12:00:00.250+01:00`; seconds
    /// 00-59, at most milliseconds); nil for anything else, a day that does not exist included.
    /// Foundation's ISO 8601 parsing took a string that only began with a day, and read a time as
    /// its day's midnight, dropping its hours and offset (a `--before` 29 days ago passed the
    /// 30-day floor and archived 13 hours past the time asked for: the archive audit).
    public static func parseTime(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10 || (20...29).contains(bytes.count) else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count, range.allSatisfy({ (0x30...0x39).contains(bytes[$0]) }) else { return nil }
            return range.reduce(0) { $0 * 10 + Int(bytes[$1] - 0x30) }
        }
        func at(_ index: Int, _ character: Character) -> Bool { index < bytes.count && bytes[index] == character.asciiValue }
        guard let year = number(0..<4), at(4, "-"), let month = number(5..<7), at(7, "-"), let day = number(8..<10) else { return nil }
        var components = DateComponents(year: year, month: month, day: day, hour: 0, minute: 0, second: 0)
        var offsetSeconds = 0
        var milliseconds = 0
        if bytes.count > 10 {
            guard at(10, "T"), let hour = number(11..<13), at(13, ":"), let minute = number(14..<16), at(16, ":"),
                  let second = number(17..<19), hour < 24, minute < 60, second < 60 else { return nil }
            components.hour = hour
            components.minute = minute
            components.second = second
            var index = 19
            if at(index, ".") {
                var digits = 0
                index += 1
                while index < bytes.count, (0x30...0x39).contains(bytes[index]), digits < 3 {
                    milliseconds = milliseconds * 10 + Int(bytes[index] - 0x30)
                    digits += 1
                    index += 1
                }
                guard digits > 0 else { return nil }
                milliseconds *= [100, 10, 1][digits - 1]
            }
            if at(index, "Z"), index + 1 == bytes.count {
                offsetSeconds = 0
            } else if at(index, "+") || at(index, "-"), index + 6 == bytes.count, let hours = number(index + 1..<index + 3), at(index + 3, ":"),
                      let minutes = number(index + 4..<index + 6), hours < 24, minutes < 60 {
                offsetSeconds = (hours * 3_600 + minutes * 60) * (at(index, "-") ? -1 : 1)
            } else {
                return nil
            }
        }
        var calendar = Calendar(identifier: .gregorian)
        guard let zone = TimeZone(secondsFromGMT: offsetSeconds) else { return nil }
        calendar.timeZone = zone
        guard (1...9_999).contains(year), let date = calendar.date(from: components) else { return nil }
        // A day that does not exist (2025-02-30) would roll over into the next month: refused.
        let back = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        guard back.year == year, back.month == month, back.day == day, back.hour == components.hour, back.minute == components.minute,
              back.second == components.second else { return nil }
        return date.addingTimeInterval(TimeInterval(milliseconds) / 1000)
    }

    /// A time to the millisecond, as the stores keep it.
    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// `2025-11-01T12:00:00.123Z`, from the whole milliseconds: the whole seconds formatted, the
    /// milliseconds written as digits (Foundation's fractional seconds truncate a binary
    /// fraction, and wrote about half of all times 1 ms early: the review).
    static func timestamp(_ date: Date) -> String {
        timestamp(milliseconds: milliseconds(date))
    }

    static func timestamp(milliseconds: Int64) -> String {
        let (seconds, fraction) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (wholeSeconds, ms) = fraction < 0 ? (seconds - 1, fraction + 1000) : (seconds, fraction)
        let text = Date(timeIntervalSince1970: TimeInterval(wholeSeconds)).formatted(Date.ISO8601FormatStyle())
        let digits = String(ms)
        return String(text.dropLast()) + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// One line of the file: a row of `table` as its columns hold it, each column under its own
    /// name, `at` as an ISO 8601 time beside `at_ms`, the milliseconds the store keeps (a blob,
    /// which no event column holds, as base64).
    struct Line: Encodable {
        let table: EventTable
        let row: ArchivedRow

        struct Key: CodingKey {
            let stringValue: String
            init(_ name: String) { stringValue = name }
            init?(stringValue: String) { self.stringValue = stringValue }
            var intValue: Int? { nil }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(table.rawValue, forKey: Key("table"))
            try container.encode(row.id, forKey: Key("id"))
            for (name, value) in row.columns where !["table", "id", "at", "at_ms"].contains(name) {
                switch value {
                case .null: try container.encodeNil(forKey: Key(name))
                case .integer(let integer): try container.encode(integer, forKey: Key(name))
                case .real(let real): try container.encode(real, forKey: Key(name))
                case .text(let text): try container.encode(text, forKey: Key(name))
                case .blob(let data): try container.encode(data.base64EncodedString(), forKey: Key(name))
                }
            }
            try container.encode(EventArchive.timestamp(milliseconds: row.at), forKey: Key("at"))
            try container.encode(row.at, forKey: Key("at_ms"))
        }
    }

    /// The file, opened for this archive only: made new (never over an existing file), 0600, its
    /// directory entry synced, every page synced before the store lets its rows go.
    final class ArchiveFile {
        let descriptor: Int32
        private(set) var hash = SHA256()
        private(set) var bytes = 0

        init(path: String) throws(ArchiveProblem) {
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                let reason = String(cString: strerror(errno))
                throw ArchiveProblem(errno == EEXIST
                    ? "\(path) already exists: archive to a new file (an archive is never written over); nothing archived"
                    : "cannot make \(path): \(reason); nothing archived")
            }
            // The new name must survive a power loss as surely as the lines in it: a directory
            // that cannot be synced stops the run before anything is deleted, and the new,
            // empty file goes (closed here once: `deinit` does not run for a failed `init`).
            let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
            let directoryDescriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            let synced = directoryDescriptor >= 0 && fsync(directoryDescriptor) == 0
            let reason = String(cString: strerror(errno))
            if directoryDescriptor >= 0 { close(directoryDescriptor) }
            guard synced else {
                close(descriptor)
                unlink(path)
                throw ArchiveProblem("cannot sync the directory of \(path): \(reason); nothing archived")
            }
            self.descriptor = descriptor
        }

        deinit { close(descriptor) }

        /// Appends `data` and syncs it to the disk; throws unless every byte is there, and then
        /// cuts the file back to what was synced before, so that it ends with a whole line and
        /// matches the SHA-256 its last `events_archived` event names.
        func appendSynced(_ data: Data) throws(ArchiveProblem) {
            var failure: String?
            data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
                var offset = 0
                while offset < buffer.count {
                    let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        failure = String(cString: strerror(errno))
                        return
                    }
                    offset += written
                }
            }
            if failure == nil, fsync(descriptor) != 0 { failure = "cannot sync it: " + String(cString: strerror(errno)) }
            if let failure {
                _ = ftruncate(descriptor, off_t(bytes))
                _ = fsync(descriptor)
                throw ArchiveProblem("cannot write the archive (\(failure))")
            }
            hash.update(data: data)
            bytes += data.count
        }

        var sha256: String { Data(hash.finalize()).lowercaseHex }
    }

    struct ArchiveProblem: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// What a run did, for its report.
    struct Totals {
        var audit = 0
        var security = 0
        /// Rows written to the file but found gone when their page was deleted (another archive
        /// run beside this one took them): in both files.
        var goneMeanwhile = 0
        var pages = 0
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// Moves the rows recorded before `before` into `file`. See the type's comment.
    static func run(store: any GatewayStore, before requested: Date, file: String, actor: String, pageSize: Int,
                    now: @escaping @Sendable () -> Date) async throws -> ToolOutcome
    {
        // One cutoff, in whole milliseconds as the stores keep times, for the pages here and the
        // deletions there alike.
        let beforeMS = milliseconds(requested)
        let scanEndMS = beforeMS + Int64(scanSlack * 1000)
        // The lease first: a run beside another one makes no file and reads nothing.
        let holder = "\(actor) on \(GatewayInstance.name) run \(UUID().uuidString.prefix(8).lowercased())"
        // Renewed only while it is still this run's: a lease that lapsed meanwhile (purged, or
        // taken and let go by another run) is not taken again, since another run may have moved
        // the very rows this one read.
        func renewLease() async throws -> Bool {
            try await store.extendHold(leaseKey, holder: holder, until: now().addingTimeInterval(leaseTime))
        }
        do {
            let at = now()
            guard try await store.takeHold(leaseKey, holder: holder, now: at, until: at.addingTimeInterval(leaseTime)) else {
                return .failed("another archive run is under way on this store (it holds the store's archive lease, renewed at each "
                    + "page; a run that was killed lets it go \(Int(leaseTime / 60)) minutes after its last page): nothing archived, no "
                    + "file written; run it from one place")
            }
        } catch {
            // The lease may have committed with its answer lost (a PostgreSQL timeout): let it go,
            // or every run would be refused until it lapsed.
            try? await store.releaseHold(leaseKey, holder: holder)
            return .failed("the store failed (\(error)) taking the archive lease: nothing archived, no file written")
        }
        let outcome = await archive(store: store, beforeMS: beforeMS, scanEndMS: scanEndMS, file: file, actor: actor, pageSize: pageSize,
                                    now: now, renewLease: renewLease)
        // Let go at once, whatever happened (a lease the store did not let go lapses by itself).
        try? await store.releaseHold(leaseKey, holder: holder)
        return outcome
    }

    /// The run under its lease: `renewLease` before each page, false once another run took it.
    private static func archive(
        store: any GatewayStore, beforeMS: Int64, scanEndMS: Int64, file: String, actor: String, pageSize: Int,
        now: @escaping @Sendable () -> Date, renewLease: () async throws -> Bool
    ) async -> ToolOutcome {
        let before = Date(timeIntervalSince1970: TimeInterval(beforeMS) / 1000)
        let output: ArchiveFile
        do {
            output = try ArchiveFile(path: file)
        } catch {
            return .failed(error.description)
        }
        let encoder = encoder()
        var totals = Totals()
        let name = String(URL(fileURLWithPath: file).lastPathComponent.prefix(128))
        /// Said with every failure: a file holds events that may be nowhere else.
        func kept() -> String {
            "keep \(file) (\(output.bytes) bytes, sha256 \(output.sha256)): its lines may be the only copy of their events"
        }

        func page(_ table: EventTable, ids: [Int64], lines: [Data]) async throws {
            // Still this run's lease, for the page's deletion and the next read: a run held up
            // past the lease's time, whose lease another run then took, stops before it writes.
            let renewed: Bool
            do {
                renewed = try await renewLease()
            } catch {
                throw ArchiveProblem("the store failed (\(error)) renewing the archive lease: stopped after deleting "
                    + "\(totals.audit + totals.security) events, which are in the file; run again, to a new file, for the rest; \(kept())")
            }
            guard renewed else {
                throw ArchiveProblem("this run's archive lease lapsed (it was held up past its \(Int(leaseTime / 60)) minutes; another "
                    + "run may have taken it): stopped after deleting \(totals.audit + totals.security) events, which are in the file; "
                    + "\(kept())")
            }
            var text = Data()
            for line in lines {
                text.append(line)
                text.append(0x0A)
            }
            do {
                try output.appendSynced(text)
            } catch {
                throw ArchiveProblem("\(error): stopped after deleting \(totals.audit + totals.security) events; this page's events "
                    + "are still in the store; \(kept())")
            }
            let stamp = now(), sha256 = output.sha256, written = ids.count
            let record = { @Sendable (deleted: ArchivedEventCounts) in
                SecurityEvent(at: stamp, kind: .eventsArchived, actor: actor, detail: [
                    "before": timestamp(milliseconds: beforeMS), "table": table.rawValue, "written": "\(written)",
                    "deleted": "\(deleted.audit + deleted.security)", "first_id": "\(ids.first ?? 0)", "last_id": "\(ids.last ?? 0)",
                    "file": name, "file_sha256": sha256,
                ])
            }
            let deleted: ArchivedEventCounts
            do {
                deleted = try await store.deleteArchivedEvents(audit: table == .audit ? ids : [],
                                                               security: table == .security ? ids : [],
                                                               recordedBefore: before, record: record)
            } catch {
                // A store that did not answer in time (PostgreSQL's operation timeout) may still
                // commit the deletion: the page may be gone from the store, or not.
                throw ArchiveProblem("the store did not confirm the last page's deletion (\(error)): stopped after deleting "
                    + "\(totals.audit + totals.security) events; the last page's \(ids.count) events are in the file and may or may not "
                    + "still be in the store (a later run, to a new file, archives what is left); \(kept())")
            }
            totals.audit += deleted.audit
            totals.security += deleted.security
            totals.goneMeanwhile += ids.count - deleted.audit - deleted.security
            totals.pages += 1
        }

        do {
            // Each table by id, a page at a time, until the end or the first event recorded a
            // day or more after `before` (`scanSlack`): ids follow time but for clocks apart, so
            // what comes after that is newer, and the table's recent part is never read whole.
            for table in EventTable.allCases {
                var after: Int64 = 0
                while true {
                    let rows = try await store.archivedRows(table, after: after, limit: pageSize)
                    let read = rows.prefix { $0.at < scanEndMS }
                    let old = read.filter { $0.at < beforeMS }
                    if !old.isEmpty {
                        try await page(table, ids: old.map(\.id), lines: try old.map { try encoder.encode(Line(table: table, row: $0)) })
                    }
                    guard let last = rows.last, read.count == rows.count else { break }
                    after = last.id
                }
            }
        } catch let problem as ArchiveProblem {
            return .failed(problem.description)
        } catch {
            // A read of the next page failed: what went before is in the file and gone from the store.
            return .failed("the store failed (\(error)): stopped after deleting \(totals.audit + totals.security) events, which are in "
                + "the file; run again, to a new file, for the rest; \(kept())")
        }
        if totals.pages == 0 {
            unlink(file)
            return .ok("no event recorded before \(timestamp(milliseconds: beforeMS)) was found (each table is read up to its first "
                + "event recorded a day after that): nothing archived, no file written")
        }
        let meanwhile = totals.goneMeanwhile == 0 ? ""
            : "; \(totals.goneMeanwhile) of the lines' events were already gone from the store (another archive run took them too)"
        return .ok("archived \(totals.audit) audit events and \(totals.security) security events recorded before "
            + "\(timestamp(milliseconds: beforeMS)) to \(file) (\(output.bytes) bytes, sha256 \(output.sha256)), and deleted them from the "
            + "store\(meanwhile)")
    }
}

extension OperatorTools {
    /// `store archive`: see `EventArchive`. `before` must be at least `EventArchive.minimumAge`
    /// before `now`.
    public static func archiveEvents(
        config path: String, before: Date, to file: String, actor: String, pageSize: Int = EventArchive.defaultPageSize,
        now: @escaping @Sendable () -> Date = { Date() }, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async -> ToolOutcome {
        let latest = now().addingTimeInterval(-EventArchive.minimumAge)
        guard before <= latest else {
            return .failed("--before \(EventArchive.timestamp(before)) is too recent: it must be at least 30 days ago "
                + "(\(EventArchive.timestamp(latest)) or earlier), the longest an Idempotency-Key lives, whose repeats read their "
                + "provisioning's trail; nothing archived")
        }
        guard pageSize >= 1 else { return .failed("the page size must be at least 1") }
        return await withStore(config: path, environment: environment) { _, store in
            try await EventArchive.run(store: store, before: before, file: file, actor: actor, pageSize: pageSize, now: now)
        }
    }
}
