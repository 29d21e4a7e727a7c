import Foundation
import NIOSSL
import PEMFiles
import ProvisioningCore

/// `server.tls`: the listener's certificate chain and private key, read from PEM files when the
/// application is built, so a missing, unreadable or wrong file stops start-up with its key path
/// (`server.tls.private_key: /etc/gateway/key.pem holds no unencrypted PEM private key`) instead of failing
/// every handshake later. Messages name the files, never what is in them.
enum ListenerTLS {
    /// The server side of TLS, or nil when `server.tls` is absent (plaintext, which validation
    /// allows only on loopback or with `allow_plaintext`).
    static func configuration(for config: GatewayConfig) throws(ConfigError) -> TLSConfiguration? {
        guard let tls = config.server.tls else { return nil }
        let certificatePath = config.resolvePath(tls.certificate).path
        let keyPath = config.resolvePath(tls.privateKey).path
        var problems: [ConfigProblem] = []
        var chain: [NIOSSLCertificate] = []
        var key: NIOSSLPrivateKey?
        do {
            // The leaf first, then any intermediates, as the PEM file lists them.
            chain = try PEMFiles.certificates(at: URL(fileURLWithPath: certificatePath))
        } catch {
            problems.append(.init("server.tls.certificate", error.reason))
        }
        do {
            key = try PEMFiles.privateKey(at: URL(fileURLWithPath: keyPath))
        } catch {
            problems.append(.init("server.tls.private_key", error.reason))
        }

        guard problems.isEmpty, let key else { throw ConfigError(source: "server.tls", problems: problems) }
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        // Built once here only to check it: BoringSSL refuses a key that does not belong to the
        // leaf certificate, which would otherwise surface as every handshake failing.
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw ConfigError(source: "server.tls", problems: [
                .init("server.tls.private_key", "does not match the certificate in \(certificatePath)"),
            ])
        }
        return configuration
    }

}
