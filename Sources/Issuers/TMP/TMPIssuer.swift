import Foundation
import ProvisioningCore

extension IssuerKind {
    public static let tmp: IssuerKind = "tmp"
}

/// The token management platform (see UPSTREAMS.md): a token sent as `Authorization: Bearer` or
/// in a header `wire.auth` names; cards addressed by the issuer's card id; never resent, because
/// its signed-cards POST has no idempotency key in its contract; activates wallet tokens.
public struct TMPIssuer: IssuerDefinition {
    public struct Credentials: Sendable {
        public let token: Sensitive<String>
    }

    public struct Wire: Sendable {
        public let auth: TMPAuth
    }

    public var kind: IssuerKind { .tmp }
    public var credentialNames: [String] { ["token"] }
    public var referenceFields: [String] { IssuerCardReference.fields }
    public var resendSafe: Bool { false }
    public var activatesTokens: Bool { true }
    public var wallets: Set<Wallet> { [.applePay, .googlePay] }
    /// TMP documents Apple Pay only: Google Pay through signed-cards is an assumption no document
    /// confirms (UPSTREAMS.md, TMP), so it stays off unless `issuers.<name>.wallets` names it.
    public var defaultWallets: Set<Wallet> { [.applePay] }

    public init() {}

    public func wireProblems(_ wire: WireOptions, path: String) -> [ConfigProblem] {
        refuseWireOptions(wire, path: path, except: ["auth"])
    }

    public func credentials(_ secret: (String) -> Sensitive<String>) -> Credentials { Credentials(token: secret("token")) }
    public func wire(_ options: WireOptions) -> Wire { Wire(auth: options.auth ?? .bearer) }

    public func connector(issuer: IssuerID, baseURL: URL, credentials: Credentials, wire: Wire, http: UpstreamHTTP) -> any IssuerConnector {
        TMPConnector(issuer: issuer, baseURL: baseURL, token: credentials.token, auth: wire.auth, http: http)
    }
}

/// A card addressed upstream by the issuer's own card id (TMP, Crossmint).
public struct IssuerCardReference: Sendable, Equatable {
    public static let fields = ["issuer_card_id"]
    public let issuerCardID: String

    public init(_ card: CardRecord, kind: IssuerKind) throws(GatewayError) {
        issuerCardID = try ReferenceField.require(card, "issuer_card_id", kind: kind)
    }
}
