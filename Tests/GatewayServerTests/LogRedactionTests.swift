import ByteText
import Foundation
import HTTPTypes
import NIOCore
import HummingbirdTesting
import Logging
import Synchronization
import Testing

/// Everything logged at trace level while the three demo cards are provisioned, then searched for
/// anything the caller or the upstream sent.
final class CapturedLog: Sendable {
    private let linesLock = Mutex<[String]>([])

    var text: String { linesLock.withLock { $0.joined(separator: "\n") } }
    /// Every line so far, in order.
    var lines: [String] { linesLock.withLock { $0 } }

    func handler(label: String) -> some LogHandler {
        Handler(label: label, sink: self)
    }

    struct Handler: LogHandler {
        let label: String
        let sink: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?, source: String,
                 file: String, function: String, line: UInt) {
            let all = self.metadata.merging(extra ?? [:]) { $1 }
            let line = "\(level) \(label): \(message) \(all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))"
            sink.linesLock.withLock { $0.append(line) }
        }
    }
}

@Suite struct LogRedactionTests {
    @Test func logsNeverHoldCertificatesNoncesKeysOrPayloads() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        let request = try GatewayHarness.requestJSON()
        let payloads = Mutex<[String]>([])

        try await GatewayHarness.run(logger: logger) { client, _ in
            for card in ["card_bridge_demo", "card_tmp_demo", "card_crossmint_demo", "card_missing"] {
                let response = try await GatewayHarness.provision(client, card: card, body: try GatewayHarness.requestBody())
                let json = response.json
                payloads.withLock {
                    $0 += ["activation_data", "encrypted_pass_data", "ephemeral_public_key"].compactMap { json[$0] as? String }
                }
            }
        }

