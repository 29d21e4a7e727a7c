import AsyncHTTPClient
import Foundation
import Gateway
import GatewayServer
import GatewayStore
import GatewayTestSupport
import Logging
import ProvisioningCore
import ProvisioningGatewayClient
import SandboxGateway
import ServiceLifecycle
import Synchronization
import Testing

/// The client suites run one test at a time: each starts a whole sandbox gateway, and the rest of
/// the package's tests (timing-sensitive resilience tests among them) run beside them.
@Suite(.serialized) enum ClientSuites {}

/// The real sandbox gateway (the composition `provisioning-gateway` serves with no arguments) on an
/// ephemeral loopback port for one test, and the generated client pointed at it with each sandbox
/// key. A small copy of `GatewayServerTests/GatewayHarness` (a test target cannot import another).
enum SandboxServer {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let demoKey = "sk_sandbox_demo"
    static let opsKey = "sk_sandbox_ops"
    /// A second client, `other`, of program `other` (as in GatewayHarness).
    static let otherKey = SandboxTestConfig.otherKey
    static let otherBridgeCard = SandboxTestConfig.otherBridgeCard

    static var logger: Logger {
        var logger = Logger(label: "client-tests")
        logger.logLevel = .warning
        return logger
    }

    /// Config/gateway.yaml on port 0, plus the `other` client and its Bridge card (shared with GatewayHarness).
    static func sandboxConfig() throws -> GatewayConfig { try SandboxTestConfig.config() }

    /// The sandbox device's Apple Pay request (Config/sandbox/apple-pay-request.json), `edit`ed, as
    /// the generated type (decoded, so it follows the schema's shape, whatever Swift type it becomes).
    static func applePayRequest(_ edit: (inout [String: Any]) -> Void = { _ in }) throws -> ProvisioningGateway.ApplePayRequest {
        let file = try Data(contentsOf: packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json"))
        var json = try #require(try JSONSerialization.jsonObject(with: file) as? [String: Any])
        edit(&json)
        return try JSONDecoder().decode(ProvisioningGateway.ApplePayRequest.self, from: JSONSerialization.data(withJSONObject: json))
    }

    /// One façade per sandbox key, all on the same gateway.
    struct Gateways: Sendable {
        let baseURL: URL
        let demo: ProvisioningGateway
        let ops: ProvisioningGateway
        let other: ProvisioningGateway

        func with(key: String) -> ProvisioningGateway { ProvisioningGateway(baseURL: baseURL, apiKey: key) }
    }

    struct DidNotStart: Error {}

    /// Starts the sandbox gateway (a fresh SQLite store) in its service group, calls `body` once it
    /// listens, then shuts it down gracefully.
    static func run(
        config: GatewayConfig? = nil, configSource: ConfigSource? = nil,
        _ body: @escaping @Sendable (Gateways, SandboxUpstreams) async throws -> Void
    ) async throws {
        try await GatewaySlots.shared.withSlot { try await runInSlot(config: config, configSource: configSource, body) }
    }

    private static func runInSlot(
        config: GatewayConfig?, configSource: ConfigSource?,
        _ body: @escaping @Sendable (Gateways, SandboxUpstreams) async throws -> Void
    ) async throws {
        let config = try config ?? sandboxConfig()
        let path = TestDirectories.root.appendingPathComponent("client-test-\(UUID().uuidString)/gateway.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let sandbox = try SandboxGateway(config: config, configSource: configSource, logger: logger, store: store,
                                         onServerRunning: { announce.yield($0) })
        let group = sandbox.process.serviceGroup()
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
            let baseURL = URL(string: "http://127.0.0.1:\(port)")!
            let gateways = Gateways(
                baseURL: baseURL,
                demo: ProvisioningGateway(baseURL: baseURL, apiKey: demoKey),
                ops: ProvisioningGateway(baseURL: baseURL, apiKey: opsKey),
                other: ProvisioningGateway(baseURL: baseURL, apiKey: otherKey))
            do {
                try await body(gateways, sandbox.upstreams)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}

/// Runs `body`, which must throw a `GatewayProblem`, and answers it (a test failure otherwise).
func problem<T>(_ body: () async throws -> T, sourceLocation: SourceLocation = #_sourceLocation) async -> GatewayProblem? {
    do {
        let value = try await body()
        Issue.record("expected a GatewayProblem, got \(value)", sourceLocation: sourceLocation)
    } catch let problem as GatewayProblem {
        return problem
    } catch {
        Issue.record("expected a GatewayProblem, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
