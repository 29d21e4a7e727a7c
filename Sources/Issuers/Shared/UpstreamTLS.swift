import Foundation
import NIOSSL
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
        tls.certificateVerification = .fullVerification

        func read(_ file: String, key: String) -> [UInt8]? {
            let url = resolve(file)
            do {
                return try [UInt8](Data(contentsOf: url))
            } catch {
                problems.append(.init("\(path).\(key)", "cannot read \(url.path) (\(Self.reason(error)))"))
                return nil
            }
        }
        func certificates(_ file: String, key: String) -> [NIOSSLCertificate]? {
            guard let bytes = read(file, key: key) else { return nil }
            guard let certificates = try? NIOSSLCertificate.fromPEMBytes(bytes), !certificates.isEmpty else {
                problems.append(.init("\(path).\(key)", "\(resolve(file).path) holds no PEM certificate"))
                return nil
            }
            return certificates
        }

        if let caFile = config.caFile, let roots = certificates(caFile, key: "ca_file") {
            tls.trustRoots = .certificates(roots)
        }
        if let certificateFile = config.clientCertificate, let keyFile = config.clientKey {
            let chain = certificates(certificateFile, key: "client_certificate")
            var key: NIOSSLPrivateKey?
            if let bytes = read(keyFile, key: "client_key") {
                key = try? NIOSSLPrivateKey(bytes: bytes, format: .pem)
                if key == nil {
                    problems.append(.init("\(path).client_key", "\(resolve(keyFile).path) holds no unencrypted PEM private key"))
                }
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

    static func reason(_ error: any Error) -> String {
        if let error = error as? CocoaError {
            switch error.code {
            case .fileReadNoSuchFile, .fileNoSuchFile: return "no such file"
            case .fileReadNoPermission: return "permission denied"
            default: break
            }
        }
        return error.localizedDescription
    }
}
