import Crypto
import Foundation
import SwiftASN1
import X509

/// Checks the certificate chain PassKit hands the app, as Apple's
/// SecPolicyCreateApplePayIssuerEncryption does: it ends at a trusted root (Apple Root CA - G3 in
/// production), signatures and validity dates verify, and the leaf carries the Apple Pay marker
/// extension and a P-256 key usable for key agreement (a Key Usage extension, when the leaf has
/// one, must allow it; a leaf that is itself a CA is refused). Answers the leaf's key for ECC_V2.
public struct ApplePayChainValidator: Sendable {
    /// 1.2.840.113635.100.6.39: the leaf's Apple Pay in-app provisioning marker.
    public static let markerExtension: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 39]

    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    public let trustAnchors: [Certificate]
    /// The common name the intermediate must have under a root with that key: Apple's
    /// Worldwide Developer Relations CA - G2 under Apple Root CA - G3 (SecPolicyCreateApplePayIssuerEncryption;
    /// WALLET-CRYPTO.md), since Apple's root signs other intermediates too, for other purposes.
    public let intermediateNames: [Certificate.PublicKey: String]

    /// `intermediateNames`: Apple's by default.
    public init(trustAnchors: [Certificate], intermediateNames: [Certificate.PublicKey: String]? = nil) {
        self.trustAnchors = trustAnchors
        self.intermediateNames = intermediateNames
            ?? ((try? Self.appleRootCAG3()).map { [$0.publicKey: Self.appleIntermediateName] } ?? [:])
    }

    /// The common name of the intermediate Apple's root signs device certificates under.
    public static let appleIntermediateName = "Apple Worldwide Developer Relations CA - G2"

    public static func commonName(of certificate: Certificate) -> String? {
        for relativeName in certificate.subject {
            for attribute in relativeName where attribute.type == .RDNAttributeType.commonName {
                return String(describing: attribute.value)
            }
        }
        return nil
    }

    /// The bundled Apple Root CA - G3, the production trust anchor.
    public static func appleRootCAG3() throws -> Certificate {
        guard let url = Bundle.module.url(forResource: "AppleRootCA-G3", withExtension: "cer") else {
            throw Failure(reason: "the bundled Apple Root CA - G3 is missing")
        }
        return try Certificate(derEncoded: Array(Data(contentsOf: url)))
    }

    /// Production trust: Apple's root only.
    public static func production() throws -> ApplePayChainValidator {
        ApplePayChainValidator(trustAnchors: [try appleRootCAG3()])
    }

    public func validate(leaf leafDER: Data, subordinate subordinateDER: Data, at time: Date = Date()) async throws(Failure)
        -> P256.KeyAgreement.PublicKey
    {
        let leaf: Certificate
        let subordinate: Certificate
        do {
            leaf = try Certificate(derEncoded: Array(leafDER))
        } catch {
            throw Failure(reason: "certificates[0]: not a valid X.509 certificate")
        }
        do {
            subordinate = try Certificate(derEncoded: Array(subordinateDER))
        } catch {
            throw Failure(reason: "certificates[1]: not a valid X.509 certificate")
        }
        guard let leafKey = P256.Signing.PublicKey(leaf.publicKey) else {
            throw Failure(reason: "the leaf certificate's key is not a P-256 key")
        }
        guard leaf.extensions[oid: Self.markerExtension] != nil else {
            throw Failure(reason: "the leaf certificate lacks the Apple Pay marker extension 1.2.840.113635.100.6.39")
        }
        // RFC 5280 4.2.1.3: a key whose Key Usage extension leaves out keyAgreement is not for
        // ECDH, whatever else the chain says; without the extension the key is not restricted.
        func leafExtension<T>(_ name: String, _ read: () throws -> T?) throws(Failure) -> T? {
            do {
                return try read()
            } catch {
                throw Failure(reason: "the leaf certificate's \(name) extension is not valid")
            }
        }
        if let keyUsage = try leafExtension("Key Usage", { try leaf.extensions.keyUsage }), !keyUsage.keyAgreement {
            throw Failure(reason: "the leaf certificate's key is not for key agreement (its Key Usage leaves out keyAgreement)")
        }
        if case .isCertificateAuthority = try leafExtension("Basic Constraints", { try leaf.extensions.basicConstraints }) {
            throw Failure(reason: "the leaf certificate is a certificate authority, not a device's key")
        }
        for (index, certificate) in [leaf, subordinate].enumerated() where time < certificate.notValidBefore || time > certificate.notValidAfter {
            throw Failure(reason: "certificates[\(index)] is expired or not yet valid")
        }

        // Each link on its own first, so each flaw is named for what it is (the verifier below
        // answers one "could not validate" for a bad signature and an unknown root alike).
        guard subordinate.publicKey.isValidSignature(leaf.signature, for: leaf) else {
            throw Failure(reason: "certificates[0]'s signature does not verify with the key of certificates[1]")
        }
        // The chain is leaf, intermediate, root: certificates[1] is the intermediate, never a root
        // (a leaf signed by the root itself is not a device's key Apple issued).
        if subordinate.subject == subordinate.issuer || trustAnchors.contains(where: { $0.publicKey == subordinate.publicKey }) {
            throw Failure(reason: "certificates[1] is a root, not the intermediate: the chain must be the leaf, the intermediate, then the root")
        }
        let roots = trustAnchors.filter { $0.subject == subordinate.issuer }
        guard !roots.isEmpty else {
            throw Failure(reason: "the chain does not lead to a trusted root: no trust anchor is the issuer of certificates[1]")
        }
        guard let root = roots.first(where: { $0.publicKey.isValidSignature(subordinate.signature, for: subordinate) }) else {
            throw Failure(reason: "the chain does not lead to a trusted root: certificates[1] is not signed by the trusted root of that name")
        }
        if let name = intermediateNames[root.publicKey], Self.commonName(of: subordinate) != name {
            throw Failure(reason: "certificates[1] is not the intermediate the root issues device certificates under (\(name))")
        }

        var verifier = Verifier(rootCertificates: CertificateStore(trustAnchors)) {
            RFC5280Policy(validationTime: time)
            MarkerExtensionPolicy()
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore([subordinate]))
        switch result {
        case .validCertificate:
            return try! P256.KeyAgreement.PublicKey(rawRepresentation: leafKey.rawRepresentation)
        case .couldNotValidate(let failures):
            if failures.isEmpty {
                throw Failure(reason: "the chain does not lead to a trusted root (or a signature does not verify)")
            }
            // A fixed reason: swift-certificates' own reasons print whole certificates (serial,
            // names, extensions), which neither the caller's answer nor the log may carry.
            throw Failure(reason: "the chain fails RFC 5280 validation (a certificate's basic constraints, key usage, name constraints or an unknown critical extension)")
        }
    }
}

/// Lets the verifier accept the marker extension if an issuer marks it critical.
struct MarkerExtensionPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [ApplePayChainValidator.markerExtension]
    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult { .meetsPolicy }
}
