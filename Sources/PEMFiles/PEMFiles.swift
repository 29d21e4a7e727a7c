import Foundation
import NIOSSL
import ProvisioningCore

/// Reading the PEM files TLS is configured with (the listener's chain and key, an upstream's CA
/// and client certificate, PostgreSQL's CA), one way everywhere: a file that cannot be used is a
/// `Failure` whose reason names the file and why, never anything in it. Callers put their key
/// path in front (`server.tls.private_key: ...`).
public enum PEMFiles {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// Every certificate in the file, in its order (a chain: the leaf first).
    public static func certificates(at url: URL) throws(Failure) -> [NIOSSLCertificate] {
        let bytes = try read(url)
        guard let certificates = try? NIOSSLCertificate.fromPEMBytes(bytes), !certificates.isEmpty else {
            throw Failure(reason: "\(url.path) holds no PEM certificate")
        }
        return certificates
    }

    /// An unencrypted private key: a service has nobody to type a passphrase, so an encrypted key
    /// is refused like any other unusable one.
    public static func privateKey(at url: URL) throws(Failure) -> NIOSSLPrivateKey {
        let bytes = try read(url)
        guard let key = try? NIOSSLPrivateKey(bytes: bytes, format: .pem) else {
            throw Failure(reason: "\(url.path) holds no unencrypted PEM private key")
        }
        return key
    }

    /// The largest PEM file read: a chain and a key are a few kB; 1 MiB holds a CA bundle of
    /// hundreds of certificates.
    public static let maxFileBytes = 1 << 20

    /// The file's bytes, at most `maxFileBytes` of them (`BoundedFile`): a device named by mistake
    /// (`/dev/zero`) had been read until memory ran out (input audit).
    static func read(_ url: URL) throws(Failure) -> [UInt8] {
        do throws(BoundedFile.Failure) {
            return [UInt8](try BoundedFile.read(url.path, maxBytes: maxFileBytes))
        } catch {
            switch error {
            case .unreadable(let reason): throw Failure(reason: "cannot read \(url.path) (\(reason))")
            case .notAFile: throw Failure(reason: "\(url.path) is not a file (a device or a directory)")
            case .tooLarge: throw Failure(reason: "\(url.path) is larger than a PEM file is here (at most \(maxFileBytes) bytes, 1 MiB)")
            }
        }
    }
}
