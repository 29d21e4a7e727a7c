import Foundation

/// A wallet token of a card (a card in Apple Pay on one phone, in Google Pay on another), as the
/// issuer lists it, in the unified vocabulary.
public struct WalletToken: Sendable, Equatable {
    public enum Status: String, Sendable, Codable, CaseIterable {
        case active, suspended, deactivated, pending, unknown
    }

    /// The issuer's id for the token, which the transition routes name.
    public let tokenID: String
    public var status: Status
    /// `apple_pay`, `google_pay`, `samsung_pay`, or `other` (a merchant's token, an unknown wallet).
    public var wallet: String
    public var tokenUniqueReference: String?
    public var deviceType: String?
    public var createdAt: Date?

    public init(tokenID: String, status: Status, wallet: String, tokenUniqueReference: String? = nil, deviceType: String? = nil,
                createdAt: Date? = nil) {
        self.tokenID = tokenID
        self.status = status
        self.wallet = wallet
        self.tokenUniqueReference = tokenUniqueReference
        self.deviceType = deviceType
        self.createdAt = createdAt
    }

    /// A token id as the API takes it in a path: what Marqeta (36 characters) and Lithic (a UUID) give.
    /// Not dots alone, as card ids: `.` and `..` are path segments to URL tools, and a token id
    /// becomes a segment of the issuer's path (the token list must also name it first).
    /// The same rule as a card id's (`InputRules.isCardID`): its characters and bound, and never a
    /// card number, since a token id is logged, audited and echoed as a card id is (a device
    /// account number pasted as one would be everywhere the product promises card numbers never are).
    public static func isTokenID(_ text: String) -> Bool {
        InputRules.isCardID(text)
    }
    public static let tokenIDRule = "token_id: 1 to 128 characters of A-Z, a-z, 0-9, '_', '.', ':', '-', not dots alone, and never a card number"
}

/// What support asks of a token: stop it for a while (a phone is lost), let it work again, or end it.
public enum WalletTokenAction: String, Sendable, CaseIterable {
    case suspend, resume, deactivate
}

/// What the issuer did with a transition.
public struct WalletTokenTransition: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        /// The issuer applied it: `status` is the token's state now.
        case applied
        /// The issuer took the request and applies it later (Lithic): `status` is the state it was in.
        case requested
    }
    public let outcome: Outcome
    public let status: WalletToken.Status

    public init(outcome: Outcome, status: WalletToken.Status) {
        self.outcome = outcome
        self.status = status
    }
}
