import Foundation
import ProvisioningCore

/// The checks every way into the registry shares (the API's PUT and the CSV import): the card id's
/// shape, a known issuer, and the reference fields that issuer needs.
public struct CardRegistration: Sendable {
    public static let maxIDLength = 128
    let issuers: [String: IssuerConfig]
    /// Whether `local` (the gateway's own encryptor) is an issuer a card may name.
    let localEnabled: Bool

    public init(issuers: [String: IssuerConfig], localEnabled: Bool = false) {
        self.issuers = issuers
        self.localEnabled = localEnabled
    }

    /// Problems as `field: reason`, empty when the card may be stored.
    public func problems(id: String, program: String, issuer: String, reference: [String: String]) -> [String] {
        var problems: [String] = []
        if id.isEmpty || id.count > Self.maxIDLength || !id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_-.:".contains($0)) }) {
            problems.append("card_id: 1 to \(Self.maxIDLength) characters of A-Z, a-z, 0-9, _ - . :")
        }
        if program.isEmpty || program.count > 64 { problems.append("program: 1 to 64 characters") }
        if issuer == "local" && localEnabled { return problems }
        guard let kind = issuers[issuer]?.kind else {
            let known = (issuers.keys.sorted() + (localEnabled ? ["local"] : [])).joined(separator: ", ")
            problems.append("issuer: unknown issuer '\(issuer)' (configured: \(known))")
            return problems
        }
        for field in kind.requiredReferenceFields where (reference[field] ?? "").isEmpty {
            problems.append("issuer_reference.\(field): required for a \(kind.rawValue) card")
        }
        for (field, value) in reference.sorted(by: { $0.key < $1.key }) where value.count > 256 || field.count > 64 {
            problems.append("issuer_reference.\(field): too long")
        }
        return problems
    }

    public func record(id: String, program: String, issuer: String, reference: [String: String]) throws(GatewayError) -> CardRecord {
        let problems = problems(id: id, program: program, issuer: issuer, reference: reference)
        guard problems.isEmpty else { throw GatewayError(.invalidRequest, problems.joined(separator: "; ")) }
        return CardRecord(id: CardID(id), program: ProgramID(program), issuer: IssuerID(issuer), issuerReference: IssuerReference(reference))
    }
}
