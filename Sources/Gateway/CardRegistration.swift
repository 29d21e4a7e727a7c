import Foundation
import Issuers
import ProvisioningCore

/// The checks every way into the registry shares (the API's PUT and the CSV import): the card id's
/// shape, a known issuer that serves the card's program, and exactly the reference fields that
/// issuer's kind names, each bounded. Who may register what (admin-only `local`, a client's own
/// programs) is the API's decision on top of this.
public struct CardRegistration: Sendable {
    public static let maxIDLength = InputRules.maxCardIDLength
    let issuers: [String: IssuerConfig]
    /// Whether `local` (the gateway's own encryptor) is an issuer a card may name.
    let localEnabled: Bool

    public init(issuers: [String: IssuerConfig], localEnabled: Bool = false) {
        self.issuers = issuers
        self.localEnabled = localEnabled
    }

    public init(config: GatewayConfig) {
        self.init(issuers: config.issuers, localEnabled: config.local.enabled)
    }

    /// Problems as `field: reason`, empty when the card may be stored. Values are never echoed
    /// beyond a short sanitized name.
    public func problems(id: String, program: String, issuer: String, reference: [String: String]) -> [String] {
        var problems: [String] = []
        if !InputRules.isCardID(id) { problems.append(InputRules.cardIDRule) }
        if !InputRules.isName(program) { problems.append(InputRules.nameRule("program")) }
        let expected: [String]
        if issuer == "local" && localEnabled {
            expected = []
        } else if let config = issuers[issuer] {
            expected = IssuerCatalog.profiles[config.kind]?.referenceFields ?? []
            if InputRules.isName(program), !config.serves(program: program) {
                problems.append("issuer: \(issuer) does not serve program \(program) (issuers.\(issuer).programs)")
            }
        } else {
            let known = (issuers.keys.sorted() + (localEnabled ? ["local"] : [])).joined(separator: ", ")
            problems.append("issuer: unknown issuer '\(InputRules.short(issuer))' (configured: \(known))")
            return problems
        }
        for field in expected where reference[field] == nil {
            problems.append("issuer_reference.\(field): required for \(issuer == "local" ? "a local" : "a \(issuers[issuer]!.kind)") card")
        }
        for (field, value) in reference.sorted(by: { $0.key < $1.key }) {
            guard expected.contains(field) else {
                problems.append(expected.isEmpty
                    ? "issuer_reference: a local card takes no reference fields (got \(InputRules.short(field)))"
                    : "issuer_reference.\(InputRules.short(field)): not a field of this issuer (expected \(expected.joined(separator: ", ")))")
                continue
            }
            if let problem = InputRules.referenceValueProblem(value) { problems.append("issuer_reference.\(field): \(problem)") }
        }
        return problems
    }

    public func record(id: String, program: String, issuer: String, reference: [String: String]) throws(GatewayError) -> CardRecord {
        let problems = problems(id: id, program: program, issuer: issuer, reference: reference)
        guard problems.isEmpty else { throw GatewayError(.invalidRequest, problems.joined(separator: "; ")) }
        return CardRecord(id: CardID(id), program: ProgramID(program), issuer: IssuerID(issuer), issuerReference: IssuerReference(reference))
    }
}
