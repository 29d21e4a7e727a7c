import Crypto
import Foundation
import Gateway
import ProvisioningCore
import SwiftASN1
import Testing
import X509

/// The sandbox device root's private key is committed beside it: a configuration that trusts it
/// lets anyone make a chain the local issuer encrypts to, so only a sandbox may trust it.
@Suite struct TrustAnchorsTests {
    static let sandboxRoot = ConfigLoaderTests.packageRoot.appendingPathComponent("Config/sandbox/device-root.pem")

    @Test func theRecordedFingerprintIsTheCommittedSandboxRoots() throws {
        let certificate = try Certificate(pemEncoded: String(contentsOf: Self.sandboxRoot, encoding: .utf8))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let fingerprint = SHA256.hash(data: serializer.serializedBytes).map { String(format: "%02x", $0) }.joined()
        #expect(fingerprint == TrustAnchors.sandboxDeviceRootSHA256)
    }

    /// The recorded public keys are the committed private keys' own (read from the PEM files).
    @Test func theRecordedKeysAreTheCommittedSandboxKeys() throws {
        for name in ["device-root-key.pem", "device-leaf-key.pem"] {
            let pem = try String(contentsOf: Self.sandboxRoot.deletingLastPathComponent().appendingPathComponent(name), encoding: .utf8)
            let key = try Certificate.PublicKey(P256.Signing.PrivateKey(pemRepresentation: pem).publicKey)
            let hash = SHA256.hash(data: Array(key.subjectPublicKeyInfoBytes)).map { String(format: "%02x", $0) }.joined()
            #expect(TrustAnchors.sandboxPublicKeySHA256.contains(hash), "\(name)")
        }
    }

    /// A root made anew for the committed root key (another subject and validity, so another
    /// certificate) is refused as the sandbox root is: the CLI audit had trusted one with the
    /// sandbox off and read a vaulted card through a chain it made.
    @Test func aCertificateMadeAnewForASandboxKeyIsRefusedToo() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("anchors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pem = try String(contentsOf: Self.sandboxRoot.deletingLastPathComponent().appendingPathComponent("device-root-key.pem"), encoding: .utf8)
        let key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        let name = try DistinguishedName { CommonName("Reissued Root") }
        let reissued = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-60), notValidAfter: Date().addingTimeInterval(86_400), issuer: name, subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions { Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil)) },
            issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(reissued)
        try Data(serializer.serializedBytes).write(to: directory.appendingPathComponent("reissued.der"))
        var trust = TrustConfig()
        trust.anchors = ["reissued.der"]
        let refusal = #expect(throws: ConfigError.self) { try TrustAnchors.validator(trust, relativeTo: directory, sandboxEnabled: false) }
        #expect(refusal?.problems.map(\.path) == ["trust.anchors[0]"], "\(String(describing: refusal))")
        #expect(try TrustAnchors.validator(trust, relativeTo: directory, sandboxEnabled: true).trustAnchors.count == 1)
    }

    @Test func outsideTheSandboxTheSandboxRootIsRefusedWhereverItIsCopied() throws {
        // A copy elsewhere, in DER: the certificate is recognised, not its path or encoding.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("anchors-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let certificate = try Certificate(pemEncoded: String(contentsOf: Self.sandboxRoot, encoding: .utf8))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        try Data(serializer.serializedBytes).write(to: directory.appendingPathComponent("root.der"))

        for entry in [Self.sandboxRoot.path, "root.der"] {
            var trust = TrustConfig()
            trust.anchors = ["apple", entry]
            let refusal = #expect(throws: ConfigError.self) {
                try TrustAnchors.validator(trust, relativeTo: directory, sandboxEnabled: false)
            }
            #expect(refusal?.problems.map(\.path) == ["trust.anchors[1]"])
            #expect(refusal?.problems.first?.reason.contains("is the sandbox device root, or a certificate for a key of the sandbox's") == true,
                    "\(String(describing: refusal))")
            // A sandbox trusts it.
            let validator = try TrustAnchors.validator(trust, relativeTo: directory, sandboxEnabled: true)
            #expect(validator.trustAnchors.count == 2)
        }
    }

    /// An anchor is one certificate: a device (`/dev/zero`) or a file past 1 MiB is refused unread
    /// (the input audit: it had been read until memory ran out), named by its place in the list.
    @Test func anAnchorThatIsNoCertificateFileIsRefusedUnread() throws {
        var trust = TrustConfig()
        trust.anchors = ["apple", "/dev/zero"]
        let refusal = #expect(throws: ConfigError.self) {
            try TrustAnchors.validator(trust, relativeTo: URL(fileURLWithPath: "/"), sandboxEnabled: false)
        }
        #expect(refusal?.problems.map(\.path) == ["trust.anchors[1]"], "\(String(describing: refusal))")
    }
}
