import Foundation
import Gateway
import HTTPTypes
import NIOCore
import ProvisioningAPI
import ProvisioningCore
import Testing
import Yams

/// The spec and the server agree: for each rule the OpenAPI document states for a request, a
/// value just inside is not refused as `invalid_request`, and one just outside is 400 naming the
/// field. Every bound is read from the served document, so the test follows a spec change and
/// fails when the server does not.
@Suite struct SpecContractTests {
    /// The document, parsed once.
    nonisolated(unsafe) static let document: [String: Any] = (try? Yams.load(yaml: String(decoding: OpenAPISpec.yaml(), as: UTF8.self))) as? [String: Any] ?? [:]

    /// `#/components/<section>/<name>` and a key path below it, e.g. `schema("WalletID")["maxLength"]`.
    static func component(_ section: String, _ name: String) -> [String: Any] {
        ((document["components"] as? [String: Any])?[section] as? [String: Any])?[name] as? [String: Any] ?? [:]
    }

    static func schema(_ name: String) -> [String: Any] { component("schemas", name) }

    static func int(_ schema: [String: Any], _ key: String) throws -> Int {
        try #require(schema[key] as? Int, "the document gives \(key)")
    }

    static func property(_ schema: String, _ name: String) -> [String: Any] {
        (self.schema(schema)["properties"] as? [String: Any])?[name] as? [String: Any] ?? [:]
    }

    /// One request: what it is, and the field a refusal must name.
    struct Probe: Sendable {
        let method: HTTPRequest.Method
        let uri: String
        var headers: HTTPFields = [:]
        var body: Data?
        var key = GatewayHarness.demoKey
    }

    func send(_ client: GatewayClient, _ probe: Probe) async throws -> GatewayResponse {
        var headers = probe.headers
        headers[.authorization] = "Bearer \(probe.key)"
        if probe.body != nil { headers[.contentType] = "application/json" }
        return try await client.execute(uri: probe.uri, method: probe.method, headers: headers, body: probe.body.map { ByteBuffer(bytes: $0) })
    }

    /// `inside` is not `invalid_request`; `outside` is 400 `invalid_request` whose detail names `field`.
    func expectBoundary(_ client: GatewayClient, _ rule: String, field: String, inside: Probe, outside: Probe,
                        sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let accepted = try await send(client, inside)
        #expect(accepted.status != .badRequest, "\(rule): just inside was refused: \(accepted.json["detail"] ?? "")", sourceLocation: sourceLocation)
        #expect(accepted.json["code"] as? String != "invalid_request", "\(rule)", sourceLocation: sourceLocation)
        let refused = try await send(client, outside)
        #expect(refused.status == .badRequest, "\(rule): just outside answered \(refused.status)", sourceLocation: sourceLocation)
        #expect(refused.json["code"] as? String == "invalid_request", "\(rule)", sourceLocation: sourceLocation)
        let detail = refused.json["detail"] as? String ?? ""
        #expect(detail.contains(field), "\(rule): the detail '\(detail)' does not name \(field)", sourceLocation: sourceLocation)
    }

