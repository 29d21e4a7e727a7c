import Foundation

/// A stored answer to a POST that carried an `Idempotency-Key`.
public struct StoredResponse: Sendable, Equatable {
    public var status: Int
    public var body: Data
    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// What claiming an `Idempotency-Key` found.
public enum IdempotencyClaim: Sendable, Equatable {
    /// Nobody holds the key: this request runs and must complete or release it.
    case acquired
    /// The key was used with the same request, which finished: answer with this.
    case replay(StoredResponse)
    /// The same request is running elsewhere (another request, or another gateway instance).
    case inProgress
    /// The same request was claimed longer ago than any request can run and never finished: its
    /// request died (a crash, a killed instance, a store failure after the call) and may have
    /// reached the issuer. It is never run again under this key. It names the provisioning that
    /// claim ran as, when the claim kept one (schema 010; not for a claim kept before it), so a
    /// retry can be pointed at that provisioning's audit trail.
    case abandoned(ProvisioningID?)
    /// The key was used with a different request: the provisioning that request ran as, when its
    /// claim kept one (as for `abandoned`), on whose trail the refused repeat is recorded.
    case mismatch(ProvisioningID?)
}

/// What an owner-checked card write did.
public enum CardWrite: Sendable, Equatable {
    case created, updated
    /// The id belongs to a card of another program: nothing was written.
    case notOwned
}

public struct CardPageQuery: Sendable, Equatable {
    /// Cards of any of these programs; nil means every program (an admin's view), and an empty
    /// list none: a client without programs sees nothing rather than everything.
    public var programs: [ProgramID]?
    public var issuer: IssuerID?
    /// Cards after this id, in id order.
    public var after: CardID?
    public var limit: Int
    public init(programs: [ProgramID]? = nil, issuer: IssuerID? = nil, after: CardID? = nil, limit: Int = 100) {
        self.programs = programs
        self.issuer = issuer
        self.after = after
        self.limit = limit
    }
}

/// Everything the gateway keeps: the card registry, the audit trail and idempotency records.
/// Implementations (SQLite, PostgreSQL) pass one conformance suite; no SQL exists outside them.
public protocol GatewayStore: CardRegistry {
    /// Creates or upgrades the schema; safe to run again and from several instances at once.
    func migrate() async throws
    /// The applied schema versions, oldest first.
    func schemaVersions() async throws -> [String]
    /// Why the store cannot take the request path's writes although it answers reads, or nil:
    /// what `/readyz` adds to its read (a SQLite file deleted, replaced or made unwritable under a
    /// running gateway had kept it ready while every audit write failed or went to a deleted file).
    func writeProblem() async -> String?
    /// `store check`: reads the whole store for damage a request would otherwise find only when
    /// it reached it (a torn page, an index out of step with its table), without migrating or
    /// changing anything. The problems found, in the store's own words (which name pages, tables
    /// and indexes, never a row's values); empty when the store is sound. Slow on a large store:
    /// an operator's command, never run by the gateway itself.
    func check() async throws -> [String]

