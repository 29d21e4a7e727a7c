import Foundation
import Issuers
import ProvisioningCore
import Sandbox
import Testing

/// Marqeta's digital wallet provision requests, checked against its published Core API swagger
/// (`Fixtures/upstream-specs/marqeta-core-api-swagger.json`, verbatim), not against the connector's wire
/// file or the simulator: the path and method, the body schema the operation names (required
/// fields, types, enums, lengths, nothing undeclared), and HTTP Basic as UPSTREAMS.md states it.
@Suite struct MarqetaContractTests {
    static let specName = "marqeta-core-api-swagger.json"
    static let card = CardRecord(id: "card_1", program: "demo", issuer: "marqeta", issuerReference: .init(["issuer_card_id": "mq_card_1"]))
    static let googleRequest = try! GooglePayProvisioningRequest(walletAccountID: "WLT-2bB8p0e7LmQ", deviceID: "hw-6c1f0a9e2d")

    static func connector(appVersion: String? = "4.2.0") -> ConnectorScenarios.MakeConnector {
        { url, http in
            MarqetaConnector(issuer: "marqeta", baseURL: url.appendingPathComponent("v3"), applicationToken: Sensitive("app_token_1"),
                             accessToken: Sensitive("access_token_1"), provisioningAppVersion: appVersion, http: http)
        }
    }

    static func deviceRequest(_ type: DeviceType) throws -> ApplePayProvisioningRequest {
        let device = try Fixtures.deviceRequest()
        return try ApplePayProvisioningRequest(
            certificates: [device.leafCertificate.value, device.subordinateCertificate.value], nonce: device.nonce.value,
            nonceSignature: device.nonceSignature.value,
            device: DeviceInfo(type: type, primaryAccountIdentifier: type == .watch ? "V-3018253329239943005544" : nil))
    }

    /// The request the connector sends for `type`, captured at a replayed 201.
    static func appleRequest(_ type: DeviceType) async throws -> CapturedRequest {
        let request = try deviceRequest(type)
        return try await withReplay(status: .created, body: try Fixtures.data("marqeta-apple-pay-response.json")) { url, capture in
            _ = try await withUpstreamHTTP("marqeta") { http in
                try await connector()(url, http).provisionApplePay(request, card: card, context: Fixtures.context())
            }
            return try #require(await capture.requests.first)
        }
    }

    /// UPSTREAMS.md: "HTTP Basic: application token as user, admin access token as password".
    static func expectBasicAuth(_ captured: CapturedRequest) throws {
        let header = try #require(captured.header("Authorization"))
        #expect(header.hasPrefix("Basic "))
        let decoded = Data(base64Encoded: String(header.dropFirst("Basic ".count))).map { String(decoding: $0, as: UTF8.self) }
        #expect(decoded == "app_token_1:access_token_1")
    }

