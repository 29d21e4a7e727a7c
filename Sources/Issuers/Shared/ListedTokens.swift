import Foundation
import ProvisioningCore

/// What the gateway keeps of the wallet tokens an issuer listed for a card, the same for every
/// issuer that lists them (Marqeta, Lithic). The listing decides what a tenant may act on (a
/// transition acts only on a token listed for the caller's card) and is shown to the tenant, so
/// nothing in it is taken on trust:
/// - a token that names another card is not this card's, whatever the listing returned (defence in
///   depth: the ownership check rests on it); one that names no card is kept, as the issuers'
///   contracts do not make the field required;
/// - a token id the API could not take back in a path (`WalletToken.isTokenID`) makes the whole
///   listing an `upstream_protocol_error`: the issuer broke its own format, and an id with terminal
///   escapes or 5,000 characters in it is not passed on; one holding a card number is left out
///   alone (the rest of the card's tokens stay reachable);
/// - a token reference or a device type that does not read as one (`UpstreamStatus.shownCode`'s
///   rule for the device type) is left out, not trimmed.
enum ListedTokens {
    struct Listed {
        let cardToken: String?
        let token: WalletToken
    }

    /// A listing that still had pages when the gateway's bound on them was reached.
    /// No condition: a bound of the gateway's own, on one card, is not the issuer's endpoint
    /// failing, and does not count against the breaker every tenant at the account shares (the review).
    static func tooMany(issuer: IssuerID, bound: Int) -> GatewayError {
        GatewayError(.upstreamProtocolError, "\(issuer) lists more than \(bound) wallet tokens for the card; the gateway reads no more than that")
    }

    static func card(_ cardToken: String, _ listed: [Listed], issuer: IssuerID) throws(GatewayError) -> [WalletToken] {
        var kept: [WalletToken] = []
        for entry in listed where entry.cardToken == nil || entry.cardToken == cardToken {
            // A token whose id holds a card number is left out, not passed on; it fails nothing
            // else (support must still reach the card's other tokens, a lost phone's included).
            if InputRules.hasCardIDShape(entry.token.tokenID), InputRules.holdsCardNumber(entry.token.tokenID) { continue }
            guard WalletToken.isTokenID(entry.token.tokenID) else {
                throw GatewayError(.upstreamProtocolError, "\(issuer) listed a wallet token whose id is not in its documented form",
                                   condition: .malformed)
            }
            var token = entry.token
            if let reference = token.tokenUniqueReference, !WalletToken.isTokenID(reference) { token.tokenUniqueReference = nil }
            token.deviceType = UpstreamStatus.shownCode(token.deviceType)
            kept.append(token)
        }
        return kept
    }
}
