import ByteText
import Crypto
import Foundation
import SwiftASN1
import ProvisioningCore
import WalletCrypto
import X509

/// The PassKit chain validator the configuration asks for: `apple` is the bundled Apple Root CA -
/// G3; other entries are PEM or DER files (the sandbox trusts its own device root).
public enum TrustAnchors {
    /// The largest anchor file read: one certificate, PEM or DER, is a few kB.
    static let maxFileBytes = 1 << 20

    /// SHA-256 of the DER of the sandbox device root (`Config/sandbox/device-root.pem`), whose
    /// private key is committed beside it: anyone can make a chain it trusts, and so read the card
    /// number of every vaulted card the caller's key can provision. Only a sandbox may trust it.
    public static let sandboxDeviceRootSHA256 = "1ad23105396823ab9e882fbd12beb35ef2b9cc3efcd0ab198ed4ea33db2900a4"

    /// SHA-256 of the public keys whose private halves are committed in `Config/sandbox/` (the
    /// device root's and the device leaf's): a certificate made anew for either key (another
    /// subject, another validity) is as public as the sandbox root itself, and the exact
    /// certificate's hash alone had let one through (the CLI audit reissued the root with its
    /// committed key, trusted it with the sandbox off, and read a vaulted card).
    public static let sandboxPublicKeySHA256: Set<String> = [
        "49e4acc38037f7e7e4f297a2a971dc6c467f288f61baccbc4ceadbaaa12112f3",
        "fd3131ae61a83d2744979a218696d5167fdb0fd6ea10df7101996a3e3b41499b",
    ]

    /// `sandboxEnabled`: the config's `sandbox.enabled`; without it the sandbox device root is refused.
    public static func validator(_ config: TrustConfig, relativeTo base: URL, sandboxEnabled: Bool) throws(ConfigError) -> ApplePayChainValidator {
        var anchors: [Certificate] = []
        for (index, entry) in config.anchors.enumerated() {
            let path = "trust.anchors[\(index)]"
            do {
                if entry == "apple" {
                    anchors.append(try ApplePayChainValidator.appleRootCAG3())
                    continue
                }
                let url = entry.hasPrefix("/") ? URL(fileURLWithPath: entry) : base.appendingPathComponent(entry)
                // A certificate is a few kB: a device or a runaway file is refused unread.
                let data = try BoundedFile.read(url.path, maxBytes: Self.maxFileBytes)
                if let pem = String(data: data, encoding: .utf8), pem.contains("-----BEGIN CERTIFICATE-----") {
                    anchors.append(try Certificate(pemEncoded: pem))
                } else {
                    anchors.append(try Certificate(derEncoded: Array(data)))
                }
            } catch {
                throw ConfigError(source: "trust", problems: [.init(path, "cannot load a certificate from '\(entry)'")])
            }
            if !sandboxEnabled, let anchor = anchors.last, isSandboxDeviceRoot(anchor) {
                throw ConfigError(source: "trust", problems: [.init(
                    path, "'\(entry)' is the sandbox device root, or a certificate for a key of the sandbox's, whose private key is public "
                        + "(Config/sandbox/): only a config with sandbox.enabled: true may trust it; production trusts 'apple'")])
            }
        }
        return ApplePayChainValidator(trustAnchors: anchors)
    }

    static func isSandboxDeviceRoot(_ certificate: Certificate) -> Bool {
        if sandboxPublicKeySHA256.contains(Data(SHA256.hash(data: Array(certificate.publicKey.subjectPublicKeyInfoBytes))).lowercaseHex) {
            return true
        }
        var serializer = DER.Serializer()
        guard (try? serializer.serialize(certificate)) != nil else { return false }
        return Data(SHA256.hash(data: serializer.serializedBytes)).lowercaseHex == sandboxDeviceRootSHA256
    }
}
