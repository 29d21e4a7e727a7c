import Foundation
import Issuers
import Logging
import ProvisioningCore

/// Where `sandbox://<kind>` endpoints and `sandbox` credentials point: the in-process simulators.
public struct SandboxUpstream: Sendable {
    public let baseURL: URL
    public let secret: String
    public init(baseURL: URL, secret: String) {
        self.baseURL = baseURL
        self.secret = secret
    }
}

/// Every configured issuer's connector, built once at start-up with its secrets resolved.
public final class UpstreamDirectory: Sendable {
    public let connectors: [IssuerID: any IssuerConnector]
    private let clients: [UpstreamHTTP]

    public init(connectors: [IssuerID: any IssuerConnector], clients: [UpstreamHTTP] = []) {
        self.connectors = connectors
        self.clients = clients
    }

    public func shutdown() async {
        for client in clients { try? await client.shutdown() }
    }

    /// Resolves `env:NAME` from `environment` and `sandbox` references from `sandbox`; a missing
    /// variable is a config problem naming the key path.
    public static func build(
        config: GatewayConfig, environment: [String: String], sandbox: [IssuerKind: SandboxUpstream], logger: Logger
    ) async throws(ConfigError) -> UpstreamDirectory {
        var problems: [ConfigProblem] = []
        var connectors: [IssuerID: any IssuerConnector] = [:]
        var clients: [UpstreamHTTP] = []

        for name in config.issuers.keys.sorted() {
            let issuerConfig = config.issuers[name]!
            let issuer = IssuerID(name)
            let path = "issuers.\(name)"

            func secret(_ credential: String) -> Sensitive<String>? {
                let keyPath = "\(path).credentials.\(credential)"
                switch issuerConfig.credentials[credential].flatMap(SecretReference.init(parsing:)) {
                case .environment(let variable)?:
                    guard let value = environment[variable], !value.isEmpty else {
                        problems.append(.init(keyPath, "environment variable \(variable) is not set"))
                        return nil
                    }
                    return Sensitive(value)
                case .sandbox?:
                    guard let upstream = sandbox[issuerConfig.kind] else {
                        problems.append(.init(keyPath, "no \(issuerConfig.kind.rawValue) simulator is running"))
                        return nil
                    }
                    return Sensitive(upstream.secret)
                case nil:
                    problems.append(.init(keyPath, "required"))
                    return nil
                }
            }

            // Failover across endpoints is the resilience issue's; the first endpoint serves.
            let endpointText = issuerConfig.endpoints[0].url
            let baseURL: URL
            if endpointText.hasPrefix("sandbox://") {
                guard let upstream = sandbox[issuerConfig.kind] else {
                    problems.append(.init("\(path).endpoints[0].url", "no \(issuerConfig.kind.rawValue) simulator is running"))
                    continue
                }
                baseURL = upstream.baseURL
            } else {
                baseURL = URL(string: endpointText)!
            }

            let http = UpstreamHTTP(issuer: issuer, timeouts: issuerConfig.timeouts, logger: logger)
            let connector: (any IssuerConnector)?
            switch issuerConfig.kind {
            case .bridge:
                connector = secret("api_key").map {
                    BridgeConnector(issuer: issuer, baseURL: baseURL, apiKey: $0, encoding: issuerConfig.wire.encoding ?? .hex, http: http)
                }
            case .tmp:
                connector = secret("token").map {
                    TMPConnector(issuer: issuer, baseURL: baseURL, token: $0, authOption: issuerConfig.wire.auth, http: http)
                }
            case .crossmint:
                connector = secret("api_key").map { CrossmintConnector(issuer: issuer, baseURL: baseURL, apiKey: $0, http: http) }
            }
            clients.append(http)
            connectors[issuer] = connector
        }
        guard problems.isEmpty else {
            await UpstreamDirectory(connectors: [:], clients: clients).shutdown()
            throw ConfigError(source: "environment", problems: problems)
        }
        return UpstreamDirectory(connectors: connectors, clients: clients)
    }
}
