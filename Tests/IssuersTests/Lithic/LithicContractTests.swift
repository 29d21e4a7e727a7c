import Foundation
import Issuers
import ProvisioningCore
import Sandbox
import Testing

/// Lithic's card provisioning. Lithic publishes no spec file here; every expectation below is a
/// fact of `shared/UPSTREAMS.md`, "Lithic" (gathered from Lithic's SDKs, generated from its
/// OpenAPI), quoted beside it, never a literal of the connector's wire file.
@Suite struct LithicContractTests {
    static let card = CardRecord(id: "card_1", program: "demo", issuer: "lithic", issuerReference: .init(["issuer_card_id": "lithic_card_1"]))
    static let googleRequest = try! GooglePayProvisioningRequest(walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d")

    static func connector(key: String = "lithic_key_1") -> ConnectorScenarios.MakeConnector {
        { url, http in LithicConnector(issuer: "lithic", baseURL: url, apiKey: Sensitive(key), http: http) }
    }

    @Test func theApplePayRequestHasTheDocumentedShape() async throws {
        let (_, captured) = try await ConnectorScenarios.replay(
            status: .ok, body: try Fixtures.data("lithic-apple-pay-response.json"), card: Self.card, make: Self.connector())
        // "Provision | POST /v1/cards/{card_token}/provision"
        #expect(captured.method == "POST" && captured.path == "/v1/cards/lithic_card_1/provision")
        // "Auth | header Authorization: <api key> (the raw key, no scheme word)"
        #expect(captured.header("Authorization") == "lithic_key_1")
        let sent = try #require(try JSONSerialization.jsonObject(with: captured.body) as? [String: String])
        // "digital_wallet (APPLE_PAY, GOOGLE_PAY, SAMSUNG_PAY); Apple Pay: certificate ..., nonce, nonce_signature"
        #expect(Set(sent.keys) == ["digital_wallet", "certificate", "nonce", "nonce_signature"])
        #expect(sent["digital_wallet"] == "APPLE_PAY")
        let device = try Fixtures.deviceRequest()
        // "certificate = the LEAF only, as the base64 body of its PEM (no BEGIN/END lines, i.e. base64
        // of the DER; ... send none [line breaks])"
        let certificate = try #require(sent["certificate"])
        #expect(!certificate.contains("-----") && !certificate.contains("\n"))
        #expect(Data(base64Encoded: certificate) == device.leafCertificate.value)
        // "nonce, nonce_signature (base64)"
        #expect(sent["nonce"].flatMap { Data(base64Encoded: $0) } == device.nonce.value)
        #expect(sent["nonce_signature"].flatMap { Data(base64Encoded: $0) } == device.nonceSignature.value)
    }

    @Test func theGooglePayRequestHasTheDocumentedShapeAndTheAnswerDecodes() async throws {
        let (payload, captured) = try await withReplay(status: .ok, body: try Fixtures.data("lithic-google-pay-response.json")) { url, capture in
            let payload = try await withUpstreamHTTP("lithic") { http in
                try await Self.connector()(url, http).provisionGooglePay(Self.googleRequest, card: Self.card, context: Fixtures.context())
            }
            return (payload, try #require(await capture.requests.first))
        }
        #expect(captured.method == "POST" && captured.path == "/v1/cards/lithic_card_1/provision")
        #expect(captured.header("Authorization") == "lithic_key_1")
        // "Google/Samsung on Visa: client_device_id, client_wallet_account_id"
        let sent = try #require(try JSONSerialization.jsonObject(with: captured.body) as? [String: String])
        #expect(sent == ["digital_wallet": "GOOGLE_PAY", "client_device_id": "hw-6c1f0a9e2d", "client_wallet_account_id": "WLT-2bB8p0e7LmQ"])
        // "for Google/Samsung a STRING: base64 of the JSON/opaque payload for the wallet": that
        // string, as it is, is what the phone hands Google.
        let answer = try #require(try JSONSerialization.jsonObject(with: try Fixtures.data("lithic-google-pay-response.json")) as? [String: Any])
        #expect(payload.opaquePaymentCard.value == answer["provisioning_payload"] as? String)
        #expect(payload.displayName == nil)
    }

    /// A listing whose pages go on past the gateway's bound (`has_more` on every page) is a
    /// protocol error, not a list answered short (the connector audit).
    @Test func aListingPastTheBoundIsAProtocolErrorNotAShortList() async throws {
        let page = #"{"has_more":true,"data":[{"token":"tok-1","card_token":"lithic_card_1","status":"ACTIVE","token_requestor_name":"APPLE_PAY"}]}"#
        let (failure, pages) = try await withReplay(status: .ok, body: Data(page.utf8)) { url, capture in
            let failure = await gatewayError {
                try await withUpstreamHTTP("lithic") { http in
                    try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
                }
            }
            return (failure, await capture.requests)
        }
        #expect(failure?.code == .upstreamProtocolError && failure?.detail.contains("more than 500") == true, "\(String(describing: failure))")
        // The gateway's own bound, on one card: not the endpoint failing, so no breaker counts it.
        #expect(failure?.condition == nil)
        #expect(pages.count == 10)
        // Each page after the first asks for what follows the last token of the one before
        // ("starting_after"): not the first page again, which would reach the bound as well.
        let cursors = pages.map { page in
            URLComponents(string: "/?\(page.query ?? "")")?.queryItems?.first { $0.name == "starting_after" }?.value
        }
        #expect(cursors == [nil] + Array(repeating: "tok-1", count: 9), "\(pages.map(\.query))")
    }

    @Test func theSamsungPayRequestHasTheDocumentedShapeAndThePayloadPassesUntouched() async throws {
        // "for Google/Samsung a STRING: base64 of the JSON/opaque payload for the wallet"
        let answer = #"{"provisioning_payload":"eyJzcGF5Ijoib3BhcXVlIn0="}"#
        let request = try SamsungPayProvisioningRequest(walletAccountID: "SPAY-7f3a9c", deviceID: "sp-dev-41e2", deviceType: .phone)
        let (payload, captured) = try await withReplay(status: .ok, body: Data(answer.utf8)) { url, capture in
            let payload = try await withUpstreamHTTP("lithic") { http in
                try await Self.connector()(url, http).provisionSamsungPay(request, card: Self.card, context: Fixtures.context())
            }
            return (payload, try #require(await capture.requests.first))
        }
        #expect(captured.method == "POST" && captured.path == "/v1/cards/lithic_card_1/provision")
        #expect(captured.header("Authorization") == "lithic_key_1")
        // "digital_wallet (APPLE_PAY, GOOGLE_PAY, SAMSUNG_PAY)"; "Google/Samsung on Visa: client_device_id, client_wallet_account_id"
        let sent = try #require(try JSONSerialization.jsonObject(with: captured.body) as? [String: String])
        #expect(sent == ["digital_wallet": "SAMSUNG_PAY", "client_device_id": "sp-dev-41e2", "client_wallet_account_id": "SPAY-7f3a9c"])
        #expect(payload.provisionPayload == "eyJzcGF5Ijoib3BhcXVlIn0=")
    }

    /// "Tokens | GET /v1/tokenizations?card_token=... (cursor paging: page_size, starting_after,
    /// ending_before)": the listing names the card and pages with those parameters only.
    @Test func theTokenListingHasTheDocumentedShape() async throws {
        let page = #"{"has_more":false,"data":[{"token":"tok-1","card_token":"lithic_card_1","status":"ACTIVE","token_requestor_name":"APPLE_PAY"}]}"#
        let (tokens, captured) = try await withReplay(status: .ok, body: Data(page.utf8)) { url, capture in
            let tokens = try await withUpstreamHTTP("lithic") { http in
                try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
            }
            return (tokens, await capture.requests)
        }
        #expect(tokens.map(\.tokenID) == ["tok-1"] && tokens.first?.wallet == "apple_pay")
        let request = try #require(captured.first)
        #expect(captured.count == 1, "one page, has_more false")
        #expect(request.method == "GET" && request.path == "/v1/tokenizations")
        #expect(request.header("Authorization") == "lithic_key_1")
        #expect(request.body.isEmpty)
        let items = URLComponents(string: "?" + (request.query ?? ""))?.queryItems ?? []
        #expect(items.filter { $0.name == "card_token" }.map(\.value) == ["lithic_card_1"])
        #expect(Set(items.map(\.name)).isSubset(of: ["card_token", "page_size", "starting_after", "ending_before"]), "\(items)")
        #expect(items.first { $0.name == "page_size" }.map { Int($0.value ?? "") != nil } ?? true)
    }

    /// "POST /v1/tokenizations/{tokenization_token}/pause, /unpause, /deactivate": "take no body
    /// and answer with no body: they are ASYNCHRONOUS (a success means the request reached the
    /// card network; the status changes later)": each is `requested`, the token still in the state
    /// it was in.
    @Test(arguments: [(WalletTokenAction.suspend, "pause"), (.resume, "unpause"), (.deactivate, "deactivate")])
    func aTransitionHasTheDocumentedShape(action: WalletTokenAction, verb: String) async throws {
        let token = WalletToken(tokenID: "tok-1", status: action == .resume ? .suspended : .active, wallet: "apple_pay")
        let (change, captured) = try await withReplay(status: .ok, body: Data()) { url, capture in
            let change = try await withUpstreamHTTP("lithic") { http in
                try await Self.connector()(url, http).transitionWalletToken(token, action, card: Self.card, context: Fixtures.context())
            }
            return (change, try #require(await capture.requests.first))
        }
        #expect(captured.method == "POST" && captured.path == "/v1/tokenizations/tok-1/\(verb)")
        #expect(captured.header("Authorization") == "lithic_key_1")
        #expect(captured.body.isEmpty)
        #expect(change == WalletTokenTransition(outcome: .requested, status: token.status))
    }

    /// "for Apple Pay it is an object {"activationData","encryptedData","ephemeralPublicKey"} (camelCase, base64)".
    @Test func theDocumentedResponseDecodesToTheExpectedBytes() async throws {
        try await ConnectorScenarios.documentedResponseDecodes(fixture: "lithic-apple-pay-response.json", card: Self.card, make: Self.connector())
    }

    @Test(arguments: [
        (400, GatewayError.Code.upstreamRejected), (401, .upstreamAuthFailed), (404, .upstreamRejected),
        (422, .upstreamRejected), (429, .upstreamUnavailable), (500, .upstreamUnavailable), (504, .upstreamTimeout),
    ])
    func errorsMapToUnifiedCodes(status: Int, code: GatewayError.Code) async throws {
        try await ConnectorScenarios.errorMaps(status: status, body: Data(#"{"message":"refused"}"#.utf8), to: code,
                                               card: Self.card, make: Self.connector())
    }

    @Test func malformedAnswersAreProtocolErrors() async throws {
        // Marqeta's top-level snake_case answer is not Lithic's `provisioning_payload`; a Google string where Apple's object belongs.
        let marqetaShape = #"{"activation_data":"AAAA","ephemeral_public_key":"BAAA","encrypted_pass_data":"AAAA"}"#
        let stringPayload = #"{"provisioning_payload":"eyJvcGMiOiJ4In0="}"#
        try await ConnectorScenarios.malformedAnswersAreProtocolErrors(ConnectorScenarios.garbageBodies + [marqetaShape, stringPayload],
                                                                       card: Self.card, make: Self.connector())
    }

    @Test func theSimulatorAcceptsTheConnectorsRequests() async throws {
        let simulator = LithicSimulator(apiKey: "lithic_key_1", cardTokens: ["lithic_card_1"])
        let (apple, google) = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("lithic") { http in
                let connector = Self.connector()(url, http)
                return (try await connector.provisionApplePay(try Fixtures.deviceRequest(), card: Self.card, context: Fixtures.context()),
                        try await connector.provisionGooglePay(Self.googleRequest, card: Self.card, context: Fixtures.context()))
            }
        }
        #expect(apple.ephemeralPublicKey.value.count == 65)
        #expect(google.opaquePaymentCard.value.count > 16)
        #expect(await simulator.log.requests.map(\.status) == [200, 200])
    }

    /// "the raw key, no scheme word": a `Bearer` key is refused by the simulator.
    @Test func aSchemeWordIsRefused() async throws {
        let simulator = LithicSimulator(apiKey: "lithic_key_1", cardTokens: ["lithic_card_1"])
        let error = await gatewayError {
            try await withSimulator(simulator.server()) { url in
                try await withUpstreamHTTP("lithic") { http in
                    try await Self.connector(key: "Bearer lithic_key_1")(url, http)
                        .provisionApplePay(try Fixtures.deviceRequest(), card: Self.card, context: Fixtures.context())
                }
            }
        }
        #expect(error?.code == .upstreamAuthFailed)
    }

    @Test(.enabled(if: LiveLithic.configured, LiveLithic.skipMessage))
    func liveLithicAnswersInItsDocumentedShape() async throws {
        let live = try #require(LiveLithic.fromEnvironment())
        let card = CardRecord(id: "live", program: "live", issuer: "lithic", issuerReference: .init(["issuer_card_id": live.cardToken]))
        try await withUpstreamHTTP("lithic", requestMS: 15_000) { http in
            let connector = LithicConnector(issuer: "lithic", baseURL: live.baseURL, apiKey: Sensitive(live.apiKey), http: http)
            let error = await gatewayError {
                try await connector.provisionGooglePay(Self.googleRequest, card: card, context: Fixtures.context())
            }
            // Lithic answered: a payload in the documented shape, or a 4xx refusing the request
            // (the gateway's key was accepted, so not 401/403).
            if let error {
                #expect(error.code == .upstreamRejected && (400..<500).contains(error.upstreamStatus ?? 0), "\(error)")
            }
        }
    }

    /// Every tokenization `status` UPSTREAMS.md lists, in the unified vocabulary. `INACTIVE` is
    /// not final: Lithic's API reference for `POST /v1/tokenizations/{token}/activate` ("Activate
    /// tokenization") says it "may only be used on digital wallet tokenizations with status
    /// `INACTIVE`, `PENDING_ACTIVATION`, or `PENDING_2FA`" and puts the tokenization in an
    /// `ACTIVE` state, so it is pending, whose transitions the issuer judges. Read as deactivated
    /// (final), it had made the gateway refuse to deactivate it (`token_state_conflict`, nothing
    /// sent): support could not end a token of a lost phone that was never activated.
    @Test func eachListedStatusIsReadInTheUnifiedVocabulary() async throws {
        let documented = ["ACTIVE": "active", "PAUSED": "suspended", "DEACTIVATED": "deactivated", "INACTIVE": "pending",
                          "PENDING_2FA": "pending", "PENDING_ACTIVATION": "pending", "UNKNOWN": "unknown"]
        let page: [String: Any] = ["has_more": false, "data": documented.keys.sorted().map {
            ["token": "tok-\($0.lowercased())", "card_token": "lithic_card_1", "status": $0]
        }]
        let tokens = try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: page)) { url, _ in
            try await withUpstreamHTTP("lithic") { http in
                try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
            }
        }
        let read = Dictionary(uniqueKeysWithValues: tokens.map { ($0.tokenID, $0.status.rawValue) })
        #expect(read == Dictionary(uniqueKeysWithValues: documented.map { ("tok-\($0.key.lowercased())", $0.value) }))
    }

    /// A tokenization the card's listing returns but that names another card is not the card's.
    @Test func aListedTokenizationOfAnotherCardIsLeftOut() async throws {
        let page: [String: Any] = ["has_more": false, "data": [
            ["token": "tok-mine", "card_token": "lithic_card_1", "status": "ACTIVE"],
            ["token": "tok-theirs", "card_token": "lithic_card_other", "status": "ACTIVE"],
        ]]
        let tokens = try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: page)) { url, _ in
            try await withUpstreamHTTP("lithic") { http in
                try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
            }
        }
        #expect(tokens.map(\.tokenID) == ["tok-mine"])
    }

