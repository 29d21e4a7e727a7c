import Foundation
import Gateway
import GatewayStore
import GatewayTestSupport
import ProvisioningCore
import Testing

/// The local issuer's keys: the activation data's HMAC key is never a key the vault seals with.
@Suite struct LocalIssuerBuildTests {
    @Test func theActivationKeyMustNotBeAVaultKey() async throws {
        let yaml = ConfigLoaderTests.minimal + "\nlocal: { enabled: true, activation_key: env:ACTIVATION_KEY }\n"
        let config = try ConfigLoader.parse(yaml: yaml, source: "test.yaml")
        let store = try await SQLiteGatewayStore.open(path: TestDirectories.root.appendingPathComponent("local-\(UUID().uuidString)/g.sqlite").path)
        let vaultKey = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let same = ["VAULT_KEY": vaultKey, "ACTIVATION_KEY": vaultKey]
        let refusal = #expect(throws: ConfigError.self) { try LocalIssuer.build(config: config, store: store, environment: same) }
        #expect(refusal?.problems.map(\.description) == ["local.activation_key: holds the same key as a vault key: give the activation data a key of its own"])
        let own = ["VAULT_KEY": vaultKey, "ACTIVATION_KEY": Data((0..<32).map { UInt8(255 - $0) }).base64EncodedString()]
        #expect(try LocalIssuer.build(config: config, store: store, environment: own).connector != nil)
    }
}
