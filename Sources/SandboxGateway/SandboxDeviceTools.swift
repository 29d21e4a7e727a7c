import Crypto
import Foundation
import ProvisioningCore
import Sandbox
import WalletCrypto
import X509

/// The CLI's `sandbox device` and `sandbox decrypt`: a device whose chain the sandbox trusts, and
/// opening what the gateway returned with its leaf key (the card number masked).
public enum SandboxDeviceTools {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Writes root.pem, subordinate.pem, leaf.pem, leaf-key.pem and apple-pay-request.json into
    /// `directory`; the chain is signed by the sandbox root at `rootCertificate`/`rootKey`.
    public static func writeDevice(to directory: String, rootCertificate: String, rootKey: String) throws -> [String] {
        let root: Certificate
        let key: P256.Signing.PrivateKey
        do {
            root = try Certificate(pemEncoded: try text(rootCertificate))
            key = try P256.Signing.PrivateKey(pemRepresentation: try text(rootKey))
        } catch {
            throw Failure(description: "cannot load the sandbox root from \(rootCertificate) and \(rootKey)")
        }
        let device = try SandboxDevice.make(root: (root, key))
        let directory = URL(fileURLWithPath: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let nonce = Data((0..<4).map { _ in UInt8.random(in: .min ... .max) })
        let signature = Data((0..<64).map { _ in UInt8.random(in: .min ... .max) })
        let files: [(String, String)] = [
            ("root.pem", try device.root.serializeAsPEM().pemString + "\n"),
            ("subordinate.pem", try device.subordinate.serializeAsPEM().pemString + "\n"),
            ("leaf.pem", try device.leaf.serializeAsPEM().pemString + "\n"),
            ("leaf-key.pem", device.leafPrivateKey!.pemRepresentation + "\n"),
        ]
        for (name, text) in files { try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        // The leaf's private key opens every pass the gateway encrypts for this device: readable by
        // its owner alone, as ssh-keygen writes one (it was 0644).
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.appendingPathComponent("leaf-key.pem").path)
        let body: [String: Any] = [
            "certificates": [device.leafDER.base64EncodedString(), device.subordinateDER.base64EncodedString()],
            "nonce": nonce.base64EncodedString(), "nonce_signature": signature.base64EncodedString(),
            "encoding": "base64", "device": ["type": "phone"],
        ]
        try JSONSerialization.data(withJSONObject: body, options: [.prettyPrinted, .sortedKeys])
            .write(to: directory.appendingPathComponent("apple-pay-request.json"))
        return files.map(\.0) + ["apple-pay-request.json"]
    }

    /// The most either command reads of a file (a PEM, a gateway answer): `/dev/zero` or a
    /// runaway pipe is refused at that bound instead of read until memory runs out.
    static let maxFileBytes = 1 << 20

    private static func bytes(_ path: String) throws -> Data {
        do {
            return try BoundedFile.read(path, maxBytes: maxFileBytes)
        } catch {
            throw Failure(description: "\(path): \(error)")
        }
    }

    private static func text(_ path: String) throws -> String { String(decoding: try bytes(path), as: UTF8.self) }

    /// The pass data of a gateway Apple Pay answer, opened with the leaf key at `keyFile`, as
    /// pretty JSON with the card number masked.
    public static func decrypt(keyFile: String, responseFile: String) throws -> String {
        do {
            let leafKey = try P256.KeyAgreement.PrivateKey(pemRepresentation: try text(keyFile))
            let answer = try JSONSerialization.jsonObject(with: try bytes(responseFile)) as? [String: Any] ?? [:]
            guard let encrypted = (answer["encrypted_pass_data"] as? String).flatMap({ Data(base64Encoded: $0) }),
                  let ephemeral = (answer["ephemeral_public_key"] as? String).flatMap({ Data(base64Encoded: $0) })
            else { throw Failure(description: "\(responseFile) is not a gateway Apple Pay answer") }
            let plaintext = try ECCV2.decrypt(.init(encryptedPassData: encrypted, ephemeralPublicKey: ephemeral), with: leafKey)
            let pass = try JSONDecoder().decode(PassPlaintext.self, from: plaintext)
            let masked = String(repeating: "•", count: max(0, pass.primaryAccountNumber.count - 4)) + pass.primaryAccountNumber.suffix(4)
            let shown: [String: String] = [
                "primaryAccountNumber": masked, "name": pass.name, "expiration": pass.expiration,
                "nonce": pass.nonce, "nonceSignature": pass.nonceSignature,
            ]
            return String(decoding: try JSONSerialization.data(withJSONObject: shown, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self)
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(description: "cannot decrypt: \(error)")
        }
    }
}
