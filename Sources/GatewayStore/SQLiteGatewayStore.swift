import Foundation
import GRDB
import GRDBSQLite
import ProvisioningCore
import Synchronization

/// The embedded default: one SQLite file in WAL mode, through GRDB.
public final class SQLiteGatewayStore: GatewayStore {
    public let path: String
    private let pool: DatabasePool
    /// The one-statement reads by key (`readOne`).
    private let pointReaders: SQLitePointReaders
    /// The request path's writes (audit events, idempotency claims and answers), group-committed.
    let writer: GroupCommit<BatchedWrite>
    /// The store's other writes in progress (`writeAlone`).
    private let writesAlone: WritesInProgress

    /// The database file's device and inode when it was opened: the file `path` names later may
    /// be another (a restore copied over it, the directory removed and made again).
    private let openedFile: (device: UInt64, inode: UInt64)?

    /// `init`, on a thread of its own (`OffPool`): opening writes (the WAL set-up is a commit synced
    /// to disk), and an async caller's thread is one of the cooperative pool's.
    public static func open(path: String, busyTimeout: TimeInterval = SQLiteGatewayStore.busyTimeout) async throws -> SQLiteGatewayStore {
        try await OffPool.run("sqlite-open") { try SQLiteGatewayStore(path: path, busyTimeout: busyTimeout) }
    }

    /// `busyTimeout`: how long a write waits for another connection's write lock (tests lengthen
    /// it to tell a wait from a decline).
    public init(path: String, busyTimeout: TimeInterval = SQLiteGatewayStore.busyTimeout) throws {
        self.path = path
        let pool: DatabasePool
        do {
            // Created (or tightened) before GRDB opens it: directory 0700, file 0600.
            try SQLiteFilePermissions.prepare(path: path)
            var configuration = Configuration()
            configuration.journalMode = .wal
            // Another writer (a second process on the same file) waits instead of failing at once.
            configuration.busyMode = .timeout(busyTimeout)
            pool = try DatabasePool(path: path, configuration: configuration)
            // Every commit is synced to the WAL before it returns, so a committed audit event or
            // idempotency record survives a power loss, not only a crash (README, "State"). Set on
            // the writer once the pool is open: GRDB's WAL set-up runs after `prepareDatabase` and
            // sets `synchronous = NORMAL` (no sync per commit), which silently undid a setting made
            // there. Read back, so a SQLite that ignores it stops start-up instead.
            let synchronous = try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                return try Int.fetchOne(db, sql: "PRAGMA synchronous")
            }
            guard synchronous == Self.synchronousFull else {
                throw StoreError(store: "sqlite \(path)", reason: "cannot set synchronous = FULL (the writer reports \(synchronous.map(String.init) ?? "nothing"))")
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(store: "sqlite \(path)", reason: "cannot open the database (\(error))")
        }
        self.pool = pool
        openedFile = Self.identity(of: path)
        do {
            pointReaders = try SQLitePointReaders(path: path)
        } catch {
            throw StoreError(store: "sqlite \(path)", reason: "cannot open the read connections (\(error))")
        }
        // A caller that finds the writer idle commits its write on its own thread: GRDB's
        // synchronous write runs on the calling thread when the writer's queue is free, which it
        // is, unless one of the store's other writes (a card, an import, a purge) runs there; then
        // it declines, as the caller's thread would wait for that write. Else GRDB's callback
        // form: the commit runs on the writer's queue and its completion, there, wakes the batch's
        // callers and starts the next batch (no task hops in between).
        let writesAlone = WritesInProgress()
        self.writesAlone = writesAlone
        writer = GroupCommit(committingHere: { write in
            guard writesAlone.none else { return nil }
            return Self.commitHere(write, on: pool, busyTimeout: busyTimeout)
        }) { writes, done in
            pool.asyncWrite({ db in
                for write in writes { write.apply(db) }
            }, completion: { _, result in done(result) })
        }
    }

    /// How long a write waits for another connection's write lock (another process on the same
    /// file: `vault rotate`, `store archive`, `cards import`) before it fails, in seconds.
    public static let busyTimeout: TimeInterval = 5

    /// A request's write committed on the calling thread, a cooperative one. Its transaction is
    /// begun without waiting: when another connection (another process) holds the write lock, it
    /// declines (nil) at once and the write goes to the writer's queue, which waits for the lock
    /// (the busy timeout) on a thread of its own. Waiting here would keep one of the pool's
    /// threads (two on two cores) from every other request for as long as the other process
    /// writes. Once begun, the transaction holds the lock, and the busy timeout is back for the
    /// rest of it.
    static func commitHere(_ write: BatchedWrite, on pool: DatabasePool, busyTimeout: TimeInterval) -> Result<Void, any Error>? {
        do {
            return try pool.writeWithoutTransaction { db -> Result<Void, any Error>? in
                let connection = db.sqliteConnection
                sqlite3_busy_timeout(connection, 0)
                let began = Result { try db.beginTransaction(.immediate) }
                sqlite3_busy_timeout(connection, Int32(busyTimeout * 1000))
                if case .failure(let error as DatabaseError) = began, error.resultCode == .SQLITE_BUSY {
                    return nil
                }
                try began.get()
                write.apply(db)
                do {
                    try db.commit()
                } catch {
                    try? db.rollback()
                    throw error
                }
                return .success(())
            }
        } catch {
            return .failure(error)
        }
    }

