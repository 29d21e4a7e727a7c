import Foundation
import Gateway
import ProvisioningCore

/// Puts the sandbox's demo card data into the vault, so the local issuer (and a fallback to it)
/// can encrypt them.
public enum SandboxSeed {
    /// The sandbox's demo key, which the start-up banner's example sends.
    public static let demoKey = "sk_sandbox_demo"

    /// The first sandbox card the demo key's client may use, for the banner's example (the first
    /// card of the file may be another tenant's, and the example then answered 404); nil when the
    /// key is not one of the file's clients or none of its cards is that client's.
    public static func demoCard(config: GatewayConfig) -> String? {
        guard let client = try? ClientAuthenticator(clients: config.clients).authenticate(authorization: "Bearer \(demoKey)") else { return nil }
        return config.sandbox.cards.first { client.mayUse($0.record) }?.cardID
    }

    public static func vault(config: GatewayConfig, store: any GatewayStore, environment: [String: String]) async throws {
        let vault = CardVault(store: store, keyring: try VaultKeyring.resolve(config.vault, environment: environment))
        for card in config.sandbox.cards {
            guard let data = card.card else { continue }
            try await vault.put(card.record, try CardData(number: data.number, name: data.name, expiry: data.expiry))
        }
    }
}
