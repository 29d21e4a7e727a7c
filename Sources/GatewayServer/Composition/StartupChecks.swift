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
        do throws(ConfigError) {
            _ = try VaultKeyring.resolve(config.vault, environment: environment)
        } catch {
            problems += error.problems
        }
        if config.local.enabled, let activationKey = config.local.activationKey {
            do throws(ConfigError) {
                _ = try CardVault.key(reference: activationKey, environment: environment, path: "local.activation_key")
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
            _ = try TrustAnchors.validator(config.trust, relativeTo: config.baseDirectory ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
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