    /// Inserts or replaces a card. An existing card is replaced only when its program is one of
    /// `owners` (any card when nil: admin clients, the CLI), and `event`, when given, is written in
    /// the same transaction: the check, the change and its security event stand or fall together,
    /// so two tenants racing for one id cannot take each other's card and no change goes
    /// unaudited. The store sets the event's kind (`card_registered` or `card_updated`) and its
    /// `before_issuer`/`before_program`. A card that moves to another program or issuer, or names
    /// another card at its issuer, loses its vault entry in the same transaction (the entry was
    /// sealed for the old one), and so does a card id registered anew. Throws
    /// `CardRegistryError.issuerReferenceInUse` when another card has the same issuer and reference.
    func putCard(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardWrite
    /// Deletes the card and its vault entry when its program is one of `owners` (any when nil),
    /// with `event` (kind `card_deleted`, `before_*` set by the store) in the same transaction.
    /// The deleted card, or nil when there was none to delete.
    func deleteCard(_ id: CardID, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardRecord?
    func cards(_ query: CardPageQuery) async throws -> [CardRecord]
    /// All cards or none, in one transaction (same rules as `putCard`).
    /// With `event` (a CLI import's security event) written in the same transaction when given.
    /// Answers how many vault entries it removed (cards moved to another program, issuer or
    /// reference: `StoreRows.dropsVaultEntry`), for the import to say so.
    @discardableResult
    func importCards(_ cards: [CardRecord], event: SecurityEvent?) async throws -> Int

    /// Vault entries are opaque sealed bytes here: sealing and opening happen above the store.
    /// With `event` written in the same transaction when given: an entry never changes unaudited.
    func putVaultEntry(_ cardID: CardID, sealed: Data, event: SecurityEvent?) async throws
    /// Writes `card`'s entry only while the registry holds the card as read (the same program and
    /// issuer), in one transaction with the check; false, with nothing written, when it was
    /// deleted or moved meanwhile (a `vault put` racing a delete had left an entry that a card
    /// registered later under the id took over).
    func putVaultEntry(for card: CardRecord, sealed: Data, event: SecurityEvent?) async throws -> Bool
    func vaultEntry(_ cardID: CardID) async throws -> Data?
    /// `event` is written, in the same transaction, only when there was an entry to delete.
    @discardableResult func deleteVaultEntry(_ cardID: CardID, event: SecurityEvent?) async throws -> Bool
    /// Replaces a vault entry only while it still holds `expected`, the bytes read before it was
    /// re-sealed (every seal differs: a fresh nonce); an entry changed meanwhile (a new card
    /// number put), or deleted with its card or its move to another program, is left as it is.
    /// True when it was replaced. Re-sealing (`vault rotate`) runs beside a serving gateway.
    func replaceVaultEntry(_ cardID: CardID, expected: Data, with sealed: Data) async throws -> Bool
    /// Deletes a vault entry only while no card has its id, in one statement; true when deleted.
    func deleteOrphanVaultEntry(_ cardID: CardID) async throws -> Bool
    /// Card ids with a vault entry, in id order, after `after` (for re-sealing every entry).
    func vaultCardIDs(after: CardID?, limit: Int) async throws -> [CardID]

    /// Security events (authentication failures, registry changes, admin reads, CLI actions).
    func appendSecurityEvent(_ event: SecurityEvent) async throws
    /// Oldest first, by id.
    func securityEvents(_ query: SecurityEventQuery) async throws -> [SecurityEvent]

    func appendAudit(_ event: AuditEvent) async throws
    /// A provisioning's events, oldest first, at most `limit` of them: a trail grows with every
    /// replay of its key, so no reader on the request path takes it whole.
    func auditEvents(_ provisioningID: ProvisioningID, limit: Int) async throws -> [AuditEvent]

    /// `store archive`: up to `limit` rows of `table` whose id is above `after`, in id order, as
    /// their columns hold them (a read by the primary key: a page costs its own rows). Nothing is
    /// read into the gateway's types, so a value this version does not know (a code of a later
    /// version) is archived as it is, not dropped. Ids only grow (neither store reuses one), so a
    /// page after another misses nothing.
    func archivedRows(_ table: EventTable, after: Int64, limit: Int) async throws -> [ArchivedRow]
    /// Deletes the audit and security events of these ids that were recorded before `before` (an
    /// id whose event is newer is left alone), with the event `record` makes of how many of each
    /// it deleted (kind `events_archived`) in the same transaction: no event goes without a
    /// record that it went, and the record says what went. How many of each it deleted.
    func deleteArchivedEvents(audit: [Int64], security: [Int64], recordedBefore before: Date,
                              record: @escaping @Sendable (ArchivedEventCounts) -> SecurityEvent) async throws -> ArchivedEventCounts

    /// Claims `key` for this request. The claim keeps `abandonAt`, the time from which, still
    /// unfinished, it belonged to a request that died (a crash, a killed instance) and is
    /// `abandoned`: never taken over, since that request may have reached the issuer before it
    /// died. Each claim carries its own time, set from the deadline its request ran under, so a
    /// later request under a shorter deadline (a reload lowered it, another instance runs another
    /// file) never mistakes a request still running for a dead one. A claim kept before schema 007
    /// has none and is judged by the asking request's window (`abandonAt - now`). The claim also
    /// keeps `provisioningID`, the id its request runs as, which an `abandoned` claim names.
    func claimIdempotencyKey(client: ClientID, key: String, requestHash: String, provisioningID: ProvisioningID, now: Date,
                             expiresAt: Date, abandonAt: Date) async throws -> IdempotencyClaim
    /// Keeps the answer of a claim's request, and commits `audit` (its successful attempt's
    /// events) in the same transaction: both are kept or neither is. One synced commit instead of
    /// two for a request with an Idempotency-Key.
    ///
    /// `claimedAt`, here and below, is the `now` the claim was acquired with: the key is the
    /// request's only while its row still carries that time. A claim that expired and was taken
    /// over by a later request, or was purged, is not this request's any more: completing it
    /// throws a `StoreError` and writes nothing (the answer is not kept, so it is not sent, and
    /// the other request's claim is left alone); releasing or abandoning it changes nothing.
    func completeIdempotencyKey(client: ClientID, key: String, claimedAt: Date, response: StoredResponse, audit: [AuditEvent]) async throws
    /// Forgets a claim whose request failed in a way worth retrying. `provisioningID` must be the
    /// claim's too: two requests with one key on two instances can claim it in the same
    /// millisecond, and the one whose claim failed (it waited on the other's row past the store's
    /// timeout) then released the other's, still running, and a retry ran the key again (the
    /// send-twice audit). (A claim made before schema 010 has no id: it is let go by its age.)
    func releaseIdempotencyKey(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws
    /// Marks an unfinished claim abandoned now, as if its request had died: its request ended
    /// without knowing whether the issuer acted, so every later claim of the key is `abandoned`
    /// and nothing runs it again. A finished claim keeps its answer. `provisioningID` as for a release.
    func abandonIdempotencyKey(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws
    /// Holds `key` for `holder` until `until`, across every instance and tool on the store: true
    /// when nobody held it, `holder` did already (its time is then `until`), or the hold had passed
    /// its time (its holder died with it; a token's then leaves `token_transition_unfinished`, in
    /// the same transaction); false while another holder's hold stands. One write, committed
    /// before it answers. Two kinds of key: a wallet token's transition (its issuer,
    /// card and token, `ProvisioningService.tokenHoldKey`; the holder a request's provisioning
    /// id), and the store's archive run (`EventArchive.leaseKey`).
    func takeHold(_ key: String, holder: String, now: Date, until: Date) async throws -> Bool
    /// Moves `holder`'s hold of `key` on to `until`: true only while the hold is still its own
    /// (never taken again once it was purged or another holder took it, as `takeHold` would).
    func extendHold(_ key: String, holder: String, until: Date) async throws -> Bool
    /// Ends `holder`'s hold of `key`; a hold another holder took over (after this one's time
    /// passed) is left alone.
    func releaseHold(_ key: String, holder: String) async throws
    /// Deletes idempotency records that expired before `now`; returns how many.
    @discardableResult func purgeExpired(now: Date) async throws -> Int
    /// The request path's commits so far and the writes they held, for a store that groups
    /// concurrent requests' writes into shared commits (SQLite's group commit); nil for one whose
    /// every write is its own transaction (PostgreSQL, whose own statistics count them).
    var commitCounts: StoreCommitCounts? { get }
}

/// The tables of events `store archive` moves out of the store.
public enum EventTable: String, Sendable, CaseIterable {
    case audit = "audit_events"
    case security = "security_events"
}

/// One stored value as its column holds it.
public enum ArchivedValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
}

/// One row of an event table as its columns hold it: its id, its `at` (milliseconds since 1970),
/// and every other column by name.
public struct ArchivedRow: Sendable, Equatable {
    public var id: Int64
    public var at: Int64
    public var columns: [String: ArchivedValue]
    public init(id: Int64, at: Int64, columns: [String: ArchivedValue]) {
        self.id = id
        self.at = at
        self.columns = columns
    }
}

/// How many events one `deleteArchivedEvents` deleted.
public struct ArchivedEventCounts: Sendable, Equatable {
    public var audit: Int
    public var security: Int
    public init(audit: Int, security: Int) {
        self.audit = audit
        self.security = security
    }
}

/// How a store's request-path writes were committed: `writes` over `commits` is how many
/// requests' writes shared one synced commit (one WAL sync).
public struct StoreCommitCounts: Sendable, Equatable {
    /// Transactions committed (each one sync).
    public var commits: Int
    /// Writes (an audit event, a claim, a kept answer with its events) in those transactions.
    public var writes: Int
    public init(commits: Int, writes: Int) {
        self.commits = commits
        self.writes = writes
    }
}

extension GatewayStore {
    /// A store whose writes fail only when tried (PostgreSQL: its server says so at once).
    public func writeProblem() async -> String? { nil }

    public var commitCounts: StoreCommitCounts? { nil }

    /// Keeps the answer alone.
    public func completeIdempotencyKey(client: ClientID, key: String, claimedAt: Date, response: StoredResponse) async throws {
        try await completeIdempotencyKey(client: client, key: key, claimedAt: claimedAt, response: response, audit: [])
    }

    /// Without an owner check or a security event (the sandbox's own seeding, tests). True when the card is new.
    @discardableResult public func putCard(_ card: CardRecord) async throws -> Bool {
        try await putCard(card, owners: nil, event: nil) == .created
    }
    /// True when there was a card to delete.
    @discardableResult public func deleteCard(_ id: CardID) async throws -> Bool {
        try await deleteCard(id, owners: nil, event: nil) != nil
    }
    /// Without a security event (the sandbox's own seeding, tests).
    @discardableResult
    public func importCards(_ cards: [CardRecord]) async throws -> Int { try await importCards(cards, event: nil) }
    public func putVaultEntry(_ cardID: CardID, sealed: Data) async throws { try await putVaultEntry(cardID, sealed: sealed, event: nil) }
    @discardableResult public func deleteVaultEntry(_ cardID: CardID) async throws -> Bool { try await deleteVaultEntry(cardID, event: nil) }
}

/// A store that cannot be used, named so ops know which one.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public let store: String
    public let reason: String
    /// The store did not answer in time (PostgreSQL's `operation_timeout_ms`): a write may still
    /// land, and another write in the same request would most likely wait just as long, so a
    /// request that meets this answers at once rather than try a second write.
    public let unanswered: Bool
    public init(store: String, reason: String, unanswered: Bool = false) {
        self.store = store
        self.reason = reason
        self.unanswered = unanswered
    }

    /// Whether `error` is a store's that did not answer in time.
    public static func isUnanswered(_ error: (any Error)?) -> Bool {
        (error as? StoreError)?.unanswered == true
    }
    public var description: String { "\(store): \(reason)" }
}

extension GatewayStore {
    /// Every event of a provisioning, oldest first (tests and tools; the request path reads a bounded number).
    public func auditEvents(_ provisioningID: ProvisioningID) async throws -> [AuditEvent] {
        try await auditEvents(provisioningID, limit: Int(Int32.max))
    }
}