    @Test
    func theApplePayRequestConformsToThePublishedSchema() async throws {
        let spec = try PublishedSpec.load(Self.specName)
        let path = "/digitalwalletprovisionrequests/applepay"
        let reference = try #require(spec.bodySchemaReference("POST", path))
        #expect(reference == "#/definitions/digital_wallet_apple_pay_provision_request")
        let captured = try await Self.appleRequest(.phone)
        #expect(captured.method == "POST")
        #expect(captured.path == spec.basePath + path)
        try Self.expectBasicAuth(captured)
        let sent = try JSONSerialization.jsonObject(with: captured.body)
        let problems = spec.violations(of: sent, against: try #require(spec.schema(reference)))
        #expect(problems.isEmpty, "\(problems)")

        // The values, as UPSTREAMS.md describes them: certificates base64 DER, leaf first; base64 nonce and signature.
        let body = try #require(sent as? [String: Any])
        let device = try Fixtures.deviceRequest()
        let certificates = try #require(body["certificates"] as? [String]).map { Data(base64Encoded: $0) }
        #expect(certificates == [device.leafCertificate.value, device.subordinateCertificate.value])
        #expect((body["nonce"] as? String).flatMap { Data(base64Encoded: $0) } == device.nonce.value)
        #expect((body["nonce_signature"] as? String).flatMap { Data(base64Encoded: $0) } == device.nonceSignature.value)
        #expect(body["card_token"] as? String == "mq_card_1")
        #expect(body["provisioning_app_version"] as? String == "4.2.0")
    }

    /// The issue's mapping onto the swagger's `device_type` enum: phone -> MOBILE_PHONE,
    /// watch -> WATCH, tablet -> TABLET.
    @Test(arguments: [(DeviceType.phone, "MOBILE_PHONE"), (.watch, "WATCH"), (.tablet, "TABLET")])
    func theDeviceTypeMapsOntoTheSchemasEnum(type: DeviceType, expected: String) async throws {
        let spec = try PublishedSpec.load(Self.specName)
        let schema = try #require(spec.schema("#/definitions/digital_wallet_apple_pay_provision_request"))
        let allowed = try #require(((schema["properties"] as? [String: Any])?["device_type"] as? [String: Any])?["enum"] as? [String])
        #expect(allowed.contains(expected))
        let sent = try #require(try JSONSerialization.jsonObject(with: try await Self.appleRequest(type).body) as? [String: Any])
        #expect(sent["device_type"] as? String == expected)
    }

    @Test
    func theGooglePayRequestConformsToThePublishedSchema() async throws {
        let spec = try PublishedSpec.load(Self.specName)
        let path = "/digitalwalletprovisionrequests/androidpay"
        let reference = try #require(spec.bodySchemaReference("POST", path))
        #expect(reference == "#/definitions/digital_wallet_android_pay_provision_request")
        let (payload, captured) = try await withReplay(status: .created, body: try Fixtures.data("marqeta-google-pay-response.json")) { url, capture in
            let payload = try await withUpstreamHTTP("marqeta") { http in
                try await Self.connector()(url, http).provisionGooglePay(Self.googleRequest, card: Self.card, context: Fixtures.context())
            }
            return (payload, try #require(await capture.requests.first))
        }
        #expect(captured.method == "POST" && captured.path == spec.basePath + path)
        try Self.expectBasicAuth(captured)
        let sent = try JSONSerialization.jsonObject(with: captured.body)
        let problems = spec.violations(of: sent, against: try #require(spec.schema(reference)))
        #expect(problems.isEmpty, "\(problems)")
        let body = try #require(sent as? [String: Any])
        #expect(body["wallet_account_id"] as? String == "WLT-2bB8p0e7LmQ" && body["device_id"] as? String == "hw-6c1f0a9e2d")

        // push_tokenize_request_data, read into Android's PushTokenizeRequest fields.
        let answer = try #require(try JSONSerialization.jsonObject(with: try Fixtures.data("marqeta-google-pay-response.json")) as? [String: Any])
        let data = try #require(answer["push_tokenize_request_data"] as? [String: Any])
        #expect(payload.opaquePaymentCard.value == data["opaque_payment_card"] as? String, "passed on as Marqeta wrote it")
        #expect(payload.displayName == "Visa Card" && payload.lastDigits == "1234")
        #expect(payload.network == "VISA" && payload.tokenServiceProvider == "VISA")
        #expect(payload.userAddress?.postalCode == "94612" && payload.userAddress?.country == "US")
    }

    @Test
    func theSamsungPayRequestConformsToThePublishedSchemaAndThePayloadPassesUntouched() async throws {
        let spec = try PublishedSpec.load(Self.specName)
        let path = "/digitalwalletprovisionrequests/samsungpay"
        let reference = try #require(spec.bodySchemaReference("POST", path))
        #expect(reference == "#/definitions/digital_wallet_samsung_pay_provision_request")
        // An answer shaped by the 201 schema (`samsung_push_tokenize_request_data`), checked against it.
        let answer: [String: Any] = [
            "card_token": "mq_card_1", "created_time": "2026-11-22T10:00:00Z", "last_modified_time": "2026-11-22T10:00:00Z",
            "push_tokenize_request_data": ["display_name": "Visa Card", "last_digits": "1234", "network": "VISA",
                                           "token_service_provider": "VISA", "extra_provision_payload": "eyJzcGF5Ijoib3BhcXVlIn0=", "card_type": "CREDIT"],
        ]
        let responseReference = try #require(spec.responseSchemaReference("POST", path, status: "201"))
        #expect(spec.violations(of: answer, against: try #require(spec.schema(responseReference))).isEmpty)
        let request = try SamsungPayProvisioningRequest(walletAccountID: "SPAY-7f3a9c", deviceID: "sp-dev-41e2", deviceType: .watch)
        let (payload, captured) = try await withReplay(status: .created, body: try JSONSerialization.data(withJSONObject: answer)) { url, capture in
            let payload = try await withUpstreamHTTP("marqeta") { http in
                try await Self.connector()(url, http).provisionSamsungPay(request, card: Self.card, context: Fixtures.context())
            }
            return (payload, try #require(await capture.requests.first))
        }
        #expect(captured.method == "POST" && captured.path == spec.basePath + path)
        try Self.expectBasicAuth(captured)
        let sent = try JSONSerialization.jsonObject(with: captured.body)
        let problems = spec.violations(of: sent, against: try #require(spec.schema(reference)))
        #expect(problems.isEmpty, "\(problems)")
        let body = try #require(sent as? [String: Any])
        #expect(body["wallet_user_id"] as? String == "SPAY-7f3a9c" && body["device_id"] as? String == "sp-dev-41e2")
        #expect(body["device_type"] as? String == "WATCH")
        #expect(payload.provisionPayload == "eyJzcGF5Ijoib3BhcXVlIn0=")
        #expect(payload.cardType == "CREDIT" && payload.lastDigits == "1234")
    }

    @Test
    func theTokenTransitionRequestConformsToThePublishedSchema() async throws {
        let spec = try PublishedSpec.load(Self.specName)
        let path = "/digitalwallettokentransitions"
        let reference = try #require(spec.bodySchemaReference("POST", path))
        #expect(reference == "#/definitions/digital_wallet_token_transition_request")
        for (action, state) in [(WalletTokenAction.suspend, "SUSPENDED"), (.resume, "ACTIVE"), (.deactivate, "TERMINATED")] {
            let answer: [String: Any] = ["token": "t1", "type": "state.x", "channel": "API", "state": state, "fulfillment_status": "PROVISIONED",
                                         "digital_wallet_token": ["token": "dwt-1"]]
            let responseReference = try #require(spec.responseSchemaReference("POST", path, status: "201"))
            #expect(spec.violations(of: answer, against: try #require(spec.schema(responseReference))).isEmpty)
            let token = WalletToken(tokenID: "dwt-1", status: .active, wallet: "apple_pay")
            let (result, captured) = try await withReplay(status: .created, body: try JSONSerialization.data(withJSONObject: answer)) { url, capture in
                let result = try await withUpstreamHTTP("marqeta") { http in
                    try await Self.connector()(url, http).transitionWalletToken(token, action, card: Self.card, context: Fixtures.context())
                }
                return (result, try #require(await capture.requests.first))
            }
            #expect(captured.method == "POST" && captured.path == spec.basePath + path)
            let sent = try JSONSerialization.jsonObject(with: captured.body)
            let problems = spec.violations(of: sent, against: try #require(spec.schema(reference)))
            #expect(problems.isEmpty, "\(action): \(problems)")
            let body = try #require(sent as? [String: Any])
            #expect(body["state"] as? String == state)
            #expect((body["digital_wallet_token"] as? [String: Any])?["token"] as? String == "dwt-1")
            #expect(result.outcome == .applied)
        }
    }

    /// The card's token listing against the swagger's `GET /digitalwallettokens/card/{card_token}`:
    /// the card in the path, only the operation's declared query parameters (integers where it
    /// says so, the first page at `start_index` 0), Basic auth, no body; a page shaped by its 200
    /// schema (`DigitalWalletTokenListResponse`, checked against it) is read.
    @Test func theTokenListingConformsToThePublishedOperation() async throws {
        let spec = try PublishedSpec.load(Self.specName)
        let template = "/digitalwallettokens/card/{card_token}"
        let declared = spec.parameters("get", template)
        let answer: [String: Any] = ["count": 1, "start_index": 0, "end_index": 0, "is_more": false, "data": [
            ["token": "dwt-1", "card_token": "mq_card_1", "state": "ACTIVE", "created_time": "2026-11-22T10:00:00Z",
             "token_service_provider": ["token_requestor_name": "APPLE_PAY", "token_reference_id": "DNITHE000000000000000001",
                                        "pan_reference_id": "V-PANREF-0001"]],
        ]]
        let responseReference = try #require(spec.responseSchemaReference("get", template, status: "200"))
        let violations = spec.violations(of: answer, against: try #require(spec.schema(responseReference)))
        #expect(violations.isEmpty, "\(violations)")
        let (tokens, captured) = try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: answer)) { url, capture in
            let tokens = try await withUpstreamHTTP("marqeta") { http in
                try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
            }
            return (tokens, await capture.requests)
        }
        #expect(tokens.map(\.tokenID) == ["dwt-1"] && tokens.first?.status == .active && tokens.first?.wallet == "apple_pay")
        #expect(captured.count == 1, "one page, is_more false")
        let request = try #require(captured.first)
        #expect(request.method == "GET" && request.path == spec.basePath + "/digitalwallettokens/card/mq_card_1")
        try Self.expectBasicAuth(request)
        #expect(request.body.isEmpty)
        let items = URLComponents(string: "?" + (request.query ?? ""))?.queryItems ?? []
        for item in items {
            let parameter = declared.first { $0["name"] as? String == item.name && $0["in"] as? String == "query" }
            #expect(parameter != nil, "\(item.name) is not a query parameter of the operation")
            if parameter?["type"] as? String == "integer" { #expect(Int(item.value ?? "") != nil, "\(item)") }
        }
        #expect(items.first { $0.name == "start_index" }?.value.flatMap { Int($0) } ?? 0 == 0)
    }

    /// The fixtures stand in for examples the swagger does not publish: they must conform to the
    /// operations' 201 schemas themselves.
    @Test(arguments: [("/digitalwalletprovisionrequests/applepay", "marqeta-apple-pay-response.json"),
                      ("/digitalwalletprovisionrequests/androidpay", "marqeta-google-pay-response.json")])
    func theResponseFixturesConformToThePublishedSchemas(path: String, fixture: String) throws {
        let spec = try PublishedSpec.load(Self.specName)
        let reference = try #require(spec.responseSchemaReference("POST", path, status: "201"))
        let problems = spec.violations(of: try JSONSerialization.jsonObject(with: try Fixtures.data(fixture)),
                                       against: try #require(spec.schema(reference)))
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test func theDocumentedResponseDecodesToTheExpectedBytes() async throws {
        let (result, _) = try await ConnectorScenarios.replay(
            status: .created, body: try Fixtures.data("marqeta-apple-pay-response.json"), card: Self.card, make: Self.connector())
        let payload = try result.get()
        let expected = try Fixtures.expected("marqeta-apple-pay-response.json")
        #expect(payload.activationData.value == expected.activation)
        #expect(payload.encryptedPassData.value == expected.encrypted)
        #expect(payload.ephemeralPublicKey.value == expected.key)
    }

    /// The swagger documents 400 (bad request), 404 (card not found) and 500; UPSTREAMS.md adds 409.
    @Test(arguments: [
        (400, GatewayError.Code.upstreamRejected), (401, .upstreamAuthFailed), (403, .upstreamAuthFailed), (404, .upstreamRejected),
        (409, .upstreamRejected), (429, .upstreamUnavailable), (500, .upstreamUnavailable), (504, .upstreamTimeout),
    ])
    func errorsMapToUnifiedCodes(status: Int, code: GatewayError.Code) async throws {
        try await ConnectorScenarios.errorMaps(status: status, body: try Fixtures.data("marqeta-error-400.json"), to: code,
                                               card: Self.card, make: Self.connector())
    }

    @Test func theErrorCodeOfTheDocumentedErrorBodyIsRead() async throws {
        let (result, _) = try await ConnectorScenarios.replay(
            status: .badRequest, body: try Fixtures.data("marqeta-error-400.json"), card: Self.card, make: Self.connector())
        guard case .failure(let error) = result else { Issue.record("a 400 was taken as a success"); return }
        #expect(error.detail.contains("400401"), "\(error.detail)")
    }

    @Test func malformedAnswersAreProtocolErrors() async throws {
        // TMP's and Lithic's `encryptedData` is not Marqeta's `encrypted_pass_data`.
        let wrongName = #"{"activation_data":"AAAA","ephemeral_public_key":"BAAA","encryptedData":"AAAA"}"#
        try await ConnectorScenarios.malformedAnswersAreProtocolErrors(ConnectorScenarios.garbageBodies + [wrongName],
                                                                       card: Self.card, make: Self.connector())
    }

    @Test func theSimulatorAcceptsTheConnectorsRequests() async throws {
        let simulator = MarqetaSimulator(applicationToken: "app_token_1", accessToken: "access_token_1", cardTokens: ["mq_card_1"])
        let (apple, google) = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("marqeta") { http in
                let connector = MarqetaConnector(issuer: "marqeta", baseURL: url, applicationToken: Sensitive("app_token_1"),
                                                 accessToken: Sensitive("access_token_1"), provisioningAppVersion: "4.2.0", http: http)
                return (try await connector.provisionApplePay(try Self.deviceRequest(.watch), card: Self.card, context: Fixtures.context()),
                        try await connector.provisionGooglePay(Self.googleRequest, card: Self.card, context: Fixtures.context()))
            }
        }
        #expect(apple.ephemeralPublicKey.value.count == 65)
        #expect(google.lastDigits == "1111")
        #expect(await simulator.log.requests.map(\.path) == ["/v3/digitalwalletprovisionrequests/applepay", "/v3/digitalwalletprovisionrequests/androidpay"])
        #expect(await simulator.log.requests.map(\.status) == [201, 201])
        #expect(await simulator.seen.deviceTypes == ["WATCH", "MOBILE_PHONE"])
    }

    /// The simulator refuses the tokens the wrong way round, as Marqeta's Basic auth would.
    @Test func swappedTokensAreRefused() async throws {
        let simulator = MarqetaSimulator(applicationToken: "app_token_1", accessToken: "access_token_1", cardTokens: ["mq_card_1"])
        let error = await gatewayError {
            try await withSimulator(simulator.server()) { url in
                try await withUpstreamHTTP("marqeta") { http in
                    try await MarqetaConnector(issuer: "marqeta", baseURL: url, applicationToken: Sensitive("access_token_1"),
                                               accessToken: Sensitive("app_token_1"), provisioningAppVersion: "4.2.0", http: http)
                        .provisionApplePay(try Fixtures.deviceRequest(), card: Self.card, context: Fixtures.context())
                }
            }
        }
        #expect(error?.code == .upstreamAuthFailed)
    }

    /// The androidpay schema's `device_id` maxLength 24 and `wallet_account_id` maxLength 50.
    @Test(arguments: [("w", 51, "wallet_account_id"), ("d", 25, "device_id")])
    func idsLongerThanMarqetaAcceptsAreRefusedBeforeCalling(kind: String, length: Int, field: String) async throws {
        let long = try GooglePayProvisioningRequest(walletAccountID: kind == "w" ? String(repeating: "w", count: length) : "w1",
                                                    deviceID: kind == "d" ? String(repeating: "d", count: length) : "d1")
        let (error, calls) = try await withReplay(status: .created, body: try Fixtures.data("marqeta-google-pay-response.json")) { url, capture in
            let error = await gatewayError {
                try await withUpstreamHTTP("marqeta") { http in
                    try await Self.connector()(url, http).provisionGooglePay(long, card: Self.card, context: Fixtures.context())
                }
            }
            return (error, await capture.requests.count)
        }
        #expect(error?.code == .issuerLimitExceeded)
        #expect(error?.detail.contains(field) == true)
        #expect(calls == 0)
    }

    /// Every provision request's `card_token` has `maxLength: 36` in the swagger (read here): a
    /// card registered with a longer one before registration refused it is refused before any
    /// call, for every wallet and for the token listing, not sent for Marqeta's 400.
    @Test func aCardTokenLongerThanTheSwaggersBoundIsRefusedBeforeCalling() async throws {
        let spec = try PublishedSpec.load(Self.specName)
        let schema = try #require(spec.schema("#/definitions/digital_wallet_apple_pay_provision_request"))
        let bound = try #require(((schema["properties"] as? [String: Any])?["card_token"] as? [String: Any])?["maxLength"] as? Int)
        let card = CardRecord(id: "card_1", program: "demo", issuer: "marqeta",
                              issuerReference: .init(["issuer_card_id": String(repeating: "t", count: bound + 1)]))
        let google = try GooglePayProvisioningRequest(walletAccountID: "w1", deviceID: "d1")
        let (errors, calls) = try await withReplay(status: .created, body: try Fixtures.data("marqeta-apple-pay-response.json")) { url, capture in
            let errors = try await withUpstreamHTTP("marqeta") { http -> [GatewayError?] in
                let connector = Self.connector()(url, http)
                return [
                    await gatewayError { try await connector.provisionApplePay(try Fixtures.deviceRequest(), card: card, context: Fixtures.context()) },
                    await gatewayError { try await connector.provisionGooglePay(google, card: card, context: Fixtures.context()) },
                    await gatewayError { try await connector.listWalletTokens(card: card, context: Fixtures.context()) },
                ]
            }
            return (errors, await capture.requests.count)
        }
        #expect(errors.map { $0?.code } == [.issuerLimitExceeded, .issuerLimitExceeded, .issuerLimitExceeded])
        #expect(errors.allSatisfy { $0?.detail.contains("card_token") == true && $0?.detail.contains("tttt") == false })
        #expect(calls == 0)
    }

    /// The request's `device.app_version` is sent instead of the configured version.
    @Test func theRequestsAppVersionWinsOverTheConfiguredOne() async throws {
        let device = try Fixtures.deviceRequest()
        let request = try ApplePayProvisioningRequest(
            certificates: [device.leafCertificate.value, device.subordinateCertificate.value], nonce: device.nonce.value,
            nonceSignature: device.nonceSignature.value, device: DeviceInfo(type: .phone, appVersion: "7.1.3-beta"))
        let captured = try await withReplay(status: .created, body: try Fixtures.data("marqeta-apple-pay-response.json")) { url, capture in
            _ = try await withUpstreamHTTP("marqeta") { http in
                try await Self.connector()(url, http).provisionApplePay(request, card: Self.card, context: Fixtures.context())
            }
            return try #require(await capture.requests.first)
        }
        let sent = try #require(try JSONSerialization.jsonObject(with: captured.body) as? [String: Any])
        #expect(sent["provisioning_app_version"] as? String == "7.1.3-beta")
    }

    @Test func theAppVersionIsRequiredByTheConfigAndNamedByItsKeyPath() {
        let missing = MarqetaIssuer().wireProblems(WireOptions(), path: "issuers.mq.wire")
        #expect(missing.map(\.path) == ["issuers.mq.wire.provisioning_app_version"])
        var tooLong = WireOptions()
        tooLong.provisioningAppVersion = String(repeating: "9", count: 51)
        #expect(MarqetaIssuer().wireProblems(tooLong, path: "w").map(\.path) == ["w.provisioning_app_version"])
        var fine = WireOptions()
        fine.provisioningAppVersion = "4.2.0"
        #expect(MarqetaIssuer().wireProblems(fine, path: "w").isEmpty)
        #expect(LithicIssuer().wireProblems(fine, path: "w").map(\.path) == ["w.provisioning_app_version"])
    }

    @Test(.enabled(if: LiveMarqeta.configured, LiveMarqeta.skipMessage))
    func liveMarqetaAnswersInItsDocumentedShape() async throws {
        let live = try #require(LiveMarqeta.fromEnvironment())
        let card = CardRecord(id: "live", program: "live", issuer: "marqeta", issuerReference: .init(["issuer_card_id": live.cardToken]))
        try await withUpstreamHTTP("marqeta", requestMS: 15_000) { http in
            let connector = MarqetaConnector(issuer: "marqeta", baseURL: live.baseURL, applicationToken: Sensitive(live.applicationToken),
                                             accessToken: Sensitive(live.accessToken), provisioningAppVersion: "1.0.0", http: http)
            let error = await gatewayError {
                try await connector.provisionApplePay(try Fixtures.deviceRequest(), card: card, context: Fixtures.context())
            }
            // Marqeta answered: a payload (no error), or a documented 4xx (400 for a sandbox device
            // Apple never issued, 404 for the card) whose body had the documented error_code.
            if let error {
                #expect([400, 404, 409].contains(error.upstreamStatus ?? 0), "\(error)")
                #expect(error.code == .upstreamRejected && error.detail.contains("rejected the request: HTTP") && error.detail.contains("("),
                        "no documented error_code in the answer: \(error.detail)")
            }
        }
    }

    @Test func anErrorCodeIsRepeatedOnlyWhenItReadsAsOne() async throws {
        try await ConnectorScenarios.anIssuersErrorCodeIsRepeatedOnlyWhenItReadsAsOne(
            body: { try JSONSerialization.data(withJSONObject: ["error_code": $0, "error_message": "refused"]) }, card: Self.card,
            make: Self.connector())
    }

    /// The transition's answer is read by its state (the swagger's enum): the one asked for is
    /// applied, REQUESTED is applied later, REQUEST_DECLINED is the issuer's refusal, and another
    /// state is no transition to what was asked, never reported as applied.
    /// A refusal is a known outcome (an Idempotency-Key is released); an unexpected state is not.
    /// REQUESTED is the transition's state, not the token's: the token keeps the state it was in.
    /// Each answer is first checked against the swagger's response schema for a 201.
    @Test(arguments: [("SUSPENDED", "applied suspended"), ("REQUESTED", "requested active"), ("REQUEST_DECLINED", "upstream_rejected known"),
                      ("ACTIVE", "upstream_protocol_error unknown"), ("TERMINATED", "upstream_protocol_error unknown")])
    func aTransitionsAnswerIsReadByItsState(state: String, expected: String) async throws {
        let answer: [String: Any] = ["token": "t1", "state": state, "channel": "API", "type": "state.suspended",
                                     "fulfillment_status": "PROVISIONED", "digital_wallet_token": ["token": "dwt-1"]]
        let spec = try PublishedSpec.load(Self.specName)
        let reference = try #require(spec.responseSchemaReference("post", "/digitalwallettokentransitions", status: "201"))
        #expect(spec.violations(of: answer, against: try #require(spec.schema(reference))).isEmpty, "\(state)")
        #expect(try await Self.suspendOutcome(answer) == expected, "\(state)")
    }

    /// A suspend of token `dwt-1` of `card` answered with `answer` (201): `<outcome> <status>`,
    /// or the error's code and whether it leaves the outcome `known` or `unknown`.
    static func suspendOutcome(_ answer: [String: Any]) async throws -> String {
        let token = WalletToken(tokenID: "dwt-1", status: .active, wallet: "apple_pay")
        return try await withReplay(status: .created, body: try JSONSerialization.data(withJSONObject: answer)) { url, _ in
            try await withUpstreamHTTP("marqeta") { http -> String in
                do throws(GatewayError) {
                    let change = try await Self.connector()(url, http).transitionWalletToken(token, .suspend, card: Self.card, context: Fixtures.context())
                    return "\(change.outcome.rawValue) \(change.status.rawValue)"
                } catch {
                    return error.code.rawValue + (error.condition?.leavesOutcomeUnknown == true ? " unknown" : " known")
                }
            }
        }
    }

    /// A transition's answer that names another token, or another card, than the one asked about
    /// is the issuer acting on someone else's: a protocol error with the outcome unknown, never
    /// "applied" (the swagger's `digital_wallet_token_hash` carries both).
    @Test(arguments: [(["token": "dwt-1", "card_token": "mq_card_1"], "applied suspended"),
                      (["token": "dwt-1"], "applied suspended"),
                      (["token": "dwt-1", "card_token": "mq_card_other"], "upstream_protocol_error unknown"),
                      (["token": "dwt-2", "card_token": "mq_card_1"], "upstream_protocol_error unknown")])
    func aTransitionsAnswerMustNameTheTokenAndCardAskedAbout(actedOn: [String: String], expected: String) async throws {
        let answer: [String: Any] = ["token": "t1", "state": "SUSPENDED", "channel": "API", "type": "state.suspended",
                                     "fulfillment_status": "PROVISIONED", "digital_wallet_token": actedOn]
        #expect(try await Self.suspendOutcome(answer) == expected, "\(actedOn)")
    }

    /// The swagger requires `digital_wallet_token` and its `token` in a transition's answer: one
    /// without them names no token to check against the one asked about, and is a protocol error
    /// with the outcome unknown, never "applied" (the connector audit). The answers are first
    /// checked to break the swagger's response schema, so the expectation is the document's.
    @Test(arguments: [nil, ["card_token": "mq_card_1"]] as [[String: String]?])
    func aTransitionsAnswerWithoutTheTokenItActedOnIsAProtocolError(actedOn: [String: String]?) async throws {
        var answer: [String: Any] = ["token": "t1", "state": "SUSPENDED", "channel": "API", "type": "state.suspended",
                                     "fulfillment_status": "PROVISIONED"]
        if let actedOn { answer["digital_wallet_token"] = actedOn }
        let spec = try PublishedSpec.load(Self.specName)
        let reference = try #require(spec.responseSchemaReference("post", "/digitalwallettokentransitions", status: "201"))
        #expect(!spec.violations(of: answer, against: try #require(spec.schema(reference))).isEmpty, "the swagger takes \(answer)")
        #expect(try await Self.suspendOutcome(answer) == "upstream_protocol_error unknown")
    }

    /// A listing whose pages go on past the gateway's bound (`is_more` on every page) is a
    /// protocol error, not a list answered short: a token past the bound would read as
    /// `token_not_found` (the connector audit).
    @Test func aListingPastTheBoundIsAProtocolErrorNotAShortList() async throws {
        let list: [String: Any] = ["count": 1, "start_index": 0, "end_index": 0, "is_more": true, "data": [
            ["token": "dwt-1", "card_token": "mq_card_1", "state": "ACTIVE"],
        ]]
        let (failure, pages) = try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: list)) { url, capture in
            let failure = await gatewayError {
                try await withUpstreamHTTP("marqeta") { http in
                    try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
                }
            }
            return (failure, await capture.requests)
        }
        #expect(failure?.code == .upstreamProtocolError && failure?.detail.contains("more than 500") == true, "\(String(describing: failure))")
        // The gateway's own bound, on one card: not the endpoint failing, so no breaker counts it.
        #expect(failure?.condition == nil)
        #expect(pages.count == 10)
        // Each page asked for where the one before ended ("start_index", "count"): not the first
        // page again, which would reach the bound as well.
        let starts = pages.map { page in
            URLComponents(string: "/?\(page.query ?? "")")?.queryItems?.first { $0.name == "start_index" }?.value
        }
        #expect(starts == (0..<10).map { "\($0 * 50)" }, "\(pages.map(\.query))")
    }

    /// A token the card's listing returns but that names another card is not the card's.
    @Test func aListedTokenOfAnotherCardIsLeftOut() async throws {
        let list: [String: Any] = ["count": 2, "start_index": 0, "end_index": 1, "is_more": false, "data": [
            ["token": "dwt-mine", "card_token": "mq_card_1", "state": "ACTIVE"],
            ["token": "dwt-theirs", "card_token": "mq_card_other", "state": "ACTIVE"],
            ["token": "dwt-unsaid", "state": "ACTIVE"],
        ]]
        let tokens = try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: list)) { url, _ in
            try await withUpstreamHTTP("marqeta") { http in
                try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
            }
        }
        #expect(tokens.map(\.tokenID) == ["dwt-mine", "dwt-unsaid"])
    }

    /// A listing is shown to the tenant and decides what it may act on: a token id the API could
    /// not take back in a path makes the listing a protocol error, with nothing of it repeated; a
    /// device type or token reference that does not read as one is left out.
    @Test(arguments: ["tok 4111111111111111", "dwt-\u{1B}[31m", String(repeating: "a", count: 5_000), ""])
    func aListedTokenIdOutOfItsFormIsAProtocolError(id: String) async throws {
        let list: [String: Any] = ["count": 2, "start_index": 0, "end_index": 1, "is_more": false, "data": [
            ["token": "dwt-fine", "card_token": "mq_card_1", "state": "ACTIVE"],
            ["token": id, "card_token": "mq_card_1", "state": "ACTIVE"],
        ]]
        let failure = try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: list)) { url, _ in
            try await withUpstreamHTTP("marqeta") { http -> GatewayError? in
                do throws(GatewayError) {
                    _ = try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
                    return nil
                } catch { return error }
            }
        }
        #expect(failure?.code == .upstreamProtocolError)
        #expect(failure.map { !$0.detail.contains("4111") && !$0.detail.contains("\u{1B}") && $0.detail.count < 200 } == true)
    }

    @Test func aListedTokensDeviceTypeAndReferenceAreKeptOnlyWhenTheyReadAsSuch() async throws {
        let list: [String: Any] = ["count": 2, "start_index": 0, "end_index": 1, "is_more": false, "data": [
            ["token": "dwt-1", "card_token": "mq_card_1", "state": "ACTIVE", "device": ["type": "MOBILE_PHONE"],
             "token_service_provider": ["token_reference_id": "DAPLMC00001234", "token_requestor_name": "APPLE_PAY"]],
            ["token": "dwt-2", "card_token": "mq_card_1", "state": "ACTIVE", "device": ["type": "card 4111 1111 1111 1111"],
             "token_service_provider": ["token_reference_id": "4111111111111111/../x", "token_requestor_name": "APPLE_PAY"]],
        ]]
        let tokens = try await withReplay(status: .ok, body: try JSONSerialization.data(withJSONObject: list)) { url, _ in
            try await withUpstreamHTTP("marqeta") { http in
                try await Self.connector()(url, http).listWalletTokens(card: Self.card, context: Fixtures.context())
            }
        }
        #expect(tokens.map(\.tokenID) == ["dwt-1", "dwt-2"])
        #expect(tokens.map(\.deviceType) == ["MOBILE_PHONE", nil])
        #expect(tokens.map(\.tokenUniqueReference) == ["DAPLMC00001234", nil])
    }
}

/// `MARQETA_BASE_URL`, `MARQETA_APPLICATION_TOKEN`, `MARQETA_ACCESS_TOKEN`, `MARQETA_CARD_TOKEN`.
struct LiveMarqeta: Sendable {
    let baseURL: URL
    let applicationToken: String
    let accessToken: String
    let cardToken: String

    static let skipMessage: Comment = "live Marqeta test skipped: set MARQETA_BASE_URL, MARQETA_APPLICATION_TOKEN, MARQETA_ACCESS_TOKEN and MARQETA_CARD_TOKEN"
    static var configured: Bool { fromEnvironment() != nil }

    static func fromEnvironment() -> LiveMarqeta? {
        let env = ProcessInfo.processInfo.environment
        guard let base = env["MARQETA_BASE_URL"].flatMap(URL.init(string:)), let application = env["MARQETA_APPLICATION_TOKEN"],
              let access = env["MARQETA_ACCESS_TOKEN"], let card = env["MARQETA_CARD_TOKEN"] else { return nil }
        return LiveMarqeta(baseURL: base, applicationToken: application, accessToken: access, cardToken: card)
    }
}
