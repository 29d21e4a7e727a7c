import Foundation

/// The YAML configuration, as written by ops. Decoding checks types; `validate()` checks meaning
/// and names the key path of every problem, e.g. `issuers.bridge.endpoints[0].url: not a URL`.
/// Keys the file leaves out take the defaults declared with `@Default...` beside each property;
/// the keys a mapping accepts are the synthesized ones (see `ConfigKeyShape`).
public struct GatewayConfig: Sendable, Codable {
    @DefaultSection<ServerConfig> public var server: ServerConfig
    @DefaultEmpty<[ClientConfig]> public var clients: [ClientConfig]
    @DefaultEmptyMap<[String: IssuerConfig]> public var issuers: [String: IssuerConfig]
    @DefaultSection<RoutingConfig> public var routing: RoutingConfig
    @DefaultSection<StoreConfig> public var store: StoreConfig
    @DefaultSection<LocalIssuerConfig> public var local: LocalIssuerConfig
    @DefaultSection<VaultConfig> public var vault: VaultConfig
    @DefaultSection<TrustConfig> public var trust: TrustConfig
    @DefaultSection<SandboxConfig> public var sandbox: SandboxConfig
    @DefaultSection<LogConfig> public var log: LogConfig
    @DefaultSection<TelemetryConfig> public var telemetry: TelemetryConfig
    /// The directory of the file this came from: relative paths in it (trust anchors) start here.
    public var baseDirectory: URL?

    enum CodingKeys: String, CodingKey { case server, clients, issuers, routing, store, local, vault, trust, sandbox, log, telemetry }

    /// The longest deadline any route has (`server.deadline_ms` or a rule's `deadline_ms`): how
    /// long a request may legitimately run.
    public var longestDeadlineMS: Int {
        routing.rules.compactMap(\.deadlineMS).reduce(server.deadlineMS, max)
    }

    /// How much longer than the longest deadline an unfinished Idempotency-Key claim must be
    /// before it counts as abandoned: room for a request's last writes after its deadline, and for
    /// instances sharing a store whose clocks differ a little.
    public static let idempotencyAbandonMargin: Duration = .seconds(30)

    /// What a graceful shutdown allows past the longest deadline when `server.shutdown_timeout_ms`
    /// is not set: a request accepted at the very end of the drain delay runs its whole deadline
    /// and then still needs its last writes (its audit event, its Idempotency-Key's answer) and
    /// its answer; cut off at its deadline, it would go unanswered and its key stay abandoned.
    public static let shutdownMargin: Duration = .seconds(5)

    /// How long requests in flight get to finish after the drain delay: `server.shutdown_timeout_ms`,
    /// else the longest deadline plus `shutdownMargin`.
    public var shutdownTimeout: Duration {
        server.shutdownTimeoutMS.map { .milliseconds($0) } ?? .milliseconds(longestDeadlineMS) + Self.shutdownMargin
    }

    /// What a valid file does that ops most likely did not mean, said by `config check` and at
    /// `serve`'s start as warnings (nothing is refused).
    public var advisories: [String] {
        var advice: [String] = []
        let margin = Int(Self.shutdownMargin.components.seconds) * 1000
        if let timeout = server.shutdownTimeoutMS, timeout < longestDeadlineMS + margin {
            advice.append("server.shutdown_timeout_ms (\(timeout)) is shorter than the longest deadline + \(margin / 1000) s "
                + "(\(longestDeadlineMS + margin) ms): a request accepted as a shutdown begins may be cut off at its issuer or before its "
                + "last writes, recorded as upstream_unavailable though the issuer may have acted, and its Idempotency-Key then answers "
                + "idempotency_outcome_unknown; leave it unset for that default")
        }
        let tenants = clients.filter { !$0.admin }.count
        if server.metricsPublic && tenants > 1 {
            advice.append("server.metrics_public is true with \(tenants) clients that are not admin ones: GET /metrics, without a key, names "
                + "every client with its requests in flight and 429s, and every issuer endpoint; keep the listener where only the scraper "
                + "reaches it, or leave metrics_public false and scrape with an admin key")
        }
        return advice
    }
}

