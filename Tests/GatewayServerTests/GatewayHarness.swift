import Foundation
import Gateway
import GatewayServer
import GatewayStore
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOFoundationCompat
import ProvisioningCore
import Testing

/// The whole gateway with its sandbox simulators, on ephemeral loopback ports, for one test.
enum GatewayHarness {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let logger = Logger(label: "gateway-tests")
    static let demoKey = "sk_sandbox_demo"
    static let otherKey = "sk_other_client"
    static let opsKey = "sk_sandbox_ops"
    /// A Bridge card of program `other` that the Bridge simulator knows (its own account).
    static let otherBridgeCard = "card_other_bridge"

    static func sandboxConfig() throws -> GatewayConfig {
        var config = try ConfigLoader.load(path: packageRoot.appendingPathComponent("Config/gateway.yaml").path)
        config.server.port = 0
        // A second client (key `sk_other_client`) with its own program, so one client's cards are another's 403.
        config.clients.append(ClientConfig(
            id: "other", apiKeySHA256: "7a8b89c3753c60cc8d5e7787e41f1887d6d22f436f7569f92dc33ee35e5fef64", programs: ["other"]))
        config.sandbox.cards.append(SandboxCardConfig(
            cardID: otherBridgeCard, program: "other", issuer: "bridge",
            issuerReference: ["customer_id": "cust_other_001", "card_account_id": "ca_other_001"],
            card: SandboxCardData(number: "4000000000000077", name: "Other Tenant", expiry: "10/30")))
        return config
    }

    /// `config` with the demo client's rate limit set to `limit`.
    static func withDemoRateLimit(_ limit: RateLimitConfig, _ config: GatewayConfig) throws -> GatewayConfig {
        var config = config
        let demo = try #require(config.clients.firstIndex { $0.id == "demo" })
        config.clients[demo].rateLimit = limit
        return config
    }

    static func requestBody() throws -> Data {
        try Data(contentsOf: packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json"))
    }

    static func requestJSON() throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: requestBody()) as! [String: Any]
    }

    /// A fresh SQLite file in a temporary directory, migrated.
    static func temporaryStore() async throws -> SQLiteGatewayStore {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-test-\(UUID().uuidString)/gateway.sqlite").path
        let store = try SQLiteGatewayStore(path: path)
        try await store.migrate()
        return store
    }

    /// Runs `body` against a live gateway; `extraCards` join the registry without being known to
    /// any simulator, `environment` feeds `env:` credentials of extra issuers. The store is a fresh
    /// SQLite file unless one is given.
    static func run(
        config: GatewayConfig? = nil, extraCards: [CardRecord] = [], environment: [String: String] = [:],
        logger: Logger = GatewayHarness.logger, store: (any GatewayStore)? = nil, health: UpstreamHealth? = nil,
        clock: some Clock<Duration> = ContinuousClock(),
        onAuthFailure: @escaping @Sendable (_ source: String, _ reason: String) async -> Void = { _, _ in },
        _ body: @escaping @Sendable (any TestClientProtocol, SandboxUpstreams) async throws -> Void
    ) async throws {
        let config = try config ?? sandboxConfig()
        let sandbox = SandboxUpstreams(config: config, logger: logger)
        let chosenStore: any GatewayStore
        if let store { chosenStore = store } else { chosenStore = try await temporaryStore() }
        try await chosenStore.importCards(config.sandbox.cards.map(\.record) + extraCards)
        try await SandboxSeed.vault(config: config, store: chosenStore, environment: environment)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await sandbox.run() }
            defer { group.cancelAll() }
            let upstreams = try await UpstreamDirectory.build(
                config: config, environment: environment, sandbox: await sandbox.endpoints(), logger: logger)
            do {
                let app = try buildApplication(config: config, store: chosenStore, upstreams: upstreams, environment: environment, logger: logger,
                                               sandbox: sandbox, health: health, clock: clock, onAuthFailure: onAuthFailure)
                try await app.test(.live) { client in try await body(client, sandbox) }
            } catch {
                await upstreams.shutdown()
                throw error
            }
            await upstreams.shutdown()
        }
    }

    static func provision(
        _ client: any TestClientProtocol, card: String, body: Data, key: String? = demoKey
    ) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let key { headers[.authorization] = "Bearer \(key)" }
        return try await client.execute(
            uri: "/v1/cards/\(card)/wallet-provisioning/apple-pay", method: .post, headers: headers,
            body: ByteBuffer(bytes: body))
    }
}

extension TestResponse {
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] ?? [:]
    }
}
