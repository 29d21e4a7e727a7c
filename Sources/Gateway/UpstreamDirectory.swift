import Foundation
import Issuers
import Logging
import ProvisioningCore
import Synchronization

/// Where `sandbox://<kind>[/<instance>]` endpoints and `sandbox` credentials point: the
/// in-process simulators, one per distinct sandbox URL, and one key per upstream kind.
public struct SandboxEndpoints: Sendable {
    public var baseURLs: [String: URL]
    public var secrets: [IssuerKind: String]
    public init(baseURLs: [String: URL] = [:], secrets: [IssuerKind: String] = [:]) {
        self.baseURLs = baseURLs
        self.secrets = secrets
    }
}

/// One configured issuer: a connector per endpoint (failover order), and how it is retried.
public struct UpstreamIssuer: Sendable {
    public let issuer: IssuerID
    public let kind: IssuerKind
    public let endpoints: [any IssuerConnector]
    public let retry: RetryPolicy
    public let decisions: RetryDecisionTable
    public let breaker: CircuitBreaker.Policy
    /// The wallets it is used for: its kind's, or fewer when `issuers.<name>.wallets` narrows them.
    public var wallets: Set<Wallet> = Set(Wallet.allCases)
}

/// Every configured issuer, loaded once before the server starts (sandbox endpoints are known only
/// once the simulators listen), with its secrets resolved. Its HTTP clients are shut down by
/// `shutdown()` after the server has stopped.
public final class UpstreamDirectory: Sendable {
    private struct State {
        var issuers: [IssuerID: UpstreamIssuer] = [:]
        /// Each issuer's HTTP client (its connection pool), which the next generation may reuse.
        var clients: [IssuerID: UpstreamHTTP] = [:]
    }

    /// Whether a config reload may keep an issuer's HTTP client, and so its warm connections: its
    /// timeouts and pool settings are unchanged and it has no TLS files (files are read again on
    /// every reload, so a rotated client certificate takes effect with a new client).
    private static func reusable(_ client: UpstreamHTTP, for config: IssuerConfig) -> Bool {
        config.tls == nil && config.timeouts == client.timeouts && config.connections == client.poolConfig
    }
    private let state: Mutex<State>

    public var issuers: [IssuerID: UpstreamIssuer] { state.withLock { $0.issuers } }

    /// One issuer, as a request looks it up.
    public func issuer(_ id: IssuerID) -> UpstreamIssuer? { state.withLock { $0.issuers[id] } }

    /// The HTTP client an issuer's endpoints share (its connection pool).
    public func client(_ issuer: IssuerID) -> UpstreamHTTP? { state.withLock { $0.clients[issuer] } }

    /// Each issuer's connection pool now (its connections open and idle, calls waiting for one).
    public func connections() -> [IssuerID: UpstreamHTTP.ConnectionCounts] {
        state.withLock { $0.clients }.mapValues(\.connections)
    }

    public init(issuers: [IssuerID: UpstreamIssuer] = [:]) {
        state = Mutex(State(issuers: issuers))
    }

    /// Shuts the HTTP clients down; a client that fails to is logged by itself and skipped.
    public func shutdown() async {
        await shutdown(keeping: [])
    }

    /// Shuts down the clients that none of `others` holds: a retired config generation's, once its
    /// last request has finished, keeping those the generations still serving reuse.
    public func shutdown(keeping others: [UpstreamDirectory]) async {
        let kept = others.filter { $0 !== self }.flatMap { other in other.state.withLock { Array($0.clients.values) } }
        let clients = state.withLock { state in
            defer { state.clients = [:] }
            return Array(state.clients.values)
        }
        await Self.shutDown(clients, keeping: kept)
    }

    /// Shuts down each of `clients` that is not one of `kept`.
    private static func shutDown(_ clients: [UpstreamHTTP], keeping kept: [UpstreamHTTP] = []) async {
        let kept = Set(kept.map(ObjectIdentifier.init))
        for client in clients where !kept.contains(ObjectIdentifier(client)) {
            do {
                try await client.shutdown()
            } catch {
                // Already shut down, or its event loop is gone: nothing is left to release.
            }
        }
    }

