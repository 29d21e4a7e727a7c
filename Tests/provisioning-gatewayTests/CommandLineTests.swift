import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
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

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    static func run(_ arguments: [String], environment: [String: String]? = nil) throws -> Run {
        let process = Process()
        process.executableURL = try executable()
        process.arguments = arguments
        process.currentDirectoryURL = packageRoot
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                   stderr: String(decoding: stderr, as: UTF8.self))
    }

    static func writeConfig(_ yaml: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(UUID().uuidString).yaml")
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
        """

    @Test func aBadConfigStopsStartUpWithTheKeyPath() throws {
        let file = try Self.writeConfig(Self.productionYAML.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "::nope"))
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try Self.run(["--config", file.path, "--port", "0"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("issuers.bridge.endpoints[0].url: not a URL"))
        #expect(!run.stderr.contains("Fatal error") && !run.stderr.contains("Stack dump"))
        #expect(!run.stdout.contains("listening on"))
    }

    @Test func aMissingSecretStopsStartUpNamingTheVariable() throws {
        let file = try Self.writeConfig(Self.productionYAML)
        defer { try? FileManager.default.removeItem(at: file) }
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "GATEWAY_TEST_BRIDGE_KEY_UNSET")
        let run = try Self.run(["--config", file.path, "--port", "0"], environment: environment)
        #expect(run.status == 2)
        #expect(run.stderr.contains("issuers.bridge.credentials.api_key: environment variable GATEWAY_TEST_BRIDGE_KEY_UNSET is not set"))
    }

    @Test func aMissingFileIsNamed() throws {
        let run = try Self.run(["--config", "/nonexistent/gateway.yaml"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("/nonexistent/gateway.yaml"))
    }

    @Test func theSandboxPrintsWhereItListensFirstAndServes() async throws {
        let process = Process()
        process.executableURL = try Self.executable()
        process.arguments = ["--port", "0"]
        process.currentDirectoryURL = Self.packageRoot
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        // The first line names the address; read until it is complete.
        var text = ""
        let handle = out.fileHandleForReading
        while !text.contains("\n") {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        let firstLine = try #require(text.split(separator: "\n").first.map(String.init))
        #expect(firstLine.hasPrefix("provisioning-gateway listening on http://127.0.0.1:"))
        let base = try #require(firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))

        let (body, response) = try await URLSession.shared.data(from: URL(string: "\(base)/healthz")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: body, as: UTF8.self).contains("ok"))

        process.terminate()  // SIGTERM: a graceful stop
        process.waitUntilExit()
        #expect(!process.isRunning)
    }
}