    static func json(_ object: [String: Any]) -> Data { try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) }

    static func applePayBody(_ change: (inout [String: Any]) -> Void = { _ in }) throws -> Data {
        var body = try GatewayHarness.requestJSON()
        change(&body)
        return json(body)
    }

    static func googlePay(_ card: String, wallet: String = "WLT-1", device: String = "hw-1", extra: [String: Any] = [:]) -> Probe {
        Probe(method: .post, uri: "/v1/cards/\(card)/wallet-provisioning/google-pay",
              body: json(["wallet_account_id": wallet, "device_id": device].merging(extra) { $1 }))
    }

    @Test func identifiersInPathsQueriesAndHeaders() async throws {
        let cardMax = try Self.int(Self.schema("CardID"), "maxLength")
        let keyMax = try Self.int((Self.component("parameters", "IdempotencyKey")["schema"] as? [String: Any]) ?? [:], "maxLength")
        let limits = try #require(((Self.document["paths"] as? [String: Any])?["/v1/cards"] as? [String: Any])?["get"] as? [String: Any])
        let limit = try #require((limits["parameters"] as? [[String: Any]])?.first { $0["name"] as? String == "limit" }?["schema"] as? [String: Any])
        let limitMax = try Self.int(limit, "maximum"), limitMin = try Self.int(limit, "minimum")
        try await GatewayHarness.run { client, _ in
            let card = { (id: String) in Probe(method: .get, uri: "/v1/cards/\(id)") }
            try await expectBoundary(client, "card_id maxLength", field: "card_id",
                                     inside: card(String(repeating: "c", count: cardMax)), outside: card(String(repeating: "c", count: cardMax + 1)))
            try await expectBoundary(client, "card_id pattern", field: "card_id", inside: card("acme:1234-x_y.z"), outside: card("acme%201234"))

            let provision = { (key: String) in
                Probe(method: .post, uri: "/v1/cards/card_nobody/wallet-provisioning/apple-pay", headers: [HTTPField.Name("Idempotency-Key")!: key],
                      body: try! Self.applePayBody())
            }
            try await expectBoundary(client, "Idempotency-Key maxLength", field: "Idempotency-Key",
                                     inside: provision(String(repeating: "k", count: keyMax)), outside: provision(String(repeating: "k", count: keyMax + 1)))
            try await expectBoundary(client, "Idempotency-Key pattern", field: "Idempotency-Key", inside: provision("key-~!"), outside: provision("key%41"))

            let list = { (value: Int) in Probe(method: .get, uri: "/v1/cards?limit=\(value)") }
            try await expectBoundary(client, "limit maximum", field: "limit", inside: list(limitMax), outside: list(limitMax + 1))
            try await expectBoundary(client, "limit minimum", field: "limit", inside: list(limitMin), outside: list(limitMin - 1))
            try await expectBoundary(client, "program pattern", field: "program",
                                     inside: Probe(method: .get, uri: "/v1/cards?program=demo"), outside: Probe(method: .get, uri: "/v1/cards?program=de%20mo"))
            try await expectBoundary(client, "provisioning_id pattern", field: "provisioning_id",
                                     inside: Probe(method: .get, uri: "/v1/provisionings/prv_0"), outside: Probe(method: .get, uri: "/v1/provisionings/prv-0"))
        }
    }

    @Test func applePayBodies() async throws {
        let minItems = try Self.int(Self.property("ApplePayBase64Request", "certificates"), "minItems")
        let maxItems = try Self.int(Self.property("ApplePayBase64Request", "certificates"), "maxItems")
        let certificateMax = try Self.int(Self.schema("Base64Certificate"), "maxLength")
        let hexNonceMax = try Self.int(Self.schema("HexNonce"), "maxLength")
        let schemes = try #require(Self.schema("EncryptionScheme")["enum"] as? [String])
        let request = try GatewayHarness.requestJSON()
        let certificates = try #require(request["certificates"] as? [String])
        let uri = "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay"
        @Sendable func probe(_ change: (inout [String: Any]) -> Void) -> Probe { Probe(method: .post, uri: uri, body: try! Self.applePayBody(change)) }
        // A DER SEQUENCE header and filler: well-formed base64 of `bytes` bytes (a multiple of 3 keeps it unpadded).
        @Sendable func certificate(bytes: Int) -> String { Data([0x30] + [UInt8](repeating: 0x41, count: bytes - 1)).base64EncodedString() }
        try await GatewayHarness.run { client, _ in
            try await expectBoundary(client, "certificates minItems", field: "certificates",
                                     inside: probe { $0["certificates"] = Array(certificates.prefix(minItems)) },
                                     outside: probe { $0["certificates"] = Array(certificates.prefix(minItems - 1)) })
            try await expectBoundary(client, "certificates maxItems", field: "certificates",
                                     inside: probe { $0["certificates"] = Array(repeating: certificates[0], count: maxItems) },
                                     outside: probe { $0["certificates"] = Array(repeating: certificates[0], count: maxItems + 1) })
            // The longest base64 the document allows is a whole number of 3-byte groups.
            let inside = certificate(bytes: certificateMax / 4 * 3)
            #expect(inside.count == certificateMax)
            try await expectBoundary(client, "certificate maxLength", field: "certificates[0]",
                                     inside: probe { $0["certificates"] = [inside, certificates[1]] },
                                     outside: probe { $0["certificates"] = [certificate(bytes: certificateMax / 4 * 3 + 3), certificates[1]] })
            try await expectBoundary(client, "certificate pattern (padding)", field: "certificates[0]",
                                     inside: probe { $0["certificates"] = [certificates[0], certificates[1]] },
                                     outside: probe { $0["certificates"] = [certificates[0].trimmingCharacters(in: ["="]) + "A", certificates[1]] })
            // Hex: the nonce's bound in hex digits.
            @Sendable func hex(_ change: (inout [String: Any]) -> Void) -> Probe {
                probe { body in
                    body["encoding"] = "hex"
                    for field in ["nonce", "nonce_signature"] { body[field] = Data(base64Encoded: body[field] as! String)!.map { String(format: "%02x", $0) }.joined() }
                    body["certificates"] = (body["certificates"] as! [String]).map { Data(base64Encoded: $0)!.map { String(format: "%02x", $0) }.joined() }
                    change(&body)
                }
            }
            try await expectBoundary(client, "hex nonce maxLength", field: "nonce",
                                     inside: hex { $0["nonce"] = String(repeating: "ab", count: hexNonceMax / 2) },
                                     outside: hex { $0["nonce"] = String(repeating: "ab", count: hexNonceMax / 2 + 1) })
            try await expectBoundary(client, "hex pattern (odd length)", field: "nonce",
                                     inside: hex { $0["nonce"] = "0a0b" }, outside: hex { $0["nonce"] = "0a0" })
            try await expectBoundary(client, "encryption_scheme enum", field: "encryption_scheme",
                                     inside: probe { $0["encryption_scheme"] = schemes[0] }, outside: probe { $0["encryption_scheme"] = "ECC_V3" })
            try await expectBoundary(client, "a watch needs primary_account_identifier", field: "device.primary_account_identifier",
                                     inside: probe { $0["device"] = ["type": "watch", "primary_account_identifier": "DAI-1"] },
                                     outside: probe { $0["device"] = ["type": "watch"] })
            try await expectBoundary(client, "additionalProperties: false", field: "surprise",
                                     inside: probe { _ in }, outside: probe { $0["surprise"] = true })
        }
    }

    @Test func walletIDBodies() async throws {
        let walletMax = try Self.int(Self.schema("WalletID"), "maxLength")
        try await GatewayHarness.run { client, _ in
            try await expectBoundary(client, "wallet_account_id maxLength", field: "wallet_account_id",
                                     inside: Self.googlePay("card_bridge_demo", wallet: String(repeating: "w", count: walletMax)),
                                     outside: Self.googlePay("card_bridge_demo", wallet: String(repeating: "w", count: walletMax + 1)))
            try await expectBoundary(client, "device_id pattern", field: "device_id",
                                     inside: Self.googlePay("card_bridge_demo", device: "hw-~1"), outside: Self.googlePay("card_bridge_demo", device: "hw 1"))
            try await expectBoundary(client, "google-pay additionalProperties: false", field: "device",
                                     inside: Self.googlePay("card_bridge_demo"), outside: Self.googlePay("card_bridge_demo", extra: ["device": ["type": "phone"]]))

        }
    }

    @Test func activationAndRegistrationBodies() async throws {
        let referenceMax = try Self.int(Self.property("TokenActivationRequest", "token_unique_reference"), "maxLength")
        let valueMax = try Self.int(Self.schema("IssuerReferenceValue"), "maxLength")
        let nameMax = try Self.int(Self.schema("Name"), "maxLength")
        try await GatewayHarness.run { client, _ in
            let activation = { (reference: String) in
                Probe(method: .post, uri: "/v1/token-activations", body: Self.json(["token_unique_reference": reference, "card_id": "card_tmp_demo"]))
            }
            try await expectBoundary(client, "token_unique_reference maxLength", field: "token_unique_reference",
                                     inside: activation(String(repeating: "T", count: referenceMax)), outside: activation(String(repeating: "T", count: referenceMax + 1)))
            try await expectBoundary(client, "token_unique_reference pattern", field: "token_unique_reference",
                                     inside: activation("DWSPMC-1~"), outside: activation("DWSPMC é"))

            let register = { (id: String, program: String, value: String) in
                Probe(method: .put, uri: "/v1/cards/\(id)",
                      body: Self.json(["issuer": "tmp", "program": program, "issuer_reference": ["issuer_card_id": value]]))
            }
            try await expectBoundary(client, "issuer reference maxLength", field: "issuer_reference.issuer_card_id",
                                     inside: register("card_c1", "demo", String(repeating: "r", count: valueMax)),
                                     outside: register("card_c2", "demo", String(repeating: "r", count: valueMax + 1)))
            try await expectBoundary(client, "issuer reference pattern (no ..)", field: "issuer_reference.issuer_card_id",
                                     inside: register("card_c3", "demo", "tmp.card.3"), outside: register("card_c4", "demo", "tmp..card"))
            try await expectBoundary(client, "issuer reference pattern (no %)", field: "issuer_reference.issuer_card_id",
                                     inside: register("card_c7", "demo", "tmp$card&7"), outside: register("card_c8", "demo", "x%2Fcards"))
            try await expectBoundary(client, "program maxLength", field: "program",
                                     inside: register("card_c5", String(repeating: "p", count: nameMax), "tmp-5"),
                                     outside: register("card_c6", String(repeating: "p", count: nameMax + 1), "tmp-6"))
        }
    }

    @Test func sandboxFaultBodies() async throws {
        let countMax = try Self.int(Self.property("SandboxFaultPlain", "count"), "maximum")
        try await GatewayHarness.run { client, _ in
            let fault = { (object: [String: Any]) in Probe(method: .post, uri: "/v1/sandbox/faults", body: Self.json(object), key: GatewayHarness.opsKey) }
            try await expectBoundary(client, "slow needs delay_ms", field: "delay_ms",
                                     inside: fault(["issuer": "bridge", "mode": "slow", "delay_ms": 1]), outside: fault(["issuer": "bridge", "mode": "slow"]))
            try await expectBoundary(client, "fault count maximum", field: "count",
                                     inside: fault(["issuer": "bridge", "mode": "reset", "count": countMax]),
                                     outside: fault(["issuer": "bridge", "mode": "reset", "count": countMax + 1]))
            try await expectBoundary(client, "a mode takes only its own settings", field: "delay_ms",
                                     inside: fault(["issuer": "bridge", "mode": "unavailable"]), outside: fault(["issuer": "bridge", "mode": "unavailable", "delay_ms": 5]))
            _ = try await send(client, Probe(method: .delete, uri: "/v1/sandbox/faults", key: GatewayHarness.opsKey))
        }
    }

    /// The document carries an example for every request body and every JSON answer, and each
    /// one holds to its own schema (the sandbox's real answers, so a client author can trust them).
    @Test func everyExampleHoldsToItsSchema() throws {
        let examples = try RequestContract.examples(spec: OpenAPISpec.yaml())
        for example in examples {
            #expect(example.problems.isEmpty, "\(example.at): \(example.problems)")
        }
        var expected: [String] = []
        for (_, item) in Self.document["paths"] as? [String: Any] ?? [:] {
            for case let operation as [String: Any] in (item as? [String: Any] ?? [:]).values {
                guard let id = operation["operationId"] as? String else { continue }
                if operation["requestBody"] != nil { expected.append("\(id) request") }
                for (status, response) in operation["responses"] as? [String: Any] ?? [:] where status.hasPrefix("2") {
                    if (((response as? [String: Any])?["content"] as? [String: Any])?["application/json"]) != nil { expected.append("\(id) \(status)") }
                }
            }
        }
        #expect(expected.count >= 25)
        let present = Set(examples.map(\.at))
        for location in expected { #expect(present.contains(location), "no example for \(location)") }
    }

    /// A plain scalar YAML 1.1 reads as a boolean (`on`, `off`, `yes`, `no`, `y`, `n`): PyYAML and
    /// most generators in other languages are YAML 1.1 readers, and a bare `on` in `required:` made
    /// the served document invalid to them (the spec audit), where Yams reads a string. Such words
    /// are quoted; `true` and `false` are the booleans they mean.
    @Test func noWordReadsAsABooleanToYAML11Readers() throws {
        let yaml11Booleans: Set<String> = ["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"]
        let root = try #require(try Yams.compose(yaml: String(decoding: OpenAPISpec.yaml(), as: UTF8.self)))
        var found: [String] = []
        func walk(_ node: Node) {
            switch node {
            case .scalar(let scalar):
                if scalar.style == .plain, yaml11Booleans.contains(scalar.string) {
                    found.append("line \(node.mark?.line ?? 0): \(scalar.string)")
                }
            case .mapping(let mapping):
                for (key, value) in mapping { walk(key); walk(value) }
            case .sequence(let sequence):
                for item in sequence { walk(item) }
            case .alias:
                break
            }
        }
        walk(root)
        #expect(found.isEmpty, "\(found)")
    }

    /// Every answer the document declares carries `X-Request-Id` (a response that is a `$ref`
    /// through the component it names), and the answers themselves do: a success, a problem of a
    /// handler, a refusal before any handler (401, 405), the probes and the document itself.
    @Test func everyAnswerDeclaresAndCarriesTheRequestID() async throws {
        var declared = 0
        for (path, item) in Self.document["paths"] as? [String: Any] ?? [:] {
            for case let operation as [String: Any] in (item as? [String: Any] ?? [:]).values {
                guard let id = operation["operationId"] as? String else { continue }
                for (status, value) in operation["responses"] as? [String: Any] ?? [:] {
                    var response = value as? [String: Any] ?? [:]
                    if let ref = response["$ref"] as? String {
                        response = Self.component("responses", String(ref.split(separator: "/").last ?? ""))
                    }
                    let header = (response["headers"] as? [String: Any])?["X-Request-Id"] as? [String: Any]
                    #expect(header?["$ref"] as? String == "#/components/headers/RequestIdEcho", "\(id) (\(path)) \(status) does not declare X-Request-Id")
                    declared += 1
                }
            }
        }
        #expect(declared > 150)
        let pattern = try #require(Self.component("headers", "RequestIdEcho")["schema"] as? [String: Any])["pattern"] as? String
        let declaredPattern = try #require(pattern)
        try await GatewayHarness.run { client, _ in
            let rule = try Regex(declaredPattern)
            let answers: [(String, HTTPRequest.Method, String?)] = [
                ("/v1/cards/card_bridge_demo", .get, GatewayHarness.demoKey), ("/v1/cards/card_nobody", .get, GatewayHarness.demoKey),
                ("/v1/cards/card_bridge_demo", .get, nil), ("/v1/cards/card_bridge_demo", .patch, GatewayHarness.demoKey),
                ("/healthz", .get, nil), ("/readyz", .get, nil), ("/openapi.yaml", .get, nil), ("/metrics", .get, nil),
            ]
            var statuses: [Int] = []
            for (uri, method, key) in answers {
                let headers: HTTPFields = key.map { [.authorization: "Bearer \($0)"] } ?? [:]
                let response = try await client.execute(uri: uri, method: method, headers: headers)
                statuses.append(response.status.code)
                let echoed = response.headers[HTTPField.Name("X-Request-Id")!]
                #expect(echoed.map { (try? rule.wholeMatch(in: $0)) != nil } == true, "\(method) \(uri): \(String(describing: echoed))")
            }
            #expect(statuses == [200, 404, 401, 405, 200, 200, 200, 200])
            // A caller's own id that fits the pattern comes back as sent, on a problem too.
            let ticket = "ticket-\(Int.random(in: 1_000...9_999))_A"
            let own = try await client.execute(uri: "/v1/cards/card_nobody", method: .get,
                                               headers: [.authorization: "Bearer \(GatewayHarness.demoKey)", HTTPField.Name("X-Request-Id")!: ticket])
            #expect(own.status == .notFound && own.headers[HTTPField.Name("X-Request-Id")!] == ticket && (try? rule.wholeMatch(in: ticket)) != nil)
            // Two lines of it (a proxy's beside the caller's) are replaced, as the spec says, not
            // refused: on a probe and on an operation with a body alike.
            var twice = HTTPFields()
            twice.append(HTTPField(name: HTTPField.Name("X-Request-Id")!, value: ticket))
            twice.append(HTTPField(name: HTTPField.Name("X-Request-Id")!, value: "proxy-1"))
            let ready = try await client.execute(uri: "/readyz", method: .get, headers: twice)
            #expect(ready.status == .ok, "\(ready.json)")
            twice[.authorization] = "Bearer \(GatewayHarness.demoKey)"
            twice[.contentType] = "application/json"
            let provisioned = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                       headers: twice, body: ByteBuffer(data: try GatewayHarness.requestBody()))
            #expect(provisioned.status == .ok, "\(provisioned.json)")
            for answer in [ready, provisioned] {
                let echoed = try #require(answer.headers[HTTPField.Name("X-Request-Id")!])
                #expect(echoed.hasPrefix("req_") && (try? rule.wholeMatch(in: echoed)) != nil, "\(echoed)")
            }
        }
    }

    /// Each operation lists the problem codes each of its statuses can carry (`x-problem-codes`),
    /// and every listed code has that status in the gateway's vocabulary.
    @Test func everyListedProblemCodeHasItsStatus() throws {
        var listed = 0
        for (path, item) in Self.document["paths"] as? [String: Any] ?? [:] {
            for case let operation as [String: Any] in (item as? [String: Any] ?? [:]).values {
                guard let id = operation["operationId"] as? String else { continue }
                let responses = operation["responses"] as? [String: Any] ?? [:]
                if !["/healthz", "/readyz", "/openapi.yaml"].contains(path) {
                    #expect(responses["429"] != nil, "\(id) does not document 429")
                }
                for (status, response) in responses {
                    for code in (response as? [String: Any])?["x-problem-codes"] as? [String] ?? [] {
                        listed += 1
                        let known = GatewayError.Code(rawValue: code)
                        #expect(known != nil, "\(id) \(status): unknown code \(code)")
                        #expect(known.map { String($0.httpStatus) } == status, "\(id) \(status): \(code) is \(known?.httpStatus ?? 0)")
                    }
                }
            }
        }
        #expect(listed > 50)
    }

    /// Every operation that takes a body documents the 415 its media type check answers.
    @Test func everyOperationWithABodyDocumentsUnsupportedMediaType() throws {
        var bodies = 0
        for case let item as [String: Any] in (Self.document["paths"] as? [String: Any] ?? [:]).values {
            for case let operation as [String: Any] in item.values where operation["requestBody"] != nil {
                bodies += 1
                let id = operation["operationId"] as? String ?? "?"
                let response = (operation["responses"] as? [String: Any])?["415"] as? [String: Any]
                #expect(response?["$ref"] as? String == "#/components/responses/UnsupportedMediaType", "\(id) does not document 415")
            }
        }
        #expect(bodies >= 6)
        let shared = try #require(((Self.document["components"] as? [String: Any])?["responses"] as? [String: Any])?["UnsupportedMediaType"] as? [String: Any])
        let codes = shared["x-problem-codes"] as? [String] ?? []
        #expect(codes.map { GatewayError.Code(rawValue: $0)?.httpStatus } == [415])
    }

    /// The admin audit's `kind` filter lists every kind of security event the gateway writes, so
    /// a new kind (`events_archived`) is one a client can ask for.
    @Test func theAuditKindFilterListsEveryKind() throws {
        let paths = try #require(Self.document["paths"] as? [String: Any])
        let audit = try #require((paths["/v1/admin/audit"] as? [String: Any])?["get"] as? [String: Any])
        let parameters = try #require(audit["parameters"] as? [[String: Any]])
        let kind = try #require(parameters.first { $0["name"] as? String == "kind" })
        let listed = try #require((kind["schema"] as? [String: Any])?["enum"] as? [String])
        #expect(Set(listed) == Set(SecurityEvent.Kind.allCases.map(\.rawValue)))
        #expect(listed.count == SecurityEvent.Kind.allCases.count)
    }

    /// The spec's accepted issuer-reference field names are exactly those the issuer kinds name.
    @Test func referenceFieldNamesAreTheIssuerKindsOwn() {
        let names = (Self.property("CardRegistration", "issuer_reference")["propertyNames"] as? [String: Any])?["enum"] as? [String] ?? []
        #expect(Set(names) == CardRegistration.referenceFields)
        #expect(!names.isEmpty)
    }

    /// Every request schema of the document compiles into the server's checks: a keyword the
    /// checker does not know would be a rule the server silently skips.
    @Test func everyRequestRuleIsOneTheServerChecks() throws {
        let contract = try RequestContract(spec: OpenAPISpec.yaml())
        let declared = (Self.document["paths"] as? [String: Any] ?? [:]).values.flatMap { item in
            (item as? [String: Any] ?? [:]).values.compactMap { ($0 as? [String: Any])?["operationId"] as? String }
        }
        #expect(Set(contract.operations.keys) == Set(declared))
        #expect(contract.operations["provisionApplePay"]?.hasBody == true)
    }
}
