import Foundation
import Issuers
import ProvisioningCore
import Sandbox
import Testing

@Suite struct BridgeContractTests {
    static let card = CardRecord(id: "card_1", program: "demo", issuer: "bridge",
                                 issuerReference: .init(["customer_id": "cust_1", "card_account_id": "ca_1"]))

    static func connector(encoding: BinaryEncoding = .hex, apiKey: String = "bridge_key") -> ConnectorScenarios.MakeConnector {
        { url, http in BridgeConnector(issuer: "bridge", baseURL: url, apiKey: Sensitive(apiKey), encoding: encoding, http: http) }
    }

    static func simulator(style: BridgeSimulator.ResponseStyle = .guideExample) -> BridgeSimulator {
        BridgeSimulator(apiKey: "bridge_key", accounts: [.init(customerID: "cust_1", cardAccountID: "ca_1")], responseStyle: style)
    }

    @Test(arguments: [BinaryEncoding.hex, .base64])
    func theSimulatorAcceptsTheConnectorsRequest(encoding: BinaryEncoding) async throws {
        let simulator = Self.simulator()
        let payload = try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("bridge") { http in
                try await Self.connector(encoding: encoding)(url, http)
                    .provisionApplePay(try Fixtures.deviceRequest(), card: Self.card, context: Fixtures.context(id: "prv_bridge_1"))
            }
        }
        #expect(payload.ephemeralPublicKey.value.count == 65 && payload.ephemeralPublicKey.value.first == 0x04)
        let requests = await simulator.log.requests
        #expect(requests.count == 1)
        #expect(requests.first?.status == 200)
        #expect(requests.first?.path == "/v0/customers/cust_1/card_accounts/ca_1/create_mobile_wallet_provisioning_request")
        #expect(requests.first?.idempotencyKey == "prv_bridge_1")
    }

    /// The customer and card account ids in the provisioning path are Bridge's `Id` schema, whose
    /// `maxLength` is read here from the published OpenAPI: registration refuses a longer id, and
    /// a card registered before it did is refused before any call (not sent for Bridge's 400).
    @Test func anIdLongerThanTheOpenAPIsBoundIsRefusedBeforeCalling() async throws {
        let spec = try PublishedSpec.load("bridge-openapi.json")
        let parameters = (spec.document["components"] as? [String: Any])?["parameters"] as? [String: Any]
        for name in ["CustomerIDParameter", "CardAccountIDParameter"] {
            let schema = ((parameters?[name] as? [String: Any])?["schema"] as? [String: Any])?["$ref"] as? String
            #expect(schema == "#/components/schemas/Id", "\(name)")
        }
        let bound = try #require(spec.schema("#/components/schemas/Id")?["maxLength"] as? Int)
        let profile = try #require(IssuerCatalog.profiles[.bridge])
        for field in ["customer_id", "card_account_id"] {
            #expect(profile.referenceProblem(field: field, value: String(repeating: "a", count: bound)) == nil)
            #expect(profile.referenceProblem(field: field, value: String(repeating: "a", count: bound + 1))?.contains("at most \(bound)") == true)
        }
        let long = CardRecord(id: "card_1", program: "demo", issuer: "bridge",
                              issuerReference: .init(["customer_id": "cust_1", "card_account_id": String(repeating: "c", count: bound + 1)]))
        let (error, calls) = try await withReplay(status: .ok, body: try Fixtures.data("bridge-apple-pay-response.json")) { url, capture in
            let error = try await withUpstreamHTTP("bridge") { http in
                await gatewayError { try await Self.connector()(url, http).provisionApplePay(try Fixtures.deviceRequest(), card: long, context: Fixtures.context()) }
            }
            return (error, await capture.requests.count)
        }
        #expect(error?.code == .issuerLimitExceeded && error?.detail.contains("card_account_id") == true, "\(String(describing: error))")
        #expect(error?.detail.contains("cccc") == false)
        #expect(calls == 0)
    }

    /// Bridge's published OpenAPI (`Fixtures/upstream-specs/bridge-openapi.json`, verbatim), not the
    /// connector's wire file: the operation's path and method, its required `Idempotency-Key` and
    /// `Api-Key` headers, and the body against `PostCardPushProvisioningInput`. One known slip of
    /// the published file is skipped: it requires a top-level `initiator` that none of its
    /// properties declares (copy-pasted from another input), which Bridge's own guide never sends.
    static let publishedSlips: Set<String> = ["$.initiator: required"]

    @Test(arguments: [(BinaryEncoding.hex, Wallet.applePay), (.base64, .applePay), (.hex, .googlePay)])
    func theRequestConformsToThePublishedOpenAPI(encoding: BinaryEncoding, wallet: Wallet) async throws {
        let spec = try PublishedSpec.load("bridge-openapi.json")
        let path = "/customers/{customerID}/card_accounts/{cardAccountID}/create_mobile_wallet_provisioning_request"
        let reference = try #require(spec.requestBodySchemaReference("POST", path))
        #expect(reference == "#/components/schemas/PostCardPushProvisioningInput")
        let answer = wallet == .applePay ? "bridge-apple-pay-response.json" : "bridge-google-pay-response.json"
        let (_, captured) = try await withReplay(status: .ok, body: try Fixtures.data(answer)) { url, capture in
            try await withUpstreamHTTP("bridge") { http in
                let connector = Self.connector(encoding: encoding)(url, http)
                if wallet == .applePay {
                    _ = try await connector.provisionApplePay(try Fixtures.deviceRequest(), card: Self.card, context: Fixtures.context())
                } else {
                    _ = try await connector.provisionGooglePay(
                        try GooglePayProvisioningRequest(walletAccountID: "WLT-1", deviceID: "hw-1"), card: Self.card, context: Fixtures.context())
                }
            }
            return ((), try #require(await capture.requests.first))
        }
        #expect(captured.method == "POST")
        #expect(captured.path == "/customers/cust_1/card_accounts/ca_1/create_mobile_wallet_provisioning_request")
        for parameter in spec.parameters("POST", path) where parameter["in"] as? String == "header" {
            let name = try #require(parameter["name"] as? String)
            if parameter["required"] as? Bool == true { #expect(captured.header(name)?.isEmpty == false, "\(name) is required") }
        }
        // The security scheme: an API key in the `Api-Key` header.
        let scheme = (((spec.document["components"] as? [String: Any])?["securitySchemes"] as? [String: Any])?["ApiKey"] as? [String: Any])
        #expect(scheme?["in"] as? String == "header")
        #expect(captured.header(try #require(scheme?["name"] as? String)) == "bridge_key")
        let sent = try JSONSerialization.jsonObject(with: captured.body)
        let problems = spec.violations(of: sent, against: try #require(spec.schema(reference))).filter { !Self.publishedSlips.contains($0) }
        #expect(problems.isEmpty, "\(problems)")
        let body = try #require(sent as? [String: Any])
        #expect(body["wallet_provider"] as? String == wallet.rawValue)
    }

    @Test(arguments: [BinaryEncoding.hex, .base64])
    func theRequestHasTheDocumentedShape(encoding: BinaryEncoding) async throws {
        let (_, captured) = try await ConnectorScenarios.replay(
            status: .ok, body: try Fixtures.data("bridge-apple-pay-response.json"), card: Self.card,
            make: Self.connector(encoding: encoding))
        let documented = try JSONSerialization.jsonObject(with: Fixtures.data("bridge-apple-pay-request.json"))
        let sent = try #require(try JSONSerialization.jsonObject(with: captured.body) as? [String: Any])
        #expect(keyPaths(sent) == keyPaths(documented))
        #expect(captured.method == "POST")
        #expect(captured.header("Api-Key") == "bridge_key")
        #expect(captured.header("Idempotency-Key")?.isEmpty == false)
        let applePay = try #require(sent["apple_pay"] as? [String: String])
        #expect(applePay["encoding"] == encoding.rawValue)
        let device = try Fixtures.deviceRequest()
        #expect(encoding.decode(applePay["leaf_cert"]!) == device.leafCertificate.value)
        #expect(encoding.decode(applePay["subordinate_cert"]!) == device.subordinateCertificate.value)
        #expect(encoding.decode(applePay["nonce"]!) == device.nonce.value)
        #expect(encoding.decode(applePay["nonce_signature"]!) == device.nonceSignature.value)
    }

    @Test(arguments: ["bridge-apple-pay-response.json", "bridge-apple-pay-response-base64.json"])
    func documentedResponsesDecodeToTheExpectedBytes(fixture: String) async throws {
        try await ConnectorScenarios.documentedResponseDecodes(fixture: fixture, card: Self.card, make: Self.connector())
    }

    @Test(arguments: [
        (400, "bridge-error-400.json", GatewayError.Code.upstreamRejected),
        (401, "bridge-error-401.json", .upstreamAuthFailed),
        (500, "bridge-error-500.json", .upstreamUnavailable),
    ])
    func documentedErrorsMapToUnifiedCodes(status: Int, fixture: String, code: GatewayError.Code) async throws {
        try await ConnectorScenarios.errorMaps(status: status, body: try Fixtures.data(fixture), to: code, card: Self.card,
                                               make: Self.connector())
    }

    /// The published examples' `name` (the fields or header at fault) reaches the error's detail.
    @Test(arguments: [
        (400, "bridge-error-400-published.json", GatewayError.Code.upstreamRejected, "bad_customer_request, field first_name,ssn"),
        (401, "bridge-error-401-published.json", .upstreamAuthFailed, "required, field Api-Key"),
    ])
    func publishedErrorExamplesNameTheFieldsAtFault(status: Int, fixture: String, code: GatewayError.Code, said: String) async throws {
        let (result, _) = try await ConnectorScenarios.replay(status: .init(code: status), body: try Fixtures.data(fixture), card: Self.card,
                                                              make: Self.connector())
        guard case .failure(let error) = result else { Issue.record("HTTP \(status) was taken as a success"); return }
        #expect(error.code == code)
        #expect(error.detail.contains("(\(said))"), "\(error.detail)")
        #expect(!error.detail.contains("Missing Api-Key header") && !error.detail.contains("fields missing"), "the message text is not echoed")
    }

    @Test func malformedAnswersAreProtocolErrors() async throws {
        let shortKey = #"{"wallet_provider":"apple_pay","apple_pay":{"activation_data":"MBPAC-1","encrypted_pass_data":"AAAA","ephemeral_public_key":"04aabb"}}"#
        try await ConnectorScenarios.malformedAnswersAreProtocolErrors(ConnectorScenarios.garbageBodies + [shortKey],
                                                                       card: Self.card, make: Self.connector())
    }

    @Test func theSimulatorsErrorsMapToo() async throws {
        let simulator = Self.simulator()
        let unknownCard = CardRecord(id: "card_2", program: "demo", issuer: "bridge",
                                     issuerReference: .init(["customer_id": "cust_1", "card_account_id": "ca_unknown"]))
        let request = try Fixtures.deviceRequest()
        try await withSimulator(simulator.server()) { url in
            try await withUpstreamHTTP("bridge") { http in
                let wrongKey = await gatewayError {
                    try await Self.connector(apiKey: "wrong")(url, http).provisionApplePay(request, card: Self.card, context: Fixtures.context())
                }
                #expect(wrongKey?.code == .upstreamAuthFailed && wrongKey?.upstreamStatus == 401)
                let unknown = await gatewayError {
                    try await Self.connector()(url, http).provisionApplePay(request, card: unknownCard, context: Fixtures.context())
                }
                #expect(unknown?.code == .upstreamRejected && unknown?.upstreamStatus == 404)
            }
        }
    }

    @Test(.enabled(if: LiveUpstream.bridge != nil,
                   "live Bridge test skipped: set BRIDGE_BASE_URL, BRIDGE_API_KEY, BRIDGE_CUSTOMER_ID and BRIDGE_CARD_ACCOUNT_ID"))
    func liveBridgeAnswersInTheDocumentedShape() async throws {
        let live = try #require(LiveUpstream.bridge)
        let card = CardRecord(id: "live", program: "live", issuer: "bridge",
                              issuerReference: .init(["customer_id": live.reference[0], "card_account_id": live.reference[1]]))
        let request = try LiveUpstream.deviceRequest("BRIDGE")
        try await withUpstreamHTTP("bridge", requestMS: 15_000) { http in
            let connector = BridgeConnector(issuer: "bridge", baseURL: live.baseURL, apiKey: Sensitive(live.key), http: http)
            // The sandbox device's chain is not Apple's, so a real Bridge may refuse it: with the
            // 400 its OpenAPI documents for this operation, in its documented error body.
            let error = await gatewayError { try await connector.provisionApplePay(request, card: card, context: Fixtures.context()) }
            LiveVerdict.expectDocumentedAnswer(error, issuer: "bridge", documentedRejections: [400])
        }
    }

    /// A code that does not read as one is left out, and the fields at fault are still named.
    @Test func anUnreadableCodeStillNamesTheFieldsAtFault() async throws {
        let body = try JSONSerialization.data(withJSONObject: ["code": "bad \u{1B}[31m 4111111111111111", "message": "m", "name": "nonce"])
        let (result, _) = try await ConnectorScenarios.replay(status: .badRequest, body: body, card: Self.card, make: Self.connector())
        guard case .failure(let error) = result else { Issue.record("HTTP 400 was taken as a success"); return }
        #expect(error.detail.hasSuffix("(field nonce)"), "\(error.detail)")
    }

    /// An issuer that echoes the gateway's own credential in its error code (however plain it
    /// reads: `bridge_key_plain`) does not get it repeated to the tenant or the log: the code is
    /// left out when it repeats a value the request's headers carried.
    @Test func anErrorCodeThatEchoesTheGatewaysKeyIsNotRepeated() async throws {
        let key = "bridge_key_plain"
        for echoed in [key, "bad \(key)", "field Bearer\(key)"] {
            let body = try JSONSerialization.data(withJSONObject: ["code": echoed])
            for status in [400, 401] {
                let (result, _) = try await ConnectorScenarios.replay(status: .init(code: status), body: body, card: Self.card,
                                                                      make: Self.connector(apiKey: key))
                guard case .failure(let error) = result else { Issue.record("HTTP \(status) was taken as a success"); continue }
                #expect(!error.detail.contains(key), "\(error.detail)")
            }
        }
        // A code that repeats nothing the request carried is still shown.
        let (plain, _) = try await ConnectorScenarios.replay(status: .badRequest, body: Data(#"{"code":"invalid_parameter"}"#.utf8),
                                                             card: Self.card, make: Self.connector(apiKey: key))
        guard case .failure(let error) = plain else { Issue.record("HTTP 400 was taken as a success"); return }
        #expect(error.detail.contains("(invalid_parameter)"), "\(error.detail)")
    }

    @Test func anErrorCodeIsRepeatedOnlyWhenItReadsAsOne() async throws {
        try await ConnectorScenarios.anIssuersErrorCodeIsRepeatedOnlyWhenItReadsAsOne(
            body: { try JSONSerialization.data(withJSONObject: ["code": $0, "message": "refused"]) }, card: Self.card, make: Self.connector())
    }
}
