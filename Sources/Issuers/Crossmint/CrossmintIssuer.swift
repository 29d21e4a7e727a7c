import Foundation
import ProvisioningCore

extension IssuerKind {
    public static let crossmint: IssuerKind = "crossmint"
}

/// Crossmint (see UPSTREAMS.md): `X-API-KEY` auth; cards addressed by the issuer's card id;
/// resending is safe because its Apple Pay call is a GET; no wire options.
public struct CrossmintIssuer: IssuerDefinition {
    public struct Credentials: Sendable {
        public let apiKey: Sensitive<String>
    }

    public var kind: IssuerKind { .crossmint }
    public var credentialNames: [String] { ["api_key"] }
    public var referenceFields: [String] { IssuerCardReference.fields }
    public var resendSafe: Bool { true }
    public var activatesTokens: Bool { false }
    public var wallets: Set<Wallet> { [.applePay] }

    public init() {}

    public func wireProblems(_ wire: WireOptions, path: String) -> [ConfigProblem] { refuseWireOptions(wire, path: path) }

    public func credentials(_ secret: (String) -> Sensitive<String>) -> Credentials { Credentials(apiKey: secret("api_key")) }
    public func wire(_ options: WireOptions) {}

    public func connector(issuer: IssuerID, baseURL: URL, credentials: Credentials, wire: Void, http: UpstreamHTTP) -> any IssuerConnector {
        CrossmintConnector(issuer: issuer, baseURL: baseURL, apiKey: credentials.apiKey, http: http)
    }
}