        let text = captured.text
        #expect(text.contains("apple_pay succeeded"), "the provisioning path logs nothing; the test would prove nothing")
        #expect(text.contains("card_not_found"))
        // Every secret value as bytes, then searched for in every encoding it travels in: base64
        // (the API), base64url (Crossmint's query), hex either case (Bridge's default wire and its
        // hex ephemeral keys), each in windows from its start, middle and end (a truncated value
        // is still a leak).
        var secrets: [(name: String, bytes: Data)] = []
        for (index, certificate) in (request["certificates"] as! [String]).enumerated() {
            secrets.append(("certificates[\(index)]", Data(base64Encoded: certificate)!))
        }
        secrets.append(("nonce", Data(base64Encoded: request["nonce"] as! String)!))
        secrets.append(("nonce_signature", Data(base64Encoded: request["nonce_signature"] as! String)!))
        for (index, payload) in payloads.withLock({ $0 }).enumerated() {
            secrets.append(("answer payload \(index)", try #require(Data(base64Encoded: payload))))
        }
        #expect(secrets.count == 4 + 9, "three answers of three payload fields each")
        // Any 16 characters in a row of any encoding of any secret, anywhere in the log, is a
        // leak (a truncated or partial value included); shorter values are searched whole.
        let width = 16
        var windows: [String: String] = [:]
        var whole: [(name: String, text: String)] = [("the API key", GatewayHarness.demoKey)]
        whole += ["4111111111111111", "5555555555554444", "4000056655665556"].map { ("a card number", $0) }
        for secret in secrets {
            let encodings = [
                ("base64", secret.bytes.base64EncodedString()), ("base64url", secret.bytes.base64URLEncodedString()),
                ("hex", secret.bytes.lowercaseHex), ("HEX", secret.bytes.lowercaseHex.uppercased()),
            ]
            for (encoding, full) in encodings {
                let characters = Array(full)
                guard characters.count > width else {
                    whole.append(("\(secret.name) as \(encoding)", full))
                    continue
                }
                for start in 0...(characters.count - width) {
                    windows[String(characters[start..<start + width])] = "\(secret.name) as \(encoding)"
                }
            }
        }
        for needle in whole {
            #expect(!text.contains(needle.text), "a log line holds \(needle.name)")
        }
        let logged = Array(text)
        var leaks: Set<String> = []
        if logged.count >= width {
            for start in 0...(logged.count - width) {
                if let name = windows[String(logged[start..<start + width])] { leaks.insert(name) }
            }
        }
        #expect(leaks.isEmpty, "log lines hold parts of: \(leaks.sorted())")
    }

    /// A card number a caller puts where an id or a name goes (a card id in the path or a body,
    /// `X-Request-Id`, `tracestate`, a program filter, a provisioning id, an issuer to pause, a
    /// wallet token's id, an activation's token reference)
    /// reaches no log line and no answer: an id that holds one is refused without being repeated,
    /// a request id or a tracestate that holds one is replaced or dropped, and a name is echoed
    /// masked. It had been logged, echoed, audited and exported in spans.
    @Test func aCardNumberWhereAnIdGoesIsNeitherLoggedNorEchoed() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        let numbers = ["4111111111111111", "5555-5555-5555-4444"]
        let answers = Mutex<[String]>([])
        try await GatewayHarness.run(logger: logger) { client, _ in
            let tenant: HTTPFields = [.authorization: "Bearer \(GatewayHarness.demoKey)", .contentType: "application/json"]
            let ops: HTTPFields = [.authorization: "Bearer \(GatewayHarness.opsKey)", .contentType: "application/json"]
            func send(_ uri: String, _ method: HTTPRequest.Method, _ headers: HTTPFields, _ body: String? = nil) async throws -> GatewayResponse {
                let response = try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
                answers.withLock { $0.append(String(buffer: response.body) + " " + response.headers.map { "\($0.name)=\($0.value)" }.joined()) }
                return response
            }
            for number in numbers {
                let registered = try await send("/v1/cards/\(number)", .put, tenant, #"{"program":"demo","issuer":"tmp","issuer_reference":{"issuer_card_id":"t_pan"}}"#)
                #expect(registered.status == .badRequest, "\(registered.json)")
                #expect(try await send("/v1/cards/\(number)/wallet-provisioning/apple-pay", .post, tenant,
                                       String(decoding: try GatewayHarness.requestBody(), as: UTF8.self)).status == .badRequest)
                #expect(try await send("/v1/token-activations", .post, tenant,
                                       #"{"token_unique_reference":"DNITHE000000000000001","card_id":"\#(number)"}"#).status == .badRequest)
                // As a wallet token's id, and as the activation's token reference.
                let transition = try await send("/v1/cards/card_lithic_demo/wallet-tokens/\(number.replacingOccurrences(of: " ", with: "-"))/suspend",
                                                .post, tenant)
                #expect(transition.status == .badRequest && transition.json["code"] as? String == "invalid_request", "\(transition.json)")
                let activation = try await send("/v1/token-activations", .post, tenant,
                                                #"{"token_unique_reference":"\#(number)","card_id":"card_tmp_demo"}"#)
                #expect(activation.status == .badRequest && activation.json["code"] as? String == "invalid_request", "\(activation.json)")
                var traced = tenant
                traced[HTTPField.Name("X-Request-Id")!] = number
                traced[HTTPField.Name("traceparent")!] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                traced[HTTPField.Name("tracestate")!] = "pan=\(number)"
                let provisioned = try await send("/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", .post, traced,
                                                 String(decoding: try GatewayHarness.requestBody(), as: UTF8.self))
                #expect(provisioned.status == .ok)
                #expect(provisioned.headers[HTTPField.Name("X-Request-Id")!]?.hasPrefix("req_") == true)
                #expect(try await send("/v1/cards?program=\(number)", .get, tenant).status == .badRequest, "a program is never a card number")
                #expect(try await send("/v1/provisionings/\(number.filter(\.isNumber))", .get, tenant).status == .notFound)
                #expect(try await send("/v1/admin/issuers/\(number)/pause", .post, ops).status == .notFound)
            }
        }
        let seen = captured.text + answers.withLock { $0.joined(separator: "\n") }
        for number in numbers {
            #expect(!seen.contains(number) && !seen.contains(number.filter(\.isNumber)), "\(number) was logged or echoed")
        }
        #expect(captured.text.contains("apple_pay succeeded"), "nothing was logged; the test would prove nothing")
    }

    /// A request that fails inside the gateway (its store did not answer) is logged with its
    /// cause and its route's template, never its path: a provisioning id is looked up whatever it
    /// holds (an id that holds a card number is simply not found), so the path may hold anything a
    /// caller typed (the input audit: the error line had the raw path).
    @Test func aFailedRequestsLogLineNamesItsRouteNotItsPath() async throws {
        let captured = CapturedLog()
        let logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        let store = LostAcknowledgementStore(try await GatewayHarness.temporaryStore())
        let number = "4111111111111111"
        try await GatewayHarness.run(logger: logger, store: store) { client, _ in
            store.failNextAuditRead()
            let failed = try await client.execute(uri: "/v1/provisionings/\(number)", method: .get,
                                                  headers: [.authorization: "Bearer \(GatewayHarness.demoKey)"])
            #expect(failed.status == .internalServerError && failed.json["code"] as? String == "internal", "\(failed.json)")
            #expect(!String(buffer: failed.body).contains(number))
        }
        let line = try #require(captured.text.split(separator: "\n").first { $0.contains("request failed") }, "the failure was not logged")
        #expect(line.contains("/v1/provisionings/{provisioning_id}"), "\(line)")
        #expect(!captured.text.contains(number), "the card number in the path was logged")
    }
}
