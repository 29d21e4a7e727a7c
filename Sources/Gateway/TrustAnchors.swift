import Foundation
import ProvisioningCore
import WalletCrypto
import X509

/// The PassKit chain validator the configuration asks for: `apple` is the bundled Apple Root CA -
/// G3; other entries are PEM or DER files (the sandbox trusts its own device root).
public enum TrustAnchors {
    public static func validator(_ config: TrustConfig, relativeTo base: URL) throws(ConfigError) -> ApplePayChainValidator {
        var anchors: [Certificate] = []
        for (index, entry) in config.anchors.enumerated() {
            let path = "trust.anchors[\(index)]"
            do {
                if entry == "apple" {
                    anchors.append(try ApplePayChainValidator.appleRootCAG3())
                    continue
                }
                let url = entry.hasPrefix("/") ? URL(fileURLWithPath: entry) : base.appendingPathComponent(entry)
                let data = try Data(contentsOf: url)
                if let pem = String(data: data, encoding: .utf8), pem.contains("-----BEGIN CERTIFICATE-----") {
                    anchors.append(try Certificate(pemEncoded: pem))
                } else {
                    anchors.append(try Certificate(derEncoded: Array(data)))
                }
            } catch {
                throw ConfigError(source: "trust", problems: [.init(path, "cannot load a certificate from '\(entry)'")])
            }
        }
        return ApplePayChainValidator(trustAnchors: anchors)
    }
}
