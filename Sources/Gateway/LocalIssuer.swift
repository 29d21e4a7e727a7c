import Crypto
import Foundation
import Issuers
import ProvisioningCore
import WalletCrypto

/// Assembles what the gateway's own encryptor needs from the configuration: the chain validator
/// for the configured trust anchors, the vault, and the activation-data key.
public struct LocalIssuer: Sendable {
    public static let issuerID = LocalConnector.issuerID
    public static let wallets = LocalConnector.servedWallets
    public let validator: ApplePayChainValidator
    public let vault: CardVault
    public let connector: LocalConnector?

    /// The sandbox's fixed activation-data key (`local.activation_key: sandbox`): public, demo only.
    public static let sandboxActivationKey = SymmetricKey(data: SHA256.hash(data: Data("provisioning-gateway sandbox activation key (demo only)".utf8)))

    /// One key, one purpose: the activation data's HMAC key is never a key the vault seals with.
    /// Asked by `build` and by `config check` alike (which had said valid for a file `serve` refused).
    public static func sharedKeyProblem(activationReference: String, activationKey: SymmetricKey, vault: VaultKeyring) -> ConfigProblem? {
        guard activationReference != "sandbox", vault.keys.values.contains(where: { $0 == activationKey }) else { return nil }
        return .init("local.activation_key", "holds the same key as a vault key: give the activation data a key of its own")
    }

    public static func build(config: GatewayConfig, store: any GatewayStore, environment: [String: String]) throws(ConfigError) -> LocalIssuer {
        let base = config.baseDirectory ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        let validator = try TrustAnchors.validator(config.trust, relativeTo: base, sandboxEnabled: config.sandbox.enabled)
        let vault = CardVault(store: store, keyring: try VaultKeyring.resolve(config.vault, environment: environment))
        guard config.local.enabled, let activationReference = config.local.activationKey else {
            return LocalIssuer(validator: validator, vault: vault, connector: nil)
        }
        let activationKey = try CardVault.key(reference: activationReference, environment: environment, path: "local.activation_key")
        if let problem = sharedKeyProblem(activationReference: activationReference, activationKey: activationKey, vault: vault.keyring) {
            throw ConfigError(source: "environment", problems: [problem])
        }
        let activation = HMACActivationData(key: activationReference == "sandbox" ? sandboxActivationKey : activationKey)
        return LocalIssuer(validator: validator, vault: vault,
                           connector: LocalConnector(vault: vault, validator: validator, activation: activation))
    }
}
