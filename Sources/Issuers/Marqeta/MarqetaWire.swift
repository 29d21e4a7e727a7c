import Foundation
import ProvisioningCore

/// Marqeta's digital wallet provision requests exactly as its Core API swagger names them
/// (`upstream-specs/marqeta-core-api-swagger.json`, basePath `/v3`; UPSTREAMS.md), and every
/// uncertain point, so each is a one-line change once confirmed.
enum MarqetaWire {
    static let applePayPath = ["digitalwalletprovisionrequests", "applepay"]
    static let googlePayPath = ["digitalwalletprovisionrequests", "androidpay"]
    static let samsungPayPath = ["digitalwalletprovisionrequests", "samsungpay"]
    /// `GET /digitalwallettokens/card/{card_token}`, paged by `count` and `start_index`.
    static func tokensPath(cardToken: String) -> [String] { ["digitalwallettokens", "card", cardToken] }
    static let transitionsPath = ["digitalwallettokentransitions"]
    /// Tokens asked for per page, and how many pages are read before the list is cut (a card has
    /// a handful of tokens; this bounds a misbehaving upstream).
    static let tokensPageSize = 50
    static let maxTokenPages = 10

    /// HTTP Basic: the application token as user, the admin access token as password.
    static func authorization(applicationToken: String, accessToken: String) -> (String, String) {
        ("Authorization", "Basic " + Data("\(applicationToken):\(accessToken)".utf8).base64EncodedString())
    }

    /// The swagger's success answer is 201 Created. UNCERTAIN: whether a 200 is ever sent; it is
    /// read the same way rather than refused.
    static let successStatuses: Set<Int> = [201, 200]

    /// `device_type` enum: MOBILE_PHONE, WATCH, TABLET, WEARABLE_DEVICE, HOUSEHOLD_DEVICE, AUTOMOBILE_DEVICE.
    static func deviceType(_ type: DeviceType) -> String {
        switch type {
        case .phone: "MOBILE_PHONE"
        case .watch: "WATCH"
        case .tablet: "TABLET"
        }
    }

    /// UNCERTAIN: the unified Google Pay request names no device; Android push provisioning runs
    /// on the phone that receives the token, so Google Pay requests say MOBILE_PHONE.
    static let googlePayDeviceType = deviceType(.phone)

    /// `provisioning_app_version`: minLength 1, maxLength 50. Apple Pay sends the request's
    /// `device.app_version` when it has one, else the config's `wire.provisioning_app_version`;
    /// the unified Google Pay request carries no device, so Google Pay always sends the config's.
    static let maxAppVersionLength = 50
    static func isValidAppVersion(_ version: String) -> Bool {
        (1...maxAppVersionLength).contains(version.count) && version.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
    }

    /// `wallet_account_id` maxLength 50, `device_id` maxLength 24 (androidpay request).
    static let maxWalletAccountIDLength = 50
    static let maxDeviceIDLength = 24

    /// `digital_wallet_apple_pay_provision_request`, all six required. `certificates` is the
    /// PassKit chain, leaf first, each base64 DER; `nonce` and `nonce_signature` base64.
    struct ApplePayRequest: Encodable {
        let cardToken: String
        let deviceType: String
        let provisioningAppVersion: String
        let certificates: [String]
        let nonce: String
        let nonceSignature: String
        enum CodingKeys: String, CodingKey {
            case cardToken = "card_token"
            case deviceType = "device_type"
            case provisioningAppVersion = "provisioning_app_version"
            case certificates, nonce
            case nonceSignature = "nonce_signature"
        }
    }

    /// `digital_wallet_apple_pay_provision_response`: the three payload fields are base64
    /// (`card_token`, `created_time`, `last_modified_time` are not needed by a phone).
    struct ApplePayResponse: Decodable {
        let activationData: String
        let encryptedPassData: String
        let ephemeralPublicKey: String
        enum CodingKeys: String, CodingKey {
            case activationData = "activation_data"
            case encryptedPassData = "encrypted_pass_data"
            case ephemeralPublicKey = "ephemeral_public_key"
        }
    }

