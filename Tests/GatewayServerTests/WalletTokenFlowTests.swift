import Foundation
import Gateway
import GatewayServer
import GatewayTestSupport
import HTTPTypes
import NIOCore
import HummingbirdTesting
import ProvisioningCore
import Sandbox
import Testing

/// Samsung Pay and a card's wallet tokens through Marqeta, end to end against its sandbox
/// simulator (which enforces the swagger's request schemas).
@Suite struct WalletTokenFlowTests {
    @Test func samsungPayPassesTheIssuersPayloadOnUntouched() async throws {
        try await GatewayHarness.run { client, sandbox in
            let response = try await WalletTokenAPITests.samsungPay(client, card: "card_marqeta_demo")
            #expect(response.status == .ok, "\(String(buffer: response.body))")
            #expect(response.json["issuer"] as? String == "marqeta")
            // Exactly the string the simulator answered with, not re-encoded.
            let sent = try #require(await sandbox.marqeta.seen.samsungPayloads.first)
            #expect(response.json["provision_payload"] as? String == sent)
            #expect(response.json["last_digits"] as? String == "5100")
            #expect(response.json["card_type"] as? String == "CREDIT")
            #expect(await sandbox.marqeta.seen.deviceTypes == ["MOBILE_PHONE"])

            // Marqeta takes at most 24 characters of device id: refused before any call.
            let long = try await WalletTokenAPITests.samsungPay(
                client, card: "card_marqeta_demo", json: #"{"wallet_account_id":"w","device_id":"\#(String(repeating: "d", count: 25))"}"#)
            #expect(long.status == .unprocessableContent && long.json["code"] as? String == "issuer_limit_exceeded")
            #expect(await sandbox.marqeta.log.count == 1)
        }
    }

    /// The store's hold of a token is let go only once the request's trail is written: a hold
    /// left behind (its instance died between the issuer's answer and the audit commit) is
    /// then a transition that may be on no record, which the purge records
    /// (`token_transition_unfinished`, `StoreConformance`). It had been let go with the issuer's
    /// answer, before the trail.
    @Test func aTransitionsHoldStandsUntilItsTrailIsWritten() async throws {
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        try await GatewayHarness.run(store: store) { client, _ in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            let id = try #require((listed.json["tokens"] as? [[String: Any]])?.first?["token_id"] as? String)
            let suspended = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "suspend")
            #expect(suspended.status == .ok, "\(String(buffer: suspended.body))")
            let written = store.auditsWritten.withLock { $0.filter { $0.operation == "token_suspend" } }
            #expect(written.contains { $0.attempt >= 1 }, "the issuer's attempt is on the trail: \(written)")
            #expect(!written.isEmpty && written.allSatisfy(\.whileHeld), "written after the hold was let go: \(written)")
            #expect(store.standingHolds == 0, "the hold was let go")
        }
    }

