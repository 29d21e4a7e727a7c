import Foundation
import Gateway
import ProvisioningCore

/// Puts the sandbox's demo card data into the vault, so the local issuer (and a fallback to it)
/// can encrypt them.
public enum SandboxSeed {
    public static func vault(config: GatewayConfig, store: any GatewayStore, environment: [String: String]) async throws {
        let vault = CardVault(store: store, keyring: try VaultKeyring.resolve(config.vault, environment: environment))
        for card in config.sandbox.cards {
            guard let data = card.card else { continue }
            try await vault.put(card.record, try CardData(number: data.number, name: data.name, expiry: data.expiry))
        }
    }
}
