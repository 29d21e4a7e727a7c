import Foundation
import Gateway
import Hummingbird
import Logging
import ProvisioningCore

/// Runs the gateway: the sandbox simulators first when the config enables them, then the HTTP
/// application, until SIGINT/SIGTERM. The registry is seeded from the sandbox's demo cards.
public enum GatewayRunner {
    public static func run(
        config: GatewayConfig, environment: [String: String], logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var sandboxEndpoints: [IssuerKind: SandboxUpstream] = [:]
            if config.sandbox.enabled {
                let sandbox = SandboxUpstreams(config: config, logger: logger)
                group.addTask { try await sandbox.run() }
                sandboxEndpoints = await sandbox.endpoints()
            }
            let upstreams = try await UpstreamDirectory.build(
                config: config, environment: environment, sandbox: sandboxEndpoints, logger: logger)
            let registry = InMemoryCardRegistry(config.sandbox.enabled ? config.sandbox.cards.map(\.record) : [])
            let app = try buildApplication(
                config: config, registry: registry, upstreams: upstreams, logger: logger, onServerRunning: onServerRunning)
            do {
                try await app.runService()
            } catch {
                await upstreams.shutdown()
                throw error
            }
            await upstreams.shutdown()
            group.cancelAll()
        }
    }
}