    @Test func tokensAreListedSuspendedResumedAndDeactivated() async throws {
        try await GatewayHarness.run { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            #expect(listed.status == .ok, "\(String(buffer: listed.body))")
            let tokens = try #require(listed.json["tokens"] as? [[String: Any]])
            #expect(tokens.count == 2)
            #expect(tokens.map { $0["status"] as? String } == ["active", "active"])
            #expect(tokens.map { $0["wallet"] as? String } == ["apple_pay", "google_pay"])
            #expect(tokens.allSatisfy { $0["issuer"] as? String == "marqeta" && ($0["token_unique_reference"] as? String)?.isEmpty == false })
            let id = try #require(tokens.first?["token_id"] as? String)

            let suspended = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "suspend")
            #expect(suspended.status == .ok, "\(String(buffer: suspended.body))")
            #expect(suspended.json["outcome"] as? String == "applied")
            #expect(suspended.json["status"] as? String == "suspended")
            #expect(suspended.json["action"] as? String == "suspend")
            let after = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            #expect((after.json["tokens"] as? [[String: Any]])?.first?["status"] as? String == "suspended")

            #expect(try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "resume").json["status"] as? String == "active")
            #expect(try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "deactivate").json["status"] as? String == "deactivated")
            #expect(await sandbox.marqeta.tokens.transitions.map(\.state) == ["SUSPENDED", "ACTIVE", "TERMINATED"])

            // A deactivated token is final, and an active one is not resumed: refused by the state
            // just listed, with nothing sent.
            for action in ["resume", "suspend", "deactivate"] {
                let final = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, action)
                #expect(final.status == .conflict && final.json["code"] as? String == "token_state_conflict", "\(action)")
                #expect(final.json["retryable"] as? Bool == false)
            }
            let other = try #require(tokens.last?["token_id"] as? String)
            let active = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: other, "resume")
            #expect(active.status == .conflict && active.json["code"] as? String == "token_state_conflict")
            #expect(await sandbox.marqeta.tokens.transitions.count == 3, "a refused transition was sent")
            // The audit trail keeps the issuer's own status: Marqeta answers a transition 201.
            let changed = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: other, "suspend")
            #expect(try await ResilienceTests.events(client, changed).map { $0["upstream_status"] as? Int } == [201])

            // A token that is not the card's: 404, and no transition is sent.
            let unknown = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: "dwt-9-someone-else", "suspend")
            #expect(unknown.status == .notFound)
            #expect(unknown.json["code"] as? String == "token_not_found")
            #expect(await sandbox.marqeta.tokens.transitions.count == 4)
            // A refusal after the listing keeps the listing on the trail: one attempt at Marqeta's
            // endpoint, its 200, and the refusal's code (there had been only an attempt 0).
            for refused in [unknown, active] {
                let trail = try await ResilienceTests.events(client, refused)
                #expect(trail.count == 1, "\(trail)")
                #expect(trail.first?["attempt"] as? Int == 1 && trail.first?["endpoint"] != nil, "\(trail)")
                #expect(trail.first?["upstream_status"] as? Int == 200 && trail.first?["outcome"] as? String == "failed", "\(trail)")
                #expect(trail.first?["error_code"] as? String == refused.json["code"] as? String)
            }

            // Each call is in the audit trail under its operation.
            let events = try await ResilienceTests.events(client, suspended)
            #expect(events.map { $0["wallet"] as? String } == ["token_suspend"])
            #expect(events.map { $0["token_id"] as? String } == [id], "the audit names the token acted on")
            #expect(events.map { $0["outcome"] as? String } == ["succeeded"])
        }
    }

    /// UPSTREAMS.md, Lithic: Samsung Pay's `provisioning_payload` is a STRING; `pause`, `unpause`
    /// and `deactivate` are asynchronous (a success means the request reached the network).
    /// Two identical transitions at once: one goes to the issuer, the other is refused with 409
    /// `token_state_conflict` while the first runs, nothing sent (the token audit: both had
    /// listed the token active and both suspended it; a second deactivate reached a terminated token).
    @Test func twoTransitionsOfOneTokenAtOnceSendOne() async throws {
        try await GatewayHarness.run { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            let id = try #require((listed.json["tokens"] as? [[String: Any]])?.first?["token_id"] as? String)
            // The first listing is held at Marqeta until the second request has its answer; that one
            // goes on a connection of its own once the listing reached Marqeta (the fault is
            // taken), so without the claim both would list the token active before either sent.
            let gate = FaultGate()
            await sandbox.faults(issuer: "marqeta")?.add(Fault(mode: .slow, count: 1, gate: gate))
            let simulator = try #require(sandbox.instance(issuer: "marqeta"))
            let before = await simulator.log.count
            let port = client.port
            async let first = GatewayClient.with(port: port) { own in
                try await WalletTokenAPITests.transition(own, card: "card_marqeta_demo", token: id, "deactivate")
            }
            try await ConfigReloadTests.waitUntilTheFaultIsTaken(client)
            let second = try await GatewayClient.with(port: client.port) { other in
                try await WalletTokenAPITests.transition(other, card: "card_marqeta_demo", token: id, "deactivate")
            }
            gate.open()
            let answers = [try await first, second].sorted { $0.status.code < $1.status.code }
            #expect(answers.map(\.status.code) == [200, 409])
            #expect((answers.last?.json["detail"] as? String)?.contains("another request is changing this token") == true,
                    "\(String(buffer: answers.last?.body ?? ByteBuffer()))")
            #expect(await simulator.log.count - before == 2, "the first's listing and transition only")
            #expect(await sandbox.marqeta.tokens.transitions.count == 1, "a second transition of the token was sent")
            // Once it is over, the token takes requests again (and is final now).
            let after = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "resume")
            #expect(after.status.code == 409 && (after.json["detail"] as? String)?.contains("deactivated token is final") == true)
        }
    }

    /// A card an admin moves to another tenant's program, or points at another card at its
    /// issuer, while a transition's token listing runs gets no transition: the caller and the card
    /// are read again between the listing and the call that acts (the isolation audit: the
    /// deactivate went out for a card that was no longer the caller's).
    @Test(arguments: [("other", "mq_card_demo_001", "among this client's programs"), ("demo", "mq_card_demo_999", "changed while the request ran")])
    func aCardMovedAwayDuringItsTokenListingGetsNoTransition(program: String, reference: String, detail: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            let id = try #require((listed.json["tokens"] as? [[String: Any]])?.first?["token_id"] as? String)
            // The listing is held at Marqeta until the card has moved (no window of real time: the
            // move could miss one in the test run's start-up burst).
            let gate = FaultGate()
            await sandbox.faults(issuer: "marqeta")?.add(Fault(mode: .slow, count: 1, gate: gate))
            let simulator = try #require(sandbox.instance(issuer: "marqeta"))
            let before = await simulator.log.count
            let port = client.port
            async let answer = GatewayClient.with(port: port) { own in
                try await WalletTokenAPITests.transition(own, card: "card_marqeta_demo", token: id, "suspend")
            }
            try await ConfigReloadTests.waitUntilTheFaultIsTaken(client)
            let card = #"{"issuer":"marqeta","program":"\#(program)","issuer_reference":{"issuer_card_id":"\#(reference)"}}"#
            let moved = try await CardRegistryAPITests.send(client, .put, "/v1/cards/card_marqeta_demo", json: card, key: GatewayHarness.opsKey)
            #expect(moved.status.code < 300, "\(moved.json)")
            gate.open()
            let response = try await answer
            #expect(response.status == .notFound && response.json["code"] as? String == "card_not_found", "\(response.json)")
            #expect((response.json["detail"] as? String)?.contains(detail) == true, "\(response.json)")
            #expect(await sandbox.marqeta.tokens.transitions.isEmpty, "a transition was sent for a card that moved")
            #expect(await simulator.log.count - before == 1, "the listing only")
        }
    }

    /// A card no issuer holds and no routing rule serves has no issuer for its tokens: the token
    /// routes answer 422 `operation_not_supported`, a code their spec lists (it had been
    /// `wallet_not_supported`, which only the wallet routes list), and nothing is sent.
    @Test func aCardNoIssuerServesHasNoTokenOperations() async throws {
        let unrouted = CardRecord(id: "card_unrouted", program: "demo", issuer: nil, issuerReference: IssuerReference([:]))
        try await GatewayHarness.run(extraCards: [unrouted]) { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_unrouted")
            #expect(listed.status == .unprocessableContent && listed.json["code"] as? String == "operation_not_supported",
                    "\(String(buffer: listed.body))")
            let suspended = try await WalletTokenAPITests.transition(client, card: "card_unrouted", token: "tok_1", "suspend")
            #expect(suspended.status == .unprocessableContent && suspended.json["code"] as? String == "operation_not_supported",
                    "\(String(buffer: suspended.body))")
            #expect(await TenantIsolationTests.upstreamCalls(sandbox) == 0)
        }
    }

    /// A token another instance on the same store is changing (its hold in the store) is not
    /// changed here: 409 `token_state_conflict`, nothing sent, not even the listing; once that
    /// hold is released, or its time has passed (its instance died), the transition goes through.
    @Test(arguments: [false, true])
    func aTokenAnotherInstanceIsChangingIsNotChangedHere(lapsed: Bool) async throws {
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.run(store: store) { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            let id = try #require((listed.json["tokens"] as? [[String: Any]])?.first?["token_id"] as? String)
            let key = ProvisioningService.tokenHoldKey(issuer: "marqeta", card: "card_marqeta_demo", token: id)
            let simulator = try #require(sandbox.instance(issuer: "marqeta"))
            // A lapsed hold: taken a minute ago, for a request that could have run until a second ago.
            let now = Date()
            #expect(try await store.takeHold(key, holder: "prv_elsewhere", now: lapsed ? now - 60 : now, until: now + (lapsed ? -1 : 600)))
            let before = await simulator.log.count
            if !lapsed {
                let refused = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "suspend")
                #expect(refused.status == .conflict && refused.json["code"] as? String == "token_state_conflict",
                        "\(String(buffer: refused.body))")
                #expect((refused.json["detail"] as? String)?.contains("another request is changing this token") == true)
                #expect(await simulator.log.count == before, "the issuer was called")
                try await store.releaseHold(key, holder: "prv_elsewhere")
            }
            let changed = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "suspend")
            #expect(changed.status == .ok, "\(String(buffer: changed.body))")
            #expect(await sandbox.marqeta.tokens.transitions.count == 1)
            // Its own hold ended with it: the token takes the next request.
            let resumed = try await WalletTokenAPITests.transition(client, card: "card_marqeta_demo", token: id, "resume")
            #expect(resumed.status == .ok, "\(String(buffer: resumed.body))")
        }
    }

    /// Another tenant naming the owner's token id through its own card at the same issuer
    /// account, its listing slowed so that it runs across the owner's request, neither holds the
    /// owner's token nor learns that it is being changed: the owner's deactivate goes through,
    /// and the other tenant's request ends as a token its card does not have.
    @Test func anotherTenantNamingATokenThroughItsOwnCardDoesNotHoldIt() async throws {
        var config = try GatewayHarness.sandboxConfig()
        config.sandbox.cards.append(SandboxCardConfig(
            cardID: "card_other_marqeta", program: "other", issuer: "marqeta", issuerReference: ["issuer_card_id": "mq_card_other_001"],
            card: SandboxCardData(number: "4000000000000085", name: "Other Tenant", expiry: "10/30")))
        try await GatewayHarness.run(config: config) { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            let id = try #require((listed.json["tokens"] as? [[String: Any]])?.first?["token_id"] as? String)
            // The other tenant's listing is held at Marqeta until the owner's request has its answer;
            // that one goes once the listing reached Marqeta (the fault is taken).
            let gate = FaultGate()
            await sandbox.faults(issuer: "marqeta")?.add(Fault(mode: .slow, count: 1, gate: gate))
            let port = client.port
            async let probe = GatewayClient.with(port: port) { own in
                try await WalletTokenAPITests.transition(own, card: "card_other_marqeta", token: id, "suspend", key: GatewayHarness.otherKey)
            }
            try await ConfigReloadTests.waitUntilTheFaultIsTaken(client)
            let owners = try await GatewayClient.with(port: client.port) { owner in
                try await WalletTokenAPITests.transition(owner, card: "card_marqeta_demo", token: id, "deactivate")
            }
            #expect(owners.status == .ok, "\(String(buffer: owners.body))")
            gate.open()
            let probed = try await probe
            #expect(probed.status == .notFound && probed.json["code"] as? String == "token_not_found", "\(String(buffer: probed.body))")
            #expect(await sandbox.marqeta.tokens.transitions.count == 1)
        }
    }

    @Test func lithicSamsungPayAndAsynchronousTransitions() async throws {
        try await GatewayHarness.run { client, sandbox in
            let samsung = try await WalletTokenAPITests.samsungPay(client, card: "card_lithic_demo")
            #expect(samsung.status == .ok, "\(String(buffer: samsung.body))")
            #expect(samsung.json["issuer"] as? String == "lithic")
            #expect(samsung.json["provision_payload"] as? String == (await sandbox.lithic.samsungPayloads.all.first))

            let listed = try await WalletTokenAPITests.tokens(client, card: "card_lithic_demo")
            #expect(listed.status == .ok, "\(String(buffer: listed.body))")
            let tokens = try #require(listed.json["tokens"] as? [[String: Any]])
            #expect(tokens.map { $0["wallet"] as? String } == ["apple_pay", "google_pay"])
            #expect(tokens.map { $0["status"] as? String } == ["active", "active"])
            let id = try #require(tokens.first?["token_id"] as? String)

            let paused = try await WalletTokenAPITests.transition(client, card: "card_lithic_demo", token: id, "suspend")
            #expect(paused.status == .ok, "\(String(buffer: paused.body))")
            #expect(paused.json["outcome"] as? String == "requested")
            #expect(paused.json["status"] as? String == "active", "the state before: Lithic applies it later")
            let later = try await WalletTokenAPITests.tokens(client, card: "card_lithic_demo")
            #expect((later.json["tokens"] as? [[String: Any]])?.first?["status"] as? String == "suspended")
            // Pausing a token listed as paused is refused before any call.
            let again = try await WalletTokenAPITests.transition(client, card: "card_lithic_demo", token: id, "suspend")
            #expect(again.status == .conflict && again.json["code"] as? String == "token_state_conflict", "\(String(buffer: again.body))")
            #expect(await sandbox.lithic.tokenizations.transitions.map(\.verb) == ["pause"])

            // A card number pasted where the token id goes is refused before any call, and not repeated.
            let unknown = try await WalletTokenAPITests.transition(client, card: "card_lithic_demo", token: "4111111111111111", "deactivate")
            #expect(unknown.status == .badRequest && unknown.json["code"] as? String == "invalid_request")
            #expect(!String(buffer: unknown.body).contains("4111111111111111"))
            #expect(await sandbox.lithic.tokenizations.transitions.count == 1)
        }
    }

    /// A POST to a token route (a transition, an activation), with an Idempotency-Key when given.
    static func post(_ client: GatewayClient, _ uri: String, json: String? = nil, idempotencyKey: String?) async throws -> GatewayResponse {
        var headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)"]
        if json != nil { headers[.contentType] = "application/json" }
        if let idempotencyKey { headers[HTTPField.Name("Idempotency-Key")!] = idempotencyKey }
        return try await client.execute(uri: uri, method: .post, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }

    /// Neither Marqeta nor Lithic has an idempotency key: under the gateway's, a transition is
    /// sent once. A retry of an answered one replays its answer; a retry of one whose outcome is
    /// unknown (a timeout after it was sent) is never sent again; the key with another token is a
    /// reuse. Without a key, an unknown outcome is not `retryable`, while a token list that timed
    /// out (it changes nothing) still is.
    @Test func aTransitionUnderAnIdempotencyKeyIsSentOnce() async throws {
        let clock = TestClock()
        // The wall time moves with the test's clock: a token's hold lasts until a date.
        let start = Date()
        let wall: @Sendable () -> Date = { start.addingTimeInterval(Double(clock.now.offset.components.seconds)
            + Double(clock.now.offset.components.attoseconds) / 1e18) }
        try await ResilienceTests.runSkippingWaits(config: try ResilienceTests.config(), clock: clock, wallClock: wall) { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            let ids = try #require((listed.json["tokens"] as? [[String: Any]])?.compactMap { $0["token_id"] as? String })
            #expect(ids.count == 2)
            let suspend = "/v1/cards/card_marqeta_demo/wallet-tokens/\(ids[0])/suspend"
            let first = try await Self.post(client, suspend, idempotencyKey: "suspend-1")
            #expect(first.status == .ok, "\(String(buffer: first.body))")
            let again = try await Self.post(client, suspend, idempotencyKey: "suspend-1")
            #expect(again.status == .ok && again.json["provisioning_id"] as? String == first.json["provisioning_id"] as? String)
            #expect(again.json["status"] as? String == "suspended")
            #expect(await sandbox.marqeta.tokens.transitions.map(\.state) == ["SUSPENDED"], "the retry was sent to the issuer")
            let events = try await ResilienceTests.events(client, again)
            #expect(events.map { $0["outcome"] as? String } == ["succeeded", "replayed"])
            #expect(events.map { $0["token_id"] as? String } == [ids[0], ids[0]], "the replay names the token too")
            let otherToken = try await Self.post(client, "/v1/cards/card_marqeta_demo/wallet-tokens/\(ids[1])/suspend", idempotencyKey: "suspend-1")
            #expect(otherToken.status == .unprocessableContent && otherToken.json["code"] as? String == "idempotency_key_reused")
            let otherAction = try await Self.post(client, "/v1/cards/card_marqeta_demo/wallet-tokens/\(ids[0])/resume", idempotencyKey: "suspend-1")
            #expect(otherAction.json["code"] as? String == "idempotency_key_reused")
            // Each refused reuse is on the key's trail as what it asked for (the token audit: both
            // had been recorded as the first request's suspend of the first token), naming no issuer.
            let refused = try await ResilienceTests.events(client, again).suffix(2)
            #expect(refused.map { $0["wallet"] as? String } == ["token_suspend", "token_resume"])
            #expect(refused.map { $0["token_id"] as? String } == [ids[1], ids[0]])
            #expect(refused.allSatisfy { $0["error_code"] as? String == "idempotency_key_reused" && $0["issuer"] == nil })

            // The list answers; the transition is held past its timeout.
            try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"slow","count":1,"delay_ms":0}"#)
            try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"timeout","count":1,"delay_ms":6000}"#)
            let deactivate = "/v1/cards/card_marqeta_demo/wallet-tokens/\(ids[1])/deactivate"
            let timedOut = try await Self.post(client, deactivate, idempotencyKey: "deactivate-1")
            #expect(timedOut.status == .gatewayTimeout, "\(String(buffer: timedOut.body))")
            #expect(timedOut.json["retryable"] as? Bool == false)
            let sent = await sandbox.marqeta.log.count
            let retry = try await Self.post(client, deactivate, idempotencyKey: "deactivate-1")
            #expect(retry.status == .conflict && retry.json["code"] as? String == "idempotency_outcome_unknown", "\(String(buffer: retry.body))")
            #expect(retry.json["provisioning_id"] as? String == timedOut.json["provisioning_id"] as? String && retry.json["provisioning_id"] != nil)
            #expect(await sandbox.marqeta.log.count == sent, "the retry reached the issuer")
            // Nor does another request, with another key or none: the token's hold stands until its
            // time, since the issuer may apply the first deactivate yet and a listing would still
            // show the token active (the send-twice audit: the hold had been let go at once).
            for key in ["deactivate-2", nil] as [String?] {
                let other = try await Self.post(client, deactivate, idempotencyKey: key)
                #expect(other.status == .conflict && other.json["code"] as? String == "token_state_conflict", "\(String(buffer: other.body))")
                #expect((other.json["detail"] as? String)?.contains("another request is changing this token") == true)
            }
            #expect(await sandbox.marqeta.log.count == sent, "a second deactivate, or its listing, reached the issuer")

            // Without a key: the same unknown outcome is not retryable; a list that timed out is.
            try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"slow","count":1,"delay_ms":0}"#)
            try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"timeout","count":1,"delay_ms":6000}"#)
            let resume = "/v1/cards/card_marqeta_demo/wallet-tokens/\(ids[0])/resume"
            let unkeyed = try await Self.post(client, resume, idempotencyKey: nil)
            #expect(unkeyed.status == .gatewayTimeout && unkeyed.json["retryable"] as? Bool == false, "\(String(buffer: unkeyed.body))")
            // Its hold stands too; once its time has passed, the token takes transitions again.
            let held = try await Self.post(client, resume, idempotencyKey: nil)
            #expect(held.status == .conflict && (held.json["detail"] as? String)?.contains("another request is changing") == true,
                    "\(String(buffer: held.body))")
            clock.advance(by: GatewayConfig.idempotencyAbandonMargin + .seconds(16))
            let afterItsTime = try await Self.post(client, deactivate, idempotencyKey: nil)
            #expect((afterItsTime.json["detail"] as? String)?.contains("another request is changing") != true, "\(String(buffer: afterItsTime.body))")
            #expect(await sandbox.marqeta.log.count > sent, "the token was listed again once the hold's time passed")
            try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"timeout","count":3,"delay_ms":6000}"#)
            let list = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
            #expect(list.status == .gatewayTimeout && list.json["retryable"] as? Bool == true, "\(String(buffer: list.body))")
        }
    }

    /// A transition whose token list fails (the list only reads) sent nothing: the failure keeps
    /// its own code (a reset is a retryable 503, a refusal the issuer's 422, not a connection
    /// failure), its `retryable` is its code's, and the key is released for a retry, which sends
    /// the transition once.
    @Test func aTransitionWhoseTokenListFailedSentNothingAndKeepsNoKey() async throws {
        try await ResilienceTests.runSkippingWaits(config: try ResilienceTests.config()) { client, sandbox in
            let listed = try await WalletTokenAPITests.tokens(client, card: "card_lithic_demo")
            let id = try #require((listed.json["tokens"] as? [[String: Any]])?.first?["token_id"] as? String)
            let suspend = "/v1/cards/card_lithic_demo/wallet-tokens/\(id)/suspend"
            try await ResilienceTests.addFault(client, #"{"issuer":"lithic","mode":"reset","count":1}"#)
            let reset = try await Self.post(client, suspend, idempotencyKey: "list-fails")
            #expect(reset.status == .serviceUnavailable, "\(String(buffer: reset.body))")
            #expect(reset.json["code"] as? String == "upstream_unavailable" && reset.json["retryable"] as? Bool == true)
            try await ResilienceTests.addFault(client, #"{"issuer":"lithic","mode":"rejected","count":1}"#)
            let refused = try await Self.post(client, suspend, idempotencyKey: "list-fails")
            #expect(refused.status == .unprocessableContent && refused.json["code"] as? String == "upstream_rejected",
                    "\(String(buffer: refused.body))")
            #expect(await sandbox.lithic.tokenizations.transitions.isEmpty)
            let retried = try await Self.post(client, suspend, idempotencyKey: "list-fails")
            #expect(retried.status == .ok, "\(String(buffer: retried.body))")
            #expect(await sandbox.lithic.tokenizations.transitions.map(\.verb) == ["pause"])
        }
    }

    /// An activation under an Idempotency-Key reaches TMP once; the replay is the same answer, and
    /// the key with another token reference is a reuse.
    @Test func anActivationUnderAnIdempotencyKeyIsSentOnce() async throws {
        try await GatewayHarness.run { client, sandbox in
            let json = #"{"token_unique_reference":"DWSPMC0000000007","card_id":"card_tmp_demo"}"#
            let first = try await Self.post(client, "/v1/token-activations", json: json, idempotencyKey: "activate-1")
            #expect(first.status == .ok, "\(String(buffer: first.body))")
            let again = try await Self.post(client, "/v1/token-activations", json: json, idempotencyKey: "activate-1")
            #expect(again.status == .ok)
            #expect(again.json["provisioning_id"] as? String == first.json["provisioning_id"] as? String)
            #expect(again.json["result"] as? String == first.json["result"] as? String)
            #expect(await sandbox.tmp.log.count == 1, "the replay was sent to the issuer")
            #expect(try await ResilienceTests.events(client, first).first?["token_id"] as? String == "DWSPMC0000000007")
            let other = try await Self.post(client, "/v1/token-activations", json: #"{"token_unique_reference":"DWSPMC0000000008","card_id":"card_tmp_demo"}"#,
                                            idempotencyKey: "activate-1")
            #expect(other.status == .unprocessableContent && other.json["code"] as? String == "idempotency_key_reused")
            // Without a card (this client may): its own key space, replayed the same way.
            let cardless = #"{"token_unique_reference":"DWSPMC0000000009"}"#
            let noCard = try await Self.post(client, "/v1/token-activations", json: cardless, idempotencyKey: "activate-2")
            #expect(noCard.status == .ok, "\(String(buffer: noCard.body))")
            let noCardAgain = try await Self.post(client, "/v1/token-activations", json: cardless, idempotencyKey: "activate-2")
            #expect(noCardAgain.json["provisioning_id"] as? String == noCard.json["provisioning_id"] as? String)
            #expect(await sandbox.tmp.log.count == 2)
        }
    }
}

