import Foundation
import Gateway
import ProvisioningCore

/// Puts the sandbox's demo card data into the vault, so the local issuer (and a fallback to it)
/// can encrypt them.
public enum SandboxSeed {
    public static func vault(config: GatewayConfig, store: any GatewayStore, environment: [String: String]) async throws {
        guard let reference = config.vault.key else { return }
        let vault = CardVault(store: store, key: try CardVault.key(reference: reference, environment: environment, path: "vault.key"))
        for card in config.sandbox.cards {
            guard let data = card.card else { continue }
            try await vault.put(CardID(card.cardID), try CardData(number: data.number, name: data.name, expiry: data.expiry))
        }
    }
}
