import Foundation
import Gateway
import GatewayStore
import Hummingbird
import Logging
import ProvisioningCore

/// Runs the gateway: the store (migrated, its background work alive), the sandbox simulators when
/// the config enables them (their demo cards upserted into the store), then the HTTP application,
/// until SIGINT/SIGTERM.
public enum GatewayRunner {
    /// How often expired idempotency records are deleted.
    static let purgeInterval: Duration = .seconds(600)

    public static func run(
        config: GatewayConfig, environment: [String: String], logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void
    ) async throws {
        try await StoreBootstrap.withStore(config.store, baseDirectory: config.baseDirectory, environment: environment, logger: logger) { opened in
            try await withThrowingTaskGroup(of: Void.self) { group in
                let store = opened.store
                var sandboxEndpoints = SandboxEndpoints()
                var sandboxUpstreams: SandboxUpstreams?
                if config.sandbox.enabled {
                    try await store.importCards(config.sandbox.cards.map(\.record))
                    try await SandboxSeed.vault(config: config, store: store, environment: environment)
                    let sandbox = SandboxUpstreams(config: config, logger: logger)
                    group.addTask { try await sandbox.run() }
                    sandboxEndpoints = await sandbox.endpoints()
                    sandboxUpstreams = sandbox
                }
                group.addTask {
                    while !Task.isCancelled {
                        try await Task.sleep(for: purgeInterval)
                        if let purged = try? await store.purgeExpired(now: Date()), purged > 0 {
                            logger.info("expired idempotency records purged", metadata: ["count": "\(purged)"])
                        }
                    }
                }
                let upstreams = try await UpstreamDirectory.build(
                    config: config, environment: environment, sandbox: sandboxEndpoints, logger: logger)
                do {
                    let app = try buildApplication(
                        config: config, store: store, upstreams: upstreams, environment: environment, logger: logger,
                        sandbox: sandboxUpstreams, onServerRunning: onServerRunning)
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
}
