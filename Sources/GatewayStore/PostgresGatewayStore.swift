import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import PostgresNIO
import Synchronization
import ProvisioningCore

/// The shared store for several gateway instances, through postgres-nio's pooled client.
/// `run()` must be running (it drives the connection pool) while the store is used.
public final class PostgresGatewayStore: GatewayStore {
    public let displayName: String
    let client: PostgresClient
    let logger: Logger
    private let connectTimeout: Duration
    /// How long a request waits for one store operation (`bounded`).
    let operationTimeout: Duration
    /// One direct connection made before the pool is first used, so that a refused or failed TLS
    /// handshake is reported with its reason instead of the pool retrying it quietly.
    private let probeConfiguration: PostgresConnection.Configuration
    private let sslMode: PostgresSSLMode

    /// `postgres://user:password@host:port/database[?sslmode=disable|require|verify-full]`.
    /// Without sslmode: `disable` to a loopback host, `verify-full` otherwise. `caFile` (resolved
    /// already) is the CA `verify-full` trusts instead of the system's roots.
    public init(url: String, caFile: URL? = nil, connectTimeout: Duration = .seconds(5), operationTimeout: Duration = .seconds(5),
                logger: Logger) throws {
        let parsed = try PostgresURL(parsing: url)
        displayName = parsed.displayName
        let tls = try PostgresTLS.configuration(parsed, caFile: caFile)
        var configuration = PostgresClient.Configuration(
            host: parsed.host, port: parsed.port, username: parsed.user, password: parsed.password,
            database: parsed.database, tls: tls.map { .require($0) } ?? .disable)
        configuration.options.connectTimeout = connectTimeout
        var probe = PostgresConnection.Configuration(
            host: parsed.host, port: parsed.port, username: parsed.user, password: parsed.password,
            database: parsed.database, tls: .disable)
        if let tls {
            do {
                probe.tls = .require(try NIOSSLContext(configuration: tls))
            } catch {
                throw StoreError(store: parsed.displayName, reason: "TLS set-up failed (sslmode=\(parsed.sslMode.rawValue)): \(error)")
            }
        }
        probe.options.connectTimeout = .nanoseconds(connectTimeout.wholeNanoseconds)
        probeConfiguration = probe
        sslMode = parsed.sslMode
        // The pool retries a refused connection quietly; start-up reports one clear error instead.
        var backgroundLogger = logger
        backgroundLogger.logLevel = max(logger.logLevel, .error)
        client = PostgresClient(configuration: configuration, backgroundLogger: backgroundLogger)
        self.logger = logger
        self.connectTimeout = connectTimeout
        self.operationTimeout = operationTimeout
    }

    /// Drives the connection pool until the calling task is cancelled.
    public func run() async { await client.run() }

    /// Each statement runs on its own; every pending version is applied in one transaction, under
    /// an advisory lock (`migrate`), so a failing version leaves the schema as it was.
    static let migrations: [(version: String, statements: [PostgresQuery])] = [
        ("001_cards_audit_idempotency", [
            """
            CREATE TABLE cards (
                card_id TEXT PRIMARY KEY, program TEXT NOT NULL, issuer TEXT, issuer_reference TEXT NOT NULL,
                updated_at BIGINT NOT NULL)
            """,
            "CREATE INDEX cards_program ON cards (program, card_id)",
            "CREATE INDEX cards_issuer ON cards (issuer, card_id)",
            """
            CREATE TABLE audit_events (
                id BIGSERIAL PRIMARY KEY, provisioning_id TEXT NOT NULL, at BIGINT NOT NULL, client_id TEXT NOT NULL,
                card_id TEXT NOT NULL, wallet TEXT NOT NULL, issuer TEXT, endpoint TEXT, attempt INTEGER NOT NULL,
                outcome TEXT NOT NULL, error_code TEXT, upstream_status INTEGER, latency_ms INTEGER NOT NULL)
            """,
            "CREATE INDEX audit_events_provisioning ON audit_events (provisioning_id, id)",
            """
            CREATE TABLE idempotency_keys (
                client_id TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL, response_status INTEGER,
                response_body BYTEA, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, PRIMARY KEY (client_id, key))
            """,
            "CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)",
        ]),
        ("002_vault", [
            "CREATE TABLE vault_entries (card_id TEXT PRIMARY KEY, sealed BYTEA NOT NULL, updated_at BIGINT NOT NULL)",
        ]),
        ("003_audit_device_type", [
            "ALTER TABLE audit_events ADD COLUMN device_type TEXT",
        ]),
        ("004_tenant_isolation", statements(StoreRows.tenantIsolationMigration(autoIncrement: "BIGSERIAL PRIMARY KEY"))),
        ("005_audit_event_once", statements(StoreRows.auditOnceMigration(isNotDistinctFrom: "IS NOT DISTINCT FROM"))),
        ("006_released_issuer_references", statements(StoreRows.releasedReferencesMigration)),
        ("007_claim_abandon_time", statements(StoreRows.claimAbandonTimeMigration)),
        ("008_audit_token_id", statements(StoreRows.auditTokenMigration)),
        (StoreRows.referenceCaseFoldVersion, statements(StoreRows.referenceCaseFoldMigration(.postgres))),
        (StoreRows.claimProvisioningVersion, statements(StoreRows.claimProvisioningMigration)),
        (StoreRows.auditProgramVersion, statements(StoreRows.auditProgramMigration)),
        (StoreRows.auditProgramBackfillVersion, statements(StoreRows.auditProgramBackfillMigration)),
        (StoreRows.tokenHoldsVersion, statements(StoreRows.tokenHoldsMigration)),
        (StoreRows.cardKeyVersion, statements(StoreRows.cardKeyMigration(.postgres))),
    ]

    /// A migration text shared with SQLite, one query per `;`-separated statement (the shared
    /// texts hold no `;` inside a statement).
    private static func statements(_ sql: String) -> [PostgresQuery] {
        sql.split(separator: ";").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
            .map { PostgresQuery(unsafeSQL: $0) }
    }

