import Foundation
import ProvisioningCore

extension IssuerKind {
    public static let lithic: IssuerKind = "lithic"
}

/// Lithic (see UPSTREAMS.md): the raw API key in `Authorization`; cards addressed by Lithic's
/// `card_token`; never resent, because its provision POST takes no idempotency key; no wire options.
public struct LithicIssuer: IssuerDefinition {
    public struct Credentials: Sendable {
        public let apiKey: Sensitive<String>
    }

    public var kind: IssuerKind { .lithic }
    public var credentialNames: [String] { ["api_key"] }
    public var referenceFields: [String] { IssuerCardReference.fields }
    public var resendSafe: Bool { false }
    public var activatesTokens: Bool { false }
    public var wallets: Set<Wallet> { [.applePay, .googlePay, .samsungPay] }

    public init() {}

    public func wireProblems(_ wire: WireOptions, path: String) -> [ConfigProblem] { refuseWireOptions(wire, path: path) }

    public func credentials(_ secret: (String) -> Sensitive<String>) -> Credentials { Credentials(apiKey: secret("api_key")) }
    public func wire(_ options: WireOptions) {}

    public func connector(issuer: IssuerID, baseURL: URL, credentials: Credentials, wire: Void, http: UpstreamHTTP) -> any IssuerConnector {
        LithicConnector(issuer: issuer, baseURL: baseURL, apiKey: credentials.apiKey, http: http)
    }
}
