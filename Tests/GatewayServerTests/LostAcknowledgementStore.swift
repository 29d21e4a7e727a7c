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

    /// While stalled, the first `throwing` audit writes land and report that the store did not
    /// answer in time; every later one waits until `openGate()` (then lands). A request that made
    /// a second write before answering would not answer while the gate is shut.
    private let gate = Mutex<(open: Bool, throwing: Int, waiters: [CheckedContinuation<Void, Never>])>((true, 0, []))
    func shutGate(throwingFirst throwing: Int) { gate.withLock { $0 = (false, throwing, []) } }
    /// A fail-safe for a test that shuts the gate: it opens the gate every 20 s, so a request that
    /// waited at it answers at last and the test fails on `openedByTimer` instead of hanging.
    /// Cancel it when the test ends.
    func failSafe() -> Task<Void, any Error> {
        Task {
            while true {
                try await Task.sleep(for: .seconds(20))
                self.openGate(byTimer: true)
            }
        }
    }

    /// Whether a shut gate was opened by the fail-safe timer (`openGate(byTimer: true)`), not by the test.
    let openedByTimer = Mutex(false)
    func openGate(byTimer: Bool = false) {
        let waiters = gate.withLock { state -> [CheckedContinuation<Void, Never>] in
            if byTimer && !state.open { openedByTimer.withLock { $0 = true } }
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until the gate is open (at once if it is).
    private func waitWhileShut() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = gate.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Whether this audit write reports unanswered at once (else it waited at the gate, if shut).
    private func auditGate() async -> Bool {
        enum Turn { case pass, throwNow, wait }
        let turn = gate.withLock { state -> Turn in
            if state.open { return .pass }
            if state.throwing > 0 { state.throwing -= 1; return .throwNow }
            return .wait
        }
        switch turn {
        case .pass: return false
        case .throwNow: return true
        case .wait:
            await withCheckedContinuation { continuation in
                let resumeNow = gate.withLock { state -> Bool in
                    if state.open { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
            return false
        }
    }

    /// The next `count` request-path writes report that the store did not answer in time and are
    /// not written (the late write rolled back); later ones are written.
    private let dropped = Mutex(0)
    func dropNext(_ count: Int) { dropped.withLock { $0 = count } }

    private func droppedUnanswered(_ write: String) throws {
        guard dropped.withLock({ count in defer { count = max(0, count - 1) }; return count > 0 }) else { return }
        stalledWrites.withLock { $0.append(write) }
        throw Self.noAnswer
    }

    /// The next `count` request-path writes (audit events, answers) fail at once, writing nothing,
    /// with an error that is not a timeout: what a PostgreSQL server restarting under them answers
    /// (the connection cut, `57P01`). Likewise the next `releases` releases of a claim.
    private let refused = Mutex((writes: 0, releases: 0))
    func refuseNext(_ count: Int, releases: Int = 0) { refused.withLock { $0 = (count, releases) } }
    struct ConnectionCut: Error {}

    private func refusedWrite() throws {
        if refused.withLock({ state in defer { state.writes = max(0, state.writes - 1) }; return state.writes > 0 }) { throw ConnectionCut() }
    }

    private func unanswered(_ write: String) throws {
        guard stalled.withLock({ $0 }) else { return }
        stalledWrites.withLock { $0.append(write) }
        throw Self.noAnswer
    }

    init(_ inner: SQLiteGatewayStore) { self.inner = inner }

    /// What PostgreSQL's store throws when its operation timeout passes.
    static let noAnswer = StoreError(store: "test", reason: "no answer within 5 seconds", unanswered: true)

    private let claimArmed = Mutex(false)

    /// The next completion is committed, then reported as failed.
    func loseNextAcknowledgement() { armed.withLock { $0 = true } }
    /// The next claim is committed, then reported as failed.
    func loseNextClaimAcknowledgement() { claimArmed.withLock { $0 = true } }

    func completeIdempotencyKey(client: ClientID, key: String, claimedAt: Date, response: StoredResponse, audit: [AuditEvent]) async throws {
        try droppedUnanswered("complete")
        try refusedWrite()
        try await inner.completeIdempotencyKey(client: client, key: key, claimedAt: claimedAt, response: response, audit: audit)
        try unanswered("complete")
        if armed.withLock({ armed in defer { armed = false }; return armed }) { throw LostAcknowledgement() }
    }

    private let cardReadsUnanswered = Mutex(0)
    /// The next card read reports that the store did not answer in time.
    func failNextCardRead() { cardReadsUnanswered.withLock { $0 = 1 } }
    func card(_ id: CardID) async throws -> CardRecord? {
        if cardReadsUnanswered.withLock({ count in defer { count = max(0, count - 1) }; return count > 0 }) { throw Self.noAnswer }
        return try await inner.card(id)
    }
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
    func importCards(_ cards: [CardRecord], event: SecurityEvent?) async throws -> Int { try await inner.importCards(cards, event: event) }
    func putVaultEntry(for card: CardRecord, sealed: Data, event: SecurityEvent?) async throws -> Bool {
        try await inner.putVaultEntry(for: card, sealed: sealed, event: event)
    }
    func putVaultEntry(_ cardID: CardID, sealed: Data, event: SecurityEvent?) async throws {
        try await inner.putVaultEntry(cardID, sealed: sealed, event: event)
    }
    func vaultEntry(_ cardID: CardID) async throws -> Data? { try await inner.vaultEntry(cardID) }
    func deleteVaultEntry(_ cardID: CardID, event: SecurityEvent?) async throws -> Bool { try await inner.deleteVaultEntry(cardID, event: event) }
    func vaultCardIDs(after: CardID?, limit: Int) async throws -> [CardID] { try await inner.vaultCardIDs(after: after, limit: limit) }
    func appendSecurityEvent(_ event: SecurityEvent) async throws { try await inner.appendSecurityEvent(event) }
    func securityEvents(_ query: SecurityEventQuery) async throws -> [SecurityEvent] { try await inner.securityEvents(query) }
    /// The store holds taken and not yet let go (by key), through this store.
    private let holdsStanding = Mutex<Set<String>>([])
    var standingHolds: Int { holdsStanding.withLock { $0.count } }
    /// Each audit event appended: its operation and attempt, and whether a store hold stood as it
    /// was written.
    let auditsWritten = Mutex<[(operation: String, attempt: Int, whileHeld: Bool)]>([])

    func appendAudit(_ event: AuditEvent) async throws {
        let held = holdsStanding.withLock { !$0.isEmpty }
        auditsWritten.withLock { $0.append((event.operation.rawValue, event.attempt, held)) }
        try droppedUnanswered("audit")
        try refusedWrite()
        let throwNow = await auditGate()
        try await inner.appendAudit(event)
        if throwNow { throw Self.noAnswer }
        try unanswered("audit")
    }
    private let auditReadsUnanswered = Mutex(0)
    /// The next read of a provisioning's trail reports that the store did not answer in time.
    func failNextAuditRead() { auditReadsUnanswered.withLock { $0 = 1 } }
    func auditEvents(_ provisioningID: ProvisioningID, limit: Int) async throws -> [AuditEvent] {
        if auditReadsUnanswered.withLock({ count in defer { count = max(0, count - 1) }; return count > 0 }) { throw Self.noAnswer }
        return try await inner.auditEvents(provisioningID, limit: limit)
    }
    func archivedRows(_ table: EventTable, after: Int64, limit: Int) async throws -> [ArchivedRow] {
        try await inner.archivedRows(table, after: after, limit: limit)
    }
    /// Runs after each archive page's deletion (what another run or the purge does meanwhile).
    let afterArchivedDeletion = Mutex<(@Sendable () async throws -> Void)?>(nil)
    func deleteArchivedEvents(audit: [Int64], security: [Int64], recordedBefore before: Date,
                              record: @escaping @Sendable (ArchivedEventCounts) -> SecurityEvent) async throws -> ArchivedEventCounts
    {
        let deleted = try await inner.deleteArchivedEvents(audit: audit, security: security, recordedBefore: before, record: record)
        try await afterArchivedDeletion.withLock { $0 }?()
        return deleted
    }
    /// How many claims of each key the store has answered: a duplicate's first answered claim
    /// (the key's second) found the key held, so the duplicate is waiting for it.
    private let claimsAnswered = Mutex<[String: Int]>([:])
    func claims(of key: String) -> Int { claimsAnswered.withLock { $0[key] ?? 0 } }

    func claimIdempotencyKey(client: ClientID, key: String, requestHash: String, provisioningID: ProvisioningID, now: Date, expiresAt: Date,
                             abandonAt: Date) async throws -> IdempotencyClaim
    {
        let claim = try await inner.claimIdempotencyKey(client: client, key: key, requestHash: requestHash, provisioningID: provisioningID,
                                                        now: now, expiresAt: expiresAt, abandonAt: abandonAt)
        claimsAnswered.withLock { $0[key, default: 0] += 1 }
        if claimArmed.withLock({ armed in defer { armed = false }; return armed }) { throw LostAcknowledgement() }
        return claim
    }
    func takeHold(_ key: String, holder: String, now: Date, until: Date) async throws -> Bool {
        let held = try await inner.takeHold(key, holder: holder, now: now, until: until)
        if held { holdsStanding.withLock { _ = $0.insert(key) } }
        return held
    }
    func extendHold(_ key: String, holder: String, until: Date) async throws -> Bool {
        try await inner.extendHold(key, holder: holder, until: until)
    }
    func releaseHold(_ key: String, holder: String) async throws {
        try await inner.releaseHold(key, holder: holder)
        holdsStanding.withLock { _ = $0.remove(key) }
    }
    func releaseIdempotencyKey(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws {
        if refused.withLock({ state in defer { state.releases = max(0, state.releases - 1) }; return state.releases > 0 }) {
            throw ConnectionCut()
        }
        try await inner.releaseIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: provisioningID)
    }
    /// While stalled and the gate is shut, an abandon waits at the gate (then lands): a request
    /// that waited for its abandon before answering would not answer.
    func abandonIdempotencyKey(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async throws {
        if stalled.withLock({ $0 }) {
            stalledWrites.withLock { $0.append("abandon") }
            await waitWhileShut()
        }
        try await inner.abandonIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: provisioningID)
    }
    func purgeExpired(now: Date) async throws -> Int { try await inner.purgeExpired(now: now) }
    func replaceVaultEntry(_ cardID: CardID, expected: Data, with sealed: Data) async throws -> Bool {
        try await inner.replaceVaultEntry(cardID, expected: expected, with: sealed)
    }
    func deleteOrphanVaultEntry(_ cardID: CardID) async throws -> Bool { try await inner.deleteOrphanVaultEntry(cardID) }
}