public struct ServerConfig: ConfigSection {
    public enum Defaults {
        public enum Host: ConfigDefault { public static let value = "127.0.0.1" }
        public enum Port: ConfigDefault { public static let value = 8080 }
        public enum MaxBodyBytes: ConfigDefault { public static let value = 64 * 1024 }
        public enum DeadlineMS: ConfigDefault { public static let value = 15_000 }
        public enum IdleTimeoutMS: ConfigDefault { public static let value = 30_000 }
        public enum ReadTimeoutMS: ConfigDefault { public static let value = 10_000 }
        public enum WriteTimeoutMS: ConfigDefault { public static let value = 10_000 }
        public enum MaxConnections: ConfigDefault { public static let value = 4_096 }
        public enum AuthFailureLimit: ConfigDefault { public static let value = RateLimitConfig.authFailureDefault }
        public enum ShutdownDelayMS: ConfigDefault { public static let value = 0 }
    }

    @Default<Defaults.Host> public var host: String
    @Default<Defaults.Port> public var port: Int
    @Default<Defaults.MaxBodyBytes> public var maxBodyBytes: Int
    /// One deadline for a whole provisioning, inside the ~20 s Apple gives the app.
    @Default<Defaults.DeadlineMS> public var deadlineMS: Int
    /// HTTPS on the listener. Without it a non-loopback listener refuses to start unless
    /// `allow_plaintext` says a TLS-terminating proxy is in front.
    public var tls: ServerTLSConfig?
    @DefaultFalse public var allowPlaintext: Bool
    /// `/metrics` without an API key (the sandbox); otherwise it needs an admin key.
    @DefaultFalse public var metricsPublic: Bool
    /// A connection with no request in progress for this long is closed.
    @Default<Defaults.IdleTimeoutMS> public var idleTimeoutMS: Int
    /// How long a request's head and body may take to arrive, from its first byte.
    @Default<Defaults.ReadTimeoutMS> public var readTimeoutMS: Int
    /// How long an answer may wait for a client that does not read it (the connection's writes
    /// stalled) before the connection is closed.
    @Default<Defaults.WriteTimeoutMS> public var writeTimeoutMS: Int
    /// Open connections above this are closed as soon as they are accepted.
    @Default<Defaults.MaxConnections> public var maxConnections: Int
    /// Requests with a missing or wrong API key, per source address (token bucket).
    @Default<Defaults.AuthFailureLimit> public var authFailureLimit: RateLimitConfig
    /// On SIGTERM/SIGINT `/readyz` answers 503 at once, and requests are still served for this
    /// long before the listener closes: a load balancer needs a few seconds to stop sending.
    @Default<Defaults.ShutdownDelayMS> public var shutdownDelayMS: Int
    /// Then requests in flight get this long to finish; the longest route deadline when absent.
    public var shutdownTimeoutMS: Int?

    public init() {}
    /// In the order `unknown key (expected one of: ...)` lists them.
    enum CodingKeys: String, CodingKey {
        case host, port
        case maxBodyBytes = "max_body_bytes"
        case deadlineMS = "deadline_ms"
        case tls
        case allowPlaintext = "allow_plaintext"
        case metricsPublic = "metrics_public"
        case idleTimeoutMS = "idle_timeout_ms"
        case readTimeoutMS = "read_timeout_ms"
        case writeTimeoutMS = "write_timeout_ms"
        case maxConnections = "max_connections"
        case authFailureLimit = "auth_failure_limit"
        case shutdownDelayMS = "shutdown_delay_ms"
        case shutdownTimeoutMS = "shutdown_timeout_ms"
    }
}

/// `server.tls`: PEM files, relative to the config file's directory.
public struct ServerTLSConfig: Sendable, Codable {
    public var certificate: String
    public var privateKey: String
    public init(certificate: String, privateKey: String) {
        self.certificate = certificate
        self.privateKey = privateKey
    }
    enum CodingKeys: String, CodingKey {
        case certificate
        case privateKey = "private_key"
    }
}

/// A token bucket: `requests_per_second` refill, up to `burst` at once.
public struct RateLimitConfig: Sendable, Codable, Equatable {
    public var requestsPerSecond: Double
    public var burst: Int
    public init(requestsPerSecond: Double, burst: Int) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst
    }
    /// Per client: far above what one fintech's provisioning traffic needs (a card launch is
    /// tens per second), low enough that one client cannot starve the others or the upstreams.
    public static let clientDefault = RateLimitConfig(requestsPerSecond: 50, burst: 100)
    /// Per source address, for requests whose API key is missing or wrong.
    public static let authFailureDefault = RateLimitConfig(requestsPerSecond: 1, burst: 10)
    enum CodingKeys: String, CodingKey {
        case requestsPerSecond = "requests_per_second"
        case burst
    }
}

