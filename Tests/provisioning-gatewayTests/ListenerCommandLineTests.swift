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
    /// `store`: the file's `store:` section (a SQLite file in `directory` by default).
    static func sandboxConfig(directory: URL, host: String = "127.0.0.1", serverLines: [String] = [], store: String? = nil) throws -> URL {
        var yaml = try String(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(CommandLineTests.packageRoot.path)/Config/sandbox/")
        let hostLine = "  host: 127.0.0.1\n"
        #expect(yaml.contains(hostLine), "Config/gateway.yaml no longer has the host line this test edits")
        yaml = yaml.replacingOccurrences(of: hostLine, with: (["  host: \(host)"] + serverLines.map { "  \($0)" }).joined(separator: "\n") + "\n")
        yaml += store ?? "\nstore:\n  sqlite:\n    path: \(directory.path)/gateway.sqlite\n"
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

    /// `--port 70000` had listened on 4464 (the number wrapped) and `--port -1` failed deep in
    /// the listener: a port given on the command line is checked as the file's is.
    @Test(arguments: ["70000", "-1"])
    func aPortOutOfRangeOnTheCommandLineIsRefused(port: String) async throws {
        let run = try await CommandLineTests.run(["--config", "Config/gateway.yaml", "--port=\(port)"])
        #expect(run.status != 0)
        #expect(run.stderr.contains("--port must be 0 to 65535 (0 picks a free one), not \(port)"), "\(run.stderr)")
        #expect(!run.stdout.contains("listening on"))
    }

    @Test func allowPlaintextLetsANonLoopbackHostStart() async throws {
        let directory = TestDirectories.root.appendingPathComponent("plaintext-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // Not the sandbox (its demo keys are public, so it listens on loopback only): a minimal
        // production file whose one secret comes from the environment the executable inherits.
        setenv("GATEWAY_TEST_PLAINTEXT_VAULT_KEY", Data((0..<32).map { UInt8($0 + 7) }).base64EncodedString(), 1)
        let config = try CommandLineTests.writeConfig("""
            server: { host: 0.0.0.0, allow_plaintext: true }
            clients:
              - { id: acme, api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d, programs: [acme] }
            vault: { key: "env:GATEWAY_TEST_PLAINTEXT_VAULT_KEY" }
            store: { sqlite: { path: \(directory.path)/gateway.sqlite } }
            """)
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

    /// The cap is only worth something if the process may hold that many sockets: the gateway
    /// raises its soft open-file limit towards max_connections + 256 (as far as the hard limit lets it).
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/self/limits"), "reads /proc (Linux)"))
    func theOpenFileLimitIsRaisedForMaxConnections() async throws {
        @Sendable func limits(_ pid: pid_t) throws -> (soft: UInt64, hard: UInt64?) {
            let text = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Max open files") })
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return (UInt64(fields[3]) ?? .max, UInt64(fields[4]))
        }
        let directory = TestDirectories.root.appendingPathComponent("nofile-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try Self.sandboxConfig(directory: directory, serverLines: ["max_connections: 3000"])
        defer { try? FileManager.default.removeItem(at: config) }
        // Started with the common soft limit of 1024 (the shell execs the gateway: same pid).
        let (found, _) = try await Command.withRunning(
            "/bin/sh", ["-c", "ulimit -Sn 1024 && exec \"$0\" \"$@\"", try CommandLineTests.executable().path,
                        "--config", config.path, "--port", "0"],
            workingDirectory: CommandLineTests.packageRoot.path
        ) { running in try limits(running.pid) }
        let wanted: UInt64 = 3_000 + 256
        #expect(found.soft >= min(wanted, found.hard ?? .max), "soft \(found.soft), hard \(String(describing: found.hard))")
    }

    @Test func withTLSTheBannerSaysHTTPSAndTheGatewayServesIt() async throws {
        let pki = try TestPKI()
        let issued = try pki.issue("server")
        let directory = TestDirectories.root.appendingPathComponent("https-\(UUID().uuidString)")
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
        let directory = TestDirectories.root.appendingPathComponent("badkey-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        // The certificate where the key should be.
        let config = try Self.sandboxConfig(directory: directory, serverLines: [
            "tls: { certificate: \(issued.certificateFile.path), private_key: \(issued.certificateFile.path) }",
        ])
        defer { try? FileManager.default.removeItem(at: config) }
        let run = try await CommandLineTests.run(["--config", config.path, "--port", "0"])
        #expect(run.status == 2)
        #expect(run.stderr.contains("server.tls.private_key: \(issued.certificateFile.path) holds no unencrypted PEM private key"), "\(run.stderr)")
        #expect(!run.stderr.contains("-----BEGIN"))
        #expect(!run.stderr.contains("Fatal error") && !run.stderr.contains("Stack dump"))
        #expect(!run.stdout.contains("listening on"))
    }
}