    /// The issuers' `env:` credentials that `environment` does not hold, checked before anything
    /// starts (the directory itself is loaded only once sandbox endpoints are known): the same
    /// credential names `load` resolves, those of each issuer's kind.
    public static func missingSecrets(config: GatewayConfig, environment: [String: String]) -> [ConfigProblem] {
        config.issuers.keys.sorted().flatMap { name -> [ConfigProblem] in
            let issuer = config.issuers[name]!
            var problems: [ConfigProblem] = []
            for credential in IssuerCatalog.definition(issuer.kind)?.credentialNames ?? [] {
                do throws(ConfigProblem) {
                    _ = try SecretReference.resolve(issuer.credentials[credential], at: "issuers.\(name).credentials.\(credential)", in: environment)
                } catch {
                    problems.append(error)
                }
            }
            return problems
        }
    }

    /// Two issuers of one kind sharing an endpoint whose credentials name different variables
    /// holding the same values: one upstream account under two names, which the file's own check
    /// (the references compared) cannot see. The values are compared, never shown.
    public static func sameAccountProblems(config: GatewayConfig, environment: [String: String]) -> [ConfigProblem] {
        GatewayConfig.issuersSharingAnEndpoint(config.issuers).compactMap { name, other -> ConfigProblem? in
            let (a, b) = (config.issuers[name]!, config.issuers[other]!)
            // Same references: the file's check already says so.
            guard a.credentials != b.credentials else { return nil }
            let names = IssuerCatalog.definition(a.kind)?.credentialNames ?? []
            guard !names.isEmpty else { return nil }
            for credential in names {
                guard case .value(let first)? = try? SecretReference.resolve(a.credentials[credential], at: "", in: environment),
                      case .value(let second)? = try? SecretReference.resolve(b.credentials[credential], at: "", in: environment),
                      first == second else { return nil }
            }
            return ConfigProblem("issuers.\(other).credentials", "the same account as issuers.\(name) (same endpoint, and its variables hold the "
                + "same credentials): one upstream account is one issuer, limit it with programs: instead")
        }
    }

    /// Every `issuers.<name>.tls` file that cannot be read or used, as `load` would find it,
    /// without building any client (start-up checks them before anything listens; `config check`).
    public static func tlsProblems(config: GatewayConfig) -> [ConfigProblem] {
        config.issuers.keys.sorted().flatMap { name -> [ConfigProblem] in
            guard let tls = config.issuers[name]!.tls else { return [] }
            do throws(ConfigError) {
                _ = try UpstreamTLS.load(tls, path: "issuers.\(name).tls", resolve: config.resolvePath)
                return []
            } catch {
                return error.problems
            }
        }
    }

    /// The wallets each configured issuer is used for, as `load` sets them (its kind's, narrowed by
    /// `issuers.<name>.wallets`); an issuer of an unknown kind is used for none.
    public static func walletsUsed(config: GatewayConfig) -> [IssuerID: Set<Wallet>] {
        Dictionary(uniqueKeysWithValues: config.issuers.map { entry in
            (IssuerID(entry.key), IssuerCatalog.definition(entry.value.kind).map { entry.value.walletsUsed(by: $0) } ?? [])
        })
    }

    /// A directory loaded from `config` at once (tools, tests, and a config reload, which passes the
    /// serving generation's directory as `previous` so unchanged issuers keep their clients).
    public static func build(
        config: GatewayConfig, environment: [String: String], sandbox: SandboxEndpoints = SandboxEndpoints(), logger: Logger,
        reusing previous: UpstreamDirectory? = nil, clock: GatewayClock = .continuous
    ) async throws(ConfigError) -> UpstreamDirectory {
        let directory = UpstreamDirectory()
        try await directory.load(config: config, environment: environment, sandbox: sandbox, logger: logger, reusing: previous, clock: clock)
        return directory
    }

