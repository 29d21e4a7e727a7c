import Foundation
import ProvisioningCore

extension IssuerKind {
    public static let bridge: IssuerKind = "bridge"
}

/// Bridge (see UPSTREAMS.md): `Api-Key` auth; cards addressed by customer and card account;
/// resending is safe because Bridge honours the `Idempotency-Key` the gateway keeps the same
/// across attempts; Apple Pay request fields in hex (Bridge's default) or base64.
public struct BridgeIssuer: IssuerDefinition {
    public struct Credentials: Sendable {
        public let apiKey: Sensitive<String>
    }

    public struct Wire: Sendable {
        /// The four Apple Pay request fields' encoding.
        public let encoding: BinaryEncoding
    }

    public var kind: IssuerKind { .bridge }
    public var credentialNames: [String] { ["api_key"] }
    public var referenceFields: [String] { BridgeReference.fields }
    public var resendSafe: Bool { true }
    public var activatesTokens: Bool { false }
    public var wallets: Set<Wallet> { [.applePay, .googlePay] }

    public init() {}

    /// Bridge's customer and card account ids are its `Id` schema in the provisioning path
    /// (`maxLength: 42` in its OpenAPI): a longer one is refused when the card is registered, not
    /// by Bridge on every provisioning after.
    public static let maxIDLength = 42

    public func referenceProblem(field: String, value: String) -> String? {
        guard BridgeReference.fields.contains(field), value.count > Self.maxIDLength else { return nil }
        return "at most \(Self.maxIDLength) characters for a bridge card (Bridge's Id)"
    }

    public func wireProblems(_ wire: WireOptions, path: String) -> [ConfigProblem] {
        var problems = refuseWireOptions(wire, path: path, except: ["encoding"])
        if let encoding = wire.encoding, encoding == .base64URL { problems.append(.init("\(path).encoding", "must be hex or base64")) }
        return problems
    }

    public func credentials(_ secret: (String) -> Sensitive<String>) -> Credentials { Credentials(apiKey: secret("api_key")) }
    public func wire(_ options: WireOptions) -> Wire { Wire(encoding: options.encoding ?? .hex) }

    public func connector(issuer: IssuerID, baseURL: URL, credentials: Credentials, wire: Wire, http: UpstreamHTTP) -> any IssuerConnector {
        BridgeConnector(issuer: issuer, baseURL: baseURL, apiKey: credentials.apiKey, encoding: wire.encoding, http: http)
    }
}

/// Where a Bridge card lives: the path names both the customer and the card account.
public struct BridgeReference: Sendable, Equatable {
    public static let fields = ["customer_id", "card_account_id"]
    public let customerID: String
    public let cardAccountID: String

    /// A card registered before registration bounded the ids is refused here, before any call.
    public init(_ card: CardRecord) throws(GatewayError) {
        customerID = try ReferenceField.require(card, "customer_id", kind: .bridge)
        cardAccountID = try ReferenceField.require(card, "card_account_id", kind: .bridge)
        for (field, value) in [("customer_id", customerID), ("card_account_id", cardAccountID)] where value.count > BridgeIssuer.maxIDLength {
            throw GatewayError(.issuerLimitExceeded, "\(field): Bridge accepts at most \(BridgeIssuer.maxIDLength) characters (the card's has "
                + "\(value.count)); register the card again")
        }
    }
}
