import Foundation
import GatewayServer
import GatewayStore
import HTTPTypes
import ProvisioningCore
import Synchronization
import Testing
import X509

/// The wall time the composition is given decides what is kept or compared as a date: an
/// Idempotency-Key's expiry, a certificate's validity, an event's timestamp. The test moves it;
/// nothing here waits for real time to pass.
@Suite struct WallClockTests {
    final class Wall: Sendable {
        let date: Mutex<Date>
        init(_ date: Date) { self.date = Mutex(date) }
        func advance(_ seconds: TimeInterval) { date.withLock { $0 = $0.addingTimeInterval(seconds) } }
        var read: @Sendable () -> Date { { self.date.withLock { $0 } } }
    }

    @Test func aKeyExpiresWhenTheWallClockPassesItsLifetime() async throws {
        let wall = Wall(Date())
        let config = try GatewayHarness.sandboxConfig()
        try await GatewayHarness.run(config: config, wallClock: wall.read) { client, _ in
            let key = "wall-\(UUID().uuidString)"
            let first = try await AuditAndIdempotencyTests.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: key)
            #expect(first.status == .ok)
            let firstID = try #require(first.json["provisioning_id"] as? String)
            // Within its lifetime, the key is the first request's: another request with it is refused.
            wall.advance(TimeInterval(config.store.idempotencyTTLSeconds - 1))
            let reused = try await AuditAndIdempotencyTests.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody(),
                                                                      idempotencyKey: key)
            #expect(reused.json["code"] as? String == "idempotency_key_reused")
            // Past it, by the wall clock alone, the key is free: the request runs.
            wall.advance(2)
            let fresh = try await AuditAndIdempotencyTests.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody(),
                                                                     idempotencyKey: key)
            #expect(fresh.status == .ok, "\(fresh.json)")
            #expect(fresh.json["issuer"] as? String == "tmp")
            #expect(fresh.json["provisioning_id"] as? String != firstID)
        }
    }

    @Test func aCertificateIsValidatedAndAnEventStampedAtTheWallClocksTime() async throws {
        // A day after the sandbox device's leaf expires, by its own notValidAfter.
        let pem = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Config/sandbox/device-leaf.pem"), encoding: .utf8)
        let wall = Wall(try Certificate(pemEncoded: pem).notValidAfter.addingTimeInterval(86_400))
        try await GatewayHarness.run(wallClock: wall.read) { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_local_demo", body: try GatewayHarness.requestBody())
            #expect(response.status == .unprocessableContent)
            #expect(response.json["code"] as? String == "invalid_certificate_chain")
            #expect((response.json["detail"] as? String)?.contains("expired") == true, "\(response.json)")
            let id = try #require(response.json["provisioning_id"] as? String)
            let audit = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            let at = try #require((audit.json["events"] as? [[String: Any]])?.first?["at"] as? String)
            let stamped = try #require(ISO8601DateFormatter().date(from: at) ?? {
                let formatter = ISO8601DateFormatter()
                formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                return formatter.date(from: at)
            }())
            #expect(abs(stamped.timeIntervalSince(wall.read())) < 5, "\(at)")
        }
    }
}
