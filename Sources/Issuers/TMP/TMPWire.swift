import Foundation
import ProvisioningCore

/// TMP's push-provisioning API as it names things (camelCase), with its uncertain points.
/// Sources: shared/UPSTREAMS.md, seeds 001/003.
enum TMPWire {
    static let signedCardsPath = ["issuer", "push-provisioning", "signed-cards"]

    /// UNCERTAIN: the seeds do not say how TMP authenticates; the config chooses.
    enum Auth: Sendable, Equatable {
        case bearer
        case header(String)

        init?(option: String?) {
            switch option {
            case nil, "bearer"?: self = .bearer
            case let value? where value.hasPrefix("header:") && value.count > 7: self = .header(String(value.dropFirst(7)))
            default: return nil
            }
        }

        func header(token: String) -> (String, String) {
            switch self {
            case .bearer: ("Authorization", "Bearer \(token)")
            case .header(let name): (name, token)
            }
        }
    }

    /// UNCERTAIN: the card field's name (`cardId`), and whether `certificate` is the leaf only
    /// (taken as the leaf, certificates[0]). All binary fields are base64, as the seed's Swift
    /// code base64-encodes `Data`.
    struct SignCardRequest: Encodable {
        let cardId: String
        let certificate: String
        let nonce: String
        let nonceSignature: String
    }

    /// Note `encryptedData`, not `encryptedPassData`.
    struct SignCardResponse: Decodable {
        let activationData: String
        let ephemeralPublicKey: String
        let encryptedData: String
    }

    /// UNCERTAIN: TMP's error body is not documented; these are the fields read when present.
    /// The HTTP status decides the unified code either way.
    struct ErrorBody: Decodable {
        let errorCode: String?
    }
}
