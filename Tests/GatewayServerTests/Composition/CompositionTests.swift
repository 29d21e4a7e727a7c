import Crypto
import Foundation
import Gateway
import GatewayServer
import GatewayStore
import GatewayTestSupport
import Logging
import ProvisioningCore
import ServiceLifecycle
import Synchronization
import Testing

/// The composition root's lifecycle: one service group, migrations before the listener, a failing
/// service stopping everything with its cause logged, readiness turning 503 on shutdown.
@Suite struct CompositionTests {
    struct Broken: Error, CustomStringConvertible {
        var description: String { "the disk caught fire" }
    }

    /// A service that fails once told to, standing for any background part that breaks.
    struct FailingService: Service, CustomStringConvertible {
        let trigger: AsyncStream<Void>
        var description: String { "failing-test-service" }
        func run() async throws {
            for await _ in trigger { throw Broken() }
        }
    }

    static func productionConfig() throws -> GatewayConfig {
        var config = try GatewayHarness.sandboxConfig()
        config.sandbox.enabled = false
        // Production trust: the sandbox device root is the sandbox's only.
        config.trust.anchors = ["apple"]
        config.issuers = [:]
        config.sandbox.cards = []
        config.local.enabled = false
        return config
    }

    @Test func aFailingServiceStopsTheWholeGroupWithItsCauseLogged() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "composition") { captured.handler(label: $0) }
        let (trigger, fire) = AsyncStream.makeStream(of: Void.self)
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let process = try buildGateway(
            config: try Self.productionConfig(), environment: [:], logger: logger, store: try await GatewayHarness.temporaryStore(),
            extensions: GatewayExtensions(services: [FailingService(trigger: trigger)]),
            onServerRunning: { announce.yield($0) })
        let group = process.serviceGroup()
        let outcome = ProvisioningIDBox()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                do { try await group.run() } catch { outcome.value = "\(type(of: error)): \(error)" }
                announce.finish()
            }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            // Serving before the failure...
            let status = try await GatewayClient.with(port: port) { client in try await client.execute(uri: "/healthz", method: .get).status }
            #expect(status == .ok)
            fire.yield()
            // ...and the whole group, server included, stops on its own once it happens.
            try await tasks.waitForAll()
        }
        #expect(outcome.value == "Broken: the disk caught fire")
        #expect(captured.text.contains("a gateway service failed; shutting down cause=the disk caught fire service=failing-test-service"),
                "\(captured.text)")
    }

    /// A vault key that opens none of the entries sealed under its id (another key put in the
    /// variable) stops start-up before the listener opens and before anything is sealed with it;
    /// it had started, and every local provisioning then answered 500 (vault audit).
    @Test func aWrongVaultKeyStopsStartUp() async throws {
        let store = try await GatewayHarness.temporaryStore()
        let card = CardRecord(id: "card_sealed", program: "demo", issuer: "local", issuerReference: IssuerReference([:]))
        try await store.importCards([card])
        try await CardVault(store: store, keyring: VaultKeyring(SymmetricKey(size: .bits256)))
            .put(card, try CardData(number: "4111111111111111", name: "Jane Doe", expiry: "01/30"))
        let config = try Self.productionConfig()
        var failure = ""
        do {
            try await GatewayHarness.serve({ onServerRunning in
                try buildGateway(config: config, environment: [:], logger: GatewayHarness.logger, store: store, onServerRunning: onServerRunning)
            }) { _ in Issue.record("the gateway listened with a vault key that opens none of its entries") }
        } catch {
            failure = "\(error)"
        }
        #expect(failure.contains("vault key 'default' opens none of the entries sealed under that id"), "\(failure)")
        #expect(!failure.contains("4111111111111111"))
    }

    @Test func migrationsRunBeforeTheServerListens() async throws {
        // A store that was never migrated: the first request already finds the schema.
        let path = TestDirectories.root.appendingPathComponent("unmigrated-\(UUID().uuidString)/gateway.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        let config = try Self.productionConfig()
        let migratedWhenListening = ProvisioningIDBox()
        try await GatewayHarness.serve({ onServerRunning in
            try buildGateway(config: config, environment: [:], logger: GatewayHarness.logger, store: store, onServerRunning: { port in
                // Looked at the moment the listener opens, not after.
                migratedWhenListening.value = "\((try? await store.schemaVersions())?.isEmpty == false)"
                await onServerRunning(port)
            })
        }) { port in
            #expect(migratedWhenListening.value == "true", "the listener opened before the store was migrated")
            let status = try await GatewayClient.with(port: port) { client in try await client.execute(uri: "/readyz", method: .get).status }
            #expect(status == .ok)
        }
    }

    /// A store whose file is removed under the running gateway is not ready (the ops audit had
    /// `rm -rf` the store's directory: `/readyz` stayed 200 while audit events went to a deleted
    /// file); the answer does not name the file (the probe is unauthenticated), the log does.
    @Test func aStoreWhoseFileIsGoneIsNotReady() async throws {
        let directory = TestDirectories.unique("ready")
        let path = directory.appendingPathComponent("gateway.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        let config = try Self.productionConfig()
        try await GatewayHarness.serve({ onServerRunning in
            try buildGateway(config: config, environment: [:], logger: GatewayHarness.logger, store: store, onServerRunning: onServerRunning)
        }) { port in
            try await GatewayClient.with(port: port) { client in
                #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
                try FileManager.default.removeItem(at: directory)
                let gone = try await client.execute(uri: "/readyz", method: .get)
                #expect(gone.status == .serviceUnavailable)
                #expect(gone.json["detail"] as? String == "the store cannot take writes (the log says why)")
                #expect(!String(buffer: gone.body).contains(directory.lastPathComponent))
                #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            }
        }
    }

    @Test func readinessTurns503AtOnceWhileRequestsAreStillServedForTheDelay() async throws {
        var config = try Self.productionConfig()
        // Long enough that the listener is certainly still open while the test looks; the drain
        // is ended by the test clock, not by waiting.
        config.server.shutdownDelayMS = 600_000
        let clock = TestClock()
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let process = try buildGateway(
            config: config, environment: [:], logger: GatewayHarness.logger, store: try await GatewayHarness.temporaryStore(), clock: clock,
            onServerRunning: { announce.yield($0) })
        let group = process.serviceGroup()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { announce.finish() }
                try await group.run()
            }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            try await GatewayClient.with(port: port) { client in
                #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
                // Asleep on the test clock: the purge job, from the start...
                try #require(await clock.waitForSleepers(1))
                await group.triggerGracefulShutdown()
                // ...and now the drain service too: shutdown has begun.
                try #require(await clock.waitForSleepers(2))
                #expect(process.readiness.isDraining)
                let readiness = try await client.execute(uri: "/readyz", method: .get)
                #expect(readiness.status == .serviceUnavailable)
                #expect(readiness.json["code"] as? String == "shutting_down")
                #expect(readiness.json["retryable"] as? Bool == true)
                // Other requests are still served during the delay.
                #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            }
            clock.advance(by: .milliseconds(600_000))
            try await tasks.waitForAll()
        }
    }

    /// Sandboxes sharing one store, one of which moved a demo card's reference to another card:
    /// the next sandbox to start says what is wrong and what to do, not `issuerReferenceInUse`.
    @Test func aSandboxWhoseDemoCardsCannotBeStoredSaysWhy() async throws {
        let moved = CardRecord(id: "demo_lithic_moved", program: "demo", issuer: "lithic",
                               issuerReference: IssuerReference(["issuer_card_id": "lithic_card_demo_001"]))
        await #expect {
            try await GatewayHarness.run(extraCards: [moved]) { _, _ in }
        } throws: { error in
            "\(error)".contains("the sandbox's demo cards (sandbox.cards) could not be stored") && "\(error)".contains("another card holds")
        }
    }

    /// By default a request accepted at the very end of the delay gets its whole deadline, and
    /// the margin for its last writes and its answer, before anything is cancelled.
    @Test func theShutdownBoundIsTheDelayPlusTheTimeoutWhichDefaultsToTheLongestDeadlineAndAMargin() async throws {
        var config = try Self.productionConfig()
        config.server.deadlineMS = 4_000
        config.routing.rules = [RoutingRuleConfig(match: .init(program: "demo"), issuer: "bridge", deadlineMS: 9_000)]
        config.server.shutdownDelayMS = 2_000
        let store = try await SQLiteGatewayStore.open(path: TestDirectories.root.appendingPathComponent("bound-\(UUID().uuidString)/g.sqlite").path)
        let defaulted = try buildGateway(config: config, environment: [:], logger: GatewayHarness.logger, store: store)
        #expect(defaulted.shutdownTimeout == .milliseconds(2_000 + 9_000) + GatewayConfig.shutdownMargin)
        #expect(GatewayConfig.shutdownMargin >= .seconds(1), "no room for a last request's writes and answer")
        config.server.shutdownTimeoutMS = 500
        let explicit = try buildGateway(config: config, environment: [:], logger: GatewayHarness.logger, store: store)
        #expect(explicit.shutdownTimeout == .milliseconds(2_500))
    }
}
