import Foundation
@testable import GatewayStore
import ProvisioningCore
import Testing

/// One conformance scenario, named for the test report.
struct StoreScenario: Sendable, CustomTestStringConvertible {
    let name: String
    let run: @Sendable (any GatewayStore) async throws -> Void
    var testDescription: String { name }
}

/// The scenarios every `GatewayStore` must pass, unchanged; each store's suite only supplies a store.
enum StoreConformance {
    static let all: [StoreScenario] = [
        .init(name: "migrations from empty and again", run: migrationsRunFromEmptyAndAgain),
        .init(name: "registry CRUD", run: registryCRUD),
        .init(name: "paging", run: paging),
        .init(name: "import is idempotent", run: importIsIdempotent),
        .init(name: "vault entries round trip", run: vaultEntriesRoundTrip),
        .init(name: "audit round trips", run: auditRoundTrips),
        .init(name: "idempotency replays and refuses reuse", run: idempotencyReplaysAndRefusesReuse),
        .init(name: "idempotency expires", run: idempotencyExpires),
        .init(name: "an abandoned claim is never taken over", run: anAbandonedClaimIsNeverTakenOver),
        .init(name: "concurrent claims acquire once", run: concurrentClaimsAcquireOnce),
        .init(name: "a claim marked abandoned is abandoned at once", run: aClaimMarkedAbandonedIsAbandonedAtOnce),
        .init(name: "a claim taken over is no longer its first request's", run: aClaimTakenOverIsNoLongerItsFirstRequests),
        .init(name: "an issuer reference belongs to one card", run: anIssuerReferenceBelongsToOneCard),
        .init(name: "a reference a card let go of stays its program's", run: aReferenceACardLetGoOfStaysItsPrograms),
        .init(name: "a reference is one card's whatever its letter case", run: aReferenceIsOneCardsWhateverItsLetterCase),
        .init(name: "a card is named by its naming field alone", run: aCardIsNamedByItsNamingFieldAlone),
        .init(name: "vault entries go with their card", run: vaultEntriesGoWithTheirCard),
        .init(name: "an entry is written only for the card as read", run: anEntryIsWrittenOnlyForTheCardAsRead),
        .init(name: "a re-seal never undoes a change made meanwhile", run: aReSealNeverUndoesAChangeMadeMeanwhile),
        .init(name: "security events round trip and filter", run: securityEventsRoundTripAndFilter),
        .init(name: "owner-checked writes never take another program's card", run: ownerCheckedWrites),
        .init(name: "CLI changes and their events are one transaction", run: cliChangesAndTheirEventsAreOneTransaction),
        .init(name: "an audit event is recorded once", run: anAuditEventIsRecordedOnce),
        .init(name: "a cancelled request's last writes still land", run: aCancelledRequestsLastWritesStillLand),
        .init(name: "events recorded before a time are archived with a record of their going", run: eventsBeforeATimeAreArchived),
        .init(name: "a token transition is held by one request at a time", run: aTokenTransitionIsHeldByOneRequestAtATime),
    ]

    /// Raw SQL on a store's own database, for the scenarios that break it on purpose (each
    /// store's suite supplies it, with the statements in its dialect).
    typealias RawSQL = @Sendable (String) async throws -> Void

    static let versions = ["001_cards_audit_idempotency", "002_vault", "003_audit_device_type", "004_tenant_isolation", "005_audit_event_once",
                           "006_released_issuer_references", "007_claim_abandon_time",
                           "008_audit_token_id", "009_reference_case_folded", "010_claim_provisioning_id", "011_audit_program",
                           "012_audit_program_backfill", "013_token_transition_holds", "014_issuer_card_key"]

    static func claim(_ store: any GatewayStore, _ key: String) async throws -> IdempotencyClaim {
        let now = instant(0)
        return try await store.claimIdempotencyKey(client: "acme", key: key, requestHash: "h", now: now, expiresAt: now.addingTimeInterval(60),
                                                   abandonAt: now.addingTimeInterval(60))
    }

    /// A provisioning's successful attempt, at `at`.
    static func success(_ id: String, at: Date = instant(0)) -> AuditEvent {
        AuditEvent(provisioningID: ProvisioningID(id), at: at, client: "acme", cardID: "c1", operation: .applePay, issuer: "bridge",
                   endpoint: nil, attempt: 1, outcome: .succeeded, errorCode: nil, upstreamStatus: 200, latencyMS: 3)
    }

    static let answer = StoredResponse(status: 200, body: Data("{}".utf8))