public struct ClientConfig: Sendable, Codable {
    public var id: String
    /// Lowercase hex SHA-256 of the API key; the key itself is never in the file.
    public var apiKeySHA256: String
    /// Keys still accepted while the client moves to a new one (rotation without downtime): the
    /// same client, so its Idempotency-Keys, cards and trails carry over. Remove them once the
    /// client sends only the new key.
    @DefaultEmpty<[String]> public var previousAPIKeysSHA256: [String]
    @DefaultEmpty<[String]> public var programs: [String]
    /// Ops clients: manage the registry and read `/v1/admin/...`; they hold no programs and
    /// neither provision nor activate.
    @DefaultFalse public var admin: Bool
    /// May call `POST /v1/token-activations` without a `card_id` (routed to `routing.activations`).
    @DefaultFalse public var activationsWithoutCard: Bool
    /// Requests per second this client may make; `RateLimitConfig.clientDefault` when absent.
    public var rateLimit: RateLimitConfig?
    /// Requests this client may have in flight at once, from its headers' arrival to its answer
    /// (`ClientConfig.maxInFlightDefault` when absent). A client over it answers 429 at once.
    public var maxInFlight: Int?

    /// As many as the default burst: a client may send its whole burst at once, but a slow issuer
    /// or a client holding its bodies back cannot pile up more of its requests than that
    /// (50 requests a second for a 15 s deadline would be 750).
    public static let maxInFlightDefault = 100
    /// The accepted range of `max_in_flight`.
    public static let maxInFlightRange = 1...100_000

    public init(id: String, apiKeySHA256: String, programs: [String], admin: Bool = false, activationsWithoutCard: Bool = false,
                rateLimit: RateLimitConfig? = nil, maxInFlight: Int? = nil) {
        self.id = id
        self.apiKeySHA256 = apiKeySHA256
        self.previousAPIKeysSHA256 = []
        self.programs = programs
        self.admin = admin
        self.activationsWithoutCard = activationsWithoutCard
        self.rateLimit = rateLimit
        self.maxInFlight = maxInFlight
    }

    /// Every key hash this client is known by: its key, then the previous ones.
    public var apiKeyHashes: [(path: String, hex: String)] {
        [("api_key_sha256", apiKeySHA256)] + previousAPIKeysSHA256.enumerated().map { ("previous_api_keys_sha256[\($0.offset)]", $0.element) }
    }

    enum CodingKeys: String, CodingKey {
        case id
        case apiKeySHA256 = "api_key_sha256"
        case previousAPIKeysSHA256 = "previous_api_keys_sha256"
        case programs, admin
        case activationsWithoutCard = "activations_without_card"
        case rateLimit = "rate_limit"
        case maxInFlight = "max_in_flight"
    }
}

public struct IssuerConfig: Sendable, Codable {
    public var kind: IssuerKind
    public var endpoints: [EndpointConfig]
    /// Credential name -> `env:NAME` (or `sandbox` for the in-process simulators).
    @DefaultEmptyMap<[String: String]> public var credentials: [String: String]
    @DefaultSection<TimeoutConfig> public var timeouts: TimeoutConfig
    /// The issuer's connection pool: its bound per host and how long an idle connection is kept.
    @DefaultSection<ConnectionPoolConfig> public var connections: ConnectionPoolConfig
    @DefaultSection<WireOptions> public var wire: WireOptions
    /// Validate the PassKit chain before calling this issuer (invalid -> 422, no upstream call).
    @DefaultFalse public var validateChain: Bool
    @DefaultSection<RetryConfig> public var retry: RetryConfig
    @DefaultSection<CircuitBreakerConfig> public var circuitBreaker: CircuitBreakerConfig
    /// The programs whose cards may use this issuer account; every program when absent. Tenants
    /// with their own issuer credentials name their programs here.
    public var programs: [String]?
    /// A private CA and/or a client certificate for mutual TLS.
    public var tls: UpstreamTLSConfig?
    /// The wallets this issuer account is used for; every wallet its kind serves when absent. A
    /// request for another answers `wallet_not_supported` without a call (token activation is not
    /// a wallet and is unaffected).
    public var wallets: [Wallet]?
    /// Ops stopped calls to this issuer (an incident, a migration): its requests fail fast with a
    /// retryable `upstream_unavailable`, or go to a route's `fallback: local`. The admin API's
    /// pause and resume change it at run time (`PauseSwitch`).
    @DefaultFalse public var paused: Bool

