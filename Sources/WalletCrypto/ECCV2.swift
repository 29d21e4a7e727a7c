import Crypto
import Foundation

/// Apple Pay in-app provisioning encryption, PKEncryptionScheme.ECC_V2 ("EV_ECC_v2"), as
/// shared/WALLET-CRYPTO.md sets it out: ECDH with the leaf's P-256 key, a one-round NIST SP 800-56A
/// concatenation KDF, AES-256-GCM with a zero IV.
public enum ECCV2 {
    /// 12 zero bytes. The one step with a single source: a production token service provider's
    /// public Java implementation (Apple's own specification is not public). The zero IV is safe
    /// only because every message has a fresh ephemeral key, hence a fresh AES key.
    public static let ivLength = 12
    public static let tagLength = 16
    /// The KDF's AlgorithmID is length-prefixed; PartyUInfo is "Apple".
    static let algorithmID = Data("id-aes256-GCM".utf8)
    static let partyUInfo = Data("Apple".utf8)
    /// The KDF's fixed bytes: the round counter, and OtherInfo up to the ephemeral key.
    static let kdfCounter: [UInt8] = [0, 0, 0, 1]
    static let otherInfoPrefix: [UInt8] = [UInt8(algorithmID.count)] + Array(algorithmID) + Array(partyUInfo)
    static let zeroNonce = try! AES.GCM.Nonce(data: [UInt8](repeating: 0, count: ivLength))

    public struct Payload: Sendable, Equatable {
        /// ciphertext || tag
        public let encryptedPassData: Data
        /// 65 bytes, 04 || X || Y
        public let ephemeralPublicKey: Data

        public init(encryptedPassData: Data, ephemeralPublicKey: Data) {
            self.encryptedPassData = encryptedPassData
            self.ephemeralPublicKey = ephemeralPublicKey
        }
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case badEphemeralKey
        case tooShort
        case authenticationFailed

        public var description: String {
            switch self {
            case .badEphemeralKey: "the ephemeral public key is not an uncompressed P-256 point"
            case .tooShort: "the encrypted pass data is shorter than its tag"
            case .authenticationFailed: "the encrypted pass data does not open with this key"
            }
        }
    }

    /// Encrypts for the leaf certificate's key. `ephemeral` is fresh for every call unless a test
    /// injects one; never reuse one in production.
    public static func encrypt(
        _ plaintext: Data, for recipient: P256.KeyAgreement.PublicKey,
        ephemeral: P256.KeyAgreement.PrivateKey = ECCV2.freshEphemeralKey()
    ) throws -> Payload {
        let ephemeralPublicKey = ephemeral.publicKey.x963Representation
        let key = try symmetricKey(sharedSecret: ephemeral.sharedSecretFromKeyAgreement(with: recipient), ephemeralPublicKey: ephemeralPublicKey)
        let sealed = try AES.GCM.seal(plaintext, using: key, nonce: zeroNonce)
        var encryptedPassData = Data(capacity: plaintext.count + tagLength)
        encryptedPassData.append(sealed.ciphertext)
        encryptedPassData.append(sealed.tag)
        return Payload(encryptedPassData: encryptedPassData, ephemeralPublicKey: ephemeralPublicKey)
    }

    /// A new P-256 key: a scalar drawn uniformly from [1, n-1] (32 bytes from swift-crypto's
    /// system CSPRNG, drawn again in the ~2^-32 case that BoringSSL refuses them as zero or not below
    /// the group order), its public point computed by BoringSSL. The same work as OpenSSL's key
    /// generation (and pyca/cryptography's `generate_private_key`). swift-crypto's
    /// `PrivateKey()` additionally runs BoringSSL's FIPS pairwise-consistency test on every key (the
    /// public point computed a second time, an ECDSA signature and its verification: three more
    /// scalar multiplications: about half the time of an encryption, measured) and, by default,
    /// discards half the keys for compact representability, which ECC_V2 never uses.
    @usableFromInline
    static func freshEphemeralKey() -> P256.KeyAgreement.PrivateKey {
        while true {
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: SymmetricKey(size: .bits256)) {
                return key
            }
        }
    }

    /// What the Secure Element does; the sandbox device and the tests use it.
    public static func decrypt(_ payload: Payload, with recipient: P256.KeyAgreement.PrivateKey) throws -> Data {
        guard let ephemeral = try? P256.KeyAgreement.PublicKey(x963Representation: payload.ephemeralPublicKey) else {
            throw Failure.badEphemeralKey
        }
        guard payload.encryptedPassData.count >= tagLength else { throw Failure.tooShort }
        let key = try symmetricKey(sharedSecret: recipient.sharedSecretFromKeyAgreement(with: ephemeral),
                                   ephemeralPublicKey: payload.ephemeralPublicKey)
        do {
            let box = try AES.GCM.SealedBox(
                nonce: zeroNonce,
                ciphertext: payload.encryptedPassData.dropLast(tagLength), tag: payload.encryptedPassData.suffix(tagLength))
            return try AES.GCM.open(box, using: key)
        } catch {
            throw Failure.authenticationFailed
        }
    }

    /// K = SHA-256(00000001 || Z || 0x0D || "id-aes256-GCM" || "Apple" || ephemeralPublicKey)
    static func kdfInput(z: Data, ephemeralPublicKey: Data) -> Data {
        var input = Data([0, 0, 0, 1])
        input += z
        input += otherInfo(ephemeralPublicKey: ephemeralPublicKey)
        return input
    }

    static func otherInfo(ephemeralPublicKey: Data) -> Data {
        Data([UInt8(algorithmID.count)]) + algorithmID + partyUInfo + ephemeralPublicKey
    }

    /// SHA-256 of `kdfInput`, fed piece by piece: no concatenated copy of Z and OtherInfo.
    static func symmetricKey(sharedSecret: SharedSecret, ephemeralPublicKey: Data) -> SymmetricKey {
        var hash = SHA256()
        hash.update(data: kdfCounter)
        sharedSecret.withUnsafeBytes { hash.update(bufferPointer: $0) }
        hash.update(data: otherInfoPrefix)
        hash.update(data: ephemeralPublicKey)
        return SymmetricKey(data: hash.finalize())
    }
}
