import Foundation

/// The YAML configuration, as written by ops. Decoding checks types; `validate()` checks meaning
/// and names the key path of every problem, e.g. `issuers.bridge.endpoints[0].url: not a URL`.
public struct GatewayConfig: Sendable, Decodable {
    public var server: ServerConfig
    public var clients: [ClientConfig]
    public var issuers: [String: IssuerConfig]
    public var routing: RoutingConfig
    public var store: StoreConfig
    public var local: LocalIssuerConfig
    public var vault: VaultConfig
    public var trust: TrustConfig
    public var sandbox: SandboxConfig
    /// The directory of the file this came from: relative paths in it (trust anchors) start here.
    public var baseDirectory: URL?

    enum CodingKeys: String, CodingKey { case server, clients, issuers, routing, store, local, vault, trust, sandbox }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        server = try c.decodeIfPresent(ServerConfig.self, forKey: .server) ?? ServerConfig()
        clients = try c.decodeIfPresent([ClientConfig].self, forKey: .clients) ?? []
        issuers = try c.decodeIfPresent([String: IssuerConfig].self, forKey: .issuers) ?? [:]
        routing = try c.decodeIfPresent(RoutingConfig.self, forKey: .routing) ?? RoutingConfig()
        store = try c.decodeIfPresent(StoreConfig.self, forKey: .store) ?? StoreConfig()
        local = try c.decodeIfPresent(LocalIssuerConfig.self, forKey: .local) ?? LocalIssuerConfig()
        vault = try c.decodeIfPresent(VaultConfig.self, forKey: .vault) ?? VaultConfig()
        trust = try c.decodeIfPresent(TrustConfig.self, forKey: .trust) ?? TrustConfig()
        sandbox = try c.decodeIfPresent(SandboxConfig.self, forKey: .sandbox) ?? SandboxConfig()
    }

    /// The longest deadline any route has (`server.deadline_ms` or a rule's `deadline_ms`): how
    /// long a request may legitimately run.
    public var longestDeadlineMS: Int {
        routing.rules.compactMap(\.deadlineMS).reduce(server.deadlineMS, max)
    }
}

public struct ServerConfig: Sendable, Decodable {
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var maxBodyBytes: Int = 64 * 1024
    /// One deadline for a whole provisioning, inside the ~20 s Apple gives the app.
    public var deadlineMS: Int = 15_000
    /// HTTPS on the listener. Without it a non-loopback listener refuses to start unless
    /// `allow_plaintext` says a TLS-terminating proxy is in front.
    public var tls: ServerTLSConfig?
    public var allowPlaintext = false
    /// `/metrics` without an API key (the sandbox); otherwise it needs an admin key.
    public var metricsPublic = false
    /// A connection with no request in progress for this long is closed.
    public var idleTimeoutMS = 30_000
    /// How long a request's head and body may take to arrive, from its first byte.
    public var readTimeoutMS = 10_000
    /// Open connections above this are closed as soon as they are accepted.
    public var maxConnections = 4_096
    /// Requests with a missing or wrong API key, per source address (token bucket).
    public var authFailureLimit = RateLimitConfig.authFailureDefault
    /// On SIGTERM/SIGINT `/readyz` answers 503 at once, and requests are still served for this
    /// long before the listener closes: a load balancer needs a few seconds to stop sending.
    public var shutdownDelayMS = 0
    /// Then requests in flight get this long to finish; the longest route deadline when absent.
    public var shutdownTimeoutMS: Int?

