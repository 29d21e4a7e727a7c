import Foundation
import ProvisioningCore

/// Bridge's Cards API exactly as it names things (snake_case), and every uncertain point of its
/// contract, so each is a one-line change once confirmed. Sources: shared/UPSTREAMS.md, seeds 000/002.
enum BridgeWire {
    /// Apple Watch: this contract has no field for the device type or PassKit's
    /// primaryAccountIdentifier, so neither is sent (both are validated and audited by the gateway).

    static let apiKeyHeader = "Api-Key"
    /// Required on this endpoint; the gateway keeps it the same across retries of one provisioning.
    static let idempotencyKeyHeader = "Idempotency-Key"

    /// The OpenAPI file's path. UNCERTAIN: the guide shortens it to `/card_accounts/{id}/...`;
    /// the OpenAPI file (taken here) has the customer prefix, so a Bridge card needs both ids.
    static func applePayPath(customerID: String, cardAccountID: String) -> [String] {
        ["customers", customerID, "card_accounts", cardAccountID, "create_mobile_wallet_provisioning_request"]
    }

    struct ProvisioningRequest: Encodable {
        let walletProvider = "apple_pay"
        let applePay: ApplePayRequest
        enum CodingKeys: String, CodingKey {
            case walletProvider = "wallet_provider"
            case applePay = "apple_pay"
        }
    }

    /// `encoding` applies to all four fields; Bridge reads an absent encoding as hex.
    struct ApplePayRequest: Encodable {
        let encoding: String
        let leafCert: String
        let subordinateCert: String
        let nonce: String
        let nonceSignature: String
        enum CodingKeys: String, CodingKey {
            case encoding
            case leafCert = "leaf_cert"
            case subordinateCert = "subordinate_cert"
            case nonce
            case nonceSignature = "nonce_signature"
        }
    }

    struct ProvisioningResponse: Decodable {
        let walletProvider: String?
        let applePay: ApplePayResponse
        enum CodingKeys: String, CodingKey {
            case walletProvider = "wallet_provider"
            case applePay = "apple_pay"
        }
    }

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

    /// Google Pay: `{"wallet_provider":"google_pay","google_pay":{"client_wallet_account_id","client_device_id"}}`,
    /// both required ("value returned by Google Pay for use with Visa"), same path as Apple Pay.
    struct GooglePayProvisioningRequest: Encodable {
        let walletProvider = "google_pay"
        let googlePay: GooglePayRequest
        enum CodingKeys: String, CodingKey {
            case walletProvider = "wallet_provider"
            case googlePay = "google_pay"
        }
    }

    struct GooglePayRequest: Encodable {
        let clientWalletAccountID: String
        let clientDeviceID: String
        enum CodingKeys: String, CodingKey {
            case clientWalletAccountID = "client_wallet_account_id"
            case clientDeviceID = "client_device_id"
        }
    }

    /// UNCERTAIN: Bridge documents no length for the Google ids; Google's wallet account and
    /// stable hardware ids are well under 64 characters, so longer ones are refused before calling.
    static let maxGoogleIDLength = 64

    /// `{"wallet_provider":"google_pay","google_pay":{"opaque_payment_card":"<base64 or base64url>"}}`;
    /// Bridge gives no display fields.
    struct GooglePayProvisioningResponse: Decodable {
        let googlePay: GooglePayResponse
        enum CodingKeys: String, CodingKey { case googlePay = "google_pay" }
    }

    struct GooglePayResponse: Decodable {
        let opaquePaymentCard: String
        enum CodingKeys: String, CodingKey { case opaquePaymentCard = "opaque_payment_card" }
    }

    /// 400/401: the `Error` schema's `{"code","message","source":{"location","key"}}`, or the
    /// published examples' flat `{"code","message","location"?,"name"}` where `name` names the
    /// fields or header at fault (`"first_name,ssn"`, `"Api-Key"`); 500: `{"errors":[{"code","message"}]}`.
    struct ErrorBody: Decodable {
        struct Source: Decodable {
            let location: String?
            let key: String?
        }
        struct Item: Decodable {
            let code: String?
        }
        let code: String?
        let source: Source?
        let name: String?
        let errors: [Item]?

        /// The code and the fields at fault, for the error's detail: only names (letters, digits,
        /// `_`, `-`, `.`, `,`), 100 characters in all, never the message text. A code that does not
        /// read as one (`UpstreamStatus.shownCode`) is left out and the fields are still named (as
        /// many as fit); the whole is checked again where every connector's code is.
        var summary: String? {
            if code != nil || source?.key != nil || name != nil {
                let shown = UpstreamStatus.shownCode(code)
                let room = 100 - (shown.map { $0.count + ", field ".count } ?? "field ".count)
                let fields = (source?.key ?? name).map { String($0.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "_-.,".contains($0)) }.prefix(max(0, room))) }
                let parts = [shown, fields.flatMap { $0.isEmpty ? nil : "field \($0)" }].compactMap { $0 }
                if !parts.isEmpty { return parts.joined(separator: ", ") }
            }
            return errors?.compactMap(\.code).first
        }
    }

    /// UNCERTAIN: the OpenAPI file says "always Base64", the guide's example is a plain Visa
    /// `MBPAC-...` string. A Visa value, or anything that is not base64, is taken as its UTF-8 bytes.
    static func activationData(_ text: String) -> Data? {
        if text.hasPrefix("MBPAC-") { return Data(text.utf8) }
        if let bytes = PayloadText.lenientBase64(text) { return bytes }
        return text.isEmpty ? nil : Data(text.utf8)
    }
}