    /// A write that is not group-committed (cards, the vault, security events, purges): GRDB's
    /// async write on the writer's queue, counted while it runs so that no group commit is run on
    /// a request's thread meanwhile (it would wait there for this one).
    func writeAlone<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        writesAlone.begin()
        defer { writesAlone.end() }
        return try await pool.write(updates)
    }

    /// `PRAGMA synchronous`'s value for FULL: the WAL is synced at every commit.
    static let synchronousFull = 2

    /// The writer connection's `PRAGMA synchronous`: what every commit on the request path runs
    /// under (`synchronousFull` once opened).
    func writerSynchronous() async throws -> Int? {
        try await pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    }

    /// One caller's part of a group commit: applied in a savepoint of its own, so a write that
    /// fails (a constraint, a bad row) rolls back only itself and fails only its caller, while
    /// the other callers' writes in the same transaction commit.
    struct BatchedWrite: Sendable {
        let apply: @Sendable (Database) -> Void
    }

    /// Runs `body` in the next group commit and returns its result once that transaction has
    /// committed (synchronous = FULL: on disk). Concurrent requests' writes share one
    /// transaction, so a burst costs one WAL sync and one trip to the writer, not one each; the
    /// writes of one transaction run one after another, as SQLite's single writer always does.
    func batched<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let outcome = Mutex<Result<T, any Error>?>(nil)
        try await writer.write(BatchedWrite { db in
            let result = Result { () throws -> T in
                var value: T?
                try db.inSavepoint {
                    value = try body(db)
                    return .commit
                }
                return value!
            }
            outcome.withLock { $0 = result }
        })
        guard let result = outcome.withLock({ $0 }) else {
            throw StoreError(store: "sqlite", reason: "a group-committed write was not applied")
        }
        return try result.get()
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("001_cards_audit_idempotency") { db in
            try db.execute(sql: """
                CREATE TABLE cards (
                    card_id TEXT PRIMARY KEY NOT NULL,
                    program TEXT NOT NULL,
                    issuer TEXT,
                    issuer_reference TEXT NOT NULL,
                    updated_at INTEGER NOT NULL
                );
                CREATE INDEX cards_program ON cards (program, card_id);
                CREATE INDEX cards_issuer ON cards (issuer, card_id);
                CREATE TABLE audit_events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    provisioning_id TEXT NOT NULL,
                    at INTEGER NOT NULL,
                    client_id TEXT NOT NULL,
                    card_id TEXT NOT NULL,
                    wallet TEXT NOT NULL,
                    issuer TEXT,
                    endpoint TEXT,
                    attempt INTEGER NOT NULL,
                    outcome TEXT NOT NULL,
                    error_code TEXT,
                    upstream_status INTEGER,
                    latency_ms INTEGER NOT NULL
                );
                CREATE INDEX audit_events_provisioning ON audit_events (provisioning_id, id);
                CREATE TABLE idempotency_keys (
                    client_id TEXT NOT NULL,
                    key TEXT NOT NULL,
                    request_hash TEXT NOT NULL,
                    response_status INTEGER,
                    response_body BLOB,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    PRIMARY KEY (client_id, key)
                );
                CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
                """)
        }
        migrator.registerMigration("002_vault") { db in
            try db.execute(sql: """
                CREATE TABLE vault_entries (
                    card_id TEXT PRIMARY KEY NOT NULL,
                    sealed BLOB NOT NULL,
                    updated_at INTEGER NOT NULL
                );
                """)
        }
        migrator.registerMigration("003_audit_device_type") { db in
            try db.execute(sql: "ALTER TABLE audit_events ADD COLUMN device_type TEXT")
        }
        migrator.registerMigration("004_tenant_isolation") { db in
            try db.execute(sql: StoreRows.tenantIsolationMigration(autoIncrement: "INTEGER PRIMARY KEY AUTOINCREMENT"))
        }
        migrator.registerMigration("005_audit_event_once") { db in
            try db.execute(sql: StoreRows.auditOnceMigration(isNotDistinctFrom: "IS"))
        }
        migrator.registerMigration("006_released_issuer_references") { db in
            try db.execute(sql: StoreRows.releasedReferencesMigration)
        }
        migrator.registerMigration("007_claim_abandon_time") { db in
            try db.execute(sql: StoreRows.claimAbandonTimeMigration)
        }
        migrator.registerMigration("008_audit_token_id") { db in
            try db.execute(sql: StoreRows.auditTokenMigration)
        }
        migrator.registerMigration(StoreRows.referenceCaseFoldVersion) { db in
            let variants = try Int.fetchOne(db, sql: StoreRows.caseVariantReferences(.sqlite)) ?? 0
            if variants > 0 { throw HeldTwice(version: StoreRows.referenceCaseFoldVersion, count: variants) }
            try db.execute(sql: StoreRows.referenceCaseFoldMigration(.sqlite))
        }
        migrator.registerMigration(StoreRows.claimProvisioningVersion) { db in
            try db.execute(sql: StoreRows.claimProvisioningMigration)
        }
        migrator.registerMigration(StoreRows.auditProgramVersion) { db in
            try db.execute(sql: StoreRows.auditProgramMigration)
        }
        migrator.registerMigration(StoreRows.auditProgramBackfillVersion) { db in
            try db.execute(sql: StoreRows.auditProgramBackfillMigration)
        }
        migrator.registerMigration(StoreRows.tokenHoldsVersion) { db in
            try db.execute(sql: StoreRows.tokenHoldsMigration)
        }
        migrator.registerMigration(StoreRows.cardKeyVersion) { db in
            let shared = try Int.fetchOne(db, sql: StoreRows.sharedCardKeys(.sqlite)) ?? 0
            if shared > 0 { throw HeldTwice(version: StoreRows.cardKeyVersion, count: shared) }
            try db.execute(sql: StoreRows.cardKeyMigration(.sqlite))
        }
        return migrator
    }

    public func migrate() async throws {
        let pool = self.pool, store = "sqlite \(path)"
        // Off the cooperative pool: every migration is a commit synced to disk.
        try await OffPool.run("sqlite-migrate") {
            // A database a newer gateway migrated is refused before anything is written to it.
            let applied = try pool.read { db -> [String] in
                guard try db.tableExists("grdb_migrations") else { return [] }
                return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
            }
            let known = Self.migrator.migrations
            if let newer = StoreRows.unknownSchema(applied: applied, known: known, store: store) { throw newer }
            do {
                try Self.migrator.migrate(pool)
            } catch let refused as HeldTwice {
                throw refused.version == StoreRows.cardKeyVersion
                    ? StoreRows.sharedCardKeysRefused(refused.count, store: store, .sqlite)
                    : StoreRows.caseVariantsRefused(refused.count, store: store, .sqlite)
            }
        }
    }

    /// A released reference's column against a reference given: the card each names at the
    /// issuer, as the unique index compares them (schema 014).
    private static let keyMatch = "\(StoreRows.Dialect.sqlite.cardKey()) = \(StoreRows.Dialect.sqlite.cardKey(ofValue: "?"))"

    /// Schema 009's or 014's refusal, inside the migrator, which knows no path.
    private struct HeldTwice: Error { let version: String; let count: Int }

    /// `PRAGMA integrity_check` over the whole file (every page, every index against its table),
    /// at most 100 problems, on a reader connection: nothing is written.
    public func check() async throws -> [String] {
        let pool = self.pool
        return try await Task.detached { try pool.read(Self.integrityProblems) }.value
    }

    /// Whether `path` (its link followed) is a regular file; nil when it cannot be read.
    private static func isRegularFile(_ path: String) -> Bool? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (info.st_mode & S_IFMT) == S_IFREG
    }

    /// Why the file at `path` is not a gateway's store (nil when it is): not a regular file, not
    /// a SQLite database, or one without the gateway's schema (no tables: cut short by a crash or
    /// a copy; others: another program's). Read-only; for the operator commands, which must not
    /// migrate a file that is not the gateway's.
    public static func notAGatewayStore(path: String) -> String? {
        guard let regular = isRegularFile(path) else { return "cannot read the file" }
        guard regular else { return "not a regular file" }
        var configuration = Configuration()
        configuration.readonly = true
        // A serving gateway may hold a lock a moment (a checkpoint): waited for, as the store does.
        configuration.busyMode = .timeout(busyTimeout)
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            let tables = try queue.read { db in Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")) }
            if tables.contains("grdb_migrations") { return nil }
            return tables.isEmpty
                ? "the file holds no tables: not a store the gateway made (one cut short by a crash or a copy reads so: restore the last backup)"
                : "the file holds \(tables.count) table(s) but not the gateway's schema: not a gateway store"
        } catch {
            return "not a SQLite database the gateway can read (\(InputRules.short(String(describing: error))))"
        }
    }

    /// `store check` on a file no gateway may have opened: read-only, so nothing of the store's
    /// own opening happens to it (no permission change, no switch to WAL, no table GRDB creates
    /// and drops to probe WAL, no checkpoint on close). The applied schema versions (read from
    /// GRDB's table directly, none when it has none) and the problems `check` would list.
    public static func checkFile(path: String) async throws -> (versions: [String], problems: [String]) {
        // A FIFO (or a device) is no store: opening it had waited for a writer for ever (the CLI audit).
        if isRegularFile(path) == false { return ([], ["not a regular file: not a store"]) }
        return try await Task.detached {
            var configuration = Configuration()
            configuration.readonly = true
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: path, configuration: configuration)
            } catch {
                throw StoreError(store: "sqlite \(path)", reason: "cannot open the file read-only (\(error))")
            }
            do {
                // No transaction around it: the check's own statements, on a connection that cannot write.
                return try queue.inDatabase { db in
                    let problems = try integrityProblems(db)
                    guard problems.isEmpty else { return ([], problems) }
                    let tables = Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'"))
                    // Sound pages are not yet a store: a file truncated to nothing (a crash, a
                    // bad copy) and another program's database read as "never migrated" (CLI audit).
                    guard tables.contains("grdb_migrations") else {
                        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
                        return ([], [tables.isEmpty
                            ? "the file holds no tables (\(size ?? 0) bytes): not a store the gateway made, which has its schema from its first start; "
                                + "a store cut short by a crash or a copy reads so: restore the last backup"
                            : "the file holds \(tables.count) table(s) but not the gateway's schema: not a gateway store"])
                    }
                    let versions = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
                    // A table of the schema gone (dropped by hand, a partial restore).
                    let missing = versions == StoreBootstrap.currentSchema ? expectedTables.subtracting(tables).sorted() : []
                    return (versions, missing.map { "table \($0) is missing from schema \(versions.last ?? "")" })
                }
            } catch let error as DatabaseError where isDamage(error) {
                return ([], [damaged(error)])
            }
        }.value
    }

    /// The tables of the current schema (`StoreBootstrap.currentSchema`); a test checks them
    /// against a store migrated now.
    public static let expectedTables: Set<String> = [
        "cards", "audit_events", "idempotency_keys", "security_events", "vault_entries", "released_issuer_references", "grdb_migrations",
        "token_transition_holds",
    ]

    private static func integrityProblems(_ db: Database) throws -> [String] {
        do {
            let found = try String.fetchAll(db, sql: "PRAGMA integrity_check(100)")
            return found == ["ok"] ? [] : found
        } catch let error as DatabaseError where isDamage(error) {
            return [damaged(error)]
        }
    }

    /// Damage the check itself could not read past (its header, its schema, a page it needed).
    private static func isDamage(_ error: DatabaseError) -> Bool { [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode) }
    private static func damaged(_ error: DatabaseError) -> String {
        "the file is damaged where the check could not read on: \(error.message ?? "\(error.resultCode)")"
    }

    /// Every version the file records, as PostgreSQL's store lists them: one a newer gateway
    /// applied too (GRDB's own list leaves out the ones its migrator does not know, so `route
    /// explain` ran on, and audited into, a newer file; the CLI audit found it).
    public func schemaVersions() async throws -> [String] {
        try readHere { db in
            guard try db.tableExists("grdb_migrations") else { return [] }
            return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
        }
    }

    // MARK: Cards

    /// Every provisioning reads its card: one row by its key, on the calling thread (`readOne`),
    /// where GRDB's async read cost four thread switches (its reader pool's actor, then the
    /// reader's queue, each there and back), and on a connection of its own, where GRDB's reader
    /// pool cost as much again as the read (`SQLitePointReaders`).
    public func card(_ id: CardID) async throws -> CardRecord? {
        try readOne { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.cardColumns) FROM cards WHERE card_id = ?"), arguments: [id.rawValue])
                .map(Self.card)
        }
    }

    /// Every read of this store: GRDB's synchronous read, on the caller's thread. It waits for a
    /// free reader connection only while all of them (`maximumReaderCount`, 5 by default) are
    /// busy, and since no read here holds a reader across a suspension, each busy one is released
    /// by a running read. Never mix in GRDB's async reads (`await pool.read`, `asyncRead`, value
    /// observation): their reader is released only once their task runs again, so every
    /// cooperative thread could end up waiting here for a reader only a suspended task can give
    /// back. The reads are short (one row by its key, or one bounded page).
    private func readHere<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.read(body)
    }

    /// A read of ONE statement, as `readHere` but without GRDB's explicit transaction around it
    /// (`BEGIN DEFERRED` ... `COMMIT`, two more statements and a fifth of the read's cost) and
    /// without its reader pool (`SQLitePointReaders`): SQLite runs a lone statement in a read
    /// transaction of its own, on one snapshot, ended when the statement is reset, so one
    /// statement sees the same as it would inside `read`. Never for two statements that must agree
    /// (a page and its count, say): use `readHere` for those.
    /// `SQLiteGatewayStoreTests.aCardReadSeesTheLatestCommitAndKeepsNoSnapshot`.
    private func readOne<T>(_ body: (Database) throws -> T) throws -> T {
        try pointReaders.read(body)
    }

    public func putCard(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardWrite {
        try await Self.mapConflicts { try await self.writeAlone { db in try Self.write(card, owners: owners, event: event, db) } }
    }

    public func deleteCard(_ id: CardID, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardRecord? {
        try await writeAlone { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT \(Self.cardColumns) FROM cards WHERE card_id = ?", arguments: [id.rawValue]) else { return nil }
            let card = try Self.card(row)
            if let owners, !owners.contains(card.program) { return nil }
            try db.execute(sql: "DELETE FROM cards WHERE card_id = ?", arguments: [id.rawValue])
            try db.execute(sql: "DELETE FROM vault_entries WHERE card_id = ?", arguments: [id.rawValue])
            // The column as stored, as `write` releases it (not re-encoded).
            try Self.release(issuer: card.issuer?.rawValue, referenceJSON: row[3], program: card.program.rawValue, db)
            if let event {
                try Self.insert(StoreRows.cardEvent(event, kind: .cardDeleted, before: (card.program.rawValue, card.issuer?.rawValue)), db)
            }
            return card
        }
    }

    /// A unique-index violation left after the card id's own upsert is the issuer reference's,
    /// when SQLite names an issuer-reference index; any other (a damaged index missing the card
    /// id's row, say) is the store's error as it is, not a reference conflict the operator would
    /// answer by editing the file and writing more into a damaged store (CLI audit).
    private static func mapConflicts<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DatabaseError
            where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE && (error.message ?? "").contains("issuer_reference") {
            throw CardRegistryError.issuerReferenceInUse
        }
    }

    /// The one card write (SQLite serializes writers, so the owner check cannot be raced).
    private static func write(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?, _ db: Database) throws -> CardWrite {
        var moves: [SecurityEvent] = []
        var dropped = 0
        return try write(card, owners: owners, event: event, importedBy: nil, moves: &moves, vaultEntriesDropped: &dropped, db)
    }

    /// `importedBy`: the import's event, from which a card it moves gets its own (`moves`, written
    /// after the batch's cards). `vaultEntriesDropped` counts the vault entries the write removed.
    private static func write(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?, importedBy: SecurityEvent?,
                              moves: inout [SecurityEvent], vaultEntriesDropped: inout Int, _ db: Database) throws -> CardWrite {
        let row = try Row.fetchOne(db, sql: "SELECT program, issuer, issuer_reference FROM cards WHERE card_id = ?", arguments: [card.id.rawValue])
        let before = row.map { (program: $0["program"] as String, issuer: $0["issuer"] as String?) }
        if let moved = StoreRows.importMove(importedBy, card: card, before: before) { moves.append(moved) }
        if let before, let owners, !owners.contains(ProgramID(before.program)) { return .notOwned }
        let reference = StoreRows.referenceJSON(card.issuerReference)
        // A card that keeps the reference it holds (letter case aside) takes nothing from anyone.
        let keepsItsReference = row.map { StoreRows.sameReference((before?.issuer, $0["issuer_reference"] as String), (card.issuer?.rawValue, reference)) }
            ?? false
        // One that still names the same card at its issuer (its customer id alone changed, say)
        // takes nothing and lets nothing go either (schema 014).
        let namesItsCard = row.map { StoreRows.sameCard((before?.issuer, $0["issuer_reference"] as String), (card.issuer?.rawValue, reference)) }
            ?? false
        if StoreRows.dropsVaultEntry(before: before?.program, program: card.program.rawValue, keepsItsReference: keepsItsReference) {
            try db.execute(sql: "DELETE FROM vault_entries WHERE card_id = ?", arguments: [card.id.rawValue])
            vaultEntriesDropped += db.changesCount
        }
        try db.execute(
            sql: """
                INSERT INTO cards (card_id, program, issuer, issuer_reference, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (card_id) DO UPDATE SET program = excluded.program, issuer = excluded.issuer,
                    issuer_reference = excluded.issuer_reference, updated_at = excluded.updated_at
                """,
            arguments: [card.id.rawValue, card.program.rawValue, card.issuer?.rawValue, reference, StoreRows.milliseconds(Date())])
        // A reference another program let go of stays that program's (schema 006); taking it
        // back (its own program's client, an admin, the CLI) makes it a card's again.
        if !namesItsCard, StoreRows.holdsReference(issuer: card.issuer?.rawValue, referenceJSON: reference) {
            // Compared by the card they name, letter case aside, as the unique index does (schema 014).
            let holders = try String.fetchAll(
                db, sql: "SELECT program FROM released_issuer_references WHERE issuer = ? AND \(Self.keyMatch)",
                arguments: [card.issuer?.rawValue, reference])
            if let owners, holders.contains(where: { !owners.contains(ProgramID($0)) }) { throw CardRegistryError.issuerReferenceInUse }
            if !holders.isEmpty {
                try db.execute(sql: "DELETE FROM released_issuer_references WHERE issuer = ? AND \(Self.keyMatch)",
                               arguments: [card.issuer?.rawValue, reference])
            }
        }
        if let row, let before, !namesItsCard {
            try release(issuer: before.issuer, referenceJSON: row["issuer_reference"], program: before.program, db)
        }
        let result: CardWrite = before == nil ? .created : .updated
        if let event { try insert(StoreRows.cardEvent(event, kind: result == .created ? .cardRegistered : .cardUpdated, before: before), db) }
        return result
    }

    /// Remembers a reference a card of `program` let go of (schema 006).
    private static func release(issuer: String?, referenceJSON: String, program: String, _ db: Database) throws {
        guard StoreRows.holdsReference(issuer: issuer, referenceJSON: referenceJSON) else { return }
        try db.execute(
            sql: """
                INSERT INTO released_issuer_references (issuer, issuer_reference, program, released_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (issuer, issuer_reference) DO UPDATE SET program = excluded.program, released_at = excluded.released_at
                """,
            arguments: [issuer, referenceJSON, program, StoreRows.milliseconds(Date())])
    }

    public func cards(_ query: CardPageQuery) async throws -> [CardRecord] {
        let programs = query.programs?.map(\.rawValue) ?? []
        let programFilter = query.programs == nil ? "1"
            : programs.isEmpty ? "0" : "program IN (\(Array(repeating: "?", count: programs.count).joined(separator: ", ")))"
        var arguments = StatementArguments(programs)
        arguments += [query.issuer?.rawValue, query.issuer?.rawValue, query.after?.rawValue, query.after?.rawValue, query.limit]
        return try readHere { [arguments] db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.cardColumns) FROM cards
                    WHERE \(programFilter) AND (? IS NULL OR issuer = ?) AND (? IS NULL OR card_id > ?)
                    ORDER BY card_id LIMIT ?
                    """,
                arguments: arguments
            ).map(Self.card)
        }
    }

    @discardableResult
    public func importCards(_ cards: [CardRecord], event: SecurityEvent?) async throws -> Int {
        try await Self.mapConflicts {
            try await self.writeAlone { db in
                var moves: [SecurityEvent] = []
                var dropped = 0
                for card in cards {
                    _ = try Self.write(card, owners: nil, event: nil, importedBy: event, moves: &moves, vaultEntriesDropped: &dropped, db)
                }
                for move in moves { try Self.insert(move, db) }
                if let event { try Self.insert(event, db) }
                return dropped
            }
        }
    }

    /// A card row's columns, in the order `card(_:)` reads them by index: a read by name builds
    /// (and lower-cases) a name index for every row.
    private static let cardColumns = "card_id, program, issuer, issuer_reference"

    private static func card(_ row: Row) throws -> CardRecord {
        try StoreRows.card(id: row[0], program: row[1], issuer: row[2], referenceJSON: row[3])
    }

    // MARK: Readiness

    static func identity(of path: String) -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    /// The file the store opened is still at its path and can be written (its WAL too): `access`
    /// sees a read-only mount and an immutable file even for root, whose writes would fail.
    public func writeProblem() async -> String? {
        guard let now = Self.identity(of: path) else { return "its database file is gone (\(path))" }
        if let openedFile, openedFile != now { return "its database file was replaced since the gateway opened it (\(path))" }
        for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
            if access(file, W_OK) != 0 { return "its database file cannot be written (\(file): \(String(cString: strerror(errno))))" }
        }
        return nil
    }

    // MARK: Vault

    public func putVaultEntry(for card: CardRecord, sealed: Data, event: SecurityEvent?) async throws -> Bool {
        try await writeAlone { db in
            // SQLite serializes writers: no delete or move can come between this check and the write.
            // The same program, issuer and card at the issuer (letter case aside), as the entry is
            // bound to all three (a reference changed meanwhile had kept the entry: PostgreSQL audit).
            guard let stored = try String.fetchOne(db, sql: "SELECT issuer_reference FROM cards WHERE card_id = ? AND program = ? AND issuer IS ?",
                                                   arguments: [card.id.rawValue, card.program.rawValue, card.issuer?.rawValue]),
                  StoreRows.sameReference((card.issuer?.rawValue, stored), (card.issuer?.rawValue, StoreRows.referenceJSON(card.issuerReference)))
            else { return false }
            try Self.upsertVaultEntry(card.id, sealed: sealed, event: event, db)
            return true
        }
    }

    public func putVaultEntry(_ cardID: CardID, sealed: Data, event: SecurityEvent?) async throws {
        try await writeAlone { db in try Self.upsertVaultEntry(cardID, sealed: sealed, event: event, db) }
    }

    /// The one vault write, with its event in the same transaction.
    private static func upsertVaultEntry(_ cardID: CardID, sealed: Data, event: SecurityEvent?, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO vault_entries (card_id, sealed, updated_at) VALUES (?, ?, ?)
                ON CONFLICT (card_id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at
                """,
            arguments: [cardID.rawValue, sealed, StoreRows.milliseconds(Date())])
        if let event { try insert(event, db) }
    }

    public func vaultEntry(_ cardID: CardID) async throws -> Data? {
        try readOne { db in
            try Data.fetchOne(db, sql: "SELECT sealed FROM vault_entries WHERE card_id = ?", arguments: [cardID.rawValue])
        }
    }

    @discardableResult
    public func deleteVaultEntry(_ cardID: CardID, event: SecurityEvent?) async throws -> Bool {
        try await writeAlone { db in
            try db.execute(sql: "DELETE FROM vault_entries WHERE card_id = ?", arguments: [cardID.rawValue])
            let deleted = db.changesCount > 0
            if deleted, let event { try Self.insert(event, db) }
            return deleted
        }
    }

    public func replaceVaultEntry(_ cardID: CardID, expected: Data, with sealed: Data) async throws -> Bool {
        try await writeAlone { db in
            try db.execute(sql: StoreRows.replaceVaultEntry(placeholders: ["?", "?", "?", "?"]),
                           arguments: [sealed, StoreRows.milliseconds(Date()), cardID.rawValue, expected])
            return db.changesCount == 1
        }
    }

    public func deleteOrphanVaultEntry(_ cardID: CardID) async throws -> Bool {
        try await writeAlone { db in
            try db.execute(sql: StoreRows.deleteOrphanVaultEntry(placeholder: "?"), arguments: [cardID.rawValue])
            return db.changesCount == 1
        }
    }

    public func vaultCardIDs(after: CardID?, limit: Int) async throws -> [CardID] {
        try readHere { db in
            try String.fetchAll(db, sql: "SELECT card_id FROM vault_entries WHERE (? IS NULL OR card_id > ?) ORDER BY card_id LIMIT ?",
                                arguments: [after?.rawValue, after?.rawValue, limit]).map { CardID($0) }
        }
    }

    // MARK: Security events

    public func appendSecurityEvent(_ event: SecurityEvent) async throws {
        // A record of what already happened (a refusal answered, a reload applied): a caller's
        // cancellation (a request cut off at the stop's timeout) must not stop it, and GRDB's
        // async write does (it throws CancellationError before its turn and interrupts a running
        // one). In a task of its own, as PostgreSQL's store shields it.
        try await Task { try await self.writeAlone { db in try Self.insert(event, db) } }.value
    }

    private static func insert(_ event: SecurityEvent, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO security_events (at, kind, actor, source, card_id, detail) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [StoreRows.milliseconds(event.at), event.kind.rawValue, event.actor, event.source, event.cardID?.rawValue,
                        StoreRows.detailJSON(event.detail)])
    }

    /// The page's statement with only the filters asked for, so SQLite can use the kind and card
    /// indexes: written as `(? IS NULL OR kind = ?)` it scanned the whole table (0.1 s at 2 million
    /// events, on one of the pool's threads; resource audit).
    static func securityEventsStatement(_ query: SecurityEventQuery) -> (sql: String, arguments: StatementArguments) {
        var conditions = ["id > ?"]
        var arguments: StatementArguments = [query.after ?? 0]
        if let kind = query.kind { conditions.append("kind = ?"); arguments += [kind.rawValue] }
        if let actor = query.actor { conditions.append("actor = ?"); arguments += [actor] }
        if let card = query.cardID { conditions.append("card_id = ?"); arguments += [card.rawValue] }
        arguments += [query.limit]
        return ("SELECT * FROM security_events WHERE \(conditions.joined(separator: " AND ")) ORDER BY id LIMIT ?", arguments)
    }

    public func securityEvents(_ query: SecurityEventQuery) async throws -> [SecurityEvent] {
        let (sql, arguments) = Self.securityEventsStatement(query)
        return try readHere { db in
            try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                try StoreRows.securityEvent(id: row["id"], at: row["at"], kind: row["kind"], actor: row["actor"], source: row["source"],
                                            cardID: row["card_id"], detailJSON: row["detail"])
            }
        }
    }

    // MARK: Audit

    /// Returns once the event is committed (synchronous = FULL: on disk). Concurrent requests'
    /// events share one transaction (`GroupCommit`), so a burst costs one WAL sync, not one each.
    public func appendAudit(_ event: AuditEvent) async throws {
        try await batched { db in try Self.insertAudit([event], db) }
    }

    /// An event whose (provisioning id, attempt) is already recorded is not added again: the
    /// same event is done, a different one fails (`StoreRows.checkAlreadyRecorded`).
    private static func insertAudit(_ events: [AuditEvent], _ db: Database) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO audit_events (provisioning_id, at, client_id, card_id, wallet, device_type, token_id, issuer, endpoint,
                attempt, outcome, error_code, upstream_status, latency_ms, program) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (provisioning_id, attempt) WHERE \(StoreRows.auditOnce) DO NOTHING
            """)
        for event in events {
            try statement.execute(arguments: [
                event.provisioningID.rawValue, StoreRows.milliseconds(event.at), event.client.rawValue,
                event.cardID.rawValue, event.operation.rawValue, event.deviceType?.rawValue, event.tokenID, event.issuer?.rawValue, event.endpoint,
                event.attempt,
                event.outcome.rawValue, event.errorCode?.rawValue, event.upstreamStatus, event.latencyMS, event.program?.rawValue])
            guard db.changesCount == 0 else { continue }
            let stored = try Row.fetchOne(db, sql: "SELECT * FROM audit_events WHERE provisioning_id = ? AND attempt = ? AND \(StoreRows.auditOnce)",
                                          arguments: [event.provisioningID.rawValue, event.attempt]).map(auditEvent)
            try StoreRows.checkAlreadyRecorded(stored, event, store: "sqlite")
        }
    }

    private static func auditEvent(_ row: Row) throws -> AuditEvent {
        try StoreRows.auditEvent(
            provisioningID: row["provisioning_id"], at: row["at"], client: row["client_id"], cardID: row["card_id"], wallet: row["wallet"],
            deviceType: row["device_type"], tokenID: row["token_id"], issuer: row["issuer"], endpoint: row["endpoint"], attempt: row["attempt"],
            outcome: row["outcome"], errorCode: row["error_code"], upstreamStatus: row["upstream_status"], latencyMS: row["latency_ms"],
            program: row["program"], store: "sqlite")
    }

    public func auditEvents(_ provisioningID: ProvisioningID, limit: Int) async throws -> [AuditEvent] {
        try readHere { db in
            try Row.fetchAll(db, sql: "SELECT * FROM audit_events WHERE provisioning_id = ? ORDER BY id LIMIT ?",
                             arguments: [provisioningID.rawValue, max(limit, 0)]).map(Self.auditEvent)
        }
    }

    // MARK: Archive

    public func archivedRows(_ table: EventTable, after: Int64, limit: Int) async throws -> [ArchivedRow] {
        try readHere { db in
            try Row.fetchAll(db, sql: "SELECT * FROM \(table.rawValue) WHERE id > ? ORDER BY id LIMIT ?", arguments: [after, max(limit, 0)])
                .map { row in
                    var columns: [String: ArchivedValue] = [:]
                    for (name, value) in row where name != "id" && name != "at" {
                        switch value.storage {
                        case .null: columns[name] = .null
                        case .int64(let integer): columns[name] = .integer(integer)
                        case .double(let real): columns[name] = .real(real)
                        case .string(let text): columns[name] = .text(text)
                        case .blob(let data): columns[name] = .blob(data)
                        }
                    }
                    return ArchivedRow(id: row["id"], at: row["at"], columns: columns)
                }
        }
    }

    public func deleteArchivedEvents(audit: [Int64], security: [Int64], recordedBefore before: Date,
                                     record: @escaping @Sendable (ArchivedEventCounts) -> SecurityEvent) async throws -> ArchivedEventCounts
    {
        let cutoff = StoreRows.milliseconds(before)
        return try await writeAlone { db in
            func delete(_ table: String, _ ids: [Int64]) throws -> Int {
                // A page at a time, well under SQLite's bound on a statement's parameters.
                var deleted = 0
                for chunk in stride(from: 0, to: ids.count, by: 500).map({ ids[$0..<min($0 + 500, ids.count)] }) {
                    let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                    try db.execute(sql: "DELETE FROM \(table) WHERE at < ? AND id IN (\(marks))",
                                   arguments: StatementArguments([cutoff as (any DatabaseValueConvertible)?] + chunk.map { $0 as (any DatabaseValueConvertible)? }))
                    deleted += db.changesCount
                }
                return deleted
            }
            let counts = ArchivedEventCounts(audit: try delete("audit_events", audit), security: try delete("security_events", security))
            try Self.insert(record(counts), db)
            return counts
        }
    }

    /// The group commit's figures: every write of the request path (audit events, claims, kept
    /// answers) goes through it.
    public var commitCounts: StoreCommitCounts? {
        StoreCommitCounts(commits: writer.batchesCommitted, writes: writer.itemsCommitted)
    }

    // MARK: Idempotency

    public func claimIdempotencyKey(client: ClientID, key: String, requestHash: String, provisioningID: ProvisioningID, now: Date,
                                    expiresAt: Date, abandonAt: Date) async throws -> IdempotencyClaim
    {
        // One write (in a group commit: SQLite applies writes one at a time), so two claims
        // cannot both acquire; it returns once committed, before the upstream is called. A fresh
        // key is one statement (`StoreRows.claimUpsert`); only a key already held is read back.
        try await batched { db in
            let nowMS = StoreRows.milliseconds(now), abandonMS = StoreRows.milliseconds(abandonAt)
            try db.cachedStatement(sql: StoreRows.claimUpsert(placeholders: ["?", "?", "?", "?", "?", "?", "?", "?"]))
                .execute(arguments: [client.rawValue, key, requestHash, nowMS, StoreRows.milliseconds(expiresAt), abandonMS,
                                     provisioningID.rawValue, nowMS])
            guard db.changesCount == 0 else { return .acquired }
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM idempotency_keys WHERE client_id = ? AND key = ?"),
                                             arguments: [client.rawValue, key]) else {
                throw StoreError(store: "sqlite", reason: "an idempotency claim neither took its key nor found it held")
            }
            return StoreRows.claim(existingHash: row["request_hash"], completedStatus: row["response_status"],
                                   body: row["response_body"], createdAt: row["created_at"], abandonAt: row["abandon_at"],
                                   provisioningID: row["provisioning_id"], requestHash: requestHash, now: nowMS, askerAbandonAt: abandonMS)
        }
    }

    public func completeIdempotencyKey(client: ClientID, key: String, claimedAt: Date, response: StoredResponse, audit: [AuditEvent]) async throws {
        // One savepoint in the group commit: the answer and its events both, or neither.
        try await batched { db in
            try db.cachedStatement(sql: """
                UPDATE idempotency_keys SET response_status = ?, response_body = ? WHERE client_id = ? AND key = ? AND created_at = ?
                AND \(StoreRows.notAbandoned)
                """).execute(arguments: [response.status, response.body, client.rawValue, key, StoreRows.milliseconds(claimedAt)])
            guard db.changesCount == 1 else { throw StoreRows.claimLost(store: "sqlite") }
            try Self.insertAudit(audit, db)
        }
    }

    public func abandonIdempotencyKey(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws {
        try await batched { db in
            try db.cachedStatement(sql: StoreRows.abandonClaim(placeholders: ["?", "?", "?", "?"]))
                .execute(arguments: [client.rawValue, key, StoreRows.milliseconds(claimedAt), provisioningID.rawValue])
        }
    }

    public func releaseIdempotencyKey(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws {
        try await batched { db in
            try db.cachedStatement(sql: StoreRows.releaseClaim(placeholders: ["?", "?", "?", "?"]))
                .execute(arguments: [client.rawValue, key, StoreRows.milliseconds(claimedAt), provisioningID.rawValue])
        }
    }

    public func takeHold(_ key: String, holder: String, now: Date, until: Date) async throws -> Bool {
        try await batched { db in
            // Another holder's hold past its time, which this one takes over: its trace first,
            // in the same transaction (the purge would never see it).
            let lapsed = try Row.fetchOne(db.cachedStatement(sql: "SELECT holder, until_ms FROM token_transition_holds WHERE hold_key = ?"),
                                          arguments: [key])
            try db.cachedStatement(sql: StoreRows.holdUpsert(placeholders: ["?", "?", "?", "?"]))
                .execute(arguments: [key, holder, StoreRows.milliseconds(until), StoreRows.milliseconds(now)])
            guard db.changesCount == 1 else { return false }
            if let lapsed, let event = StoreRows.takenOverHoldEvent(key: key, holder: lapsed["holder"], until: lapsed["until_ms"], by: holder, now: now) {
                try Self.insert(event, db)
            }
            return true
        }
    }

    public func extendHold(_ key: String, holder: String, until: Date) async throws -> Bool {
        try await batched { db in
            try db.cachedStatement(sql: "UPDATE token_transition_holds SET until_ms = ? WHERE hold_key = ? AND holder = ?")
                .execute(arguments: [StoreRows.milliseconds(until), key, holder])
            return db.changesCount == 1
        }
    }

    public func releaseHold(_ key: String, holder: String) async throws {
        try await batched { db in
            try db.cachedStatement(sql: "DELETE FROM token_transition_holds WHERE hold_key = ? AND holder = ?").execute(arguments: [key, holder])
        }
    }

    @discardableResult
    public func purgeExpired(now: Date) async throws -> Int {
        try await writeAlone { db in
            let nowMS = StoreRows.milliseconds(now)
            // A claim that never finished leaves a security event in the same transaction.
            for row in try Row.fetchAll(db, sql: """
                SELECT client_id, provisioning_id, created_at FROM idempotency_keys WHERE expires_at <= ? AND response_status IS NULL
                ORDER BY created_at
                """, arguments: [nowMS]) {
                try Self.insert(StoreRows.unfinishedClaimEvent(client: row["client_id"], provisioningID: row["provisioning_id"],
                                                               createdAt: row["created_at"], now: now), db)
            }
            // Holds past their time (their request died, or its release failed) go too; a token's
            // leaves a security event in the same transaction.
            for row in try Row.fetchAll(db, sql: "SELECT hold_key, holder, until_ms FROM token_transition_holds WHERE until_ms < ? ORDER BY until_ms",
                                        arguments: [nowMS]) {
                if let event = StoreRows.lapsedHoldEvent(key: row["hold_key"], holder: row["holder"], until: row["until_ms"], now: now) {
                    try Self.insert(event, db)
                }
            }
            try db.execute(sql: "DELETE FROM token_transition_holds WHERE until_ms < ?", arguments: [nowMS])
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE expires_at <= ?", arguments: [nowMS])
            return db.changesCount
        }
    }
}

/// How many of a store's writes outside the group commit are in progress.
final class WritesInProgress: Sendable {
    private let count = Atomic<Int>(0)
    func begin() { count.add(1, ordering: .sequentiallyConsistent) }
    func end() { count.subtract(1, ordering: .sequentiallyConsistent) }
    var none: Bool { count.load(ordering: .sequentiallyConsistent) == 0 }
}
