import Foundation
import Glibc
@testable import GatewayStore
import GatewayTestSupport
import Logging
import ProvisioningCore
import Testing

/// The same conformance scenarios against a real PostgreSQL server this suite starts and stops.
@Suite(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipMessage)), .serialized)
struct PostgresGatewayStoreTests {
    static let logger = Logger(label: "postgres-store-tests")

    func withStore(_ body: @escaping @Sendable (PostgresGatewayStore) async throws -> Void) async throws {
        try await withStoreAndSQL { store, _ in try await body(store) }
    }

    @Test(arguments: StoreConformance.all)
    func conforms(_ scenario: StoreScenario) async throws { try await withStore(scenario.run) }

    /// A running store on a fresh server, and raw SQL (psql) on its database.
    func withStoreAndSQL(_ body: @escaping @Sendable (PostgresGatewayStore, @escaping StoreConformance.RawSQL) async throws -> Void) async throws {
        try await PostgresTestServer.with { server in
            let store = try PostgresGatewayStore(url: server.url, logger: Self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await store.run() }
                defer { group.cancelAll() }
                try await body(store) { sql in try await server.execute(sql) }
            }
        }
    }

    /// Two writes of a card id that does not exist yet: the second finds it free, then its insert
    /// waits for the first's and updates the new row. It is run again, so that it reads what that row
    /// held: the reference it replaces is released to the card's program like any other.
    @Test func aCardCreatedMeanwhileIsReadBeforeItIsChanged() async throws {
        try await withStoreAndSQL { store, sql in
            try await store.migrate()
            let held = StoreConformance.card("race", program: "acme", ref: "r0")
            // Another transaction inserts the card and holds its commit for a while.
            let holder = Task {
                try await sql("""
                    BEGIN;
                    INSERT INTO cards (card_id, program, issuer, issuer_reference, updated_at)
                    VALUES ('race', 'acme', 'bridge', '\(String(decoding: try SharedJSONFixture.reference(held), as: UTF8.self))', 0);
                    SELECT pg_sleep(1.5);
                    COMMIT;
                    """)
            }
            try await Task.sleep(for: .milliseconds(500))
            let result = try await store.putCard(StoreConformance.card("race", program: "acme", ref: "r1"), owners: ["acme"],
                                                 event: StoreConformance.change("acme", "race"))
            try await holder.value
            #expect(result == .updated)
            #expect(try await store.card("race") == StoreConformance.card("race", program: "acme", ref: "r1"))
            // r0 was the card's until this write: it stays acme's.
            await #expect(throws: CardRegistryError.issuerReferenceInUse) {
                try await store.putCard(StoreConformance.card("thief", program: "evil", ref: "r0"), owners: ["evil"],
                                        event: StoreConformance.change("evil", "thief"))
            }
        }
    }

    /// Security events commit in the order of their ids, so the admin audit's paging (`after`
    /// the last id read) never skips one: while a transaction that drew an id is still open, a
    /// second writer waits for it instead of committing a higher id first. The two-instance audit
    /// saw 15 of 8,964 events never listed to a reader following `next_after` before the lock.
    /// The first writer is a psql session held open until the test lets it go (a row in
    /// `test_release`), so nothing here depends on timing.
    @Test func securityEventsCommitInTheOrderOfTheirIds() async throws {
        try await withStoreAndSQL { store, sql in
            try await store.migrate()
            try await sql("CREATE TABLE test_release (go INTEGER)")
            let lock = PostgresGatewayStore.securityEventLock
            let holder = Task {
                try await sql("""
                    BEGIN;
                    SELECT pg_advisory_xact_lock(\(lock));
                    INSERT INTO security_events (at, kind, actor, source, card_id, detail) VALUES (1, 'admin_read', 'first', NULL, NULL, '{}');
                    DO $$ BEGIN
                        FOR i IN 1..3000 LOOP
                            EXIT WHEN EXISTS (SELECT 1 FROM test_release);
                            PERFORM pg_sleep(0.01);
                        END LOOP;
                    END $$;
                    COMMIT;
                    """)
            }
            /// Whether `condition` (SQL) holds now.
            func holds(_ condition: String) async -> Bool {
                (try? await sql("DO $$ BEGIN IF NOT (\(condition)) THEN RAISE EXCEPTION 'not yet'; END IF; END $$")) != nil
            }
            /// Waits until `condition` holds, asking the server every 10 ms, for at most 30 s.
            func waitFor(_ condition: String) async throws -> Bool {
                for _ in 0..<3000 {
                    if await holds(condition) { return true }
                    try await Task.sleep(for: .milliseconds(10))
                }
                return false
            }
            let held = "EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = \(lock) AND granted)"
            #expect(try await waitFor(held), "the first writer never took the lock")
            let second = Task {
                try await store.appendSecurityEvent(SecurityEvent(at: Date(timeIntervalSince1970: 2), kind: .adminRead, actor: "second"))
            }
            let waiting = "EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = \(lock) AND NOT granted)"
            let committed = "EXISTS (SELECT 1 FROM security_events WHERE actor = 'second')"
            #expect(try await waitFor("\(waiting) OR \(committed)"))
            #expect(await !holds(committed), "the second event committed while the first, with a lower id, was still open")
            try await sql("INSERT INTO test_release VALUES (1)")
            try await holder.value
            try await second.value
            let events = try await store.securityEvents(SecurityEventQuery())
            #expect(events.map(\.actor) == ["first", "second"])
            #expect(events.map(\.id) == events.map(\.id).sorted())
        }
    }

    @Test func anArchiveDeletionWithoutItsRecordDeletesNothing() async throws {
        try await withStoreAndSQL { store, sql in
            try await StoreConformance.anArchiveDeletionWithoutItsRecordDeletesNothing(
                store, sql: sql,
                refuseRecord: """
                    CREATE FUNCTION refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'record refused'; END $$;
                    CREATE TRIGGER refuse_record BEFORE INSERT ON security_events FOR EACH ROW
                        WHEN (NEW.kind = 'events_archived') EXECUTE FUNCTION refuse_record();
                    """,
                allowRecord: "DROP TRIGGER refuse_record ON security_events")
        }
    }

    @Test func anAnswerAndItsAuditEventsCommitTogetherOrNotAtAll() async throws {
        try await withStoreAndSQL { store, sql in
            try await StoreConformance.anAnswerAndItsEventsCommitTogetherOrNotAtAll(
                store, sql: sql,
                refuseAudit: """
                    CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$;
                    CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit();
                    """,
                allowAudit: "DROP TRIGGER refuse_audit ON audit_events")
        }
    }

    /// A write that fails at its COMMIT, after its row came back (a deferred constraint here; a
    /// server stopping in the PostgreSQL audit), is a failure: the audit event and the claim
    /// had been taken as written at their first row, and a 200 went out for a rolled-back event.
    @Test func aWriteWhoseCommitFailsAfterItsRowIsAFailure() async throws {
        try await withStoreAndSQL { store, sql in
            try await store.migrate()
            try await sql("""
                CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
                CREATE CONSTRAINT TRIGGER audit_at_commit AFTER INSERT ON audit_events DEFERRABLE INITIALLY DEFERRED
                    FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();
                CREATE CONSTRAINT TRIGGER claim_at_commit AFTER INSERT ON idempotency_keys DEFERRABLE INITIALLY DEFERRED
                    FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();
                """)
            let event = AuditEvent(provisioningID: "prv_commit", at: Date(), client: "acme", cardID: "c1", operation: .applePay, issuer: "bridge",
                                   endpoint: "https://bridge", attempt: 1, outcome: .succeeded, errorCode: nil, upstreamStatus: 200, latencyMS: 3)
            await #expect(throws: (any Error).self) { try await store.appendAudit(event) }
            #expect(try await store.auditEvents("prv_commit").isEmpty)
            let now = Date()
            await #expect(throws: (any Error).self) {
                try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", provisioningID: "prv_claim", now: now,
                                                    expiresAt: now.addingTimeInterval(3600), abandonAt: now.addingTimeInterval(60))
            }
        }
    }

    /// Undoes schema 014 (its indexes back to schema 009's), so that a test can apply it again.
    static let forget014 = """
        DROP INDEX cards_issuer_reference_card_key; DROP INDEX released_issuer_references_card_key;
        CREATE UNIQUE INDEX cards_issuer_reference_folded ON cards (issuer, lower(issuer_reference COLLATE "C"))
            WHERE issuer IS NOT NULL AND issuer_reference <> '{}';
        CREATE INDEX released_issuer_references_folded ON released_issuer_references (issuer, lower(issuer_reference COLLATE "C"));
        DELETE FROM schema_migrations WHERE version = '014_issuer_card_key'
        """

    /// Four scenarios on one server (each server is an `initdb` and a start, which a parallel
    /// test run pays in CPU): a claim judged by its own abandon time, a newer schema refused,
    /// schema 009 refused over references held twice when case is set aside, and schema 014 over
    /// card accounts held twice under two customer ids.
    @Test func aClaimIsJudgedByItsOwnAbandonTimeANewerSchemaIsRefusedAndCaseVariantsStopSchema009() async throws {
        try await withStoreAndSQL { store, sql in
            try await StoreConformance.aClaimIsJudgedByItsOwnAbandonTime(store, sql: sql)
            // `store check` names an index the server marked invalid, and how to rebuild it.
            try await sql("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'cards_program'::regclass")
            let problems = try await store.check()
            #expect(problems.count == 1 && problems.first?.contains("REINDEX INDEX cards_program") == true, "\(problems)")
            try await sql("REINDEX INDEX cards_program")
            #expect(try await store.check() == [])
            try await StoreConformance.aNewerSchemaIsRefusedAndLeftAlone(
                store, sql: sql,
                recordFutureVersionForget007: """
                    INSERT INTO schema_migrations (version, applied_at) VALUES ('999_from_the_future', 0);
                    DELETE FROM schema_migrations WHERE version = '007_claim_abandon_time'
                    """)
            try await sql("""
                DELETE FROM schema_migrations WHERE version = '999_from_the_future';
                INSERT INTO schema_migrations (version, applied_at) VALUES ('007_claim_abandon_time', 0)
                """)
            try await store.migrate()
            try await StoreConformance.theCaseFoldingMigrationRefusesHeldVariants(
                store, sql: sql,
                forget009: Self.forget014 + """
                    ;
                    DROP INDEX cards_issuer_reference_folded; DROP INDEX released_issuer_references_folded;
                    CREATE UNIQUE INDEX cards_issuer_reference ON cards (issuer, issuer_reference)
                        WHERE issuer IS NOT NULL AND issuer_reference <> '{}';
                    DELETE FROM schema_migrations WHERE version = '009_reference_case_folded'
                    """, dialect: .postgres)
            try await StoreConformance.theCardKeyMigrationRefusesSharedCards(store, sql: sql, forget014: Self.forget014, dialect: .postgres)
        }
    }

    @Test func theProgramBackfillNamesTheCardsProgramNow() async throws {
        try await withStoreAndSQL { store, sql in
            try await StoreConformance.theProgramBackfillNamesTheCardsProgramNow(
                store, sql: sql, forget012: "DELETE FROM schema_migrations WHERE version = '012_audit_program_backfill'")
        }
    }

    @Test func theAuditOnceMigrationKeepsWhatDiffers() async throws {
        try await withStoreAndSQL { store, sql in
            try await StoreConformance.theAuditOnceMigrationKeepsWhatDiffers(
                store, sql: sql,
                forget005: "DROP INDEX audit_events_attempt; DELETE FROM schema_migrations WHERE version = '005_audit_event_once'")
        }
    }

    /// A server acknowledging commits it has not flushed could lose audit events in a crash: the
    /// store refuses to start on it, naming the setting.
    @Test func aDatabaseWithSynchronousCommitOffIsRefused() async throws {
        try await PostgresTestServer.with { server in
            try await server.execute("ALTER DATABASE gateway SET synchronous_commit = off")
            let store = try PostgresGatewayStore(url: server.url, logger: Self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await store.run() }
                defer { group.cancelAll() }
                // Never migrated: no schema yet, and nothing to find damaged (`store check`).
                let versions = try? await store.schemaVersions()
                let problems = try? await store.check()
                #expect(versions == [] && problems == [], "\(String(describing: versions)) \(String(describing: problems))")
                let error = await #expect(throws: StoreError.self) { try await store.migrate() }
                #expect(error?.description.contains("synchronous_commit is off") == true, "\(String(describing: error))")
                #expect(error?.store == store.displayName)
            }
            try await server.execute("ALTER DATABASE gateway SET synchronous_commit = on")
            let fixed = try PostgresGatewayStore(url: server.url, logger: Self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await fixed.run() }
                defer { group.cancelAll() }
                try await fixed.migrate()
            }
        }
    }

    @Test func twoInstancesMigratingAtOnceBothSucceed() async throws {
        try await PostgresTestServer.with { server in
            let stores = try (0..<2).map { _ in try PostgresGatewayStore(url: server.url, logger: Self.logger) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { await store.run() } }
                defer { group.cancelAll() }
                try await withThrowingTaskGroup(of: Void.self) { migrations in
                    for store in stores { migrations.addTask { try await store.migrate() } }
                    try await migrations.waitForAll()
                }
                #expect(try await stores[1].schemaVersions() == StoreConformance.versions)
            }
        }
    }
}