    /// `digital_wallet_android_pay_provision_request`, all five required.
    struct GooglePayRequest: Encodable {
        let cardToken: String
        let deviceType: String
        let provisioningAppVersion: String
        let walletAccountID: String
        let deviceID: String
        enum CodingKeys: String, CodingKey {
            case cardToken = "card_token"
            case deviceType = "device_type"
            case provisioningAppVersion = "provisioning_app_version"
            case walletAccountID = "wallet_account_id"
            case deviceID = "device_id"
        }
    }

    /// `digital_wallet_android_pay_provision_response.push_tokenize_request_data`
    /// (`android_push_tokenize_request_data`): Android's PushTokenizeRequest fields.
    /// `opaque_payment_card` is read as base64 (UNCERTAIN: the swagger types it as a string only).
    struct GooglePayResponse: Decodable {
        let pushTokenizeRequestData: PushTokenizeRequestData
        enum CodingKeys: String, CodingKey { case pushTokenizeRequestData = "push_tokenize_request_data" }
    }

    struct PushTokenizeRequestData: Decodable {
        let displayName: String?
        let lastDigits: String?
        let network: String?
        let tokenServiceProvider: String?
        let opaquePaymentCard: String
        let userAddress: Address?
        enum CodingKeys: String, CodingKey {
            case displayName = "display_name"
            case lastDigits = "last_digits"
            case network
            case tokenServiceProvider = "token_service_provider"
            case opaquePaymentCard = "opaque_payment_card"
            case userAddress = "user_address"
        }
    }

    /// `AndroidPushTokenRequestAddress`: both `zip` and `postal_code` are listed; either is read.
    struct Address: Decodable {
        let name: String?
        let address1: String?
        let address2: String?
        let city: String?
        let state: String?
        let zip: String?
        let postalCode: String?
        let country: String?
        let phone: String?
        enum CodingKeys: String, CodingKey {
            case name, address1, address2, city, state, zip
            case postalCode = "postal_code"
            case country, phone
        }
    }

    /// `digital_wallet_samsung_pay_provision_request`, all five required: like Android Pay's,
    /// with `wallet_user_id` (max 50) for the wallet account.
    struct SamsungPayRequest: Encodable {
        let cardToken: String
        let deviceType: String
        let provisioningAppVersion: String
        let walletUserID: String
        let deviceID: String
        enum CodingKeys: String, CodingKey {
            case cardToken = "card_token"
            case deviceType = "device_type"
            case provisioningAppVersion = "provisioning_app_version"
            case walletUserID = "wallet_user_id"
            case deviceID = "device_id"
        }
    }

    /// `digital_wallet_samsung_pay_provision_response.push_tokenize_request_data`
    /// (`samsung_push_tokenize_request_data`): `extra_provision_payload` is what Samsung Pay's
    /// add-card call takes, passed on exactly as received.
    struct SamsungPayResponse: Decodable {
        struct Data: Decodable {
            let displayName: String?
            let lastDigits: String?
            let network: String?
            let tokenServiceProvider: String?
            let extraProvisionPayload: String
            let cardType: String?
            enum CodingKeys: String, CodingKey {
                case displayName = "display_name"
                case lastDigits = "last_digits"
                case network
                case tokenServiceProvider = "token_service_provider"
                case extraProvisionPayload = "extra_provision_payload"
                case cardType = "card_type"
            }
        }
        let pushTokenizeRequestData: Data
        enum CodingKeys: String, CodingKey { case pushTokenizeRequestData = "push_tokenize_request_data" }
    }

    /// `DigitalWalletTokenListResponse`: a page of `digital_wallet_token`s.
    struct TokenList: Decodable {
        let data: [Token]?
        let isMore: Bool?
        enum CodingKeys: String, CodingKey {
            case data
            case isMore = "is_more"
        }
    }

