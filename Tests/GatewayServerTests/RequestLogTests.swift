import Foundation
import GatewayTestSupport
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

/// What one request leaves in the log: every line carries its `request_id`, the provisioning's
/// lines (the service's and the upstream attempts') its `provisioning_id`, and an internal error
/// its cause, which the caller never sees.
struct RequestLogTests {
    static func provision(_ client: GatewayClient, card: String, requestID: String) async throws -> GatewayResponse {
        try await client.execute(
            uri: "/v1/cards/\(card)/wallet-provisioning/apple-pay", method: .post,
            headers: [.contentType: "application/json", .authorization: "Bearer \(GatewayHarness.demoKey)",
                      HTTPField.Name("X-Request-Id")!: requestID],
            body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
    }

    @Test func everyLineOfAProvisioningCarriesItsRequestIDAndProvisioningID() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        let lines = Locked<[String]>([])
        let provisioningID = Locked<String?>(nil)
        try await GatewayHarness.run(config: try ResilienceTests.config(), logger: logger) { client, _ in
            // One 503 first: an upstream failure, a wait, a retry and a success, all in one request.
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"unavailable","count":1}"#)
            let before = captured.lines.count
            let response = try await Self.provision(client, card: "card_bridge_demo", requestID: "req_log_test_1")
            #expect(response.status == .ok)
            provisioningID.withLock { $0 = response.json["provisioning_id"] as? String }
            lines.withLock { $0 = Array(captured.lines.dropFirst(before)) }
        }
        let served = lines.withLock { $0 }
        let id = try #require(provisioningID.withLock { $0 })
        let expected = ["upstream answered", "waiting before the next attempt", "apple_pay succeeded"]
        for message in expected {
            #expect(served.contains { $0.contains(message) }, "no line says \(message): \(served)")
        }
        #expect(served.filter { $0.contains("upstream answered") }.count == 2, "the 503 and the 200: \(served)")
        for line in served {
            #expect(line.contains(" request_id=req_log_test_1"), "a line without the request id: \(line)")
            #expect(!line.contains("hb.request.id"), "two names for one request id: \(line)")
        }
        for line in served where expected.contains(where: line.contains) {
            #expect(line.contains(" provisioning_id=\(id)"), "a provisioning line without its provisioning id: \(line)")
        }
    }

    @Test func anInternalErrorIsLoggedWithItsCauseAndAnsweredWithout() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(logger: logger, store: store) { client, _ in
            // The registry's table goes away under the running gateway.
            let database = try TestSQLite.queue(store.path)
            try await database.write { try $0.execute(sql: "DROP TABLE cards") }
            let response = try await Self.provision(client, card: "card_bridge_demo", requestID: "req_broken_store")
            #expect(response.status == .internalServerError)
            #expect(response.json["code"] as? String == "internal")
            let body = String(buffer: response.body)
            #expect(!body.contains("no such table") && !body.contains("DatabaseError"), "the cause reached the caller: \(body)")
        }
        let failure = try #require(captured.lines.first { $0.contains("request failed") }, "\(captured.text)")
        #expect(failure.contains("no such table: cards"), "the log line lacks the cause: \(failure)")
        #expect(failure.contains(" request_id=req_broken_store"), "\(failure)")
    }

    /// The access line (`log.access`, on by default): one per request, whatever its outcome, with
    /// the route template and never the raw path or the key.
    @Test func everyRequestHasOneAccessLineWithItsRouteStatusCodeAndClient() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        try await GatewayHarness.run(logger: logger) { client, _ in
            let served = try await Self.provision(client, card: "card_bridge_demo", requestID: "req_access_ok")
            #expect(served.status == .ok)
            let refused = try await client.execute(
                uri: "/v1/cards/card_bridge_demo", method: .get,
                headers: [.authorization: "Bearer sk_not_a_known_key", HTTPField.Name("X-Request-Id")!: "req_access_401"])
            #expect(refused.status == .unauthorized)
            let unknown = try await client.execute(
                uri: "/v1/nowhere/4111111111111111", method: .get,
                headers: [.authorization: "Bearer \(GatewayHarness.demoKey)", HTTPField.Name("X-Request-Id")!: "req_access_404"])
            #expect(unknown.status == .notFound)
            let health = try await client.execute(uri: "/healthz", method: .get, headers: [HTTPField.Name("X-Request-Id")!: "req_access_health"])
            #expect(health.status == .ok)
        }
        func accessLines(_ id: String) -> [String] {
            captured.lines.filter { $0.contains(" gateway-tests: request ") && $0.contains(" request_id=\(id)") }
        }
        let ok = accessLines("req_access_ok")
        #expect(ok.count == 1, "\(ok)")
        let line = try #require(ok.first)
        for part in ["method=POST", "route=/v1/cards/{card_id}/wallet-provisioning/apple-pay", "status=200", "client=demo", "latency_ms=", "trace_id="] {
            #expect(line.contains(part), "\(part) missing: \(line)")
        }
        #expect(!line.contains("code=") && !line.contains("card_bridge_demo"), "\(line)")

        let unauthorized = try #require(accessLines("req_access_401").first, "\(captured.text)")
        #expect(unauthorized.contains("status=401") && unauthorized.contains("code=unauthorized"), "\(unauthorized)")
        #expect(!unauthorized.contains("client=") && !unauthorized.contains("sk_not_a_known_key"), "\(unauthorized)")

        let notFound = try #require(accessLines("req_access_404").first, "\(captured.text)")
        #expect(notFound.contains("route=unmatched") && notFound.contains("status=404") && notFound.contains("code=not_found"), "\(notFound)")
        #expect(!notFound.contains("4111111111111111") && !notFound.contains("nowhere"), "\(notFound)")

        #expect(accessLines("req_access_health").first?.contains("route=/healthz") == true, "\(captured.text)")
    }

    /// A caller cannot pass its request off as another: an id in the gateway's own shape (`req_`
    /// and 32 lowercase hex digits, as the gateway gave another request, another tenant's
    /// included) is replaced by a fresh one. Ids of the caller's own making, `req_`-prefixed ones
    /// included, are kept.
    @Test func anIDInTheGatewaysOwnShapeIsReplacedNotTaken() async throws {
        let name = HTTPField.Name("X-Request-Id")!
        try await GatewayHarness.run { client, _ in
            let first = try #require(try await client.execute(uri: "/healthz", method: .get).headers[name])
            #expect(RequestIDMiddlewareShape.isGateways(first), "\(first)")
            let again = try await client.execute(uri: "/healthz", method: .get, headers: [name: first]).headers[name]
            #expect(again != first, "another request's id was taken")
            #expect(again.map(RequestIDMiddlewareShape.isGateways) == true, "\(again ?? "none")")
            for own in ["req_" + String(repeating: "A", count: 32), "req_" + String(repeating: "a", count: 33), "req_access_ok", "req_0123"] {
                #expect(try await client.execute(uri: "/healthz", method: .get, headers: [name: own]).headers[name] == own)
            }
        }
    }

    @Test func theAccessLineCanBeTurnedOff() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        var config = try GatewayHarness.sandboxConfig()
        config.log.access = false
        try await GatewayHarness.run(config: config, logger: logger) { client, _ in
            let served = try await Self.provision(client, card: "card_bridge_demo", requestID: "req_access_off")
            #expect(served.status == .ok)
        }
        #expect(captured.lines.contains { $0.contains("apple_pay succeeded") && $0.contains("req_access_off") })
        #expect(!captured.lines.contains { $0.contains(" gateway-tests: request ") }, "\(captured.text)")
    }
}

/// The shape of the ids the gateway gives, written out here rather than read from the middleware.
enum RequestIDMiddlewareShape {
    static func isGateways(_ id: String) -> Bool {
        id.count == 36 && id.hasPrefix("req_") && id.dropFirst(4).allSatisfy { "0123456789abcdef".contains($0) }
    }
}
