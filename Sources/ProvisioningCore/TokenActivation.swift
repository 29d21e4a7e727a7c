import Foundation

/// Activating a wallet token from the issuer's app: the card network asks the cardholder to
/// confirm in the app (an MDES deeplink carrying the pass's serialNumber); the app finds the pass,
/// reads its deviceAccountIdentifier and sends it as the token unique reference.
public struct TokenActivationRequest: Sendable, Equatable {
    /// MDES token unique references are 48 characters (e.g. `DWSPMC0000000001...`); the unified
    /// API takes up to 64, and each upstream may accept less.
    public static let maxReferenceLength = 64

    public let tokenUniqueReference: String

    public init(tokenUniqueReference: String) throws(GatewayError) {
        guard !tokenUniqueReference.isEmpty else { throw GatewayError(.invalidRequest, "token_unique_reference: required") }
        guard tokenUniqueReference.count <= Self.maxReferenceLength else {
            throw GatewayError(.invalidRequest,
                "token_unique_reference: at most \(Self.maxReferenceLength) characters (got \(tokenUniqueReference.count))")
        }
        guard tokenUniqueReference.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw GatewayError(.invalidRequest, "token_unique_reference: printable ASCII without spaces")
        }
        // A reference is logged, audited and echoed: a card number pasted as one would leak
        // everywhere it goes (an MDES reference's digits follow letters, so it never reads as one).
        guard !InputRules.holdsCardNumber(tokenUniqueReference) else {
            throw GatewayError(.invalidRequest, "token_unique_reference: never a card number (the pass's deviceAccountIdentifier, not its card's number)")
        }
        self.tokenUniqueReference = tokenUniqueReference
    }
}

public struct TokenActivationResult: Sendable, Equatable {
    public enum Outcome: String, Sendable, CaseIterable {
        /// The token is active: the only success.
        case approved
        case declined
        case failed
    }

    public let outcome: Outcome
    public let tokenUniqueReference: String
    public let cardLast4: String?
    /// The issuer's comment, for support staff; never card data (`InputRules.phoneText`: left out
    /// when it holds a card number, a control character or more than 256 characters).
    public let comment: String?

    public init(outcome: Outcome, tokenUniqueReference: String, cardLast4: String?, comment: String?) {
        self.outcome = outcome
        self.tokenUniqueReference = tokenUniqueReference
        self.cardLast4 = cardLast4
        self.comment = InputRules.phoneText(comment)
    }
}