    /// `digital_wallet_token`: what the list gives of each token.
    struct Token: Decodable {
        struct Device: Decodable { let type: String? }
        struct Provider: Decodable {
            let tokenReferenceID: String?
            let tokenRequestorName: String?
            enum CodingKeys: String, CodingKey {
                case tokenReferenceID = "token_reference_id"
                case tokenRequestorName = "token_requestor_name"
            }
        }
        let token: String
        /// The card the token is for (`digital_wallet_token.card_token`).
        let cardToken: String?
        let state: String?
        let createdTime: String?
        let device: Device?
        let tokenServiceProvider: Provider?
        enum CodingKeys: String, CodingKey {
            case token, state, device
            case cardToken = "card_token"
            case createdTime = "created_time"
            case tokenServiceProvider = "token_service_provider"
        }
    }

    /// The token states (UPSTREAMS.md: `REQUESTED`, `REQUEST_DECLINED`, `ACTIVE`, `SUSPENDED`,
    /// `TERMINATED`) in the unified vocabulary; a declined request never became a usable token.
    static func status(_ state: String?) -> WalletToken.Status {
        switch state {
        case "ACTIVE": .active
        case "SUSPENDED": .suspended
        case "TERMINATED", "REQUEST_DECLINED": .deactivated
        case "REQUESTED": .pending
        default: .unknown
        }
    }

    /// UNCERTAIN: the swagger types `token_requestor_name` as a free string; these are the names
    /// Marqeta's guides show for the three wallets. Anything else is `other`.
    static func wallet(_ requestor: String?) -> String {
        switch requestor?.uppercased() {
        case "APPLE_PAY", "APPLE": "apple_pay"
        case "GOOGLE_PAY", "ANDROID_PAY", "GOOGLE": "google_pay"
        case "SAMSUNG_PAY", "SAMSUNG": "samsung_pay"
        default: "other"
        }
    }

    /// `digital_wallet_token_transition_request`: the token, the target state (`ACTIVE`,
    /// `SUSPENDED`, `TERMINATED`), the channel `API`, and a reason code.
    struct TransitionRequest: Encodable {
        struct TokenHash: Encodable { let token: String }
        let digitalWalletToken: TokenHash
        let state: String
        let reasonCode: String
        let channel: String
        enum CodingKeys: String, CodingKey {
            case digitalWalletToken = "digital_wallet_token"
            case state
            case reasonCode = "reason_code"
            case channel
        }
    }

    static func state(for action: WalletTokenAction) -> String {
        switch action {
        case .suspend: "SUSPENDED"
        case .resume: "ACTIVE"
        case .deactivate: "TERMINATED"
        }
    }

    /// UNCERTAIN: the swagger lists `reason_code` "00" to "32" without their meanings; "01" is
    /// taken as "requested by the issuer/program" for every support-initiated transition.
    static let transitionReasonCode = "01"

    /// `digital_wallet_token_transition_response`: the state the token is in after it, and the
    /// token it acted on (`digital_wallet_token_hash`: its `token`, and its `card_token` when given).
    /// Both `digital_wallet_token` and its `token` are required by the swagger; an answer without
    /// them could not be checked against the token asked about, so it does not decode (502, the
    /// outcome unknown) instead of reading as applied (the connector audit).
    struct TransitionResponse: Decodable {
        let state: String
        let digitalWalletToken: TokenHash

        struct TokenHash: Decodable {
            let token: String
            let cardToken: String?
            enum CodingKeys: String, CodingKey {
                case token
                case cardToken = "card_token"
            }
        }

        enum CodingKeys: String, CodingKey {
            case state
            case digitalWalletToken = "digital_wallet_token"
        }
    }

    /// The swagger documents 400, 404 (card not found) and 500 here without a body schema; its
    /// error definition elsewhere (`error_message_from_web_push_provisioning_request`) is
    /// `{"error_code","error_message"}`, read when present. The HTTP status decides the code.
    struct ErrorBody: Decodable {
        let errorCode: String?
        enum CodingKeys: String, CodingKey { case errorCode = "error_code" }
    }
}
