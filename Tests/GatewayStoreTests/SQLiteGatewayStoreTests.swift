import Foundation
import GatewayTestSupport
@testable import GatewayStore
import GRDB
import ProvisioningCore
import Testing

@Suite struct SQLiteGatewayStoreTests {
    func withStore(_ body: (SQLiteGatewayStore) async throws -> Void) async throws {
        let directory = TestDirectories.root.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(try await SQLiteGatewayStore.open(path: directory.appendingPathComponent("gateway.sqlite").path))
    }

    @Test(arguments: StoreConformance.all)
    func conforms(_ scenario: StoreScenario) async throws { try await withStore(scenario.run) }

    /// The admin audit listing's filters reach SQLite as plain conditions, so the kind and card
    /// filters search their indexes instead of scanning the table (`EXPLAIN QUERY PLAN` on the
    /// statement the store runs, against the migrated schema).
    @Test func aFilteredSecurityEventPageSearchesItsIndex() async throws {
        let path = TestDirectories.root.appendingPathComponent("plan-\(UUID().uuidString).sqlite").path
        try await SQLiteGatewayStore(path: path).migrate()
        func plan(_ query: SecurityEventQuery) throws -> String {
            let (sql, arguments) = SQLiteGatewayStore.securityEventsStatement(query)
            return try TestSQLite.queue(path).read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }.joined(separator: "; ")
            }
        }
        let byKind = try plan(SecurityEventQuery(kind: .authFailed))
        #expect(byKind.contains("USING INDEX security_events_kind"), "\(byKind)")
        #expect(try plan(SecurityEventQuery(cardID: "c1")).contains("USING INDEX security_events_card"))
        // Unfiltered, a page is a range of the primary key.
        #expect(try plan(SecurityEventQuery(after: 10)).contains("USING INTEGER PRIMARY KEY"))
    }

    /// What `/readyz` adds to its read: the file the store opened is still at its path and can be
    /// written. A file deleted (its directory removed: writes went on into the deleted file, and
    /// were lost at the next start) or replaced under the running store is a problem.
    /// `store check` names a table of the current schema that is gone; its list is the schema's.
    @Test func theCheckedTablesAreTheCurrentSchemasTables() async throws {
        let path = TestDirectories.root.appendingPathComponent("tables-\(UUID().uuidString).sqlite").path
        try await SQLiteGatewayStore(path: path).migrate()
        let tables = try await TestSQLite.queue(path).read { db in
            Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
        }
        #expect(tables == SQLiteGatewayStore.expectedTables)
    }

    /// Only an issuer-reference index's violation is `issuer_reference_in_use`: another unique
    /// index's (here one made for the test, as a damaged index's would be) is the store's error.
    @Test func onlyAnIssuerReferenceConflictIsReadAsOne() async throws {
        let path = TestDirectories.root.appendingPathComponent("conflicts-\(UUID().uuidString).sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        try await store.migrate()
        try await TestSQLite.queue(path).write { try $0.execute(sql: "CREATE UNIQUE INDEX one_card_per_program ON cards (program)") }
        func card(_ id: String, _ reference: String, program: String = "acme") -> CardRecord {
            CardRecord(id: CardID(id), program: ProgramID(program), issuer: "tmp", issuerReference: .init(["issuer_card_id": reference]))
        }
        try await store.importCards([card("a", "t_a")])
        do {
            try await store.importCards([card("b", "t_b")])
            Issue.record("a second card of the program was written")
        } catch let error as CardRegistryError {
            Issue.record("another index's violation was read as \(error)")
        } catch {
            #expect("\(error)".contains("UNIQUE constraint failed: cards.program"), "\(error)")
        }
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await store.importCards([card("c", "T_A", program: "other")]) }
    }

    @Test func aDeletedOrReplacedFileIsAWriteProblem() async throws {
        let directory = TestDirectories.unique("sqlite-ready")
        let path = directory.appendingPathComponent("gateway.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        try await store.migrate()
        #expect(await store.writeProblem() == nil)
        try FileManager.default.moveItem(atPath: path, toPath: path + ".moved")
        #expect(await store.writeProblem()?.hasPrefix("its database file is gone") == true)
        try Data("not the same file".utf8).write(to: URL(fileURLWithPath: path))
        #expect(await store.writeProblem()?.hasPrefix("its database file was replaced") == true)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: path + ".moved", toPath: path)
        #expect(await store.writeProblem() == nil, "the file it opened, back in its place")
        try FileManager.default.removeItem(at: directory)
        #expect(await store.writeProblem() != nil)
    }

    @Test func theFileIsInWALModeAndSurvivesReopening() async throws {
        let directory = TestDirectories.root.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("nested/gateway.sqlite").path
        do {
            let store = try await SQLiteGatewayStore.open(path: path)
            try await store.migrate()
            try await store.putCard(StoreConformance.card("kept"))
        }
        let journalMode = try await TestSQLite.queue(path).read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journalMode == "wal")
        let reopened = try await SQLiteGatewayStore.open(path: path)
        try await reopened.migrate()
        #expect(try await reopened.card("kept") == StoreConformance.card("kept"))
    }

    /// Durability the README promises: every commit syncs the WAL (synchronous = FULL), on a new
    /// file and on a reopened one. GRDB's WAL set-up sets NORMAL on the writer after the
    /// configuration's own preparation ran, so this fails if FULL is set only there.
    @Test func everyCommitOnTheWriterIsSyncedNewFileAndReopened() async throws {
        let directory = TestDirectories.root.appendingPathComponent("sqlite-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("gateway.sqlite").path
        do {
            let store = try await SQLiteGatewayStore.open(path: path)
            try await store.migrate()
            #expect(try await store.writerSynchronous() == SQLiteGatewayStore.synchronousFull)
            // The request path's group-committed writes run on that same writer.
            let event = AuditEvent(
                provisioningID: "prv_sync_1", at: StoreConformance.instant(1), client: ClientID("acme"), cardID: "c1", operation: .applePay,
                issuer: "bridge", endpoint: nil, attempt: 1, outcome: .succeeded, errorCode: nil, upstreamStatus: 200, latencyMS: 3)
            try await store.appendAudit(event)
            #expect(try await store.auditEvents("prv_sync_1") == [event])
            #expect(try await store.writerSynchronous() == SQLiteGatewayStore.synchronousFull)
        }
        let reopened = try await SQLiteGatewayStore.open(path: path)
        #expect(try await reopened.writerSynchronous() == SQLiteGatewayStore.synchronousFull)
    }

    /// The card read runs one statement without an explicit transaction (`readOne`): it must see
    /// every write committed before it, and its read transaction must end with the statement, or
    /// the reader would pin an old snapshot and keep checkpoints from emptying the WAL.
    @Test func aCardReadSeesTheLatestCommitAndKeepsNoSnapshot() async throws {
        try await withStore { store in
            try await store.migrate()
            try await store.putCard(StoreConformance.card("c1", program: "p1"))
            #expect(try await store.card("c1")?.program == "p1")
            try await store.putCard(StoreConformance.card("c1", program: "p2"))
            #expect(try await store.card("c1")?.program == "p2")
            try await store.putVaultEntry("c1", sealed: Data([1, 2, 3]), event: nil)
            #expect(try await store.vaultEntry("c1") == Data([1, 2, 3]))
            #expect(try await store.card("c2") == nil)
            // No reader holds a snapshot: a TRUNCATE checkpoint from another connection is not busy
            // and leaves nothing in the WAL.
            // (GRDB's default connection, which does not wait: a reader's snapshot answers busy at once.)
            let checkpoint = try DatabaseQueue(path: store.path).writeWithoutTransaction { db in
                try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            let busy: Int? = checkpoint?[0]
            let walFrames: Int? = checkpoint?[1]
            #expect(busy == 0)
            #expect(walFrames == 0)
        }
    }

    /// Raw SQL on the store's file, beside the store's own connections.
    static func sql(_ store: SQLiteGatewayStore) -> StoreConformance.RawSQL {
        let path = store.path
        return { sql in try await TestSQLite.queue(path).write { db in try db.execute(sql: sql) } }
    }

    /// An archive page's deletion and its `events_archived` record: both or neither.
    @Test func anArchiveDeletionWithoutItsRecordDeletesNothing() async throws {
        try await withStore { store in
            try await StoreConformance.anArchiveDeletionWithoutItsRecordDeletesNothing(
                store, sql: Self.sql(store),
                refuseRecord: """
                    CREATE TRIGGER refuse_record BEFORE INSERT ON security_events WHEN NEW.kind = 'events_archived'
                    BEGIN SELECT RAISE(ABORT, 'record refused'); END
                    """,
                allowRecord: "DROP TRIGGER refuse_record")
        }
    }

    /// A keyed request's answer and its success event are one commit: both kept or neither, and
    /// one WAL sync rather than two.
    @Test func anAnswerAndItsAuditEventsCommitTogetherOrNotAtAll() async throws {
        try await withStore { store in
            try await store.migrate()
            #expect(try await StoreConformance.claim(store, "counted") == .acquired)
            let before = store.writer.batchesCommitted
            try await store.completeIdempotencyKey(client: "acme", key: "counted", claimedAt: StoreConformance.instant(0), response: StoreConformance.answer,
                                                   audit: [StoreConformance.success("prv_counted")])
            #expect(store.writer.batchesCommitted == before + 1)
            try await StoreConformance.anAnswerAndItsEventsCommitTogetherOrNotAtAll(
                store, sql: Self.sql(store),
                refuseAudit: "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'audit refused'); END",
                allowAudit: "DROP TRIGGER refuse_audit")
        }
    }

    @Test func aNewerSchemaIsRefusedAndLeftAlone() async throws {
        try await withStore { store in
            try await StoreConformance.aNewerSchemaIsRefusedAndLeftAlone(
                store, sql: Self.sql(store),
                recordFutureVersionForget007: """
                    INSERT INTO grdb_migrations (identifier) VALUES ('999_from_the_future');
                    DELETE FROM grdb_migrations WHERE identifier = '007_claim_abandon_time'
                    """)
        }
    }

    /// Undoes schema 014 (its indexes back to schema 009's), so that a test can apply it again.
    static let forget014 = """
        DROP INDEX cards_issuer_reference_card_key; DROP INDEX released_issuer_references_card_key;
        CREATE UNIQUE INDEX cards_issuer_reference_folded ON cards (issuer, lower(issuer_reference))
            WHERE issuer IS NOT NULL AND issuer_reference <> '{}';
        CREATE INDEX released_issuer_references_folded ON released_issuer_references (issuer, lower(issuer_reference));
        DELETE FROM grdb_migrations WHERE identifier = '014_issuer_card_key'
        """

    @Test func theCardKeyMigrationRefusesSharedCards() async throws {
        try await withStore { store in
            try await StoreConformance.theCardKeyMigrationRefusesSharedCards(store, sql: Self.sql(store), forget014: Self.forget014,
                                                                            dialect: .sqlite)
        }
    }

    @Test func theCaseFoldingMigrationRefusesHeldVariants() async throws {
        try await withStore { store in
            try await StoreConformance.theCaseFoldingMigrationRefusesHeldVariants(
                store, sql: Self.sql(store),
                forget009: Self.forget014 + """
                    ;
                    DROP INDEX cards_issuer_reference_folded; DROP INDEX released_issuer_references_folded;
                    CREATE UNIQUE INDEX cards_issuer_reference ON cards (issuer, issuer_reference)
                        WHERE issuer IS NOT NULL AND issuer_reference <> '{}';
                    DELETE FROM grdb_migrations WHERE identifier = '009_reference_case_folded'
                    """, dialect: .sqlite)
        }
    }

    @Test func aClaimIsJudgedByItsOwnAbandonTime() async throws {
        try await withStore { store in
            try await StoreConformance.aClaimIsJudgedByItsOwnAbandonTime(store, sql: Self.sql(store))
        }
    }

    @Test func theProgramBackfillNamesTheCardsProgramNow() async throws {
        try await withStore { store in
            try await StoreConformance.theProgramBackfillNamesTheCardsProgramNow(
                store, sql: Self.sql(store), forget012: "DELETE FROM grdb_migrations WHERE identifier = '012_audit_program_backfill'")
        }
    }

    @Test func theAuditOnceMigrationKeepsWhatDiffers() async throws {
        try await withStore { store in
            try await StoreConformance.theAuditOnceMigrationKeepsWhatDiffers(
                store, sql: Self.sql(store),
                forget005: "DROP INDEX audit_events_attempt; DELETE FROM grdb_migrations WHERE identifier = '005_audit_event_once'")
        }
    }

    @Test func anUnopenableFileNamesTheStore() throws {
        let path = "/proc/no-such-dir/gateway.sqlite"
        let error = try #require(throws: StoreError.self) { try SQLiteGatewayStore(path: path) }
        // The message an operator reads names the kind of store and the file, and says what failed.
        #expect(error.store == "sqlite \(path)")
        #expect(error.description.hasPrefix("sqlite \(path): cannot open the database"), "\(error)")
    }
}
