import Foundation
import GatewayServer
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import Testing

@Suite struct CardRegistryAPITests {
    static func send(_ client: GatewayClient, _ method: HTTPRequest.Method, _ uri: String, json: String? = nil,
                     key: String = GatewayHarness.demoKey) async throws -> GatewayResponse {
        var headers: HTTPFields = [.authorization: "Bearer \(key)"]
        if json != nil { headers[.contentType] = "application/json" }
        return try await client.execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }

    static let bridgeCard = #"{"issuer":"bridge","program":"demo","issuer_reference":{"customer_id":"cust_9","card_account_id":"ca_9"}}"#

    @Test func registerReadMoveAndDelete() async throws {
        try await GatewayHarness.run { client, _ in
            let created = try await Self.send(client, .put, "/v1/cards/card_new", json: Self.bridgeCard)
            #expect(created.status == .created)
            #expect(created.json["issuer"] as? String == "bridge")

            let read = try await Self.send(client, .get, "/v1/cards/card_new")
            #expect(read.status == .ok)
            #expect((read.json["issuer_reference"] as? [String: String]) == ["customer_id": "cust_9", "card_account_id": "ca_9"])

            // Moving the card to another issuer is one PUT.
            let moved = try await Self.send(client, .put, "/v1/cards/card_new",
                                            json: #"{"issuer":"tmp","program":"demo","issuer_reference":{"issuer_card_id":"t9"}}"#)
            #expect(moved.status == .ok)
            #expect(try await Self.send(client, .get, "/v1/cards/card_new").json["issuer"] as? String == "tmp")

            #expect(try await Self.send(client, .delete, "/v1/cards/card_new").status == .noContent)
            let gone = try await Self.send(client, .get, "/v1/cards/card_new")
            #expect(gone.status == .notFound && gone.json["code"] as? String == "card_not_found")
        }
    }

    /// Well-formed registrations the configuration cannot take: 422, never stored.
    @Test(arguments: [
        (#"{"issuer":"bridge","program":"demo","issuer_reference":{"customer_id":"c"}}"#, "issuer_reference.card_account_id"),
        (#"{"issuer":"stripe","program":"demo","issuer_reference":{}}"#, "issuer: no issuer 'stripe' serves program demo"),
        (#"{"issuer":"tmp","program":"demo","issuer_reference":{"customer_id":"c"}}"#, "issuer_reference.customer_id: not a field of this issuer"),
        // Marqeta's swagger: every provision request's `card_token` has `maxLength: 36`.
        (#"{"issuer":"marqeta","program":"demo","issuer_reference":{"issuer_card_id":"mq_card_01234567890123456789012345678"}}"#,
         "issuer_reference.issuer_card_id: at most 36 characters for a marqeta card"),
        // Bridge's OpenAPI: its customer and card account ids (`Id`) have `maxLength: 42`.
        (#"{"issuer":"bridge","program":"demo","issuer_reference":{"customer_id":"c","card_account_id":"ca_0123456789012345678901234567890123456789"}}"#,
         "issuer_reference.card_account_id: at most 42 characters for a bridge card"),
    ])
    func registrationsTheConfigCannotTakeAreRefused(body: String, mentions: String) async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await Self.send(client, .put, "/v1/cards/card_bad", json: body)
            #expect(response.status == .unprocessableContent)
            #expect(response.json["code"] as? String == "registration_refused")
            #expect((response.json["detail"] as? String)?.contains(mentions) == true, "\(response.json["detail"] ?? "")")
            #expect(try await Self.send(client, .get, "/v1/cards/card_bad").status == .notFound)
        }
    }

    @Test(arguments: [
        (#"{"issuer":"tmp","program":"","issuer_reference":{"issuer_card_id":"t"}}"#, "program"),
        (#"{"issuer":"tmp","program":"demo","issuer_reference":{"issuer_card_id":"t","note":"x"}}"#, "issuer_reference.note"),
        (#"{"issuer":"tmp","program":"demo"}"#, "issuer_reference"),
        (#"{"issuer":"tmp","program":"demo","issuer_reference":{"issuer_card_id":7}}"#, "issuer_reference"),
        ("not json", "JSON"),
    ])
    func malformedRegistrationsAreClear400s(body: String, mentions: String) async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await Self.send(client, .put, "/v1/cards/card_bad", json: body)
            #expect(response.status == .badRequest)
            #expect(response.json["code"] as? String == "invalid_request")
            #expect((response.json["detail"] as? String)?.contains(mentions) == true, "\(response.json["detail"] ?? "")")
            #expect(try await Self.send(client, .get, "/v1/cards/card_bad").status == .notFound)
        }
    }

    @Test func aBadCardIDIsRefused() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await Self.send(client, .put, "/v1/cards/card%20with%20spaces", json: Self.bridgeCard)
            #expect(response.status == .badRequest && (response.json["detail"] as? String)?.hasPrefix("card_id") == true)
        }
    }

    /// A percent-encoded byte order mark before an id or a query name is refused, whatever its
    /// letter case, and nothing is read or changed: Foundation's decoding drops a leading one, so
    /// the request had reached (and deleted) the card named without it (the input probe).
    @Test func aByteOrderMarkInTheRequestTargetIsRefused() async throws {
        try await GatewayHarness.run { client, _ in
            for (method, uri) in [(HTTPRequest.Method.delete, "/v1/cards/%EF%BB%BFcard_bridge_demo"),
                                  (.get, "/v1/cards/%ef%bb%bfcard_bridge_demo"),
                                  (.get, "/v1/cards?%EF%BB%BFprogram=demo"),
                                  (.get, "/v1/cards?program=%EF%BB%BFdemo")] {
                let response = try await Self.send(client, method, uri)
                #expect(response.status == .badRequest && response.json["code"] as? String == "invalid_request", "\(uri): \(response.json)")
                #expect((response.json["detail"] as? String)?.contains("byte order mark") == true, "\(uri)")
            }
            #expect(try await Self.send(client, .get, "/v1/cards/card_bridge_demo").status == .ok, "the card was deleted")
        }
    }

    @Test func aClientOnlyTouchesItsOwnPrograms() async throws {
        try await GatewayHarness.run { client, _ in
            let other = #"{"issuer":"bridge","program":"other","issuer_reference":{"customer_id":"c","card_account_id":"a"}}"#
            let r1 = try await Self.send(client, .put, "/v1/cards/card_x", json: other)
            #expect(r1.status == .forbidden)
            let r2 = try await Self.send(client, .put, "/v1/cards/card_x", json: other, key: GatewayHarness.otherKey)
            #expect(r2.status == .created)
            // Another program's card is answered as if it did not exist.
            let r3 = try await Self.send(client, .get, "/v1/cards/card_x")
            #expect(r3.status == .notFound && r3.json["code"] as? String == "card_not_found")
            let r4 = try await Self.send(client, .delete, "/v1/cards/card_x")
            #expect(r4.status == .notFound && r4.json["code"] as? String == "card_not_found")
            // Nor can it take the card over by re-registering it under its own program.
            let r5 = try await Self.send(client, .put, "/v1/cards/card_x", json: Self.bridgeCard)
            #expect(r5.status == .notFound && r5.json["code"] as? String == "card_not_found")
            #expect(try await Self.send(client, .get, "/v1/cards/card_x", key: GatewayHarness.otherKey).json["program"] as? String == "other")
            let r6 = try await Self.send(client, .get, "/v1/cards?program=other")
            #expect(r6.status == .forbidden)
        }
    }

    @Test func listingPagesThroughTheClientsCards() async throws {
        try await GatewayHarness.run { client, _ in
            for index in 0..<5 {
                let card = #"{"issuer":"bridge","program":"demo","issuer_reference":{"customer_id":"cust_p","card_account_id":"ca_"# + "\(index)\"}}"
                #expect(try await Self.send(client, .put, "/v1/cards/page_\(index)", json: card).status == .created)
            }
            // Another tenant's card, which the listing must not show.
            let other = try await Self.send(client, .put, "/v1/cards/page_other",
                                            json: #"{"issuer":"crossmint","program":"other","issuer_reference":{"issuer_card_id":"t"}}"#,
                                            key: GatewayHarness.otherKey)
            #expect(other.status == .created)
            var ids: [String] = []
            var uri = "/v1/cards?limit=3"
            while true {
                let page = try await Self.send(client, .get, uri)
                #expect(page.status == .ok)
                ids += (page.json["cards"] as? [[String: Any]] ?? []).compactMap { $0["card_id"] as? String }
                guard let next = page.json["next_after"] as? String else { break }
                uri = "/v1/cards?limit=3&after=\(next)"
            }
            #expect(ids == ["card_bridge_demo", "card_crossmint_demo", "card_lithic_demo", "card_local_demo", "card_marqeta_demo", "card_tmp_demo", "page_0", "page_1", "page_2", "page_3", "page_4"])
            let bridgeOnly = try await Self.send(client, .get, "/v1/cards?issuer=bridge&program=demo")
            #expect((bridgeOnly.json["cards"] as? [[String: Any]])?.count == 6)
            #expect(try await Self.send(client, .get, "/v1/cards?limit=0").status == .badRequest)
        }
    }

    @Test func aRegisteredCardProvisions() async throws {
        // The Bridge simulator knows the demo account. It belongs to one gateway card at a time:
        // once the demo card is deleted, the account can be registered under another id, end to end.
        try await GatewayHarness.run { client, sandbox in
            let body = #"{"issuer":"bridge","program":"demo","issuer_reference":{"customer_id":"cust_demo_001","card_account_id":"ca_demo_001"}}"#
            let taken = try await Self.send(client, .put, "/v1/cards/card_registered", json: body)
            #expect(taken.status == .conflict && taken.json["code"] as? String == "issuer_reference_in_use")
            #expect(try await Self.send(client, .delete, "/v1/cards/card_bridge_demo").status == .noContent)
            #expect(try await Self.send(client, .put, "/v1/cards/card_registered", json: body).status == .created)
            let response = try await GatewayHarness.provision(client, card: "card_registered", body: try GatewayHarness.requestBody())
            #expect(response.status == .ok && response.json["issuer"] as? String == "bridge")
            #expect(await sandbox.bridge.log.count == 1)
        }
    }
}
