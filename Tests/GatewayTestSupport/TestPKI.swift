import Crypto
import Foundation
import SwiftASN1
import X509

/// A certificate authority made at test time, and certificates it signs, written as PEM files
/// into a fresh directory: TLS listeners, PostgreSQL with `ssl=on` and mutual-TLS upstreams are
/// tested with these, never with keys from the repository.
public struct TestPKI: Sendable {
    public let directory: URL
    public let caCertificate: Certificate
    let caKey: P256.Signing.PrivateKey

    /// The CA's certificate as a PEM file.
    public var caFile: URL { directory.appendingPathComponent("ca.pem") }

    public init(name: String = "Gateway Test CA") throws {
        directory = TestDirectories.root.appendingPathComponent("pki-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        caKey = P256.Signing.PrivateKey()
        let subject = try DistinguishedName { CommonName(name) }
        let now = Date()
        caCertificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: now - 3_600, notValidAfter: now + 86_400, issuer: subject, subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(caKey))
        try caCertificate.serializeAsPEM().pemString.write(to: caFile, atomically: true, encoding: .utf8)
    }

    public struct Issued: Sendable {
        public let certificateFile: URL
        public let keyFile: URL
    }

    /// A leaf for `localhost`, 127.0.0.1 and ::1 (server and client use), as `<name>.pem` and
    /// `<name>-key.pem` (the key file 0600, as PostgreSQL requires); `onlyFor` names one other
    /// host instead (a certificate for another host).
    public func issue(_ name: String, commonName: String = "localhost", onlyFor host: String? = nil) throws -> Issued {
        let key = P256.Signing.PrivateKey()
        let now = Date()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now - 3_600, notValidAfter: now + 86_400,
            issuer: caCertificate.subject, subject: try DistinguishedName { CommonName(commonName) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
                SubjectAlternativeNames(host.map { [.dnsName($0)] } ?? [
                    .dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                    .ipAddress(ASN1OctetString(contentBytes: ArraySlice([UInt8](repeating: 0, count: 15) + [1]))),
                ])
            },
            issuerPrivateKey: .init(caKey))
        let certificateFile = directory.appendingPathComponent("\(name).pem")
        let keyFile = directory.appendingPathComponent("\(name)-key.pem")
        try certificate.serializeAsPEM().pemString.write(to: certificateFile, atomically: true, encoding: .utf8)
        try key.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        return Issued(certificateFile: certificateFile, keyFile: keyFile)
    }
}
