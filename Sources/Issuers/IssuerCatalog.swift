import Foundation
import ProvisioningCore

/// One kind of issuer, described in its own folder (`Bridge/BridgeIssuer.swift`, ...): what its
/// config entry holds (typed credentials and wire options, with their validation), what its
/// cards' references are (a typed reference the connector reads), whether resending is safe,
/// and how its connector is made.
public protocol IssuerDefinition: IssuerProfile {
    associatedtype Credentials: Sendable
    associatedtype Wire: Sendable

    /// The typed credentials, from the resolved secret of each of `credentialNames`.
    func credentials(_ secret: (String) -> Sensitive<String>) -> Credentials
    /// The typed wire options (validated by `wireProblems` when the config was read).
    func wire(_ options: WireOptions) -> Wire
    func connector(issuer: IssuerID, baseURL: URL, credentials: Credentials, wire: Wire, http: UpstreamHTTP) -> any IssuerConnector
}

extension IssuerDefinition {
    /// The connector for one endpoint of an issuer of this kind.
    public func makeConnector(
        issuer: IssuerID, baseURL: URL, secret: (String) -> Sensitive<String>, options: WireOptions, http: UpstreamHTTP
    ) -> any IssuerConnector {
        connector(issuer: issuer, baseURL: baseURL, credentials: credentials(secret), wire: wire(options), http: http)
    }

    /// The common rule: a kind takes no wire options unless it says otherwise.
    func refuseWireOptions(_ wire: WireOptions, path: String, except allowed: Set<String> = []) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if wire.encoding != nil, !allowed.contains("encoding") {
            problems.append(.init("\(path).encoding", "\(kind) issuers take no encoding option (only bridge does)"))
        }
        if wire.auth != nil, !allowed.contains("auth") {
            problems.append(.init("\(path).auth", "\(kind) issuers take no auth option (only tmp does)"))
        }
        if wire.provisioningAppVersion != nil, !allowed.contains("provisioning_app_version") {
            problems.append(.init("\(path).provisioning_app_version", "\(kind) issuers take no provisioning_app_version option (only marqeta does)"))
        }
        return problems
    }
}

/// The issuer kinds this build knows. Adding one is its folder, its simulator, and one line here.
public enum IssuerCatalog {
    public static let definitions: [any IssuerDefinition] = [BridgeIssuer(), TMPIssuer(), CrossmintIssuer(), MarqetaIssuer(), LithicIssuer()]

    public static let profiles: IssuerProfiles = Dictionary(uniqueKeysWithValues: definitions.map { ($0.kind, $0 as any IssuerProfile) })

    public static func definition(_ kind: IssuerKind) -> (any IssuerDefinition)? {
        definitions.first { $0.kind == kind }
    }
}

/// Reads a card's reference fields into an issuer's typed reference; a missing field (which the
/// registry refuses on write) is an internal error naming the field, never its value.
enum ReferenceField {
    static func require(_ card: CardRecord, _ field: String, kind: IssuerKind) throws(GatewayError) -> String {
        guard let value = card.issuerReference[field] else {
            throw GatewayError(.internal, "card \(card.id) lacks the \(kind) \(field)")
        }
        return value
    }
}
