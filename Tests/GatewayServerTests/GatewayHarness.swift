import Foundation
import Gateway
import GatewayServer
import GatewayStore
import GatewayTestSupport
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import NIOFoundationCompat
import ProvisioningCore
import ProvisioningGatewayClient
import SandboxGateway
import ServiceLifecycle
import Synchronization
import Testing

/// The whole gateway with its sandbox simulators, on ephemeral loopback ports, for one test: the
/// same composition root `serve` runs (`SandboxGateway` over `buildGateway`), in its one service
/// group, stopped by a graceful shutdown as SIGTERM would.
enum GatewayHarness {
    static let packageRoot = SandboxTestConfig.packageRoot
    static let logger = Logger(label: "gateway-tests")
    static let demoKey = "sk_sandbox_demo"
    static let otherKey = SandboxTestConfig.otherKey
    static let opsKey = "sk_sandbox_ops"
    static let otherBridgeCard = SandboxTestConfig.otherBridgeCard

    static func sandboxConfig() throws -> GatewayConfig { try SandboxTestConfig.config() }

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
        let path = TestDirectories.root.appendingPathComponent("gateway-test-\(UUID().uuidString)/gateway.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        try await store.migrate()
        return store
    }

    struct DidNotStart: Error {}

    /// Runs the process `build` makes (given the callback that learns its port) in its service
    /// group, calls `body` with the port once it listens, then shuts it down gracefully. A process
    /// that stops before it listens fails the test with its error.
    static func serve(
        _ build: (@escaping @Sendable (Int) async -> Void) throws -> GatewayProcess,
        _ body: @escaping @Sendable (Int) async throws -> Void
    ) async throws {
        try await GatewaySlots.shared.withSlot { try await serveInSlot(build, body) }
    }

    private static func serveInSlot(
        _ build: (@escaping @Sendable (Int) async -> Void) throws -> GatewayProcess,
        _ body: @escaping @Sendable (Int) async throws -> Void
    ) async throws {
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let process = try build { announce.yield($0) }
        let group = process.serviceGroup()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { announce.finish() }
                try await group.run()
            }
            var announced = ports.makeAsyncIterator()
            guard let port = await announced.next() else {
                try await tasks.waitForAll()
                throw DidNotStart()
            }
            do {
                try await body(port)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }

    /// Runs `body` against a live sandbox gateway; `extraCards` join the registry without being
    /// known to any simulator, `environment` feeds `env:` credentials of extra issuers. The store
    /// is a fresh SQLite file unless one is given (migrated by the gateway before it listens).
    static func run(
        config: GatewayConfig? = nil, configSource: ConfigSource? = nil, extraCards: [CardRecord] = [], environment: [String: String] = [:],
        logger: Logger = GatewayHarness.logger, store: (any GatewayStore)? = nil, health: UpstreamHealth? = nil,
        clock: any Clock<Duration> = ContinuousClock(), wallClock: (@Sendable () -> Date)? = nil, tracing: GatewayTracing? = nil,
        onAuthFailure: @escaping @Sendable (_ source: String, _ reason: String) async -> Void = { _, _ in },
        _ body: @escaping @Sendable (GatewayClient, SandboxUpstreams) async throws -> Void
    ) async throws {
        let config = try config ?? sandboxConfig()
        let chosenStore: any GatewayStore
        if let store { chosenStore = store } else { chosenStore = try await temporaryStore() }
        if !extraCards.isEmpty {
            try await chosenStore.migrate()
            try await chosenStore.importCards(extraCards)
        }
        let sandbox = Mutex<SandboxUpstreams?>(nil)
        try await serve({ onServerRunning in
            let gateway = try SandboxGateway(
                config: config, configSource: configSource, environment: environment, logger: logger, store: chosenStore, health: health,
                clock: clock, wallClock: wallClock, tracing: tracing, onAuthFailure: onAuthFailure, onServerRunning: onServerRunning)
            sandbox.withLock { $0 = gateway.upstreams }
            return gateway.process
        }) { port in
            try await GatewayClient.with(port: port) { client in
                try await body(client, sandbox.withLock { $0! })
            }
        }
    }

    /// The generated Swift client (`ProvisioningGatewayClient`) on the same gateway, with `key`.
    static func gateway(_ client: GatewayClient, key: String = demoKey) -> ProvisioningGateway {
        ProvisioningGateway(baseURL: URL(string: "http://127.0.0.1:\(client.port)")!, apiKey: key)
    }

    /// The sandbox device's Apple Pay request as the generated client's type.
    /// `edit` changes the JSON first; the result is decoded, so it follows the schema's shape.
    static func applePayRequest(_ edit: (inout [String: Any]) -> Void = { _ in }) throws -> ProvisioningGateway.ApplePayRequest {
        var json = try requestJSON()
        edit(&json)
        return try JSONDecoder().decode(ProvisioningGateway.ApplePayRequest.self, from: JSONSerialization.data(withJSONObject: json))
    }

    static func provision(
        _ client: GatewayClient, card: String, body: Data, key: String? = demoKey
    ) async throws -> GatewayResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let key { headers[.authorization] = "Bearer \(key)" }
        return try await client.execute(
            uri: "/v1/cards/\(card)/wallet-provisioning/apple-pay", method: .post, headers: headers,
            body: ByteBuffer(bytes: body))
    }
}

/// One keep-alive HTTP/1.1 connection to a live gateway (Hummingbird's test client). Requests on
/// one client are served one after another; open another client for concurrency.
struct GatewayClient: Sendable {
    let client: TestClient
    let port: Int

    static func with<T: Sendable>(port: Int, _ body: (GatewayClient) async throws -> T) async throws -> T {
        let client = TestClient(host: "127.0.0.1", port: port, configuration: .init(timeout: .seconds(30)))
        client.connect()
        do {
            let value = try await body(GatewayClient(client: client, port: port))
            try await client.shutdown()
            return value
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    func execute(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil) async throws -> GatewayResponse {
        var headers = headers
        headers[.connection] = "keep-alive"
        let response = try await client.execute(.init(uri, method: method, authority: "localhost", headers: headers, body: body))
        return GatewayResponse(head: response.head, body: response.body ?? ByteBuffer())
    }
}

struct GatewayResponse: Sendable {
    let head: HTTPResponse
    let body: ByteBuffer
    var status: HTTPResponse.Status { head.status }
    var headers: HTTPFields { head.headerFields }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] ?? [:]
    }
}
