import Crypto
import Foundation
import Gateway
import GRDB
import GatewayServer
import GatewayTestSupport
@testable import GatewayStore
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import ProvisioningCore
import Synchronization
import Testing

@Suite struct AuditAndIdempotencyTests {
    static func provision(_ client: GatewayClient, card: String = "card_bridge_demo", body: Data,
                          idempotencyKey: String?, apiKey: String = GatewayHarness.demoKey) async throws -> GatewayResponse {
        var headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(apiKey)"]
        if let idempotencyKey { headers[HTTPField.Name("Idempotency-Key")!] = idempotencyKey }
        return try await client.execute(uri: "/v1/cards/\(card)/wallet-provisioning/apple-pay", method: .post, headers: headers,
                                        body: ByteBuffer(bytes: body))
    }

    @Test func everyProvisioningIsAuditedWithoutItsPayload() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
            let id = try #require(response.json["provisioning_id"] as? String)
            let audit = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(audit.status == .ok)
            let events = try #require(audit.json["events"] as? [[String: Any]])
            #expect(events.count == 1)
            let event = try #require(events.first)
            #expect(event["client_id"] as? String == "demo")
            #expect(event["card_id"] as? String == "card_tmp_demo")
            #expect(event["wallet"] as? String == "apple_pay")
            #expect(event["issuer"] as? String == "tmp")
            #expect((event["endpoint"] as? String)?.hasPrefix("http://127.0.0.1:") == true)
            #expect(event["attempt"] as? Int == 1)
            #expect(event["outcome"] as? String == "succeeded")
            #expect(event["upstream_status"] as? Int == 200)
            #expect(event["latency_ms"] is Int)
            let text = String(buffer: audit.body)
            for value in ["activation_data", "encrypted_pass_data", "ephemeral_public_key"].compactMap({ response.json[$0] as? String }) {
                #expect(!text.contains(String(value.prefix(16))))
            }
            // Another client sees nothing of it.
            let other = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.otherKey)"])
            #expect(other.status == .notFound)
        }
    }

    /// Every replay of a key adds an event to its provisioning's trail, so a trail may grow for
    /// the key's lifetime: the trail is answered at most 1,000 events at a time, oldest (the
    /// attempts and the outcome) first, saying when it leaves some out; a refused repeat of the
    /// key reads only the trail's first event (resource audit: a 32,000-event trail had taken
    /// 548 ms to answer and 344 ms per refused repeat, on one of the pool's two threads).
    @Test func aLongTrailIsAnsweredBoundedOldestFirst() async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, _ in
            let key = "trail-\(UUID().uuidString)"
            let first = try await Self.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: key)
            #expect(first.status == .ok)
            let id = try #require(first.json["provisioning_id"] as? String)
            let replay = AuditEvent(provisioningID: ProvisioningID(id), at: Date(), client: "demo", cardID: "card_bridge_demo",
                                    operation: .applePay, issuer: nil, endpoint: nil, attempt: 0, outcome: .replayed, errorCode: nil,
                                    upstreamStatus: nil, latencyMS: 0)
            for _ in 0..<1_000 { try await store.appendAudit(replay) }
            let audit = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(audit.status == .ok)
            let events = try #require(audit.json["events"] as? [[String: Any]])
            #expect(events.count == 1_000)
            #expect(events.first?["outcome"] as? String == "succeeded")
            #expect(events.first?["attempt"] as? Int == 1)
            #expect(audit.json["truncated"] as? Bool == true)
            // A refused repeat is still noted (the first event alone read), as what it asked for.
            var other = try GatewayHarness.requestBody()
            other.append(contentsOf: Array(" ".utf8))
            let refused = try await Self.provision(client, card: "card_tmp_demo", body: other, idempotencyKey: key)
            #expect(refused.json["code"] as? String == "idempotency_key_reused")
            let all = try await store.auditEvents(ProvisioningID(id))
            #expect(all.count == 1_002)
            #expect(all.last?.errorCode == .idempotencyKeyReused)
            #expect(all.last?.cardID == "card_tmp_demo" && all.last?.issuer == nil)
            // A trail of fewer events says nothing of truncation.
            let short = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
            let shortID = try #require(short.json["provisioning_id"] as? String)
            let shortAudit = try await client.execute(uri: "/v1/provisionings/\(shortID)", method: .get,
                                                      headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(shortAudit.status == .ok)
            #expect(shortAudit.json["truncated"] == nil)
        }
    }

    @Test func aFailedProvisioningIsAuditedWithItsCode() async throws {
        let card = CardRecord(id: "card_gone", program: "demo", issuer: "bridge",
                              issuerReference: .init(["customer_id": "cust_demo_001", "card_account_id": "ca_closed"]))
        try await GatewayHarness.run(extraCards: [card]) { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_gone", body: try GatewayHarness.requestBody())
            #expect(response.status == .unprocessableContent)
            let id = try #require(response.json["provisioning_id"] as? String)
            let audit = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            let event = try #require((audit.json["events"] as? [[String: Any]])?.first)
            #expect(event["outcome"] as? String == "failed")
            #expect(event["error_code"] as? String == "upstream_rejected")
            #expect(event["upstream_status"] as? Int == 404)
            #expect(event["issuer"] as? String == "bridge")

            // A caller's mistake before any upstream is audited too, with no issuer.
            let unknown = try await GatewayHarness.provision(client, card: "card_nobody", body: try GatewayHarness.requestBody())
            let unknownID = try #require(unknown.json["provisioning_id"] as? String)
            let unknownAudit = try await client.execute(uri: "/v1/provisionings/\(unknownID)", method: .get,
                                                        headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            let unknownEvent = try #require((unknownAudit.json["events"] as? [[String: Any]])?.first)
            #expect(unknownEvent["error_code"] as? String == "card_not_found" && unknownEvent["attempt"] as? Int == 0)
        }
    }

    /// The first is logged and counted as succeeded once its answer is committed; the repeats
    /// are replays, not new successes.
    @Test func theSameKeyAndBodyReplayWithoutASecondUpstreamCall() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        try await GatewayHarness.run(logger: logger) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            let first = try await Self.provision(client, body: body, idempotencyKey: "order-42")
            let second = try await Self.provision(client, body: body, idempotencyKey: "order-42")
            #expect(first.status == .ok && second.status == .ok)
            #expect(String(buffer: first.body) == String(buffer: second.body))
            #expect(await sandbox.bridge.log.count == 1)
            #expect(captured.lines.filter { $0.contains("apple_pay succeeded") }.count == 1, "\(captured.text)")
            #expect(try await Self.requestsCounted(client, outcome: "succeeded") == 1)

            // The same JSON written differently is the same request.
            var reordered = try GatewayHarness.requestJSON()
            reordered["encoding"] = "base64"
            let third = try await Self.provision(client, body: try JSONSerialization.data(withJSONObject: reordered, options: [.prettyPrinted]),
                                                 idempotencyKey: "order-42")
            #expect(third.status == .ok && third.json["provisioning_id"] as? String == first.json["provisioning_id"] as? String)
            #expect(await sandbox.bridge.log.count == 1)

            let id = try #require(first.json["provisioning_id"] as? String)
            let audit = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            let events = audit.json["events"] as? [[String: Any]] ?? []
            #expect(events.compactMap { $0["outcome"] as? String } == ["succeeded", "replayed", "replayed"])
            // A replay names the issuer that answered and the device the request named, as the first event does.
            for field in ["issuer", "device_type"] {
                let values = events.map { $0[field] as? String }
                #expect(values.first! != nil && values.allSatisfy { $0 == values.first! }, "\(field): \(values)")
            }
        }
    }

    /// A replay refused because the client no longer holds the card (an admin moved it to
    /// another program) is on the trail, as a fresh refusal is, and its problem names the
    /// provisioning the client made; it had left no event and no id. Every repeat is: a second
    /// refusal answered 500, its event refused by the store as a second attempt 0 (found by the
    /// two-instance audit).
    @Test func aRefusedReplayIsOnTheTrailUnderItsProvisioning() async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            let first = try await Self.provision(client, body: body, idempotencyKey: "moved-1")
            let id = try #require(first.json["provisioning_id"] as? String)
            let moved = try await client.execute(
                uri: "/v1/cards/card_bridge_demo", method: .put,
                headers: [.authorization: "Bearer \(GatewayHarness.opsKey)", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"program":"other","issuer":"bridge","issuer_reference":{"customer_id":"cust_demo_001","card_account_id":"ca_demo_001"}}"#))
            #expect(moved.status == .ok, "\(moved.json)")
            for _ in 1...3 {
                let refused = try await Self.provision(client, body: body, idempotencyKey: "moved-1")
                #expect(refused.status == .notFound && refused.json["code"] as? String == "card_not_found", "\(refused.json)")
                #expect(refused.json["provisioning_id"] as? String == id, "\(refused.json)")
            }
            #expect(await sandbox.bridge.log.count == 1)
            // The trail is the client's record of its own requests, read by the program the card
            // was in when they found it theirs (`demo`, which the client still holds): the move
            // changes nothing of it, and the refused replays join it.
            let audit = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(audit.status == .ok && (audit.json["events"] as? [[String: Any]])?.count == 4, "\(audit.json)")
            let events = try await store.auditEvents(ProvisioningID(id))
            #expect(events.map(\.program) == ["demo", nil, nil, nil], "only the request that found the card names its program")
            #expect(events.map(\.outcome) == [.succeeded, .replayed, .replayed, .replayed], "\(events)")
            #expect(events.dropFirst().allSatisfy { $0.errorCode == .cardNotFound }, "\(events)")

            // Moved back, the client reads its trail again.
            let back = try await client.execute(
                uri: "/v1/cards/card_bridge_demo", method: .put,
                headers: [.authorization: "Bearer \(GatewayHarness.opsKey)", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"program":"demo","issuer":"bridge","issuer_reference":{"customer_id":"cust_demo_001","card_account_id":"ca_demo_001"}}"#))
            #expect(back.status == .ok, "\(back.json)")
            let again = try await client.execute(uri: "/v1/provisionings/\(id)", method: .get,
                                                 headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(again.status == .ok && (again.json["events"] as? [[String: Any]])?.count == 4, "\(again.json)")
        }
    }

    /// A trail whose card was deleted stays readable by the client that made it: the card is no
    /// other program's (a card moved away is, and its trail is 404; above).
    @Test func aTrailOfADeletedCardStaysItsClients() async throws {
        try await GatewayHarness.run { client, _ in
            let first = try await Self.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: nil)
            let id = try #require(first.json["provisioning_id"] as? String)
            let deleted = try await CardRegistryAPITests.send(client, .delete, "/v1/cards/card_bridge_demo", key: GatewayHarness.opsKey)
            #expect(deleted.status.code < 300, "\(deleted.json)")
            let trail = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)")
            #expect(trail.status == .ok && (trail.json["events"] as? [[String: Any]])?.count == 1, "\(trail.json)")
            let other = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)", key: GatewayHarness.otherKey)
            #expect(other.status == .notFound)
        }
    }

    @Test func theSameKeyWithAnotherBodyIsRefused() async throws {
        try await GatewayHarness.run { client, sandbox in
            let served = try await Self.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: "order-43")
            let before = try await ResilienceTests.events(client, served)
            var other = try GatewayHarness.requestJSON()
            other["nonce"] = Data([1, 2, 3, 4]).base64EncodedString()
            let reused = try await Self.provision(client, body: try JSONSerialization.data(withJSONObject: other), idempotencyKey: "order-43")
            #expect(reused.status == .unprocessableContent)
            #expect(reused.json["code"] as? String == "idempotency_key_reused")
            // The same key on another card is another request too.
            let otherCard = try await Self.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody(), idempotencyKey: "order-43")
            #expect(otherCard.json["code"] as? String == "idempotency_key_reused")
            #expect(await sandbox.bridge.log.count == 1)
            #expect(await sandbox.tmp.log.count == 0)
            // Each refused repeat is on the trail of the provisioning the key ran as: a `replayed`
            // event with the refusal's code and the card it asked for, naming no issuer (none was
            // called), after what was there.
            let after = try await ResilienceTests.events(client, served)
            #expect(after.count == before.count + 2, "\(after)")
            let refusals = after.suffix(2)
            #expect(refusals.allSatisfy { $0["outcome"] as? String == "replayed" && $0["error_code"] as? String == "idempotency_key_reused" })
            #expect(refusals.map { $0["card_id"] as? String } == ["card_bridge_demo", "card_tmp_demo"])
            #expect(refusals.allSatisfy { $0["issuer"] == nil && $0["endpoint"] == nil && $0["attempt"] as? Int == 0 })
        }
    }

    /// Six duplicates on six connections of their own (one connection would serve them one after
    /// another), while the issuer holds the first for 300 ms: they are in flight together, and the
    /// key lets exactly one reach the issuer; the others wait for its answer and replay it.
    @Test func concurrentDuplicatesCallTheUpstreamOnce() async throws {
        try await GatewayHarness.run { client, sandbox in
            try await ResilienceTests.addFault(client, #"{"issuer":"crossmint","mode":"slow","delay_ms":300,"count":1}"#)
            let body = try GatewayHarness.requestBody()
            let port = client.port
            let answers = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        try await GatewayClient.with(port: port) { own in
                            let response = try await Self.provision(own, card: "card_crossmint_demo", body: body, idempotencyKey: "order-44")
                            return "\(response.status.code) \(String(buffer: response.body))"
                        }
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(Set(answers).count == 1)
            #expect(answers.first?.hasPrefix("200 ") == true)
            #expect(await sandbox.crossmint.log.count == 1)
            // One upstream attempt and five replays, all under the one provisioning.
            let first = try #require(answers.first.flatMap { $0.split(separator: " ", maxSplits: 1).last }.map { Data($0.utf8) })
            let id = try #require((try JSONSerialization.jsonObject(with: first) as? [String: Any])?["provisioning_id"] as? String)
            let audit = try await CardRegistryAPITests.send(client, .get, "/v1/provisionings/\(id)")
            let outcomes = (audit.json["events"] as? [[String: Any]] ?? []).compactMap { $0["outcome"] as? String }
            #expect(outcomes.sorted() == ["replayed", "replayed", "replayed", "replayed", "replayed", "succeeded"])
        }
    }

    @Test func aFailedRequestReleasesItsKeySoARetryCallsAgain() async throws {
        let card = CardRecord(id: "card_gone", program: "demo", issuer: "bridge",
                              issuerReference: .init(["customer_id": "cust_demo_001", "card_account_id": "ca_closed"]))
        try await GatewayHarness.run(extraCards: [card]) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            #expect(try await Self.provision(client, card: "card_gone", body: body, idempotencyKey: "order-45").status == .unprocessableContent)
            #expect(try await Self.provision(client, card: "card_gone", body: body, idempotencyKey: "order-45").status == .unprocessableContent)
            #expect(await sandbox.bridge.log.count == 2)
        }
    }

    /// A keyed request whose issuer may have acted without the gateway knowing (TMP's connection
    /// lost mid-exchange or its answer undocumented, or a success status it does not document;
    /// Bridge's three attempts all answered undocumented, or its one answered 202) is never run again under its key: the retry hears `idempotency_outcome_unknown`
    /// (409, not retryable) and reaches no issuer, while a new key provisions. One the issuer
    /// refused (422, its outcome known) frees the key, and the retry provisions.
    @Test(arguments: [
        ("card_tmp_demo", "tmp", #""mode":"reset","count":1"#, true),
        ("card_tmp_demo", "tmp", #""mode":"garbage","count":1"#, true),
        ("card_bridge_demo", "bridge", #""mode":"garbage","count":3"#, true),
        // A success status the issuer does not document (202 to a POST): it may well have acted.
        ("card_tmp_demo", "tmp", #""mode":"accepted","count":1"#, true),
        ("card_bridge_demo", "bridge", #""mode":"accepted","count":1"#, true),
        ("card_tmp_demo", "tmp", #""mode":"rejected","count":1"#, false),
    ])
    func aKeyWhoseIssuerMayHaveActedIsNeverRunAgain(card: String, issuer: String, fault: String, unknown: Bool) async throws {
        try await ResilienceTests.runSkippingWaits(config: try ResilienceTests.config()) { client, sandbox in
            try await ResilienceTests.addFault(client, #"{"issuer":"\#(issuer)",\#(fault)}"#)
            let simulator = try #require(sandbox.instance(issuer: issuer))
            let body = try GatewayHarness.requestBody()
            let first = try await Self.provision(client, card: card, body: body, idempotencyKey: "order-unknown")
            #expect(first.status.code >= 400, "the first attempt succeeded")
            let calls = await simulator.log.count
            #expect(calls >= 1)
            let retry = try await Self.provision(client, card: card, body: body, idempotencyKey: "order-unknown")
            if unknown {
                #expect(retry.status == .conflict && retry.json["code"] as? String == "idempotency_outcome_unknown", "\(fault)")
                // It names the provisioning whose outcome is unknown, the first answer's, whose
                // trail holds its attempts.
                let named = try #require(first.json["provisioning_id"] as? String, "\(first.json)")
                #expect(retry.json["provisioning_id"] as? String == named, "\(retry.json)")
                // The refused retry is on that trail, last: a `replayed` event with the code.
                let trail = try await ResilienceTests.events(client, first)
                #expect(trail.count >= 2)
                #expect(trail.last?["outcome"] as? String == "replayed" && trail.last?["error_code"] as? String == "idempotency_outcome_unknown",
                        "\(trail)")
                #expect(await simulator.log.count == calls, "the retry reached \(issuer)")
                #expect(try await Self.provision(client, card: card, body: body, idempotencyKey: "order-new").status == .ok)
            } else {
                #expect(retry.status == .ok, "\(fault)")
                #expect(await simulator.log.count == calls + 1)
            }
        }
    }

    @Test func aMalformedKeyIsRefused() async throws {
        try await GatewayHarness.run { client, sandbox in
            let response = try await Self.provision(client, body: try GatewayHarness.requestBody(),
                                                    idempotencyKey: String(repeating: "k", count: 300))
            #expect(response.status == .badRequest && response.json["code"] as? String == "invalid_request")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    /// A key is stored as sent for its lifetime: one holding a card number (a client that made
    /// its keys of the card, leak audit) is refused before it is claimed, and not repeated.
    @Test(arguments: ["4111111111111111", "4929-0068-0000-0009", "pay-4111-1111-1111-1111"])
    func aKeyHoldingACardNumberIsRefused(key: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let response = try await Self.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: key)
            #expect(response.status == .badRequest && response.json["code"] as? String == "invalid_request")
            #expect(response.json["detail"] as? String == "Idempotency-Key: never a card number (a UUID is the usual key)")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    /// Two `Idempotency-Key` fields are not one key: they had been read joined (`a, b`) and
    /// refused for a character of the join, a message that named no cause; a proxy that joins
    /// them without the space made a new key of the two. Refused by name, nothing sent.
    @Test func twoIdempotencyKeysAreRefusedAsSuch() async throws {
        try await GatewayHarness.run { client, sandbox in
            var headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(GatewayHarness.demoKey)"]
            headers.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "key-one"))
            headers.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "key-two"))
            let response = try await client.execute(
                uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post, headers: headers,
                body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            #expect(response.status == .badRequest && response.json["code"] as? String == "invalid_request")
            #expect(response.json["detail"] as? String == "Idempotency-Key: given more than once")
            #expect(await sandbox.bridge.log.count == 0)
            // Each key alone is a key.
            let one = try await Self.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: "key-one")
            #expect(one.status == .ok)
        }
    }

    /// Synced commits per provisioning: one without a key (its audit event); two with one (the
    /// claim, before the issuer is called; then the answer together with its success event).
    @Test func aKeyedProvisioningCommitsTwiceAndItsSuccessEventIsKeptWithItsAnswer() async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            var before = store.writer.batchesCommitted
            let unkeyed = try await Self.provision(client, body: body, idempotencyKey: nil)
            #expect(unkeyed.status == .ok)
            #expect(store.writer.batchesCommitted - before == 1)

            before = store.writer.batchesCommitted
            let keyed = try await Self.provision(client, body: body, idempotencyKey: "order-commits-1")
            #expect(keyed.status == .ok)
            #expect(store.writer.batchesCommitted - before == 2)
            let id = try #require(keyed.json["provisioning_id"] as? String)
            let trail = try await store.auditEvents(ProvisioningID(id))
            #expect(trail.map(\.outcome) == [.succeeded] && trail.first?.attempt == 1 && trail.first?.upstreamStatus == 200)

            // The replay is the same answer, and the issuer was called once per fresh request.
            let replay = try await Self.provision(client, body: body, idempotencyKey: "order-commits-1")
            #expect(replay.status == .ok && replay.json["provisioning_id"] as? String == id)
            #expect(await sandbox.bridge.log.count == 2)
            #expect(try await store.auditEvents(ProvisioningID(id)).map(\.outcome) == [.succeeded, .replayed])
        }
    }

    /// The answer cannot be kept but its success event can: the event is written on its own, the
    /// caller gets 500 naming the provisioning, and the key is never run again.
    /// Nor is it logged or counted as succeeded: its log line and metric wait for the commit and
    /// say what the caller got.
    @Test func anAnswerThatCannotBeKeptStillLeavesItsSuccessEvent() async throws {
        let store = try await GatewayHarness.temporaryStore()
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        try await GatewayHarness.run(logger: logger, store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            let database = try TestSQLite.queue(store.path)
            try await database.write { db in
                try db.execute(sql: "CREATE TRIGGER refuse_answer BEFORE UPDATE ON idempotency_keys BEGIN SELECT RAISE(ABORT, 'answer refused'); END")
            }
            let first = try await Self.provision(client, body: body, idempotencyKey: "order-79")
            #expect(first.status == .internalServerError)
            let id = try #require(first.json["provisioning_id"] as? String, "\(first.json)")
            let trail = try await store.auditEvents(ProvisioningID(id))
            #expect(trail.map(\.outcome) == [.succeeded] && trail.first?.attempt == 1, "\(trail)")
            let served = captured.lines.filter { $0.contains(id) }
            #expect(served.contains { $0.contains("apple_pay failed after its issuer succeeded") && $0.contains("internal") }, "\(served)")
            #expect(!served.contains { $0.contains("apple_pay succeeded") }, "\(served)")
            #expect(try await Self.requestsCounted(client, outcome: "internal") == 1)
            #expect(try await Self.requestsCounted(client, outcome: "succeeded") == nil)
            try await database.write { db in
                try db.execute(sql: "DROP TRIGGER refuse_answer")
                try db.execute(sql: "UPDATE idempotency_keys SET created_at = created_at - 3600000, abandon_at = abandon_at - 3600000 WHERE key = 'order-79'")
            }
            let retry = try await Self.provision(client, body: body, idempotencyKey: "order-79")
            #expect(retry.status == .conflict && retry.json["code"] as? String == "idempotency_outcome_unknown")
            #expect(retry.json["provisioning_id"] as? String == id, "the claim names the provisioning it ran as: \(retry.json)")
            #expect(await sandbox.bridge.log.count == 1, "the issuer was called again")
        }
    }

    /// `gateway_requests_total` for Apple Pay and `outcome`, as `/metrics` has it (nil: no such line).
    static func requestsCounted(_ client: GatewayClient, outcome: String) async throws -> Double? {
        let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
        return text.split(separator: "\n")
            .first { $0.hasPrefix("gateway_requests_total") && $0.contains(#"operation="apple_pay""#) && $0.contains(#"outcome="\#(outcome)""#) }
            .flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// The answer and its success event were committed but the store reported a failure (a
    /// PostgreSQL COMMIT whose acknowledgement was lost): the caller gets 500, the event written
    /// again on its own is not a second copy, and a retry with the key replays the kept answer
    /// without calling the issuer again.
    @Test func aCommitWhoseAcknowledgementIsLostLeavesOneSuccessEventAndItsAnswer() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            store.loseNextAcknowledgement()
            let first = try await Self.provision(client, body: body, idempotencyKey: "order-80")
            #expect(first.status == .internalServerError && first.json["code"] as? String == "internal")
            #expect((first.json["detail"] as? String)?.contains("could not keep the answer") == true, "\(first.json)")
            let id = try #require(first.json["provisioning_id"] as? String, "\(first.json)")
            let trail = try await store.auditEvents(ProvisioningID(id))
            #expect(trail.map(\.outcome) == [.succeeded] && trail.first?.attempt == 1, "\(trail)")
            #expect(try await Self.requestsCounted(client, outcome: "internal") == 1)
            #expect(try await Self.requestsCounted(client, outcome: "succeeded") == nil)

            let retry = try await Self.provision(client, body: body, idempotencyKey: "order-80")
            #expect(retry.status == .ok && retry.json["provisioning_id"] as? String == id, "\(retry.json)")
            #expect(await sandbox.bridge.log.count == 1, "the issuer was called again")
            #expect(try await store.auditEvents(ProvisioningID(id)).map(\.outcome) == [.succeeded, .replayed])
        }
    }

    /// A store that stops answering after the issuer answered (PostgreSQL stalled past
    /// `operation_timeout_ms`) costs a request one wait, not two: no second write is tried (the
    /// events on their own, a failure event at attempt 0), which waited as long again and answered
    /// 4 s past the deadline in the two-instance audit. Keyed, the caller is told the answer may
    /// still be kept, and here it was (the write landed late), so the retry replays it.
    /// A card read the store did not answer in time costs one wait too: the failure event is
    /// written in the background, not waited for again (the PostgreSQL audit's outage answered
    /// after twice `operation_timeout_ms`).
    @Test func aCardReadTheStoreDidNotAnswerCostsOneWait() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(store: store) { client, sandbox in
            let failSafe = store.failSafe()
            defer { failSafe.cancel() }
            store.failNextCardRead()
            store.shutGate(throwingFirst: 0)
            let failed = try await Self.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: nil)
            #expect(!store.openedByTimer.withLock { $0 }, "the request wrote its failure event before answering")
            #expect(failed.status == .internalServerError && (failed.json["detail"] as? String)?.contains("did not answer in time") == true,
                    "\(failed.json)")
            store.openGate()
            let id = try #require(failed.json["provisioning_id"] as? String, "\(failed.json)")
            var trail: [AuditEvent] = []
            for _ in 0..<1000 where trail.isEmpty {
                trail = try await store.auditEvents(ProvisioningID(id))
                if trail.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(trail.map(\.attempt) == [0] && trail.first?.errorCode == .internal, "\(trail)")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    @Test func aStoreThatStopsAnsweringCostsARequestOneWait() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            // Keyed: the answer's commit reports unanswered (and landed); any audit write after it
            // waits at the gate, so a request that wrote again before answering would not answer
            // (but for the store's fail-safe, which the test then fails on).
            let failSafe = store.failSafe()
            defer { failSafe.cancel() }
            store.stopAnswering()
            store.shutGate(throwingFirst: 0)
            let keyed = try await Self.provision(client, body: body, idempotencyKey: "order-82")
            #expect(!store.openedByTimer.withLock { $0 }, "the keyed request wrote again before answering")
            #expect(keyed.status == .internalServerError && keyed.json["code"] as? String == "internal", "\(keyed.json)")
            #expect((keyed.json["detail"] as? String)?.contains("may still be kept") == true, "\(keyed.json)")
            #expect(store.stalledWrites.withLock { $0 } == ["complete"])
            store.stopAnswering(false)
            store.openGate()

            // Unkeyed: its one audit write reports unanswered; a failure event after it would wait.
            store.shutGate(throwingFirst: 1)
            let unkeyed = try await Self.provision(client, body: body, idempotencyKey: nil)
            #expect(!store.openedByTimer.withLock { $0 }, "the unkeyed request wrote again before answering")
            #expect(unkeyed.status == .internalServerError && unkeyed.json["code"] as? String == "internal", "\(unkeyed.json)")
            #expect(await sandbox.bridge.log.count == 2)
            store.openGate()

            let retry = try await Self.provision(client, body: body, idempotencyKey: "order-82")
            #expect(retry.status == .ok && retry.json["provisioning_id"] as? String == keyed.json["provisioning_id"] as? String, "\(retry.json)")
            #expect(await sandbox.bridge.log.count == 2, "the issuer was called again")
        }
    }

    /// A keyed request whose issuer's outcome is unknown (Marqeta, which takes no idempotency key,
    /// gave no answer in time) and whose audit write the store did not answer in time: it answers
    /// without waiting on the store again for its key's abandon, which is made in the background
    /// (the send-twice audit: the answer came up to twice the store's timeout late). Once it
    /// lands, a retry hears the outcome is unknown, and Marqeta is not called again.
    @Test func aKeyedRequestWhoseOutcomeIsUnknownPaysTheStoresWaitOnce() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(config: try ResilienceTests.config(), store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            let failSafe = store.failSafe()
            defer { failSafe.cancel() }
            try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"timeout","count":1,"delay_ms":6000}"#)
            store.stopAnswering()
            store.shutGate(throwingFirst: 1)
            let first = try await Self.provision(client, card: "card_marqeta_demo", body: body, idempotencyKey: "unknown-82")
            #expect(!store.openedByTimer.withLock { $0 }, "the request waited for its key's abandon before answering")
            // No answer goes out without its event: the attempt's, unconfirmed, makes it a 500.
            #expect(first.status == .internalServerError && first.json["code"] as? String == "internal", "\(first.json)")
            #expect(store.stalledWrites.withLock { $0 }.contains("abandon"), "no abandon was tried: \(store.stalledWrites.withLock { $0 })")
            let sent = await sandbox.marqeta.log.count
            store.stopAnswering(false)
            store.openGate()
            // The background abandon lands (it was waiting at the gate); the retry polls meanwhile.
            let retry = try await Self.provision(client, card: "card_marqeta_demo", body: body, idempotencyKey: "unknown-82")
            #expect(retry.status == .conflict && retry.json["code"] as? String == "idempotency_outcome_unknown", "\(retry.json)")
            #expect(await sandbox.marqeta.log.count == sent, "the retry reached Marqeta")
        }
    }

    /// An API key being rotated (`previous_api_keys_sha256`) is the same client as the new one:
    /// a retry sent with the new key replays what the old key's request did, instead of running
    /// it again (with two clients, the config audit saw one key's request sent twice).
    @Test func aRetryWithTheClientsNewKeyReplaysWhatTheOldKeyDid() async throws {
        var config = try GatewayHarness.sandboxConfig()
        let demo = try #require(config.clients.firstIndex { $0.id == "demo" })
        let old = "sk_sandbox_demo_2025"
        config.clients[demo].previousAPIKeysSHA256 = [Data(SHA256.hash(data: Data(old.utf8))).lowercaseHex]
        try await GatewayHarness.run(config: config) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            let first = try await Self.provision(client, body: body, idempotencyKey: "rotating-1", apiKey: old)
            #expect(first.status == .ok, "\(first.json)")
            let retry = try await Self.provision(client, body: body, idempotencyKey: "rotating-1")
            #expect(retry.status == .ok && retry.json["provisioning_id"] as? String == first.json["provisioning_id"] as? String)
            #expect(await sandbox.bridge.log.count == 1, "the retry with the new key called the issuer again")
        }
    }

    /// A write the store did not confirm in time and that then failed after all (rolled back)
    /// loses no event: the request answers its failure at once, and its events are written on
    /// their own in the background (the review found them lost without a trace). Nor does a
    /// write the store refused at once, twice (the request's own try, and for a key the events'
    /// write on their own after the answer's): a PostgreSQL restart under the answer's commit had
    /// lost the `succeeded` events of issuer calls that had been made (the crash audit).
    @Test(arguments: [false, true])
    func eventsWhoseWriteTimedOutOrWasRefusedAreStillWritten(refused: Bool) async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(store: store) { client, _ in
            let body = try GatewayHarness.requestBody()
            for key in ["order-83", nil] {
                if refused { store.refuseNext(2) } else { store.dropNext(1) }
                let failed = try await Self.provision(client, body: body, idempotencyKey: key)
                #expect(failed.status == .internalServerError, "\(failed.json)")
                let id = try #require(failed.json["provisioning_id"] as? String, "\(failed.json)")
                // Written in the background: waited for, up to 10 s, not timed.
                var trail: [AuditEvent] = []
                for _ in 0..<1000 where !trail.contains(where: { $0.outcome == .succeeded }) {
                    trail = try await store.auditEvents(ProvisioningID(id))
                    if !trail.contains(where: { $0.outcome == .succeeded }) { try await Task.sleep(for: .milliseconds(10)) }
                }
                #expect(trail.filter { $0.outcome == .succeeded }.map(\.attempt) == [1], "\(key ?? "unkeyed"): \(trail)")
                // Beside it, at most the request's own failure (attempt 0, `internal`): without a
                // key, a refused write is followed by the failure's event, which a write that
                // timed out is not (the request waits on the store no more).
                let others = trail.filter { $0.outcome != .succeeded }
                #expect(others.allSatisfy { $0.attempt == 0 && $0.errorCode == .internal }, "\(key ?? "unkeyed"): \(trail)")
                #expect(others.count <= (refused && key == nil ? 1 : 0), "\(key ?? "unkeyed"): \(trail)")
            }
        }
    }

    /// Events the store refused, whose background writes are waiting for their next try when the
    /// gateway is stopped, are written by the stop: every write left makes its remaining tries at
    /// once, before the store closes. The clock here never moves, so without the stop's drain the
    /// next try never comes (with a real one it came seconds after the process had ended, and the
    /// event of an issuer call that was made was lost; the durability audit).
    @Test func aStopWritesTheEventsWaitingForTheirNextTry() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        let clock = TestClock()
        let provisioning = Mutex<String?>(nil)
        try await GatewayHarness.run(store: store, clock: clock) { client, _ in
            // The request's own writes (its attempt's success, then its failure) and the first
            // background try of each are refused.
            store.refuseNext(4)
            let failed = try await Self.provision(client, body: try GatewayHarness.requestBody(), idempotencyKey: nil)
            #expect(failed.status == .internalServerError, "\(failed.json)")
            let id = try #require(failed.json["provisioning_id"] as? String, "\(failed.json)")
            provisioning.withLock { $0 = id }
            // Both background writes made their first try (not timed: up to 10 s).
            for _ in 0..<1000 where store.auditsWritten.withLock({ $0.count }) < 4 {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(store.auditsWritten.withLock { $0.count } == 4)
            #expect(try await store.auditEvents(ProvisioningID(id)).isEmpty, "nothing written before the stop")
        }
        let id = try #require(provisioning.withLock { $0 })
        let trail = try await store.auditEvents(ProvisioningID(id))
        #expect(trail.filter { $0.outcome == .succeeded }.map(\.attempt) == [1], "\(trail)")
        #expect(trail.contains { $0.attempt == 0 && $0.errorCode == .internal }, "\(trail)")
        #expect(clock.now.offset == .zero, "the clock was never moved")
    }

    /// A request under a key that ended knowing the issuer did nothing frees the key; a release
    /// the store refuses (a PostgreSQL restart) is made again in the background, so the retry
    /// with the key runs instead of reading as in progress, then as an outcome unknown, though
    /// nothing was sent (the crash audit).
    @Test func aKeysReleaseTheStoreRefusedIsMadeAgain() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(config: try ResilienceTests.config(), store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            // Bridge refuses the request (its own 400): the issuer did nothing.
            try await ResilienceTests.addFault(client, #"{"issuer":"bridge","mode":"rejected","count":1}"#)
            store.refuseNext(0, releases: 1)
            let first = try await Self.provision(client, body: body, idempotencyKey: "order-84")
            #expect(first.status.code == 502 || first.status.code == 422, "\(first.json)")
            let retry = try await Self.provision(client, body: body, idempotencyKey: "order-84")
            #expect(retry.status == .ok, "\(retry.json)")
            #expect(await sandbox.bridge.log.requests.map(\.status) == [400, 200])
        }
    }

    /// A claim committed with its acknowledgement lost: the caller gets 500 and nothing reached
    /// the issuer, so the claim is freed, and a retry with the key runs (once) instead of reading
    /// as in progress, then as an outcome unknown.
    @Test func aClaimWhoseAcknowledgementIsLostIsFreedForTheRetry() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            store.loseNextClaimAcknowledgement()
            let first = try await Self.provision(client, body: body, idempotencyKey: "order-81")
            #expect(first.status == .internalServerError && first.json["code"] as? String == "internal", "\(first.json)")
            #expect((first.json["detail"] as? String)?.contains("could not record the Idempotency-Key") == true, "\(first.json)")
            #expect(await sandbox.bridge.log.count == 0)
            let retry = try await Self.provision(client, body: body, idempotencyKey: "order-81")
            #expect(retry.status == .ok, "\(retry.json)")
            #expect(await sandbox.bridge.log.count == 1)
            let replay = try await Self.provision(client, body: body, idempotencyKey: "order-81")
            #expect(replay.status == .ok && replay.json["provisioning_id"] as? String == retry.json["provisioning_id"] as? String)
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    /// From here on the store refuses every audit event (and only those), under the running gateway.
    static func refuseAuditEvents(_ store: SQLiteGatewayStore, _ refuse: Bool = true) async throws {
        let database = try TestSQLite.queue(store.path)
        try await database.write { db in
            if refuse {
                try db.execute(sql: "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'audit refused'); END")
            } else {
                try db.execute(sql: "DROP TRIGGER refuse_audit")
            }
        }
    }

    /// No answer goes out without its audit event: a refusal made before any upstream (attempt 0),
    /// and an issuer's failure, are answered 500 `internal` when their event cannot be written.
    @Test func aFailureWhoseAuditEventIsLostIsNotAnswered() async throws {
        let store = try await GatewayHarness.temporaryStore()
        let card = CardRecord(id: "card_gone", program: "demo", issuer: "bridge",
                              issuerReference: .init(["customer_id": "cust_demo_001", "card_account_id": "ca_closed"]))
        try await GatewayHarness.run(extraCards: [card], store: store) { client, _ in
            let body = try GatewayHarness.requestBody()
            #expect(try await Self.provision(client, card: "card_nobody", body: body, idempotencyKey: nil).status == .notFound)
            try await Self.refuseAuditEvents(store)
            for card in ["card_nobody", "card_gone"] {
                let response = try await Self.provision(client, card: card, body: body, idempotencyKey: nil)
                #expect(response.status == .internalServerError, "\(card)")
                #expect(response.json["code"] as? String == "internal", "\(card)")
            }
        }
    }

    /// A replay is put on record before the stored answer goes out: if it cannot be, the answer is
    /// not replayed (500), and once the store takes events again the same key replays as before.
    @Test func aReplayWhoseAuditEventIsLostIsNotAnswered() async throws {
        let store = try await GatewayHarness.temporaryStore()
        // The gateway's clock, moved by hand: the background writes of lost events wait on it.
        let time = TestClock()
        try await GatewayHarness.run(store: store, clock: time) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            let first = try await Self.provision(client, body: body, idempotencyKey: "order-77")
            #expect(first.status == .ok)
            try await Self.refuseAuditEvents(store)
            let refused = try await Self.provision(client, body: body, idempotencyKey: "order-77")
            #expect(refused.status == .internalServerError && refused.json["code"] as? String == "internal")
            #expect(refused.json["encrypted_pass_data"] == nil)
            try await Self.refuseAuditEvents(store, false)
            let replayed = try await Self.provision(client, body: body, idempotencyKey: "order-77")
            #expect(replayed.status == .ok && String(buffer: replayed.body) == String(buffer: first.body))
            #expect(await sandbox.bridge.log.count == 1)
            // The refused replay's event is not written later either: its caller got a 500, not
            // the stored answer. Whatever waits to write again (1, 2, 4 and 8 s) is let run.
            for _ in 0..<8 { guard await time.advanceToNextSleeper(upTo: .seconds(8), limit: .milliseconds(500)) != nil else { break } }
            try await Task.sleep(for: .milliseconds(100))
            let id = try #require(first.json["provisioning_id"] as? String)
            let trail = try await store.auditEvents(ProvisioningID(id))
            #expect(trail.map(\.outcome) == [.succeeded, .replayed], "\(trail)")
        }
    }

    /// A request refused before any issuer was called (no such card) whose audit event cannot be
    /// written ends in a 500, but nothing can have reached an issuer: its key is freed, and the
    /// retry with the same key gets the real answer.
    @Test func aKeyedFailureBeforeAnyIssuerIsFreedEvenWhenItsAuditEventIsLost() async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            try await Self.refuseAuditEvents(store)
            #expect(try await Self.provision(client, card: "card_nobody", body: body, idempotencyKey: "order-79").status == .internalServerError)
            try await Self.refuseAuditEvents(store, false)
            let retry = try await Self.provision(client, card: "card_nobody", body: body, idempotencyKey: "order-79")
            #expect(retry.status == .notFound && retry.json["code"] as? String == "card_not_found")
            #expect(await TenantIsolationTests.upstreamCalls(sandbox) == 0)
        }
    }

    /// The issuer provisioned, but its success could not be put on record: the caller gets a 500,
    /// and the key is never run again (no second upstream call), however the caller retries.
    @Test func aSuccessWhoseAuditEventIsLostKeepsItsKey() async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, sandbox in
            let body = try GatewayHarness.requestBody()
            try await Self.refuseAuditEvents(store)
            let first = try await Self.provision(client, body: body, idempotencyKey: "order-78")
            #expect(first.status == .internalServerError)
            #expect((first.json["provisioning_id"] as? String)?.hasPrefix("prv_") == true, "\(first.json)")
            #expect(await sandbox.bridge.log.count == 1)
            try await Self.refuseAuditEvents(store, false)
            // Make the claim look as old as an abandoned one: its request can no longer be running.
            let database = try TestSQLite.queue(store.path)
            try await database.write { db in
                try db.execute(sql: "UPDATE idempotency_keys SET created_at = created_at - 3600000, abandon_at = abandon_at - 3600000 WHERE key = 'order-78'")
            }
            let retry = try await Self.provision(client, body: body, idempotencyKey: "order-78")
            #expect(retry.status == .conflict && retry.json["code"] as? String == "idempotency_outcome_unknown")
            #expect(retry.json["provisioning_id"] as? String == first.json["provisioning_id"] as? String, "\(retry.json)")
            #expect(retry.json["retryable"] as? Bool == false)
            #expect(await sandbox.bridge.log.count == 1, "the issuer was called again")
        }
    }
}
