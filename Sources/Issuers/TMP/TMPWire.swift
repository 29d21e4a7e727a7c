import Foundation
import ProvisioningCore

/// TMP's push-provisioning API as it names things (camelCase), with its uncertain points.
/// Sources: shared/UPSTREAMS.md, seeds 001/003.
enum TMPWire {
    /// Apple Watch: this contract has no field for the device type or PassKit's
    /// primaryAccountIdentifier, so neither is sent (both are validated and audited by the gateway).

    static let signedCardsPath = ["issuer", "push-provisioning", "signed-cards"]
    static let activationsPath = ["issuer", "push-provisioning", "tokens", "activations"]

    /// UNCERTAIN: the seeds do not say how TMP authenticates; the config chooses (`TMPAuth`).
    static func authHeader(_ auth: TMPAuth, token: String) -> (String, String) {
        switch auth {
        case .bearer: ("Authorization", "Bearer \(token)")
        case .header(let name): (name, token)
        }
    }

    /// UNCERTAIN: the card field's name (`cardId`), and whether `certificate` is the leaf only
    /// (taken as the leaf, certificates[0]).
    struct SignCardRequest: Encodable {
        let cardId: String
        let certificate: String
        let nonce: String
        let nonceSignature: String

        init(cardId: String, leafCertificate: Data, nonce: Data, nonceSignature: Data) {
            self.cardId = cardId
            self.certificate = TMPWire.requestBinary(leafCertificate)
            self.nonce = TMPWire.requestBinary(nonce)
            self.nonceSignature = TMPWire.requestBinary(nonceSignature)
        }
    }

    /// UNCERTAIN: how the request's binary fields are encoded. The seeds only base64-DECODE TMP's
    /// answer and never show the request's encoding (UPSTREAMS.md, TMP); base64 is the working
    /// assumption. This is the one place to change it (`BinaryEncoding.hex` would be the other reading).
    static func requestBinary(_ bytes: Data) -> String {
        bytes.base64EncodedString()
    }

    /// Note `encryptedData`, not `encryptedPassData`.
    struct SignCardResponse: Decodable {
        let activationData: String
        let ephemeralPublicKey: String
        let encryptedData: String
    }

    /// UNCERTAIN: the seeds show signed-cards for Apple Pay only. Google Pay is taken to use the
    /// same endpoint with `walletProvider: GOOGLE_PAY` and Google's two ids, answering the fields
    /// of Android's push tokenize request (base64 `opaquePaymentCard`, display fields optional).
    struct SignCardGoogleRequest: Encodable {
        let cardId: String
        let walletProvider = "GOOGLE_PAY"
        let clientWalletAccountId: String
        let clientDeviceId: String
    }

    struct SignCardGoogleResponse: Decodable {
        struct Address: Decodable {
            let name: String?
            let address1: String?
            let address2: String?
            let city: String?
            let state: String?
            let postalCode: String?
            let country: String?
            let phone: String?
        }
        let opaquePaymentCard: String
        let displayName: String?
        let lastDigits: String?
        let network: String?
        let tokenServiceProvider: String?
        let userAddress: Address?
    }

    /// UNCERTAIN: no documented limit; Google's ids fit in 64 characters (token references are capped at 64 by the API).
    static let maxIDLength = 64

    /// `{"tokenUniqueReference":"..."}`.
    struct ActivationRequest: Encodable {
        let tokenUniqueReference: String
    }

    /// `issuerMobileAppAuthResponse` is APPROVED, DECLINED or FAILED; only APPROVED means the token
    /// is active. Anything else is not a documented answer (read as a string, refused by the connector).
    struct ActivationResponse: Decodable {
        let tokenUniqueReference: String?
        let cardLast4Digits: String?
        let issuerMobileAppAuthResponse: String
        let comment: String?
    }

    /// UNCERTAIN: TMP's error body is not documented; these are the fields read when present.
    /// The HTTP status decides the unified code either way.
    struct ErrorBody: Decodable {
        let errorCode: String?
    }
}
