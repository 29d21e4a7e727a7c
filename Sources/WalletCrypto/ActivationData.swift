import Crypto
import Foundation

/// Activation data is a network one-time password Apple does not interpret. A real Visa or
/// Mastercard value needs the issuer's network keys (an HSM); this seam lets one plug in.
public protocol ActivationDataProvider: Sendable {
    func activationData(cardID: String, expiration: String, nonce: Data) -> Data
}

/// The default: HMAC-SHA256 over (card id, expiry, nonce) under a key from the configuration.
public struct HMACActivationData: ActivationDataProvider {
    private let key: SymmetricKey
    public init(key: SymmetricKey) { self.key = key }

    public func activationData(cardID: String, expiration: String, nonce: Data) -> Data {
        var message = Data(cardID.utf8)
        message.append(0)
        message += Data(expiration.utf8)
        message.append(0)
        message += nonce
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key))
    }
}
