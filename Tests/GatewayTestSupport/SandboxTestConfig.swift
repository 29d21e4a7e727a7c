import Foundation
import Gateway
import ProvisioningCore

/// The sandbox file every in-process gateway test starts from, shared by the test targets.
public enum SandboxTestConfig {
    /// The package's top folder (Package.swift, Config/).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// A second client's key: program `other`, so one client's cards are another's 404/403.
    public static let otherKey = "sk_other_client"
    /// A Bridge card of program `other` that the Bridge simulator knows (its own account).
    public static let otherBridgeCard = "card_other_bridge"

    /// `Config/gateway.yaml`, parsed once per process: decoding YAML is synchronous work on the
    /// cooperative pool, and on two cores a hundred gateways each parsing it while others ran
    /// their time-bound tests starved those tests (requests timing out at 30 s).
    private static let sandboxFile = Result { try ConfigLoader.load(path: packageRoot.appendingPathComponent("Config/gateway.yaml").path) }

    /// The per-try bounds of the tests' upstream calls (connect and request), where the file
    /// keeps the defaults (2 s and 5 s): the simulators answer on loopback in milliseconds, but in
    /// the first seconds of a test run hundreds of tests start at once and a task can wait 2 to 6 s
    /// for one of the cooperative pool's two threads (`PoolWatchdog`); a try cut off there is
    /// retried, and a test that counts attempts fails. A test about a timeout sets its own.
    public static let upstreamTryMS = 12_000

    /// Config/gateway.yaml on port 0, plus the `other` client (key `sk_other_client`) and its Bridge
    /// card, with each issuer's per-try bounds at `upstreamTryMS`.
    public static func config() throws -> GatewayConfig {
        var config = try sandboxFile.get()
        config.server.port = 0
        for name in config.issuers.keys {
            config.issuers[name]!.timeouts.connectMS = max(config.issuers[name]!.timeouts.connectMS, upstreamTryMS)
            config.issuers[name]!.timeouts.requestMS = max(config.issuers[name]!.timeouts.requestMS, upstreamTryMS)
        }
        config.clients.append(ClientConfig(
            id: "other", apiKeySHA256: "7a8b89c3753c60cc8d5e7787e41f1887d6d22f436f7569f92dc33ee35e5fef64", programs: ["other"]))
        config.sandbox.cards.append(SandboxCardConfig(
            cardID: otherBridgeCard, program: "other", issuer: "bridge",
            issuerReference: ["customer_id": "cust_other_001", "card_account_id": "ca_other_001"],
            card: SandboxCardData(number: "4000000000000077", name: "Other Tenant", expiry: "10/30")))
        return config
    }
}
