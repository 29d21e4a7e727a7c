import Foundation

/// A throwaway PostgreSQL server for one test: `initdb` into a temporary directory, `pg_ctl start`
/// on a free loopback port, and `stop()` removes it all. As root (CI), the server runs as the
/// `postgres` user, since PostgreSQL refuses to run as root.
public final class PostgresTestServer: Sendable {
    public let url: String
    public let port: Int
    private let directory: URL
    private let binaries: URL

    /// Where `initdb` and `pg_ctl` live, or nil when this machine has no PostgreSQL server.
    public static let binDirectory: URL? = {
        var candidates: [URL] = []
        if let versions = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            for version in versions.sorted(by: >) { candidates.append(URL(fileURLWithPath: "/usr/lib/postgresql/\(version)/bin")) }
        }
        for path in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append(URL(fileURLWithPath: String(path)))
        }
        return candidates.first { dir in
            ["initdb", "pg_ctl", "createdb"].allSatisfy { FileManager.default.isExecutableFile(atPath: dir.appendingPathComponent($0).path) }
        }
    }()

    /// True where a server can start, and in CI (`GATEWAY_TESTS_REQUIRE_POSTGRES=1`) always, so
    /// that a missing server fails the PostgreSQL runs there instead of skipping them.
    public static var isAvailable: Bool {
        binDirectory != nil || ProcessInfo.processInfo.environment["GATEWAY_TESTS_REQUIRE_POSTGRES"] == "1"
    }
    public static let skipMessage = "PostgreSQL server binaries (initdb, pg_ctl) not found: the PostgreSQL run is skipped (.ci/run installs them)"

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private init(url: String, port: Int, directory: URL, binaries: URL) {
        self.url = url
        self.port = port
        self.directory = directory
        self.binaries = binaries
    }

    /// PostgreSQL refuses to run as root; as root the server runs as `postgres`.
    static var serverUser: String? { geteuid() == 0 ? "postgres" : nil }

    /// `ssl=on` with a certificate and key (PEM, e.g. from `TestPKI.issue`). With `sslOnly`,
    /// pg_hba.conf accepts TCP connections only over TLS (`hostssl`), so plaintext is refused.
    public struct TLS: Sendable {
        public let certificateFile: URL
        public let keyFile: URL
        public let sslOnly: Bool
        public init(certificateFile: URL, keyFile: URL, sslOnly: Bool = false) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.sslOnly = sslOnly
        }
    }

    /// `url` with `?sslmode=<mode>`.
    public func url(sslMode: String) -> String { "\(url)?sslmode=\(sslMode)" }

    /// Runs one SQL statement as the server's superuser, through its Unix socket.
    public func execute(_ sql: String, database: String = "gateway") async throws {
        try await Self.run(binaries, "psql", ["-h", directory.path, "-p", "\(port)", "-U", "gateway", "-d", database, "-v", "ON_ERROR_STOP=1",
                                              "-c", sql])
    }

    /// Runs one query as the server's superuser, through its Unix socket, and returns its rows
    /// unaligned, without headers (`psql -At`): `count(*)` reads as its number.
    public func query(_ sql: String, database: String = "gateway") async throws -> String {
        let result = try await Command.run(binaries.appendingPathComponent("psql").path,
                                           ["-h", directory.path, "-p", "\(port)", "-U", "gateway", "-d", database, "-v", "ON_ERROR_STOP=1",
                                            "-At", "-c", sql], asUser: Self.serverUser)
        guard result.status == 0 else { throw Failure(description: "psql failed (\(result.status)): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public static func start(database: String = "gateway", tls: TLS? = nil) async throws -> PostgresTestServer {
        guard let binaries = binDirectory else { throw Failure(description: skipMessage) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try handToServerUser(directory.path)
        let data = directory.appendingPathComponent("data").path
        try await run(binaries, "initdb", ["-D", data, "-U", "gateway", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        var sslOptions = ""
        if let tls { sslOptions = try installTLS(tls, dataDirectory: URL(fileURLWithPath: data)) }
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = Int.random(in: 20_000...45_000)
            do {
                try await run(binaries, "pg_ctl", [
                    "-D", data, "-w", "-t", "30", "-l", directory.appendingPathComponent("server.log").path,
                    "-o", "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off\(sslOptions)",
                    "start",
                ])
                // Through the Unix socket: a hostssl-only server refuses plaintext TCP.
                try await run(binaries, "createdb", ["-h", directory.path, "-p", "\(port)", "-U", "gateway", database])
                return PostgresTestServer(url: "postgres://gateway@127.0.0.1:\(port)/\(database)", port: port, directory: directory,
                                          binaries: binaries)
            } catch {
                lastError = error
            }
        }
        try? FileManager.default.removeItem(at: directory)
        throw lastError ?? Failure(description: "PostgreSQL did not start")
    }

    /// As root the server runs as `postgres`: what it reads must be its own.
    static func handToServerUser(_ path: String) throws {
        if let user = serverUser, let entry = getpwnam(user) {
            guard chown(path, entry.pointee.pw_uid, entry.pointee.pw_gid) == 0 else {
                throw Failure(description: "cannot hand \(path) to \(user)")
            }
        }
    }

    /// Copies the certificate and key into the data directory (owned by the server's user, the
    /// key 0600 as PostgreSQL requires) and returns the `-c` options that turn TLS on.
    static func installTLS(_ tls: TLS, dataDirectory: URL) throws -> String {
        let certificate = dataDirectory.appendingPathComponent("server.crt")
        let key = dataDirectory.appendingPathComponent("server.key")
        try Data(contentsOf: tls.certificateFile).write(to: certificate)
        try Data(contentsOf: tls.keyFile).write(to: key)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: certificate.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key.path)
        try handToServerUser(certificate.path)
        try handToServerUser(key.path)
        if tls.sslOnly {
            let hba = dataDirectory.appendingPathComponent("pg_hba.conf")
            try """
                local   all all                trust
                hostssl all all 127.0.0.1/32   trust
                hostssl all all ::1/128        trust

                """.write(to: hba, atomically: false, encoding: .utf8)
            try handToServerUser(hba.path)
        }
        return " -c ssl=on -c ssl_cert_file=\(certificate.path) -c ssl_key_file=\(key.path)"
    }

    public func stop() async {
        _ = try? await Self.run(binaries, "pg_ctl", ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts a server, runs `body` with it, and stops it whatever happens.
    public static func with<T: Sendable>(tls: TLS? = nil, _ body: (PostgresTestServer) async throws -> T) async throws -> T {
        let server = try await start(tls: tls)
        return try await withCleanup({ try await body(server) }, cleanup: { await server.stop() })
    }

    static func run(_ binaries: URL, _ tool: String, _ arguments: [String]) async throws {
        let result = try await Command.run(binaries.appendingPathComponent(tool).path, arguments, asUser: serverUser)
        guard result.status == 0 else {
            throw Failure(description: "\(tool) failed (\(result.status)): \(result.stdout) \(result.stderr)")
        }
    }
}