    public init() {}
    enum CodingKeys: String, CodingKey {
        case host, port, tls
        case maxBodyBytes = "max_body_bytes"
        case deadlineMS = "deadline_ms"
        case allowPlaintext = "allow_plaintext"
        case metricsPublic = "metrics_public"
        case idleTimeoutMS = "idle_timeout_ms"
        case readTimeoutMS = "read_timeout_ms"
        case maxConnections = "max_connections"
        case authFailureLimit = "auth_failure_limit"
        case shutdownDelayMS = "shutdown_delay_ms"
        case shutdownTimeoutMS = "shutdown_timeout_ms"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        host = try c.decodeIfPresent(String.self, forKey: .host) ?? host
        port = try c.decodeIfPresent(Int.self, forKey: .port) ?? port
        maxBodyBytes = try c.decodeIfPresent(Int.self, forKey: .maxBodyBytes) ?? maxBodyBytes
        deadlineMS = try c.decodeIfPresent(Int.self, forKey: .deadlineMS) ?? deadlineMS
        tls = try c.decodeIfPresent(ServerTLSConfig.self, forKey: .tls)
        allowPlaintext = try c.decodeIfPresent(Bool.self, forKey: .allowPlaintext) ?? allowPlaintext
        metricsPublic = try c.decodeIfPresent(Bool.self, forKey: .metricsPublic) ?? metricsPublic
        idleTimeoutMS = try c.decodeIfPresent(Int.self, forKey: .idleTimeoutMS) ?? idleTimeoutMS
        readTimeoutMS = try c.decodeIfPresent(Int.self, forKey: .readTimeoutMS) ?? readTimeoutMS
        maxConnections = try c.decodeIfPresent(Int.self, forKey: .maxConnections) ?? maxConnections
        authFailureLimit = try c.decodeIfPresent(RateLimitConfig.self, forKey: .authFailureLimit) ?? authFailureLimit
        shutdownDelayMS = try c.decodeIfPresent(Int.self, forKey: .shutdownDelayMS) ?? shutdownDelayMS
        shutdownTimeoutMS = try c.decodeIfPresent(Int.self, forKey: .shutdownTimeoutMS)
    }
}

/// `server.tls`: PEM files, relative to the config file's directory.
public struct ServerTLSConfig: Sendable, Decodable {
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
public struct RateLimitConfig: Sendable, Decodable, Equatable {
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

public struct ClientConfig: Sendable, Decodable {
    public var id: String
    /// Lowercase hex SHA-256 of the API key; the key itself is never in the file.
    public var apiKeySHA256: String
    public var programs: [String]
    /// Ops clients: manage the registry and read `/v1/admin/...`; they hold no programs and
    /// neither provision nor activate.
    public var admin: Bool
    /// May call `POST /v1/token-activations` without a `card_id` (routed to `routing.activations`).
    public var activationsWithoutCard: Bool
    /// Requests per second this client may make; `RateLimitConfig.clientDefault` when absent.
    public var rateLimit: RateLimitConfig?

    public init(id: String, apiKeySHA256: String, programs: [String], admin: Bool = false, activationsWithoutCard: Bool = false,
                rateLimit: RateLimitConfig? = nil) {
        self.id = id
        self.apiKeySHA256 = apiKeySHA256
        self.programs = programs
        self.admin = admin
        self.activationsWithoutCard = activationsWithoutCard
        self.rateLimit = rateLimit
    }

    enum CodingKeys: String, CodingKey {
        case id
        case apiKeySHA256 = "api_key_sha256"
        case programs, admin
        case activationsWithoutCard = "activations_without_card"
        case rateLimit = "rate_limit"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        apiKeySHA256 = try c.decode(String.self, forKey: .apiKeySHA256)
        programs = try c.decodeIfPresent([String].self, forKey: .programs) ?? []
        admin = try c.decodeIfPresent(Bool.self, forKey: .admin) ?? false
        activationsWithoutCard = try c.decodeIfPresent(Bool.self, forKey: .activationsWithoutCard) ?? false
        rateLimit = try c.decodeIfPresent(RateLimitConfig.self, forKey: .rateLimit)
    }
}

public enum IssuerKind: String, Sendable, Decodable, CaseIterable {
    case bridge, tmp, crossmint

    /// The issuer-reference fields a card of this kind must carry to be addressable upstream.
    /// Bridge's path names both the customer and the card account (see UPSTREAMS.md).
    public var requiredCredentials: [String] {
        switch self {
        case .bridge, .crossmint: ["api_key"]
        case .tmp: ["token"]
        }
    }

    /// Whether sending the same provisioning request twice is harmless: Bridge honours an
    /// Idempotency-Key that the gateway keeps the same across attempts; Crossmint's call is a GET.
    /// TMP's signed-cards POST has no idempotency key in its contract.
    public var resendSafe: Bool {
        switch self {
        case .bridge, .crossmint: true
        case .tmp: false
        }
    }

