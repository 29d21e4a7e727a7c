import Foundation
import ProvisioningCore

/// Lithic's card provisioning exactly as its API names it (snake_case request, camelCase Apple
/// Pay answer), from UPSTREAMS.md (facts from Lithic's SDKs, generated from its OpenAPI), with
/// every uncertain point.
enum LithicWire {
    /// Apple Watch: this contract has no field for the device type or PassKit's
    /// primaryAccountIdentifier, so neither is sent (both are validated and audited by the gateway).

    /// The raw key, no scheme word.
    static let authorizationHeader = "Authorization"

    /// Relative to the configured base (`https://sandbox.lithic.com`, `https://api.lithic.com`).
    static func provisionPath(cardToken: String) -> [String] { ["v1", "cards", cardToken, "provision"] }

    /// `digital_wallet`: APPLE_PAY, GOOGLE_PAY, SAMSUNG_PAY.
    static let applePay = "APPLE_PAY"
    static let googlePay = "GOOGLE_PAY"

    /// `certificate` is the LEAF only, as the base64 body of its PEM without the BEGIN/END lines,
    /// i.e. base64 of the DER. UNCERTAIN: whether PEM's 64-character line breaks are wanted is not
    /// stated; none are sent.
    static func pemBody(_ der: Data) -> String { der.base64EncodedString() }

    struct ApplePayRequest: Encodable {
        let digitalWallet = LithicWire.applePay
        let certificate: String
        let nonce: String
        let nonceSignature: String
        enum CodingKeys: String, CodingKey {
            case digitalWallet = "digital_wallet"
            case certificate, nonce
            case nonceSignature = "nonce_signature"
        }
    }

    /// Google (on Visa): `client_device_id` and `client_wallet_account_id`. UNCERTAIN: no length
    /// limit is stated; the unified API's 128 characters apply.
    struct GooglePayRequest: Encodable {
        let digitalWallet = LithicWire.googlePay
        let clientDeviceID: String
        let clientWalletAccountID: String
        enum CodingKeys: String, CodingKey {
            case digitalWallet = "digital_wallet"
            case clientDeviceID = "client_device_id"
            case clientWalletAccountID = "client_wallet_account_id"
        }
    }

    /// Apple Pay: `provisioning_payload` is an object `{"activationData","encryptedData","ephemeralPublicKey"}`
    /// (camelCase, base64; note `encryptedData`).
    struct ApplePayResponse: Decodable {
        struct Payload: Decodable {
            let activationData: String
            let encryptedData: String
            let ephemeralPublicKey: String
        }
        let provisioningPayload: Payload
        enum CodingKeys: String, CodingKey { case provisioningPayload = "provisioning_payload" }
    }

    /// Google Pay: `provisioning_payload` is a STRING, base64 of the opaque payload for the wallet;
    /// its bytes are what `PushTokenizeRequest.setOpaquePaymentCard` takes. Lithic gives no display fields.
    struct GooglePayResponse: Decodable {
        let provisioningPayload: String
        enum CodingKeys: String, CodingKey { case provisioningPayload = "provisioning_payload" }
    }

    /// Lithic's answer succeeds with 200.
    static let successStatus = 200

    /// UNCERTAIN: UPSTREAMS.md does not describe Lithic's error body; none is read, and the HTTP
    /// status decides the unified code.
}
