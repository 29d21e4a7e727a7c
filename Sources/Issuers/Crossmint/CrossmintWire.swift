import Foundation
import ProvisioningCore

/// Crossmint's card API as it names things, with its uncertain points. Source: seed 004.
enum CrossmintWire {
    /// Apple Watch: this contract has no field for the device type or PassKit's
    /// primaryAccountIdentifier, so neither is sent (both are validated and audited by the gateway).

    static let apiKeyHeader = "X-API-KEY"

    /// Relative to the configured base (`https://www.crossmint.com/api/v1`).
    static func applePayPayloadPath(cardID: String) -> [String] {
        ["cards", cardID, "apple-pay-payload"]
    }

    /// UNCERTAIN (the seed says to confirm the shape): how the device data travels on a GET.
    /// Taken as query parameters `certificate` (the leaf), `nonce`, `nonceSignature`, each
    /// base64url without padding.
    static let queryEncoding = BinaryEncoding.base64URL
    static func query(_ request: ApplePayProvisioningRequest) -> [(String, String)] {
        [("certificate", queryEncoding.encode(request.leafCertificate.value)),
         ("nonce", queryEncoding.encode(request.nonce.value)),
         ("nonceSignature", queryEncoding.encode(request.nonceSignature.value))]
    }

    struct PayloadResponse: Decodable {
        let encryptedPassData: String
        let activationData: String
        let ephemeralPublicKey: String
    }
}