    /// The issuer-reference fields a card of this kind carries: all required, no others allowed.
    public var requiredReferenceFields: [String] {
        switch self {
        case .bridge: ["customer_id", "card_account_id"]
        case .tmp, .crossmint: ["issuer_card_id"]
        }
    }
}

public struct IssuerConfig: Sendable, Decodable {
    public var kind: IssuerKind
    public var endpoints: [EndpointConfig]
    /// Credential name -> `env:NAME` (or `sandbox` for the in-process simulators).
    public var credentials: [String: String]
    public var timeouts: TimeoutConfig
    public var wire: WireOptions
    /// Validate the PassKit chain before calling this issuer (invalid -> 422, no upstream call).
    public var validateChain: Bool
    public var retry: RetryConfig
    public var circuitBreaker: CircuitBreakerConfig
    /// The programs whose cards may use this issuer account; every program when absent. Tenants
    /// with their own issuer credentials name their programs here.
    public var programs: [String]?
    /// A private CA and/or a client certificate for mutual TLS.
    public var tls: UpstreamTLSConfig?

    enum CodingKeys: String, CodingKey {
        case kind, endpoints, credentials, timeouts, wire, retry, programs, tls
        case validateChain = "validate_chain"
        case circuitBreaker = "circuit_breaker"
    }

    /// Whether a card of `program` may be served through this issuer account.
    public func serves(program: String) -> Bool { programs.map { $0.contains(program) } ?? true }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kind = try c.decode(IssuerKind.self, forKey: .kind)
        endpoints = try c.decode([EndpointConfig].self, forKey: .endpoints)
        credentials = try c.decodeIfPresent([String: String].self, forKey: .credentials) ?? [:]
        timeouts = try c.decodeIfPresent(TimeoutConfig.self, forKey: .timeouts) ?? TimeoutConfig()
        wire = try c.decodeIfPresent(WireOptions.self, forKey: .wire) ?? WireOptions()
        validateChain = try c.decodeIfPresent(Bool.self, forKey: .validateChain) ?? false
        retry = try c.decodeIfPresent(RetryConfig.self, forKey: .retry) ?? RetryConfig()
        circuitBreaker = try c.decodeIfPresent(CircuitBreakerConfig.self, forKey: .circuitBreaker) ?? CircuitBreakerConfig()
        programs = try c.decodeIfPresent([String].self, forKey: .programs)
        tls = try c.decodeIfPresent(UpstreamTLSConfig.self, forKey: .tls)
    }
}

/// `issuers.<name>.tls`: PEM files, relative to the config file's directory.
public struct UpstreamTLSConfig: Sendable, Decodable {
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
public struct RetryConfig: Sendable, Decodable {
    public var maxAttempts = RetryPolicy.default.maxAttempts
    public var baseBackoffMS = Int(RetryPolicy.default.baseBackoff.wholeMilliseconds)
    public var maxBackoffMS = Int(RetryPolicy.default.maxBackoff.wholeMilliseconds)
    public var minAttemptMS = Int(RetryPolicy.default.minAttemptTime.wholeMilliseconds)
    /// Rows tried before the issuer's default decision table: `{on: "500", action: fail, code: ...}`.
    public var decisions: [RetryDecisionConfig] = []

    public init() {}
    enum CodingKeys: String, CodingKey {
        case maxAttempts = "max_attempts"
        case baseBackoffMS = "base_backoff_ms"
        case maxBackoffMS = "max_backoff_ms"
        case minAttemptMS = "min_attempt_ms"
        case decisions
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        maxAttempts = try c.decodeIfPresent(Int.self, forKey: .maxAttempts) ?? maxAttempts
        baseBackoffMS = try c.decodeIfPresent(Int.self, forKey: .baseBackoffMS) ?? baseBackoffMS
        maxBackoffMS = try c.decodeIfPresent(Int.self, forKey: .maxBackoffMS) ?? maxBackoffMS
        minAttemptMS = try c.decodeIfPresent(Int.self, forKey: .minAttemptMS) ?? minAttemptMS
        decisions = try c.decodeIfPresent([RetryDecisionConfig].self, forKey: .decisions) ?? []
    }

    public var policy: RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, baseBackoff: .milliseconds(baseBackoffMS), maxBackoff: .milliseconds(maxBackoffMS),
                    minAttemptTime: .milliseconds(minAttemptMS))
    }
}

