import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOFoundationCompat
import Sandbox
import Testing

/// The simulators enforce their upstream's contract: raw HTTP requests that break it get that
/// upstream's own error shape. (The connectors' acceptance is in IssuersTests.)
@Suite struct SimulatorContractTests {
    /// A real leaf: the simulators encrypt for its key.
    static let der = try! SandboxDevice.make().leafDER

    struct Answer: Sendable {
        let status: Int
        let body: Data
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    func send(_ url: String, method: HTTPMethod = .POST, headers: [String: String], body: [String: Any]?) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body))) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let data = Data(buffer: try await response.body.collect(upTo: 1 << 20))
        return Answer(status: Int(response.status.code), body: data)
    }

    func withServer<T: Sendable>(_ server: SimulatorServer, _ body: (String) async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            defer { group.cancelAll() }
            return try await body(await server.baseURL().absoluteString)
        }
    }

    // MARK: Bridge

    let bridge = BridgeSimulator(apiKey: "k", accounts: [.init(customerID: "c1", cardAccountID: "a1")])
    var bridgeBody: [String: Any] {
        let hex = Self.der.map { String(format: "%02x", $0) }.joined()
        return ["wallet_provider": "apple_pay",
                "apple_pay": ["leaf_cert": hex, "subordinate_cert": hex, "nonce": "0a0b", "nonce_signature": "0c0d"]]
    }

    @Test func bridgeReadsAnAbsentEncodingAsHexAndAnswersTheGuidesShape() async throws {
        let answer = try await withServer(bridge.server()) { base in
            try await send("\(base)/customers/c1/card_accounts/a1/create_mobile_wallet_provisioning_request",
                           headers: ["Api-Key": "k", "Idempotency-Key": "i1"], body: bridgeBody)
        }
        #expect(answer.status == 200)
        let applePay = try #require(answer.json["apple_pay"] as? [String: String])
        #expect(applePay["ephemeral_public_key"]?.count == 130)
        #expect(applePay["activation_data"]?.hasPrefix("MBPAC-") == true)
    }

    @Test func bridgeRequiresItsHeadersAndFields() async throws {
        try await withServer(bridge.server()) { base in
            let url = "\(base)/customers/c1/card_accounts/a1/create_mobile_wallet_provisioning_request"
            let noKey = try await send(url, headers: ["Idempotency-Key": "i"], body: bridgeBody)
            #expect(noKey.status == 401 && (noKey.json["source"] as? [String: String])?["key"] == "Api-Key")

            let noIdempotency = try await send(url, headers: ["Api-Key": "k"], body: bridgeBody)
            #expect(noIdempotency.status == 400 && (noIdempotency.json["source"] as? [String: String])?["key"] == "Idempotency-Key")

            var base64Declared = bridgeBody
            var applePay = base64Declared["apple_pay"] as! [String: String]
            applePay["encoding"] = "base64"  // the values are hex: "0a0b" is valid base64 but the cert is not DER
            base64Declared["apple_pay"] = applePay
            let wrongEncoding = try await send(url, headers: ["Api-Key": "k", "Idempotency-Key": "i2"], body: base64Declared)
            #expect(wrongEncoding.status == 400)
            #expect((wrongEncoding.json["source"] as? [String: String])?["key"] == "leaf_cert")

            var camel = bridgeBody
            camel["applePay"] = camel.removeValue(forKey: "apple_pay")
            let wrongName = try await send(url, headers: ["Api-Key": "k", "Idempotency-Key": "i3"], body: camel)
            #expect(wrongName.status == 400 && (wrongName.json["source"] as? [String: String])?["key"] == "apple_pay")

            let unknown = try await send(url.replacingOccurrences(of: "/a1/", with: "/a2/"),
                                         headers: ["Api-Key": "k", "Idempotency-Key": "i4"], body: bridgeBody)
            #expect(unknown.status == 404)
        }
    }

    @Test func bridgeReplaysAnIdempotencyKeyAndRefusesItsReuse() async throws {
        try await withServer(bridge.server()) { base in
            let url = "\(base)/customers/c1/card_accounts/a1/create_mobile_wallet_provisioning_request"
            let first = try await send(url, headers: ["Api-Key": "k", "Idempotency-Key": "same"], body: bridgeBody)
            let again = try await send(url, headers: ["Api-Key": "k", "Idempotency-Key": "same"], body: bridgeBody)
            #expect(first.status == 200 && again.status == 200)
            #expect(NSDictionary(dictionary: first.json).isEqual(to: again.json))
            var other = bridgeBody
            other["apple_pay"] = (other["apple_pay"] as! [String: String]).merging(["nonce": "ffff"]) { $1 }
            let reused = try await send(url, headers: ["Api-Key": "k", "Idempotency-Key": "same"], body: other)
            #expect(reused.status == 422)
        }
    }

    // MARK: TMP

    @Test func tmpChecksItsCamelCaseFieldsAndAuth() async throws {
        let tmp = TMPSimulator(token: "t", cardIDs: ["card"])
        let good: [String: Any] = ["cardId": "card", "certificate": Self.der.base64EncodedString(), "nonce": "AAE=", "nonceSignature": "AAE="]
        try await withServer(tmp.server()) { base in
            let url = "\(base)/issuer/push-provisioning/signed-cards"
            let ok = try await send(url, headers: ["Authorization": "Bearer t"], body: good)
            #expect(ok.status == 200)
            #expect(Set(ok.json.keys) == ["activationData", "ephemeralPublicKey", "encryptedData"])
            #expect(try await send(url, headers: ["Authorization": "Bearer x"], body: good).status == 401)
            var snake = good
            snake["nonce_signature"] = snake.removeValue(forKey: "nonceSignature")
            let wrongName = try await send(url, headers: ["Authorization": "Bearer t"], body: snake)
            #expect(wrongName.status == 400 && wrongName.json["errorCode"] as? String == "MISSING_FIELD")
            var hex = good
            hex["certificate"] = "30820a"
            #expect(try await send(url, headers: ["Authorization": "Bearer t"], body: hex).status == 400)
        }
    }

    // MARK: Crossmint

    @Test func crossmintTakesDeviceDataAsBase64URLQueryParameters() async throws {
        let crossmint = CrossmintSimulator(apiKey: "k", cardIDs: ["card"])
        let cert = Self.der.base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        try await withServer(crossmint.server()) { base in
            let url = "\(base)/cards/card/apple-pay-payload?certificate=\(cert)&nonce=AAE&nonceSignature=AAE"
            let ok = try await send(url, method: .GET, headers: ["X-API-KEY": "k"], body: nil)
            #expect(ok.status == 200)
            #expect(Set(ok.json.keys) == ["encryptedPassData", "activationData", "ephemeralPublicKey"])
            let noKey = try await send(url, method: .GET, headers: [:], body: nil)
            #expect(noKey.status == 401 && noKey.json["error"] as? Bool == true)
            let padded = try await send(url.replacingOccurrences(of: "nonce=AAE", with: "nonce=AAE%3D"), method: .GET,
                                        headers: ["X-API-KEY": "k"], body: nil)
            #expect(padded.status == 400)
            let unknown = try await send(url.replacingOccurrences(of: "/cards/card/", with: "/cards/other/"), method: .GET,
                                         headers: ["X-API-KEY": "k"], body: nil)
            #expect(unknown.status == 404)
        }
    }
}
