import Foundation
import Issuers
import Logging
import ProvisioningCore

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
}

/// Every configured issuer, built once at start-up with its secrets resolved.
public final class UpstreamDirectory: Sendable {
    public let issuers: [IssuerID: UpstreamIssuer]
    private let clients: [UpstreamHTTP]

    public init(issuers: [IssuerID: UpstreamIssuer], clients: [UpstreamHTTP] = []) {
        self.issuers = issuers
        self.clients = clients
    }

    public func shutdown() async {
        for client in clients { try? await client.shutdown() }
    }

    /// Resolves `env:NAME` from `environment` and `sandbox` references from `sandbox`; a missing
    /// variable is a config problem naming the key path.
    public static func build(
        config: GatewayConfig, environment: [String: String], sandbox: SandboxEndpoints = SandboxEndpoints(), logger: Logger
    ) async throws(ConfigError) -> UpstreamDirectory {
        var problems: [ConfigProblem] = []
        var issuers: [IssuerID: UpstreamIssuer] = [:]
        var clients: [UpstreamHTTP] = []

        for name in config.issuers.keys.sorted() {
            let issuerConfig = config.issuers[name]!
            let issuer = IssuerID(name)
            let path = "issuers.\(name)"

            func secret(_ credential: String) -> Sensitive<String>? {
                let keyPath = "\(path).credentials.\(credential)"
                do {
                    switch try SecretReference.resolve(issuerConfig.credentials[credential], at: keyPath, in: environment) {
                    case .value(let value):
                        return value
                    case .sandbox:
                        guard let secret = sandbox.secrets[issuerConfig.kind] else {
                            problems.append(.init(keyPath, "no \(issuerConfig.kind.rawValue) simulator is running"))
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
            let http = UpstreamHTTP(issuer: issuer, timeouts: issuerConfig.timeouts, tls: tls, logger: logger)
            clients.append(http)
            let credential: Sensitive<String>? = secret(issuerConfig.kind == .tmp ? "token" : "api_key")
            guard let credential, baseURLs.count == issuerConfig.endpoints.count else { continue }
            let endpoints: [any IssuerConnector] = baseURLs.map { baseURL in
                switch issuerConfig.kind {
                case .bridge:
                    BridgeConnector(issuer: issuer, baseURL: baseURL, apiKey: credential, encoding: issuerConfig.wire.encoding ?? .hex, http: http)
                case .tmp:
                    TMPConnector(issuer: issuer, baseURL: baseURL, token: credential, auth: issuerConfig.wire.auth ?? .bearer, http: http)
                case .crossmint:
                    CrossmintConnector(issuer: issuer, baseURL: baseURL, apiKey: credential, http: http)
                }
            }
            let defaults = RetryDecisionTable.defaults(resendSafe: issuerConfig.kind.resendSafe)
            issuers[issuer] = UpstreamIssuer(
                issuer: issuer, kind: issuerConfig.kind, endpoints: endpoints, retry: issuerConfig.retry.policy,
                decisions: defaults.overridden(by: issuerConfig.retry.decisions.compactMap { $0.rule(defaults: defaults) }),
                breaker: issuerConfig.circuitBreaker.policy)
        }
        guard problems.isEmpty else {
            await UpstreamDirectory(issuers: [:], clients: clients).shutdown()
            throw ConfigError(source: "environment", problems: problems)
        }
        return UpstreamDirectory(issuers: issuers, clients: clients)
    }
}
