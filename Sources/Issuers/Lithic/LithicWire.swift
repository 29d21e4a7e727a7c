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
    static let samsungPay = "SAMSUNG_PAY"

    /// `GET /v1/tokenizations?card_token=...`, cursor-paged (`page_size`, `starting_after`).
    static let tokenizationsPath = ["v1", "tokenizations"]
    static let tokenizationsPageSize = 50
    static let maxTokenizationPages = 10
    /// `POST /v1/tokenizations/{token}/pause|unpause|deactivate`: no body, no body in the answer,
    /// ASYNCHRONOUS (a success means the request reached the card network; the status changes later).
    static func transitionPath(token: String, action: WalletTokenAction) -> [String] {
        let verb = switch action {
        case .suspend: "pause"
        case .resume: "unpause"
        case .deactivate: "deactivate"
        }
        return ["v1", "tokenizations", token, verb]
    }

    /// A tokenization's `status` (`ACTIVE`, `DEACTIVATED`, `INACTIVE`, `PAUSED`, `PENDING_2FA`,
    /// `PENDING_ACTIVATION`, `UNKNOWN`) in the unified vocabulary. `INACTIVE` is not yet active,
    /// not ended: Lithic's API reference lets "Activate tokenization" (and resending the activation
    /// code) act only on `INACTIVE`, `PENDING_ACTIVATION` and `PENDING_2FA` tokenizations, and puts
    /// them in `ACTIVE`. Only `DEACTIVATED` is final.
    static func status(_ status: String?) -> WalletToken.Status {
        switch status {
        case "ACTIVE": .active
        case "PAUSED": .suspended
        case "DEACTIVATED": .deactivated
        case "INACTIVE", "PENDING_2FA", "PENDING_ACTIVATION": .pending
        default: .unknown
        }
    }

    /// `token_requestor_name` (`APPLE_PAY`, `GOOGLE`, `SAMSUNG_PAY`, merchants' names) as a wallet.
    static func wallet(_ requestor: String?) -> String {
        switch requestor?.uppercased() {
        case "APPLE_PAY": "apple_pay"
        case "GOOGLE", "GOOGLE_PAY", "ANDROID_PAY": "google_pay"
        case "SAMSUNG_PAY": "samsung_pay"
        default: "other"
        }
    }

    /// A page of tokenizations: `{"data":[...],"has_more":...}`. UNCERTAIN: the page envelope is
    /// Lithic's usual cursor page (`data`, `has_more`); UPSTREAMS.md names only the paging parameters.
    struct TokenizationPage: Decodable {
        let data: [Tokenization]
        let hasMore: Bool?
        enum CodingKeys: String, CodingKey {
            case data
            case hasMore = "has_more"
        }
    }

    struct Tokenization: Decodable {
        let token: String
        let cardToken: String?
        let status: String?
        let tokenRequestorName: String?
        let tokenUniqueReference: String?
        let tokenizationChannel: String?
        let createdAt: String?
        enum CodingKeys: String, CodingKey {
            case token, status
            case cardToken = "card_token"
            case tokenRequestorName = "token_requestor_name"
            case tokenUniqueReference = "token_unique_reference"
            case tokenizationChannel = "tokenization_channel"
            case createdAt = "created_at"
        }
    }

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

    /// Samsung (on Visa): as Google Pay, with `digital_wallet: SAMSUNG_PAY`.
    struct SamsungPayRequest: Encodable {
        let digitalWallet = LithicWire.samsungPay
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