    /// A keyed request's answer and its success event: both kept or neither. `refuseAudit` makes
    /// every audit insert fail (a trigger), `allowAudit` undoes it.
    static func anAnswerAndItsEventsCommitTogetherOrNotAtAll(
        _ store: any GatewayStore, sql: RawSQL, refuseAudit: String, allowAudit: String
    ) async throws {
        try await store.migrate()
        #expect(try await claim(store, "kept") == .acquired)
        try await store.completeIdempotencyKey(client: "acme", key: "kept", claimedAt: instant(0), response: answer, audit: [success("prv_kept")])
        #expect(try await store.auditEvents("prv_kept") == [success("prv_kept")])
        #expect(try await claim(store, "kept") == .replay(answer))

        // The event cannot be written: the answer is not kept either, and the claim stays unfinished.
        #expect(try await claim(store, "lost") == .acquired)
        try await sql(refuseAudit)
        await #expect(throws: (any Error).self) {
            try await store.completeIdempotencyKey(client: "acme", key: "lost", claimedAt: instant(0), response: answer, audit: [success("prv_lost")])
        }
        #expect(try await claim(store, "lost") == .inProgress)
        // Nor did the event slip in around the refusal: with the trigger gone, none is there.
        try await sql(allowAudit)
        #expect(try await store.auditEvents("prv_lost").isEmpty)
        #expect(try await claim(store, "lost") == .inProgress)
    }

    /// (provisioning id, attempt) names one event. Written again (the answer and its event were
    /// committed but the acknowledgement was lost, so the event is written on its own), it is
    /// not copied; a different event for the same attempt is refused, never dropped in silence.
    static func anAuditEventIsRecordedOnce(_ store: any GatewayStore) async throws {
        try await store.migrate()
        // Not a whole millisecond: the stores keep milliseconds, and the repeat is still the same event.
        let event = success("prv_once", at: instant(1).addingTimeInterval(0.000_4))
        var kept = event
        kept.at = instant(1)
        #expect(try await claim(store, "once") == .acquired)
        try await store.completeIdempotencyKey(client: "acme", key: "once", claimedAt: instant(0), response: answer, audit: [event])
        try await store.appendAudit(event)
        try await store.completeIdempotencyKey(client: "acme", key: "once", claimedAt: instant(0), response: answer, audit: [event])
        #expect(try await store.auditEvents("prv_once") == [kept])

        var other = event
        other.outcome = .failed
        other.errorCode = .upstreamUnavailable
        await #expect(throws: StoreError.self) { try await store.appendAudit(other) }
        // In a joint commit too: the answer is not kept with it.
        #expect(try await claim(store, "other") == .acquired)
        await #expect(throws: StoreError.self) {
            try await store.completeIdempotencyKey(client: "acme", key: "other", claimedAt: instant(0), response: answer, audit: [other])
        }
        #expect(try await claim(store, "other") == .inProgress)
        #expect(try await store.auditEvents("prv_once") == [kept])

        // Each request answered from the stored answer is its own replay event, however alike.
        let replay = AuditEvent(provisioningID: "prv_once", at: instant(2), client: "acme", cardID: "c1", operation: .applePay, issuer: nil,
                                endpoint: nil, attempt: 0, outcome: .replayed, errorCode: nil, upstreamStatus: nil, latencyMS: 0)
        try await store.appendAudit(replay)
        try await store.appendAudit(replay)
        #expect(try await store.auditEvents("prv_once") == [kept, replay, replay])
        // A bounded read gives the oldest: the attempt first, then as many replays as asked.
        #expect(try await store.auditEvents("prv_once", limit: 1) == [kept])
        #expect(try await store.auditEvents("prv_once", limit: 2) == [kept, replay])
        #expect(try await store.auditEvents("prv_once", limit: 0) == [])

        // Another attempt, or the same attempt of another provisioning, is another event.
        var retry = kept
        retry.attempt = 2
        var elsewhere = kept
        elsewhere.provisioningID = "prv_elsewhere"
        try await store.appendAudit(retry)
        try await store.appendAudit(elsewhere)
        #expect(try await store.auditEvents("prv_once") == [kept, replay, replay, retry])
        #expect(try await store.auditEvents("prv_elsewhere") == [elsewhere])
    }

    /// Schema 012 gives events kept before 011 that reached an issuer the program their card is
    /// in, where the card is still registered and was not written since the event; a refusal
    /// before any issuer, an event of a card gone or written since (moved, or deleted and
    /// registered again), an activation without a card and an event that names its program
    /// already are left as they are. `forget012` takes the version back (its rows stay).
    static func theProgramBackfillNamesTheCardsProgramNow(_ store: any GatewayStore, sql: RawSQL, forget012: String) async throws {
        try await store.migrate()
        try await store.putCard(card("c_kept", program: "p_now"))
        try await store.putCard(card("c_named", program: "p_now", ref: "named"))
        try await sql(forget012)
        func row(_ id: String, card: String, issuer: String = "'bridge'", endpoint: String = "NULL", outcome: String = "succeeded",
                 program: String = "NULL", at: Int64 = 1_800_000_001_000) -> String {
            """
            INSERT INTO audit_events (provisioning_id, at, client_id, card_id, wallet, device_type, issuer, endpoint, attempt, outcome,
                error_code, upstream_status, latency_ms, program)
            VALUES ('\(id)', \(at), 'acme', '\(card)', 'apple_pay', NULL, \(issuer), \(endpoint), 1, '\(outcome)',
                NULL, 200, 3, \(program))
            """
        }
        for statement in [
            row("prv_kept", card: "c_kept"),
            row("prv_endpoint_only", card: "c_kept", issuer: "NULL", endpoint: "'https://api.bridge.xyz/v0'", outcome: "failed"),
            row("prv_refused", card: "c_kept", issuer: "NULL", outcome: "failed"),
            row("prv_gone", card: "c_deleted"),
            row("prv_no_card", card: "", issuer: "'tmp'"),
            row("prv_named", card: "c_named", program: "'p_then'"),
            // In 2001: the card was written (registered again, moved) since, so its program now
            // need not be the one this request found.
            row("prv_written_since", card: "c_kept", at: 1_000_000_000_000),
        ] { try await sql(statement) }
        try await store.migrate()
        #expect(try await store.schemaVersions() == versions)
        func program(_ id: ProvisioningID) async throws -> [ProgramID?] { try await store.auditEvents(id).map(\.program) }
        #expect(try await program("prv_kept") == ["p_now"])
        #expect(try await program("prv_endpoint_only") == ["p_now"])
        #expect(try await program("prv_refused") == [nil])
        #expect(try await program("prv_gone") == [nil])
        #expect(try await program("prv_no_card") == [nil])
        #expect(try await program("prv_named") == ["p_then"])
        #expect(try await program("prv_written_since") == [nil])
        // Later events of the card are not touched by a second run: the version is applied once.
        try await store.putCard(card("c_kept", program: "p_later"))
        try await store.migrate()
        #expect(try await program("prv_kept") == ["p_now"])
    }

    /// A token transition's hold is one request's at a time, across every instance on the store,
    /// until it is released or its time passes (its request died); a release by a request whose
    /// hold was taken over leaves the new holder's alone.
    static func aTokenTransitionIsHeldByOneRequestAtATime(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let key = "marqeta\ncard_1\ndwt-1"
        #expect(try await store.takeHold(key, holder: "prv_a", now: instant(0), until: instant(30)))
        #expect(try await !store.takeHold(key, holder: "prv_b", now: instant(1), until: instant(31)), "held twice at once")
        #expect(try await store.takeHold("marqeta\ncard_1\ndwt-2", holder: "prv_b", now: instant(1), until: instant(31)),
                "another token of the card is another hold")
        #expect(try await !store.takeHold(key, holder: "prv_b", now: instant(29), until: instant(59)))
        // prv_a's time passed (it died holding it): prv_b takes it (prv_a's trace is written, below),
        // and prv_a's late release leaves it. A hold is extended only by its own holder.
        #expect(try await store.takeHold(key, holder: "prv_b", now: instant(30), until: instant(60)))
        try await store.releaseHold(key, holder: "prv_a")
        #expect(try await !store.extendHold(key, holder: "prv_a", until: instant(90)), "extended by a holder it was taken from")
        #expect(try await store.extendHold(key, holder: "prv_b", until: instant(60)))
        #expect(try await !store.takeHold(key, holder: "prv_c", now: instant(31), until: instant(61)))
        try await store.releaseHold(key, holder: "prv_b")
        #expect(try await !store.extendHold(key, holder: "prv_b", until: instant(90)), "a released hold is not taken again by extending it")
        #expect(try await store.takeHold(key, holder: "prv_c", now: instant(32), until: instant(62)), "released, free again")
        // Its own request may take it again (a retry after a release that failed); nobody else.
        #expect(try await store.takeHold(key, holder: "prv_c", now: instant(33), until: instant(63)))
        #expect(try await !store.takeHold(key, holder: "prv_d", now: instant(34), until: instant(64)))
        // A purge removes holds past their time, and only those; each lapsed token hold leaves a
        // `token_transition_unfinished` event (the archive's lease, which lapses too, none).
        #expect(try await store.takeHold("lithic\ncard_2\ntok", holder: "prv_e", now: instant(35), until: instant(100)))
        #expect(try await store.takeHold("store archive", holder: "cli:ops on host pid 1 run 1", now: instant(35), until: instant(40)))
        _ = try await store.purgeExpired(now: instant(70))
        // The first trace is prv_a's, written when prv_b took its lapsed hold over (the purge
        // never saw that hold); then the purge's, in the order of their times.
        let traces = try await store.securityEvents(SecurityEventQuery(kind: .tokenTransitionUnfinished))
        #expect(traces.map { $0.detail["token_id"] } == ["dwt-1", "dwt-2", "dwt-1"])
        #expect(traces.map { $0.detail["provisioning_id"] } == ["prv_a", "prv_b", "prv_c"])
        #expect(traces.map(\.actor) == ["gateway:hold", "gateway:purge", "gateway:purge"])
        #expect(traces.map { $0.detail["taken_over_by"] } == ["prv_b", nil, nil])
        #expect(traces.allSatisfy { $0.cardID == CardID("card_1") && $0.detail["issuer"] == "marqeta" })
        let heldUntil = traces.map { $0.detail["held_until"].flatMap { try? Date($0, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) } }
        #expect(heldUntil == [instant(30), instant(31), instant(63)])
        #expect(try await store.securityEvents(SecurityEventQuery()).count == traces.count, "the lease's lapse is no event")
        #expect(try await store.takeHold(key, holder: "prv_d", now: instant(0), until: instant(64)), "a lapsed hold was kept")
        #expect(try await !store.takeHold("lithic\ncard_2\ntok", holder: "prv_f", now: instant(0), until: instant(100)),
                "a hold in its time was purged")
    }

    /// Schema 005 on a database that already holds copies: exact copies go (the earliest row
    /// stays), and rows sharing (provisioning id, attempt) but saying different things stop the
    /// migration with nothing changed. `forget005` drops the version's index and its record.
    static func theAuditOnceMigrationKeepsWhatDiffers(_ store: any GatewayStore, sql: RawSQL, forget005: String) async throws {
        try await store.migrate()
        try await sql(forget005)
        func row(_ id: String, outcome: String = "succeeded", endpoint: String = "NULL") -> String {
            """
            INSERT INTO audit_events (provisioning_id, at, client_id, card_id, wallet, device_type, issuer, endpoint, attempt, outcome,
                error_code, upstream_status, latency_ms)
            VALUES ('\(id)', \(1_800_000_001_000), 'acme', 'c1', 'apple_pay', NULL, 'bridge', \(endpoint), 1, '\(outcome)', NULL, 200, 3)
            """
        }
        for statement in [row("prv_copied"), row("prv_copied"), row("prv_copied"), row("prv_alone"),
                          row("prv_replayed", outcome: "replayed"), row("prv_replayed", outcome: "replayed")] { try await sql(statement) }
        try await store.migrate()
        #expect(try await store.schemaVersions() == versions)
        var copied = success("prv_copied", at: instant(1))
        let got = try await store.auditEvents("prv_copied")
        #expect(got == [copied], "\(got)")
        copied.provisioningID = "prv_alone"
        #expect(try await store.auditEvents("prv_alone") == [copied])
        // Two replays alike are two requests answered: both stay.
        #expect(try await store.auditEvents("prv_replayed").map(\.outcome) == [.replayed, .replayed])

        try await sql(forget005)
        for statement in [row("prv_differs"), row("prv_differs", outcome: "failed"), row("prv_copied")] { try await sql(statement) }
        await #expect(throws: (any Error).self) { try await store.migrate() }
        #expect(try await store.schemaVersions() == versions.filter { $0 != "005_audit_event_once" })
        #expect(try await store.auditEvents("prv_differs").map(\.outcome) == [.succeeded, .failed])
        #expect(try await store.auditEvents("prv_copied").count == 2)

        // A NULL against a value is a difference too (not an unknown that would pass for equal).
        try await sql("DELETE FROM audit_events WHERE provisioning_id = 'prv_differs'")
        try await sql(row("prv_endpoint", endpoint: "'https://api.bridge.xyz/v0'"))
        try await sql(row("prv_endpoint"))
        await #expect(throws: (any Error).self) { try await store.migrate() }
        #expect(try await store.auditEvents("prv_endpoint").map(\.endpoint) == ["https://api.bridge.xyz/v0", nil])
        try await sql("DELETE FROM audit_events WHERE provisioning_id = 'prv_endpoint'")
        try await store.migrate()
        #expect(try await store.schemaVersions() == versions)
        #expect(try await store.auditEvents("prv_copied").count == 1)
    }

    static func cliChangesAndTheirEventsAreOneTransaction(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let event = { (kind: SecurityEvent.Kind, card: CardID?) in SecurityEvent(at: instant(20), kind: kind, actor: "cli:ops", cardID: card) }
        try await store.importCards([card("i1"), card("i2")], event: event(.cardsImported, nil))
        // A refused import (one reference twice) writes neither its cards nor its event.
        await #expect(throws: CardRegistryError.issuerReferenceInUse) {
            try await store.importCards([card("i3", ref: "same"), card("i4", ref: "same")], event: event(.cardsImported, nil))
        }
        try await store.putVaultEntry("i1", sealed: Data([1]), event: event(.vaultPut, "i1"))
        #expect(try await store.deleteVaultEntry("i1", event: event(.vaultDeleted, "i1")) == true)
        // Nothing to delete: nothing recorded.
        #expect(try await store.deleteVaultEntry("i1", event: event(.vaultDeleted, "i1")) == false)
        let kinds = try await store.securityEvents(SecurityEventQuery(actor: "cli:ops")).map(\.kind)
        #expect(kinds == [.cardsImported, .vaultPut, .vaultDeleted])
        #expect(try await store.card("i3") == nil)
    }

    /// The event an owner-checked write is asked to record for `actor`.
    static func change(_ actor: String, _ id: CardID) -> SecurityEvent {
        SecurityEvent(at: instant(10), kind: .cardUpdated, actor: actor, source: "10.1.2.3", cardID: id, detail: ["after_program": "x"])
    }

    static func ownerCheckedWrites(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let put = { @Sendable (card: CardRecord, owners: Set<ProgramID>?) in
            try await store.putCard(card, owners: owners, event: change(owners?.first?.rawValue ?? "admin", card.id))
        }
        #expect(try await put(card("w1", program: "acme"), ["acme"]) == .created)
        #expect(try await put(card("w1", program: "acme", issuer: "tmp"), ["acme"]) == .updated)
        // Another tenant's write to that id changes nothing and records nothing.
        #expect(try await put(card("w1", program: "evil", ref: "evil_w1"), ["evil"]) == .notOwned)
        #expect(try await store.card("w1")?.program == "acme")
        #expect(try await store.deleteCard("w1", owners: ["evil"], event: change("evil", "w1")) == nil)
        #expect(try await store.card("w1") != nil)
        // Each change's event is in the store with what the card was before; the refused ones are not.
        let events = try await store.securityEvents(SecurityEventQuery(cardID: "w1"))
        #expect(events.map(\.kind) == [.cardRegistered, .cardUpdated])
        #expect(events.map { $0.detail["before_issuer"] } == ["", "bridge"])
        #expect(events.allSatisfy { $0.actor == "acme" && $0.source == "10.1.2.3" && $0.detail["after_program"] == "x" })
        // Moving between one's own programs drops the vault entry sealed for the old one.
        try await store.putVaultEntry("w1", sealed: Data([1]))
        #expect(try await store.putCard(card("w1", program: "acme_2"), owners: ["acme", "acme_2"], event: change("acme", "w1")) == .updated)
        #expect(try await store.vaultEntry("w1") == nil)
        // An admin (no owners) may change any card; a deletion takes the vault entry and is recorded.
        #expect(try await put(card("w1", program: "evil", ref: "evil_w1"), nil) == .updated)
        try await store.putVaultEntry("w1", sealed: Data([2]))
        #expect(try await store.deleteCard("w1", owners: ["evil"], event: change("evil", "w1"))?.program == "evil")
        #expect(try await store.card("w1") == nil)
        #expect(try await store.vaultEntry("w1") == nil)
        let deleted = try #require(try await store.securityEvents(SecurityEventQuery(kind: .cardDeleted, cardID: "w1")).first)
        #expect(deleted.detail["before_program"] == "evil" && deleted.actor == "evil")
        // Two tenants racing to create one id: one creates it, the other gets nothing.
        let results = try await withThrowingTaskGroup(of: (String, CardWrite).self) { group in
            for program in ["acme", "evil"] {
                group.addTask { (program, try await put(card("race", program: program, ref: "race_\(program)"), [ProgramID(program)])) }
            }
            return try await group.reduce(into: [String: CardWrite]()) { $0[$1.0] = $1.1 }
        }
        #expect(Set(results.values) == [.created, .notOwned])
        let winner = try #require(results.first { $0.value == .created }?.key)
        #expect(try await store.card("race")?.program.rawValue == winner)
        #expect(try await store.securityEvents(SecurityEventQuery(cardID: "race")).map(\.actor) == [winner])
    }

    static func anIssuerReferenceBelongsToOneCard(_ store: any GatewayStore) async throws {
        try await store.migrate()
        try await store.putCard(card("owner", program: "acme", ref: "shared"))
        // Another card (another tenant's) naming the same issuer account card is refused, and nothing is written.
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await store.putCard(card("thief", program: "evil", ref: "shared")) }
        #expect(try await store.card("thief") == nil)
        // So is moving an existing card onto it, and an import holding it (all or nothing).
        try await store.putCard(card("other", program: "evil"))
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await store.putCard(card("other", program: "evil", ref: "shared")) }
        #expect(try await store.card("other") == card("other", program: "evil"))
        await #expect(throws: CardRegistryError.issuerReferenceInUse) {
            try await store.importCards([card("fresh", program: "evil"), card("thief2", program: "evil", ref: "shared")])
        }
        #expect(try await store.card("fresh") == nil)
        // The same reference under another issuer name is another account's card; the owner may re-put its own.
        try await store.putCard(card("elsewhere", program: "evil", issuer: "bridge_eu", ref: "shared"))
        #expect(try await store.putCard(card("owner", program: "acme", ref: "shared")) == false)
        // Once the owner is gone the reference is free again.
        try await store.deleteCard("owner")
        try await store.putCard(card("successor", program: "acme", ref: "shared"))
        // Cards without a reference (local cards) do not collide with each other.
        let local = { (id: CardID) in CardRecord(id: id, program: "acme", issuer: "local", issuerReference: IssuerReference([:])) }
        try await store.importCards([local("l1"), local("l2")])
    }

    /// At an issuer account several tenants share, a reference is a card at the issuer that one
    /// program holds: once its card is deleted, or points elsewhere, another tenant cannot register
    /// it (schema 006). Its own program's clients can, and so can an admin or the CLI, and then it
    /// is a card's again, guarded by the unique index.
    static func aReferenceACardLetGoOfStaysItsPrograms(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let put = { @Sendable (card: CardRecord, owners: Set<ProgramID>?) in
            try await store.putCard(card, owners: owners, event: change(owners?.first?.rawValue ?? "admin", card.id))
        }
        #expect(try await put(card("a1", program: "acme", ref: "r1"), ["acme"]) == .created)
        #expect(try await store.deleteCard("a1", owners: ["acme"], event: change("acme", "a1")) != nil)
        // Another tenant, under a new id of its own: refused, nothing written or recorded.
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e1", program: "evil", ref: "r1"), ["evil"]) }
        #expect(try await store.card("e1") == nil)
        #expect(try await store.securityEvents(SecurityEventQuery(cardID: "e1")).isEmpty)
        // ...nor onto a card it has, which stays as it was.
        #expect(try await put(card("e2", program: "evil", ref: "e2"), ["evil"]) == .created)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e2", program: "evil", ref: "r1"), ["evil"]) }
        #expect(try await store.card("e2") == card("e2", program: "evil", ref: "e2"))
        // The same fields at another issuer account are another card.
        #expect(try await put(card("e3", program: "evil", issuer: "bridge_eu", ref: "r1"), ["evil"]) == .created)
        // A client holding the program (among others) takes it back, and then it is a card's again.
        #expect(try await put(card("a2", program: "acme_2", ref: "r1"), ["acme_2", "acme"]) == .created)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e4", program: "evil", ref: "r1"), ["evil"]) }

        // A card that now names another reference lets go of the old one, which stays its program's.
        #expect(try await put(card("a2", program: "acme_2", ref: "r2"), ["acme_2"]) == .updated)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e4", program: "evil", ref: "r1"), ["evil"]) }
        #expect(try await put(card("a3", program: "acme_2", ref: "r1"), ["acme_2"]) == .created)
        // So does one moved to another issuer account.
        #expect(try await put(card("a3", program: "acme_2", issuer: "tmp", ref: "r1"), ["acme_2"]) == .updated)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e4", program: "evil", ref: "r1"), ["evil"]) }

        // An admin may give it to another program, and the CLI may import it: both take it over.
        #expect(try await put(card("e4", program: "evil", ref: "r1"), nil) == .created)
        #expect(try await store.deleteCard("e4", owners: nil, event: change("admin", "e4")) != nil)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("a4", program: "acme", ref: "r1"), ["acme"]) }
        #expect(try await put(card("e5", program: "evil", ref: "r1"), ["evil"]) == .created)
        #expect(try await store.deleteCard("e5", owners: ["evil"], event: change("evil", "e5")) != nil)
        try await store.importCards([card("a5", program: "acme", ref: "r1")], event: nil)
        #expect(try await store.card("a5")?.program == "acme")
        #expect(try await store.deleteCard("a5", owners: ["acme"], event: change("acme", "a5")) != nil)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e6", program: "evil", ref: "r1"), ["evil"]) }
        // Local cards name no reference: deleting one holds nothing back.
        let local = { (id: CardID, program: ProgramID) in CardRecord(id: id, program: program, issuer: "local", issuerReference: IssuerReference([:])) }
        #expect(try await put(local("l1", "acme"), ["acme"]) == .created)
        #expect(try await store.deleteCard("l1", owners: ["acme"], event: change("acme", "l1")) != nil)
        #expect(try await put(local("l2", "evil"), ["evil"]) == .created)
    }

    /// An issuer may read its ids without regard to case (a UUID, say): `CA_1` would then be
    /// another tenant's `ca_1`. Held or let go of, a reference is compared folded (schema 009).
    static func aReferenceIsOneCardsWhateverItsLetterCase(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let put = { @Sendable (card: CardRecord, owners: Set<ProgramID>?) in
            try await store.putCard(card, owners: owners, event: change(owners?.first?.rawValue ?? "admin", card.id))
        }
        #expect(try await put(card("a1", program: "acme", ref: "abc_1"), ["acme"]) == .created)
        // Another tenant's card under the same fields in other letter cases: refused, nothing written.
        for variant in ["ABC_1", "Abc_1"] {
            await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e1", program: "evil", ref: variant), ["evil"]) }
        }
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await store.importCards([card("e2", program: "evil", ref: "ABC_1")]) }
        #expect(try await store.card("e1") == nil)
        #expect(try await store.card("e2") == nil)
        #expect(try await store.securityEvents(SecurityEventQuery(cardID: "e1")).isEmpty)
        // The owner may change only the case of its own card's reference: it still holds it, and
        // lets nothing go that another tenant could then take.
        #expect(try await put(card("a1", program: "acme", ref: "ABC_1"), ["acme"]) == .updated)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e1", program: "evil", ref: "abc_1"), ["evil"]) }
        // Let go of (the card deleted), it stays acme's in every case...
        #expect(try await store.deleteCard("a1", owners: ["acme"], event: change("acme", "a1")) != nil)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e1", program: "evil", ref: "abc_1"), ["evil"]) }
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e1", program: "evil", ref: "aBc_1"), ["evil"]) }
        #expect(try await store.card("e1") == nil)
        // ...and acme takes it back in another case, which makes it a card's again.
        #expect(try await put(card("a2", program: "acme", ref: "aBC_1"), ["acme"]) == .created)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("e1", program: "evil", ref: "abc_1"), ["evil"]) }
        // Other fields are other cards.
        #expect(try await put(card("e3", program: "evil", ref: "abc_2"), ["evil"]) == .created)
    }

    /// A database kept before schema 009 may hold two cards whose references differ only in case:
    /// the migration is refused, saying how many and what to do, naming no reference, and changes
    /// nothing; once ops resolve it (deleting one card), it applies, and the card left keeps working
    /// for its own tenant. Released references it finds in several cases keep only the latest.
    static func theCaseFoldingMigrationRefusesHeldVariants(
        _ store: any GatewayStore, sql: RawSQL, forget009: String, dialect: StoreRows.Dialect
    ) async throws {
        try await store.migrate()
        try await sql(forget009)
        let put = { @Sendable (card: CardRecord, owners: Set<ProgramID>?) in
            try await store.putCard(card, owners: owners, event: change(owners?.first?.rawValue ?? "admin", card.id))
        }
        try await store.putCard(card("v1", program: "acme", ref: "variant_q"))
        try await store.putCard(card("v2", program: "evil", ref: "VARIANT_Q"))
        // Two tenants let go of one reference in two cases; evil's the later.
        try await store.putCard(card("r1", program: "acme", ref: "rel_x"))
        try await store.putCard(card("r2", program: "evil", ref: "REL_X"))
        try await store.deleteCard("r1")
        try await store.deleteCard("r2")
        let acmeReleased = StoreRows.referenceJSON(card("r1", ref: "rel_x").issuerReference)
        try await sql("UPDATE released_issuer_references SET released_at = 1 WHERE issuer_reference = '\(acmeReleased)'")
        do {
            try await store.migrate()
            Issue.record("schema 009 applied over two cards holding one reference")
        } catch let error as StoreError {
            let text = "\(error)"
            #expect(text.contains("009_reference_case_folded") && text.contains("1 issuer reference"), "\(text)")
            #expect(!text.lowercased().contains("variant_q") && !text.contains("v1") && !text.contains("v2"), "\(text)")
            #expect(text.contains(StoreRows.caseVariantCards(dialect)), "the query that finds them")
        }
        // The query it gives ops runs on this store's dialect.
        try await sql(StoreRows.caseVariantCards(dialect))
        #expect(!(try await store.schemaVersions()).contains("009_reference_case_folded"))
        #expect(try await store.card("v1") != nil)
        #expect(try await store.card("v2") != nil)
        // Ops delete evil's card (which lets VARIANT_Q go, as evil's), and the migration applies.
        try await store.deleteCard("v2")
        try await store.migrate()
        #expect(try await store.schemaVersions() == versions)
        // The card left is acme's to change: the released copy of its own reference was dropped.
        #expect(try await put(card("v1", program: "acme", ref: "variant_q"), ["acme"]) == .updated)
        #expect(try await put(card("v1", program: "acme", ref: "Variant_Q"), ["acme"]) == .updated)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("v3", program: "evil", ref: "VARIANT_Q"), ["evil"]) }
        // And once acme lets its card go, the reference is acme's alone to register again (evil's
        // released copy went with the migration, not only out of the card's way).
        #expect(try await store.deleteCard("v1", owners: ["acme"], event: change("acme", "v1")) != nil)
        #expect(try await put(card("v5", program: "acme", ref: "VARIANT_q"), ["acme"]) == .created)
        // Of rel_x's two released copies the later, evil's, is kept.
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(card("r3", program: "acme", ref: "Rel_X"), ["acme"]) }
        #expect(try await put(card("r4", program: "evil", ref: "rel_X"), ["evil"]) == .created)
    }

    /// A Bridge card account is one card whatever customer id comes with it (schema 014): a tenant
    /// naming another tenant's card account under its own customer id is refused, held or let go
    /// of, in any letter case; the owner may change the customer id and still holds it.
    static func aCardIsNamedByItsNamingFieldAlone(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let put = { @Sendable (card: CardRecord, owners: Set<ProgramID>?) in
            try await store.putCard(card, owners: owners, event: change(owners?.first?.rawValue ?? "admin", card.id))
        }
        #expect(try await put(bridge("a1", program: "acme", customer: "cust_acme", account: "ca_1"), ["acme"]) == .created)
        for account in ["ca_1", "CA_1"] {
            await #expect(throws: CardRegistryError.issuerReferenceInUse) {
                try await put(bridge("e1", program: "evil", customer: "cust_evil", account: account), ["evil"])
            }
        }
        await #expect(throws: CardRegistryError.issuerReferenceInUse) {
            try await store.importCards([bridge("e2", program: "evil", customer: "cust_evil", account: "ca_1")])
        }
        #expect(try await store.card("e1") == nil)
        #expect(try await store.card("e2") == nil)
        #expect(try await store.securityEvents(SecurityEventQuery(cardID: "e1")).isEmpty)
        // The customer id alone names nothing: evil's own card under acme's customer id is its own.
        #expect(try await put(bridge("e3", program: "evil", customer: "cust_acme", account: "ca_evil"), ["evil"]) == .created)
        // Another issuer account's ca_1 is another card.
        #expect(try await put(bridge("e4", program: "evil", issuer: "bridge_eu", customer: "cust_evil", account: "ca_1"), ["evil"]) == .created)
        // The owner changes the customer id: it still holds the card account.
        #expect(try await put(bridge("a1", program: "acme", customer: "cust_acme_2", account: "ca_1"), ["acme"]) == .updated)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) {
            try await put(bridge("e1", program: "evil", customer: "cust_evil", account: "ca_1"), ["evil"])
        }
        // Let go of, the card account stays acme's under any customer id.
        #expect(try await store.deleteCard("a1", owners: ["acme"], event: change("acme", "a1")) != nil)
        for customer in ["cust_evil", "cust_acme", "cust_acme_2"] {
            await #expect(throws: CardRegistryError.issuerReferenceInUse) {
                try await put(bridge("e1", program: "evil", customer: customer, account: "Ca_1"), ["evil"])
            }
        }
        #expect(try await store.card("e1") == nil)
        // acme takes it back under a customer id it never used, and then it is a card's again.
        #expect(try await put(bridge("a2", program: "acme", customer: "cust_acme_3", account: "ca_1"), ["acme"]) == .created)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) {
            try await put(bridge("e1", program: "evil", customer: "cust_evil", account: "ca_1"), ["evil"])
        }
        // A customer id changed lets nothing go: the card, moved to another program by an admin,
        // is that program's to change, and once deleted, that program's alone (the review: the
        // change had left a released row of the first program standing against the second).
        #expect(try await put(bridge("m1", program: "acme", customer: "cust_m", account: "ca_2"), ["acme"]) == .created)
        #expect(try await put(bridge("m1", program: "acme", customer: "cust_m2", account: "ca_2"), ["acme"]) == .updated)
        #expect(try await put(bridge("m1", program: "beta", customer: "cust_m2", account: "ca_2"), nil) == .updated)
        #expect(try await put(bridge("m1", program: "beta", customer: "cust_m3", account: "ca_2"), ["beta"]) == .updated)
        #expect(try await store.deleteCard("m1", owners: ["beta"], event: change("beta", "m1")) != nil)
        #expect(try await put(bridge("m2", program: "beta", customer: "cust_m4", account: "ca_2"), ["beta"]) == .created)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) {
            try await put(bridge("m3", program: "acme", customer: "cust_m", account: "ca_2"), ["acme"])
        }
        // A kind whose reference is its naming field alone keeps the same rule.
        let tmp = { (id: CardID, program: ProgramID, value: String) in
            CardRecord(id: id, program: program, issuer: "tmp", issuerReference: IssuerReference(["issuer_card_id": value]))
        }
        #expect(try await put(tmp("t1", "acme", "ic_1"), ["acme"]) == .created)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) { try await put(tmp("t2", "evil", "IC_1"), ["evil"]) }
    }

    /// A database kept before schema 014 may hold two cards naming one card account under two
    /// customer ids: the migration is refused, saying how many and what to do, naming no card, and
    /// changes nothing; once ops resolve it (deleting one), it applies. Released references of two
    /// programs naming one card, or naming another program's card, are all kept: the card keeps
    /// its holder, and once let go neither tenant may register it, an admin may.
    static func theCardKeyMigrationRefusesSharedCards(
        _ store: any GatewayStore, sql: RawSQL, forget014: String, dialect: StoreRows.Dialect
    ) async throws {
        try await store.migrate()
        try await sql(forget014)
        let put = { @Sendable (card: CardRecord, owners: Set<ProgramID>?) in
            try await store.putCard(card, owners: owners, event: change(owners?.first?.rawValue ?? "admin", card.id))
        }
        try await store.putCard(bridge("ck_s1", program: "acme", customer: "cust_a", account: "ca_shared"))
        try await store.putCard(bridge("ck_s2", program: "evil", customer: "cust_b", account: "CA_SHARED"))
        try await store.putCard(bridge("ck_k1", program: "evil", customer: "cust_b", account: "ca_held"))
        try await store.putCard(bridge("ck_m1", program: "acme", customer: "cust_a", account: "ca_mine"))
        func released(_ card: CardRecord, at: Int) -> String {
            "INSERT INTO released_issuer_references (issuer, issuer_reference, program, released_at) VALUES "
                + "('bridge', '\(StoreRows.referenceJSON(card.issuerReference))', '\(card.program)', \(at))"
        }
        // ca_held let go of by acme, then registered by evil under its own customer id (ck_k1);
        // ca_rel let go of by acme, then by evil; ca_mine let go of by acme, whose ck_m1 holds it.
        try await sql(released(bridge("ck_r0", program: "acme", customer: "cust_a", account: "ca_held"), at: 1))
        try await sql(released(bridge("ck_r1", program: "acme", customer: "cust_a", account: "ca_rel"), at: 1))
        try await sql(released(bridge("ck_r2", program: "evil", customer: "cust_b", account: "ca_rel"), at: 2))
        try await sql(released(bridge("ck_r3", program: "acme", customer: "cust_old", account: "ca_mine"), at: 1))
        do {
            try await store.migrate()
            Issue.record("schema 014 applied over two cards naming one card account")
        } catch let error as StoreError {
            let text = "\(error)"
            #expect(text.contains("014_issuer_card_key") && text.contains(": 1 card(s)"), "\(text)")
            #expect(!text.lowercased().contains("ca_shared") && !text.contains("ck_s1") && !text.contains("ck_s2"), "\(text)")
            #expect(text.contains(StoreRows.sharedCardKeyCards(dialect)), "the query that finds them")
        }
        try await sql(StoreRows.sharedCardKeyCards(dialect))
        #expect(!(try await store.schemaVersions()).contains("014_issuer_card_key"))
        #expect(try await store.card("ck_s1") != nil)
        #expect(try await store.card("ck_s2") != nil)
        // Ops delete evil's card, and the migration applies.
        try await store.deleteCard("ck_s2")
        try await store.migrate()
        #expect(try await store.schemaVersions() == versions)
        await #expect(throws: CardRegistryError.issuerReferenceInUse) {
            try await put(bridge("ck_s3", program: "evil", customer: "cust_b", account: "ca_shared"), ["evil"])
        }
        // ca_rel was let go of by both programs: neither may take it.
        for (account, program) in [("ca_rel", "acme"), ("Ca_Rel", "evil")] {
            await #expect(throws: CardRegistryError.issuerReferenceInUse) {
                try await put(bridge("ck_t_\(program)", program: ProgramID(program).rawValue, customer: "cust_new", account: account),
                              [ProgramID(program)])
            }
        }
        // ca_held stays evil's card, and once evil lets it go, neither may take it back.
        #expect(try await put(bridge("ck_k1", program: "evil", customer: "cust_b2", account: "ca_held"), ["evil"]) == .updated)
        #expect(try await store.deleteCard("ck_k1", owners: ["evil"], event: change("evil", "ck_k1")) != nil)
        for program in ["acme", "evil"] {
            await #expect(throws: CardRegistryError.issuerReferenceInUse) {
                try await put(bridge("ck_h_\(program)", program: program, customer: "cust_new", account: "ca_held"), [ProgramID(program)])
            }
        }
        // An admin may give them to a program.
        #expect(try await put(bridge("ck_r5", program: "evil", customer: "cust_c", account: "ca_rel"), nil) == .created)
        // A card account acme's card holds and acme had let go of before: once ck_m1 lets it go,
        // acme registers it again under another customer id.
        #expect(try await store.deleteCard("ck_m1", owners: ["acme"], event: change("acme", "ck_m1")) != nil)
        #expect(try await put(bridge("ck_m2", program: "acme", customer: "cust_z", account: "ca_mine"), ["acme"]) == .created)
    }

    static func bridge(_ id: String, program: String, issuer: String = "bridge", customer: String, account: String) -> CardRecord {
        CardRecord(id: CardID(id), program: ProgramID(program), issuer: IssuerID(issuer),
                   issuerReference: IssuerReference(["customer_id": customer, "card_account_id": account]))
    }

    static func vaultEntriesGoWithTheirCard(_ store: any GatewayStore) async throws {
        try await store.migrate()
        try await store.importCards([card("keep", program: "acme"), card("gone", program: "acme"), card("moves", program: "acme")])
        for id: CardID in ["keep", "gone", "moves"] { try await store.putVaultEntry(id, sealed: Data([1, 2, 3])) }
        #expect(try await store.vaultCardIDs(after: nil, limit: 10) == ["gone", "keep", "moves"])
        #expect(try await store.vaultCardIDs(after: "gone", limit: 1) == ["keep"])

        try await store.deleteCard("gone")
        #expect(try await store.vaultEntry("gone") == nil)
        // A card moved to another program loses the entry sealed for the old one; a write that keeps
        // the program, the issuer and the issuer's card (letter case aside) keeps it.
        try await store.putCard(card("moves", program: "evil"))
        #expect(try await store.vaultEntry("moves") == nil)
        try await store.putCard(card("keep", program: "acme"))
        try await store.putCard(card("keep", program: "acme", ref: "KEEP"))
        #expect(try await store.vaultEntry("keep") == Data([1, 2, 3]))
        #expect(try await store.vaultCardIDs(after: nil, limit: 10) == ["keep"])
        // A card that names another issuer, or another card at its issuer, loses it too (vault
        // audit: a card re-pointed at a paused issuer was encrypted locally from the old card's data).
        try await store.putVaultEntry("keep", sealed: Data([1, 2, 3]))
        try await store.putCard(card("keep", program: "acme", issuer: "tmp"))
        #expect(try await store.vaultEntry("keep") == nil, "a card moved to another issuer kept its data")
        try await store.importCards([card("again", program: "acme")])
        try await store.putVaultEntry("again", sealed: Data([1, 2, 3]))
        // The import says how many entries it removed, for the CLI to print.
        #expect(try await store.importCards([card("again", program: "acme", ref: "replacement"), card("other", program: "acme")], event: nil) == 1)
        #expect(try await store.vaultEntry("again") == nil, "a card that names another issuer's card kept its data")
        #expect(try await store.importCards([card("again", program: "acme", ref: "replacement")], event: nil) == 0)
        // A card id registered anew never takes over an entry left under it.
        try await store.putVaultEntry("fresh", sealed: Data([4]))
        try await store.putCard(card("fresh", program: "acme"))
        #expect(try await store.vaultEntry("fresh") == nil, "a new card took over an entry left under its id")
    }

    /// An entry is written for the card as it was read, in one transaction with the check: a
    /// card deleted or moved meanwhile gets none (vault audit: `vault put` racing a delete left an
    /// entry that a card registered later under the id took over).
    static func anEntryIsWrittenOnlyForTheCardAsRead(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let read = card("v", program: "acme")
        try await store.importCards([read])
        #expect(try await store.putVaultEntry(for: read, sealed: Data([1]), event: nil) == true)
        #expect(try await store.vaultEntry("v") == Data([1]))
        try await store.putCard(card("v", program: "evil"))
        #expect(try await store.putVaultEntry(for: read, sealed: Data([2]), event: nil) == false)
        #expect(try await store.vaultEntry("v") == nil)
        try await store.putCard(card("v", program: "acme", issuer: "tmp"))
        #expect(try await store.putVaultEntry(for: read, sealed: Data([3]), event: nil) == false, "written for a card at another issuer")
        // Another card at the same issuer (its reference changed after the read): refused too;
        // the same reference in other letter case is the same card.
        let atIssuer = card("w", program: "acme", ref: "ref_w")
        try await store.importCards([atIssuer])
        try await store.putCard(card("w", program: "acme", ref: "REF_W"))
        #expect(try await store.putVaultEntry(for: atIssuer, sealed: Data([6]), event: nil) == true)
        try await store.putCard(card("w", program: "acme", ref: "ref_other"))
        #expect(try await store.vaultEntry("w") == nil)
        #expect(try await store.putVaultEntry(for: atIssuer, sealed: Data([7]), event: nil) == false, "written for another card at its issuer")
        #expect(try await store.vaultEntry("w") == nil)
        try await store.deleteCard("v")
        #expect(try await store.putVaultEntry(for: read, sealed: Data([4]), event: nil) == false, "written for a deleted card")
        #expect(try await store.vaultEntry("v") == nil)
        #expect(try await store.putVaultEntry(for: card("never", program: "acme"), sealed: Data([5]), event: nil) == false)
    }

    /// A re-seal replaces an entry only over the bytes it read: one changed meanwhile (a new number
    /// put) or deleted with its card stays as that change left it; an orphan is deleted only while
    /// no card has its id.
    static func aReSealNeverUndoesAChangeMadeMeanwhile(_ store: any GatewayStore) async throws {
        try await store.migrate()
        try await store.importCards([card("v", program: "acme"), card("gone", program: "acme")])
        let read = Data([1, 1, 1]), newNumber = Data([2, 2, 2]), resealed = Data([3, 3, 3])
        try await store.putVaultEntry("v", sealed: read)
        try await store.putVaultEntry("v", sealed: newNumber)
        #expect(try await store.replaceVaultEntry("v", expected: read, with: resealed) == false)
        #expect(try await store.vaultEntry("v") == newNumber, "the re-seal undid a number put meanwhile")
        #expect(try await store.replaceVaultEntry("v", expected: newNumber, with: resealed) == true)
        #expect(try await store.vaultEntry("v") == resealed)

        try await store.putVaultEntry("gone", sealed: read)
        try await store.deleteCard("gone")
        #expect(try await store.replaceVaultEntry("gone", expected: read, with: resealed) == false)
        #expect(try await store.vaultEntry("gone") == nil, "the re-seal brought back a deleted card's number")

        #expect(try await store.deleteOrphanVaultEntry("v") == false, "an entry whose card exists is no orphan")
        #expect(try await store.vaultEntry("v") == resealed)
        try await store.putVaultEntry("orphan", sealed: read)
        #expect(try await store.deleteOrphanVaultEntry("orphan") == true)
        #expect(try await store.vaultEntry("orphan") == nil)
    }

    static func securityEventsRoundTripAndFilter(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let failed = SecurityEvent(at: instant(1), kind: .authFailed, actor: "anonymous", source: "127.0.0.1", detail: ["reason": "unknown API key"])
        let registered = SecurityEvent(at: instant(2), kind: .cardRegistered, actor: "acme", source: "10.0.0.7", cardID: "c1",
                                       detail: ["after_issuer": "bridge", "after_program": "acme"])
        let deleted = SecurityEvent(at: instant(3), kind: .cardDeleted, actor: "cli:ops", cardID: "c1", detail: [:])
        for event in [failed, registered, deleted] { try await store.appendSecurityEvent(event) }

        let all = try await store.securityEvents(SecurityEventQuery())
        #expect(all.count == 3)
        #expect(all.map(\.kind) == [.authFailed, .cardRegistered, .cardDeleted])
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.id < $1.id })
        var stored = all[1]
        stored.id = 0
        #expect(stored == registered)
        #expect(try await store.securityEvents(SecurityEventQuery(kind: .authFailed)).map(\.source) == ["127.0.0.1"])
        #expect(try await store.securityEvents(SecurityEventQuery(cardID: "c1")).map(\.kind) == [.cardRegistered, .cardDeleted])
        #expect(try await store.securityEvents(SecurityEventQuery(actor: "cli:ops")).count == 1)
        #expect(try await store.securityEvents(SecurityEventQuery(after: all[0].id, limit: 1)).map(\.kind) == [.cardRegistered])
    }

    /// `store archive`'s reads and delete: pages of audit events in id order, with their ids;
    /// the delete takes only the ids given whose events are older than its time, writes its
    /// `events_archived` event with them, and ids are never reused after it.
    static func eventsBeforeATimeAreArchived(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let old1 = success("prv_old1", at: instant(1)), old2 = success("prv_old2", at: instant(2)), recent = success("prv_new", at: instant(100))
        for event in [old1, recent, old2] { try await store.appendAudit(event) }
        let oldFailure = SecurityEvent(at: instant(3), kind: .authFailed, actor: "anonymous", source: "10.0.0.1", detail: ["reason": "missing_key"])
        let newFailure = SecurityEvent(at: instant(101), kind: .authFailed, actor: "anonymous", source: "10.0.0.2", detail: [:])
        for event in [oldFailure, newFailure] { try await store.appendSecurityEvent(event) }

        let cutoff = instant(50)
        let milliseconds = { (date: Date) in Int64((date.timeIntervalSince1970 * 1000).rounded()) }
        let first = try await store.archivedRows(.audit, after: 0, limit: 1)
        #expect(first.map(\.columns["provisioning_id"]) == [.text("prv_old1")])
        #expect(first.first?.at == milliseconds(instant(1)))
        // Every column as it is held: a row the archive writes loses nothing.
        let columns = try #require(first.first?.columns)
        #expect(columns["outcome"] == .text("succeeded") && columns["upstream_status"] == .integer(200) && columns["error_code"] == .null)
        #expect(columns["latency_ms"] == .integer(3) && columns["attempt"] == .integer(1) && columns["wallet"] == .text("apple_pay"))
        #expect(Set(columns.keys).isSuperset(of: ["client_id", "card_id", "issuer", "endpoint", "device_type", "token_id", "program"]))
        #expect(columns["id"] == nil && columns["at"] == nil, "the id and time are the row's own fields, not repeated")
        let rest = try await store.archivedRows(.audit, after: try #require(first.first).id, limit: 10)
        #expect(rest.map(\.columns["provisioning_id"]) == [.text("prv_new"), .text("prv_old2")], "in id order, each with its id")
        #expect(try await store.archivedRows(.audit, after: try #require(rest.last).id, limit: 10).isEmpty)
        let securityRows = try await store.archivedRows(.security, after: 0, limit: 10)
        #expect(securityRows.map(\.columns["source"]) == [.text("10.0.0.1"), .text("10.0.0.2")])
        #expect(securityRows.first?.columns["detail"] == .text(#"{"reason":"missing_key"}"#))
        let second = Array(rest.suffix(1))
        let security = try await store.securityEvents(SecurityEventQuery()).filter { $0.at < cutoff }
        #expect(security.map(\.source) == ["10.0.0.1"])

        // Events older than the cutoff that the archive never read (written after its pages,
        // with a clock behind) are not among the ids given: they stay, whatever their time.
        let unread = success("prv_unread", at: instant(4))
        try await store.appendAudit(unread)
        try await store.appendSecurityEvent(SecurityEvent(at: instant(5), kind: .authFailed, actor: "anonymous", source: "10.0.0.3", detail: [:]))

        // The recent event's id given too: it is left, being newer than the cutoff.
        let recentID = rest[0].id
        let record = { @Sendable (deleted: ArchivedEventCounts) in
            SecurityEvent(at: instant(102), kind: .eventsArchived, actor: "cli:ops",
                          detail: ["file": "a.jsonl", "deleted": "\(deleted.audit)+\(deleted.security)"])
        }
        let counts = try await store.deleteArchivedEvents(audit: first.map(\.id) + second.map(\.id) + [recentID],
                                                          security: security.map(\.id), recordedBefore: cutoff, record: record)
        #expect(counts == ArchivedEventCounts(audit: 2, security: 1))
        #expect(try await store.auditEvents("prv_old1").isEmpty)
        #expect(try await store.auditEvents("prv_old2").isEmpty)
        #expect(try await store.auditEvents("prv_new") == [recent])
        #expect(try await store.auditEvents("prv_unread") == [unread])
        let left = try await store.securityEvents(SecurityEventQuery())
        #expect(left.map(\.kind) == [.authFailed, .authFailed, .eventsArchived] && left.map(\.source).prefix(2) == ["10.0.0.2", "10.0.0.3"])
        // The record says what its transaction deleted.
        #expect(left.last?.detail == ["file": "a.jsonl", "deleted": "2+1"])
        #expect(try await store.archivedRows(.audit, after: 0, limit: 10).map(\.columns["provisioning_id"]) == [.text("prv_new"), .text("prv_unread")])

        // Ids only grow: an event written after the archive never takes an archived one's id,
        // which a reader paging by `after` would miss.
        try await store.appendAudit(success("prv_after", at: instant(103)))
        let ids = try await store.archivedRows(.audit, after: 0, limit: 10).map(\.id)
        #expect(ids.count == 3 && ids.last! > second[0].id && ids.last! > recentID)
        try await store.appendSecurityEvent(newFailure)
        #expect(try await store.securityEvents(SecurityEventQuery()).map(\.id).allSatisfy { $0 > security[0].id })
    }

    /// An archive page whose `events_archived` record cannot be written deletes nothing: the
    /// deletion and its record are one transaction. `refuseRecord` makes inserting that event
    /// fail (a trigger), `allowRecord` undoes it.
    static func anArchiveDeletionWithoutItsRecordDeletesNothing(
        _ store: any GatewayStore, sql: RawSQL, refuseRecord: String, allowRecord: String
    ) async throws {
        try await store.migrate()
        try await store.appendAudit(success("prv_kept", at: instant(1)))
        try await store.appendSecurityEvent(SecurityEvent(at: instant(2), kind: .authFailed, actor: "anonymous", source: "10.0.0.9"))
        let audit = try await store.archivedRows(.audit, after: 0, limit: 10).map(\.id)
        let security = try await store.securityEvents(SecurityEventQuery()).map(\.id)
        let record = { @Sendable (_: ArchivedEventCounts) in SecurityEvent(at: instant(3), kind: .eventsArchived, actor: "cli:ops") }
        try await sql(refuseRecord)
        await #expect(throws: (any Error).self) {
            try await store.deleteArchivedEvents(audit: audit, security: security, recordedBefore: instant(50), record: record)
        }
        #expect(try await store.auditEvents("prv_kept").count == 1)
        #expect(try await store.securityEvents(SecurityEventQuery()).map(\.kind) == [.authFailed])
        try await sql(allowRecord)
        #expect(try await store.deleteArchivedEvents(audit: audit, security: security, recordedBefore: instant(50), record: record)
            == ArchivedEventCounts(audit: 1, security: 1))
        #expect(try await store.securityEvents(SecurityEventQuery()).map(\.kind) == [.eventsArchived])
    }

    /// A Bridge-shaped card whose reference is its own unless `ref` says otherwise.
    static func card(_ id: String, program: String = "p1", issuer: String? = "bridge", ref: String? = nil) -> CardRecord {
        let ref = ref ?? id
        return CardRecord(id: CardID(id), program: ProgramID(program), issuer: issuer.map { IssuerID($0) },
                          issuerReference: IssuerReference(["customer_id": "cust_\(ref)", "card_account_id": "ca_\(ref)"]))
    }

    /// Whole milliseconds: both stores keep time to the millisecond.
    static func instant(_ seconds: Double) -> Date { Date(timeIntervalSince1970: (1_800_000_000 + seconds).rounded()) }

    static func migrationsRunFromEmptyAndAgain(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let versions = try await store.schemaVersions()
        #expect(versions == Self.versions)
        try await store.migrate()
        #expect(try await store.schemaVersions() == versions)
        #expect(try await store.card("nothing") == nil)
        // A sound store checks clean (`store check`).
        #expect(try await store.check() == [])
    }

    static func registryCRUD(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let original = card("c1", ref: "a")
        #expect(try await store.putCard(original) == true)
        #expect(try await store.card("c1") == original)

        let moved = CardRecord(id: "c1", program: "p1", issuer: "tmp", issuerReference: IssuerReference(["issuer_card_id": "t1"]))
        #expect(try await store.putCard(moved) == false)
        #expect(try await store.card("c1") == moved)

        let unrouted = card("c2", issuer: nil)
        try await store.putCard(unrouted)
        #expect(try await store.card("c2")?.issuer == nil)

        #expect(try await store.deleteCard("c1") == true)
        #expect(try await store.deleteCard("c1") == false)
        #expect(try await store.card("c1") == nil)
    }

    static func paging(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let cards = (0..<7).map { card(String(format: "card_%02d", $0), program: $0 % 2 == 0 ? "p1" : "p2", issuer: $0 < 5 ? "bridge" : "tmp") }
        try await store.importCards(cards.shuffled())

        var seen: [CardID] = []
        var after: CardID?
        repeat {
            let page = try await store.cards(CardPageQuery(after: after, limit: 3))
            #expect(page.count <= 3)
            seen += page.map(\.id)
            after = page.count == 3 ? page.last?.id : nil
        } while after != nil
        #expect(seen == cards.map(\.id))

        let p1 = try await store.cards(CardPageQuery(programs: ["p1"], limit: 10))
        #expect(p1.map(\.id) == ["card_00", "card_02", "card_04", "card_06"])
        let both = try await store.cards(CardPageQuery(programs: ["p1", "p2"], limit: 100))
        #expect(both.count == 7)
        let tmp = try await store.cards(CardPageQuery(programs: ["p1"], issuer: "tmp", limit: 10))
        #expect(tmp.map(\.id) == ["card_06"])
        let afterFour = try await store.cards(CardPageQuery(programs: ["p1"], after: "card_04", limit: 10))
        #expect(afterFour.map(\.id) == ["card_06"])
        // No programs is no cards, never every card.
        #expect(try await store.cards(CardPageQuery(programs: [], limit: 10)).isEmpty)
    }

    static func importIsIdempotent(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let cards = [card("i1"), card("i2", program: "p2")]
        try await store.importCards(cards)
        try await store.importCards(cards)
        #expect(try await store.cards(CardPageQuery(limit: 10)) == cards)

        // An import that moves a card to another program (or issuer) puts that card's move on the
        // trail, before and after, under the import's actor; the cards it leaves where they were
        // get no event of their own (the trail had said only how many cards the file held).
        let batch = SecurityEvent(at: instant(30), kind: .cardsImported, actor: "cli:ops", detail: ["count": "2", "file": "moves.csv"])
        try await store.importCards([card("i1", program: "p2"), card("i2", program: "p2")], event: batch)
        let events = try await store.securityEvents(SecurityEventQuery())
        #expect(events.map(\.kind) == [.cardUpdated, .cardsImported], "\(events)")
        let moved = try #require(events.first)
        #expect(moved.cardID == "i1" && moved.actor == "cli:ops")
        #expect(moved.detail["before_program"] == "p1" && moved.detail["after_program"] == "p2", "\(moved.detail)")
    }

    static func vaultEntriesRoundTrip(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let sealed = Data((0..<80).map { UInt8($0) })
        try await store.putVaultEntry("v1", sealed: sealed)
        #expect(try await store.vaultEntry("v1") == sealed)
        try await store.putVaultEntry("v1", sealed: Data([9, 9]))
        #expect(try await store.vaultEntry("v1") == Data([9, 9]))
        #expect(try await store.vaultEntry("v2") == nil)
        #expect(try await store.deleteVaultEntry("v1") == true)
        #expect(try await store.deleteVaultEntry("v1") == false)
        #expect(try await store.vaultEntry("v1") == nil)
    }

    static func auditRoundTrips(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let first = AuditEvent(
            provisioningID: "prv_1", at: instant(1), client: ClientID("acme"), cardID: "c1", operation: .applePay, deviceType: .watch, issuer: "bridge",
            endpoint: "https://api.bridge.xyz/v0", attempt: 1, outcome: .failed, errorCode: .upstreamUnavailable, upstreamStatus: 503,
            latencyMS: 120)
        var second = first
        second.at = instant(2)
        second.attempt = 2
        // The card's program, as the request found it (schema 011); the first event has none.
        second.program = "acme-debit"
        second.outcome = .succeeded
        second.errorCode = nil
        second.upstreamStatus = 200
        var unrelated = first
        unrelated.provisioningID = "prv_2"
        unrelated.operation = .tokenActivation
        unrelated.deviceType = nil
        unrelated.tokenID = "DWSPMC000000000132d72d4fcb2f4136"
        let replay = AuditEvent(
            provisioningID: "prv_1", at: instant(3), client: ClientID("acme"), cardID: "c1", operation: .applePay, issuer: nil,
            endpoint: nil, attempt: 0, outcome: .replayed, errorCode: nil, upstreamStatus: nil, latencyMS: 0)
        for event in [first, unrelated, second, replay] { try await store.appendAudit(event) }
        #expect(try await store.auditEvents("prv_1") == [first, second, replay])
        #expect(try await store.auditEvents("prv_2") == [unrelated])
        #expect(try await store.auditEvents("prv_none").isEmpty)
    }

    static func idempotencyReplaysAndRefusesReuse(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let now = instant(0), expires = instant(3600), abandon = instant(60)
        let claim = { (key: String, hash: String, client: String) in
            try await store.claimIdempotencyKey(client: ClientID(client), key: key, requestHash: hash, now: now, expiresAt: expires,
                                                abandonAt: abandon)
        }
        #expect(try await claim("k1", "h1", "acme") == .acquired)
        #expect(try await claim("k1", "h1", "acme") == .inProgress)
        #expect(try await claim("k1", "h2", "acme").isMismatch)
        // Keys belong to a client: another client's same key is another key.
        #expect(try await claim("k1", "h9", "globex") == .acquired)

        let answer = StoredResponse(status: 200, body: Data(#"{"provisioning_id":"prv_1"}"#.utf8))
        try await store.completeIdempotencyKey(client: "acme", key: "k1", claimedAt: now, response: answer)
        #expect(try await claim("k1", "h1", "acme") == .replay(answer))
        #expect(try await claim("k1", "h2", "acme").isMismatch)
        // A completed answer is never released.
        try await store.releaseIdempotencyKey(client: "acme", key: "k1", claimedAt: now)
        #expect(try await claim("k1", "h1", "acme") == .replay(answer))

        // An answer kept with its audit events: both are there.
        #expect(try await claim("k3", "h1", "acme") == .acquired)
        let success = AuditEvent(provisioningID: "prv_k3", at: instant(0), client: "acme", cardID: "card_k3", operation: .applePay,
                                 issuer: "bridge", endpoint: "https://bridge.example/v0", attempt: 1, outcome: .succeeded, errorCode: nil,
                                 upstreamStatus: 200, latencyMS: 12)
        try await store.completeIdempotencyKey(client: "acme", key: "k3", claimedAt: now, response: answer, audit: [success])
        #expect(try await claim("k3", "h1", "acme") == .replay(answer))
        #expect(try await store.auditEvents("prv_k3") == [success])

        // A released claim (the request failed, worth retrying) can be claimed again.
        #expect(try await claim("k2", "h1", "acme") == .acquired)
        try await store.releaseIdempotencyKey(client: "acme", key: "k2", claimedAt: now)
        #expect(try await claim("k2", "h1", "acme") == .acquired)
    }

    static func idempotencyExpires(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let answer = StoredResponse(status: 200, body: Data("{}".utf8))
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h1", now: instant(0), expiresAt: instant(10),
                                                    abandonAt: instant(60)) == .acquired)
        try await store.completeIdempotencyKey(client: "acme", key: "k", claimedAt: instant(0), response: answer)
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h1", now: instant(9), expiresAt: instant(19),
                                                    abandonAt: instant(69)) == .replay(answer))
        // Past its expiry the key is free again, even for another body.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h2", now: instant(11), expiresAt: instant(21),
                                                    abandonAt: instant(71)) == .acquired)

        _ = try await store.claimIdempotencyKey(client: "acme", key: "old1", requestHash: "h", now: instant(0), expiresAt: instant(5),
                                                abandonAt: instant(60))
        _ = try await store.claimIdempotencyKey(client: "beta", key: "old2", requestHash: "h", provisioningID: "prv_old2", now: instant(1),
                                                expiresAt: instant(6), abandonAt: instant(60))
        // A finished one: its answer, and its events, are on record already.
        _ = try await store.claimIdempotencyKey(client: "acme", key: "done", requestHash: "h", now: instant(0), expiresAt: instant(6),
                                                abandonAt: instant(60))
        try await store.completeIdempotencyKey(client: "acme", key: "done", claimedAt: instant(0), response: answer)
        // One whose request ended with its outcome unknown: abandoned, it keeps its claim time,
        // which its trace names (it had become the epoch).
        try await store.abandonIdempotencyKey(client: "beta", key: "old2", claimedAt: instant(1), provisioningID: "prv_old2")
        #expect(try await store.purgeExpired(now: instant(7)) == 3)
        #expect(try await store.purgeExpired(now: instant(7)) == 0)
        // The two that never finished leave their trace, in claim order; never their keys.
        let traces = try await store.securityEvents(SecurityEventQuery(kind: .idempotencyClaimUnfinished))
        #expect(traces.map { $0.detail["client"] } == ["acme", "beta"], "\(traces)")
        #expect(traces.last?.detail["provisioning_id"] == "prv_old2")
        #expect(traces.last?.detail["claimed_at"] == "2027-01-15T08:00:01.000Z")
        #expect(traces.allSatisfy { $0.actor == "gateway:purge" && $0.at == instant(7) })
        #expect(traces.allSatisfy { Set($0.detail.keys).isSubset(of: ["client", "provisioning_id", "claimed_at"]) && !$0.detail.values.contains("old1") })
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h2", now: instant(12), expiresAt: instant(22),
                                                    abandonAt: instant(72)) == .inProgress)
    }

    static func anAbandonedClaimIsNeverTakenOver(_ store: any GatewayStore) async throws {
        try await store.migrate()
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(0), expiresAt: instant(3600),
                                                    abandonAt: instant(20)) == .acquired)
        // Still young: in progress.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(10), expiresAt: instant(3600),
                                                    abandonAt: instant(30)) == .inProgress)
        // Older than any request can run: its request died, perhaps after reaching the issuer, so
        // nobody runs it again; asking again changes nothing.
        for now in [30.0, 40.0] {
            #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(now), expiresAt: instant(3600),
                                                        abandonAt: instant(now + 20)).isAbandoned)
        }
        // Another request under the key is still refused as a reuse.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h2", now: instant(50), expiresAt: instant(3600),
                                                    abandonAt: instant(70)).isMismatch)
        // Past its expiry the key is free again.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(3600), expiresAt: instant(7200),
                                                    abandonAt: instant(3620)) == .acquired)
    }

    /// A database a newer gateway migrated (a schema version this binary does not know) is
    /// refused with a clear error, and nothing is written to it: no later version of this
    /// binary's is applied, no card is touched.
    static func aNewerSchemaIsRefusedAndLeftAlone(_ store: any GatewayStore, sql: RawSQL, recordFutureVersionForget007: String) async throws {
        try await store.migrate()
        try await store.putCard(card("kept"))
        try await sql(recordFutureVersionForget007)
        do {
            try await store.migrate()
            Issue.record("a database with an unknown schema version was migrated")
        } catch let error as StoreError {
            // The refusal itself, not a driver's wrapper around it (PostgreSQL's transaction
            // error had carried it, buried, into the operator's message: the upgrade audit).
            #expect(error.reason.hasPrefix("the database has schema 999_from_the_future, which this gateway does not know"), "\(error)")
        }
        #expect(!(try await store.schemaVersions()).contains("007_claim_abandon_time"), "a known version was applied to it")
        #expect(try await store.card("kept") == card("kept"))
    }

    /// A claim is judged by the abandon time it was made with, not by the asking request's: a
    /// request that runs under a longer deadline (before a reload lowered it, or on an instance
    /// with another file) is still running, not dead, when a later request with a shorter window
    /// asks. A claim kept before schema 007 (no abandon time) is judged by the asker's window.
    static func aClaimIsJudgedByItsOwnAbandonTime(_ store: any GatewayStore, sql: RawSQL) async throws {
        try await store.migrate()
        func claim(_ key: String, at now: Double, window: Double) async throws -> IdempotencyClaim {
            try await store.claimIdempotencyKey(client: "acme", key: key, requestHash: "h", now: instant(now), expiresAt: instant(3600),
                                                abandonAt: instant(now + window))
        }
        #expect(try await claim("long", at: 0, window: 100) == .acquired)
        #expect(try await claim("long", at: 30, window: 10) == .inProgress, "a shorter window does not make the running request dead")
        #expect(try await claim("long", at: 99, window: 10) == .inProgress)
        #expect(try await claim("long", at: 100, window: 10).isAbandoned, "from its own abandon time on")
        #expect(try await claim("long", at: 100, window: 500).isAbandoned, "a longer window does not revive it")

        #expect(try await claim("legacy", at: 0, window: 100) == .acquired)
        try await sql("UPDATE idempotency_keys SET abandon_at = NULL WHERE key = 'legacy'")
        #expect(try await claim("legacy", at: 30, window: 50) == .inProgress, "a pre-007 claim: 0 + 50 is later than 30")
        #expect(try await claim("legacy", at: 30, window: 10).isAbandoned, "a pre-007 claim: 0 + 10 is earlier than 30")
        // A claim kept before schema 010 names no provisioning.
        try await sql("UPDATE idempotency_keys SET provisioning_id = NULL WHERE key = 'legacy'")
        #expect(try await claim("legacy", at: 30, window: 10) == .abandoned(nil))

        // A binary from before 007 took an expired key over: its claim is newer than the abandon
        // time it left, which is the previous claim's and says nothing about this one.
        #expect(try await claim("taken", at: 0, window: 100) == .acquired)
        try await sql("UPDATE idempotency_keys SET created_at = abandon_at + 100000 WHERE key = 'taken'")
        #expect(try await claim("taken", at: 250, window: 100) == .inProgress, "200 + 100 is later than 250: still running")
        #expect(try await claim("taken", at: 300, window: 100).isAbandoned)
    }

    /// A claim whose request ended without knowing what the issuer did is marked abandoned: young
    /// as it is, every later claim finds it abandoned (a reuse is still a reuse), until it expires,
    /// and names the provisioning its request ran as (that claim's, not the asker's, and after a
    /// takeover the later claim's). A finished claim keeps its answer whatever is marked, and
    /// another client's key is its own.
    static func aClaimMarkedAbandonedIsAbandonedAtOnce(_ store: any GatewayStore) async throws {
        try await store.migrate()
        // Ids are made at their claim's time, as the guard makes them.
        func claim(_ key: String, _ hash: String = "h", at now: Double = 1, client: ClientID = "acme",
                   as provisioning: ProvisioningID? = nil) async throws -> IdempotencyClaim {
            try await store.claimIdempotencyKey(client: client, key: key, requestHash: hash,
                                                provisioningID: provisioning ?? .testClaim(client, key, at: instant(now)), now: instant(now),
                                                expiresAt: instant(now + 3600), abandonAt: instant(now + 600))
        }
        let first = ProvisioningID.generate(at: instant(1)), globex = ProvisioningID.generate(at: instant(1))
        #expect(try await claim("k", as: first) == .acquired)
        #expect(try await claim("k", "h", client: "globex", as: globex) == .acquired)
        try await store.abandonIdempotencyKey(client: "acme", key: "k", claimedAt: instant(1), provisioningID: first)
        #expect(try await claim("k") == .abandoned(first))
        // Neither a late release (`LateAudit`) nor a completion with the claim's time and id
        // frees or finishes it: the issuer may have acted, and the key never runs again.
        try await store.releaseIdempotencyKey(client: "acme", key: "k", claimedAt: instant(1), provisioningID: first)
        #expect(try await claim("k") == .abandoned(first), "a release freed an abandoned claim")
        await #expect(throws: StoreError.self) {
            try await store.completeIdempotencyKey(client: "acme", key: "k", claimedAt: instant(1),
                                                   response: StoredResponse(status: 200, body: Data("{}".utf8)))
        }
        #expect(try await claim("k") == .abandoned(first), "a completion finished an abandoned claim")
        #expect(try await claim("k", at: 700) == .abandoned(first), "abandoned by age, it still names its own provisioning")
        #expect(try await claim("k", "h2") == .mismatch(first), "a reuse names the provisioning the key ran as")
        #expect(try await claim("k", "h", client: "globex") == .inProgress)
        let later = ProvisioningID.generate(at: instant(3601))
        #expect(try await claim("k", at: 3601, as: later) == .acquired)
        #expect(try await claim("k", at: 4300) == .abandoned(later), "the claim that took the expired key over names its own")

        let answer = StoredResponse(status: 200, body: Data("{}".utf8))
        #expect(try await claim("done") == .acquired)
        try await store.completeIdempotencyKey(client: "acme", key: "done", claimedAt: instant(1), response: answer)
        try await store.abandonIdempotencyKey(client: "acme", key: "done", claimedAt: instant(1))
        #expect(try await claim("done") == .replay(answer))

        // Two claims of one key in the same millisecond (two instances): the one that did not get
        // it (its claim failed) releases or abandons only its own, named by its provisioning id,
        // never the winner's, which runs on.
        let winner = ProvisioningID.generate(at: instant(1)), loser = ProvisioningID.generate(at: instant(1))
        #expect(try await claim("twin", as: winner) == .acquired)
        try await store.releaseIdempotencyKey(client: "acme", key: "twin", claimedAt: instant(1), provisioningID: loser)
        try await store.abandonIdempotencyKey(client: "acme", key: "twin", claimedAt: instant(1), provisioningID: loser)
        #expect(try await claim("twin") == .inProgress, "another request's release or abandon freed the winner's claim")
        try await store.abandonIdempotencyKey(client: "acme", key: "twin", claimedAt: instant(1), provisioningID: winner)
        #expect(try await claim("twin") == .abandoned(winner))
        #expect(try await claim("twin2", as: winner) == .acquired)
        try await store.releaseIdempotencyKey(client: "acme", key: "twin2", claimedAt: instant(1), provisioningID: winner)
        #expect(try await claim("twin2") == .acquired, "its own release did not free it")
    }

    /// A shutdown cancels the requests still running once its bound has passed, and a request
    /// cancelled after its attempt must still record it: its audit event, its claim marked
    /// abandoned (so a retry answers `idempotency_outcome_unknown` at once), a keyed answer kept.
    /// PostgreSQL's client ended a cancelled task's query with `CancellationError`.
    static func aCancelledRequestsLastWritesStillLand(_ store: any GatewayStore) async throws {
        try await store.migrate()
        #expect(try await claim(store, "cut") == .acquired)
        #expect(try await claim(store, "kept") == .acquired)
        let writes = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            #expect(Task.isCancelled)
            try await store.appendAudit(success("prv_cut"))
            try await store.abandonIdempotencyKey(client: "acme", key: "cut", claimedAt: instant(0))
            try await store.completeIdempotencyKey(client: "acme", key: "kept", claimedAt: instant(0), response: answer,
                                                   audit: [success("prv_kept")])
            // A refusal's security event (a wrong key, a card change refused), written after its
            // answer was decided: GRDB's async write had thrown CancellationError unwritten.
            try await store.appendSecurityEvent(SecurityEvent(at: instant(1), kind: .authFailed, actor: "anonymous", source: "127.0.0.1",
                                                              detail: ["reason": "cut"]))
        }
        try await writes.value
        #expect(try await store.securityEvents(SecurityEventQuery(kind: .authFailed)).map { $0.detail["reason"] } == ["cut"])
        #expect(try await store.auditEvents("prv_cut") == [success("prv_cut")])
        #expect(try await claim(store, "cut").isAbandoned)
        #expect(try await claim(store, "kept") == .replay(answer))
        #expect(try await store.auditEvents("prv_kept") == [success("prv_kept")])
    }

    /// A claim is its request's only while its row carries the time it was made. Once it expired and
    /// a later request took the key over (or it was purged), the first request can neither keep
    /// its answer there (an error, nothing written: its answer is not sent) nor release or abandon
    /// the later request's claim.
    static func aClaimTakenOverIsNoLongerItsFirstRequests(_ store: any GatewayStore) async throws {
        try await store.migrate()
        func claim(at now: Double) async throws -> IdempotencyClaim {
            try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(now), expiresAt: instant(now + 60),
                                                abandonAt: instant(now + 50))
        }
        #expect(try await claim(at: 0) == .acquired)
        #expect(try await claim(at: 61) == .acquired, "the expired claim is taken over")
        await #expect(throws: StoreError.self) {
            try await store.completeIdempotencyKey(client: "acme", key: "k", claimedAt: instant(0), response: answer, audit: [success("prv_first")])
        }
        #expect(try await store.auditEvents("prv_first").isEmpty, "the first request's events went in with an answer that was not kept")
        try await store.releaseIdempotencyKey(client: "acme", key: "k", claimedAt: instant(0))
        try await store.abandonIdempotencyKey(client: "acme", key: "k", claimedAt: instant(0))
        #expect(try await claim(at: 62) == .inProgress, "the later request's claim was released or abandoned by the first")
        // The later request keeps its answer; kept again (an acknowledgement lost), it is still its own.
        try await store.completeIdempotencyKey(client: "acme", key: "k", claimedAt: instant(61), response: answer)
        try await store.completeIdempotencyKey(client: "acme", key: "k", claimedAt: instant(61), response: answer)
        #expect(try await claim(at: 63) == .replay(answer))
        // A purged claim is nobody's.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "p", requestHash: "h", now: instant(0), expiresAt: instant(5),
                                                    abandonAt: instant(50)) == .acquired)
        #expect(try await store.purgeExpired(now: instant(6)) == 1)
        await #expect(throws: StoreError.self) {
            try await store.completeIdempotencyKey(client: "acme", key: "p", claimedAt: instant(0), response: answer)
        }
    }

    static func concurrentClaimsAcquireOnce(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let claims = try await withThrowingTaskGroup(of: IdempotencyClaim.self) { group in
            for _ in 0..<12 {
                group.addTask {
                    try await store.claimIdempotencyKey(client: "acme", key: "race", requestHash: "h", now: instant(0),
                                                        expiresAt: instant(3600), abandonAt: instant(60))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(claims.filter { $0 == .acquired }.count == 1)
        #expect(claims.filter { $0 == .inProgress }.count == 11)
    }
}