    /// In the order `unknown key (expected one of: ...)` lists them.
    enum CodingKeys: String, CodingKey {
        case kind, endpoints, credentials, timeouts, connections, wire
        case validateChain = "validate_chain"
        case retry
        case circuitBreaker = "circuit_breaker"
        case programs, tls, wallets, paused
    }

    /// Whether a card of `program` may be served through this issuer account.
    public func serves(program: String) -> Bool { programs.map { $0.contains(program) } ?? true }
}

/// `issuers.<name>.tls`: PEM files, relative to the config file's directory.
public struct UpstreamTLSConfig: Sendable, Codable {
    /// Trust only this CA (a private PKI) instead of the system's roots.
    public var caFile: String?
    /// Mutual TLS: both or neither.
    public var clientCertificate: String?
    public var clientKey: String?
    public init(caFile: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }
    enum CodingKeys: String, CodingKey {
        case caFile = "ca_file"
        case clientCertificate = "client_certificate"
        case clientKey = "client_key"
    }
}

/// `issuers.<name>.retry`. Defaults: `RetryPolicy.default` (reasons there and in the README).
public struct RetryConfig: ConfigSection {
    public enum Defaults {
        public enum MaxAttempts: ConfigDefault { public static let value = RetryPolicy.default.maxAttempts }
        public enum BaseBackoffMS: ConfigDefault { public static let value = Int(RetryPolicy.default.baseBackoff.wholeMilliseconds) }
        public enum MaxBackoffMS: ConfigDefault { public static let value = Int(RetryPolicy.default.maxBackoff.wholeMilliseconds) }
        public enum MinAttemptMS: ConfigDefault { public static let value = Int(RetryPolicy.default.minAttemptTime.wholeMilliseconds) }
    }

    @Default<Defaults.MaxAttempts> public var maxAttempts: Int
    @Default<Defaults.BaseBackoffMS> public var baseBackoffMS: Int
    @Default<Defaults.MaxBackoffMS> public var maxBackoffMS: Int
    @Default<Defaults.MinAttemptMS> public var minAttemptMS: Int
    /// Rows tried before the issuer's default decision table: `{on: "500", action: fail, code: ...}`.
    @DefaultEmpty<[RetryDecisionConfig]> public var decisions: [RetryDecisionConfig]

    public init() {}
    enum CodingKeys: String, CodingKey {
        case maxAttempts = "max_attempts"
        case baseBackoffMS = "base_backoff_ms"
        case maxBackoffMS = "max_backoff_ms"
        case minAttemptMS = "min_attempt_ms"
        case decisions
    }

    public var policy: RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, baseBackoff: .milliseconds(baseBackoffMS), maxBackoff: .milliseconds(maxBackoffMS),
                    minAttemptTime: .milliseconds(minAttemptMS))
    }
}

public struct RetryDecisionConfig: Sendable, Codable {
    /// `connect_failed`, `timeout`, `reset`, `malformed`, an HTTP status, `4xx` or `5xx`.
    public var on: String
    public var action: RetryAction
    /// The unified code the caller sees; the default row's code for that failure when absent.
    public var code: String?

    public init(on: String, action: RetryAction, code: String? = nil) {
        self.on = on
        self.action = action
        self.code = code
    }

    /// Why this row may not be used for an issuer of `profile`'s kind, or nil when it may.
    public func refusal(for profile: any IssuerProfile) -> String? {
        guard let match = RetryRule.Match(parsing: on), action != .fail else { return nil }
        switch match {
        case .condition(.status(let status)) where (400..<500).contains(status) && status != 429:
            return "a 4xx is never sent again (only 429 is)"
        case .statusClass(4):
            return "a 4xx is never sent again (only 429 is)"
        case .condition(.connectFailed), .condition(.status(429)):
            return nil
        default:
            return profile.resendSafe ? nil
                : "\(profile.kind) has no idempotency key: a request that may have reached it is never sent again"
        }
    }

