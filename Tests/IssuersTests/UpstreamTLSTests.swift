import Foundation
import GatewayTestSupport
import Hummingbird
import HummingbirdTLS
import Issuers
import NIOCore
import NIOSSL
import ProvisioningCore
import Testing

/// An issuer behind a private CA that requires a client certificate (mutual TLS), made at test
/// time, and `UpstreamHTTP` configured from `issuers.<name>.tls`.
@Suite struct UpstreamTLSTests {
    /// The test CA, a client certificate it signed, and an HTTPS server on 127.0.0.1 that
    /// answers 200 only over a TLS session whose client presented a certificate from that CA.
    struct MutualTLSServer {
        let pki: TestPKI
        let client: TestPKI.Issued
        let url: URL
    }

    func withMutualTLSServer<T: Sendable>(_ body: (MutualTLSServer) async throws -> T) async throws -> T {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        let serverFiles = try pki.issue("server")
        let client = try pki.issue("client", commonName: "gateway-client")
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(serverFiles.certificateFile.path).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: serverFiles.keyFile.path, format: .pem)))
        // Without a certificate from the CA, no session.
        tls.certificateVerification = .noHostnameVerification
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(pki.caFile.path))

        let router = Router()
        router.get("ping") { _, _ in "pong" }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(router: router, server: try .tls(.http1(), tlsConfiguration: tls),
                              configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) })
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            defer { group.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            return try await body(MutualTLSServer(pki: pki, client: client, url: URL(string: "https://127.0.0.1:\(port)/ping")!))
        }
    }

    /// `UpstreamHTTP` from `issuers.bridge.tls` as written in a config file next to the PKI.
    func withClient<T: Sendable>(_ tls: UpstreamTLSConfig?, base: URL, _ body: (UpstreamHTTP) async throws -> T) async throws -> T {
        let loaded = try tls.map { config throws(ConfigError) in
            try UpstreamTLS.load(config, path: "issuers.bridge.tls", resolve: { base.appendingPathComponent($0) })
        }
        // What these tests check is trust and connection reuse, not timing: a handshake slowed by a
        // loaded machine (the test run starts PostgreSQL servers beside them) is no failure.
        return try await withUpstreamHTTP("bridge", requestMS: 30_000, tls: loaded, body)
    }

    /// Each call's deadline is as generous as the client's bounds: in the test run's start-up
    /// burst a task can wait 4-9 s for a pool thread, several times over, and the 10 s default
    /// had cut a handshake off (`could not connect to bridge in time`) in two CI runs.
    func get(_ http: UpstreamHTTP, _ url: URL) async throws -> UpstreamHTTP.Response {
        try await http.send(method: .GET, url: url, headers: [], body: nil, context: Fixtures.context(seconds: 60))
    }

    @Test func thePrivateCAAndAClientCertificateGet200() async throws {
        try await withMutualTLSServer { server in
            let config = UpstreamTLSConfig(caFile: "ca.pem", clientCertificate: "client.pem", clientKey: "client-key.pem")
            let response = try await withClient(config, base: server.pki.directory) { http in try await get(http, server.url) }
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == "pong")
        }
    }

    @Test func withoutTheClientCertificateTheCallFailsAsUnavailable() async throws {
        try await withMutualTLSServer { server in
            let error = try await withClient(UpstreamTLSConfig(caFile: "ca.pem"), base: server.pki.directory) { http in
                await gatewayError { try await get(http, server.url) }
            }
            let failure = try #require(error, "the server accepted a session without a client certificate")
            #expect(failure.code == .upstreamUnavailable, "\(failure)")
        }
    }

    @Test func withTheSystemRootsOnlyThePrivateCAIsUnknown() async throws {
        try await withMutualTLSServer { server in
            // A client certificate, but no ca_file: the server's certificate is checked against the system's roots.
            let withCertificate = UpstreamTLSConfig(clientCertificate: "client.pem", clientKey: "client-key.pem")
            for config in [withCertificate, nil] {
                let error = try await withClient(config, base: server.pki.directory) { http in
                    await gatewayError { try await get(http, server.url) }
                }
                let failure = try #require(error, "a certificate from an unknown CA was accepted")
                #expect(failure.code == .upstreamUnavailable, "\(failure)")
                // The reason in BoringSSL's words, without the library's printout (its source
                // paths and internals reached every tenant; the upstream audit).
                #expect(failure.detail.contains("CERTIFICATE_VERIFY_FAILED"), "\(failure.detail)")
                #expect(!failure.detail.contains("/") && !failure.detail.contains(".cc") && !failure.detail.contains("Error: "), "\(failure.detail)")
            }
        }
    }

    /// A certificate the issuer's CA signed for another host is refused, and said as such (it
    /// had been "could not connect").
    @Test func aCertificateForAnotherHostIsSaidToBeOne() async throws {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        let tls = try Self.serverTLS(try pki.issue("server", commonName: "issuer.example", onlyFor: "issuer.example"))
        try await ScriptedUpstream.with(tls: tls) { server in
            let url = URL(string: "https://127.0.0.1:\(server.port)/v1/ping")!
            let error = try await withClient(UpstreamTLSConfig(caFile: "ca.pem"), base: pki.directory) { http in
                await gatewayError { try await get(http, url) }
            }
            let failure = try #require(error, "a certificate for another host was accepted")
            #expect(failure.code == .upstreamUnavailable && failure.condition == .connectFailed)
            #expect(failure.detail.contains("the certificate does not name the issuer's host"), "\(failure.detail)")
            #expect(server.seen.isEmpty, "nothing was sent")
        }
    }

    /// A server's TLS from a leaf the test CA issued.
    static func serverTLS(_ files: TestPKI.Issued) throws -> TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(files.certificateFile.path).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: files.keyFile.path, format: .pem)))
    }

    /// Over TLS the connection is kept too: several calls, one handshake, whether the URL names
    /// the host (SNI and the certificate's DNS name) or its address (the certificate's IP entry).
    @Test(arguments: ["localhost", "127.0.0.1"])
    func callsOverTLSShareOneConnection(host: String) async throws {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        let tls = try Self.serverTLS(try pki.issue("server"))
        try await ScriptedUpstream.with(tls: tls) { server in
            let url = URL(string: "https://\(host):\(server.port)/v1/ping")!
            let statuses = try await withClient(UpstreamTLSConfig(caFile: "ca.pem"), base: pki.directory) { http in
                var statuses: [Int] = []
                for _ in 0..<3 { statuses.append(try await get(http, url).status) }
                return statuses
            }
            #expect(statuses == [200, 200, 200])
            #expect(server.accepted == 1, "one TLS session for the three calls")
            #expect(server.seen.first?.head.headers["Host"] == ["\(host):\(server.port)"])
        }
    }

    // MARK: Loading the files

    func problems(_ config: UpstreamTLSConfig, base: URL) -> [ConfigProblem] {
        do {
            _ = try UpstreamTLS.load(config, path: "issuers.bridge.tls", resolve: { base.appendingPathComponent($0) })
            return []
        } catch {
            return error.problems
        }
    }

    @Test func unreadableFilesAreProblemsNamingTheirKeys() throws {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        let found = problems(UpstreamTLSConfig(caFile: "missing-ca.pem", clientCertificate: "missing.pem", clientKey: "missing-key.pem"),
                             base: pki.directory)
        #expect(found.map(\.path) == ["issuers.bridge.tls.ca_file", "issuers.bridge.tls.client_certificate", "issuers.bridge.tls.client_key"])
        #expect(found.first?.description == "issuers.bridge.tls.ca_file: cannot read \(pki.directory.appendingPathComponent("missing-ca.pem").path) (no such file)")
    }

    @Test func filesThatAreNotPEMAreProblemsAndTheirContentsAreNotRepeated() throws {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        let secret = "PRIVATE-MATERIAL-\(UUID().uuidString)"
        try secret.write(to: pki.directory.appendingPathComponent("garbage.pem"), atomically: true, encoding: .utf8)
        let found = problems(UpstreamTLSConfig(caFile: "garbage.pem", clientCertificate: "garbage.pem", clientKey: "garbage.pem"),
                             base: pki.directory)
        #expect(found.map(\.path) == ["issuers.bridge.tls.ca_file", "issuers.bridge.tls.client_certificate", "issuers.bridge.tls.client_key"])
        for problem in found { #expect(!problem.description.contains(secret)) }
    }

    @Test func aKeyThatIsNotTheCertificatesIsAProblem() throws {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        _ = try pki.issue("client")
        _ = try pki.issue("other")
        let found = problems(UpstreamTLSConfig(caFile: "ca.pem", clientCertificate: "client.pem", clientKey: "other-key.pem"), base: pki.directory)
        #expect(found.map(\.path) == ["issuers.bridge.tls"], "\(found)")
        #expect(problems(UpstreamTLSConfig(caFile: "ca.pem", clientCertificate: "client.pem", clientKey: "client-key.pem"), base: pki.directory).isEmpty)
    }
}

/// What connectors report as their endpoint (metrics labels, health, audit) carries no user
/// info, query or fragment.
@Suite struct ConnectorEndpointLabelTests {
    @Test func aBaseURLWithUserInfoIsNamedWithoutIt() async throws {
        try await withUpstreamHTTP("bridge") { http in
            let url = URL(string: "https://user:secret@issuer.example.com:8443/v0?key=k")!
            let connectors: [any IssuerConnector] = [
                BridgeConnector(issuer: "bridge", baseURL: url, apiKey: Sensitive("k"), encoding: .hex, http: http),
                TMPConnector(issuer: "tmp", baseURL: url, token: Sensitive("k"), http: http),
                CrossmintConnector(issuer: "crossmint", baseURL: url, apiKey: Sensitive("k"), http: http),
            ]
            for connector in connectors { #expect(connector.endpoint == "https://issuer.example.com:8443/v0") }
        }
    }
}
