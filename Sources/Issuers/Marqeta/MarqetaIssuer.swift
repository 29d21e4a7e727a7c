import Foundation
import ProvisioningCore

extension IssuerKind {
    public static let marqeta: IssuerKind = "marqeta"
}

/// Marqeta's Core API (see UPSTREAMS.md and `upstream-specs/marqeta-core-api-swagger.json`): HTTP
/// Basic with the application token and the admin access token; cards addressed by Marqeta's
/// `card_token`; never resent, because its provisioning POSTs take no idempotency key; every
/// request carries `provisioning_app_version`, which the config must give (`wire.provisioning_app_version`).
public struct MarqetaIssuer: IssuerDefinition {
    public struct Credentials: Sendable {
        public let applicationToken: Sensitive<String>
        public let accessToken: Sensitive<String>
    }

    public struct Wire: Sendable {
        /// Required by the config check; nil only for a connector built without a config (tools).
        public let provisioningAppVersion: String?
    }

    public var kind: IssuerKind { .marqeta }
    public var credentialNames: [String] { ["application_token", "access_token"] }
    public var referenceFields: [String] { IssuerCardReference.fields }
    public var resendSafe: Bool { false }
    public var activatesTokens: Bool { false }
    public var wallets: Set<Wallet> { [.applePay, .googlePay, .samsungPay] }

    public init() {}

    /// Marqeta's `card_token` is at most 36 characters in every provision request of its Core API
    /// (`maxLength: 36`): a longer one is refused when the card is registered, not by Marqeta's
    /// 400 on every provisioning after.
    public static let maxCardTokenLength = 36

    public func referenceProblem(field: String, value: String) -> String? {
        guard field == "issuer_card_id", value.count > Self.maxCardTokenLength else { return nil }
        return "at most \(Self.maxCardTokenLength) characters for a marqeta card (Marqeta's card_token)"
    }

    public func wireProblems(_ wire: WireOptions, path: String) -> [ConfigProblem] {
        var problems = refuseWireOptions(wire, path: path, except: ["provisioning_app_version"])
        let key = "\(path).provisioning_app_version"
        switch wire.provisioningAppVersion {
        case nil:
            problems.append(.init(key, "required for a marqeta issuer: every provisioning request carries it (your app's version, e.g. \"4.2.0\")"))
        case let version?:
            if !MarqetaWire.isValidAppVersion(version) {
                problems.append(.init(key, "must be 1 to \(MarqetaWire.maxAppVersionLength) printable characters"))
            }
        }
        return problems
    }

    public func credentials(_ secret: (String) -> Sensitive<String>) -> Credentials {
        Credentials(applicationToken: secret("application_token"), accessToken: secret("access_token"))
    }

    public func wire(_ options: WireOptions) -> Wire { Wire(provisioningAppVersion: options.provisioningAppVersion) }

    public func connector(issuer: IssuerID, baseURL: URL, credentials: Credentials, wire: Wire, http: UpstreamHTTP) -> any IssuerConnector {
        MarqetaConnector(issuer: issuer, baseURL: baseURL, applicationToken: credentials.applicationToken,
                         accessToken: credentials.accessToken, provisioningAppVersion: wire.provisioningAppVersion, http: http)
    }
}
