import Foundation
import Gateway
import GatewayServer
import Logging
import ProvisioningCore

/// The sandbox composition: the production gateway (`buildGateway`) plus the simulators as extra
/// services, the demo cards and their vault entries seeded before the server starts, and the
/// fault-injection routes. `GatewayServer` itself never imports the simulators.
public struct SandboxGateway: Sendable {
    public let process: GatewayProcess
    /// The running simulators: what they saw, their fault queues.
    public let upstreams: SandboxUpstreams

    public init(
        config: GatewayConfig,
        configSource: ConfigSource? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger,
        store: (any GatewayStore)? = nil,
        health: UpstreamHealth? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        wallClock: (@Sendable () -> Date)? = nil,
        tracing: GatewayTracing? = nil,
        onAuthFailure: @escaping @Sendable (_ source: String, _ reason: String) async -> Void = { _, _ in },
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws {
        let sandbox = SandboxUpstreams(config: config, logger: logger)
        let extensions = GatewayExtensions(
            services: [sandbox],
            prepareStore: { store in
                do {
                    try await store.importCards(config.sandbox.cards.map(\.record))
                } catch CardRegistryError.issuerReferenceInUse {
                    // Several sandboxes on one store, one of which moved a demo card's reference.
                    throw StoreError(store: "sandbox", reason: "the sandbox's demo cards (sandbox.cards) could not be stored: "
                        + "another card holds one of their issuer references; delete or change that card, or use a store of its own")
                }
                try await SandboxSeed.vault(config: config, store: store, environment: environment)
            },
            sandboxEndpoints: { await sandbox.endpoints() },
            faults: SandboxFaultRoutes(sandbox: sandbox, issuers: config.issuers))
        process = try buildGateway(
            config: config, configSource: configSource, environment: environment, logger: logger, store: store, extensions: extensions,
            health: health, clock: clock, wallClock: wallClock, tracing: tracing, onAuthFailure: onAuthFailure, onServerRunning: onServerRunning)
        upstreams = sandbox
    }
}