public struct RetryDecisionConfig: Sendable, Decodable {
    /// `connect_failed`, `timeout`, `reset`, `malformed`, an HTTP status, `4xx` or `5xx`.
    public var on: String
    public var action: String
    /// The unified code the caller sees; the default row's code for that failure when absent.
    public var code: String?

    public init(on: String, action: String, code: String? = nil) {
        self.on = on
        self.action = action
        self.code = code
    }

    /// Why this row may not be used for an issuer of `kind`, or nil when it may.
    public func refusal(kind: IssuerKind) -> String? {
        guard let match = RetryRule.Match(parsing: on), let action = RetryAction(rawValue: action), action != .fail else { return nil }
        switch match {
        case .condition(.status(let status)) where (400..<500).contains(status) && status != 429:
            return "a 4xx is never sent again (only 429 is)"
        case .statusClass(4):
            return "a 4xx is never sent again (only 429 is)"
        case .condition(.connectFailed), .condition(.status(429)), .condition(.status(503)):
            return nil
        default:
            return kind.resendSafe ? nil
                : "\(kind.rawValue) has no idempotency key: a request that may have reached it is never sent again"
        }
    }

    /// The row, or nil when a field does not parse (validation names it).
    public func rule(defaults: RetryDecisionTable) -> RetryRule? {
        guard let match = RetryRule.Match(parsing: on), let action = RetryAction(rawValue: action) else { return nil }
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
public struct CircuitBreakerConfig: Sendable, Decodable {
    public var failureThreshold = CircuitBreaker.Policy.default.failureThreshold
    public var openMS = Int(CircuitBreaker.Policy.default.openDuration.wholeMilliseconds)
    public var halfOpenProbes = CircuitBreaker.Policy.default.halfOpenProbes

    public init() {}
    enum CodingKeys: String, CodingKey {
        case failureThreshold = "failure_threshold"
        case openMS = "open_ms"
        case halfOpenProbes = "half_open_probes"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        failureThreshold = try c.decodeIfPresent(Int.self, forKey: .failureThreshold) ?? failureThreshold
        openMS = try c.decodeIfPresent(Int.self, forKey: .openMS) ?? openMS
        halfOpenProbes = try c.decodeIfPresent(Int.self, forKey: .halfOpenProbes) ?? halfOpenProbes
    }

    public var policy: CircuitBreaker.Policy {
        CircuitBreaker.Policy(failureThreshold: failureThreshold, openDuration: .milliseconds(openMS), halfOpenProbes: halfOpenProbes)
    }
}

public struct EndpointConfig: Sendable, Decodable {
    /// `https://...`, or `sandbox://<kind>` for the in-process simulator of that upstream.
    public var url: String
    public init(url: String) { self.url = url }
}

public struct TimeoutConfig: Sendable, Decodable {
    /// Envoy's default connect timeout is 5 s; an issuer's API on the internet connects in well
    /// under 1 s, so 2 s leaves room for a second endpoint.
    public var connectMS: Int = 2_000
    /// Per try: three tries of 5 s fit the 15 s deadline (Envoy has no per-try default; its
    /// route timeout is 15 s).
    public var requestMS: Int = 5_000

    public init() {}
    enum CodingKeys: String, CodingKey {
        case connectMS = "connect_ms"
        case requestMS = "request_ms"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        connectMS = try c.decodeIfPresent(Int.self, forKey: .connectMS) ?? connectMS
        requestMS = try c.decodeIfPresent(Int.self, forKey: .requestMS) ?? requestMS
    }
}

/// Per-issuer dialect switches. Each is meaningful for one kind only; validation says so.
public struct WireOptions: Sendable, Decodable {
    /// Bridge: `hex` (Bridge's default) or `base64`, for the four Apple Pay request fields.
    public var encoding: BinaryEncoding?
    /// TMP: `bearer` (Authorization: Bearer) or `header:<Name>` (the token in that header).
    public var auth: String?

    public init() {}
}

/// The gateway's own issuer `local`: the ECC_V2 encryptor over card data in the vault.
public struct LocalIssuerConfig: Sendable, Decodable {
    public var enabled = false
    /// Keys the default HMAC activation data: `env:NAME` (32 bytes, base64 or hex) or `sandbox`.
    public var activationKey: String?
    public init() {}
    enum CodingKeys: String, CodingKey {
        case enabled
        case activationKey = "activation_key"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        enabled = try c.decodeIfPresent(Bool.self, forKey: .enabled) ?? false
        activationKey = try c.decodeIfPresent(String.self, forKey: .activationKey)
    }
}

public struct VaultConfig: Sendable, Decodable {
    /// One key: `env:NAME` (32 bytes, base64 or hex) or `sandbox` (a fixed demo key). Its id is `default`.
    public var key: String?
    /// Several keys for rotation: exactly one `active: true` seals; every listed key opens.
    public var keys: [VaultKeyConfig] = []
    public init() {}
    enum CodingKeys: String, CodingKey { case key, keys }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        key = try c.decodeIfPresent(String.self, forKey: .key)
        keys = try c.decodeIfPresent([VaultKeyConfig].self, forKey: .keys) ?? []
    }

    /// `keys`, or `key` as the one active key `default`.
    public var keyring: [VaultKeyConfig] {
        if let key { return [VaultKeyConfig(id: VaultKeyConfig.defaultID, key: key, active: true)] + keys }
        return keys
    }
}

public struct VaultKeyConfig: Sendable, Decodable, Equatable {
    public static let defaultID = "default"
    /// Stored beside every sealed entry: 1-32 of A-Z a-z 0-9 _ - .
    public var id: String
    public var key: String
    public var active: Bool
    public init(id: String, key: String, active: Bool = false) {
        self.id = id
        self.key = key
        self.active = active
    }
    enum CodingKeys: String, CodingKey { case id, key, active }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        key = try c.decode(String.self, forKey: .key)
        active = try c.decodeIfPresent(Bool.self, forKey: .active) ?? false
    }
}

