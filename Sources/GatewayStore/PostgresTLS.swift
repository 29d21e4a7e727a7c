import Foundation
import Logging
import NIOSSL
import PEMFiles
import PostgresNIO
import ProvisioningCore

/// `sslmode` in `store.postgres.url`, with libpq's names and meanings for the three it accepts.
public enum PostgresSSLMode: String, Sendable, CaseIterable {
    /// No TLS.
    case disable
    /// TLS, but the server's certificate is not checked (it protects against a passive listener only).
    case require
    /// TLS, the certificate checked against `store.postgres.ca_file` (or the system's roots) and
    /// the host name (or IP address) checked against it.
    case verifyFull = "verify-full"

    /// The mode when the URL names none: traffic to this machine never leaves it, so a loopback
    /// server goes without TLS; any other is verified in full, so plaintext across the network
    /// has to be asked for with `sslmode=disable`.
    public static func `default`(host: String) -> PostgresSSLMode {
        NetworkHost.isLoopback(host) ? .disable : .verifyFull
    }
}

/// `postgres://user[:password]@host[:port][/database][?sslmode=...]`, taken apart. Its description
/// leaves the password out.
public struct PostgresURL: Sendable, CustomStringConvertible, CustomReflectable {
    public let host: String
    public let port: Int
    public let user: String
    let password: String?
    public let database: String?
    public let sslMode: PostgresSSLMode
    /// Whether `sslMode` came from the URL rather than `PostgresSSLMode.default(host:)`.
    public let sslModeExplicit: Bool

    public init(parsing url: String) throws(StoreError) {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
              let host = components.host, !host.isEmpty, let user = components.user
        else {
            throw StoreError(store: "postgres", reason: "store.postgres.url must look like postgres://user:password@host:port/database")
        }
        // An IPv6 literal comes bracketed (`[::1]`); the driver connects to the address itself.
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        // Foundation reads any number as the port: 84986 had connected to 19450 (84986 - 65536),
        // and sent the password to whatever listened there (the CLI audit).
        let port = components.port ?? 5432
        guard (1...65_535).contains(port) else {
            throw StoreError(store: "postgres", reason: "store.postgres.url: the port must be 1 to 65535")
        }
        self.port = port
        self.user = user
        password = components.password
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? nil : path

        var mode: PostgresSSLMode?
        for item in components.queryItems ?? [] {
            // Anything else libpq understands (sslrootcert, sslcert, ...) is not honoured here, so
            // it is refused rather than silently ignored.
            guard item.name == "sslmode" else {
                throw StoreError(store: "postgres", reason: "store.postgres.url: unsupported parameter '\(item.name)' (only sslmode is understood)")
            }
            guard mode == nil else { throw StoreError(store: "postgres", reason: "store.postgres.url: sslmode is given twice") }
            guard let value = item.value.flatMap(PostgresSSLMode.init(rawValue:)) else {
                throw StoreError(store: "postgres", reason: "store.postgres.url: sslmode must be disable, require or verify-full")
            }
            mode = value
        }
        sslMode = mode ?? .default(host: self.host)
        sslModeExplicit = mode != nil
    }

    /// `postgres host:port/database`: how errors and logs name this store.
    public var displayName: String { "postgres \(hostInURL):\(port)/\(database ?? "")" }

    public var description: String {
        "postgres://\(user)@\(hostInURL):\(port)/\(database ?? "")?sslmode=\(sslMode.rawValue)"
    }

    /// The host as a URL writes it: an IPv6 address in brackets.
    private var hostInURL: String { host.contains(":") ? "[\(host)]" : host }

    /// `dump` and debuggers see the same as `description`: no password.
    public var customMirror: Mirror { Mirror(self, children: ["url": description]) }
}

enum PostgresTLS {
    /// The client TLS configuration for `mode`, or nil for no TLS. `caFile` (already resolved)
    /// replaces the system's roots; it is only meaningful with `verify-full`.
    static func configuration(_ url: PostgresURL, caFile: URL?) throws(StoreError) -> TLSConfiguration? {
        if let caFile, url.sslMode != .verifyFull {
            let how = url.sslModeExplicit ? "the URL's sslmode is \(url.sslMode.rawValue)" : "the URL names no sslmode, and \(url.host) is loopback"
            throw StoreError(store: url.displayName, reason: "store.postgres.ca_file (\(caFile.path)) is only used with sslmode=verify-full (\(how))")
        }
        switch url.sslMode {
        case .disable:
            return nil
        case .require:
            // As libpq: encrypted, but whoever answers is accepted.
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .none
            return tls
        case .verifyFull:
            var tls = TLSConfiguration.makeClientConfiguration()
            if let caFile { tls.trustRoots = .certificates(try certificates(caFile, store: url.displayName)) }
            return tls
        }
    }

    static func certificates(_ file: URL, store: String) throws(StoreError) -> [NIOSSLCertificate] {
        do {
            return try PEMFiles.certificates(at: file)
        } catch {
            throw StoreError(store: store, reason: "store.postgres.ca_file: \(error.reason)")
        }
    }

    /// Connects once outside the pool and closes again: a failure is a `StoreError` naming the
    /// store and its reason (refused, TLS handshake, rejected by pg_hba.conf).
    static func probe(_ configuration: PostgresConnection.Configuration, store: String, mode: PostgresSSLMode, logger: Logger) async throws {
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .error)
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: quiet)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw StoreError(store: store, reason: describe(error, mode: mode))
        }
        try? await connection.close()
    }

    /// Why a connection could not be made, in words an operator can act on. Never the query or
    /// the password: only the error's kind, the TLS library's reason, or the server's message.
    static func describe(_ error: any Error, mode: PostgresSSLMode) -> String {
        if let error = error as? PSQLError {
            switch error.code {
            case .sslUnsupported:
                return "the server does not accept TLS (sslmode=\(mode.rawValue)); enable ssl on the server or set sslmode=disable"
            case .server:
                let message = error.serverInfo?[.message] ?? "no message"
                return "the server refused the connection: \(message)"
            default:
                if let underlying = error.underlying { return describe(underlying, mode: mode) }
                return "connection failed (\(error.code))"
            }
        }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            return "TLS handshake failed (sslmode=\(mode.rawValue)): \(error)"
        }
        return "\(String(reflecting: error))"
    }
}

extension PostgresGatewayStore {
    /// Whether the pooled session this query runs on is TLS-encrypted, as the server sees it
    /// (`pg_stat_ssl`): for start-up logs and tests.
    public func sessionIsEncrypted() async throws -> Bool {
        for try await ssl in try await client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: logger)
            .decode(Bool.self) { return ssl }
        return false
    }
}
