import Crypto
import Foundation
import Testing
@testable import WalletCrypto

@Suite struct ECCV2Tests {
    struct Vector: Decodable {
        let leaf_private_key, leaf_public_key, ephemeral_private_key, ephemeral_public_key: String
        let shared_secret_z, kdf_other_info, symmetric_key, iv, plaintext, encrypted_pass_data: String
    }

    static func vector() throws -> Vector {
        let url = try #require(Bundle.module.url(forResource: "ecc_v2", withExtension: "json", subdirectory: "Fixtures"))
        return try JSONDecoder().decode(Vector.self, from: Data(contentsOf: url))
    }

    static func bytes(_ hex: String) -> Data {
        Data(stride(from: 0, to: hex.count, by: 2).map { i in
            UInt8(hex[hex.index(hex.startIndex, offsetBy: i)..<hex.index(hex.startIndex, offsetBy: i + 2)], radix: 16)!
        })
    }

    @Test func theIndependentVectorByteForByte() throws {
        let v = try Self.vector()
        let leaf = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(v.leaf_private_key))
        let ephemeral = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(v.ephemeral_private_key))
        #expect(leaf.publicKey.x963Representation == Self.bytes(v.leaf_public_key))

        // Every intermediate value, then the output.
        let z = try ephemeral.sharedSecretFromKeyAgreement(with: leaf.publicKey).withUnsafeBytes { Data($0) }
        #expect(z == Self.bytes(v.shared_secret_z))
        #expect(ECCV2.otherInfo(ephemeralPublicKey: Self.bytes(v.ephemeral_public_key)) == Self.bytes(v.kdf_other_info))
        let key = Data(SHA256.hash(data: ECCV2.kdfInput(z: z, ephemeralPublicKey: Self.bytes(v.ephemeral_public_key))))
        #expect(key == Self.bytes(v.symmetric_key))
        // The encryptor's KDF hashes the same bytes piece by piece.
        let derived = ECCV2.symmetricKey(sharedSecret: try ephemeral.sharedSecretFromKeyAgreement(with: leaf.publicKey),
                                         ephemeralPublicKey: Self.bytes(v.ephemeral_public_key))
        #expect(derived.withUnsafeBytes { Data($0) } == Self.bytes(v.symmetric_key))
        #expect(Data(count: ECCV2.ivLength) == Self.bytes(v.iv))

        let payload = try ECCV2.encrypt(Data(v.plaintext.utf8), for: leaf.publicKey, ephemeral: ephemeral)
        #expect(payload.ephemeralPublicKey == Self.bytes(v.ephemeral_public_key))
        #expect(payload.encryptedPassData == Self.bytes(v.encrypted_pass_data))
        #expect(try ECCV2.decrypt(.init(encryptedPassData: Self.bytes(v.encrypted_pass_data), ephemeralPublicKey: Self.bytes(v.ephemeral_public_key)),
                                  with: leaf) == Data(v.plaintext.utf8))
    }

    @Test func thePlaintextBuilderWritesTheVectorsBytes() throws {
        let v = try Self.vector()
        let plaintext = PassPlaintext(primaryAccountNumber: "4111111111111111", name: "John Doe", expiryMonth: 12, expiryYear: 2025,
                                      nonce: Data([0x0a, 0x1b, 0x2c, 0x3d]), nonceSignature: Data([0xde, 0xad, 0xbe, 0xef]))
        #expect(String(decoding: try plaintext.encoded(), as: UTF8.self) == v.plaintext)
    }

    @Test func thePlaintextPrintsNothingOfTheCard() {
        let plaintext = PassPlaintext(primaryAccountNumber: "4111111111111111", name: "John Doe", expiryMonth: 12, expiryYear: 2025,
                                      nonce: Data([0x0a, 0x1b, 0x2c, 0x3d]), nonceSignature: Data([0xde, 0xad, 0xbe, 0xef]))
        var dumped = ""
        dump(plaintext, to: &dumped)
        for text in ["\(plaintext)", String(reflecting: plaintext), dumped, "\([plaintext])"] {
            #expect(!text.contains("4111111111111111") && !text.contains("John") && !text.contains("0a1b2c3d"), "\(text)")
        }
    }

    @Test func aFreshKeyRoundTripsAndIsNeverReused() throws {
        let leaf = P256.KeyAgreement.PrivateKey()
        let plaintext = Data(#"{"primaryAccountNumber":"5555555555554444"}"#.utf8)
        let first = try ECCV2.encrypt(plaintext, for: leaf.publicKey)
        let second = try ECCV2.encrypt(plaintext, for: leaf.publicKey)
        #expect(first.ephemeralPublicKey != second.ephemeralPublicKey)
        #expect(first.ephemeralPublicKey.count == 65 && first.ephemeralPublicKey.first == 0x04)
        #expect(first.encryptedPassData.count == plaintext.count + ECCV2.tagLength)
        #expect(first.encryptedPassData != second.encryptedPassData)
        #expect(try ECCV2.decrypt(first, with: leaf) == plaintext)
        #expect(try ECCV2.decrypt(second, with: leaf) == plaintext)
        #expect(throws: ECCV2.Failure.authenticationFailed) { try ECCV2.decrypt(first, with: P256.KeyAgreement.PrivateKey()) }
    }

    @Test func activationDataIsKeyedAndDeterministic() {
        let a = HMACActivationData(key: SymmetricKey(data: Data(repeating: 1, count: 32)))
        let b = HMACActivationData(key: SymmetricKey(data: Data(repeating: 2, count: 32)))
        let one = a.activationData(cardID: "c1", expiration: "12/29", nonce: Data([1, 2]))
        #expect(one.count == 32)
        #expect(one == a.activationData(cardID: "c1", expiration: "12/29", nonce: Data([1, 2])))
        #expect(one != a.activationData(cardID: "c1", expiration: "12/29", nonce: Data([1, 3])))
        #expect(one != b.activationData(cardID: "c1", expiration: "12/29", nonce: Data([1, 2])))
    }
}