    /// Resolves `env:NAME` from `environment` and `sandbox` references from `sandbox`; a missing
    /// variable is a config problem naming the key path. Nothing changes when it throws. `clock`
    /// decides how long the issuers' connections have been idle.
    public func load(
        config: GatewayConfig, environment: [String: String], sandbox: SandboxEndpoints = SandboxEndpoints(), logger: Logger,
        reusing previous: UpstreamDirectory? = nil, clock: GatewayClock = .continuous
    ) async throws(ConfigError) {
        var problems: [ConfigProblem] = []
        var issuers: [IssuerID: UpstreamIssuer] = [:]
        var clients: [IssuerID: UpstreamHTTP] = [:]
        /// Built here (not reused): what a failed load shuts down again.
        var built: [UpstreamHTTP] = []
        let previousClients = previous?.state.withLock { $0.clients } ?? [:]

        for name in config.issuers.keys.sorted() {
            let issuerConfig = config.issuers[name]!
            let issuer = IssuerID(name)
            let path = "issuers.\(name)"
            guard let definition = IssuerCatalog.definition(issuerConfig.kind) else {
                problems.append(.init("\(path).kind", "no issuer kind \(issuerConfig.kind) in this build"))
                continue
            }

            func secret(_ credential: String) -> Sensitive<String>? {
                let keyPath = "\(path).credentials.\(credential)"
                do {
                    switch try SecretReference.resolve(issuerConfig.credentials[credential], at: keyPath, in: environment) {
                    case .value(let value):
                        return value
                    case .sandbox:
                        guard let secret = sandbox.secrets[issuerConfig.kind] else {
                            problems.append(.init(keyPath, "no \(issuerConfig.kind) simulator is running"))
                            return nil
                        }
                        return Sensitive(secret)
                    }
                } catch {
                    problems.append(error)
                    return nil
                }
            }

            var baseURLs: [URL] = []
            for (index, endpoint) in issuerConfig.endpoints.enumerated() {
                if endpoint.url.hasPrefix("sandbox://") {
                    guard let url = sandbox.baseURLs[endpoint.url] else {
                        problems.append(.init("\(path).endpoints[\(index)].url", "no simulator runs for \(endpoint.url)"))
                        continue
                    }
                    baseURLs.append(url)
                } else {
                    baseURLs.append(URL(string: endpoint.url)!)
                }
            }

            // One HTTP client (connection pool) per issuer, shared by its endpoints.
            var tls: UpstreamTLS?
            if let tlsConfig = issuerConfig.tls {
                do {
                    tls = try UpstreamTLS.load(tlsConfig, path: "\(path).tls", resolve: config.resolvePath)
                } catch {
                    problems += error.problems
                }
            }
            let http: UpstreamHTTP
            if let reused = previousClients[issuer], Self.reusable(reused, for: issuerConfig) {
                http = reused
            } else {
                http = UpstreamHTTP(issuer: issuer, timeouts: issuerConfig.timeouts, tls: tls, logger: logger, pool: issuerConfig.connections, clock: clock)
                built.append(http)
            }
            clients[issuer] = http
            // Every credential the kind names, resolved once; the definition types them.
            var secrets: [String: Sensitive<String>] = [:]
            for credential in definition.credentialNames {
                if let value = secret(credential) { secrets[credential] = value }
            }
            guard secrets.count == definition.credentialNames.count, baseURLs.count == issuerConfig.endpoints.count else { continue }
            let endpoints: [any IssuerConnector] = baseURLs.map { baseURL in
                definition.makeConnector(issuer: issuer, baseURL: baseURL, secret: { secrets[$0]! }, options: issuerConfig.wire, http: http)
            }
            let defaults = RetryDecisionTable.defaults(resendSafe: definition.resendSafe)
            issuers[issuer] = UpstreamIssuer(
                issuer: issuer, kind: issuerConfig.kind, endpoints: endpoints, retry: issuerConfig.retry.policy,
                decisions: defaults.overridden(by: issuerConfig.retry.decisions.compactMap { $0.rule(defaults: defaults) }),
                breaker: issuerConfig.circuitBreaker.policy, wallets: issuerConfig.walletsUsed(by: definition))
        }
        guard problems.isEmpty else {
            await Self.shutDown(built)
            throw ConfigError(source: "environment", problems: problems)
        }
        let replaced = state.withLock { state in
            defer { state = State(issuers: issuers, clients: clients) }
            return Array(state.clients.values)
        }
        await Self.shutDown(replaced, keeping: Array(clients.values))
    }
}
