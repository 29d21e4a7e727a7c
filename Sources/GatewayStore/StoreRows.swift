import Foundation
import ProvisioningCore

/// Conversions shared by both stores between domain types and column values.
enum StoreRows {
    static func referenceJSON(_ reference: IssuerReference) -> String {
        String(decoding: (try? SharedJSON.sortedEncoder.encode(reference.fields)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func reference(_ json: String) throws -> IssuerReference {
        guard let fields = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String] else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not an object of strings"))
        }
        return IssuerReference(fields)
    }

    static func card(id: String, program: String, issuer: String?, referenceJSON: String) throws -> CardRecord {
        CardRecord(id: CardID(id), program: ProgramID(program), issuer: issuer.map { IssuerID($0) },
                   issuerReference: try reference(referenceJSON))
    }

    /// Schema 004, the same on both stores but for the key column type: vault entries of deleted
    /// cards go (they outlived their card and could be claimed by a new card of the same id), an
    /// issuer reference belongs to one card, and security events get their table.
    static func tenantIsolationMigration(autoIncrement: String) -> String {
        """
        DELETE FROM vault_entries WHERE card_id NOT IN (SELECT card_id FROM cards);
        CREATE UNIQUE INDEX cards_issuer_reference ON cards (issuer, issuer_reference)
            WHERE issuer IS NOT NULL AND issuer_reference <> '{}';
        CREATE TABLE security_events (
            id \(autoIncrement),
            at BIGINT NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            source TEXT,
            card_id TEXT,
            detail TEXT NOT NULL
        );
        CREATE INDEX security_events_kind ON security_events (kind, id);
        CREATE INDEX security_events_card ON security_events (card_id, id);
        """
    }

    /// Schema 006, the same on both stores: an issuer reference a card let go of (the card was
    /// deleted, or now names another reference) stays its program's. At an issuer account shared
    /// by several tenants the reference is a card at the issuer that one tenant's program holds;
    /// the unique index kept others off it only while a card named it. Only a client of that
    /// program (or an admin, or the CLI) may register it again, which takes the row away.
    static let releasedReferencesMigration = """
        CREATE TABLE released_issuer_references (
            issuer TEXT NOT NULL,
            issuer_reference TEXT NOT NULL,
            program TEXT NOT NULL,
            released_at BIGINT NOT NULL,
            PRIMARY KEY (issuer, issuer_reference)
        )
        """

    /// Whether a card write drops the card's vault entry: the data sealed for one card of one
    /// program at one issuer is never another's. A new card (a card id registered again after a
    /// delete, or over an entry a version without this rule left), a card moved to another program,
    /// or one that now names another issuer or another card at its issuer (letter case aside)
    /// loses it; the vault audit found a tenant could re-point a card whose issuer had refused it
    /// at a paused issuer, and have the gateway encrypt the old card's number locally.
    static func dropsVaultEntry(before program: String?, program now: String, keepsItsReference: Bool) -> Bool {
        guard let program else { return true }
        return program != now || !keepsItsReference
    }

    /// Whether two (issuer, reference column) pairs name one card at the issuer: the same issuer
    /// and the same fields, letter case aside (schema 009). A card re-put with only the case of its
    /// reference changed still holds it, and lets nothing go.
    static func sameReference(_ a: (issuer: String?, json: String), _ b: (issuer: String?, json: String)) -> Bool {
        a.issuer == b.issuer && a.json.utf8.elementsEqual(b.json.utf8, by: { asciiLower($0) == asciiLower($1) })
    }

    /// Whether two (issuer, reference column) pairs name one card at the issuer as the unique
    /// index reads them (schema 014): the same issuer and the same naming value, letter case
    /// aside (`Dialect.cardKey`). A card whose customer id alone changed still holds its card
    /// account, and lets nothing go: a released row for a key its card still holds would later
    /// stand against the card's own program (the review).
    static func sameCard(_ a: (issuer: String?, json: String), _ b: (issuer: String?, json: String)) -> Bool {
        a.issuer == b.issuer && cardName(a.json).utf8.elementsEqual(cardName(b.json).utf8, by: { asciiLower($0) == asciiLower($1) })
    }

    /// What `Dialect.cardKey` reads from a reference column, before folding.
    static func cardName(_ json: String) -> String {
        (try? reference(json))?.namingValue ?? cardKeyFallbackPrefix + json
    }

    /// Before a whole reference used as its key when it holds no naming field, so that it cannot
    /// equal a naming value.
    static let cardKeyFallbackPrefix = "json:"

    /// ASCII's fold alone, as the stores' `lower` is made to do.
    private static func asciiLower(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    /// Whether a reference a card lets go of is worth remembering: one with an issuer and fields
    /// (the unique index covers the same ones).
    static func holdsReference(issuer: String?, referenceJSON: String) -> Bool {
        issuer != nil && referenceJSON != "{}"
    }

    /// Schema 005, the same on both stores: an audit event is recorded once. A provisioning's
    /// events are its numbered attempts and its own outcome (attempt 0), so (provisioning id,
    /// attempt) names one event, and a write repeated after a commit whose acknowledgement was
    /// lost (a PostgreSQL connection cut during COMMIT) finds it already there instead of adding
    /// a copy. Replays are the exception: each request answered from a stored answer adds a
    /// `replayed` event under the provisioning it replays, so they stay out of the index
    /// (`auditOnce`, the predicate every conflict target repeats). Exact copies already stored
    /// (every column but the row id equal, replays aside) are removed first, keeping the
    /// earliest; rows that share the pair but differ are left alone, and the index then cannot be
    /// built, which stops the migration with the database's error: an operator decides about
    /// those, the gateway does not delete an audit record that says something.
    static func auditOnceMigration(isNotDistinctFrom same: String) -> String {
        let columns = ["at", "client_id", "card_id", "wallet", "device_type", "issuer", "endpoint", "outcome", "error_code",
                       "upstream_status", "latency_ms"]
        return """
            DELETE FROM audit_events WHERE id IN (
                SELECT later.id FROM audit_events later JOIN audit_events earlier
                ON earlier.provisioning_id = later.provisioning_id AND earlier.attempt = later.attempt AND earlier.id < later.id
                AND earlier.\(auditOnce)
                \(columns.map { "AND earlier.\($0) \(same) later.\($0)" }.joined(separator: " ")));
            CREATE UNIQUE INDEX audit_events_attempt ON audit_events (provisioning_id, attempt) WHERE \(auditOnce);
            """
    }

    /// The events the unique index covers: all but replays.
    static let auditOnce = "outcome <> 'replayed'"

    /// An audit row's columns as an event; an unknown wallet or outcome is the store's error.
    static func auditEvent(
        provisioningID: String, at: Int64, client: String, cardID: String, wallet: String, deviceType: String?, tokenID: String?,
        issuer: String?, endpoint: String?, attempt: Int, outcome: String, errorCode: String?, upstreamStatus: Int?, latencyMS: Int,
        program: String?, store: String
    ) throws -> AuditEvent {
        guard let operation = AuditOperation(rawValue: wallet), let outcome = AuditEvent.Outcome(rawValue: outcome) else {
            throw StoreError(store: store, reason: "an audit row has an unknown wallet or outcome")
        }
        return AuditEvent(
            provisioningID: ProvisioningID(provisioningID), at: date(at), client: ClientID(client), cardID: CardID(cardID),
            operation: operation, deviceType: deviceType.flatMap(DeviceType.init(rawValue:)), tokenID: tokenID, issuer: issuer.map { IssuerID($0) },
            endpoint: endpoint, attempt: attempt, outcome: outcome, errorCode: errorCode.flatMap { GatewayError.Code(rawValue: $0) },
            upstreamStatus: upstreamStatus, latencyMS: latencyMS, program: program.map { ProgramID($0) })
    }

    /// What a store does when an audit event's (provisioning id, attempt) is already recorded: the
    /// same event (to the stored millisecond) written again is done; a different one is an error,
    /// never a silent loss.
    static func checkAlreadyRecorded(_ stored: AuditEvent?, _ event: AuditEvent, store: String) throws {
        var event = event
        event.at = date(milliseconds(event.at))
        guard let stored else {
            // The insert met a row this transaction cannot see (an isolation level above READ
            // COMMITTED set for the role): nothing can be compared, so nothing is assumed.
            throw StoreError(
                store: store,
                reason: "attempt \(event.attempt) of provisioning \(event.provisioningID) is already recorded, but the row could not be read back")
        }
        guard stored != event else { return }
        throw StoreError(
            store: store,
            reason: "attempt \(event.attempt) of provisioning \(event.provisioningID) already has a different audit event")
    }

    /// An import's event for one card it moved to another program or issuer: a `card_updated`
    /// under the import's actor, with the card's before and after, as the API's own change has.
    /// Without it the trail said only how many cards a file held, not which tenant's card went
    /// to which (the CLI audit moved one between tenants unseen). Nil for a card that did not move.
    static func importMove(_ batch: SecurityEvent?, card: CardRecord, before: (program: String, issuer: String?)?) -> SecurityEvent? {
        guard let batch, let before, before.program != card.program.rawValue || before.issuer != card.issuer?.rawValue else { return nil }
        var event = SecurityEvent(at: batch.at, kind: .cardUpdated, actor: batch.actor, source: batch.source, cardID: card.id,
                                  detail: ["after_program": card.program.rawValue, "after_issuer": card.issuer?.rawValue ?? "", "by": "cards_imported"])
        event = cardEvent(event, kind: .cardUpdated, before: before)
        return event
    }

    /// A registry change's event, completed with what the card was before.
    static func cardEvent(_ event: SecurityEvent, kind: SecurityEvent.Kind, before: (program: String, issuer: String?)?) -> SecurityEvent {
        var event = event
        event.kind = kind
        event.detail["before_program"] = before?.program ?? ""
        event.detail["before_issuer"] = before?.issuer ?? ""
        return event
    }

    static func detailJSON(_ detail: [String: String]) -> String {
        String(decoding: (try? SharedJSON.sortedEncoder.encode(detail)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func securityEvent(id: Int64, at: Int64, kind: String, actor: String, source: String?, cardID: String?, detailJSON: String)
        throws -> SecurityEvent
    {
        guard let kind = SecurityEvent.Kind(rawValue: kind) else {
            throw StoreError(store: "store", reason: "a security event has an unknown kind")
        }
        return SecurityEvent(id: id, at: date(at), kind: kind, actor: actor, source: source, cardID: cardID.map { CardID($0) },
                             detail: (try? SharedJSON.decoder.decode([String: String].self, from: Data(detailJSON.utf8))) ?? [:])
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// An idempotency claim in one statement, the same on both stores: it inserts the key, or
    /// takes over the row of an expired one (its answer cleared), and changes nothing when the key
    /// is held and unexpired; so a fresh key is one statement (on PostgreSQL one round trip), and
    /// the primary key still decides between concurrent claims, across instances. The
    /// placeholders, in the order they appear (SQLite's `?` are bound by position): client id, key,
    /// request hash, now, expiry, abandon time (milliseconds), the provisioning id the claim's
    /// request runs as, now again.
    static func claimUpsert(placeholders p: [String]) -> String {
        precondition(p.count == 8)
        return """
            INSERT INTO idempotency_keys (client_id, key, request_hash, created_at, expires_at, abandon_at, provisioning_id)
            VALUES (\(p[0]), \(p[1]), \(p[2]), \(p[3]), \(p[4]), \(p[5]), \(p[6]))
            ON CONFLICT (client_id, key) DO UPDATE SET request_hash = excluded.request_hash, response_status = NULL,
                response_body = NULL, created_at = excluded.created_at, expires_at = excluded.expires_at, abandon_at = excluded.abandon_at,
                provisioning_id = excluded.provisioning_id
            WHERE idempotency_keys.expires_at <= \(p[7])
            """
    }

    /// Schema 007, the same on both stores: each claim keeps the time from which, unfinished, it
    /// counts as abandoned (its own request's deadline and margin), instead of every later request
    /// judging it by its own deadline. Rows kept before it have none (NULL).
    static let claimAbandonTimeMigration = "ALTER TABLE idempotency_keys ADD COLUMN abandon_at BIGINT"

    /// Schema 010, the same on both stores: each claim keeps the provisioning id its request runs
    /// as, so a claim found abandoned can name it (`idempotency_outcome_unknown` points the retry
    /// at that provisioning's audit trail). Rows kept before it have none (NULL).
    static let claimProvisioningVersion = "010_claim_provisioning_id"
    static let claimProvisioningMigration = "ALTER TABLE idempotency_keys ADD COLUMN provisioning_id TEXT"

    /// Schema 011, the same on both stores: the program an audit event's card was in when its
    /// request found the card the caller's (`AuditEvent.program`). Rows kept before it have none.
    static let auditProgramVersion = "011_audit_program"
    static let auditProgramMigration = "ALTER TABLE audit_events ADD COLUMN program TEXT"

    /// Schema 012, the same on both stores: events kept before 011 that reached an issuer (an
    /// issuer or an endpoint named) are given the program their card is in when the migration
    /// runs, where the card is still registered and has not been written since the event (so
    /// the program is the one the event's request found: a card moved, or deleted and registered
    /// again by another tenant, after it would have given the event a program it never had; the
    /// review). Their trails had been judged by the card as it is at each read, so a client lost
    /// its own pre-011 trail the moment another tenant registered an id it had deleted (and the
    /// flip told it so; the upgrade audit): now they are judged as 011's events are, by a program
    /// that no later change of the card moves. Events of cards gone, or written since, and
    /// refusals before any issuer (which 011 leaves without a program too), keep none.
    static let auditProgramBackfillVersion = "012_audit_program_backfill"
    static let auditProgramBackfillMigration = """
        UPDATE audit_events SET program = (SELECT cards.program FROM cards WHERE cards.card_id = audit_events.card_id)
        WHERE program IS NULL AND (issuer IS NOT NULL OR endpoint IS NOT NULL)
        AND (SELECT cards.updated_at FROM cards WHERE cards.card_id = audit_events.card_id) <= audit_events.at
        """

    /// Schema 013, the same on both stores: the wallet token transitions under way, one row per
    /// token (its issuer, card and token id, `ProvisioningService.tokenHoldKey`), so that instances sharing a store take
    /// turns as the requests of one process do (the multi-instance audit: two suspends of one
    /// token on two instances both listed it active and both were sent, 6 trials of 6).
    static let tokenHoldsVersion = "013_token_transition_holds"
    static let tokenHoldsMigration = """
        CREATE TABLE token_transition_holds (hold_key TEXT PRIMARY KEY, holder TEXT NOT NULL, until_ms BIGINT NOT NULL)
        """

    /// A hold (a token's transition, the archive run's lease), taken when free, when the hold
    /// there passed its time, or when it is the holder's own (a retry of its request after a
    /// release that failed; the archive's renewal at each page). Placeholders: key, holder, until
    /// (ms), now (ms).
    static func holdUpsert(placeholders p: [String]) -> String {
        precondition(p.count == 4)
        return """
            INSERT INTO token_transition_holds (hold_key, holder, until_ms) VALUES (\(p[0]), \(p[1]), \(p[2]))
            ON CONFLICT (hold_key) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms
            WHERE token_transition_holds.until_ms <= \(p[3]) OR token_transition_holds.holder = excluded.holder
            """
    }

    /// The security event of a claim that never finished, deleted by a purge at `now`.
    static func unfinishedClaimEvent(client: String, provisioningID: String?, createdAt: Int64, now: Date) -> SecurityEvent {
        var detail = ["client": client]
        // A claim abandoned before its time was kept has the epoch: no time is better than 1970.
        if createdAt > 0 {
            detail["claimed_at"] = Date(timeIntervalSince1970: Double(createdAt) / 1000)
                .formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        }
        if let provisioningID { detail["provisioning_id"] = provisioningID }
        return SecurityEvent(at: now, kind: .idempotencyClaimUnfinished, actor: "gateway:purge", detail: detail)
    }

    /// The security event of a hold the purge at `now` deleted after its time (`until`, ms):
    /// for a token's transition (its key is the issuer, card and token, one per line:
    /// `ProvisioningService.tokenHoldKey`), `token_transition_unfinished`; nil for any other hold
    /// (the archive's lease: a killed run's file and its `events_archived` records tell its story).
    static func lapsedHoldEvent(key: String, holder: String, until: Int64, now: Date) -> SecurityEvent? {
        let parts = key.split(separator: "\n", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return SecurityEvent(at: now, kind: .tokenTransitionUnfinished, actor: "gateway:purge", cardID: CardID(String(parts[1])), detail: [
            "issuer": String(parts[0]), "token_id": String(parts[2]), "provisioning_id": holder,
            "held_until": Date(timeIntervalSince1970: Double(until) / 1000).formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
        ])
    }

    /// The security event of the hold `taker` replaced at `now` (`holdUpsert` succeeded), nil
    /// when the hold was its own or not a token's. Another holder's could only be taken past its
    /// time: the takeover deletes what the purge would have recorded (a client retrying the
    /// transition its dead instance left is the usual taker).
    static func takenOverHoldEvent(key: String, holder: String, until: Int64, by taker: String, now: Date) -> SecurityEvent? {
        guard holder != taker, var event = lapsedHoldEvent(key: key, holder: holder, until: until, now: now) else { return nil }
        event.actor = "gateway:hold"
        event.detail["taken_over_by"] = taker
        return event
    }

    /// Schema 008, the same on both stores: the wallet token an audit event's request acted on.
    static let auditTokenMigration = "ALTER TABLE audit_events ADD COLUMN token_id TEXT"

    /// Schema 009: an issuer reference is one card's whatever the case of its letters. An issuer
    /// that reads its ids without regard to case (a UUID, say) would take `CA_1` for another
    /// tenant's `ca_1`; no issuer's contract says its ids are case-sensitive, so the unique index,
    /// and the lookups of released references, compare them folded: ASCII letters only (reference
    /// values are printable ASCII), whatever the database's locale (`foldedReference`). The exact
    /// index it replaces is implied. Released references a card now holds again (in another case)
    /// are dropped, and of released references that differ only in case, the latest is kept: both
    /// with the folded indexes already in place (and the partial one's condition spelt out), so
    /// each row is a lookup, not a scan (20,000 released rows took minutes without them).
    static let referenceCaseFoldVersion = "009_reference_case_folded"

    /// The folded reference column in a dialect: SQLite's `lower` folds ASCII alone; PostgreSQL's
    /// follows the column's collation, so it is given "C" (in a Turkish locale `lower('I')` is `ı`).
    /// Indexes and lookups must spell it the same for the index to serve them.
    enum Dialect {
        case sqlite, postgres
        func folded(_ column: String = "issuer_reference") -> String {
            switch self {
            case .sqlite: "lower(\(column))"
            case .postgres: "lower(\(column) COLLATE \"C\")"
            }
        }

        /// The card at its issuer a reference column names, folded (schema 014): the value of its
        /// naming field (`IssuerReference.cardNamingFields`, the first it holds), or the whole
        /// reference when it holds none. Indexes and lookups spell it the same for the index to
        /// serve them; the stores compare a reference given to it through `cardKey(ofValue:)`.
        func cardKey(_ column: String = "issuer_reference") -> String {
            let values = IssuerReference.cardNamingFields.map { field in
                switch self {
                case .sqlite: "json_extract(\(column), '$.\(field)')"
                case .postgres: "(\(column)::jsonb ->> '\(field)')"
                }
            }
            return folded("COALESCE(\(values.joined(separator: ", ")), '\(StoreRows.cardKeyFallbackPrefix)' || \(column))")
        }

        /// The same key of one bound reference (its placeholder appears once).
        func cardKey(ofValue placeholder: String) -> String {
            let around = cardKeyAround
            return around.prefix + placeholder + around.suffix
        }

        /// `cardKey(ofValue:)` as the text before and after the placeholder, for a query built
        /// by interpolation (PostgreSQL's binds).
        var cardKeyAround: (prefix: String, suffix: String) {
            ("(SELECT \(cardKey("given.reference")) FROM (SELECT ", " AS reference) AS given)")
        }
    }

    static func referenceCaseFoldMigration(_ dialect: Dialect) -> String {
        let folded = dialect.folded()
        return """
            CREATE UNIQUE INDEX cards_issuer_reference_folded ON cards (issuer, \(folded))
                WHERE issuer IS NOT NULL AND issuer_reference <> '{}';
            DROP INDEX cards_issuer_reference;
            CREATE INDEX released_issuer_references_folded ON released_issuer_references (issuer, \(folded));
            DELETE FROM released_issuer_references WHERE EXISTS (
                SELECT 1 FROM cards c WHERE c.issuer = released_issuer_references.issuer AND c.issuer_reference <> '{}'
                AND \(dialect.folded("c.issuer_reference")) = \(dialect.folded("released_issuer_references.issuer_reference")));
            DELETE FROM released_issuer_references WHERE EXISTS (
                SELECT 1 FROM released_issuer_references o WHERE o.issuer = released_issuer_references.issuer
                AND \(dialect.folded("o.issuer_reference")) = \(dialect.folded("released_issuer_references.issuer_reference"))
                AND (o.released_at > released_issuer_references.released_at
                     OR (o.released_at = released_issuer_references.released_at
                         AND o.issuer_reference > released_issuer_references.issuer_reference)))
            """
    }

    /// How many issuer references more than one card holds once case is set aside: schema 009
    /// cannot apply while any does.
    static func caseVariantReferences(_ dialect: Dialect) -> String { heldTwiceCount(dialect.folded()) }

    /// Schema 009 refused: names no card and no reference (those are for ops to find), only how
    /// many and how to find them.
    static func caseVariantsRefused(_ count: Int, store: String, _ dialect: Dialect) -> StoreError {
        heldTwiceRefused(count, version: referenceCaseFoldVersion, what: "issuer reference(s) are held by more than one card when "
            + "letter case is ignored, and an issuer may read them as one card", query: caseVariantCards(dialect), store: store)
    }

    /// The cards whose references schema 009 finds held twice, for ops to run.
    static func caseVariantCards(_ dialect: Dialect) -> String { heldTwiceCards(dialect.folded()) }

    /// Schema 014: a card at an issuer is named by one field of its reference
    /// (`IssuerReference.cardNamingFields`: Bridge's card account id, the others' issuer card id),
    /// and the registry holds one card per issuer and naming value, letter case aside, whatever
    /// else the reference holds. Until then a Bridge reference was compared whole, so a tenant
    /// could register `{customer_id: its own, card_account_id: another tenant's}`, and isolation
    /// rested on Bridge refusing a customer and card account that do not match, which UPSTREAMS.md
    /// marks uncertain. The unique index and the released references' lookups compare the naming
    /// value (`Dialect.cardKey`), which replaces schema 009's folded whole reference (implied by
    /// it). A released reference its own program's card holds again (under any customer id) is
    /// dropped, and of one program's released references naming one card the latest is kept.
    /// Those of two programs naming one card, or naming another program's card, are all kept:
    /// the card keeps its holder, and once it is let go neither tenant may register it, only an
    /// admin or the CLI (the review: dropping them had handed a card account to whichever tenant
    /// held it or let go of it last, a tenant that had registered another's card account under
    /// its own customer id included).
    static let cardKeyVersion = "014_issuer_card_key"

    static func cardKeyMigration(_ dialect: Dialect) -> String {
        let key = dialect.cardKey()
        return """
            CREATE UNIQUE INDEX cards_issuer_reference_card_key ON cards (issuer, \(key))
                WHERE issuer IS NOT NULL AND issuer_reference <> '{}';
            DROP INDEX cards_issuer_reference_folded;
            CREATE INDEX released_issuer_references_card_key ON released_issuer_references (issuer, \(key));
            DROP INDEX released_issuer_references_folded;
            DELETE FROM released_issuer_references WHERE EXISTS (
                SELECT 1 FROM cards c WHERE c.issuer = released_issuer_references.issuer AND c.issuer_reference <> '{}'
                AND c.program = released_issuer_references.program
                AND \(dialect.cardKey("c.issuer_reference")) = \(dialect.cardKey("released_issuer_references.issuer_reference")));
            DELETE FROM released_issuer_references WHERE EXISTS (
                SELECT 1 FROM released_issuer_references o WHERE o.issuer = released_issuer_references.issuer
                AND o.program = released_issuer_references.program
                AND \(dialect.cardKey("o.issuer_reference")) = \(dialect.cardKey("released_issuer_references.issuer_reference"))
                AND (o.released_at > released_issuer_references.released_at
                     OR (o.released_at = released_issuer_references.released_at
                         AND o.issuer_reference > released_issuer_references.issuer_reference)))
            """
    }

    /// How many cards at an issuer more than one card names: schema 014 cannot apply while any is
    /// (its unique index could not be built, and it would not pick a tenant for ops).
    static func sharedCardKeys(_ dialect: Dialect) -> String { heldTwiceCount(dialect.cardKey()) }

    /// Schema 014 refused, as schema 009 is: how many and how to find them, naming none.
    static func sharedCardKeysRefused(_ count: Int, store: String, _ dialect: Dialect) -> StoreError {
        heldTwiceRefused(count, version: cardKeyVersion, what: "card(s) at an issuer are named by more than one card of the registry "
            + "(the same card account id or issuer card id under other fields, letter case aside)", query: sharedCardKeyCards(dialect),
            store: store)
    }

    /// The cards schema 014 finds naming one card at their issuer, for ops to run.
    static func sharedCardKeyCards(_ dialect: Dialect) -> String { heldTwiceCards(dialect.cardKey()) }

    private static func heldTwiceCount(_ key: String) -> String {
        """
        SELECT count(*) FROM (
            SELECT issuer, \(key) AS held FROM cards
            WHERE issuer IS NOT NULL AND issuer_reference <> '{}'
            GROUP BY issuer, \(key) HAVING count(*) > 1
        ) AS held_twice
        """
    }

    private static func heldTwiceCards(_ key: String) -> String {
        "SELECT card_id, program, issuer, issuer_reference FROM cards WHERE (issuer, \(key)) IN "
            + "(SELECT issuer, \(key) FROM cards WHERE issuer IS NOT NULL AND issuer_reference <> '{}' "
            + "GROUP BY issuer, \(key) HAVING count(*) > 1) ORDER BY issuer, \(key)"
    }

    private static func heldTwiceRefused(_ count: Int, version: String, what: String, query: String, store: String) -> StoreError {
        StoreError(store: store, reason: "schema \(version) cannot apply: \(count) \(what); nothing was changed. "
            + "Find them with: \(query); with the gateway version run before this one, delete or change all "
            + "but one card of each (`provisioning-gateway cards delete --card-id ...`, or the API), then start this version again")
    }

    /// Marks an unfinished claim abandoned: its abandon time becomes its claim time, so `claim`
    /// answers `.abandoned` for it from now on, and the claim keeps its time, which the purge's
    /// `idempotency_claim_unfinished` names (it had become the epoch: the trace of exactly the
    /// requests whose outcome is unknown said they were claimed in 1970; the send-twice audit).
    /// An abandoned claim is neither released nor completed afterwards (`notAbandoned`). Only the
    /// claim made at the given time: one taken over since is another request's. Placeholders:
    /// client id, key, claim time (ms), provisioning id. (Claims abandoned before, with both times
    /// the epoch, read as abandoned all the same.)
    static func abandonClaim(placeholders p: [String]) -> String {
        precondition(p.count == 4)
        return """
            UPDATE idempotency_keys SET abandon_at = created_at
            WHERE client_id = \(p[0]) AND key = \(p[1]) AND created_at = \(p[2]) AND response_status IS NULL
            AND provisioning_id = \(p[3])
            """
    }

    /// The condition of a claim not marked abandoned (`abandonClaim`): a fresh claim's abandon time
    /// is its deadline and a margin after its claim time; a claim from before schema 007 has none.
    static let notAbandoned = "(abandon_at IS NULL OR abandon_at <> created_at)"

    /// Deletes an unfinished claim made at its time under its provisioning id, unless it was
    /// marked abandoned (a late release never frees a key whose outcome is unknown).
    static func releaseClaim(placeholders p: [String]) -> String {
        precondition(p.count == 4)
        return """
            DELETE FROM idempotency_keys WHERE client_id = \(p[0]) AND key = \(p[1]) AND created_at = \(p[2])
            AND response_status IS NULL AND provisioning_id = \(p[3]) AND \(notAbandoned)
            """
    }

    /// A database migrated by a newer gateway holds schema versions this binary does not know:
    /// it refuses it before changing anything, rather than write rows a newer schema may read
    /// differently (or miss a constraint it relies on). Nil when every applied version is known.
    static func unknownSchema(applied: some Sequence<String>, known: [String], store: String) -> StoreError? {
        let unknown = applied.filter { !known.contains($0) }.sorted()
        guard !unknown.isEmpty else { return nil }
        return StoreError(store: store, reason: "the database has schema \(unknown.joined(separator: ", ")), which this gateway "
            + "does not know (a newer version migrated it): run that version or a newer one; nothing was changed")
    }

    /// A re-seal's swap, the same on both stores: the entry is replaced only while it holds the
    /// bytes read. Placeholders: sealed, now (ms), card id, expected.
    static func replaceVaultEntry(placeholders p: [String]) -> String {
        precondition(p.count == 4)
        return "UPDATE vault_entries SET sealed = \(p[0]), updated_at = \(p[1]) WHERE card_id = \(p[2]) AND sealed = \(p[3])"
    }

    /// An orphan entry's delete, the same on both stores: only while no card has its id.
    /// Placeholder: card id.
    static func deleteOrphanVaultEntry(placeholder p: String) -> String {
        "DELETE FROM vault_entries WHERE card_id = \(p) AND NOT EXISTS (SELECT 1 FROM cards WHERE cards.card_id = vault_entries.card_id)"
    }

    /// What a request is told when the key it claimed is no longer its own.
    static func claimLost(store: String) -> StoreError {
        StoreError(store: store, reason: "the Idempotency-Key's claim is no longer this request's (it expired and was taken over or purged): the answer was not kept")
    }

    /// Decides a claim from an existing row (times in milliseconds): an unfinished one is
    /// abandoned from its own abandon time on; one kept before schema 007 (`abandonAt` NULL, or
    /// older than the claim) from its claim time plus the asking request's window
    /// (`askerAbandonAt - now`), the rule before.
    static func claim(existingHash: String, completedStatus: Int?, body: Data?, createdAt: Int64, abandonAt: Int64?, provisioningID: String?,
                      requestHash: String, now: Int64, askerAbandonAt: Int64) -> IdempotencyClaim
    {
        guard existingHash == requestHash else { return .mismatch(provisioningID.map(ProvisioningID.init)) }
        guard let completedStatus, let body else {
            // An abandon time older than the claim is a previous claim's, left by a binary from
            // before 007 that took the expired key over: this claim is judged as one of its own.
            let own = abandonAt.flatMap { $0 >= createdAt ? $0 : nil }
            let abandonedFrom = own ?? createdAt + (askerAbandonAt - now)
            return abandonedFrom <= now ? .abandoned(provisioningID.map(ProvisioningID.init)) : .inProgress
        }
        return .replay(StoredResponse(status: completedStatus, body: body))
    }
}
