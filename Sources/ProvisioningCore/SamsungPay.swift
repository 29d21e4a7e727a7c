import Foundation

/// What Samsung Pay's push provisioning gives the app (the wallet user's id and the device's id),
/// for the issuer to build the payload Samsung Pay's add-card call takes.
public struct SamsungPayProvisioningRequest: Sendable, Equatable {
    public let walletAccountID: String
    public let deviceID: String
    /// The device the card goes to; a phone when the caller does not say.
    public let deviceType: DeviceType

    /// The same bounds as Google Pay's ids (printable ASCII, 1 to 128 characters).
    public init(walletAccountID: String, deviceID: String, deviceType: DeviceType? = nil) throws(GatewayError) {
        let ids = try GooglePayProvisioningRequest(walletAccountID: walletAccountID, deviceID: deviceID)
        self.walletAccountID = ids.walletAccountID
        self.deviceID = ids.deviceID
        self.deviceType = deviceType ?? .phone
    }
}

/// The issuer's answer for Samsung Pay: `provisionPayload` is exactly the string the issuer
/// returned for Samsung Pay's add-card call (never re-encoded), with display fields when given.
public struct SamsungPayPayload: Sendable, Equatable {
    /// The longest payload passed on (Samsung Pay's are a few kilobytes).
    public static let maxPayloadBytes = WalletPayloadText.maxBytes
    public let provisionPayload: String
    public var displayName: String?
    public var lastDigits: String?
    public var network: String?
    public var tokenServiceProvider: String?
    public var cardType: String?

    public init(provisionPayload: String, displayName: String? = nil, lastDigits: String? = nil, network: String? = nil,
                tokenServiceProvider: String? = nil, cardType: String? = nil) throws(GatewayError) {
        // The upstream audit had a card number and terminal escapes reach the caller through it.
        try WalletPayloadText.check(provisionPayload, "the issuer's Samsung Pay payload")
        self.provisionPayload = provisionPayload
        // Display fields as the phone may show them (`InputRules.phoneText`); last digits are
        // four digits (the spec's `last_digits`) or left out.
        self.displayName = InputRules.phoneText(displayName)
        self.lastDigits = lastDigits.flatMap { InputRules.isLastFour($0) ? $0 : nil }
        self.network = InputRules.phoneText(network, maxLength: 64)
        self.tokenServiceProvider = InputRules.phoneText(tokenServiceProvider, maxLength: 64)
        self.cardType = InputRules.phoneText(cardType, maxLength: 64)
    }
}

/// An issuer's encrypted payload for a wallet, passed to the phone as the issuer wrote it
/// (Samsung Pay's `provisionPayload`, Google Pay's opaque payment card): opaque, but an encrypted
/// payload's text (base64, base64url, a JWE's dotted parts). Visible ASCII within a bound and no
/// card number in the clear; anything else is not passed to a phone (every other issuer text the
/// caller gets is screened).
public enum WalletPayloadText {
    /// The longest payload passed on (they are a few kilobytes).
    public static let maxBytes = 65_536

    /// `what` names the payload in the error (`the issuer's ...`).
    public static func check(_ text: String, _ what: String) throws(GatewayError) {
        guard !text.isEmpty else { throw GatewayError(.upstreamProtocolError, "\(what) is empty", condition: .malformed) }
        guard text.utf8.count <= maxBytes else {
            throw GatewayError(.upstreamProtocolError, "\(what) is over \(maxBytes) bytes", condition: .malformed)
        }
        guard text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw GatewayError(.upstreamProtocolError, "\(what) holds characters an encrypted payload's text does not", condition: .malformed)
        }
        guard !InputRules.holdsCardNumber(text) else {
            throw GatewayError(.upstreamProtocolError, "\(what) holds a card number in the clear", condition: .malformed)
        }
    }
}
