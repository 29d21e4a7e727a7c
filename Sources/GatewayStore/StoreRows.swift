import Foundation
import ProvisioningCore

/// Conversions shared by both stores between domain types and column values.
enum StoreRows {
    static func referenceJSON(_ reference: IssuerReference) -> String {
        String(decoding: (try? SharedJSON.sortedEncoder.encode(reference.fields)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func reference(_ json: String) throws -> IssuerReference {
        IssuerReference(try SharedJSON.decoder.decode([String: String].self, from: Data(json.utf8)))
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

    /// Decides a claim from an existing row: an unfinished one claimed at or before `staleBefore`
    /// (both in milliseconds) is abandoned.
    static func claim(existingHash: String, completedStatus: Int?, body: Data?, createdAt: Int64, requestHash: String, staleBefore: Int64)
        -> IdempotencyClaim
    {
        guard existingHash == requestHash else { return .mismatch }
        guard let completedStatus, let body else { return createdAt <= staleBefore ? .abandoned : .inProgress }
        return .replay(StoredResponse(status: completedStatus, body: body))
    }
}