    /// A unique violation (SQLSTATE 23505) left after the card id's own upsert is the issuer reference's.
    private func mapConflicts<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            let underlying = (error as? PostgresTransactionError)?.closureError ?? error
            // Only a violation of an issuer-reference index (its constraint's name says so) is a
            // reference conflict; another is the store's error as it is.
            if let psql = underlying as? PSQLError, psql.serverInfo?[.sqlState] == "23505",
               psql.serverInfo?[.constraintName]?.contains("issuer_reference") == true {
                throw CardRegistryError.issuerReferenceInUse
            }
            throw underlying
        }
    }

    /// An advisory lock makes concurrent start-ups of several instances take turns.
    public func migrate() async throws {
        try await withConnectTimeout {
            // Every write returns only once committed, and a committed audit event or idempotency
            // record must survive a crash (README, "State"): with synchronous_commit off, the
            // server acknowledges commits it has not flushed. Checked once, at start-up.
            for try await setting in try await self.client.query("SHOW synchronous_commit", logger: self.logger).decode(String.self)
            where setting == "off" {
                throw StoreError(store: self.displayName, reason: "synchronous_commit is off for the gateway's database or role: "
                    + "acknowledged commits (audit events, idempotency records) could be lost in a crash; set it to on")
            }
        }
        // Not bounded by `connect_timeout_ms`, which the server has just met: a version that
        // rewrites a large table (012's backfill of the audit events) takes as long as it takes,
        // and cut at 5 s it rolled back at every start, so the upgrade could never finish (the
        // review). The transaction wraps what its body threw (`PostgresTransactionError`): the
        // body's own error is the one to tell, a newer schema's refusal above all (the upgrade
        // audit: an operator read the driver's wrapper, not "schema ..., which this gateway does
        // not know").
        do {
            try await migrations()
        } catch let error as PostgresTransactionError {
            let underlying = error.closureError ?? error
            if let storeError = underlying as? StoreError { throw storeError }
            throw StoreError(store: displayName, reason: "migrating the schema failed: \(String(reflecting: underlying))")
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(store: displayName, reason: "migrating the schema failed: \(String(reflecting: error))")
        }
    }

    private func migrations() async throws {
        try await self.client.withTransaction(logger: self.logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(727274001)", logger: self.logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)",
                logger: self.logger)
            var applied = Set<String>()
            for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: self.logger)
                .decode(String.self) { applied.insert(version) }
            if let newer = StoreRows.unknownSchema(applied: applied, known: Self.migrations.map(\.version), store: self.displayName) {
                throw newer
            }
            for migration in Self.migrations where !applied.contains(migration.version) {
                if migration.version == StoreRows.referenceCaseFoldVersion {
                    for try await variants in try await connection.query(PostgresQuery(unsafeSQL: StoreRows.caseVariantReferences(.postgres)),
                                                                         logger: self.logger).decode(Int.self) where variants > 0 {
                        throw StoreRows.caseVariantsRefused(variants, store: self.displayName, .postgres)
                    }
                }
                if migration.version == StoreRows.cardKeyVersion {
                    for try await shared in try await connection.query(PostgresQuery(unsafeSQL: StoreRows.sharedCardKeys(.postgres)),
                                                                       logger: self.logger).decode(Int.self) where shared > 0 {
                        throw StoreRows.sharedCardKeysRefused(shared, store: self.displayName, .postgres)
                    }
                }
                for statement in migration.statements { try await connection.query(statement, logger: self.logger) }
                let now = StoreRows.milliseconds(Date())
                try await connection.query(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (\(migration.version), \(now))", logger: self.logger)
            }
        }
    }

    /// The server keeps its own pages whole (checksums, WAL); what a store check can see from here
    /// is an index the server marked invalid (a failed `CREATE INDEX CONCURRENTLY`, say), on the
    /// gateway's tables.
    public func check() async throws -> [String] {
        try await withConnectTimeout {
            var problems: [String] = []
            for try await (index, table) in try await self.client.query("""
                SELECT i.indexrelid::regclass::text, i.indrelid::regclass::text FROM pg_index i
                JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready)
                """, logger: self.logger).decode((String, String).self) {
                problems.append("index \(index) on \(table) is not valid: rebuild it (REINDEX INDEX \(index))")
            }
            return problems
        }
    }

    /// One operation of the request path (a connection from the pool and its statements), run in
    /// a task of its own and waited for at most `operationTimeout`, so that a server that stopped
    /// answering fails the request instead of holding it (postgres-nio's pool waits for a
    /// connection without a bound).
    /// - `shielded` (the writes that record what already happened: audit events, a claim's end,
    ///   security events): neither the caller's cancellation nor the timeout stops it. A request
    ///   cancelled by a shutdown after its attempt still records it, as SQLite's group commit does
    ///   (postgres-nio ended a cancelled task's query with `CancellationError`, and the event was
    ///   lost); past the timeout the caller is answered and the write still lands if it can (each
    ///   is keyed, so landing late changes nothing else).
    /// - otherwise (reads, a claim, a card change): the caller's cancellation and the timeout both
    ///   cancel it, so that an outage does not pile up waiting queries that all run once the
    ///   server is back. One whose statements had already reached the server may still commit.
    private func bounded<T: Sendable>(shielded: Bool = false, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let timeout = operationTimeout
        return try await Self.within(timeout, shielded: shielded,
                                     expired: StoreError(store: displayName, reason: "no answer within \(timeout) (store.postgres.operation_timeout_ms)",
                                                         unanswered: true),
                                     body)
    }

    /// `body`'s outcome, or `expired` once `timeout` has passed, whichever comes first; the caller
    /// is answered at once either way. Unless `shielded`, the caller's cancellation and the timeout
    /// cancel `body` (whether they come before or after its task exists); shielded, it runs to its
    /// end whatever happens to the caller. The one race behind both a request's operations and the
    /// start-up connection.
    static func within<T: Sendable>(
        _ timeout: Duration, shielded: Bool, expired: StoreError, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let race = FirstOutcome<T>()
        let work = WorkHandle()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.wait(continuation)
                let timer = Task<Void, Never> {
                    do { try await Task.sleep(for: timeout) } catch { return }
                    race.finish(.failure(expired))
                    if !shielded { work.cancel() }
                }
                let running = Task<Void, Never> {
                    let result: Result<T, any Error>
                    do { result = .success(try await body()) } catch { result = .failure(error) }
                    timer.cancel()
                    race.finish(result)
                }
                if !shielded { work.hold(running) }
            }
        } onCancel: {
            if !shielded { work.cancel() }
        }
    }

    /// A server that cannot be reached is a clear error naming it, not a hang.
    private func withConnectTimeout<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let name = displayName
        do {
            return try await Self.within(connectTimeout, shielded: false, expired: StoreError(store: name, reason: "not reachable within \(connectTimeout)")) {
                try await PostgresTLS.probe(self.probeConfiguration, store: name, mode: self.sslMode, logger: self.logger)
                return try await body()
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(store: name, reason: "\(String(reflecting: error))")
        }
    }

    /// None on a database never migrated (no `schema_migrations` yet: `store check` before a first start).
    /// Bounded like a request's operations: `/readyz` asks it on every probe.
    public func schemaVersions() async throws -> [String] {
        try await bounded { [self] in
            var versions: [String] = []
            do {
                for try await version in try await client.query("SELECT version FROM schema_migrations ORDER BY version", logger: logger)
                    .decode(String.self) { versions.append(version) }
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {
                return []
            }
            return versions
        }
    }

    // MARK: Cards

    public func card(_ id: CardID) async throws -> CardRecord? {
        try await bounded { [self] in
            try await cards("SELECT card_id, program, issuer, issuer_reference FROM cards WHERE card_id = \(id.rawValue)").first
        }
    }

    private func cards(_ query: PostgresQuery) async throws -> [CardRecord] {
        var cards: [CardRecord] = []
        for try await (id, program, issuer, reference) in try await client.query(query, logger: logger)
            .decode((String, String, String?, String).self) {
            cards.append(try StoreRows.card(id: id, program: program, issuer: issuer, referenceJSON: reference))
        }
        return cards
    }

    public func putCard(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardWrite {
        try await bounded { [self] in
            try await mapConflicts {
                try await rerunIfCreatedMeanwhile {
                    try await client.withTransaction(logger: logger) { connection in
                        try await self.write(card, owners: owners, event: event, on: connection)
                    }
                }
            }
        }
    }

    /// Thrown inside a card write when the id it found free was created by another transaction
    /// before its insert (which then waited for it and updated the new row): what that row held
    /// (a reference to release, a vault entry sealed to another program) was never read, so the
    /// transaction is rolled back and run again, and its second look finds and locks the row.
    struct CardCreatedMeanwhile: Error {}

    private func rerunIfCreatedMeanwhile<T>(_ body: () async throws -> T) async throws -> T {
        for _ in 0..<2 {
            do {
                return try await body()
            } catch where ((error as? PostgresTransactionError)?.closureError ?? error) is CardCreatedMeanwhile {
                continue
            }
        }
        return try await body()
    }

    /// The one card write. An existing row is locked; a row another transaction inserts meanwhile
    /// makes the insert conflict, and then it is updated only when its program is an owner's.
    private func write(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?, on connection: PostgresConnection)
        async throws -> CardWrite
    {
        var moves: [SecurityEvent] = []
        var dropped = 0
        return try await write(card, owners: owners, event: event, importedBy: nil, moves: &moves, vaultEntriesDropped: &dropped, on: connection)
    }

    /// `importedBy`: the import's event, from which a card it moves gets its own (`moves`, written
    /// after the batch's cards). `vaultEntriesDropped` counts the vault entries the write removed.
    private func write(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?, importedBy: SecurityEvent?,
                       moves: inout [SecurityEvent], vaultEntriesDropped: inout Int, on connection: PostgresConnection) async throws -> CardWrite
    {
        var before: (program: String, issuer: String?)?
        var referenceBefore: String?
        for try await (program, issuer, reference) in try await connection.query(
            "SELECT program, issuer, issuer_reference FROM cards WHERE card_id = \(card.id.rawValue) FOR UPDATE", logger: logger
        ).decode((String, String?, String).self) {
            before = (program, issuer)
            referenceBefore = reference
        }
        if let before, let owners, !owners.contains(ProgramID(before.program)) { return .notOwned }
        if let moved = StoreRows.importMove(importedBy, card: card, before: before) { moves.append(moved) }
        let reference = StoreRows.referenceJSON(card.issuerReference)
        let keepsItsReferenceNow = referenceBefore.map { StoreRows.sameReference((before?.issuer, $0), (card.issuer?.rawValue, reference)) } ?? false
        if StoreRows.dropsVaultEntry(before: before?.program, program: card.program.rawValue, keepsItsReference: keepsItsReferenceNow) {
            for try await _ in try await connection.query(
                "DELETE FROM vault_entries WHERE card_id = \(card.id.rawValue) RETURNING card_id", logger: logger
            ).decode(String.self) {
                vaultEntriesDropped += 1
            }
        }
        let now = StoreRows.milliseconds(Date())
        let allowed = owners.map { $0.map(\.rawValue) }
        var result = CardWrite.notOwned
        for try await inserted in try await connection.query("""
            INSERT INTO cards (card_id, program, issuer, issuer_reference, updated_at)
            VALUES (\(card.id.rawValue), \(card.program.rawValue), \(card.issuer?.rawValue), \(reference), \(now))
            ON CONFLICT (card_id) DO UPDATE SET program = EXCLUDED.program, issuer = EXCLUDED.issuer,
                issuer_reference = EXCLUDED.issuer_reference, updated_at = EXCLUDED.updated_at
                WHERE \(allowed)::TEXT[] IS NULL OR cards.program = ANY(\(allowed))
            RETURNING (xmax = 0)
            """, logger: logger).decode(Bool.self) { result = inserted ? .created : .updated }
        guard result != .notOwned else { return result }
        if before == nil, result == .updated { throw CardCreatedMeanwhile() }
        // A reference another program let go of stays that program's (schema 006); taking it
        // back (its own program's client, an admin, the CLI) makes it a card's again. Read after
        // the insert: a card deleted by a transaction still open when this one inserted its
        // reference made the insert wait on the unique index, and its release row is committed
        // (and seen by this statement) by the time the insert goes on.
        // A card that keeps the reference it holds (letter case aside) takes nothing from anyone.
        // So does one that still names the same card at its issuer (its customer id alone changed,
        // say): it lets nothing go either (schema 014).
        let namesItsCard = referenceBefore.map { StoreRows.sameCard((before?.issuer, $0), (card.issuer?.rawValue, reference)) } ?? false
        if !namesItsCard, StoreRows.holdsReference(issuer: card.issuer?.rawValue, referenceJSON: reference) {
            var heldElsewhere: String?
            // Compared by the card they name, letter case aside, as the unique index does (schema 014).
            for try await program in try await connection.query("""
                DELETE FROM released_issuer_references
                WHERE issuer = \(card.issuer?.rawValue)
                    AND \(unescaped: StoreRows.Dialect.postgres.cardKey()) = \(unescaped: Self.givenKey.prefix)\(reference)\(unescaped: Self.givenKey.suffix)
                RETURNING program
                """, logger: logger).decode(String.self) where owners?.contains(ProgramID(program)) == false { heldElsewhere = program }
            if heldElsewhere != nil { throw CardRegistryError.issuerReferenceInUse }
        }
        if let before, let referenceBefore, !namesItsCard {
            try await release(issuer: before.issuer, referenceJSON: referenceBefore, program: before.program, on: connection)
        }
        if let event {
            try await insert(StoreRows.cardEvent(event, kind: result == .created ? .cardRegistered : .cardUpdated, before: before), on: connection)
        }
        return result
    }

    public func deleteCard(_ id: CardID, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardRecord? {
        try await bounded { [self] in
            try await client.withTransaction(logger: logger) { connection in
                var found: CardRecord?
                var storedReference = ""
                for try await (cardID, program, issuer, reference) in try await connection.query(
                    "SELECT card_id, program, issuer, issuer_reference FROM cards WHERE card_id = \(id.rawValue) FOR UPDATE", logger: self.logger
                ).decode((String, String, String?, String).self) {
                    found = try StoreRows.card(id: cardID, program: program, issuer: issuer, referenceJSON: reference)
                    storedReference = reference
                }
                guard let card = found else { return nil }
                if let owners, !owners.contains(card.program) { return nil }
                try await connection.query("DELETE FROM cards WHERE card_id = \(id.rawValue)", logger: self.logger)
                try await connection.query("DELETE FROM vault_entries WHERE card_id = \(id.rawValue)", logger: self.logger)
                // The column as stored, as `write` releases it (not re-encoded).
                try await self.release(issuer: card.issuer?.rawValue, referenceJSON: storedReference, program: card.program.rawValue, on: connection)
                if let event {
                    try await self.insert(StoreRows.cardEvent(event, kind: .cardDeleted, before: (card.program.rawValue, card.issuer?.rawValue)),
                                          on: connection)
                }
                return card
            }
        }
    }

    /// `Dialect.cardKey(ofValue:)` around one bound reference, typed text for the server.
    private static let givenKey = (prefix: StoreRows.Dialect.postgres.cardKeyAround.prefix,
                                   suffix: "::text" + StoreRows.Dialect.postgres.cardKeyAround.suffix)

    /// Remembers a reference a card of `program` let go of (schema 006).
    private func release(issuer: String?, referenceJSON: String, program: String, on connection: PostgresConnection) async throws {
        guard StoreRows.holdsReference(issuer: issuer, referenceJSON: referenceJSON) else { return }
        try await connection.query("""
            INSERT INTO released_issuer_references (issuer, issuer_reference, program, released_at)
            VALUES (\(issuer), \(referenceJSON), \(program), \(StoreRows.milliseconds(Date())))
            ON CONFLICT (issuer, issuer_reference) DO UPDATE SET program = EXCLUDED.program, released_at = EXCLUDED.released_at
            """, logger: logger)
    }

    public func cards(_ query: CardPageQuery) async throws -> [CardRecord] {
        try await bounded { [self] in
            try await cards("""
                SELECT card_id, program, issuer, issuer_reference FROM cards
                WHERE (\(query.programs == nil) OR program = ANY(\((query.programs ?? []).map(\.rawValue))))
                  AND (\(query.issuer?.rawValue)::TEXT IS NULL OR issuer = \(query.issuer?.rawValue))
                  AND (\(query.after?.rawValue)::TEXT IS NULL OR card_id COLLATE "C" > \(query.after?.rawValue))
                ORDER BY card_id COLLATE "C" LIMIT \(query.limit)
                """)
        }
    }

    @discardableResult
    public func importCards(_ cards: [CardRecord], event: SecurityEvent?) async throws -> Int {
        try await mapConflicts {
            try await rerunIfCreatedMeanwhile {
                try await client.withTransaction(logger: logger) { connection in
                    // Each card a row moves gets its own event, written after every card (a security
                    // event's lock is taken last in a transaction, so it waits on no row lock).
                    var moves: [SecurityEvent] = []
                    var dropped = 0
                    for card in cards {
                        _ = try await self.write(card, owners: nil, event: nil, importedBy: event, moves: &moves, vaultEntriesDropped: &dropped,
                                                 on: connection)
                    }
                    for move in moves { try await self.insert(move, on: connection) }
                    if let event { try await self.insert(event, on: connection) }
                    return dropped
                }
            }
        }
    }

    // MARK: Vault

    public func putVaultEntry(for card: CardRecord, sealed: Data, event: SecurityEvent?) async throws -> Bool {
        try await bounded { [self] in
            try await client.withTransaction(logger: logger) { connection in
                // The card's row is locked for share: a delete or a move waits for this transaction
                // (and then drops the entry with the card), or went first and the entry is refused.
                // The same program, issuer and card at the issuer (letter case aside): the entry is
                // bound to all three (a reference changed meanwhile had kept it: PostgreSQL audit).
                var stored: String?
                for try await reference in try await connection.query("""
                    SELECT issuer_reference FROM cards WHERE card_id = \(card.id.rawValue) AND program = \(card.program.rawValue)
                        AND issuer IS NOT DISTINCT FROM \(card.issuer?.rawValue) FOR SHARE
                    """, logger: self.logger).decode(String.self) { stored = reference }
                guard let stored,
                      StoreRows.sameReference((card.issuer?.rawValue, stored), (card.issuer?.rawValue, StoreRows.referenceJSON(card.issuerReference)))
                else { return false }
                try await self.upsertVaultEntry(card.id, sealed: sealed, event: event, on: connection)
                return true
            }
        }
    }

    public func putVaultEntry(_ cardID: CardID, sealed: Data, event: SecurityEvent?) async throws {
        try await bounded { [self] in
            try await client.withTransaction(logger: logger) { connection in
                try await self.upsertVaultEntry(cardID, sealed: sealed, event: event, on: connection)
            }
        }
    }

    /// The one vault write, with its event last in the same transaction.
    private func upsertVaultEntry(_ cardID: CardID, sealed: Data, event: SecurityEvent?, on connection: PostgresConnection) async throws {
        try await connection.query("""
            INSERT INTO vault_entries (card_id, sealed, updated_at)
            VALUES (\(cardID.rawValue), \(ByteBuffer(bytes: sealed)), \(StoreRows.milliseconds(Date())))
            ON CONFLICT (card_id) DO UPDATE SET sealed = EXCLUDED.sealed, updated_at = EXCLUDED.updated_at
            """, logger: logger)
        if let event { try await insert(event, on: connection) }
    }

    public func vaultEntry(_ cardID: CardID) async throws -> Data? {
        try await bounded { [self] in
            for try await sealed in try await client.query(
                "SELECT sealed FROM vault_entries WHERE card_id = \(cardID.rawValue)", logger: logger
            ).decode(ByteBuffer.self) { return Data(buffer: sealed) }
            return nil
        }
    }

    @discardableResult
    public func deleteVaultEntry(_ cardID: CardID, event: SecurityEvent?) async throws -> Bool {
        try await bounded { [self] in
            try await client.withTransaction(logger: logger) { connection in
                var deleted = false
                for try await _ in try await connection.query(
                    "DELETE FROM vault_entries WHERE card_id = \(cardID.rawValue) RETURNING card_id", logger: self.logger
                ).decode(String.self) { deleted = true }
                if deleted, let event { try await self.insert(event, on: connection) }
                return deleted
            }
        }
    }

    public func replaceVaultEntry(_ cardID: CardID, expected: Data, with sealed: Data) async throws -> Bool {
        try await bounded { [self] in
            var binds = PostgresBindings(capacity: 4)
            binds.append(ByteBuffer(bytes: sealed))
            binds.append(StoreRows.milliseconds(Date()))
            binds.append(cardID.rawValue)
            binds.append(ByteBuffer(bytes: expected))
            let query = PostgresQuery(unsafeSQL: StoreRows.replaceVaultEntry(placeholders: (1...4).map { "$\($0)" }) + " RETURNING card_id",
                                      binds: binds)
            // Replaced only once the COMMIT is answered (`appendAudit` says why): `vault rotate`
            // reports what it re-sealed, and the old key is then removed.
            return try await committed { connection in
                var replaced = false
                for try await _ in try await connection.query(query, logger: self.logger).decode(String.self) { replaced = true }
                return replaced
            }
        }
    }

    public func deleteOrphanVaultEntry(_ cardID: CardID) async throws -> Bool {
        try await bounded { [self] in
            var binds = PostgresBindings(capacity: 1)
            binds.append(cardID.rawValue)
            let query = PostgresQuery(unsafeSQL: StoreRows.deleteOrphanVaultEntry(placeholder: "$1") + " RETURNING card_id", binds: binds)
            var deleted = false
            for try await _ in try await client.query(query, logger: logger).decode(String.self) { deleted = true }
            return deleted
        }
    }

    public func vaultCardIDs(after: CardID?, limit: Int) async throws -> [CardID] {
        try await bounded { [self] in
            var ids: [CardID] = []
            for try await id in try await client.query("""
                SELECT card_id FROM vault_entries
                WHERE (\(after?.rawValue)::TEXT IS NULL OR card_id COLLATE "C" > \(after?.rawValue))
                ORDER BY card_id COLLATE "C" LIMIT \(limit)
                """, logger: logger).decode(String.self) { ids.append(CardID(id)) }
            return ids
        }
    }

    // MARK: Security events

    /// The advisory lock security events are inserted under (`securityEventInsert`).
    static let securityEventLock: Int64 = 727_274_002

    /// A security event's insert, which takes the transaction-scoped advisory lock
    /// `securityEventLock` before its id is drawn, and holds it until its transaction ends: so
    /// events commit in the order of their ids. Without it two writers (two instances, or two
    /// requests on one) could take ids 1 and 2 and commit 2 first, and a reader paging the admin
    /// audit by `after` = 2 would never see 1 (the two-instance audit missed 15 of 8,964 events
    /// that way). Security events are few (registry changes, failed logins, admin reads), and
    /// every transaction writes its event last, so the lock costs little and waits on nothing else.
    static func securityEventInsert(_ event: SecurityEvent) -> PostgresQuery {
        """
        WITH serial AS (SELECT pg_advisory_xact_lock(\(securityEventLock)))
        INSERT INTO security_events (at, kind, actor, source, card_id, detail)
        SELECT \(StoreRows.milliseconds(event.at)), \(event.kind.rawValue), \(event.actor), \(event.source), \(event.cardID?.rawValue),
            \(StoreRows.detailJSON(event.detail)) FROM serial
        """
    }

    private func insert(_ event: SecurityEvent, on connection: PostgresConnection) async throws {
        try await connection.query(Self.securityEventInsert(event), logger: logger)
    }

    /// Committed in a transaction of its own, as `appendAudit` is (why there).
    public func appendSecurityEvent(_ event: SecurityEvent) async throws {
        try await bounded(shielded: true) { [self] in
            try await committed { connection in try await self.insert(event, on: connection) }
        }
    }

    public func securityEvents(_ query: SecurityEventQuery) async throws -> [SecurityEvent] {
        try await bounded { [self] in
            var events: [SecurityEvent] = []
            let rows = try await client.query("""
                SELECT id, at, kind, actor, source, card_id, detail FROM security_events
                WHERE (\(query.kind?.rawValue)::TEXT IS NULL OR kind = \(query.kind?.rawValue))
                  AND (\(query.actor)::TEXT IS NULL OR actor = \(query.actor))
                  AND (\(query.cardID?.rawValue)::TEXT IS NULL OR card_id = \(query.cardID?.rawValue))
                  AND id > \(query.after ?? 0)
                ORDER BY id LIMIT \(query.limit)
                """, logger: logger)
            for try await (id, at, kind, actor, source, card, detail) in rows.decode((Int64, Int64, String, String, String?, String?, String).self) {
                events.append(try StoreRows.securityEvent(id: id, at: at, kind: kind, actor: actor, source: source, cardID: card, detailJSON: detail))
            }
            return events
        }
    }

    // MARK: Audit

    /// `body` in a transaction of its own, done once its COMMIT is answered; the closure's own
    /// error is thrown as it is (not wrapped), as a single statement's would be.
    private func committed<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> sending T
    ) async throws -> sending T {
        do {
            return try await client.withTransaction(logger: logger, isolation: isolation, body)
        } catch let error as PostgresTransactionError {
            throw error.closureError ?? error
        }
    }

    /// In a transaction of its own, whose COMMIT is a statement the server answers: an autocommit
    /// statement's commit that fails after its row came back (a deferred constraint, a server
    /// stopping) is not reported to the statement by postgres-nio, and a 200 had gone out for an
    /// event the database rolled back (PostgreSQL audit). The claim is written the same way.
    public func appendAudit(_ event: AuditEvent) async throws {
        try await bounded(shielded: true) { [self] in
            try await committed { connection in
                try await self.insertAudit(event) { query in try await connection.query(query, logger: self.logger) }
            }
        }
    }

    /// An event whose (provisioning id, attempt) is already recorded is not added again: the
    /// same event written after a COMMIT whose acknowledgement was lost is done, a different one
    /// fails (`StoreRows.checkAlreadyRecorded`). `run` is the pool or a transaction's connection.
    private func insertAudit(_ event: AuditEvent, _ run: (PostgresQuery) async throws -> PostgresRowSequence) async throws {
        let inserted = try await run("""
            INSERT INTO audit_events (provisioning_id, at, client_id, card_id, wallet, device_type, token_id, issuer, endpoint, attempt,
                outcome, error_code, upstream_status, latency_ms, program)
            VALUES (\(event.provisioningID.rawValue), \(StoreRows.milliseconds(event.at)), \(event.client.rawValue),
                \(event.cardID.rawValue), \(event.operation.rawValue), \(event.deviceType?.rawValue), \(event.tokenID), \(event.issuer?.rawValue),
                \(event.endpoint), \(event.attempt),
                \(event.outcome.rawValue), \(event.errorCode?.rawValue), \(event.upstreamStatus), \(event.latencyMS), \(event.program?.rawValue))
            ON CONFLICT (provisioning_id, attempt) WHERE \(unescaped: StoreRows.auditOnce) DO NOTHING RETURNING id
            """)
        // Read to the end: the statement is done only once its rows are (`appendAudit` commits).
        var written = false
        for try await _ in inserted.decode(Int64.self) { written = true }
        if written { return }
        let stored = try await run(Self.auditSelect(event.provisioningID, attempt: event.attempt))
        var existing: AuditEvent?
        for try await row in stored { existing = try auditEvent(row) }
        try StoreRows.checkAlreadyRecorded(existing, event, store: displayName)
    }

    /// A provisioning's audit events in the order written, or only its `attempt` (not a replay).
    private static func auditSelect(_ provisioningID: ProvisioningID, attempt: Int? = nil, limit: Int = Int(Int32.max)) -> PostgresQuery {
        let columns = """
            SELECT provisioning_id, at, client_id, card_id, wallet, issuer, endpoint, attempt, outcome, error_code,
                upstream_status, latency_ms, device_type, token_id, program FROM audit_events
            """
        if let attempt {
            return "\(unescaped: columns) WHERE provisioning_id = \(provisioningID.rawValue) AND attempt = \(attempt) AND \(unescaped: StoreRows.auditOnce)"
        }
        return "\(unescaped: columns) WHERE provisioning_id = \(provisioningID.rawValue) ORDER BY id LIMIT \(limit)"
    }

    private func auditEvent(_ row: PostgresRow) throws -> AuditEvent {
        let (id, at, client, card, wallet, issuer, endpoint, attempt, outcome, code, status, latency, device, token, program) = try row.decode(
            (String, Int64, String, String, String, String?, String?, Int, String, String?, Int?, Int, String?, String?, String?).self)
        return try StoreRows.auditEvent(
            provisioningID: id, at: at, client: client, cardID: card, wallet: wallet, deviceType: device, tokenID: token, issuer: issuer,
            endpoint: endpoint,
            attempt: attempt, outcome: outcome, errorCode: code, upstreamStatus: status, latencyMS: latency, program: program, store: displayName)
    }

    // MARK: Archive

    public func archivedRows(_ table: EventTable, after: Int64, limit: Int) async throws -> [ArchivedRow] {
        try await bounded { [self] in
            var rows: [ArchivedRow] = []
            func text(_ value: String?) -> ArchivedValue { value.map { .text($0) } ?? .null }
            func integer(_ value: Int64?) -> ArchivedValue { value.map { .integer($0) } ?? .null }
            switch table {
            case .audit:
                let result = try await client.query("""
                    SELECT id, at, provisioning_id, client_id, card_id, wallet, issuer, endpoint, attempt::BIGINT, outcome, error_code,
                        upstream_status::BIGINT, latency_ms::BIGINT, device_type, token_id, program FROM audit_events
                    WHERE id > \(after) ORDER BY id LIMIT \(max(limit, 0))
                    """, logger: logger)
                for try await row in result {
                    let (id, at, provisioning, client, card, wallet, issuer, endpoint, attempt, outcome, code, status, latency, device, token,
                         program) =
                        try row.decode((Int64, Int64, String?, String?, String?, String?, String?, String?, Int64?, String?, String?, Int64?,
                                        Int64?, String?, String?, String?).self)
                    rows.append(ArchivedRow(id: id, at: at, columns: [
                        "provisioning_id": text(provisioning), "client_id": text(client),
                        "card_id": text(card), "wallet": text(wallet), "issuer": text(issuer), "endpoint": text(endpoint),
                        "attempt": integer(attempt), "outcome": text(outcome), "error_code": text(code), "upstream_status": integer(status),
                        "latency_ms": integer(latency), "device_type": text(device), "token_id": text(token), "program": text(program),
                    ]))
                }
            case .security:
                let result = try await client.query("""
                    SELECT id, at, kind, actor, source, card_id, detail FROM security_events
                    WHERE id > \(after) ORDER BY id LIMIT \(max(limit, 0))
                    """, logger: logger)
                for try await (id, at, kind, actor, source, card, detail) in result.decode((Int64, Int64, String?, String?, String?, String?,
                                                                                            String?).self) {
                    rows.append(ArchivedRow(id: id, at: at, columns: [
                        "kind": text(kind), "actor": text(actor), "source": text(source),
                        "card_id": text(card), "detail": text(detail),
                    ]))
                }
            }
            return rows
        }
    }

    public func deleteArchivedEvents(audit: [Int64], security: [Int64], recordedBefore before: Date,
                                     record: @escaping @Sendable (ArchivedEventCounts) -> SecurityEvent) async throws -> ArchivedEventCounts
    {
        let cutoff = StoreRows.milliseconds(before)
        return try await bounded(shielded: true) { [self] in
            try await committed { connection in
                var counts = ArchivedEventCounts(audit: 0, security: 0)
                for try await _ in try await connection.query(
                    "DELETE FROM audit_events WHERE at < \(cutoff) AND id = ANY(\(audit)) RETURNING id", logger: self.logger).decode(Int64.self) {
                    counts.audit += 1
                }
                for try await _ in try await connection.query(
                    "DELETE FROM security_events WHERE at < \(cutoff) AND id = ANY(\(security)) RETURNING id", logger: self.logger).decode(Int64.self) {
                    counts.security += 1
                }
                try await self.insert(record(counts), on: connection)
                return counts
            }
        }
    }

    public func auditEvents(_ provisioningID: ProvisioningID, limit: Int) async throws -> [AuditEvent] {
        try await bounded { [self] in
            let rows = try await client.query(Self.auditSelect(provisioningID, limit: max(limit, 0)), logger: logger)
            var events: [AuditEvent] = []
            for try await row in rows { events.append(try auditEvent(row)) }
            return events
        }
    }

    // MARK: Idempotency

    public func claimIdempotencyKey(
        client clientID: ClientID, key: String, requestHash: String, provisioningID: ProvisioningID, now: Date, expiresAt: Date,
        abandonAt: Date
    ) async throws -> IdempotencyClaim {
        try await bounded { [self] in
            let nowMS = StoreRows.milliseconds(now), abandonMS = StoreRows.milliseconds(abandonAt)
            // One statement, one round trip for a fresh or expired key (`StoreRows.claimUpsert`); the
            // primary key decides between concurrent claims, across instances.
            var binds = PostgresBindings(capacity: 8)
            binds.append(clientID.rawValue)
            binds.append(key)
            binds.append(requestHash)
            binds.append(nowMS)
            binds.append(StoreRows.milliseconds(expiresAt))
            binds.append(abandonMS)
            binds.append(provisioningID.rawValue)
            binds.append(nowMS)
            let upsert = PostgresQuery(unsafeSQL: StoreRows.claimUpsert(placeholders: (1...8).map { "$\($0)" }) + " RETURNING key", binds: binds)
            // Acquired only once its COMMIT is answered (`appendAudit` says why).
            let acquired = try await committed { connection in
                var acquired = false
                for try await _ in try await connection.query(upsert, logger: self.logger).decode(String.self) { acquired = true }
                return acquired
            }
            if acquired { return .acquired }
            let existing = try await client.query("""
                SELECT request_hash, response_status, response_body, created_at, abandon_at, provisioning_id FROM idempotency_keys
                WHERE client_id = \(clientID.rawValue) AND key = \(key)
                """, logger: logger)
            for try await (hash, status, body, createdAt, abandonedFrom, provisioning) in existing
                .decode((String, Int?, ByteBuffer?, Int64, Int64?, String?).self)
            {
                return StoreRows.claim(existingHash: hash, completedStatus: status, body: body.map { Data(buffer: $0) }, createdAt: createdAt,
                                       abandonAt: abandonedFrom, provisioningID: provisioning, requestHash: requestHash, now: nowMS,
                                       askerAbandonAt: abandonMS)
            }
            // Purged between the insert and the read: nobody holds it now.
            return .inProgress
        }
    }

    public func completeIdempotencyKey(
        client clientID: ClientID, key: String, claimedAt: Date, response: StoredResponse, audit: [AuditEvent]
    ) async throws {
        try await bounded(shielded: true) { [self] in
            let update: PostgresQuery = """
                UPDATE idempotency_keys SET response_status = \(response.status), response_body = \(ByteBuffer(bytes: response.body))
                WHERE client_id = \(clientID.rawValue) AND key = \(key) AND created_at = \(StoreRows.milliseconds(claimedAt))
                AND \(unescaped: StoreRows.notAbandoned)
                RETURNING 1
                """
            /// The update, and whether it found the claim still this request's.
            @Sendable func keep(_ run: (PostgresQuery) async throws -> PostgresRowSequence) async throws {
                var updated = 0
                for try await _ in try await run(update).decode(Int.self) { updated += 1 }
                guard updated == 1 else { throw StoreRows.claimLost(store: "postgres") }
            }
            guard !audit.isEmpty else {
                try await keep { query in try await self.client.query(query, logger: self.logger) }
                return
            }
            // One transaction: the answer and its events both, or neither.
            do {
                try await client.withTransaction(logger: logger) { connection in
                    try await keep { query in try await connection.query(query, logger: self.logger) }
                    for event in audit { try await self.insertAudit(event) { query in try await connection.query(query, logger: self.logger) } }
                }
            } catch let error as PostgresTransactionError {
                // The store's own refusal (a different event already recorded), as the SQLite store gives it.
                if let refusal = error.closureError as? StoreError, error.rollbackError == nil { throw refusal }
                throw error
            }
        }
    }

    public func abandonIdempotencyKey(client clientID: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws {
        try await bounded(shielded: true) { [self] in
            try await client.query(PostgresQuery(unsafeSQL: StoreRows.abandonClaim(placeholders: ["$1", "$2", "$3", "$4"]),
                                                 binds: Self.claimBinds(clientID, key, claimedAt, provisioningID)), logger: logger)
        }
    }

    public func releaseIdempotencyKey(client clientID: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws {
        try await bounded(shielded: true) { [self] in
            try await client.query(PostgresQuery(unsafeSQL: StoreRows.releaseClaim(placeholders: ["$1", "$2", "$3", "$4"]),
                                                 binds: Self.claimBinds(clientID, key, claimedAt, provisioningID)), logger: logger)
        }
    }

    /// A claim's client, key, time and provisioning id, for a release or an abandon.
    private static func claimBinds(_ clientID: ClientID, _ key: String, _ claimedAt: Date, _ provisioningID: ProvisioningID) -> PostgresBindings {
        var binds = PostgresBindings(capacity: 4)
        binds.append(clientID.rawValue)
        binds.append(key)
        binds.append(StoreRows.milliseconds(claimedAt))
        binds.append(provisioningID.rawValue)
        return binds
    }

    public func takeHold(_ key: String, holder: String, now: Date, until: Date) async throws -> Bool {
        try await bounded { [self] in
            var binds = PostgresBindings(capacity: 4)
            binds.append(key)
            binds.append(holder)
            binds.append(StoreRows.milliseconds(until))
            binds.append(StoreRows.milliseconds(now))
            let upsert = PostgresQuery(unsafeSQL: StoreRows.holdUpsert(placeholders: (1...4).map { "$\($0)" }) + " RETURNING holder",
                                       binds: binds)
            // Held only once its COMMIT is answered, as a claim is (`appendAudit` says why); the
            // primary key decides between instances. Another holder's hold past its time, which
            // this one takes over, leaves its trace in the same transaction (the purge would never
            // see it); its row is locked first, so two takers see one state.
            return try await committed { connection in
                var lapsed: (holder: String, until: Int64)?
                for try await row in try await connection.query(
                    "SELECT holder, until_ms FROM token_transition_holds WHERE hold_key = \(key) FOR UPDATE", logger: self.logger
                ).decode((String, Int64).self) { lapsed = (row.0, row.1) }
                var held = false
                for try await _ in try await connection.query(upsert, logger: self.logger).decode(String.self) { held = true }
                if held, let lapsed,
                   let event = StoreRows.takenOverHoldEvent(key: key, holder: lapsed.holder, until: lapsed.until, by: holder, now: now) {
                    try await self.insert(event, on: connection)
                }
                return held
            }
        }
    }

    public func extendHold(_ key: String, holder: String, until: Date) async throws -> Bool {
        // One statement, committed as it answers (a transaction around it adds two round trips).
        try await bounded { [self] in
            var extended = false
            for try await _ in try await client.query("""
                UPDATE token_transition_holds SET until_ms = \(StoreRows.milliseconds(until)) WHERE hold_key = \(key) AND holder = \(holder)
                RETURNING holder
                """, logger: logger).decode(String.self) { extended = true }
            return extended
        }
    }

    public func releaseHold(_ key: String, holder: String) async throws {
        _ = try await bounded(shielded: true) { [self] in
            try await client.query("DELETE FROM token_transition_holds WHERE hold_key = \(key) AND holder = \(holder)", logger: logger)
        }
    }

    @discardableResult
    public func purgeExpired(now: Date) async throws -> Int {
        // A claim that never finished leaves a security event, in the deletion's transaction.
        try await committed { connection in
            var count = 0
            var unfinished: [(client: String, provisioningID: String?, createdAt: Int64)] = []
            for try await (client, provisioningID, createdAt, finished) in try await connection.query("""
                DELETE FROM idempotency_keys WHERE expires_at <= \(StoreRows.milliseconds(now))
                RETURNING client_id, provisioning_id, created_at, response_status IS NOT NULL
                """, logger: self.logger).decode((String, String?, Int64, Bool).self) {
                count += 1
                if !finished { unfinished.append((client, provisioningID, createdAt)) }
            }
            // In claim order, as SQLite writes them.
            for claim in unfinished.sorted(by: { $0.createdAt < $1.createdAt }) {
                try await self.insert(StoreRows.unfinishedClaimEvent(client: claim.client, provisioningID: claim.provisioningID,
                                                                     createdAt: claim.createdAt, now: now), on: connection)
            }
            // Holds past their time (their request died, or its release failed) go too; a token's
            // leaves a security event in the same transaction, in the order of their times.
            var lapsed: [(key: String, holder: String, until: Int64)] = []
            for try await hold in try await connection.query("""
                DELETE FROM token_transition_holds WHERE until_ms < \(StoreRows.milliseconds(now)) RETURNING hold_key, holder, until_ms
                """, logger: self.logger).decode((String, String, Int64).self) {
                lapsed.append(hold)
            }
            for hold in lapsed.sorted(by: { $0.until < $1.until }) {
                if let event = StoreRows.lapsedHoldEvent(key: hold.key, holder: hold.holder, until: hold.until, now: now) {
                    try await self.insert(event, on: connection)
                }
            }
            return count
        }
    }
}

/// The first of two outcomes to arrive resumes the waiting caller; the other is dropped. The
/// caller waits (`wait`) before either outcome's task exists.
final class FirstOutcome<T: Sendable>: Sendable {
    private let waiting = Mutex<CheckedContinuation<T, any Error>?>(nil)

    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        waiting.withLock { $0 = continuation }
    }

    func finish(_ result: Result<T, any Error>) {
        waiting.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }?.resume(with: result)
    }
}

/// The task of one bounded operation that is not shielded: the caller's cancellation or the
/// timeout cancels it, whether that comes before or after the task exists.
final class WorkHandle: Sendable {
    private let state = Mutex<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))

    func hold(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelNow { task.cancel() }
    }

    func cancel() {
        state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.task
        }?.cancel()
    }
}
