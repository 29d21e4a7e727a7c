import Foundation
import GatewayStore
import GatewayTestSupport
import Logging
import ProvisioningCore
import Testing

/// sslmode and ca_file handling that needs no server.
@Suite struct PostgresSSLModeTests {
    static let logger = Logger(label: "postgres-tls-tests")

    @Test func withoutSSLModeLoopbackGoesPlainAndAnythingElseIsVerifiedInFull() {
        for host in ["127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"] {
            #expect(PostgresSSLMode.default(host: host) == .disable, "\(host)")
        }
        for host in ["db.example.com", "10.0.0.5", "postgres", "128.0.0.1", "localhost.example.com"] {
            #expect(PostgresSSLMode.default(host: host) == .verifyFull, "\(host)")
        }
    }

    @Test func theURLsSSLModeIsHonouredAndKeptOutOfTheDatabaseName() throws {
        let url = try PostgresURL(parsing: "postgres://gw:secret@db.example.com:6543/gateway?sslmode=require")
        #expect(url.sslMode == .require)
        #expect(url.sslModeExplicit)
        #expect(url.database == "gateway")
        #expect(url.host == "db.example.com")
        #expect(url.port == 6543)
        #expect(url.displayName == "postgres db.example.com:6543/gateway")
        #expect(!url.description.contains("secret"))
        var dumped = ""
        dump(url, to: &dumped)
        #expect(!dumped.contains("secret") && !String(reflecting: url).contains("secret"))
        #expect(try PostgresURL(parsing: "postgres://gw@127.0.0.1/gateway?sslmode=verify-full").sslMode == .verifyFull)
        #expect(try PostgresURL(parsing: "postgres://gw@db.example.com/gateway?sslmode=disable").sslMode == .disable)

        let implicit = try PostgresURL(parsing: "postgres://gw@db.example.com/gateway")
        #expect(implicit.sslMode == .verifyFull)
        #expect(!implicit.sslModeExplicit)
        #expect(try PostgresURL(parsing: "postgresql://gw@localhost:5433/gateway").sslMode == .disable)
        // An IPv6 literal: the address without its brackets, which the URL form puts back.
        let six = try PostgresURL(parsing: "postgres://gw@[::1]:65535/gateway")
        #expect(six.host == "::1" && six.port == 65535 && six.sslMode == .disable && six.displayName == "postgres [::1]:65535/gateway")
    }

    @Test(arguments: [
        "postgres://gw@db.example.com/gateway?sslmode=prefer",
        "postgres://gw@db.example.com/gateway?sslmode=verify-ca",
        "postgres://gw@db.example.com/gateway?sslmode=",
        "postgres://gw@db.example.com/gateway?sslmode=disable&sslmode=require",
        "postgres://gw@db.example.com/gateway?sslrootcert=/etc/ca.pem",
        "mysql://gw@db.example.com/gateway",
        "postgres://db.example.com/gateway",
        // Foundation reads any number as the port; 84986 had connected to 19450 (the CLI audit).
        "postgres://gw:pw@127.0.0.1:84986/gateway",
        "postgres://gw@127.0.0.1:0/gateway",
    ])
    func whatIsNotUnderstoodIsRefused(_ url: String) {
        #expect(throws: StoreError.self) { try PostgresURL(parsing: url) }
    }

    @Test func anUnreadableCAFileIsAClearErrorNamingTheKey() throws {
        let missing = TestDirectories.root.appendingPathComponent("no-such-\(UUID().uuidString)/ca.pem")
        let error = #expect(throws: StoreError.self) {
            try PostgresGatewayStore(url: "postgres://gw@db.example.com/gateway", caFile: missing, logger: Self.logger)
        }
        #expect(error?.reason.hasPrefix("store.postgres.ca_file: cannot read \(missing.path)") == true, "\(String(describing: error))")
    }

    @Test func aCAFileWithoutAPEMCertificateIsRefused() throws {
        let file = TestDirectories.root.appendingPathComponent("not-a-ca-\(UUID().uuidString).pem")
        try "not a certificate\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let error = #expect(throws: StoreError.self) {
            try PostgresGatewayStore(url: "postgres://gw@db.example.com/gateway", caFile: file, logger: Self.logger)
        }
        #expect(error?.reason == "store.postgres.ca_file: \(file.path) holds no PEM certificate", "\(String(describing: error))")
    }

    @Test func aCAFileOnlyGoesWithVerifyFull() throws {
        let pki = try TestPKI()
        for url in ["postgres://gw@db.example.com/gateway?sslmode=require", "postgres://gw@127.0.0.1/gateway"] {
            let error = #expect(throws: StoreError.self) {
                try PostgresGatewayStore(url: url, caFile: pki.caFile, logger: Self.logger)
            }
            #expect(error?.reason.contains("only used with sslmode=verify-full") == true, "\(String(describing: error))")
        }
        _ = try PostgresGatewayStore(url: "postgres://gw@127.0.0.1/gateway?sslmode=verify-full", caFile: pki.caFile, logger: Self.logger)
    }

    @Test func theBootstrapResolvesTheCAFileAgainstTheConfigDirectory() throws {
        let pki = try TestPKI()
        var config = StoreConfig()
        config.postgres = .init(url: "postgres://gw@db.example.com/gateway", caFile: "ca.pem")
        let opened = try StoreBootstrap.open(config, baseDirectory: pki.directory, environment: [:], logger: Self.logger)
        #expect(opened.name == "postgres db.example.com:5432/gateway")

        let elsewhere = TestDirectories.root.appendingPathComponent("no-config-\(UUID().uuidString)")
        let error = #expect(throws: StoreError.self) {
            try StoreBootstrap.open(config, baseDirectory: elsewhere, environment: [:], logger: Self.logger)
        }
        #expect(error?.reason.contains("store.postgres.ca_file: cannot read \(elsewhere.appendingPathComponent("ca.pem").path)") == true,
                "\(String(describing: error))")
    }
}

