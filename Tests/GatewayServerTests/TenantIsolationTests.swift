import Foundation
import GatewayTestSupport
import GRDB
import Gateway
import GatewayServer
import GatewayStore
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCore
import SandboxGateway
import Testing

/// Each exploit of a second tenant (client `other`, program `other`) and of an admin key against
/// the demo tenant's cards, as reported in the security issue: every one is refused, calls no
/// upstream, and leaves the data where it was.
@Suite struct TenantIsolationTests {
    static let send = CardRegistryAPITests.send
    static let other = GatewayHarness.otherKey
    static let ops = GatewayHarness.opsKey

    static func put(_ client: GatewayClient, _ id: String, _ json: String, key: String) async throws -> GatewayResponse {
        try await send(client, .put, "/v1/cards/\(id)", json, key)
    }

    static func upstreamCalls(_ sandbox: SandboxUpstreams) async -> Int {
        var count = 0
        for instance in sandbox.instances.values { count += await instance.log.count }
        return count
    }

    @Test(arguments: [
        #"{"issuer":"tmp","program":"other","issuer_reference":{"issuer_card_id":"tmp_card_demo_001"}}"#,
        #"{"issuer":"bridge","program":"other","issuer_reference":{"customer_id":"cust_demo_001","card_account_id":"ca_demo_001"}}"#,
        // Its own customer id with the demo tenant's card account: Bridge's card account id names
        // the card by itself (schema 014), so this is the same card, not a new one.
        #"{"issuer":"bridge","program":"other","issuer_reference":{"customer_id":"cust_other_001","card_account_id":"ca_demo_001"}}"#,
        #"{"issuer":"bridge","program":"other","issuer_reference":{"customer_id":"cust_other_001","card_account_id":"CA_DEMO_001"}}"#,
        #"{"issuer":"crossmint","program":"other","issuer_reference":{"issuer_card_id":"cm_card_demo_001"}}"#,
    ])
    func anotherTenantCannotClaimACardsIssuerReference(registration: String) async throws {
        // The issuer accounts are shared by both tenants (the sandbox limits tmp to demo's programs).
        var config = try GatewayHarness.sandboxConfig()
        config.issuers["tmp"]?.programs = nil
        try await GatewayHarness.run(config: config) { client, sandbox in
            try await Self.expectClaimRefused(client, sandbox, try await Self.put(client, "acme_steal", registration, key: Self.other))
        }
    }

