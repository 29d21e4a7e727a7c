import Foundation
import GatewayServer
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import ProvisioningCore
import Testing

/// Every caller mistake and every upstream failure answers problem+json with its code, never a 500.
@Suite struct BadInputTests {
    func expectProblem(_ response: GatewayResponse, status: HTTPResponse.Status, code: String,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == status, sourceLocation: sourceLocation)
        #expect(response.headers[.contentType] == "application/problem+json", sourceLocation: sourceLocation)
        let json = response.json
        #expect(json["code"] as? String == code, sourceLocation: sourceLocation)
        #expect(json["status"] as? Int == Int(status.code), sourceLocation: sourceLocation)
        #expect(json["type"] as? String == "urn:provisioning-gateway:problem:\(code)", sourceLocation: sourceLocation)
        #expect(json["title"] is String && json["retryable"] is Bool, sourceLocation: sourceLocation)
        // Nothing the caller sent comes back.
        let text = String(buffer: response.body)
        #expect(!text.contains("MII") && !text.contains(GatewayHarness.demoKey), sourceLocation: sourceLocation)
    }

    func modified(_ change: (inout [String: Any]) -> Void) throws -> Data {
        var body = try GatewayHarness.requestJSON()
        change(&body)
        return try JSONSerialization.data(withJSONObject: body)
    }

    @Test func malformedJSON() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: Data("{\"certificates\": [".utf8))
            expectProblem(response, status: .badRequest, code: "invalid_request")
        }
    }

    @Test func aMissingFieldIsNamed() async throws {
        let body = try modified { $0.removeValue(forKey: "nonce") }
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            expectProblem(response, status: .badRequest, code: "invalid_request")
            #expect((response.json["detail"] as? String)?.contains("nonce") == true)
        }
    }

    @Test func badBase64() async throws {
        let body = try modified { $0["certificates"] = ["%%%not-base64%%%", ($0["certificates"] as! [String])[1]] }
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            expectProblem(response, status: .badRequest, code: "invalid_request")
            // The OpenAPI document's base64 pattern refuses it, and the detail names the field and the rule.
            #expect((response.json["detail"] as? String)?.hasPrefix("certificates[0]: must match ^(?:[A-Za-z0-9+/]{4})*") == true)
        }
    }

    @Test func badHex() async throws {
        let body = try modified { $0["encoding"] = "hex" }  // the base64 values are not hex
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            expectProblem(response, status: .badRequest, code: "invalid_request")
            // Only the hex form names `encoding: hex`, so its rules are the ones reported.
            #expect((response.json["detail"] as? String)?.hasPrefix("certificates[0]: must match ^(?:[0-9A-Fa-f]{2})+$") == true)
        }
    }

    @Test func anUnknownEncoding() async throws {
        let body = try modified { $0["encoding"] = "pem" }
        try await GatewayHarness.run { client, _ in
            expectProblem(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body),
                          status: .badRequest, code: "invalid_request")
        }
    }

    @Test func rsaV2IsAClearUnsupportedScheme() async throws {
        let body = try modified { $0["encryption_scheme"] = "RSA_V2" }
        try await GatewayHarness.run { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            expectProblem(response, status: .unprocessableContent, code: "unsupported_encryption_scheme")
            #expect(await sandbox.bridge.log.count == 0)
            let ecc = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try modified { $0["encryption_scheme"] = "ECC_V2" })
            #expect(ecc.status == .ok)
        }
    }

    @Test func anEmptyNonce() async throws {
        let body = try modified { $0["nonce"] = "" }
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_local_demo", body: body)
            expectProblem(response, status: .badRequest, code: "invalid_request")
            #expect((response.json["detail"] as? String)?.hasPrefix("nonce") == true)
        }
    }

    @Test func aTruncatedCertificateForTheLocalIssuer() async throws {
        let body = try modified { body in
            let certificates = body["certificates"] as! [String]
            body["certificates"] = [Data(base64Encoded: certificates[0])!.prefix(60).base64EncodedString(), certificates[1]]
        }
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_local_demo", body: body)
            expectProblem(response, status: .unprocessableContent, code: "invalid_certificate_chain")
            #expect(response.json["detail"] as? String == "certificates[0]: not a valid X.509 certificate")
        }
    }

    @Test func fewerThanTwoCertificates() async throws {
        let body = try modified { $0["certificates"] = [($0["certificates"] as! [String])[0]] }
        try await GatewayHarness.run { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            expectProblem(response, status: .badRequest, code: "invalid_request")
            #expect((response.json["detail"] as? String)?.hasPrefix("certificates:") == true)
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    @Test func aBodyOver64KiB() async throws {
        let body = try modified { $0["nonce"] = String(repeating: "A", count: 70_000) }
        try await GatewayHarness.run { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: body)
            expectProblem(response, status: .contentTooLarge, code: "request_too_large")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    /// A chunked body whose framing is not HTTP's (a chunk size that is not hexadecimal, a chunk
    /// longer than it said) is the caller's malformed request, 400 `invalid_request`, not a size:
    /// the body here is three bytes.
    @Test(arguments: ["zz\r\nabc\r\n0\r\n\r\n", "2\r\nabcdef\r\n0\r\n\r\n"])
    func aMalformedChunkedBodyIsInvalidNotTooLarge(chunks: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let connection = try await RawConnection.open(port: client.port)
            defer { connection.close() }
            try await connection.send("POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunks)
            #expect(await connection.eventually { $0.text.contains("\r\n\r\n{") && $0.text.hasSuffix("}") })
            #expect(connection.text.hasPrefix("HTTP/1.1 400 "), "\(connection.text.prefix(200))")
            #expect(connection.text.contains(#""code":"invalid_request""#))
            #expect(connection.text.lowercased().contains("content-type: application/problem+json"))
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    /// A refusal written while its request's body is still arriving closes the connection once
    /// written: the rest is not read. Before, a caller without a key could stream chunk
    /// extensions (which no body limit counts) into an answered connection until the read timeout
    /// (10 s here) passed.
    @Test func aRefusalBeforeTheBodyEndedClosesTheConnection() async throws {
        try await GatewayHarness.run { client, sandbox in
            // No key: 401 as soon as the head is read, the body still coming.
            let keyless = try await RawConnection.open(port: client.port)
            defer { keyless.close() }
            try await keyless.send("POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1;ext=" + String(repeating: "a", count: 4_096))
            #expect(await keyless.eventually { $0.text.hasPrefix("HTTP/1.1 401 ") && !$0.isOpen }, "\(keyless.text.prefix(200))")
            #expect(keyless.text.lowercased().contains("connection: close"))
            // Over the body limit part-way: 413, and the rest is not read either.
            let large = try await RawConnection.open(port: client.port)
            defer { large.close() }
            try await large.send("POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "11000\r\n" + String(repeating: "a", count: 0x11000) + "\r\n")
            #expect(await large.eventually { $0.text.hasPrefix("HTTP/1.1 413 ") && !$0.isOpen }, "\(large.text.prefix(200))")
            #expect(await sandbox.bridge.log.count == 0)
            // A refusal of a whole request keeps its connection: the next request is served on it,
            // with or without a body.
            let whole = try await RawConnection.open(port: client.port)
            defer { whole.close() }
            try await whole.send("GET /v1/cards HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await whole.eventually { $0.text.hasPrefix("HTTP/1.1 401 ") && $0.text.contains("HTTP/1.1 200 ") })
            #expect(whole.isOpen)
            let body = String(decoding: try GatewayHarness.requestBody(), as: UTF8.self)
            let posted = try await RawConnection.open(port: client.port)
            defer { posted.close() }
            try await posted.send("POST /v1/cards/no_such_card/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                + body + "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(await posted.eventually { $0.text.hasPrefix("HTTP/1.1 404 ") && $0.text.contains("HTTP/1.1 200 ") }, "\(posted.text.prefix(300))")
            #expect(posted.isOpen)
        }
    }

    /// A client that asks `Expect: 100-continue` (curl does, before a larger body) is told to go
    /// on at once, and its request is then served as any other.
    @Test func expectContinueIsAnsweredAtOnce() async throws {
        try await GatewayHarness.run { client, sandbox in
            let body = String(decoding: try GatewayHarness.requestBody(), as: UTF8.self)
            let connection = try await RawConnection.open(port: client.port)
            defer { connection.close() }
            try await connection.send("POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\n"
                + "Content-Length: \(body.utf8.count)\r\nExpect: 100-continue\r\n\r\n")
            #expect(await connection.eventually { $0.text.hasPrefix("HTTP/1.1 100 Continue\r\n\r\n") }, "\(connection.text.prefix(100))")
            try await connection.send(body)
            #expect(await connection.eventually { $0.text.contains("HTTP/1.1 200 ") && $0.text.contains("provisioning_id") })
            #expect(await sandbox.bridge.log.count == 1)
        }
    }

    /// A head the gateway refuses before reading its body (no key: 401; a declared body past
    /// `server.max_body_bytes`: 413) is not told to go on: its refusal is the answer, first on the
    /// wire, and the client sends no body to have it dropped.
    @Test func expectContinueIsNotAnsweredForAHeadThatIsRefused() async throws {
        try await GatewayHarness.run { client, sandbox in
            let path = "POST /v1/cards/card_bridge_demo/wallet-provisioning/apple-pay HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            let heads = [
                ("HTTP/1.1 401 ", path + "Content-Type: application/json\r\nContent-Length: 2000\r\nExpect: 100-continue\r\n\r\n"),
                ("HTTP/1.1 413 ", path + "Authorization: Bearer \(GatewayHarness.demoKey)\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(64 * 1024 + 1)\r\nExpect: 100-continue\r\n\r\n"),
            ]
            for (status, head) in heads {
                let connection = try await RawConnection.open(port: client.port)
                defer { connection.close() }
                try await connection.send(head)
                #expect(await connection.eventually { $0.text.hasPrefix(status) }, "\(connection.text.prefix(100))")
                #expect(!connection.text.contains("100 Continue"), "\(connection.text.prefix(100))")
            }
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    /// The contract reads a query as the generated code does (`+` is a space, `%2B` a plus): it
    /// read `limit=+1` as 1 where the handler got " 1", and answered "wrong type" naming nothing.
    @Test func aQueryIsCheckedAsTheHandlerReadsIt() async throws {
        try await GatewayHarness.run { client, _ in
            let headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)"]
            let plus = try await client.execute(uri: "/v1/cards?limit=+1", method: .get, headers: headers)
            expectProblem(plus, status: .badRequest, code: "invalid_request")
            #expect((plus.json["detail"] as? String)?.hasPrefix("limit") == true, "\(plus.json)")
            let encoded = try await client.execute(uri: "/v1/cards?limit=%2B1", method: .get, headers: headers)
            #expect(encoded.status == .ok, "\(encoded.json)")
            #expect(try await client.execute(uri: "/v1/cards?limit=1", method: .get, headers: headers).status == .ok)
        }
    }

    /// An operation that takes query parameters refuses any other, where it had ignored it: a
    /// misspelled filter (`programme`, `card`) answered the whole unfiltered list. The name is
    /// repeated only when it reads as a name; a query on an operation that takes none is ignored.
    @Test func aMisspelledFilterIsRefusedNotDropped() async throws {
        try await GatewayHarness.run { client, _ in
            let tenant: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)"]
            let ops: HTTPFields = [.authorization: "Bearer \(GatewayHarness.opsKey)"]
            let cases: [(uri: String, headers: HTTPFields, detail: String)] = [
                ("/v1/cards?programme=demo", tenant, "programme: not a parameter of this operation, which takes program, issuer, after, limit"),
                ("/v1/admin/audit?card=card_x&limit=5", ops, "card: not a parameter of this operation, which takes kind, actor, card_id, after, limit"),
                ("/v1/admin/routes/explain?card_id=c&walet=apple_pay", ops, "walet: not a parameter of this operation, which takes card_id, wallet"),
                ("/v1/cards?4111111111111111=1", tenant, "a query parameter: not a parameter of this operation"),
                // A key pasted as a name is not repeated either (the input probe: it had been).
                ("/v1/cards?sk_live_4eC39HqLyjWDarjtT1zdp7dc", tenant, "a query parameter: not a parameter of this operation"),
                ("/v1/cards?Zx81Qm2Lp0Wv7Rt4Yb9Kd3Nf", tenant, "a query parameter: not a parameter of this operation"),
            ]
            for (uri, headers, detail) in cases {
                let response = try await client.execute(uri: uri, method: .get, headers: headers)
                expectProblem(response, status: .badRequest, code: "invalid_request")
                let text = response.json["detail"] as? String ?? ""
                #expect(text.contains(detail) && !text.contains("4111111111111111") && !text.contains("4eC39Hq") && !text.contains("Zx81Qm"),
                        "\(uri): \(text)")
            }
            // The same lists with their filters spelt right answer.
            #expect(try await client.execute(uri: "/v1/cards?program=demo&limit=5", method: .get, headers: tenant).status == .ok)
            #expect(try await client.execute(uri: "/v1/admin/audit?card_id=card_x&limit=5", method: .get, headers: ops).status == .ok)
            // An actor filter no actor can match (a control character, a space) is refused too.
            for actor in ["%00", "demo%20", "%E2%80%8Bdemo"] {
                let refused = try await client.execute(uri: "/v1/admin/audit?actor=\(actor)", method: .get, headers: ops)
                expectProblem(refused, status: .badRequest, code: "invalid_request")
            }
            // An operation that takes no query ignores one; `_`, a cache-buster, is ignored everywhere.
            #expect(try await client.execute(uri: "/v1/admin/issuers?x=17", method: .get, headers: ops).status == .ok)
            #expect(try await client.execute(uri: "/v1/cards?limit=5&_=1700000000", method: .get, headers: tenant).status == .ok)
        }
    }

    /// A query part without `=` before a parameter the generated code looks for made its parser
    /// throw, and the caller's typo answered 500 `internal` (logged as an error, counted as a 5xx)
    /// on every operation that takes a query. It is 400 naming the query's grammar; an operation
    /// that takes no query still ignores one.
    @Test func aMalformedQueryIsTheCallersFaultNotA500() async throws {
        try await GatewayHarness.run { client, _ in
            let tenant: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)"]
            let ops: HTTPFields = [.authorization: "Bearer \(GatewayHarness.opsKey)"]
            for (uri, headers) in [("/v1/cards?&", tenant), ("/v1/cards?limit=1&&program=demo", tenant), ("/v1/cards?%26", tenant),
                                   ("/v1/admin/audit?kind=auth_failed&&limit=1", ops),
                                   ("/v1/admin/routes/explain?card_id=card_bridge_demo&&wallet=apple_pay", ops)] {
                let response = try await client.execute(uri: uri, method: .get, headers: headers)
                expectProblem(response, status: .badRequest, code: "invalid_request")
                #expect((response.json["detail"] as? String)?.contains("every part must be name=value") == true, "\(uri): \(response.json)")
            }
            let escape = try await client.execute(uri: "/v1/cards?program=%ZZ", method: .get, headers: tenant)
            expectProblem(escape, status: .badRequest, code: "invalid_request")
            #expect((escape.json["detail"] as? String)?.hasPrefix("the query: a % escape") == true, "\(escape.json)")
            #expect(try await client.execute(uri: "/v1/cards?limit=1&", method: .get, headers: tenant).status == .ok)
            #expect(try await client.execute(uri: "/v1/cards/card_bridge_demo?pretty&&", method: .get, headers: tenant).status == .ok)
        }
    }

    /// A body sent to an operation that takes none was dropped unread: a DELETE with one deleted,
    /// a resume with one resumed, though the caller believed it had said more. It is refused before
    /// anything acts; an empty body (`Content-Length: 0`) is no body.
    @Test func aBodyToAnOperationThatTakesNoneIsRefusedBeforeAnythingActs() async throws {
        try await GatewayHarness.run { client, _ in
            let tenant: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)", .contentType: "application/json"]
            let ops: HTTPFields = [.authorization: "Bearer \(GatewayHarness.opsKey)", .contentType: "text/plain"]
            let deleted = try await client.execute(uri: "/v1/cards/card_bridge_demo", method: .delete, headers: tenant,
                                                   body: ByteBuffer(string: #"{"only_if":"unused"}"#))
            expectProblem(deleted, status: .badRequest, code: "invalid_request")
            #expect((deleted.json["detail"] as? String)?.contains("this operation takes no body") == true, "\(deleted.json)")
            #expect(try await client.execute(uri: "/v1/cards/card_bridge_demo", method: .get, headers: tenant).status == .ok)

            #expect(try await client.execute(uri: "/v1/admin/issuers/bridge/pause", method: .post, headers: ops).status == .ok)
            let resumed = try await client.execute(uri: "/v1/admin/issuers/bridge/resume", method: .post, headers: ops, body: ByteBuffer(string: "now"))
            expectProblem(resumed, status: .badRequest, code: "invalid_request")
            let health = try await client.execute(uri: "/v1/admin/issuers", method: .get, headers: ops)
            let bridge = (health.json["issuers"] as? [[String: Any]])?.first { $0["issuer"] as? String == "bridge" }
            #expect(bridge?["paused"] as? Bool == true, "\(health.json)")

            // No body, an empty one, or one that says nothing (`{}`, `null`, blanks: what common
            // clients send on a POST without a body) is what these operations take.
            for nothing in ["", " \n", "{}", " { } ", "null"] {
                let resumed = try await client.execute(uri: "/v1/admin/issuers/bridge/resume", method: .post, headers: ops,
                                                       body: ByteBuffer(string: nothing))
                #expect(resumed.status == .ok, "\(nothing.debugDescription): \(resumed.json)")
            }
            #expect(try await client.execute(uri: "/v1/cards/card_bridge_demo", method: .delete, headers: tenant).status == .noContent)
        }
    }

    /// `Accept` is not negotiated: the generated code checked it only when serializing the answer,
    /// after the handler had acted, so an `Accept: text/html` provisioning reached the issuer, was
    /// audited as a success, and answered 400 with the payload thrown away. It is disregarded.
    @Test(arguments: ["text/html", "application/xml", "application/4111111111111111", "nonsense;;q=x"])
    func anAcceptTheGatewayCannotSatisfyIsDisregardedNotRefusedAfterActing(accept: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            let headers: HTTPFields = [.contentType: "application/json", .authorization: "Bearer \(GatewayHarness.demoKey)", .accept: accept]
            let response = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                    headers: headers, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            #expect(response.status == .ok, "\(response.json)")
            #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
            #expect(response.json["provisioning_id"] is String)
            #expect(await sandbox.bridge.log.count == 1)
            // A problem is still a problem, whatever was asked.
            let missing = try await client.execute(uri: "/v1/cards/no_such_card/wallet-provisioning/apple-pay", method: .post,
                                                   headers: headers, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            #expect(missing.status == .notFound)
            #expect(!(missing.json["detail"] as? String ?? "").contains("4111111111111111"))
        }
    }

    /// A body in a content coding (`Content-Encoding`: gzip, br, anything but `identity`) is
    /// refused with 415, nothing sent: the gateway decodes none, and had read a body marked `br`
    /// as plain JSON, and a gzipped one as a JSON error (the input probe). `identity` is plain.
    @Test(arguments: ["gzip", "br", "x-bogus", "identity, gzip", "GZIP"])
    func aBodyInAContentCodingIsUnsupportedMediaType(coding: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            var headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)", .contentType: "application/json"]
            headers[.contentEncoding] = coding
            let response = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                    headers: headers, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            expectProblem(response, status: .unsupportedMediaType, code: "unsupported_media_type")
            #expect((response.json["detail"] as? String)?.contains("Content-Encoding") == true, "\(response.json)")
            #expect(response.headers[HTTPField.Name("Accept-Encoding")!] == "identity")
            #expect(await sandbox.bridge.log.count == 0)
            headers[.contentEncoding] = "identity"
            let plain = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                 headers: headers, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            #expect(plain.status == .ok, "\(plain.json)")
        }
    }

    /// `Content-Type` given twice, alike or not, is a 400 that says so, nothing sent: it had been
    /// read as one joined value and answered 415 "the body must be JSON" (the input probe).
    @Test(arguments: [["application/json", "application/json"], ["application/json", "text/plain"]])
    func aContentTypeGivenTwiceIsNamedAsSuch(types: [String]) async throws {
        try await GatewayHarness.run { client, sandbox in
            var headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)"]
            for type in types { headers.append(HTTPField(name: .contentType, value: type)) }
            let response = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                    headers: headers, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            expectProblem(response, status: .badRequest, code: "invalid_request")
            #expect(response.json["detail"] as? String == "Content-Type is given more than once: send it once", "\(response.json)")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    /// A body the operation cannot read as UTF-8 JSON is 415 naming what it takes, before anything
    /// acts: it was 400 "the body is required" (the generated code skipped a body it did not know),
    /// and `charset=utf-16` was read as UTF-8.
    @Test(arguments: [nil, "text/plain", "application/x-www-form-urlencoded", "application/4111111111111111", "application/jsonx",
                      "application/vnd.gateway+json", "application/json; charset=utf-16", #"application/json;charset="UTF-16LE""#, "application/json; charset=latin1",
                      "application/json; charset"])
    func aBodyThatIsNotUTF8JSONIsUnsupportedMediaType(contentType: String?) async throws {
        try await GatewayHarness.run { client, sandbox in
            var headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)"]
            if let contentType { headers[.contentType] = contentType }
            let response = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                    headers: headers, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            expectProblem(response, status: .unsupportedMediaType, code: "unsupported_media_type")
            #expect(response.headers[.accept] == "application/json")
            #expect(!String(buffer: response.body).contains("4111111111111111"))
            #expect(await sandbox.bridge.log.count == 0)
            // Under an Idempotency-Key: refused before the key is claimed, so the same key then serves.
            var keyed = headers
            keyed[HTTPField.Name("Idempotency-Key")!] = "media-\(UUID().uuidString)"
            let refused = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                   headers: keyed, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            #expect(refused.status == .unsupportedMediaType)
            keyed[.contentType] = "application/json"
            let served = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                  headers: keyed, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            #expect(served.status == .ok, "\(served.json)")
            // An empty body (Content-Length: 0) of any type is no body: the body is required.
            let empty = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                 headers: headers, body: ByteBuffer())
            expectProblem(empty, status: .badRequest, code: "invalid_request")
            #expect(empty.json["detail"] as? String == "the body is required", "\(empty.json)")
            // A card's registration takes JSON too.
            let card = try await client.execute(uri: "/v1/cards/card_media", method: .put, headers: headers,
                                                body: ByteBuffer(string: #"{"program":"demo","issuer":"bridge","issuer_reference":{"card_account_id":"ca_media"}}"#))
            expectProblem(card, status: .unsupportedMediaType, code: "unsupported_media_type")
        }
    }

    /// JSON is taken by any spelling of its media type and of UTF-8; without a body (here an empty
    /// chunked one, as the test client sends), the body is missing, whatever the type.
    @Test(arguments: ["application/json", "Application/JSON; charset=UTF-8", #"application/json;charset="utf-8""#,
                      "application/json ; charset=utf8", " application/json\t"])
    func utf8JSONIsTakenByEverySpelling(contentType: String) async throws {
        try await GatewayHarness.run { client, sandbox in
            var headers: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)", .contentType: contentType]
            let response = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post,
                                                    headers: headers, body: ByteBuffer(bytes: try GatewayHarness.requestBody()))
            #expect(response.status == .ok, "\(response.json)")
            #expect(await sandbox.bridge.log.count == 1)
            headers[.contentType] = nil
            let empty = try await client.execute(uri: "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", method: .post, headers: headers)
            expectProblem(empty, status: .badRequest, code: "invalid_request")
            #expect(empty.json["detail"] as? String == "the body is required", "\(empty.json)")
        }
    }

    /// A member given twice can read as two requests (the gateway's parsers keep the first, a proxy
    /// in front may keep the last): refused, whichever copy is the valid one.
    @Test(arguments: [true, false])
    func aMemberGivenTwiceWithDifferentValuesIsRefused(validFirst: Bool) async throws {
        let body = try GatewayHarness.requestBody()
        let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let other = #""nonce":"\#(String(repeating: "A", count: 4000))""#
        let json = validFirst ? String(text.dropLast()) + "," + other + "}" : "{" + other + "," + text.dropFirst()
        try await GatewayHarness.run { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: Data(json.utf8))
            expectProblem(response, status: .badRequest, code: "invalid_request")
            #expect((response.json["detail"] as? String)?.contains("nonce: a member name is given more than once") == true, "\(response.json)")
            #expect(await sandbox.bridge.log.count == 0)
            // Copies that agree are refused too (I-JSON), and without the copy the body is served.
            let same = String(text.dropLast()) + #","encryption_scheme":"ECC_V2","encryption_scheme":"ECC_V2"}"#
            let twice = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: Data(same.utf8))
            expectProblem(twice, status: .badRequest, code: "invalid_request")
            let once = String(text.dropLast()) + #","encryption_scheme":"ECC_V2"}"#
            #expect(try await GatewayHarness.provision(client, card: "card_bridge_demo", body: Data(once.utf8)).status == .ok)
        }
    }

    @Test func anUnknownCard() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await GatewayHarness.provision(client, card: "card_nobody", body: try GatewayHarness.requestBody())
            expectProblem(response, status: .notFound, code: "card_not_found")
        }
    }

    @Test(arguments: [nil, "sk_wrong_key"])
    func aMissingOrWrongAPIKey(key: String?) async throws {
        try await GatewayHarness.run { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_bridge_demo", body: try GatewayHarness.requestBody(), key: key)
            expectProblem(response, status: .unauthorized, code: "unauthorized")
            // RFC 9110, 11.6.1: a 401 names the scheme its credentials go in.
            #expect(response.headers[.wwwAuthenticate] == "Bearer")
            #expect(await sandbox.bridge.log.count == 0)
        }
    }

    @Test func anotherClientsCard() async throws {
        try await GatewayHarness.run { client, sandbox in
            // Another program's card is answered exactly like one that does not exist.
            let response = try await GatewayHarness.provision(client, card: GatewayHarness.otherBridgeCard, body: try GatewayHarness.requestBody())
            expectProblem(response, status: .notFound, code: "card_not_found")
            #expect(await sandbox.bridge.log.count == 0)
            // ...and the same card works for the client whose program it is.
            let own = try await GatewayHarness.provision(client, card: GatewayHarness.otherBridgeCard, body: try GatewayHarness.requestBody(),
                                                         key: GatewayHarness.otherKey)
            #expect(own.status == .ok)
        }
    }

    @Test func anUpstream4xxIsUpstreamRejected() async throws {
        // Registered here, unknown to the Bridge simulator: Bridge answers its own 404.
        let card = CardRecord(id: "card_gone", program: "demo", issuer: "bridge",
                              issuerReference: .init(["customer_id": "cust_demo_001", "card_account_id": "ca_closed"]))
        try await GatewayHarness.run(extraCards: [card]) { client, sandbox in
            let response = try await GatewayHarness.provision(client, card: "card_gone", body: try GatewayHarness.requestBody())
            expectProblem(response, status: .unprocessableContent, code: "upstream_rejected")
            #expect(response.json["retryable"] as? Bool == false)
            #expect(await sandbox.bridge.log.requests.map(\.status) == [404])
        }
    }

    @Test func anUpstreamAnsweringGarbageIsAProtocolError() async throws {
        try await withGarbageUpstream { url in
            var config = try GatewayHarness.sandboxConfig()
            config.issuers["tmp"]?.endpoints = [EndpointConfig(url: url.absoluteString)]
            config.issuers["tmp"]?.credentials = ["token": "env:TEST_TMP_TOKEN"]
            try await GatewayHarness.run(config: config, environment: ["TEST_TMP_TOKEN": "t"]) { client, _ in
                let response = try await GatewayHarness.provision(client, card: "card_tmp_demo", body: try GatewayHarness.requestBody())
                expectProblem(response, status: .badGateway, code: "upstream_protocol_error")
            }
        }
    }

    @Test func anUnknownPathIsAProblemToo() async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await client.execute(uri: "/v2/nothing", method: .get)
            #expect(response.status == .notFound)
            #expect(response.headers[.contentType] == "application/problem+json")
        }
    }

    /// An upstream that answers 200 with HTML to everything.
    func withGarbageUpstream(_ body: (URL) async throws -> Void) async throws {
        let router = Router()
        router.post("/issuer/push-provisioning/signed-cards") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html"], body: .init(byteBuffer: ByteBuffer(string: "<html>oops</html>")))
        }
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            var ports = stream.makeAsyncIterator()
            let port = try #require(await ports.next())
            try await body(URL(string: "http://127.0.0.1:\(port)")!)
        }
    }
}