    /// The row, or nil when a field does not parse (validation names it).
    public func rule(defaults: RetryDecisionTable) -> RetryRule? {
        guard let match = RetryRule.Match(parsing: on) else { return nil }
        let resolved: GatewayError.Code?
        if let code {
            resolved = GatewayError.Code(rawValue: code)
        } else if case .condition(let condition) = match {
            resolved = defaults.decide(condition)?.code ?? .upstreamUnavailable
        } else {
            resolved = match == .statusClass(4) ? .upstreamRejected : .upstreamUnavailable
        }
        return resolved.map { RetryRule(match, $0, action) }
    }
}

/// `issuers.<name>.circuit_breaker`, one breaker per endpoint. Defaults: `CircuitBreaker.Policy.default`.
public struct CircuitBreakerConfig: ConfigSection {
    public enum Defaults {
        public enum FailureThreshold: ConfigDefault { public static let value = CircuitBreaker.Policy.default.failureThreshold }
        public enum OpenMS: ConfigDefault { public static let value = Int(CircuitBreaker.Policy.default.openDuration.wholeMilliseconds) }
        public enum HalfOpenProbes: ConfigDefault { public static let value = CircuitBreaker.Policy.default.halfOpenProbes }
    }

    @Default<Defaults.FailureThreshold> public var failureThreshold: Int
    @Default<Defaults.OpenMS> public var openMS: Int
    @Default<Defaults.HalfOpenProbes> public var halfOpenProbes: Int

    public init() {}
    enum CodingKeys: String, CodingKey {
        case failureThreshold = "failure_threshold"
        case openMS = "open_ms"
        case halfOpenProbes = "half_open_probes"
    }

    public var policy: CircuitBreaker.Policy {
        CircuitBreaker.Policy(failureThreshold: failureThreshold, openDuration: .milliseconds(openMS), halfOpenProbes: halfOpenProbes)
    }
}

public struct EndpointConfig: Sendable, Codable {
    /// `https://...`, or `sandbox://<kind>` for the in-process simulator of that upstream.
    public var url: String
    public init(url: String) { self.url = url }
}

public struct TimeoutConfig: ConfigSection, Equatable {
    public enum Defaults {
        /// Envoy's default connect timeout is 5 s; an issuer's API on the internet connects in well
        /// under 1 s, so 2 s leaves room for a second endpoint.
        public enum ConnectMS: ConfigDefault { public static let value = 2_000 }
        /// Per try: three tries of 5 s fit the 15 s deadline (Envoy has no per-try default; its
        /// route timeout is 15 s).
        public enum RequestMS: ConfigDefault { public static let value = 5_000 }
    }

    @Default<Defaults.ConnectMS> public var connectMS: Int
    @Default<Defaults.RequestMS> public var requestMS: Int

    public init() {}
    enum CodingKeys: String, CodingKey {
        case connectMS = "connect_ms"
        case requestMS = "request_ms"
    }
}

/// `issuers.<name>.connections`: the issuer's pool of HTTP/1.1 connections, one per host of its
/// endpoints (README, "Connections to an issuer").
public struct ConnectionPoolConfig: ConfigSection, Equatable {
    public enum Defaults {
        /// AsyncHTTPClient's default, which the connectors ran on before their own pool.
        public enum MaxPerHost: ConfigDefault { public static let value = 8 }
        /// Below the usual keep-alive timeouts of the servers in front of an issuer's API (nginx
        /// 75 s, AWS ALB 60 s), so the gateway drops an idle connection before the server does.
        public enum IdleTimeoutMS: ConfigDefault { public static let value = 30_000 }
    }

    /// The most connections open to one host at once; a call beyond waits for one, within its
    /// per-try timeout.
    @Default<Defaults.MaxPerHost> public var maxPerHost: Int
    /// An idle connection older than this is closed instead of used.
    @Default<Defaults.IdleTimeoutMS> public var idleTimeoutMS: Int

    /// Each value's accepted range (validation says so by key).
    public static let maxPerHostRange = 1...1_024
    public static let idleTimeoutMSRange = 100...3_600_000

    public init() {}
    public init(maxPerHost: Int, idleTimeoutMS: Int) {
        self.maxPerHost = maxPerHost
        self.idleTimeoutMS = idleTimeoutMS
    }

    enum CodingKeys: String, CodingKey {
        case maxPerHost = "max_per_host"
        case idleTimeoutMS = "idle_timeout_ms"
    }
}

