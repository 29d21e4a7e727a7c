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
}

public struct ServerConfig: Sendable, Decodable {
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var maxBodyBytes: Int = 64 * 1024
    /// One deadline for a whole provisioning, inside the ~20 s Apple gives the app.
    public var deadlineMS: Int = 15_000

    public init() {}
    enum CodingKeys: String, CodingKey {
        case host, port
        case maxBodyBytes = "max_body_bytes"
        case deadlineMS = "deadline_ms"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        host = try c.decodeIfPresent(String.self, forKey: .host) ?? host
        port = try c.decodeIfPresent(Int.self, forKey: .port) ?? port
        maxBodyBytes = try c.decodeIfPresent(Int.self, forKey: .maxBodyBytes) ?? maxBodyBytes
        deadlineMS = try c.decodeIfPresent(Int.self, forKey: .deadlineMS) ?? deadlineMS
    }
}

public struct ClientConfig: Sendable, Decodable {
    public var id: String
    /// Lowercase hex SHA-256 of the API key; the key itself is never in the file.
    public var apiKeySHA256: String
    public var programs: [String]

    public init(id: String, apiKeySHA256: String, programs: [String]) {
        self.id = id
        self.apiKeySHA256 = apiKeySHA256
        self.programs = programs
    }

    enum CodingKeys: String, CodingKey {
        case id
        case apiKeySHA256 = "api_key_sha256"
        case programs
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

    enum CodingKeys: String, CodingKey {
        case kind, endpoints, credentials, timeouts, wire
        case validateChain = "validate_chain"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kind = try c.decode(IssuerKind.self, forKey: .kind)
        endpoints = try c.decode([EndpointConfig].self, forKey: .endpoints)
        credentials = try c.decodeIfPresent([String: String].self, forKey: .credentials) ?? [:]
        timeouts = try c.decodeIfPresent(TimeoutConfig.self, forKey: .timeouts) ?? TimeoutConfig()
        wire = try c.decodeIfPresent(WireOptions.self, forKey: .wire) ?? WireOptions()
        validateChain = try c.decodeIfPresent(Bool.self, forKey: .validateChain) ?? false
    }
}

public struct EndpointConfig: Sendable, Decodable {
    /// `https://...`, or `sandbox://<kind>` for the in-process simulator of that upstream.
    public var url: String
    public init(url: String) { self.url = url }
}

public struct TimeoutConfig: Sendable, Decodable {
    public var connectMS: Int = 2_000
    public var requestMS: Int = 8_000

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
    /// `env:NAME` (32 bytes, base64 or hex) or `sandbox` (a fixed demo key).
    public var key: String?
    public init() {}
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
        enum CodingKeys: String, CodingKey {
            case url
            case connectTimeoutMS = "connect_timeout_ms"
        }
        public init(url: String) { self.url = url }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            url = try c.decode(String.self, forKey: .url)
            connectTimeoutMS = try c.decodeIfPresent(Int.self, forKey: .connectTimeoutMS) ?? connectTimeoutMS
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
    public var rules: [RoutingRuleConfig] = []

    public init() {}
    enum CodingKeys: String, CodingKey { case rules }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        rules = try c.decodeIfPresent([RoutingRuleConfig].self, forKey: .rules) ?? []
    }

    public var table: RoutingTable {
        RoutingTable(rules: rules.map {
            RoutingRule(program: $0.match.program.map { ProgramID($0) }, cardIDPrefix: $0.match.cardIDPrefix,
                        wallet: $0.match.wallet, issuer: IssuerID($0.issuer), fallback: $0.fallback.map { IssuerID($0) })
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
    }
    public var match: Match
    public var issuer: String
    /// `local`: when the issuer fails with a retryable error, encrypt locally from the vault.
    public var fallback: String?
}

public struct SandboxConfig: Sendable, Decodable {
    public var enabled: Bool = false
    /// Demo cards: seeded into the registry and known to the simulators.
    public var cards: [SandboxCardConfig] = []

    public init() {}
    enum CodingKeys: String, CodingKey { case enabled, cards }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        enabled = try c.decodeIfPresent(Bool.self, forKey: .enabled) ?? false
        cards = try c.decodeIfPresent([SandboxCardConfig].self, forKey: .cards) ?? []
    }
}

/// Card data a simulated issuer holds (sandbox test numbers only).
public struct SandboxCardData: Sendable, Decodable, Equatable {
    public var number: String
    public var name: String
    /// MM/YY
    public var expiry: String

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