    /// The other tenant's registration of `acme_steal` was refused: 409 naming no card and no
    /// tenant, and nothing to provision (no payload, no cardholder's name or address), nothing sent.
    static func expectClaimRefused(_ client: GatewayClient, _ sandbox: SandboxUpstreams, _ claimed: GatewayResponse,
                                   sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(claimed.status == .conflict, sourceLocation: sourceLocation)
        #expect(claimed.json["code"] as? String == "issuer_reference_in_use", sourceLocation: sourceLocation)
        let text = String(buffer: claimed.body)
        #expect(!text.contains("card_") && !text.contains("demo"), "\(text)", sourceLocation: sourceLocation)
        #expect(try await Self.send(client, .get, "/v1/cards/acme_steal", nil, Self.other).status == .notFound, sourceLocation: sourceLocation)
        let apple = try await GatewayHarness.provision(client, card: "acme_steal", body: try GatewayHarness.requestBody(), key: Self.other)
        #expect(apple.status == .notFound && apple.json["code"] as? String == "card_not_found", sourceLocation: sourceLocation)
        let google = try await WalletFlowTests.googlePay(client, card: "acme_steal", json: WalletFlowTests.ids, key: Self.other)
        #expect(google.status == .notFound && google.json["user_address"] == nil && google.json["display_name"] == nil,
                sourceLocation: sourceLocation)
        #expect(await Self.upstreamCalls(sandbox) == 0, sourceLocation: sourceLocation)
    }

    /// A card deleted (or pointed elsewhere) by its tenant leaves its issuer reference that
    /// tenant's: the reference is a card at the shared issuer account, so another tenant that
    /// learnt it cannot register it afterwards and provision that card. Its own tenant can.
    @Test func aReferenceLetGoOfStaysItsTenants() async throws {
        try await GatewayHarness.run { client, sandbox in
            let bridge = #"{"issuer":"bridge","program":"%@","issuer_reference":{"customer_id":"cust_demo_001","card_account_id":"ca_demo_001"}}"#
            #expect(try await Self.send(client, .delete, "/v1/cards/card_bridge_demo", nil, GatewayHarness.demoKey).status == .noContent)
            try await Self.expectClaimRefused(client, sandbox, try await Self.put(client, "acme_steal", String(format: bridge, "other"), key: Self.other))
            // Under a customer id of its own too: the card account is the card.
            let ownCustomer = #"{"issuer":"bridge","program":"other","issuer_reference":{"customer_id":"cust_other_9","card_account_id":"ca_demo_001"}}"#
            try await Self.expectClaimRefused(client, sandbox, try await Self.put(client, "acme_steal", ownCustomer, key: Self.other))
            // The tenant it was taken from registers it again, under a new id, and provisions it.
            #expect(try await Self.put(client, "card_bridge_again", String(format: bridge, "demo"), key: GatewayHarness.demoKey).status == .created)
            let own = try await GatewayHarness.provision(client, card: "card_bridge_again", body: try GatewayHarness.requestBody())
            #expect(own.status == .ok)
        }
    }

    @Test func extraReferenceFieldsCannotDisguiseAClaimedReference() async throws {
        try await GatewayHarness.run { client, _ in
            let disguised = #"{"issuer":"tmp","program":"other","issuer_reference":{"issuer_card_id":"tmp_card_demo_001","note":"x"}}"#
            let response = try await Self.put(client, "acme_steal", disguised, key: Self.other)
            #expect(response.status == .badRequest && (response.json["detail"] as? String)?.contains("issuer_reference.note: not an accepted field name") == true)
        }
    }

    /// Another spelling of the same upstream id (a trailing space, a look-alike digit, another
    /// Unicode form) would not collide in the registry, so only printable ASCII is taken.
    @Test(arguments: ["tmp_card_demo_001 ", " tmp_card_demo_001", "tmp_card_demo_00\u{FF11}", "tmp_card_demo_001\u{0301}",
                      "tmp_card_demo_001\u{00A0}", String(repeating: "e\u{0301}", count: 100)])
    func anotherSpellingOfAClaimedReferenceIsRefused(reference: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let body = try JSONSerialization.data(withJSONObject: [
                "issuer": "tmp", "program": "other", "issuer_reference": ["issuer_card_id": reference],
            ])
            let response = try await Self.put(client, "acme_steal", String(decoding: body, as: UTF8.self), key: Self.other)
            #expect(response.status == .badRequest && response.json["code"] as? String == "invalid_request")
            #expect(await sandbox.tmp.log.count == 0)
        }
    }

    @Test func aReplayIsAnsweredOnlyWhileTheCardIsStillTheClients() async throws {
        try await GatewayHarness.run { client, _ in
            var headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)", .contentType: "application/json"]
            headers[HTTPField.Name("Idempotency-Key")!] = "idem-replay-after-delete"
            let uri = "/v1/cards/card_tmp_demo/wallet-provisioning/google-pay"
            let first = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: WalletFlowTests.ids))
            #expect(first.status == .ok)
            #expect(try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: WalletFlowTests.ids)).status == .ok)
            #expect(try await Self.send(client, .delete, "/v1/cards/card_tmp_demo", nil, GatewayHarness.demoKey).status == .noContent)
            let replay = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: WalletFlowTests.ids))
            #expect(replay.status == .notFound && replay.json["opaque_payment_card"] == nil)
        }
    }

    @Test func aDeletedCardsVaultDataCannotBeClaimedUnderItsID() async throws {
        try await GatewayHarness.run { client, sandbox in
            #expect(try await Self.send(client, .delete, "/v1/cards/card_local_demo", nil, GatewayHarness.demoKey).status == .noContent)
            // A tenant may not name the gateway's own issuer at all...
            let local = #"{"issuer":"local","program":"other","issuer_reference":{}}"#
            let refused = try await Self.put(client, "card_local_demo", local, key: Self.other)
            #expect(refused.status == .forbidden && refused.json["code"] as? String == "forbidden")
            // ...and even when ops register that id again as a local card of another program, the
            // deleted card's vault entry went with it: there is no card number to encrypt.
            #expect(try await Self.put(client, "card_local_demo", local, key: Self.ops).status == .created)
            let response = try await GatewayHarness.provision(client, card: "card_local_demo", body: try GatewayHarness.requestBody(),
                                                              key: Self.other)
            #expect(response.status == .notFound && response.json["encrypted_pass_data"] == nil)
            #expect(await Self.upstreamCalls(sandbox) == 0)
        }
    }

    @Test func aClientCannotRePointItsOwnCardAtTheLocalIssuer() async throws {
        try await GatewayHarness.run { client, _ in
            let local = #"{"issuer":"local","program":"demo","issuer_reference":{}}"#
            let response = try await Self.put(client, "card_bridge_demo", local, key: GatewayHarness.demoKey)
            #expect(response.status == .forbidden)
            #expect(try await Self.send(client, .get, "/v1/cards/card_bridge_demo", nil, GatewayHarness.demoKey).json["issuer"] as? String == "bridge")
        }
    }

    @Test func tokenActivationWithoutACardNeedsAnExplicitlyAllowedClient() async throws {
        try await GatewayHarness.run { client, sandbox in
            let json = #"{"token_unique_reference":"DWSPMC0000000002"}"#
            for key in [Self.other, Self.ops] {
                let response = try await Self.send(client, .post, "/v1/token-activations", json, key)
                #expect(response.status == .forbidden && response.json["code"] as? String == "forbidden")
            }
            // With another program's card it is that card's 404.
            let foreign = try await Self.send(client, .post, "/v1/token-activations",
                                              #"{"token_unique_reference":"DWSPMC0000000002","card_id":"card_tmp_demo"}"#, Self.other)
            #expect(foreign.status == .notFound && foreign.json["code"] as? String == "card_not_found")
            #expect(await sandbox.tmp.log.count == 0)
            // The sandbox's demo client is allowed (activations_without_card: true).
            #expect(try await Self.send(client, .post, "/v1/token-activations", json, GatewayHarness.demoKey).status == .ok)
        }
    }

    /// An activation without a card carries only a token reference: at an account another tenant
    /// also uses, it could be that tenant's token. Refused (403) before any call, whatever the
    /// client's own flag says; with the account limited to the client's programs, it goes through.
    @Test func anActivationWithoutACardNeverGoesToAnAccountOtherTenantsUse() async throws {
        let json = #"{"token_unique_reference":"DNITHE000000000000000001"}"#
        for shared in [nil, ["demo", "other"]] as [[String]?] {
            var config = try GatewayHarness.sandboxConfig()
            config.issuers["tmp"]?.programs = shared
            try await GatewayHarness.run(config: config) { client, sandbox in
                let refused = try await Self.send(client, .post, "/v1/token-activations", json, GatewayHarness.demoKey)
                #expect(refused.status == .forbidden && refused.json["code"] as? String == "forbidden", "\(String(describing: shared))")
                #expect(await sandbox.tmp.log.count == 0)
            }
        }
        try await GatewayHarness.run { client, sandbox in
            let activated = try await Self.send(client, .post, "/v1/token-activations", json, GatewayHarness.demoKey)
            #expect(activated.status == .ok)
            #expect(await sandbox.tmp.log.count == 1)
        }
    }

    /// An activation reaches the issuer as a token reference alone, so a card of one's own at an
    /// account another tenant also uses must not open that tenant's tokens: refused (403) before
    /// any call, for both tenants, and the refusal says nothing of the token's card. With the
    /// account limited to the caller's programs, the same activation goes through.
    @Test func aCardOfOnesOwnOpensNoOtherTenantsTokensAtASharedAccount() async throws {
        let registration = #"{"issuer":"tmp","program":"other","issuer_reference":{"issuer_card_id":"tmp_card_other_1"}}"#
        let token = #""token_unique_reference":"DNITHE000000000000000001""#
        for shared in [nil, ["demo", "other"]] as [[String]?] {
            var config = try GatewayHarness.sandboxConfig()
            config.issuers["tmp"]?.programs = shared
            try await GatewayHarness.run(config: config) { client, sandbox in
                #expect(try await Self.put(client, "card_b_tmp", registration, key: Self.other).status == .created)
                for (card, key) in [("card_b_tmp", Self.other), ("card_tmp_demo", GatewayHarness.demoKey)] {
                    let refused = try await Self.send(client, .post, "/v1/token-activations", "{\(token),\"card_id\":\"\(card)\"}", key)
                    #expect(refused.status == .forbidden && refused.json["code"] as? String == "forbidden", "\(card), \(String(describing: shared))")
                    #expect(refused.json["card_last4"] == nil && refused.json["result"] == nil)
                }
                #expect(await sandbox.tmp.log.count == 0)
            }
        }
        var config = try GatewayHarness.sandboxConfig()
        config.issuers["tmp"]?.programs = ["other"]
        try await GatewayHarness.run(config: config) { client, sandbox in
            #expect(try await Self.put(client, "card_b_tmp", registration, key: Self.other).status == .created)
            let activated = try await Self.send(client, .post, "/v1/token-activations", "{\(token),\"card_id\":\"card_b_tmp\"}", Self.other)
            #expect(activated.status == .ok)
            #expect(await sandbox.tmp.log.count == 1)
        }
    }

    /// A tenant learns nothing about other programs from a PUT: naming another program is refused
    /// the same way whether that program exists and whichever issuer serves it, and an unknown
    /// issuer's answer does not list the configured ones.
    @Test func aCardPutTellsATenantNothingAboutOtherPrograms() async throws {
        try await GatewayHarness.run { client, sandbox in
            var answers: [String] = []
            // demo exists and the sandbox's tmp serves it; zzz exists nowhere.
            for program in ["demo", "zzz"] {
                let json = #"{"issuer":"tmp","program":"\#(program)","issuer_reference":{"issuer_card_id":"tmp_probe_1"}}"#
                let response = try await Self.put(client, "card_probe_1", json, key: Self.other)
                #expect(response.status == .forbidden && response.json["code"] as? String == "forbidden", "\(program)")
                answers.append("\(response.json["detail"] as? String ?? "")|\(response.json["title"] as? String ?? "")")
            }
            #expect(answers.count == 2 && answers[0] == answers[1], "\(answers)")
            let unknown = try await Self.put(client, "card_probe_1", #"{"issuer":"nosuch","program":"other","issuer_reference":{}}"#, key: Self.other)
            #expect(unknown.status == .unprocessableContent)
            let detail = unknown.json["detail"] as? String ?? ""
            #expect(!detail.contains("configured") && !detail.contains("bridge") && !detail.contains("local"), "\(detail)")
            // An admin still gets the list, to fix its request.
            let admin = try await Self.put(client, "card_probe_1", #"{"issuer":"nosuch","program":"other","issuer_reference":{}}"#, key: Self.ops)
            #expect((admin.json["detail"] as? String)?.contains("configured: bridge") == true, "\(admin.json)")
            #expect(await Self.upstreamCalls(sandbox) == 0)
        }
    }

    @Test func adminClientsManageButNeverProvision() async throws {
        try await GatewayHarness.run { client, sandbox in
            let apple = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody(), key: Self.ops)
            #expect(apple.status == .forbidden && apple.json["code"] as? String == "forbidden")
            let google = try await WalletFlowTests.googlePay(client, card: "card_tmp_demo", json: WalletFlowTests.ids, key: Self.ops)
            #expect(google.status == .forbidden)
            let tokens = try await Self.send(client, .get, "/v1/cards/card_tmp_demo/wallet-tokens", nil, Self.ops)
            #expect(tokens.status == .forbidden)
            let suspend = try await CardRegistryAPITests.send(client, .post, "/v1/cards/card_tmp_demo/wallet-tokens/tok_1/suspend", key: Self.ops)
            #expect(suspend.status == .forbidden)
            let activation = try await CardRegistryAPITests.send(
                client, .post, "/v1/token-activations", json: #"{"token_unique_reference":"DWSPMC0000000002","card_id":"card_tmp_demo"}"#,
                key: Self.ops)
            #expect(activation.status == .forbidden)
            #expect(await Self.upstreamCalls(sandbox) == 0)
            // Each refusal is on the audit trail, under the admin client, as a failure before any issuer.
            for refused in [apple, google, tokens, suspend, activation] {
                let id = try #require(refused.json["provisioning_id"] as? String, "\(refused.json)")
                let trail = try await Self.send(client, .get, "/v1/provisionings/\(id)", nil, Self.ops)
                let events = trail.json["events"] as? [[String: Any]] ?? []
                #expect(events.count == 1, "\(trail.json)")
                #expect(events.first?["client_id"] as? String == "ops" && events.first?["error_code"] as? String == "forbidden"
                        && events.first?["attempt"] as? Int == 0 && events.first?["outcome"] as? String == "failed", "\(trail.json)")
            }
            // They do read and list every program's cards, and those reads are audited.
            #expect(try await Self.send(client, .get, "/v1/cards/card_other_bridge", nil, Self.ops).status == .ok)
            let listed = try await Self.send(client, .get, "/v1/cards?limit=500", nil, Self.ops)
            let programs = Set((listed.json["cards"] as? [[String: Any]] ?? []).compactMap { $0["program"] as? String })
            #expect(programs == ["demo", "other"])
            let audit = try await Self.send(client, .get, "/v1/admin/audit?kind=admin_read", nil, Self.ops)
            let paths = (audit.json["events"] as? [[String: Any]] ?? []).compactMap { ($0["detail"] as? [String: String])?["path"] }
            // (the audit read itself is recorded before the page is read)
            #expect(paths == ["/v1/cards/{card_id}", "/v1/cards", "/v1/admin/audit"])
        }
    }

    @Test func everyRouteRefusesIDsThatCouldForgeLogsOrExhaustTheStore() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "isolation") { LineSafeLogHandler(captured.handler(label: $0)) }
        try await GatewayHarness.run(logger: logger) { client, sandbox in
            let forged = "card_bridge_demo%0A2026-11-22T00:00:00Z%20info%20forged"
            let response = try await GatewayHarness.provision(client, card: forged, body: try GatewayHarness.requestBody())
            #expect(response.status == .badRequest && response.json["code"] as? String == "invalid_request")
            #expect(!String(buffer: response.body).contains("forged"))
            for method: HTTPRequest.Method in [.get, .delete] {
                #expect(try await Self.send(client, method, "/v1/cards/\(forged)", nil, GatewayHarness.demoKey).status == .badRequest)
            }
            // A 5,000-character id, and a 60 KB issuer reference, are refused and nothing is stored.
            let long = String(repeating: "a", count: 5_000)
            #expect(try await Self.put(client, long, CardRegistryAPITests.bridgeCard, key: GatewayHarness.demoKey).status == .badRequest)
            let hugeReference = #"{"issuer":"tmp","program":"demo","issuer_reference":{"issuer_card_id":""# + String(repeating: "x", count: 60_000) + #""}}"#
            let huge = try await Self.put(client, "card_huge", hugeReference, key: GatewayHarness.demoKey)
            #expect(huge.status == .badRequest && (huge.json["detail"] as? String ?? "").count < 300)
            for reference in ["../../admin", "a/b", "bad\u{7}bell"] {
                let json = #"{"issuer":"tmp","program":"demo","issuer_reference":{"issuer_card_id":"# + "\"\(reference)\"}}"
                #expect(try await Self.put(client, "card_path", json.replacingOccurrences(of: "\u{7}", with: "\\u0007"),
                                           key: GatewayHarness.demoKey).status == .badRequest)
            }
            #expect(try await Self.send(client, .get, "/v1/cards/card_huge", nil, GatewayHarness.demoKey).status == .notFound)
            // Dots alone are path segments to URL tools, not a card a client could reach again;
            // dots among other characters are ids like any.
            for dots in ["%2E", "%2E%2E", "..."] {
                let refused = try await Self.put(client, dots, CardRegistryAPITests.bridgeCard, key: GatewayHarness.demoKey)
                #expect(refused.status == .badRequest && refused.json["code"] as? String == "invalid_request", "\(dots)")
            }
            #expect(try await Self.put(client, "demo..1", CardRegistryAPITests.bridgeCard, key: GatewayHarness.demoKey).status == .created)
            #expect(try await Self.send(client, .get, "/v1/provisionings/\(String(repeating: "p", count: 200))", nil,
                                        GatewayHarness.demoKey).status == .badRequest)
            #expect(await Self.upstreamCalls(sandbox) == 0)
        }
        // Whatever was logged, no line of it starts with the forged text.
        #expect(!captured.text.split(separator: "\n").contains { $0.hasPrefix("2026-11-22") })
    }

    @Test func aLogValueCannotStartALine() {
        let captured = CapturedLog()
        var logger = Logger(label: "t") { LineSafeLogHandler(captured.handler(label: $0)) }
        logger[metadataKey: "card_id"] = "c\nforged: yes"
        logger.info("ids \("a\r\nforged")", metadata: ["path": .array(["x\u{2028}y"])])
        #expect(captured.text.split(separator: "\n").count == 1, "\(captured.text)")
        #expect(captured.text.contains("c\\nforged") && captured.text.contains("a\\r\\nforged") && !captured.text.contains("\u{2028}"), "\(captured.text)")
    }

    @Test func anIssuerAccountLimitedToProgramsServesNoOtherProgram() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.issuers["tmp"]!.programs = ["demo"]
        config.routing.rules = [RoutingRuleConfig(match: .init(program: "other"), issuer: "tmp")]
        let unrouted = CardRecord(id: "card_other_unrouted", program: "other", issuer: nil, issuerReference: IssuerReference(["issuer_card_id": "t_o"]))
        try await GatewayHarness.run(config: config, extraCards: [unrouted]) { client, sandbox in
            let onTMP = #"{"issuer":"tmp","program":"other","issuer_reference":{"issuer_card_id":"tmp_other_1"}}"#
            let refused = try await Self.put(client, "card_other_tmp", onTMP, key: Self.other)
            #expect(refused.status == .unprocessableContent && refused.json["code"] as? String == "registration_refused")
            // Answered as an issuer that does not exist, so the tenant learns nothing about tmp's
            // other programs or that tmp exists at all.
            let nowhere = try await Self.put(client, "card_other_tmp",
                                             #"{"issuer":"tmpx","program":"other","issuer_reference":{"issuer_card_id":"tmp_other_1"}}"#, key: Self.other)
            #expect(nowhere.status == refused.status && nowhere.json["code"] as? String == "registration_refused")
            let detail = try #require(refused.json["detail"] as? String)
            #expect(detail == "issuer: no issuer 'tmp' serves program other")
            #expect((nowhere.json["detail"] as? String)?.replacingOccurrences(of: "'tmpx'", with: "'tmp'") == detail)
            #expect(!detail.contains("demo"))
            // A routing rule cannot send another program's card there either.
            let routed = try await GatewayHarness.provision(client, card: "card_other_unrouted", body: try GatewayHarness.requestBody(),
                                                            key: Self.other)
            #expect(routed.status == .forbidden)
            #expect(await sandbox.tmp.log.count == 0)
            // The program it serves is unaffected.
            #expect(try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody()).status == .ok)
        }
    }

    @Test func storedIdempotencyAnswersAreSealedAndStillReplay() async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, sandbox in
            var headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)", .contentType: "application/json"]
            headers[HTTPField.Name("Idempotency-Key")!] = "idem-sealed-1"
            let body = try GatewayHarness.requestBody()
            let uri = "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay"
            let first = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(bytes: body))
            #expect(first.status == .ok)
            let activation = try #require(first.json["activation_data"] as? String)
            let encrypted = try #require(first.json["encrypted_pass_data"] as? String)

            let queue = try TestSQLite.queue(store.path)
            let stored = try await queue.read { db in try Data.fetchOne(db, sql: "SELECT response_body FROM idempotency_keys") }
            let text = String(decoding: try #require(stored), as: UTF8.self)
            #expect(!text.contains(activation) && !text.contains(encrypted.prefix(40)) && !text.contains("provisioning_id"))

            let replay = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(bytes: body))
            #expect(replay.status == .ok && replay.json["encrypted_pass_data"] as? String == encrypted)
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    @Test func failedAuthenticationIsASecurityEventWithItsSourceNeverTheKey() async throws {
        try await GatewayHarness.run { client, _ in
            #expect(try await Self.send(client, .get, "/v1/cards", nil, "sk_guessed_key_123").status == .unauthorized)
            #expect(try await client.execute(uri: "/v1/cards", method: .get).status == .unauthorized)
            let audit = try await Self.send(client, .get, "/v1/admin/audit?kind=auth_failed", nil, Self.ops)
            let events = audit.json["events"] as? [[String: Any]] ?? []
            #expect(events.map { ($0["detail"] as? [String: String])?["reason"] } == ["invalid_key", "missing_key"])
            #expect(events.allSatisfy { $0["source"] as? String == "127.0.0.1" && $0["actor"] as? String == "anonymous" })
            #expect(!String(buffer: audit.body).contains("sk_guessed_key_123"))
        }
    }

    /// The trail of a refused probe tells nothing about the card it named: a probe of another
    /// tenant's card and one of a free id both leave a readable trail of the prober's own
    /// refusal, and a free id's stays readable once another tenant registers it (the
    /// observability audit read 404 for a foreign card and 200 for a free id, before and after).
    @Test func aRefusedProbesTrailIsNoOracleForOtherTenantsCards() async throws {
        try await GatewayHarness.run { client, _ in
            func probe(_ id: String) async throws -> String {
                let refused = try await Self.send(client, .get, "/v1/cards/\(id)/wallet-tokens", nil, Self.other)
                #expect(refused.status == .notFound && refused.json["code"] as? String == "card_not_found")
                return try #require(refused.json["provisioning_id"] as? String)
            }
            func trail(_ provisioning: String) async throws -> GatewayResponse {
                try await Self.send(client, .get, "/v1/provisionings/\(provisioning)", nil, Self.other)
            }
            let foreign = try await probe("card_bridge_demo")
            let free = try await probe("card_free_42")
            let foreignTrail = try await trail(foreign), freeTrail = try await trail(free)
            #expect(foreignTrail.status == .ok && freeTrail.status == .ok)
            let codes = { (response: GatewayResponse) in ((response.json["events"] as? [[String: Any]]) ?? []).map { $0["error_code"] as? String } }
            #expect(codes(foreignTrail) == ["card_not_found"] && codes(freeTrail) == ["card_not_found"])
            let card = #"{"issuer":"crossmint","program":"demo","issuer_reference":{"issuer_card_id":"cm_free_42"}}"#
            #expect(try await Self.put(client, "card_free_42", card, key: GatewayHarness.demoKey).status == .created)
            #expect(try await trail(free).status == .ok)
        }
    }

    /// A trail that reached an issuer is read by the program its card was in when the requests
    /// found the card theirs, which its events name: what became of the card since tells the
    /// reader nothing. Held to the card's owner now, demo's trail had turned 404 once it deleted
    /// the card and another tenant registered the id (the identifier audit: a read that told of
    /// another tenant's registration, leaving no security event).
    @Test func aTrailIsReadByTheProgramItsCardWasInNotByWhatBecameOfTheCard() async throws {
        try await GatewayHarness.run { client, _ in
            func trail(_ provisioning: String, _ key: String) async throws -> GatewayResponse {
                try await Self.send(client, .get, "/v1/provisionings/\(provisioning)", nil, key)
            }
            let card = #"{"issuer":"crossmint","program":"demo","issuer_reference":{"issuer_card_id":"cm_trail_1"}}"#
            #expect(try await Self.put(client, "card_trail_1", card, key: GatewayHarness.demoKey).status == .created)
            let own = try await GatewayHarness.provision(client, card: "card_trail_1", body: try GatewayHarness.requestBody())
            let provisioning = try #require(own.json["provisioning_id"] as? String)
            let before = try await trail(provisioning, GatewayHarness.demoKey)
            #expect(before.status == .ok && (before.json["events"] as? [[String: Any]])?.first?["issuer"] as? String == "crossmint")

            // Deleted by demo, and the id registered by another tenant: demo's own trail is unchanged.
            #expect(try await Self.send(client, .delete, "/v1/cards/card_trail_1", nil, GatewayHarness.demoKey).status == .noContent)
            let theirs = #"{"issuer":"bridge","program":"other","issuer_reference":{"customer_id":"cust_t1","card_account_id":"ca_t1"}}"#
            #expect(try await Self.put(client, "card_trail_1", theirs, key: Self.other).status == .created)
            let after = try await trail(provisioning, GatewayHarness.demoKey)
            #expect(after.status == .ok, "\(after.json)")
            #expect(String(buffer: after.body) == String(buffer: before.body), "the trail changed with another tenant's registration")
            // Moved by an admin into demo's program and out again: the same.
            let moved = #"{"issuer":"bridge","program":"demo","issuer_reference":{"customer_id":"cust_t1","card_account_id":"ca_t1"}}"#
            #expect(try await Self.put(client, "card_trail_1", moved, key: Self.ops).status == .ok)
            #expect(try await trail(provisioning, GatewayHarness.demoKey).status == .ok)
            #expect(try await Self.put(client, "card_trail_1", theirs, key: Self.ops).status == .ok)
            #expect(try await trail(provisioning, GatewayHarness.demoKey).status == .ok)
            // The other tenant never reads demo's trail, whoever holds the card.
            #expect(try await trail(provisioning, Self.other).status == .notFound)
        }
    }

    /// Every refused registry change is a security event: a DELETE of another program's card (or
    /// of no card), and a PUT the registration rules refuse (naming an issuer that serves only
    /// other programs), not only a PUT over another program's card (the observability audit).
    @Test func refusedDeletesAndRegistrationsAreSecurityEventsToo() async throws {
        try await GatewayHarness.run { client, _ in
            #expect(try await Self.send(client, .delete, "/v1/cards/card_bridge_demo", nil, Self.other).status == .notFound)
            #expect(try await Self.send(client, .delete, "/v1/cards/card_none_7", nil, Self.other).status == .notFound)
            let tmp = #"{"issuer":"tmp","program":"other","issuer_reference":{"issuer_card_id":"tmp_other_7"}}"#
            let refused = try await Self.put(client, "card_other_7", tmp, key: Self.other)
            #expect(refused.status.code == 422 && refused.json["code"] as? String == "registration_refused")
            let audit = try await Self.send(client, .get, "/v1/admin/audit?actor=other&kind=card_change_refused", nil, Self.ops)
            let events = (audit.json["events"] as? [[String: Any]]) ?? []
            #expect(events.map { $0["card_id"] as? String } == ["card_bridge_demo", "card_none_7", "card_other_7"])
            #expect(events.map { ($0["detail"] as? [String: String])?["reason"] } == ["foreign_card", "no_card", "registration_refused"])
            #expect((events.first?["detail"] as? [String: String])?["operation"] == "delete")
            #expect(try await Self.send(client, .get, "/v1/cards/card_bridge_demo", nil, GatewayHarness.demoKey).status == .ok)
        }
    }

    @Test func registryChangesAndRefusalsAreSecurityEventsOnlyAdminsRead() async throws {
        try await GatewayHarness.run { client, _ in
            let card = #"{"issuer":"crossmint","program":"other","issuer_reference":{"issuer_card_id":"cm_other_9"}}"#
            #expect(try await Self.put(client, "card_other_9", card, key: Self.other).status == .created)
            let moved = #"{"issuer":"bridge","program":"other","issuer_reference":{"customer_id":"c9","card_account_id":"a9"}}"#
            #expect(try await Self.put(client, "card_other_9", moved, key: Self.other).status == .ok)
            #expect(try await Self.put(client, "card_bridge_demo", moved, key: Self.other).status == .notFound)
            #expect(try await Self.send(client, .delete, "/v1/cards/card_other_9", nil, Self.other).status == .noContent)

            #expect(try await Self.send(client, .get, "/v1/admin/audit", nil, Self.other).status == .forbidden)
            let audit = try await Self.send(client, .get, "/v1/admin/audit?actor=other", nil, Self.ops)
            #expect(audit.status == .ok)
            let events = audit.json["events"] as? [[String: Any]] ?? []
            // The refused admin read is one too (PCI DSS 10.2.1.4: invalid access attempts), by the client, naming what it tried.
            #expect(events.map { $0["kind"] as? String } == ["card_registered", "card_updated", "card_change_refused", "card_deleted", "auth_failed"])
            #expect(events.last?["detail"] as? [String: String] == ["reason": "not_admin", "operation": "read the security audit"])
            // The admin's read is recorded with what it looked for (the ops audit: only the kind had been).
            _ = try await Self.send(client, .get, "/v1/admin/audit?card_id=card_bridge_demo", nil, Self.ops)
            let reads = (try await Self.send(client, .get, "/v1/admin/audit?kind=admin_read", nil, Self.ops)).json["events"] as? [[String: Any]] ?? []
            #expect(reads.contains { ($0["detail"] as? [String: String])?["actor"] == "other" }, "\(reads)")
            #expect(reads.contains { $0["card_id"] as? String == "card_bridge_demo" }, "\(reads)")
            let update = events[1]["detail"] as? [String: String]
            #expect(update == ["before_issuer": "crossmint", "before_program": "other", "after_issuer": "bridge", "after_program": "other"])
            #expect(events[2]["card_id"] as? String == "card_bridge_demo")
            #expect(events.allSatisfy { $0["source"] as? String == "127.0.0.1" })
            // Never a reference value or card data.
            #expect(!String(buffer: audit.body).contains("tmp_other_9") && !String(buffer: audit.body).contains("4111"))
        }
    }

    /// The sandbox's fault routes: a fault plays on whichever client's request comes next, so a
    /// client may queue, see and clear faults only at issuers whose account serves none of another
    /// client's programs, and only at simulators no other issuer uses (the security review: any key
    /// could break, list and clear every tenant's simulators). Here Bridge's account serves both
    /// tenants and tmp's only `demo`'s; the admin key reaches both.
    @Test func aTenantFaultsOnlyTheSimulatorsOfAccountsThatServeItAlone() async throws {
        try await GatewayHarness.run { client, sandbox in
            func fault(_ issuer: String, _ key: String) async throws -> GatewayResponse {
                try await Self.send(client, .post, "/v1/sandbox/faults", #"{"issuer":"\#(issuer)","mode":"unavailable","count":3}"#, key)
            }
            func listed(_ key: String) async throws -> [String] {
                let response = try await Self.send(client, .get, "/v1/sandbox/faults", nil, key)
                #expect(response.status == .ok)
                return (response.json["faults"] as? [[String: Any]] ?? []).compactMap { $0["simulator"] as? String }
            }
            for (issuer, key) in [("bridge", Self.other), ("bridge", GatewayHarness.demoKey), ("tmp", Self.other)] {
                let refused = try await fault(issuer, key)
                #expect(refused.status == .forbidden && refused.json["code"] as? String == "forbidden", "\(issuer): \(refused.json)")
                #expect((refused.json["detail"] as? String)?.contains("issuers.\(issuer).programs") == true, "\(refused.json)")
                // The detail names what the account needs, not the programs or clients it serves.
                #expect(!String(buffer: refused.body).contains("demo") && !String(buffer: refused.body).contains("other"), "\(refused.json)")
            }
            #expect(try await listed(Self.ops).isEmpty)

            #expect(try await fault("tmp", GatewayHarness.demoKey).status == .ok)
            #expect(try await fault("bridge", Self.ops).status == .ok)
            // Each sees only what it may touch; the admin sees both.
            #expect(try await listed(GatewayHarness.demoKey) == ["sandbox://tmp"])
            #expect(try await listed(Self.other).isEmpty)
            #expect(try await listed(Self.ops) == ["sandbox://bridge", "sandbox://tmp"])
            // A tenant's clear leaves what it does not reach.
            #expect(try await Self.send(client, .delete, "/v1/sandbox/faults", nil, Self.other).status == .ok)
            #expect(try await listed(Self.ops) == ["sandbox://bridge", "sandbox://tmp"])
            let cleared = try await Self.send(client, .delete, "/v1/sandbox/faults", nil, GatewayHarness.demoKey)
            #expect((cleared.json["faults"] as? [Any])?.isEmpty == true)
            #expect(try await listed(Self.ops) == ["sandbox://bridge"])
            #expect(await Self.upstreamCalls(sandbox) == 0)
        }
    }

    /// One simulator behind two issuers: a fault there plays on the other issuer's requests too, so
    /// an account of one's own is not enough when another tenant's account sends its requests to
    /// the same simulator. With one tenant (the file's `demo` and the admin `ops`), every issuer is
    /// the tenant's.
    @Test func aSimulatorSharedWithAnotherTenantsIssuerIsNotTheTenantsToFault() async throws {
        var shared = try GatewayHarness.sandboxConfig()
        var otherTMP = try #require(shared.issuers["tmp"])
        otherTMP.programs = ["other"]
        shared.issuers["tmp_other"] = otherTMP
        try await GatewayHarness.run(config: shared) { client, _ in
            let refused = try await Self.send(client, .post, "/v1/sandbox/faults", #"{"issuer":"tmp","mode":"reset"}"#, GatewayHarness.demoKey)
            #expect(refused.status == .forbidden, "\(refused.json)")
            #expect(try await Self.send(client, .post, "/v1/sandbox/faults", #"{"issuer":"tmp","mode":"reset"}"#, Self.ops).status == .ok)
            let seen = try await Self.send(client, .get, "/v1/sandbox/faults", nil, GatewayHarness.demoKey)
            #expect((seen.json["faults"] as? [Any])?.isEmpty == true, "\(seen.json)")
        }
        var alone = try GatewayHarness.sandboxConfig()
        alone.clients.removeAll { $0.id == "other" }
        try await GatewayHarness.run(config: alone) { client, _ in
            #expect(try await Self.send(client, .post, "/v1/sandbox/faults", #"{"issuer":"bridge","mode":"reset"}"#, GatewayHarness.demoKey).status == .ok)
            let seen = try await Self.send(client, .get, "/v1/sandbox/faults", nil, GatewayHarness.demoKey)
            #expect((seen.json["faults"] as? [[String: Any]])?.compactMap { $0["simulator"] as? String } == ["sandbox://bridge"])
        }
    }
}