/// Trust anchors for PassKit certificate chains: `apple` is the bundled Apple Root CA - G3 (the
/// default); anything else is a PEM or DER file path.
public struct TrustConfig: Sendable, Decodable {
    public var anchors: [String] = ["apple"]
    public init() {}
    enum CodingKeys: String, CodingKey { case anchors }
    public init(from decoder: any Decoder) throws {
        anchors = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent([String].self, forKey: .anchors) ?? ["apple"]
    }
}

/// Where state lives: an embedded SQLite file by default, PostgreSQL when `postgres.url` is set.
public struct StoreConfig: Sendable, Decodable {
    public struct SQLite: Sendable, Decodable {
        public var path: String = ".gateway/gateway.sqlite"
        public init() {}
        enum CodingKeys: String, CodingKey { case path }
        public init(from decoder: any Decoder) throws {
            path = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .path) ?? path
        }
    }

    public struct Postgres: Sendable, Decodable {
        /// `env:NAME`, or a `postgres://` URL without a password.
        public var url: String
        public var connectTimeoutMS: Int = 5_000
        /// The CA that signed the server's certificate (PEM), for `sslmode=verify-full`.
        public var caFile: String?
        enum CodingKeys: String, CodingKey {
            case url
            case connectTimeoutMS = "connect_timeout_ms"
            case caFile = "ca_file"
        }
        public init(url: String, caFile: String? = nil) {
            self.url = url
            self.caFile = caFile
        }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            url = try c.decode(String.self, forKey: .url)
            connectTimeoutMS = try c.decodeIfPresent(Int.self, forKey: .connectTimeoutMS) ?? connectTimeoutMS
            caFile = try c.decodeIfPresent(String.self, forKey: .caFile)
        }
    }

    public var sqlite = SQLite()
    public var postgres: Postgres?
    /// How long a POST's answer is kept for replay under its Idempotency-Key.
    public var idempotencyTTLSeconds: Int = 86_400

    public init() {}
    enum CodingKeys: String, CodingKey {
        case sqlite, postgres
        case idempotencyTTLSeconds = "idempotency_ttl_seconds"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sqlite = try c.decodeIfPresent(SQLite.self, forKey: .sqlite) ?? SQLite()
        postgres = try c.decodeIfPresent(Postgres.self, forKey: .postgres)
        idempotencyTTLSeconds = try c.decodeIfPresent(Int.self, forKey: .idempotencyTTLSeconds) ?? idempotencyTTLSeconds
    }
}

