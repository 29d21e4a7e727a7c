import Foundation

/// What Android's push provisioning gives the app (TapAndPay `getActiveWalletId` and
/// `getStableHardwareId`), for the issuer to build an opaque payment card for that wallet.
public struct GooglePayProvisioningRequest: Sendable, Equatable {
    /// The unified API accepts ids up to this length; each upstream may accept less (its wire file says).
    public static let maxIDLength = 128

    public let walletAccountID: String
    public let deviceID: String

    public init(walletAccountID: String, deviceID: String) throws(GatewayError) {
        for (field, value) in [("wallet_account_id", walletAccountID), ("device_id", deviceID)] {
            guard !value.isEmpty else { throw GatewayError(.invalidRequest, "\(field): required") }
            guard value.count <= Self.maxIDLength else {
                throw GatewayError(.invalidRequest, "\(field): at most \(Self.maxIDLength) characters (got \(value.count))")
            }
            guard value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw GatewayError(.invalidRequest, "\(field): printable ASCII without spaces")
            }
        }
        self.walletAccountID = walletAccountID
        self.deviceID = deviceID
    }

    /// Refuses an id longer than an upstream accepts, before calling it.
    public func check(maxIDLength: Int, issuer: IssuerID) throws(GatewayError) {
        for (field, value) in [("wallet_account_id", walletAccountID), ("device_id", deviceID)] where value.count > maxIDLength {
            throw GatewayError(.issuerLimitExceeded, "\(field): \(issuer) accepts at most \(maxIDLength) characters (got \(value.count))")
        }
    }
}

/// The cardholder's address, for Android's `UserAddress` in `PushTokenizeRequest`.
public struct UserAddress: Sendable, Equatable, Codable {
    public var name: String?
    public var address1: String?
    public var address2: String?
    public var city: String?
    public var state: String?
    public var postalCode: String?
    public var country: String?
    public var phone: String?

    public init(name: String? = nil, address1: String? = nil, address2: String? = nil, city: String? = nil, state: String? = nil,
                postalCode: String? = nil, country: String? = nil, phone: String? = nil) {
        // Each line as the phone may show it (`InputRules.phoneText`); a phone number is not
        // screened for card numbers (13 to 15 digits with a country code are common).
        self.name = InputRules.phoneText(name)
        self.address1 = InputRules.phoneText(address1)
        self.address2 = InputRules.phoneText(address2)
        self.city = InputRules.phoneText(city)
        self.state = InputRules.phoneText(state)
        self.postalCode = InputRules.phoneText(postalCode, maxLength: 32)
        self.country = InputRules.phoneText(country, maxLength: 64)
        self.phone = InputRules.phoneText(phone, maxLength: 32, screeningCardNumbers: false)
    }
}

/// What Android's `PushTokenizeRequest` needs (Marqeta's `push_tokenize_request_data` is the
/// reference): the opaque payment card, and display fields when the issuer gives them.
public struct GooglePayPayload: Sendable {
    /// The issuer's encrypted card for Google (OPC), exactly the text the issuer returned (never
    /// decoded or re-encoded: Google's OPC specification has the issuer's base64 text, as a byte
    /// array, handed to `setOpaquePaymentCard`, and an issuer may send base64url or a JWE's
    /// dotted parts); never logged.
    public let opaquePaymentCard: Sensitive<String>
    public var displayName: String?
    public var lastDigits: String?
    /// e.g. VISA, MASTERCARD (Android's `TapAndPay.CARD_NETWORK_*`).
    public var network: String?
    /// e.g. VISA, MASTERCARD (Android's `TapAndPay.TOKEN_PROVIDER_*`).
    public var tokenServiceProvider: String?
    public var userAddress: UserAddress?

    public init(opaquePaymentCard: String, displayName: String? = nil, lastDigits: String? = nil, network: String? = nil,
                tokenServiceProvider: String? = nil, userAddress: UserAddress? = nil) throws(GatewayError) {
        try WalletPayloadText.check(opaquePaymentCard, "the issuer's opaque payment card")
        if let lastDigits, !InputRules.isLastFour(lastDigits) {
            throw GatewayError(.upstreamProtocolError, "last digits are not 4 digits", condition: .malformed)
        }
        self.opaquePaymentCard = Sensitive(opaquePaymentCard)
        self.displayName = InputRules.phoneText(displayName)
        self.lastDigits = lastDigits
        self.network = InputRules.phoneText(network, maxLength: 64)
        self.tokenServiceProvider = InputRules.phoneText(tokenServiceProvider, maxLength: 64)
        self.userAddress = userAddress
    }
}
