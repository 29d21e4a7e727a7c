import Foundation
import Gateway
import GatewayTestSupport
import Issuers
import Logging
import ProvisioningCore
import Testing

/// `issuers.<name>.connections`: each issuer's pool is built with its own bound and idle timeout,
/// out-of-range values are refused by key path, and a reload keeps a pool (its warm connections)
/// only while its settings are unchanged.
@Suite struct UpstreamDirectoryPoolTests {
    static let credential = "      api_key: env:BRIDGE_API_KEY\n"
    static let environment = ["BRIDGE_API_KEY": "k"]

    /// The minimal config with `connections` (and `timeouts`) added to issuer bridge, when given.
    static func yaml(connections: String?, timeouts: String? = nil) -> String {
        #expect(ConfigLoaderTests.minimal.contains(credential))
        let added = [("connections", connections), ("timeouts", timeouts)].compactMap { key, value in value.map { "    \(key): \($0)\n" } }
        return ConfigLoaderTests.minimal.replacingOccurrences(of: credential, with: credential + added.joined())
    }

    static func build(_ yaml: String, reusing previous: UpstreamDirectory? = nil) async throws -> UpstreamDirectory {
        let config = try ConfigLoader.parse(yaml: yaml, source: "test.yaml")
        return try await UpstreamDirectory.build(config: config, environment: environment, logger: Logger(label: "test"), reusing: previous)
    }

    /// Runs `body` with the directory built from `yaml`, then shuts its clients down.
    static func with<T: Sendable>(_ yaml: String, _ body: (UpstreamDirectory) async throws -> T) async throws -> T {
        let upstreams = try await build(yaml)
        return try await withCleanup({ try await body(upstreams) }, cleanup: { await upstreams.shutdown() })
    }

    @Test func withoutTheSectionAnIssuerGetsTheDocumentedDefaults() async throws {
        let pool = try await Self.with(Self.yaml(connections: nil)) { try #require($0.client("bridge")).poolConfig }
        #expect(pool.maxPerHost == 8)
        #expect(pool.idleTimeoutMS == 30_000)
    }

    @Test func theSectionReachesTheIssuersPool() async throws {
        let pool = try await Self.with(Self.yaml(connections: "{ max_per_host: 3, idle_timeout_ms: 4500 }")) {
            try #require($0.client("bridge")).poolConfig
        }
        #expect(pool == ConnectionPoolConfig(maxPerHost: 3, idleTimeoutMS: 4_500))
    }

    @Test func aReloadKeepsThePoolOnlyWhileItsSettingsAreUnchanged() async throws {
        try await Self.with(Self.yaml(connections: "{ max_per_host: 3 }")) { first in
            let same = try await Self.build(Self.yaml(connections: "{ max_per_host: 3 }"), reusing: first)
            let original = try #require(first.client("bridge"))
            #expect(same.client("bridge") === original, "unchanged settings keep the client and its connections")
            // The shared client is shut down with the first directory; a shut-down directory has no clients left.
            await same.shutdown(keeping: [first])
            #expect(same.client("bridge") == nil)
            #expect(first.client("bridge") === original)
            let changed = try await Self.build(Self.yaml(connections: "{ max_per_host: 4 }"), reusing: first)
            try await withCleanup({
                let rebuilt = try #require(changed.client("bridge"))
                #expect(rebuilt !== original)
                #expect(rebuilt.poolConfig.maxPerHost == 4)
            }, cleanup: { await changed.shutdown(keeping: [first]) })
            // Other timeouts, same pool settings: a new client too.
            let retimed = try await Self.build(Self.yaml(connections: "{ max_per_host: 3 }", timeouts: "{ request_ms: 4000 }"), reusing: first)
            try await withCleanup({
                let rebuilt = try #require(retimed.client("bridge"))
                #expect(rebuilt !== original)
                #expect(rebuilt.timeouts.requestMS == 4_000)
            }, cleanup: { await retimed.shutdown(keeping: [first]) })
        }
    }

    @Test func outOfRangeValuesAreRefusedByKeyPath() {
        let found = ConfigLoaderTests().problems(Self.yaml(connections: "{ max_per_host: 0, idle_timeout_ms: 50 }"))
        #expect(found.contains("issuers.bridge.connections.max_per_host: must be 1 to 1024"), "\(found)")
        #expect(found.contains("issuers.bridge.connections.idle_timeout_ms: must be 100 to 3600000 (ms)"), "\(found)")
        let tooMany = ConfigLoaderTests().problems(Self.yaml(connections: "{ max_per_host: 1025, idle_timeout_ms: 3600001 }"))
        #expect(tooMany.contains("issuers.bridge.connections.max_per_host: must be 1 to 1024"), "\(tooMany)")
        #expect(tooMany.contains("issuers.bridge.connections.idle_timeout_ms: must be 100 to 3600000 (ms)"), "\(tooMany)")
        #expect(ConfigLoaderTests().problems(Self.yaml(connections: "{ max_per_host: 1, idle_timeout_ms: 100 }")).isEmpty)
    }

    @Test func aMisspeltKeyInTheSectionIsReported() {
        let found = ConfigLoaderTests().problems(Self.yaml(connections: "{ max_connections: 4 }"))
        #expect(found.contains { $0.hasPrefix("issuers.bridge.connections.max_connections: unknown key (expected one of: ") }, "\(found)")
    }
}
