import Foundation
import NIOSSL
import ProvisioningCore

/// `server.tls`: the listener's certificate chain and private key, read from PEM files when the
/// application is built, so a missing, unreadable or wrong file stops start-up with its key path
/// (`server.tls.private_key: not a PEM private key (/etc/gateway/key.pem)`) instead of failing
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
        switch read(certificatePath) {
        case nil:
            problems.append(.init("server.tls.certificate", "cannot read \(certificatePath)"))
        case let bytes?:
            // The leaf first, then any intermediates, as the PEM file lists them.
            chain = (try? NIOSSLCertificate.fromPEMBytes(bytes)) ?? []
            if chain.isEmpty { problems.append(.init("server.tls.certificate", "no PEM certificate in \(certificatePath)")) }
        }

        var key: NIOSSLPrivateKey?
        switch read(keyPath) {
        case nil:
            problems.append(.init("server.tls.private_key", "cannot read \(keyPath)"))
        case let bytes?:
            // A passphrase-protected key is refused rather than prompted for: BoringSSL's default
            // would ask on stdin, which a service has not got. The callback only notes it was asked.
            let askedForPassphrase = PassphraseAsked()
            do {
                key = try NIOSSLPrivateKey(bytes: bytes, format: .pem) { (_: NIOSSLPassphraseSetter<[UInt8]>) in
                    askedForPassphrase.value = true
                }
            } catch {
                problems.append(.init("server.tls.private_key", askedForPassphrase.value
                    ? "an encrypted key is not supported (\(keyPath))" : "not a PEM private key (\(keyPath))"))
            }
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

    private final class PassphraseAsked { var value = false }

    private static func read(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }
}
