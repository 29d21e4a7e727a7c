import Foundation
import NIOSSL
import PEMFiles
import ProvisioningCore

/// `issuers.<name>.tls`, loaded: a private CA trusted instead of the system's roots, and/or a
/// client certificate and key for mutual TLS. Only file names and reasons appear in problems and
/// logs, never certificate or key contents.
public struct UpstreamTLS: Sendable {
    let configuration: TLSConfiguration

    /// Reads and checks the PEM files. `resolve` turns a configured path into a file (relative to
    /// the config file: `GatewayConfig.resolvePath`); every problem names its key path under
    /// `path` (`issuers.bridge.tls`).
    public static func load(_ config: UpstreamTLSConfig, path: String, resolve: (String) -> URL) throws(ConfigError) -> UpstreamTLS {
        var problems: [ConfigProblem] = []
        var tls = TLSConfiguration.makeClientConfiguration()

        func certificates(_ file: String, key: String) -> [NIOSSLCertificate]? {
            do {
                return try PEMFiles.certificates(at: resolve(file))
            } catch {
                problems.append(.init("\(path).\(key)", error.reason))
                return nil
            }
        }

        if let caFile = config.caFile, let roots = certificates(caFile, key: "ca_file") {
            tls.trustRoots = .certificates(roots)
        }
        if let certificateFile = config.clientCertificate, let keyFile = config.clientKey {
            let chain = certificates(certificateFile, key: "client_certificate")
            var key: NIOSSLPrivateKey?
            do {
                key = try PEMFiles.privateKey(at: resolve(keyFile))
            } catch {
                problems.append(.init("\(path).client_key", error.reason))
            }
            if let chain, let key {
                tls.certificateChain = chain.map { .certificate($0) }
                tls.privateKey = .privateKey(key)
            }
        }
        guard problems.isEmpty else { throw ConfigError(source: "\(path) files", problems: problems) }
        // What only shows when the files are used together (a key that is not the certificate's):
        // found now, not on the first provisioning request.
        do {
            _ = try NIOSSLContext(configuration: tls)
        } catch {
            let what = config.clientCertificate != nil ? "client_key does not match client_certificate, or they are unusable" : "unusable"
            throw ConfigError(source: "\(path) files", problems: [.init(path, "\(what) (\(error))")])
        }
        return UpstreamTLS(configuration: tls)
    }
}