/// Both stores migrate to the same schema versions, which `route explain` requires of a store.
@Test func bothStoresKnowTheSameSchemaVersions() {
    #expect(PostgresGatewayStore.migrations.map(\.version) == StoreBootstrap.currentSchema)
    #expect(StoreBootstrap.currentSchema.last == StoreRows.cardKeyVersion)
}

/// Needs no server: nothing listens on port 1.
@Suite struct PostgresUnreachableTests {
    @Test func anUnreachableServerIsAClearErrorNamingTheStore() async throws {
        let store = try PostgresGatewayStore(url: "postgres://gateway@127.0.0.1:1/gateway", connectTimeout: .milliseconds(300), logger: Logger(label: "postgres-store-tests"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await store.run() }
            defer { group.cancelAll() }
            do {
                try await store.migrate()
                Issue.record("migrated against nothing")
            } catch let error as StoreError {
                #expect(error.store == "postgres 127.0.0.1:1/gateway")
            }
        }
    }
}

/// A server that accepts connections and never answers (a hung database, a black-holed route):
/// a request's store operation fails after `operation_timeout_ms`, long before the pool's own
/// connect timeout, instead of holding the request. Needs no PostgreSQL.
@Suite struct PostgresSilentServerTests {
    @Test func anOperationOnAServerThatNeverAnswersFailsAfterItsTimeout() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let store = try PostgresGatewayStore(url: "postgres://gateway@127.0.0.1:\(listener.port)/gateway", connectTimeout: .seconds(120),
                                             operationTimeout: .milliseconds(200), logger: Logger(label: "postgres-store-tests"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await store.run() }
            defer { group.cancelAll() }
            for operation in ["card", "audit"] {
                do {
                    if operation == "card" { _ = try await store.card("c1") } else { try await store.appendAudit(StoreConformance.success("prv_x")) }
                    Issue.record("\(operation): answered by a server that says nothing")
                } catch let error as StoreError {
                    #expect(error.store == "postgres 127.0.0.1:\(listener.port)/gateway")
                    #expect(error.reason.contains("operation_timeout_ms"), "\(error.reason)")
                }
            }
        }
    }
}

/// A TCP port on loopback that completes connections (the kernel's backlog) and never reads or
/// writes a byte.
final class SilentListener: Sendable {
    let descriptor: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 64) == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(descriptor) }
}

/// A reference's fields as the stores write them (sorted keys), for raw SQL.
enum SharedJSONFixture {
    static func reference(_ card: CardRecord) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(card.issuerReference.fields)
    }
}
