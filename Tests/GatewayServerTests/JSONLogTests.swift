import Foundation
import GatewayServer
import GatewayTestSupport
import Logging
import Testing

/// `JSONLogHandler`: one JSON object per line, its metadata as keys, escaping done by the encoder.
struct JSONLogTests {
    static func capturing() -> (Locked<[String]>, Logger) {
        let lines = Locked<[String]>([])
        let logger = Logger(label: "gateway-tests") { label in
            JSONLogHandler(label: label) { line in lines.withLock { $0.append(line) } }
        }
        return (lines, logger)
    }

    static func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
    }

    @Test func anEventIsOneParseableLineWithItsMetadataAsKeys() throws {
        let (lines, logger) = Self.capturing()
        let message = "first\nsecond\r\t\"quoted\" \u{1B}[31m \u{2028}\u{85}end"
        logger.notice("\(message)", metadata: [
            "request_id": "req_1\nforged", "provisioning_id": "prv_1", "message": "collides",
            "attempt": .stringConvertible(2), "endpoint": .dictionary(["issuer": "bridge"]),
        ])
        let captured = lines.withLock { $0 }
        #expect(captured.count == 1)
        let line = try #require(captured.first)
        // One line: a single line end, at the end, whatever the message and metadata held.
        #expect(line.hasSuffix("\n") && line.dropLast().unicodeScalars.allSatisfy {
            $0.value >= 0x20 && $0.value != 0x7F && !(0x80...0x9F).contains($0.value) && $0 != "\u{2028}" && $0 != "\u{2029}"
        }, "\(line)")
        let object = try Self.object(line)
        #expect(object["message"] as? String == message)
        #expect(object["level"] as? String == "notice")
        #expect(object["label"] as? String == "gateway-tests")
        #expect(object["request_id"] as? String == "req_1\nforged")
        #expect(object["provisioning_id"] as? String == "prv_1")
        #expect(object["metadata.message"] as? String == "collides")
        #expect(object["attempt"] as? Int == 2)
        #expect((object["endpoint"] as? [String: Any])?["issuer"] as? String == "bridge")
        let timestamp = try #require(object["timestamp"] as? String)
        #expect(try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(timestamp) <= Date())
    }

    @Test func everyLineOfARequestCarriesItsRequestID() async throws {
        let (lines, logger) = Self.capturing()
        let served = Locked<[String]>([])
        try await GatewayHarness.run(logger: logger) { client, _ in
            let before = lines.withLock { $0.count }
            let response = try await RequestLogTests.provision(client, card: "card_bridge_demo", requestID: "req_json_1")
            #expect(response.status == .ok)
            served.withLock { $0 = lines.withLock { Array($0.dropFirst(before)) } }
        }
        let captured = served.withLock { $0 }
        #expect(captured.contains { $0.contains("apple_pay succeeded") }, "\(captured)")
        for line in captured {
            let object = try Self.object(line)
            #expect(object["request_id"] as? String == "req_json_1", "\(line)")
            #expect(!line.contains("4111111111111111"))
        }
        // Durations and statuses are numbers a pipeline can compare.
        let access = try Self.object(try #require(captured.first { $0.contains(#""message":"request""#) }, "\(captured)"))
        #expect(access["status"] as? Int == 200 && access["latency_ms"] is Int, "\(access)")
        let success = try Self.object(try #require(captured.first { $0.contains("apple_pay succeeded") }))
        #expect(success["latency_ms"] is Int, "\(success)")
    }

    /// Number keys are chosen by name: an id of digits stays a string, and a number key whose value
    /// is not a whole number keeps its text.
    @Test func numbersAreChosenByKeyNotByLook() throws {
        let (lines, logger) = Self.capturing()
        logger.notice("event", metadata: [
            "request_id": "12345", "card_id": "0042", "wait_ms": "250", "count": .stringConvertible(3),
            "status": "not-a-number", "upstream_status": "99999999999999999999",
        ])
        let object = try Self.object(try #require(lines.withLock { $0.first }))
        #expect(object["request_id"] as? String == "12345" && object["card_id"] as? String == "0042")
        #expect(object["wait_ms"] as? Int == 250 && object["count"] as? Int == 3)
        #expect(object["status"] as? String == "not-a-number")
        #expect(object["upstream_status"] as? String == "99999999999999999999")
    }
}
