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

    /// What is wrong with a registration, split the way the API answers it: `shape` breaks the
    /// OpenAPI document's rules (400 `invalid_request`), `refusal` is what only the configuration
    /// can decide (422 `registration_refused`). Values are never echoed beyond a short sanitized name.
    public struct Problems: Sendable, Equatable {
        public var shape: [String] = []
        public var refusal: [String] = []
        public var all: [String] { shape + refusal }
        public var isEmpty: Bool { shape.isEmpty && refusal.isEmpty }
    }

    /// Problems as `field: reason`, empty when the card may be stored.
    public func problems(id: String, program: String, issuer: String, reference: [String: String]) -> [String] {
        check(id: id, program: program, issuer: issuer, reference: reference).all
    }

    /// `namingIssuers`: an unknown issuer's problem lists the configured ones, and an issuer that
    /// does not serve the program says so (for ops). Without it (a tenant), both get the same
    /// problem, so a tenant cannot tell an issuer that exists for other programs from none.
    public func check(id: String, program: String, issuer: String, reference: [String: String], namingIssuers: Bool = true) -> Problems {
        var problems = Problems()
        if !InputRules.isCardID(id) { problems.shape.append(InputRules.cardIDRule) }
        if !InputRules.isName(program) { problems.shape.append(InputRules.nameRule("program")) }
        if !InputRules.isName(issuer) { problems.shape.append(InputRules.nameRule("issuer")) }
        for (field, value) in reference.sorted(by: { $0.key < $1.key }) {
            if !Self.referenceFields.contains(field) {
                problems.shape.append("issuer_reference.\(InputRules.short(field)): not an accepted field name")
            } else if let problem = InputRules.referenceValueProblem(value) {
                problems.shape.append("issuer_reference.\(field): \(problem)")
            }
        }
        let expected: [String]
        var profile: (any IssuerProfile)?
        if issuer == "local" && localEnabled {
            expected = []
        } else if let config = issuers[issuer] {
            profile = IssuerCatalog.profiles[config.kind]
            expected = profile?.referenceFields ?? []
            if InputRules.isName(program), !config.serves(program: program) {
                guard namingIssuers else {
                    problems.refusal.append(Self.noIssuerForTenant(issuer, program: program))
                    return problems
                }
                problems.refusal.append("issuer: \(issuer) does not serve program \(InputRules.short(program)) (issuers.\(issuer).programs)")
            }
        } else {
            guard namingIssuers else {
                problems.refusal.append(Self.noIssuerForTenant(issuer, program: program))
                return problems
            }
            let known = (issuers.keys.sorted() + (localEnabled ? ["local"] : [])).joined(separator: ", ")
            problems.refusal.append("issuer: unknown issuer '\(InputRules.short(issuer))' (configured: \(known))")
            return problems
        }
        for field in expected where reference[field] == nil {
            problems.refusal.append("issuer_reference.\(field): required for \(issuer == "local" ? "a local" : "a \(issuers[issuer]!.kind)") card")
        }
        for field in expected {
            if let value = reference[field], InputRules.referenceValueProblem(value) == nil,
               let problem = profile?.referenceProblem(field: field, value: value) {
                problems.refusal.append("issuer_reference.\(field): \(problem)")
            }
        }
        for field in reference.keys.sorted() where Self.referenceFields.contains(field) && !expected.contains(field) {
            problems.refusal.append(expected.isEmpty
                ? "issuer_reference: a local card takes no reference fields (got \(field))"
                : "issuer_reference.\(field): not a field of this issuer (expected \(expected.joined(separator: ", ")))")
        }
        return problems
    }

    /// What a tenant is told about an issuer it cannot register a card with, whether the issuer
    /// is unknown or serves only other programs.
    static func noIssuerForTenant(_ issuer: String, program: String) -> String {
        "issuer: no issuer '\(InputRules.short(issuer))' serves program \(InputRules.short(program))"
    }

    /// Every reference field any issuer kind names (the OpenAPI document's `propertyNames`).
    public static let referenceFields: Set<String> = Set(IssuerCatalog.profiles.values.flatMap(\.referenceFields))

    public func record(id: String, program: String, issuer: String, reference: [String: String],
                       namingIssuers: Bool = true) throws(GatewayError) -> CardRecord {
        let problems = check(id: id, program: program, issuer: issuer, reference: reference, namingIssuers: namingIssuers)
        guard problems.shape.isEmpty else { throw GatewayError(.invalidRequest, problems.shape.joined(separator: "; ")) }
        guard problems.refusal.isEmpty else { throw GatewayError(.registrationRefused, problems.refusal.joined(separator: "; ")) }
        return CardRecord(id: CardID(id), program: ProgramID(program), issuer: IssuerID(issuer), issuerReference: IssuerReference(reference))
    }
}