/// A method the spec does not declare on a path it has: 405 with `Allow`, as problem+json.
@Suite struct MethodNotAllowedTests {
    @Test(arguments: [
        ("TRACE", "/v1/token-activations", "POST"),
        ("GET", "/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", "POST"),
        ("DELETE", "/v1/cards", "GET"),
        ("PATCH", "/v1/cards/card_bridge_demo", "GET, PUT, DELETE"),
        ("POST", "/v1/cards/card_bridge_demo/wallet-tokens", "GET"),
        ("PUT", "/v1/admin/config/reload", "POST"),
        ("QUERY", "/healthz", "GET"),
        // Methods no route names (the router's 404 before): the path exists all the same.
        ("PROPFIND", "/v1/cards/card_bridge_demo", "GET, PUT, DELETE"),
        ("PURGE", "/v1/cards/card_bridge_demo/wallet-tokens/tok_1/suspend", "POST"),
        ("PROPFIND", "/v1//cards/", "GET"),
    ])
    func anUndeclaredMethodIs405WithAllow(method: String, path: String, allow: String) async throws {
        try await GatewayHarness.run { client, _ in
            let response = try await client.execute(
                uri: path, method: HTTPRequest.Method(method)!, headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(response.status == .methodNotAllowed, "\(method) \(path): \(String(buffer: response.body))")
            #expect(response.headers[.allow] == allow)
            #expect(response.headers[.contentType] == "application/problem+json")
            #expect(response.json["code"] as? String == "method_not_allowed")
        }
    }

    @Test func anUnknownPathIsStill404() async throws {
        try await GatewayHarness.run { client, _ in
            for method in [HTTPRequest.Method.get, HTTPRequest.Method("PROPFIND")!] {
                let response = try await client.execute(uri: "/v1/nothing-here", method: method, headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
                #expect(response.status == .notFound)
                #expect(response.headers[.allow] == nil)
            }
            // A path one segment longer than a declared one is no path of the spec either.
            let longer = try await client.execute(uri: "/v1/cards/card_bridge_demo/extra", method: HTTPRequest.Method("PROPFIND")!,
                                                  headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(longer.status == .notFound)
        }
    }
}

/// The error vocabulary as documented, against the server's: the README's error table gives every
/// code its HTTP status and whether it is retryable, and the served spec's `ErrorCode` lists them.
@Suite struct ErrorVocabularyTests {
    @Test func theREADMEsErrorTableAndTheSpecNameEveryCodeWithItsStatus() throws {
        let readme = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        var documented: [String: (status: Int, retryable: Bool)] = [:]
        for line in readme.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            // `yes*`: retryable unless the issuer may have acted unseen (the note under the table).
            guard cells.count >= 3, let status = Int(cells[1]), ["yes", "yes*", "no"].contains(cells[2]) else { continue }
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = (status, cells[2].hasPrefix("yes"))
        }
        for code in GatewayError.Code.allCases {
            let row = try #require(documented[code.rawValue], "\(code.rawValue) is not in the README's error table")
            #expect(row.status == code.httpStatus, "\(code.rawValue)")
            #expect(row.retryable == code.isRetryable, "\(code.rawValue)")
        }
        #expect(Set(documented.keys) == Set(GatewayError.Code.allCases.map(\.rawValue)), "the table names codes the server does not have")

        let spec = try String(contentsOf: GatewayHarness.packageRoot.appendingPathComponent("Sources/ProvisioningAPI/openapi.yaml"), encoding: .utf8)
        let block = try #require(spec.components(separatedBy: "    ErrorCode:\n").dropFirst().first)
        let enumLines = block.split(separator: "\n").dropFirst(2).prefix { $0.hasPrefix("        - ") }
        #expect(Set(enumLines.map { String($0.dropFirst("        - ".count)) }) == Set(GatewayError.Code.allCases.map(\.rawValue)))
    }
}
