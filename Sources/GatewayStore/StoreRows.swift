import Foundation
import ProvisioningCore

/// Conversions shared by both stores between domain types and column values.
enum StoreRows {
    static func referenceJSON(_ reference: IssuerReference) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(reference.fields)) ?? Data("{}".utf8), as: UTF8.self)
    }

    static func reference(_ json: String) throws -> IssuerReference {
        IssuerReference(try JSONDecoder().decode([String: String].self, from: Data(json.utf8)))
    }

    static func card(id: String, program: String, issuer: String?, referenceJSON: String) throws -> CardRecord {
        CardRecord(id: CardID(id), program: ProgramID(program), issuer: issuer.map { IssuerID($0) },
                   issuerReference: try reference(referenceJSON))
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// Decides a claim from an existing row.
    static func claim(existingHash: String, completedStatus: Int?, body: Data?, requestHash: String) -> IdempotencyClaim {
        guard existingHash == requestHash else { return .mismatch }
        guard let completedStatus, let body else { return .inProgress }
        return .replay(StoredResponse(status: completedStatus, body: body))
    }
}

/// A store that cannot be used, named so ops know which one.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public let store: String
    public let reason: String
    public init(store: String, reason: String) {
        self.store = store
        self.reason = reason
    }
    public var description: String { "\(store): \(reason)" }
}