/// A throwaway PostgreSQL server with `ssl=on` and a certificate from a CA made at test time.
@Suite(.enabled(if: PostgresTestServer.isAvailable, Comment(rawValue: PostgresTestServer.skipMessage)), .serialized)
struct PostgresTLSTests {
    static let logger = Logger(label: "postgres-tls-tests")

    /// A TLS server whose pg_hba.conf refuses plaintext TCP, and the CA that signed its certificate.
    /// `onlyFor`: the server's certificate names that host alone (from the same CA), not loopback.
    func withTLSServer(onlyFor host: String? = nil, _ body: (PostgresTestServer, TestPKI) async throws -> Void) async throws {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        let issued = try pki.issue("server", onlyFor: host)
        try await PostgresTestServer.with(tls: .init(certificateFile: issued.certificateFile, keyFile: issued.keyFile, sslOnly: true)) { server in
            try await body(server, pki)
        }
    }

    func withRunning<T: Sendable>(_ store: PostgresGatewayStore, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { await store.run(); return nil }
            defer { group.cancelAll() }
            return try await body()
        }
    }

    @Test func verifyFullWithTheServersCAConnectsMigratesAndIsEncrypted() async throws {
        try await withTLSServer { server, pki in
            let store = try PostgresGatewayStore(url: server.url(sslMode: "verify-full"), caFile: pki.caFile, logger: Self.logger)
            try await withRunning(store) {
                try await store.migrate()
                #expect(try await store.sessionIsEncrypted())
                #expect(try await store.schemaVersions().contains("001_cards_audit_idempotency"))
                try await store.putCard(StoreConformance.card("over-tls"))
                #expect(try await store.card("over-tls") == StoreConformance.card("over-tls"))
            }
        }
    }

    /// The StoreError migrating `store` ends with, or nil when it migrates.
    func migrationError(_ store: PostgresGatewayStore) async throws -> StoreError? {
        try await withRunning(store) {
            do {
                try await store.migrate()
                return nil
            } catch let error as StoreError {
                return error
            }
        }
    }

    @Test func verifyFullWithAnotherCAIsAClearErrorNamingTheStore() async throws {
        try await withTLSServer { server, _ in
            let stranger = try TestPKI(name: "Some Other CA")
            defer { try? FileManager.default.removeItem(at: stranger.directory) }
            let store = try PostgresGatewayStore(url: server.url(sslMode: "verify-full"), caFile: stranger.caFile,
                                                 connectTimeout: .seconds(10), logger: Self.logger)
            let failure = try #require(try await migrationError(store), "migrated through a certificate from an unknown CA")
            #expect(failure.store == "postgres 127.0.0.1:\(server.port)/gateway")
            #expect(failure.reason.contains("TLS handshake failed"), "\(failure)")
        }
    }

    /// verify-full checks the name too: a certificate from the trusted CA for another host is
    /// refused, as anyone holding one of that CA's certificates could otherwise stand in for the
    /// database. (The same CA's certificate for loopback connects: the test above.)
    @Test func verifyFullWithTheServersCAButAnotherHostsCertificateIsRefused() async throws {
        try await withTLSServer(onlyFor: "db.elsewhere.example") { server, pki in
            let store = try PostgresGatewayStore(url: server.url(sslMode: "verify-full"), caFile: pki.caFile,
                                                 connectTimeout: .seconds(10), logger: Self.logger)
            let failure = try #require(try await migrationError(store), "migrated through a certificate for another host")
            #expect(failure.reason.contains("TLS handshake failed"), "\(failure)")
        }
    }

    @Test func requireEncryptsWithoutACA() async throws {
        try await withTLSServer { server, _ in
            let store = try PostgresGatewayStore(url: server.url(sslMode: "require"), logger: Self.logger)
            try await withRunning(store) {
                try await store.migrate()
                #expect(try await store.sessionIsEncrypted())
            }
        }
    }

    @Test func aHostSSLOnlyServerRefusesSSLModeDisable() async throws {
        try await withTLSServer { server, _ in
            // Loopback without sslmode means disable, too.
            for url in [server.url(sslMode: "disable"), server.url] {
                let store = try PostgresGatewayStore(url: url, connectTimeout: .seconds(10), logger: Self.logger)
                let failure = try #require(try await migrationError(store), "a plaintext session was accepted by a hostssl-only server")
                #expect(failure.store == "postgres 127.0.0.1:\(server.port)/gateway")
                #expect(failure.reason.contains("pg_hba.conf"), "\(failure)")
            }
        }
    }
}
