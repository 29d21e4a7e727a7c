import AsyncHTTPClient
import Foundation
import NIOFoundationCompat
import GatewayTestSupport
import Testing

/// The real executable, as an ops person starts it.
@Suite struct CommandLineTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `swift test` builds the executable next to the test bundle.
    static func executable() throws -> URL {
        let candidates = [Bundle.main.bundleURL, URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()]
            .map { $0.deletingLastPathComponent().appendingPathComponent("provisioning-gateway") }
        return try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) },
                            "provisioning-gateway was not built next to the tests")
    }

    /// Runs the executable to its end from the package root.
    static func run(_ arguments: [String], environment: [String: String] = [:], standardInput: String? = nil) async throws -> Command.Result {
        try await Command.run(try executable().path, arguments, workingDirectory: packageRoot.path, environment: environment,
                              standardInput: standardInput)
    }

    static func writeConfig(_ yaml: String) throws -> URL {
        let url = TestDirectories.root.appendingPathComponent("gateway-\(UUID().uuidString).yaml")
        try yaml.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    static let productionYAML = """
        clients:
          - { id: acme, api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d, programs: [acme] }
        issuers:
          bridge:
            kind: bridge
            endpoints: [ { url: "https://api.bridge.xyz/v0" } ]
            credentials: { api_key: "env:GATEWAY_TEST_BRIDGE_KEY_UNSET" }
        vault: { key: "env:GATEWAY_TEST_VAULT_KEY_UNSET" }
        """

    @Test func aBadConfigStopsStartUpWithTheKeyPath() async throws {
        let file = try Self.writeConfig(Self.productionYAML.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "::nope"))
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await Self.run(["--config", file.path, "--port", "0"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("issuers.bridge.endpoints[0].url: not a URL"))
        #expect(!run.stderr.contains("Fatal error") && !run.stderr.contains("Stack dump"))
        #expect(!run.stdout.contains("listening on"))
    }

    @Test func aMissingSecretStopsStartUpNamingTheVariable() async throws {
        let file = try Self.writeConfig(Self.productionYAML)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await Self.run(["--config", file.path, "--port", "0"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("issuers.bridge.credentials.api_key: environment variable GATEWAY_TEST_BRIDGE_KEY_UNSET is not set"))
    }

    @Test func aMissingFileIsNamed() async throws {
        let run = try await Self.run(["--config", "/nonexistent/gateway.yaml"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("/nonexistent/gateway.yaml"))
    }

    @Test func theSandboxPrintsWhereItListensFirstAndServes() async throws {
        let directory = TestDirectories.root.appendingPathComponent("banner-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The sandbox config as shipped, but its SQLite file out of the working tree.
        var yaml = try String(contentsOf: Self.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(CommandLineTests.packageRoot.path)/Config/sandbox/")
        yaml += "\nstore:\n  sqlite:\n    path: \(directory.path)/gateway.sqlite\n"
        let config = try Self.writeConfig(yaml)
        defer { try? FileManager.default.removeItem(at: config) }

        let (firstLine, status) = try await Command.withRunning(
            try Self.executable().path, ["--config", config.path, "--port", "0"], workingDirectory: Self.packageRoot.path
        ) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "\(base)/healthz"), timeout: .seconds(10))
            #expect(response.status == .ok)
            #expect(String(buffer: try await response.body.collect(upTo: 1 << 16)).contains("ok"))
            return running.firstLine
        }
        #expect(firstLine.hasPrefix("provisioning-gateway listening on http://127.0.0.1:"))
        // SIGTERM is a graceful stop: a clean exit.
        #expect(status == 0)
    }
}
