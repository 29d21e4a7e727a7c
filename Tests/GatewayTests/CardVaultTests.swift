import Crypto
import Foundation
import Gateway
import GatewayStore
import ProvisioningCore
import Testing

@Suite struct CardVaultTests {
    func store() async throws -> SQLiteGatewayStore {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("vault-\(UUID().uuidString)/g.sqlite").path
        let store = try SQLiteGatewayStore(path: path)
        try await store.migrate()
        return store
    }

    @Test func sealedNeverInClearAndOpensWithItsKey() async throws {
        let store = try await store()
        let vault = CardVault(store: store, key: SymmetricKey(size: .bits256))
        let card = try CardData(number: "4111111111111111", name: "Jane Doe", expiry: "08/29")
        try await vault.put("c1", card)
        let sealed = try #require(try await store.vaultEntry("c1"))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("4111111111111111"))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("Jane"))
        #expect(try await vault.cardData("c1") == card)
        #expect(try await vault.cardData("nothing") == nil)
    }

    @Test func anEntrySealedUnderAnotherKeyIsAClearError() async throws {
        let store = try await store()
        try await CardVault(store: store, key: SymmetricKey(size: .bits256)).put("c1", try CardData(number: "4111111111111111", name: "J", expiry: "01/30"))
        do {
            _ = try await CardVault(store: store, key: SymmetricKey(size: .bits256)).cardData("c1")
            Issue.record("opened with the wrong key")
        } catch {
            #expect(error.detail == "the vault key does not open the entry for card c1: it was sealed under another key")
        }
    }

    @Test func anEntryMovedToAnotherCardDoesNotOpen() async throws {
        let store = try await store()
        let vault = CardVault(store: store, key: SymmetricKey(size: .bits256))
        try await vault.put("c1", try CardData(number: "4111111111111111", name: "J", expiry: "01/30"))
        try await store.putVaultEntry("c2", sealed: try #require(try await store.vaultEntry("c1")))
        await #expect(throws: GatewayError.self) { try await vault.cardData("c2") }
    }

    @Test func keysComeFromTheEnvironmentAs32Bytes() throws {
        let key = Data(repeating: 3, count: 32)
        _ = try CardVault.key(reference: "env:VK", environment: ["VK": key.base64EncodedString()], path: "vault.key")
        _ = try CardVault.key(reference: "env:VK", environment: ["VK": key.map { String(format: "%02x", $0) }.joined()], path: "vault.key")
        #expect(throws: ConfigError.self) { try CardVault.key(reference: "env:VK", environment: ["VK": "short"], path: "vault.key") }
        #expect(throws: ConfigError.self) { try CardVault.key(reference: "env:VK", environment: [:], path: "vault.key") }
    }

    @Test func badCardDataIsRefused() {
        #expect(throws: GatewayError.self) { try CardData(number: "4111", name: "J", expiry: "01/30") }
        #expect(throws: GatewayError.self) { try CardData(number: "4111111111111111", name: "J", expiry: "13/30") }
        #expect(throws: GatewayError.self) { try CardData(number: "4111111111111111", name: "", expiry: "01/30") }
    }
}
