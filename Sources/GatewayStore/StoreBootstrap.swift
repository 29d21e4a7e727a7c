import Foundation
import Logging
import ProvisioningCore
import ServiceLifecycle

/// Opens the configured store and brings its schema up to date.
public enum StoreBootstrap {
    /// The store, and what must run beside it while it is used (PostgreSQL's pool), if anything.
    public struct Opened: Sendable {
        public let store: any GatewayStore
        public let name: String
        /// PostgreSQL's client, the `Service` that drives its connection pool; nil for SQLite.
        public let service: (any Service)?
    }

    /// `baseDirectory` is the config file's directory: `store.postgres.ca_file` is relative to it
    /// (the working directory when nil).
    public static func open(_ config: StoreConfig, baseDirectory: URL?, environment: [String: String], logger: Logger) throws -> Opened {
        if let postgres = config.postgres {
            // Either env:NAME or a URL without a password (validation refuses anything else).
            var url = postgres.url
            if case .environment? = SecretReference(parsing: url) {
                do {
                    if case .value(let value) = try SecretReference.resolve(url, at: "store.postgres.url", in: environment) { url = value.value }
                } catch {
                    throw StoreError(store: "postgres", reason: error.description)
                }
            }
            let caFile = caFileURL(postgres, baseDirectory: baseDirectory)
            let store = try PostgresGatewayStore(
                url: url, caFile: caFile, connectTimeout: .milliseconds(postgres.connectTimeoutMS),
                operationTimeout: .milliseconds(postgres.operationTimeoutMS), logger: logger)
            return Opened(store: store, name: store.displayName, service: store.client)
        }
        let store = try SQLiteGatewayStore(path: config.sqlite.path)
        return Opened(store: store, name: "sqlite \(config.sqlite.path)", service: nil)
    }

    /// What `open` would refuse before connecting, without connecting: the PostgreSQL URL (an
    /// unset `env:` variable named by its key path) and its TLS settings, the `ca_file` read.
    /// Empty for SQLite. For `config check` and start-up's checks.
    public static func problems(_ config: StoreConfig, baseDirectory: URL?, environment: [String: String]) -> [ConfigProblem] {
        guard let postgres = config.postgres else { return [] }
        var url = postgres.url
        if case .environment? = SecretReference(parsing: url) {
            do throws(ConfigProblem) {
                guard case .value(let value) = try SecretReference.resolve(url, at: "store.postgres.url", in: environment) else { return [] }
                url = value.value
            } catch {
                return [error]
            }
        }
        do throws(StoreError) {
            _ = try PostgresTLS.configuration(try PostgresURL(parsing: url), caFile: caFileURL(postgres, baseDirectory: baseDirectory))
            return []
        } catch {
            // Its reasons already name their key (`store.postgres.url: ...`, `store.postgres.ca_file: ...`).
            return [.init("", error.reason)]
        }
    }

    static func caFileURL(_ postgres: StoreConfig.Postgres, baseDirectory: URL?) -> URL? {
        postgres.caFile.map { path in
            path.hasPrefix("/") ? URL(fileURLWithPath: path)
                : (baseDirectory ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).appendingPathComponent(path)
        }
    }

    /// The schema versions this binary migrates a store to, oldest first (both stores have the same).
    public static var currentSchema: [String] { SQLiteGatewayStore.migrator.migrations }

    /// Runs `body` with a migrated store (as it was, with `migrate: false`: `store check` reads a
    /// store it must not change), keeping its background work alive for the duration.
    public static func withStore<T: Sendable>(
        _ config: StoreConfig, baseDirectory: URL?, environment: [String: String], logger: Logger, migrate: Bool = true,
        _ body: @escaping @Sendable (Opened) async throws -> T
    ) async throws -> T {
        let opened = try open(config, baseDirectory: baseDirectory, environment: environment, logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            if let service = opened.service { group.addTask { try await service.run(); return nil } }
            defer { group.cancelAll() }
            do {
                if migrate { try await opened.store.migrate() }
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(store: opened.name, reason: "migration failed (\(error))")
            }
            return try await body(opened)
        }
    }
}
