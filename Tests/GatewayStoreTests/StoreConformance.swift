import Foundation
import GatewayStore
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
        .init(name: "an abandoned claim is taken over", run: anAbandonedClaimIsTakenOver),
        .init(name: "concurrent claims acquire once", run: concurrentClaimsAcquireOnce),
    ]

    static func card(_ id: String, program: String = "p1", issuer: String? = "bridge", ref: String = "x") -> CardRecord {
        CardRecord(id: CardID(id), program: ProgramID(program), issuer: issuer.map { IssuerID($0) },
                   issuerReference: IssuerReference(["customer_id": "cust_\(ref)", "card_account_id": "ca_\(ref)"]))
    }

    /// Whole milliseconds: both stores keep time to the millisecond.
    static func instant(_ seconds: Double) -> Date { Date(timeIntervalSince1970: (1_800_000_000 + seconds).rounded()) }

    static func migrationsRunFromEmptyAndAgain(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let versions = try await store.schemaVersions()
        #expect(versions == ["001_cards_audit_idempotency", "002_vault", "003_audit_device_type"])
        try await store.migrate()
        #expect(try await store.schemaVersions() == versions)
        #expect(try await store.card("nothing") == nil)
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
            let page = try await store.cards(CardPageQuery(programs: [], after: after, limit: 3))
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
    }

    static func importIsIdempotent(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let cards = [card("i1"), card("i2", program: "p2")]
        try await store.importCards(cards)
        try await store.importCards(cards)
        #expect(try await store.cards(CardPageQuery(limit: 10)) == cards)
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
        second.outcome = .succeeded
        second.errorCode = nil
        second.upstreamStatus = 200
        var unrelated = first
        unrelated.provisioningID = "prv_2"
        unrelated.operation = .tokenActivation
        unrelated.deviceType = nil
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
        let now = instant(0), expires = instant(3600), stale = instant(-60)
        let claim = { (key: String, hash: String, client: String) in
            try await store.claimIdempotencyKey(client: ClientID(client), key: key, requestHash: hash, now: now, expiresAt: expires,
                                                staleBefore: stale)
        }
        #expect(try await claim("k1", "h1", "acme") == .acquired)
        #expect(try await claim("k1", "h1", "acme") == .inProgress)
        #expect(try await claim("k1", "h2", "acme") == .mismatch)
        // Keys belong to a client: another client's same key is another key.
        #expect(try await claim("k1", "h9", "globex") == .acquired)

        let answer = StoredResponse(status: 200, body: Data(#"{"provisioning_id":"prv_1"}"#.utf8))
        try await store.completeIdempotencyKey(client: "acme", key: "k1", response: answer)
        #expect(try await claim("k1", "h1", "acme") == .replay(answer))
        #expect(try await claim("k1", "h2", "acme") == .mismatch)
        // A completed answer is never released.
        try await store.releaseIdempotencyKey(client: "acme", key: "k1")
        #expect(try await claim("k1", "h1", "acme") == .replay(answer))

        // A released claim (the request failed, worth retrying) can be claimed again.
        #expect(try await claim("k2", "h1", "acme") == .acquired)
        try await store.releaseIdempotencyKey(client: "acme", key: "k2")
        #expect(try await claim("k2", "h1", "acme") == .acquired)
    }

    static func idempotencyExpires(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let answer = StoredResponse(status: 200, body: Data("{}".utf8))
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h1", now: instant(0), expiresAt: instant(10),
                                                    staleBefore: instant(-60)) == .acquired)
        try await store.completeIdempotencyKey(client: "acme", key: "k", response: answer)
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h1", now: instant(9), expiresAt: instant(19),
                                                    staleBefore: instant(-51)) == .replay(answer))
        // Past its expiry the key is free again, even for another body.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h2", now: instant(11), expiresAt: instant(21),
                                                    staleBefore: instant(-49)) == .acquired)

        _ = try await store.claimIdempotencyKey(client: "acme", key: "old1", requestHash: "h", now: instant(0), expiresAt: instant(5),
                                                staleBefore: instant(-60))
        _ = try await store.claimIdempotencyKey(client: "acme", key: "old2", requestHash: "h", now: instant(0), expiresAt: instant(6),
                                                staleBefore: instant(-60))
        #expect(try await store.purgeExpired(now: instant(7)) == 2)
        #expect(try await store.purgeExpired(now: instant(7)) == 0)
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h2", now: instant(12), expiresAt: instant(22),
                                                    staleBefore: instant(-48)) == .inProgress)
    }

    static func anAbandonedClaimIsTakenOver(_ store: any GatewayStore) async throws {
        try await store.migrate()
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(0), expiresAt: instant(3600),
                                                    staleBefore: instant(-20)) == .acquired)
        // Still young: in progress.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(10), expiresAt: instant(3600),
                                                    staleBefore: instant(-10)) == .inProgress)
        // Older than any request can run: its request died, so this one takes over.
        #expect(try await store.claimIdempotencyKey(client: "acme", key: "k", requestHash: "h", now: instant(30), expiresAt: instant(3600),
                                                    staleBefore: instant(10)) == .acquired)
    }

    static func concurrentClaimsAcquireOnce(_ store: any GatewayStore) async throws {
        try await store.migrate()
        let claims = try await withThrowingTaskGroup(of: IdempotencyClaim.self) { group in
            for _ in 0..<12 {
                group.addTask {
                    try await store.claimIdempotencyKey(client: "acme", key: "race", requestHash: "h", now: instant(0),
                                                        expiresAt: instant(3600), staleBefore: instant(-60))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(claims.filter { $0 == .acquired }.count == 1)
        #expect(claims.filter { $0 == .inProgress }.count == 11)
    }
}