public struct RoutingConfig: Sendable, Decodable {
    public struct Activations: Sendable, Decodable {
        /// The issuer that activates tokens when the request names no card.
        public var issuer: String?
        public init(issuer: String? = nil) { self.issuer = issuer }
    }

    public var rules: [RoutingRuleConfig] = []
    public var activations = Activations()

    public init() {}
    enum CodingKeys: String, CodingKey { case rules, activations }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        rules = try c.decodeIfPresent([RoutingRuleConfig].self, forKey: .rules) ?? []
        activations = try c.decodeIfPresent(Activations.self, forKey: .activations) ?? Activations()
    }

    public var table: RoutingTable {
        RoutingTable(rules: rules.map {
            RoutingRule(program: $0.match.program.map { ProgramID($0) }, cardIDPrefix: $0.match.cardIDPrefix,
                        wallet: $0.match.wallet, issuer: IssuerID($0.issuer), fallback: $0.fallback.map { IssuerID($0) },
                        deadline: $0.deadlineMS.map { .milliseconds($0) })
        })
    }
}

public struct RoutingRuleConfig: Sendable, Decodable {
    public struct Match: Sendable, Decodable {
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

public struct SandboxConfig: Sendable, Decodable {
    public var enabled: Bool = false
    /// Demo cards: seeded into the registry and known to the simulators.
    public var cards: [SandboxCardConfig] = []
    /// Faults the simulators start with, as `POST /v1/sandbox/faults` would set them.
    public var faults: [SandboxFaultConfig] = []

    public init() {}
    enum CodingKeys: String, CodingKey { case enabled, cards, faults }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        enabled = try c.decodeIfPresent(Bool.self, forKey: .enabled) ?? false
        cards = try c.decodeIfPresent([SandboxCardConfig].self, forKey: .cards) ?? []
        faults = try c.decodeIfPresent([SandboxFaultConfig].self, forKey: .faults) ?? []
    }
}

/// One injected fault: the next `count` requests to `issuer`'s simulator (its endpoint number
/// `endpoint`, 0 the first) get `mode`.
public struct SandboxFaultConfig: Sendable, Codable, Equatable {
    public var issuer: String
    public var mode: String
    public var count: Int
    public var endpoint: Int
    /// `slow`: the delay before answering; `timeout`: how long to hold the request unanswered.
    public var delayMS: Int?
    /// `throttled`: the Retry-After seconds sent (default 1).
    public var retryAfterSeconds: Int?

    public init(issuer: String, mode: String, count: Int = 1, endpoint: Int = 0, delayMS: Int? = nil, retryAfterSeconds: Int? = nil) {
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
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        issuer = try c.decode(String.self, forKey: .issuer)
        mode = try c.decode(String.self, forKey: .mode)
        count = try c.decodeIfPresent(Int.self, forKey: .count) ?? 1
        endpoint = try c.decodeIfPresent(Int.self, forKey: .endpoint) ?? 0
        delayMS = try c.decodeIfPresent(Int.self, forKey: .delayMS)
        retryAfterSeconds = try c.decodeIfPresent(Int.self, forKey: .retryAfterSeconds)
    }

    public static let modes = ["unavailable", "throttled", "timeout", "reset", "slow", "garbage", "rejected"]

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
        if !Self.modes.contains(mode) { problems.append(.init("\(path).mode", "must be one of: \(Self.modes.joined(separator: ", "))")) }
        if !(1...10_000).contains(count) { problems.append(.init("\(path).count", "must be 1 to 10000")) }
        if let delayMS, !(0...120_000).contains(delayMS) { problems.append(.init("\(path).delay_ms", "must be 0 to 120000")) }
        if mode == "slow", delayMS == nil { problems.append(.init("\(path).delay_ms", "required for mode slow")) }
        if let retryAfterSeconds, !(0...3_600).contains(retryAfterSeconds) {
            problems.append(.init("\(path).retry_after_seconds", "must be 0 to 3600"))
        }
        return problems
    }
}

/// Card data a simulated issuer holds (sandbox test numbers only).
public struct SandboxCardData: Sendable, Decodable, Equatable {
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

public struct SandboxCardConfig: Sendable, Decodable {
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
        case program, issuer, card
        case issuerReference = "issuer_reference"
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