    /// As Marqeta's (`ListedTokens`): an id out of its form (a `/`) fails the listing, one holding
    /// a card number is left out alone, and a token reference out of its form (a card number too)
    /// is left out.
    @Test func aListedTokenizationOutOfItsFormIsNotPassedOn() async throws {
        func list(_ data: [[String: Any]]) async throws -> Result<[WalletToken], GatewayError> {
            try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: ["has_more": false, "data": data])) { url, _ in
                try await withUpstreamHTTP("lithic") { http in
                    do throws(GatewayError) {
                        return .success(try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context()))
                    } catch { return .failure(error) }
                }
            }
        }
        let kept = try await list([["token": "tok-1", "card_token": "lithic_card_1", "status": "ACTIVE",
                                    "token_unique_reference": "ref \u{1B}[2J 4111111111111111"]])
        #expect((try? kept.get())?.map(\.tokenUniqueReference) == [nil])
        let pan = try await list([["token": "tok-1", "card_token": "lithic_card_1", "status": "ACTIVE",
                                   "token_unique_reference": "5555-5555-5555-4444"]])
        #expect((try? pan.get())?.map(\.tokenUniqueReference) == [nil], "a reference holding a card number was passed on")
        let refused = try await list([["token": "tok/../../admin", "card_token": "lithic_card_1", "status": "ACTIVE"]])
        guard case .failure(let error) = refused else { Issue.record("a token id with '/' was passed on"); return }
        #expect(error.code == .upstreamProtocolError)
        // A token id holding a card number is left out alone; the card's other tokens stay listed.
        let panID = try await list([["token": "4111111111111111", "card_token": "lithic_card_1", "status": "ACTIVE"],
                                    ["token": "tok-2", "card_token": "lithic_card_1", "status": "ACTIVE"]])
        #expect((try? panID.get())?.map(\.tokenID) == ["tok-2"], "\(panID)")
    }
}

/// `LITHIC_BASE_URL`, `LITHIC_API_KEY`, `LITHIC_CARD_TOKEN`.
struct LiveLithic: Sendable {
    let baseURL: URL
    let apiKey: String
    let cardToken: String

    static let skipMessage: Comment = "live Lithic test skipped: set LITHIC_BASE_URL, LITHIC_API_KEY and LITHIC_CARD_TOKEN"
    static var configured: Bool { fromEnvironment() != nil }

    static func fromEnvironment() -> LiveLithic? {
        let env = ProcessInfo.processInfo.environment
        guard let base = env["LITHIC_BASE_URL"].flatMap(URL.init(string:)), let key = env["LITHIC_API_KEY"],
              let card = env["LITHIC_CARD_TOKEN"] else { return nil }
        return LiveLithic(baseURL: base, apiKey: key, cardToken: card)
    }
}
