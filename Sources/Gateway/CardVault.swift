import Crypto
import Foundation
import ProvisioningCore

/// Card numbers, expiry and cardholder names, sealed with AES-GCM under the vault key (bound to the
/// card id) before they reach the store; opened only for the local encryptor.
public struct CardVault: CardDataSource {
    /// The sandbox's fixed demo key: anyone can open sandbox entries, which hold test numbers only.
    public static let sandboxKey = SymmetricKey(data: SHA256.hash(data: Data("provisioning-gateway sandbox vault key (demo only)".utf8)))

    let store: any GatewayStore
    let key: SymmetricKey

    public init(store: any GatewayStore, key: SymmetricKey) {
        self.store = store
        self.key = key
    }

    /// `env:NAME` holding 32 bytes as base64 or hex, or `sandbox`.
    public static func key(reference: String, environment: [String: String], path: String) throws(ConfigError) -> SymmetricKey {
        switch SecretReference(parsing: reference) {
        case .sandbox?:
            return sandboxKey
        case .environment(let name)?:
            guard let text = environment[name], !text.isEmpty else {
                throw ConfigError(source: "environment", problems: [.init(path, "environment variable \(name) is not set")])
            }
            let bytes = text.count == 64 ? Data(hex: text) : Data(base64Encoded: text)
            guard let bytes, bytes.count == 32 else {
                throw ConfigError(source: "environment", problems: [.init(path, "\(name) must hold 32 bytes as base64 or hex")])
            }
            return SymmetricKey(data: bytes)
        case nil:
            throw ConfigError(source: "environment", problems: [.init(path, "must be env:NAME or sandbox")])
        }
    }

    public func put(_ id: CardID, _ data: CardData) async throws {
        let sealed = try AES.GCM.seal(try JSONEncoder().encode(data), using: key, authenticating: Data(id.rawValue.utf8))
        try await store.putVaultEntry(id, sealed: sealed.combined!)
    }

    @discardableResult
    public func delete(_ id: CardID) async throws -> Bool {
        try await store.deleteVaultEntry(id)
    }

    public func cardData(_ id: CardID) async throws(GatewayError) -> CardData? {
        let sealed: Data?
        do {
            sealed = try await store.vaultEntry(id)
        } catch {
            throw GatewayError(.internal, "the vault could not be read")
        }
        guard let sealed else { return nil }
        do {
            let opened = try AES.GCM.open(try AES.GCM.SealedBox(combined: sealed), using: key, authenticating: Data(id.rawValue.utf8))
            return try JSONDecoder().decode(CardData.self, from: opened)
        } catch {
            throw GatewayError(.internal, "the vault key does not open the entry for card \(id): it was sealed under another key")
        }
    }
}
