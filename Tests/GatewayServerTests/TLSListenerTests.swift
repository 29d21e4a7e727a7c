import AsyncHTTPClient
import Foundation
import Gateway
import GatewayServer
import GatewayTestSupport
import NIOCore
import NIOPosix
import NIOSSL
import ProvisioningCore
import Testing

/// `server.tls`: the listener speaks HTTPS with the configured certificate, and unusable PEM
/// files stop start-up with the key path. Certificates are made at test time (`TestPKI`).
// Three minutes: a test's time includes its wait for one of the gateway slots
// (`GatewaySlots`), which a loaded test run's other gateways hold; one minute had been exceeded
// by that wait alone in a CI run. The limit is there to end a hang, not to time a test.
@Suite(.timeLimit(.minutes(3))) struct TLSListenerTests {
    /// The sandbox config serving HTTPS with `server.pem`/`server-key.pem`, named relative to the
    /// config file's directory (the PKI's), as ops would write them.
    static func tlsConfig(_ pki: TestPKI, certificate: String = "server.pem", key: String = "server-key.pem") throws -> GatewayConfig {
        var config = try LiveListener.config()
        // The sandbox's trust anchor file is named relative to the repository's Config/: it stays there.
        config.trust.anchors = config.trust.anchors.map { $0.contains("/") ? config.resolvePath($0).path : $0 }
        config.baseDirectory = pki.directory
        config.server.tls = ServerTLSConfig(certificate: certificate, privateKey: key)
        return config
    }

    static func client(trusting caFile: URL?) -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.trustRoots = .file(caFile.path) }
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: .init(tlsConfiguration: tls))
    }

    @Test func httpsWithTheGatewayCertificateTrustedServesHealthz() async throws {
        let pki = try TestPKI()
        _ = try pki.issue("server")
        try await LiveListener.run(try Self.tlsConfig(pki)) { port in
            let client = Self.client(trusting: pki.caFile)
            do {
                let response = try await client.execute(HTTPClientRequest(url: "https://127.0.0.1:\(port)/healthz"), timeout: .seconds(5))
                #expect(response.status == .ok)
                #expect(String(buffer: try await response.body.collect(upTo: 1 << 16)).contains("ok"))
            } catch {
                Issue.record("HTTPS /healthz failed: \(error)")
            }
            try await client.shutdown()
        }
    }

    @Test func plainHTTPToTheTLSPortIsNotServed() async throws {
        let pki = try TestPKI()
        _ = try pki.issue("server")
        try await LiveListener.run(try Self.tlsConfig(pki)) { port in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send(ListenerLimitsTests.healthz)
            #expect(await connection.eventually { !$0.isOpen }, "a plaintext request to the TLS port left the connection open")
            #expect(connection.count("HTTP/1.1") == 0, "a plaintext request to the TLS port was answered in HTTP")
        }
    }

    @Test func aClientThatDoesNotTrustTheCertificateIsRefused() async throws {
        let pki = try TestPKI()
        _ = try pki.issue("server")
        try await LiveListener.run(try Self.tlsConfig(pki)) { port in
            // The system's roots only: the test CA is not among them.
            let client = Self.client(trusting: nil)
            // The client retries a failed handshake until the request's deadline, then reports it.
            await #expect(throws: NIOSSLError.self) {
                _ = try await client.execute(HTTPClientRequest(url: "https://127.0.0.1:\(port)/healthz"), timeout: .seconds(1))
            }
            try await client.shutdown()
        }
    }

    /// A fresh PKI with the server's certificate, and the TLS config on it with a 300 ms read timeout.
    static func slowClientSetUp() throws -> (pki: TestPKI, config: GatewayConfig) {
        let pki = try TestPKI()
        _ = try pki.issue("server")
        var config = try tlsConfig(pki)
        config.server.readTimeoutMS = 300
        return (pki, config)
    }

    @Test func aSlowDripHandshakeIsCutOffByTheReadTimeout() async throws {
        let (_, config) = try Self.slowClientSetUp()
        try await LiveListener.run(config) { port in
            // The start of a ClientHello record (handshake, TLS 1.0 record version, 512 bytes
            // long), a byte every 60 ms: the read timeout runs in front of TLS, from the first byte.
            let record: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00] + [UInt8](repeating: 0, count: 512)
            let drip = try await RawConnection.open(port: port)
            defer { drip.close() }
            var sent = 0
            for byte in record {
                guard drip.isOpen, (try? await drip.send(bytes: [byte])) != nil else { break }
                sent += 1
                try await Task.sleep(for: .milliseconds(60))
                if sent == 40 { break }
            }
            #expect(await drip.eventually { !$0.isOpen }, "a slow-drip TLS handshake kept its connection")
            #expect(sent < 40, "40 bytes, one every 60 ms, went in before the server cut the connection")
        }
    }

    /// Over TLS too, a body that does not arrive within the read timeout is answered 408: the
    /// front handler that keeps the time sits before TLS, and its word reaches the handler after
    /// the HTTP codec through the TLS handler.
    @Test func aBodyThatDoesNotArriveInTimeOverTLSIsAnswered408() async throws {
        let (pki, config) = try Self.slowClientSetUp()
        try await LiveListener.run(config) { port in
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(pki.caFile.path)
            let connection = try await RawConnection.open(port: port, tls: try NIOSSLContext(configuration: tls))
            defer { connection.close() }
            try await connection.send("PUT /v1/cards/card_slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(GatewayHarness.demoKey)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"issuer\"")
            #expect(await connection.eventually { !$0.isOpen }, "the connection was not closed")
            #expect(connection.text.hasPrefix("HTTP/1.1 408 "), "\(connection.text)")
            #expect(connection.text.contains(#""code":"request_timeout""#), "\(connection.text)")
            #expect(connection.count("HTTP/1.1") == 1, "\(connection.text)")
        }
    }

    /// Each unusable file is a `ConfigError` naming its key, and the message never carries what
    /// is in a file (keys above all).
    /// A private key other users of the host can read or change is warned about (`config check`,
    /// `serve`'s start), naming the key's setting and mode, never its contents.
    @Test func aKeyFileOthersCanReadIsWarnedAbout() throws {
        let pki = try TestPKI()
        _ = try pki.issue("server")
        let config = try Self.tlsConfig(pki)
        let key = pki.directory.appendingPathComponent("server-key.pem").path
        for (mode, expected) in [(0o600, nil), (0o640, "can be read by its group or others (mode 640)"),
                                 (0o644, "can be read by its group or others (mode 644)"), (0o666, "can be changed by its group or others")] {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: key)
            let warnings = KeyFilePermissions.warnings(config: config)
            if let expected {
                #expect(warnings.count == 1 && warnings[0].hasPrefix("server.tls.private_key: \(key)") && warnings[0].contains(expected),
                        "\(warnings)")
                #expect(!warnings.joined().contains("PRIVATE KEY"))
            } else {
                #expect(warnings.isEmpty, "\(warnings)")
            }
        }
    }

    @Test(arguments: [
        ("missing key file", "server.pem", "nowhere/key.pem", "server.tls.private_key: cannot read"),
        ("certificate as key", "server.pem", "server.pem", "server.tls.private_key: … holds no unencrypted PEM private key"),
        ("another certificate's key", "server.pem", "other-key.pem", "server.tls.private_key: does not match"),
        ("missing certificate file", "nowhere/server.pem", "server-key.pem", "server.tls.certificate: cannot read"),
        ("key as certificate", "server-key.pem", "server-key.pem", "server.tls.certificate: … holds no PEM certificate"),
    ])
    func anUnusableFileIsAConfigErrorNamingItsKey(_ what: String, certificate: String, key: String, expected: String) async throws {
        let pki = try TestPKI()
        _ = try pki.issue("server")
        _ = try pki.issue("other")
        let config = try Self.tlsConfig(pki, certificate: certificate, key: key)
        do {
            _ = try await LiveListener.build(config)
            Issue.record("\(what): the application was built")
        } catch let error as ConfigError {
            // `…` stands for the file's path.
            let parts = expected.components(separatedBy: " … ")
            #expect(error.problems.map(\.description).contains { $0.hasPrefix(parts[0]) && (parts.count == 1 || $0.hasSuffix(parts[1])) }, "\(what): \(error)")
            #expect(error.description.contains(pki.directory.path), "\(what): the file is not named: \(error)")
            #expect(!error.description.contains("-----BEGIN") && !error.description.contains("PRIVATE KEY"), "\(what): \(error)")
        } catch {
            Issue.record("\(what): not a ConfigError: \(error)")
        }
    }
}
