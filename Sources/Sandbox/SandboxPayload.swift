import Crypto
import Foundation

/// A payload of production's shapes: a real fresh P-256 public key (65 bytes, 0x04...), random
/// ciphertext bytes and an activation value. The cryptography issue makes the ciphertext real.
struct SandboxPayload {
    let activationData: Data
    let encryptedPassData: Data
    let ephemeralPublicKey: Data

    static func make() -> SandboxPayload {
        let ephemeral = P256.KeyAgreement.PrivateKey()
        var generator = SystemRandomNumberGenerator()
        let ciphertext = Data((0..<160).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        let activation = "MBPAC-1-FK-\(Int.random(in: 100_000...999_999)).1--TDEA-" +
            (0..<20).map { _ in String(format: "%02X", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
        return SandboxPayload(
            activationData: Data(activation.utf8),
            encryptedPassData: ciphertext,
            ephemeralPublicKey: ephemeral.publicKey.x963Representation)
    }
}
