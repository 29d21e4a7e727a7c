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
            #expect(refusal?.problems.first?.reason.contains("is the sandbox device root, whose private key is public") == true,
                    "\(String(describing: refusal))")
            // A sandbox trusts it.
            let validator = try TrustAnchors.validator(trust, relativeTo: directory, sandboxEnabled: true)
            #expect(validator.trustAnchors.count == 2)
        }
    }
}
