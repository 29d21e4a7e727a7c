import Crypto
import Foundation
import SwiftASN1
import WalletCrypto
import X509

/// A device for the sandbox: a certificate chain shaped like Apple's (root -> subordinate -> leaf
/// with the Apple Pay marker extension and a P-256 key) whose leaf private key it holds, so anyone
/// can decrypt what the gateway returns. `Flaw` makes the broken chains the tests need.
public struct SandboxDevice: Sendable {
    public enum Flaw: Sendable, CaseIterable {
        case none, expiredLeaf, missingMarker, leafNotP256, wrongSignature, leafNotForKeyAgreement, leafIsCA
        /// The leaf signed by the root itself, the root in the subordinate's place.
        case noIntermediate
        /// An intermediate whose Basic Constraints say it is no CA.
        case intermediateNotCA
    }

    public let root: Certificate
    public let subordinate: Certificate
    public let leaf: Certificate
    public let leafPrivateKey: P256.KeyAgreement.PrivateKey?

    public var rootDER: Data { Self.der(root) }
    public var subordinateDER: Data { Self.der(subordinate) }
    public var leafDER: Data { Self.der(leaf) }

    static func der(_ certificate: Certificate) -> Data {
        var serializer = DER.Serializer()
        try! serializer.serialize(certificate)
        return Data(serializer.serializedBytes)
    }

    /// A new chain under a new root, or under `root`/`rootKey` when given (the sandbox's fixed root).
    public static func make(
        flaw: Flaw = .none, root: (certificate: Certificate, key: P256.Signing.PrivateKey)? = nil, now: Date = Date()
    ) throws -> SandboxDevice {
        let rootKey = root?.key ?? P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName("Sandbox Apple Root CA - G3"); OrganizationName("Provisioning Gateway Sandbox") }
        let rootCertificate = try root?.certificate ?? Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
            notValidBefore: now - 86_400, notValidAfter: now + 20 * 365 * 86_400,
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))

        let subordinateKey = P256.Signing.PrivateKey()
        let subordinateName = try DistinguishedName {
            CommonName("Sandbox Apple Worldwide Developer Relations CA - G2"); OrganizationName("Provisioning Gateway Sandbox")
        }
        let subordinate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(subordinateKey.publicKey),
            notValidBefore: now - 86_400, notValidAfter: now + 10 * 365 * 86_400,
            issuer: rootCertificate.subject, subject: subordinateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                if flaw == .intermediateNotCA {
                    Critical(BasicConstraints.notCertificateAuthority)
                } else {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                }
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        let noIntermediate = flaw == .noIntermediate

        let leafName = try DistinguishedName { CommonName("Sandbox Secure Element"); OrganizationName("Provisioning Gateway Sandbox") }
        let agreementKey = P256.KeyAgreement.PrivateKey()
        let leafPublicKey: Certificate.PublicKey
        if flaw == .leafNotP256 {
            leafPublicKey = .init(P384.Signing.PrivateKey().publicKey)
        } else {
            leafPublicKey = .init(try P256.Signing.PublicKey(rawRepresentation: agreementKey.publicKey.rawRepresentation))
        }
        let signer = flaw == .wrongSignature ? P256.Signing.PrivateKey() : noIntermediate ? rootKey : subordinateKey
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: leafPublicKey,
            notValidBefore: flaw == .expiredLeaf ? now - 3 * 86_400 : now - 86_400,
            notValidAfter: flaw == .expiredLeaf ? now - 86_400 : now + 5 * 365 * 86_400,
            issuer: noIntermediate ? rootCertificate.subject : subordinate.subject, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                if flaw == .leafIsCA {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                } else {
                    Critical(BasicConstraints.notCertificateAuthority)
                }
                if flaw == .leafNotForKeyAgreement {
                    Critical(KeyUsage(digitalSignature: true))
                } else {
                    Critical(KeyUsage(keyAgreement: true))
                }
                if flaw != .missingMarker {
                    Certificate.Extension(oid: ApplePayChainValidator.markerExtension, critical: false, value: [0x05, 0x00])
                }
            },
            issuerPrivateKey: .init(signer))
        return SandboxDevice(root: rootCertificate, subordinate: noIntermediate ? rootCertificate : subordinate, leaf: leaf,
                             leafPrivateKey: flaw == .leafNotP256 ? nil : agreementKey)
    }
}
