import Foundation
import GatewayStore
import ProvisioningCore
import Synchronization

/// A real SQLite store whose next `completeIdempotencyKey` (or claim) commits and then throws: what the
/// gateway sees when a PostgreSQL COMMIT succeeds but its acknowledgement is lost (the connection
/// cut during it). Or, once `stopAnswering()` was called, whose request-path writes (audit events,
/// answers) each land and then report that the store did not answer in time: what a request sees
/// when PostgreSQL stalls past `operation_timeout_ms` and the shielded write lands later. Everything
/// else goes to the store as it is.
final class LostAcknowledgementStore: GatewayStore {
    struct LostAcknowledgement: Error {}

    let inner: SQLiteGatewayStore
    private let armed = Mutex(false)
    private let stalled = Mutex(false)
    /// The request-path writes made while stalled, by name.
    let stalledWrites = Mutex<[String]>([])

    func stopAnswering(_ stop: Bool = true) { stalled.withLock { $0 = stop } }

    private func unanswered(_ write: String) throws {
        guard stalled.withLock({ $0 }) else { return }
        stalledWrites.withLock { $0.append(write) }
        throw StoreError(store: "test", reason: "no answer within 5 seconds", unanswered: true)
    }

    init(_ inner: SQLiteGatewayStore) { self.inner = inner }

    private let claimArmed = Mutex(false)

    /// The next completion is committed, then reported as failed.
    func loseNextAcknowledgement() { armed.withLock { $0 = true } }
    /// The next claim is committed, then reported as failed.
    func loseNextClaimAcknowledgement() { claimArmed.withLock { $0 = true } }

    func completeIdempotencyKey(client: ClientID, key: String, claimedAt: Date, response: StoredResponse, audit: [AuditEvent]) async throws {
        try await inner.completeIdempotencyKey(client: client, key: key, claimedAt: claimedAt, response: response, audit: audit)
        try unanswered("complete")
        if armed.withLock({ armed in defer { armed = false }; return armed }) { throw LostAcknowledgement() }
    }

    func card(_ id: CardID) async throws -> CardRecord? { try await inner.card(id) }
    func migrate() async throws { try await inner.migrate() }
    func schemaVersions() async throws -> [String] { try await inner.schemaVersions() }
    func check() async throws -> [String] { try await inner.check() }
    func putCard(_ card: CardRecord, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardWrite {
        try await inner.putCard(card, owners: owners, event: event)
    }
    func deleteCard(_ id: CardID, owners: Set<ProgramID>?, event: SecurityEvent?) async throws -> CardRecord? {
        try await inner.deleteCard(id, owners: owners, event: event)
    }
    func cards(_ query: CardPageQuery) async throws -> [CardRecord] { try await inner.cards(query) }
    func importCards(_ cards: [CardRecord], event: SecurityEvent?) async throws { try await inner.importCards(cards, event: event) }
    func putVaultEntry(_ cardID: CardID, sealed: Data, event: SecurityEvent?) async throws {
        try await inner.putVaultEntry(cardID, sealed: sealed, event: event)
    }
    func vaultEntry(_ cardID: CardID) async throws -> Data? { try await inner.vaultEntry(cardID) }
    func deleteVaultEntry(_ cardID: CardID, event: SecurityEvent?) async throws -> Bool { try await inner.deleteVaultEntry(cardID, event: event) }
    func vaultCardIDs(after: CardID?, limit: Int) async throws -> [CardID] { try await inner.vaultCardIDs(after: after, limit: limit) }
    func appendSecurityEvent(_ event: SecurityEvent) async throws { try await inner.appendSecurityEvent(event) }
    func securityEvents(_ query: SecurityEventQuery) async throws -> [SecurityEvent] { try await inner.securityEvents(query) }
    func appendAudit(_ event: AuditEvent) async throws {
        try await inner.appendAudit(event)
        try unanswered("audit")
    }
    func auditEvents(_ provisioningID: ProvisioningID) async throws -> [AuditEvent] { try await inner.auditEvents(provisioningID) }
    func claimIdempotencyKey(client: ClientID, key: String, requestHash: String, provisioningID: ProvisioningID, now: Date, expiresAt: Date,
                             abandonAt: Date) async throws -> IdempotencyClaim
    {
        let claim = try await inner.claimIdempotencyKey(client: client, key: key, requestHash: requestHash, provisioningID: provisioningID,
                                                        now: now, expiresAt: expiresAt, abandonAt: abandonAt)
        if claimArmed.withLock({ armed in defer { armed = false }; return armed }) { throw LostAcknowledgement() }
        return claim
    }
    func releaseIdempotencyKey(client: ClientID, key: String, claimedAt: Date) async throws {
        try await inner.releaseIdempotencyKey(client: client, key: key, claimedAt: claimedAt)
    }
    func abandonIdempotencyKey(client: ClientID, key: String, claimedAt: Date) async throws {
        try await inner.abandonIdempotencyKey(client: client, key: key, claimedAt: claimedAt)
    }
    func purgeExpired(now: Date) async throws -> Int { try await inner.purgeExpired(now: now) }
    func replaceVaultEntry(_ cardID: CardID, expected: Data, with sealed: Data) async throws -> Bool {
        try await inner.replaceVaultEntry(cardID, expected: expected, with: sealed)
    }
    func deleteOrphanVaultEntry(_ cardID: CardID) async throws -> Bool { try await inner.deleteOrphanVaultEntry(cardID) }
}
