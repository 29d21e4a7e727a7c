import Foundation
import Gateway
import GatewayTestSupport
import Issuers
import Logging
import ProvisioningCore
import Testing

/// `issuers.<name>.tls` files are read when the upstreams are built, relative to the config file.
@Suite struct UpstreamDirectoryTLSTests {
    /// The minimal config with `issuers.bridge.tls` set to `tls` (key: file).
    func config(tls: KeyValuePairs<String, String>, baseDirectory: URL) throws -> GatewayConfig {
        let credential = "      api_key: env:BRIDGE_API_KEY\n"
        let block = "    tls:\n" + tls.map { "      \($0.key): \($0.value)\n" }.joined()
        #expect(ConfigLoaderTests.minimal.contains(credential))
        var config = try ConfigLoader.parse(yaml: ConfigLoaderTests.minimal.replacingOccurrences(of: credential, with: credential + block),
                                            source: "test.yaml")
        config.baseDirectory = baseDirectory
        return config
    }

    @Test func filesAreResolvedAgainstTheConfigDirectory() async throws {
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(at: pki.directory) }
        _ = try pki.issue("client")
        let config = try config(tls: ["ca_file": "ca.pem", "client_certificate": "client.pem", "client_key": "client-key.pem"],
                                baseDirectory: pki.directory)
        #expect(config.issuers["bridge"]?.tls?.clientKey == "client-key.pem")
        let upstreams = try await UpstreamDirectory.build(config: config, environment: ["BRIDGE_API_KEY": "k"], logger: Logger(label: "test"))
        #expect(upstreams.issuers["bridge"]?.endpoints.count == 1)
        await upstreams.shutdown()
    }

    @Test func anUnreadableCAFileIsAProblemNamingItsKeyPath() async throws {
        let directory = TestDirectories.root.appendingPathComponent("no-pki-\(UUID().uuidString)")
        let config = try config(tls: ["ca_file": "private-ca.pem"], baseDirectory: directory)
        do throws(ConfigError) {
            let upstreams = try await UpstreamDirectory.build(config: config, environment: ["BRIDGE_API_KEY": "k"], logger: Logger(label: "test"))
            await upstreams.shutdown()
            Issue.record("built with a CA file that does not exist")
        } catch {
            #expect(error.problems.map(\.description)
                == ["issuers.bridge.tls.ca_file: cannot read \(directory.appendingPathComponent("private-ca.pem").path) (no such file)"])
        }
    }
}