/// Per-issuer dialect switches. Each is meaningful for one kind only; validation says so.
public struct WireOptions: ConfigSection {
    /// Bridge: `hex` (Bridge's default) or `base64`, for the four Apple Pay request fields.
    public var encoding: BinaryEncoding?
    /// TMP: `bearer` (Authorization: Bearer, the default) or `header:<Name>` (the token in that header).
    public var auth: TMPAuth?
    /// Marqeta (required there): the `provisioning_app_version` its provisioning requests carry,
    /// the version of the fintech's app that pushes the card (1 to 50 characters).
    public var provisioningAppVersion: String?

    public init() {}

    /// In the order `unknown key (expected one of: ...)` lists them.
    enum CodingKeys: String, CodingKey {
        case encoding, auth
        case provisioningAppVersion = "provisioning_app_version"
    }
}

/// The gateway's own issuer `local`: the ECC_V2 encryptor over card data in the vault.
public struct LocalIssuerConfig: ConfigSection {
    @DefaultFalse public var enabled: Bool
    /// Keys the default HMAC activation data: `env:NAME` (32 bytes, base64 or hex) or `sandbox`.
    public var activationKey: String?
    public init() {}
    enum CodingKeys: String, CodingKey {
        case enabled
        case activationKey = "activation_key"
    }
}

public struct VaultConfig: ConfigSection {
    /// One key: `env:NAME` (32 bytes, base64 or hex) or `sandbox` (a fixed demo key). Its id is `default`.
    public var key: String?
    /// Several keys for rotation: exactly one `active: true` seals; every listed key opens.
    @DefaultEmpty<[VaultKeyConfig]> public var keys: [VaultKeyConfig]
    public init() {}

    /// `keys`, or `key` as the one active key `default`.
    public var keyring: [VaultKeyConfig] {
        if let key { return [VaultKeyConfig(id: VaultKeyConfig.defaultID, key: key, active: true)] + keys }
        return keys
    }
}

public struct VaultKeyConfig: Sendable, Codable, Equatable {
    public static let defaultID = "default"
    /// Stored beside every sealed entry: 1-32 of A-Z a-z 0-9 _ - .
    public var id: String
    public var key: String
    @DefaultFalse public var active: Bool
    public init(id: String, key: String, active: Bool = false) {
        self.id = id
        self.key = key
        self.active = active
    }
}

/// How the executable writes its log: `text` (one readable line per event, the default) or `json`
/// (one JSON object per line). `serve --log-format` overrides it.
public struct LogConfig: ConfigSection {
    public enum Defaults {
        public enum Format: ConfigDefault { public static let value = LogFormat.text }
        public enum Access: ConfigDefault { public static let value = true }
    }

    @Default<Defaults.Format> public var format: LogFormat
    /// One `request` line per request at `info` (method, route template, status, code, client,
    /// latency). On by default: it is how ops finds a 401 or a 429, which write nothing else.
    @Default<Defaults.Access> public var access: Bool
    public init() {}
}

/// Distributed tracing. The W3C trace context of a caller is always continued and sent on to the
/// upstreams; spans leave the process only when `otlp.endpoint` names an OpenTelemetry collector
/// (OTLP over HTTP with protobuf bodies).
public struct TelemetryConfig: ConfigSection {
    public enum Defaults {
        public enum ServiceName: ConfigDefault { public static let value = "provisioning-gateway" }
    }

    /// `service.name` of the exported spans.
    @Default<Defaults.ServiceName> public var serviceName: String
    @DefaultSection<OTLP> public var otlp: OTLP

    public struct OTLP: ConfigSection {
        /// The collector's OTLP/HTTP base URL (`http://otel-collector:4318`); spans go to its
        /// `/v1/traces`. No export when absent.
        public var endpoint: String?
        public init() {}
    }

    public init() {}
    enum CodingKeys: String, CodingKey {
        case serviceName = "service_name"
        case otlp
    }
}

/// Trust anchors for PassKit certificate chains: `apple` is the bundled Apple Root CA - G3 (the
/// default); anything else is a PEM or DER file path.
public struct TrustConfig: ConfigSection {
    public enum Defaults {
        public enum Anchors: ConfigDefault { public static let value = ["apple"] }
    }

    @Default<Defaults.Anchors> public var anchors: [String]
    public init() {}
}

/// Where state lives: an embedded SQLite file by default, PostgreSQL when `postgres.url` is set.
public struct StoreConfig: ConfigSection {
    public enum Defaults {
        public enum SQLitePath: ConfigDefault { public static let value = ".gateway/gateway.sqlite" }
        public enum ConnectTimeoutMS: ConfigDefault { public static let value = 5_000 }
        public enum OperationTimeoutMS: ConfigDefault { public static let value = 5_000 }
        public enum IdempotencyTTLSeconds: ConfigDefault { public static let value = 86_400 }
    }

