import Foundation
import Gateway
import GatewayServer
import GatewayStore
import GatewayTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCore
import Synchronization
import Testing

@Suite struct PersistenceTests {
    @Test func whatTheAPIWroteSurvivesARestart() async throws {
        let directory = TestDirectories.root.appendingPathComponent("restart-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("gateway.sqlite").path
        let provisioningID = ProvisioningIDBox()

        let first = try await SQLiteGatewayStore.open(path: path)
        try await first.migrate()
        try await GatewayHarness.run(store: first) { client, _ in
            let put = try await CardRegistryAPITests.send(client, .put, "/v1/cards/card_kept", json: CardRegistryAPITests.bridgeCard)
            #expect(put.status == .created)
            let provisioned = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
            provisioningID.value = provisioned.json["provisioning_id"] as? String
        }

        // A new process would open the same file afresh.
        let second = try await SQLiteGatewayStore.open(path: path)
        try await second.migrate()
        try await GatewayHarness.run(store: second) { client, _ in
            let card = try await CardRegistryAPITests.send(client, .get, "/v1/cards/card_kept")
            #expect(card.status == .ok && card.json["issuer"] as? String == "bridge")
            let id = try #require(provisioningID.value)
            let audit = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)")
            #expect((audit.json["events"] as? [[String: Any]])?.count == 1)
        }
    }

    @Test(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipMessage)))
    func twoInstancesOnOnePostgresShareStateAndCallTheUpstreamOnce() async throws {
        let logger = Logger(label: "two-instances")
        let config = try GatewayHarness.sandboxConfig()
        try await PostgresTestServer.with { server in
            let stores = try (0..<2).map { _ in try PostgresGatewayStore(url: server.url, logger: logger) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { await store.run() } }
                defer { group.cancelAll() }
                let body = try GatewayHarness.requestBody()
                // Two whole gateways (each with its own simulators), one database.
                try await GatewayHarness.run(config: config, logger: logger, store: stores[0]) { first, firstSandbox in
                    try await GatewayHarness.run(config: config, logger: logger, store: stores[1]) { second, secondSandbox in
                        // A card registered on one instance is seen by the other.
                        let put = try await CardRegistryAPITests.send(first, .put, "/v1/cards/card_shared", json: CardRegistryAPITests.bridgeCard)
                        #expect(put.status == .created)
                        #expect(try await CardRegistryAPITests.send(second, .get, "/v1/cards/card_shared").status == .ok)

                        // The same Idempotency-Key at both at once: one upstream call, one answer.
                        async let a = AuditAndIdempotencyTests.provision(first, card: "card_crossmint_demo", body: body, idempotencyKey: "shared-1")
                        async let b = AuditAndIdempotencyTests.provision(second, card: "card_crossmint_demo", body: body, idempotencyKey: "shared-1")
                        let (answerA, answerB) = try await (a, b)
                        #expect(answerA.status == .ok && answerB.status == .ok)
                        #expect(String(buffer: answerA.body) == String(buffer: answerB.body))
                        let calls = await firstSandbox.crossmint.log.count + secondSandbox.crossmint.log.count
                        #expect(calls == 1)

                        // And either instance shows the audit trail.
                        let id = try #require(answerA.json["provisioning_id"] as? String)
                        let audit = try await CardRegistryAPITests.send(second, .get, "/v1/provisionings/\(id)")
                        let outcomes = (audit.json["events"] as? [[String: Any]])?.compactMap { $0["outcome"] as? String }
                        #expect(outcomes?.sorted() == ["replayed", "succeeded"])
                    }
                }
            }
        }
    }
}

/// A value a test's closure sets and the test reads afterwards.
final class ProvisioningIDBox: Sendable {  // also any string a closure reports
    private let storage = Mutex<String?>(nil)
    var value: String? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
