import Foundation
import Gateway
import ProvisioningCore

/// `config check`: the file checked offline as start-up checks it (the loader's validation, then
/// the environment's `env:` variables and the files the config names), without opening the store
/// or listening. Valid: a short summary, never a secret. Invalid: every problem with its key path.
public enum ConfigCheck {
    public static func run(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> ToolOutcome {
        let file: (config: GatewayConfig, problems: [ConfigProblem])
        do throws(ConfigError) {
            file = try ConfigLoader.read(path: path)
        } catch {
            return failed(path: path, problems: error.problems)
        }
        let config = file.config
        var problems = file.problems
        // The environment and files are checked even when the file has problems, so one run lists
        // everything; a key path the file's own checks already name is not reported twice.
        let reported = Set(problems.map(\.path))
        problems += (StartupChecks.environmentProblems(config: config, environment: environment)
            + StartupChecks.fileProblems(config: config, environment: environment))
            .filter { $0.path.isEmpty || !reported.contains($0.path) }
        guard problems.isEmpty else { return failed(path: path, problems: problems) }
        return ToolOutcome(output: ["configuration \(path) is valid"] + summary(config),
                           diagnostics: (config.advisories + KeyFilePermissions.warnings(config: config)).map { "warning: \($0)" }, failure: nil)
    }

    static func failed(path: String, problems: [ConfigProblem]) -> ToolOutcome {
        .failed("invalid configuration \(path): \(problems.count) problem\(problems.count == 1 ? "" : "s")",
                diagnostics: problems.map { "  \($0)" })
    }

    /// Names, kinds and counts only: credentials, key hashes and store URLs are never printed.
    static func summary(_ config: GatewayConfig) -> [String] {
        let issuers = config.issuers.keys.sorted().map { name in
            let issuer = config.issuers[name]!
            let count = issuer.endpoints.count
            return "\(name) (\(issuer.kind.rawValue), \(count) endpoint\(count == 1 ? "" : "s"))"
        } + (config.local.enabled ? ["local (the gateway's own encryptor)"] : [])
        let admins = config.clients.filter(\.admin).count
        let rules = config.routing.rules.count
        return [
            "  issuers: \(issuers.isEmpty ? "none" : issuers.joined(separator: ", "))",
            "  clients: \(config.clients.count) (\(admins) admin)",
            "  routing rules: \(rules)" + (config.routing.activations.issuer.map { "; token activations without a card go to \($0)" } ?? ""),
            "  store: \(config.store.postgres == nil ? "sqlite" : "postgres")",
            config.sandbox.enabled ? "  sandbox: enabled (simulators in-process, demo keys)" : "  sandbox: off",
            "  traces: " + (config.telemetry.otlp.endpoint.map {
                "exported over OTLP/HTTP to \(GatewayTracing.tracesURL(EndpointLabel.render($0))) as \(config.telemetry.serviceName)"
            } ?? "W3C trace context propagated, not exported (telemetry.otlp.endpoint unset)"),
        ]
    }
}