    /// Where a sandbox (`sandbox.enabled`) keeps its state when the file names no other path
    /// than the default, which is the production store's.
    public static let sandboxSQLitePath = ".gateway/sandbox.sqlite"

    public struct SQLite: ConfigSection {
        @Default<Defaults.SQLitePath> public var path: String
        public init() {}
    }

    public struct Postgres: Sendable, Codable {
        /// `env:NAME`, or a `postgres://` URL without a password.
        public var url: String
        @Default<Defaults.ConnectTimeoutMS> public var connectTimeoutMS: Int
        /// How long a request waits for one store operation before it fails (`internal`).
        @Default<Defaults.OperationTimeoutMS> public var operationTimeoutMS: Int
        /// The CA that signed the server's certificate (PEM), for `sslmode=verify-full`.
        public var caFile: String?
        enum CodingKeys: String, CodingKey {
            case url
            case connectTimeoutMS = "connect_timeout_ms"
            case operationTimeoutMS = "operation_timeout_ms"
            case caFile = "ca_file"
        }
        public init(url: String, caFile: String? = nil) {
            self.url = url
            self.caFile = caFile
        }
    }

    @DefaultSection<SQLite> public var sqlite: SQLite
    public var postgres: Postgres?
    /// How long a POST's answer is kept for replay under its Idempotency-Key.
    @Default<Defaults.IdempotencyTTLSeconds> public var idempotencyTTLSeconds: Int

    public init() {}
    enum CodingKeys: String, CodingKey {
        case sqlite, postgres
        case idempotencyTTLSeconds = "idempotency_ttl_seconds"
    }
}

public struct RoutingConfig: ConfigSection {
    public struct Activations: ConfigSection {
        /// The issuer that activates tokens when the request names no card.
        public var issuer: String?
        public init() {}
        public init(issuer: String?) { self.issuer = issuer }
    }

    @DefaultEmpty<[RoutingRuleConfig]> public var rules: [RoutingRuleConfig]
    @DefaultSection<Activations> public var activations: Activations

    public init() {}

    public var table: RoutingTable {
        RoutingTable(rules: rules.map {
            RoutingRule(program: $0.match.program.map { ProgramID($0) }, cardIDPrefix: $0.match.cardIDPrefix,
                        wallet: $0.match.wallet, issuer: IssuerID($0.issuer), fallback: $0.fallback.map { IssuerID($0) },
                        deadline: $0.deadlineMS.map { .milliseconds($0) })
        })
    }
}

public struct RoutingRuleConfig: Sendable, Codable {
    public struct Match: Sendable, Codable {
        public var program: String?
        public var cardIDPrefix: String?
        public var wallet: Wallet?
        enum CodingKeys: String, CodingKey {
            case program
            case cardIDPrefix = "card_id_prefix"
            case wallet
        }
        public init(program: String? = nil, cardIDPrefix: String? = nil, wallet: Wallet? = nil) {
            self.program = program
            self.cardIDPrefix = cardIDPrefix
            self.wallet = wallet
        }
    }

    public init(match: Match, issuer: String, fallback: String? = nil, deadlineMS: Int? = nil) {
        self.match = match
        self.issuer = issuer
        self.fallback = fallback
        self.deadlineMS = deadlineMS
    }

    public var match: Match
    public var issuer: String
    /// `local`: when the issuer fails with a retryable error, encrypt locally from the vault.
    public var fallback: String?
    /// This route's deadline; `server.deadline_ms` when absent.
    public var deadlineMS: Int?

    enum CodingKeys: String, CodingKey {
        case match, issuer, fallback
        case deadlineMS = "deadline_ms"
    }
}

public struct SandboxConfig: ConfigSection {
    @DefaultFalse public var enabled: Bool
    /// Demo cards: seeded into the registry and known to the simulators.
    @DefaultEmpty<[SandboxCardConfig]> public var cards: [SandboxCardConfig]
    /// Faults the simulators start with, as `POST /v1/sandbox/faults` would set them.
    @DefaultEmpty<[SandboxFaultConfig]> public var faults: [SandboxFaultConfig]

    public init() {}
}

