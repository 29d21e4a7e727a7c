import Crypto
import Foundation
import WalletCrypto
import X509

/// The card data a simulated issuer holds for a demo card.
public struct DemoCard: Sendable, Equatable {
    public let number: String
    public let name: String
    public let expiryMonth: Int
    public let expiryYear: Int

    public init(number: String, name: String, expiryMonth: Int, expiryYear: Int) {
        self.number = number
        self.name = name
        self.expiryMonth = expiryMonth
        self.expiryYear = expiryYear
    }

    /// Visa's public test number, for simulators given no card data.
    public static let testVisa = DemoCard(number: "4111111111111111", name: "Sandbox Cardholder", expiryMonth: 12, expiryYear: 2030)
}

/// A payload exactly as production makes it: ECC_V2 for the device's leaf key over the card's data
/// and the device's nonce, through WalletCrypto. Only the activation value is a sandbox stand-in.
struct SandboxPayload {
    let activationData: Data
    let encryptedPassData: Data
    let ephemeralPublicKey: Data

    enum Failure: Error {
        case leafUnusable
    }

    static func make(leafDER: Data, nonce: Data, nonceSignature: Data, card: DemoCard) throws -> SandboxPayload {
        guard let leaf = try? Certificate(derEncoded: Array(leafDER)), let signingKey = P256.Signing.PublicKey(leaf.publicKey),
              let leafKey = try? P256.KeyAgreement.PublicKey(rawRepresentation: signingKey.rawRepresentation)
        else { throw Failure.leafUnusable }
        let plaintext = PassPlaintext(primaryAccountNumber: card.number, name: card.name, expiryMonth: card.expiryMonth,
                                      expiryYear: card.expiryYear, nonce: nonce, nonceSignature: nonceSignature)
        let encrypted = try ECCV2.encrypt(try plaintext.encoded(), for: leafKey)
        let activation = "MBPAC-1-FK-\(Int.random(in: 100_000...999_999)).1--TDEA-"
            + (0..<20).map { _ in String(format: "%02X", UInt8.random(in: .min ... .max)) }.joined()
        return SandboxPayload(activationData: Data(activation.utf8), encryptedPassData: encrypted.encryptedPassData,
                              ephemeralPublicKey: encrypted.ephemeralPublicKey)
    }
}

/// A sandbox opaque payment card for Google Pay: what an issuer would encrypt for Google is opaque to
/// the gateway and the app, so the simulators answer deterministic bytes bound to the card and the
/// wallet (never the card number itself).
enum SandboxOPC {
    static func make(card: DemoCard, walletAccountID: String, deviceID: String) -> Data {
        var bytes = Data("OPC1".utf8)
        for round in 0..<3 {
            bytes += Data(SHA256.hash(data: Data("\(round)|\(card.number.suffix(4))|\(walletAccountID)|\(deviceID)".utf8)))
        }
        return bytes
    }

    static func network(_ card: DemoCard) -> String {
        switch card.number.first {
        case "4": "VISA"
        case "5", "2": "MASTERCARD"
        case "3": "AMEX"
        default: "OTHER"
        }
    }
}