extension WalletTokenFlowTests {
    /// A transition cut off by the stop's timeout (the only cancellation a request's handler
    /// gets) leaves the store's hold of the token standing only when its own call to the issuer
    /// was made: cancelled during the token's listing, nothing that acts was sent, and the hold
    /// is let go at once; cancelled during the transition call, the issuer may still apply it,
    /// and the hold stands until its time, so that no other request (another instance's, one
    /// after a restart) lists the token in its old state and sends the transition again.
    @Test(arguments: [false, true])
    func aTransitionCutOffAtTheStopKeepsItsHoldOnlyOnceItsCallWasMade(duringTheCall: Bool) async throws {
        let store = try await GatewayHarness.temporaryStore()
        var config = try GatewayHarness.sandboxConfig()
        config.server.shutdownTimeoutMS = 300
        let token = Locked<String?>(nil)
        // The group cancelled at its timeout ends with CancellationError: that is the stop meant.
        do {
            try await GatewayHarness.run(config: config, store: store) { client, sandbox in
                let listed = try await WalletTokenAPITests.tokens(client, card: "card_marqeta_demo")
                let id = try #require((listed.json["tokens"] as? [[String: Any]])?.first?["token_id"] as? String)
                token.withLock { $0 = id }
                // The listing, or the transition after a listing that answers at once, is held at
                // Marqeta until its connection closes (the gateway's call cut off).
                if duringTheCall { try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"slow","count":1,"delay_ms":0}"#) }
                try await ResilienceTests.addFault(client, #"{"issuer":"marqeta","mode":"timeout","count":1,"delay_ms":20000}"#)
                let before = await sandbox.marqeta.log.count
                let port = client.port
                // On a connection of its own; its answer (if any) comes after the stop began.
                Task {
                    try? await GatewayClient.with(port: port) { other in
                        try await WalletTokenAPITests.transition(other, card: "card_marqeta_demo", token: id, "suspend")
                    }
                }
                let arrived = before + (duringTheCall ? 2 : 1)
                for _ in 0..<1000 where await sandbox.marqeta.log.count < arrived { try await Task.sleep(for: .milliseconds(5)) }
                try #require(await sandbox.marqeta.log.count == arrived, "the held call never reached Marqeta")
                // Returning stops the gateway: 300 ms later the transition is cancelled.
            }
        } catch is CancellationError {}
        let id = try #require(token.withLock { $0 })
        let key = ProvisioningService.tokenHoldKey(issuer: "marqeta", card: "card_marqeta_demo", token: id)
        // Another request's hold, taken now, well inside the cut-off one's time.
        let free = try await store.takeHold(key, holder: "prv_next", now: Date(), until: Date().addingTimeInterval(30))
        if duringTheCall {
            #expect(!free, "the hold of a transition whose call was made and cut off was let go")
        } else {
            #expect(free, "the hold of a transition cut off during its listing (nothing sent that acts) still stands")
        }
    }
}