/// One injected fault: the next `count` requests to `issuer`'s simulator (its endpoint number
/// `endpoint`, 0 the first) get `mode`.
public struct SandboxFaultConfig: Sendable, Codable, Equatable {
    /// The most faults one simulator holds queued, from the config and the API together: the
    /// queue is memory any client of the sandbox can add to.
    public static let maxQueued = 64

    public enum Defaults {
        public enum Count: ConfigDefault { public static let value = 1 }
        public enum Endpoint: ConfigDefault { public static let value = 0 }
    }

    public var issuer: String
    public var mode: SandboxFaultMode
    @Default<Defaults.Count> public var count: Int
    @Default<Defaults.Endpoint> public var endpoint: Int
    /// `slow`: the delay before answering; `timeout`: how long to hold the request unanswered.
    public var delayMS: Int?
    /// `throttled`: the Retry-After seconds sent (default 1).
    public var retryAfterSeconds: Int?

    public init(issuer: String, mode: SandboxFaultMode, count: Int = 1, endpoint: Int = 0, delayMS: Int? = nil, retryAfterSeconds: Int? = nil) {
        self.issuer = issuer
        self.mode = mode
        self.count = count
        self.endpoint = endpoint
        self.delayMS = delayMS
        self.retryAfterSeconds = retryAfterSeconds
    }

    enum CodingKeys: String, CodingKey {
        case issuer, mode, count, endpoint
        case delayMS = "delay_ms"
        case retryAfterSeconds = "retry_after_seconds"
    }

    /// Problems with this fault against the configured issuers, each with `path` prefixed.
    public func problems(path: String, issuers: [String: IssuerConfig]) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if let config = issuers[issuer] {
            if !(0..<config.endpoints.count).contains(endpoint) {
                problems.append(.init("\(path).endpoint", "issuer \(issuer) has \(config.endpoints.count) endpoint(s)"))
            } else if !config.endpoints[endpoint].url.hasPrefix("sandbox://") {
                problems.append(.init("\(path).endpoint", "only sandbox:// endpoints take faults"))
            }
        } else {
            problems.append(.init("\(path).issuer", "unknown issuer '\(issuer)' (faults go to simulated issuers)"))
        }
        if !(1...10_000).contains(count) { problems.append(.init("\(path).count", "must be 1 to 10000")) }
        if let delayMS, !(0...120_000).contains(delayMS) { problems.append(.init("\(path).delay_ms", "must be 0 to 120000")) }
        if mode == .slow, delayMS == nil { problems.append(.init("\(path).delay_ms", "required for mode slow")) }
        if let retryAfterSeconds, !(0...3_600).contains(retryAfterSeconds) {
            problems.append(.init("\(path).retry_after_seconds", "must be 0 to 3600"))
        }
        return problems
    }
}

/// Card data a simulated issuer holds (sandbox test numbers only).
public struct SandboxCardData: Sendable, Codable, Equatable {
    public var number: String
    public var name: String
    /// MM/YY
    public var expiry: String

    public init(number: String, name: String, expiry: String) {
        self.number = number
        self.name = name
        self.expiry = expiry
    }

    /// (month, four-digit year), or nil when `expiry` is not MM/YY.
    public var expiryParts: (month: Int, year: Int)? {
        let parts = expiry.split(separator: "/")
        guard parts.count == 2, let month = Int(parts[0]), let year = Int(parts[1]), (1...12).contains(month), (0...99).contains(year)
        else { return nil }
        return (month, 2000 + year)
    }
}

public struct SandboxCardConfig: Sendable, Codable {
    public var cardID: String
    public var program: String
    /// What the simulator of this card's issuer encrypts; a test Visa when absent.
    public var card: SandboxCardData?
    /// Optional: without it the routing rules decide.
    public var issuer: String?
    public var issuerReference: [String: String]

    public init(cardID: String, program: String, issuer: String?, issuerReference: [String: String], card: SandboxCardData?) {
        self.cardID = cardID
        self.program = program
        self.issuer = issuer
        self.issuerReference = issuerReference
        self.card = card
    }

    enum CodingKeys: String, CodingKey {
        case cardID = "card_id"
        case program, issuer
        case issuerReference = "issuer_reference"
        case card
    }

    public var record: CardRecord {
        CardRecord(id: CardID(cardID), program: ProgramID(program), issuer: issuer.map { IssuerID($0) },
                   issuerReference: IssuerReference(issuerReference))
    }
}

extension SandboxCardData: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
