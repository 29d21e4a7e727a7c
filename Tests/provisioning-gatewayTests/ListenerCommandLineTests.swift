import AsyncHTTPClient
import Foundation
import GatewayTestSupport
import NIOCore
import NIOFoundationCompat
import NIOPosix
import NIOSSL
import Testing

/// Where and how the executable listens: plaintext only on loopback unless the file says a proxy
/// terminates TLS, and HTTPS (and an `https://` banner) with `server.tls`.
@Suite struct ListenerCommandLineTests {
    /// The sandbox config as shipped, its SQLite file in `directory`, `serverLines` added under
    /// `server:` (after its `host:` line, which `host` replaces).
    static func sandboxConfig(directory: URL, host: String = "127.0.0.1", serverLines: [String] = []) throws -> URL {
        var yaml = try String(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(CommandLineTests.packageRoot.path)/Config/sandbox/")
        let hostLine = "  host: 127.0.0.1\n"
        #expect(yaml.contains(hostLine), "Config/gateway.yaml no longer has the host line this test edits")
        yaml = yaml.replacingOccurrences(of: hostLine, with: (["  host: \(host)"] + serverLines.map { "  \($0)" }).joined(separator: "\n") + "\n")
        yaml += "\nstore:\n  sqlite:\n    path: \(directory.path)/gateway.sqlite\n"
        return try CommandLineTests.writeConfig(yaml)
    }

    @Test func aNonLoopbackHostWithoutTLSStopsStartUpNamingServerTLS() async throws {
        let file = try CommandLineTests.writeConfig("server:\n  host: 0.0.0.0\n" + CommandLineTests.productionYAML)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await CommandLineTests.run(["--config", file.path, "--port", "0"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("server.tls: required: 0.0.0.0 is not a loopback address"), "\(run.stderr)")
        #expect(!run.stdout.contains("listening on"))
    }

    @Test func allowPlaintextLetsANonLoopbackHostStart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("plaintext-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Self.sandboxConfig(directory: directory, host: "0.0.0.0", serverLines: ["allow_plaintext: true"])
        defer { try? FileManager.default.removeItem(at: config) }

        let (firstLine, status) = try await Command.withRunning(
            try CommandLineTests.executable().path, ["--config", config.path, "--port", "0"], workingDirectory: CommandLineTests.packageRoot.path
        ) { running in
            let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
            let port = try #require(base.split(separator: ":").last.flatMap { Int($0) })
            let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/healthz"), timeout: .seconds(10))
            #expect(response.status == .ok)
            return running.firstLine
        }
        #expect(firstLine.hasPrefix("provisioning-gateway listening on http://0.0.0.0:"))
        #expect(status == 0)
    }

    @Test func withTLSTheBannerSaysHTTPSAndTheGatewayServesIt() async throws {
        let pki = try TestPKI()
        let issued = try pki.issue("server")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("https-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Self.sandboxConfig(directory: directory, serverLines: [
            "tls: { certificate: \(issued.certificateFile.path), private_key: \(issued.keyFile.path) }",
        ])
        defer { try? FileManager.default.removeItem(at: config) }

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(pki.caFile.path)
        let trusting = tls
        let (firstLine, status) = try await Command.withRunning(
            try CommandLineTests.executable().path, ["--config", config.path, "--port", "0"],
            workingDirectory: CommandLineTests.packageRoot.path
        ) { running in
            // Shut down (its connection closed) before the gateway is stopped, which would
            // otherwise wait for the pooled TLS connection's close_notify.
            let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: .init(tlsConfiguration: trusting))
            do {
                let base = try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("https://") }.map(String.init),
                                        "no https:// address in \(running.firstLine)")
                let response = try await client.execute(HTTPClientRequest(url: "\(base)/healthz"), timeout: .seconds(10))
                #expect(response.status == .ok)
            } catch {
                try? await client.shutdown()
                throw error
            }
            try await client.shutdown()
            return running.firstLine
        }
        #expect(firstLine.hasPrefix("provisioning-gateway listening on https://127.0.0.1:"))
        #expect(status == 0)
    }

    @Test func anUnusableTLSKeyStopsStartUpNamingTheKey() async throws {
        let pki = try TestPKI()
        let issued = try pki.issue("server")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("badkey-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The certificate where the key should be.
        let config = try Self.sandboxConfig(directory: directory, serverLines: [
            "tls: { certificate: \(issued.certificateFile.path), private_key: \(issued.certificateFile.path) }",
        ])
        defer { try? FileManager.default.removeItem(at: config) }
        let run = try await CommandLineTests.run(["--config", config.path, "--port", "0"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("server.tls.private_key: not a PEM private key (\(issued.certificateFile.path))"), "\(run.stderr)")
        #expect(!run.stderr.contains("-----BEGIN"))
        #expect(!run.stderr.contains("Fatal error") && !run.stderr.contains("Stack dump"))
        #expect(!run.stdout.contains("listening on"))
    }
}
