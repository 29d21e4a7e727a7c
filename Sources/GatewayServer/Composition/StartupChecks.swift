import Foundation
import Gateway
import GatewayStore
import ProvisioningCore

/// What start-up checks once the file itself is valid, before the store opens or anything listens:
/// every `env:` secret the config names, and every file it names (trust anchors, listener,
/// upstream and PostgreSQL TLS). `buildGateway` stops on any of them; `config check` reports them
/// with the file's own problems. Each check is the one the component itself runs when it loads.
enum StartupChecks {
    /// Missing or unusable `env:` variables, each with its key path.
    static func environmentProblems(config: GatewayConfig, environment: [String: String]) -> [ConfigProblem] {
        var problems = UpstreamDirectory.missingSecrets(config: config, environment: environment)
        problems += UpstreamDirectory.sameAccountProblems(config: config, environment: environment)
        var keyring: VaultKeyring?
        do throws(ConfigError) {
            keyring = try VaultKeyring.resolve(config.vault, environment: environment)
        } catch {
            problems += error.problems
        }
        if config.local.enabled, let activationReference = config.local.activationKey {
            do throws(ConfigError) {
                let activationKey = try CardVault.key(reference: activationReference, environment: environment, path: "local.activation_key")
                if let keyring, let problem = LocalIssuer.sharedKeyProblem(activationReference: activationReference, activationKey: activationKey,
                                                                            vault: keyring) {
                    problems.append(problem)
                }
            } catch {
                problems += error.problems
            }
        }
        return problems
    }

    /// Files the config names that cannot be read or used. `store` false when the caller hands the
    /// gateway a store of its own (tests): the config's store settings are not used then.
    static func fileProblems(config: GatewayConfig, environment: [String: String], store: Bool = true) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        do throws(ConfigError) {
            _ = try TrustAnchors.validator(config.trust, relativeTo: config.baseDirectory ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
                                          sandboxEnabled: config.sandbox.enabled)
        } catch {
            problems += error.problems
        }
        do throws(ConfigError) {
            _ = try ListenerTLS.configuration(for: config)
        } catch {
            problems += error.problems
        }
        problems += UpstreamDirectory.tlsProblems(config: config)
        if store { problems += StoreBootstrap.problems(config.store, baseDirectory: config.baseDirectory, environment: environment) }
        return problems
    }
}

/// Private key files the config names (`server.tls.private_key`, `issuers.<name>.tls.client_key`)
/// that other users of the host can read or change: a warning, not a refusal (a secret mounted by
/// an orchestrator is often 0644 inside a container no one else runs in), from `config check` and
/// at `serve`'s start. The SQLite store's file is made 0600 by the gateway itself.
public enum KeyFilePermissions {
    public static func warnings(config: GatewayConfig) -> [String] {
        var keys: [(path: String, file: String)] = []
        if let tls = config.server.tls { keys.append(("server.tls.private_key", tls.privateKey)) }
        for (name, issuer) in config.issuers.sorted(by: { $0.key < $1.key }) {
            if let key = issuer.tls?.clientKey { keys.append(("issuers.\(name).tls.client_key", key)) }
        }
        return keys.compactMap { key in
            let url = config.resolvePath(key.file)
            guard let mode = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.posixPermissions] as? Int,
                  mode & 0o077 != 0 else { return nil }
            let who = mode & 0o022 != 0 ? "changed" : "read"
            return "\(key.path): \(url.path) can be \(who) by its group or others (mode \(String(mode & 0o777, radix: 8))): "
                + "chmod 600 it, so only the gateway's user reads the key"
        }
    }
}
