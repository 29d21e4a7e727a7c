import AsyncHTTPClient
import Foundation
import GatewayTestSupport
import NIOCore
import NIOFoundationCompat
import Testing

/// `serve --log-format json` and `log.format`: the real executable's standard error, one JSON
/// object per line.
@Suite struct LogFormatCommandLineTests {
    /// The sandbox config as shipped, its SQLite file in `directory`, plus `extra` YAML.
    static func sandboxConfig(in directory: URL, extra: String = "") throws -> URL {
        var yaml = try String(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(CommandLineTests.packageRoot.path)/Config/sandbox/")
        yaml += "\nstore:\n  sqlite:\n    path: \(directory.path)/gateway.sqlite\n" + extra
        return try CommandLineTests.writeConfig(yaml)
    }

    /// Serves with `arguments`, sends one Apple Pay provisioning with `requestID`, stops the
    /// process with SIGTERM and returns what it wrote on standard error, line by line.
    static func logLines(_ arguments: [String], extraYAML: String = "", requestID: String) async throws -> [String] {
        let directory = TestDirectories.root.appendingPathComponent("logformat-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try sandboxConfig(in: directory, extra: extraYAML)
        defer { try? FileManager.default.removeItem(at: config) }
        let logFile = directory.appendingPathComponent("stderr.log")
        // The executable's standard error into a file (exec: SIGTERM reaches the gateway itself).
        let script = #"exec "$0" "$@" 2>"# + "'\(logFile.path)'"
        let body = try Data(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json"))
        let (_, status) = try await Command.withRunning(
            "/bin/sh", ["-c", script, try CommandLineTests.executable().path, "--config", config.path, "--port", "0"] + arguments,
            workingDirectory: CommandLineTests.packageRoot.path
        ) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            var request = HTTPClientRequest(url: "\(base)/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer sk_sandbox_demo")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "X-Request-Id", value: requestID)
            request.body = .bytes(ByteBuffer(data: body))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            #expect(response.status == .ok)
            _ = try await response.body.collect(upTo: 1 << 20)
        }
        #expect(status == 0)
        return try String(contentsOf: logFile, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    static func object(_ line: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    @Test func jsonLinesParseAndCarryTheRequestID() async throws {
        let lines = try await Self.logLines(["--log-format", "json"], requestID: "req_json_cli_1")
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try #require(Self.object(line), "not one JSON object: \(line)")
            for key in ["timestamp", "level", "label", "message"] {
                #expect(object[key] is String, "no \(key): \(line)")
            }
        }
        let succeeded = try #require(lines.compactMap(Self.object).first { $0["message"] as? String == "apple_pay succeeded" }, "\(lines)")
        #expect(succeeded["request_id"] as? String == "req_json_cli_1")
        #expect((succeeded["provisioning_id"] as? String)?.isEmpty == false)
        // The sandbox card's number never reaches the log.
        #expect(!lines.contains { $0.contains("4111111111111111") })
    }

    @Test func theFlagOverridesTheFilesFormat() async throws {
        let fromFile = try await Self.logLines([], extraYAML: "log:\n  format: json\n", requestID: "req_json_cli_2")
        #expect(!fromFile.isEmpty && fromFile.allSatisfy { Self.object($0) != nil }, "\(fromFile)")
        let overridden = try await Self.logLines(["--log-format", "text"], extraYAML: "log:\n  format: json\n", requestID: "req_json_cli_3")
        #expect(!overridden.isEmpty && overridden.allSatisfy { Self.object($0) == nil }, "\(overridden)")
        #expect(overridden.contains { $0.contains("request_id=req_json_cli_3") }, "\(overridden)")
    }
}
