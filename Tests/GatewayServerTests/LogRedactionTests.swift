import Foundation
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
        var secrets = (request["certificates"] as! [String]).map { String($0.prefix(24)) }
        secrets += [request["nonce"] as! String, request["nonce_signature"] as! String, GatewayHarness.demoKey]
        secrets += [Data(base64Encoded: request["nonce"] as! String)!.map { String(format: "%02x", $0) }.joined()]
        secrets += payloads.withLock { $0.map { String($0.prefix(24)) } }
        #expect(secrets.count > 8)
        for secret in secrets {
            #expect(!text.contains(secret), "a log line holds a value it must not")
        }
    }
}
