import ArgumentParser
import Crypto
import Foundation
import Sandbox
import WalletCrypto
import X509

struct SandboxTools: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sandbox",
        abstract: "A sandbox device: make a chain the sandbox trusts, decrypt what the gateway returns.",
        subcommands: [Device.self, Decrypt.self])

    struct Device: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a device (chain shaped like Apple's, leaf key, nonce, nonce signature) and a ready request body.")
        @Option(name: .long, help: "The directory to write into.")
        var out: String
        @Option(name: .customLong("root-cert"), help: "The sandbox root certificate the sandbox config trusts.")
        var rootCertificate: String = "Config/sandbox/device-root.pem"
        @Option(name: .customLong("root-key"), help: "Its private key (sandbox only).")
        var rootKey: String = "Config/sandbox/device-root-key.pem"

        func run() async throws {
            let root: Certificate
            let key: P256.Signing.PrivateKey
            do {
                root = try Certificate(pemEncoded: try String(contentsOfFile: rootCertificate, encoding: .utf8))
                key = try P256.Signing.PrivateKey(pemRepresentation: try String(contentsOfFile: rootKey, encoding: .utf8))
            } catch {
                Serve.fail("cannot load the sandbox root from \(rootCertificate) and \(rootKey)")
            }
            let device = try SandboxDevice.make(root: (root, key))
            let directory = URL(fileURLWithPath: out)
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
            let body: [String: Any] = [
                "certificates": [device.leafDER.base64EncodedString(), device.subordinateDER.base64EncodedString()],
                "nonce": nonce.base64EncodedString(), "nonce_signature": signature.base64EncodedString(),
                "encoding": "base64", "device": ["type": "phone"],
            ]
            try JSONSerialization.data(withJSONObject: body, options: [.prettyPrinted, .sortedKeys])
                .write(to: directory.appendingPathComponent("apple-pay-request.json"))
            print("wrote a sandbox device to \(out): leaf.pem, subordinate.pem, root.pem, leaf-key.pem, apple-pay-request.json")
        }
    }

    struct Decrypt: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Open a gateway answer with the device's leaf key; prints the pass data, card number masked.")
        @Option(name: .long, help: "The leaf private key (PEM).")
        var key: String
        @Option(name: .long, help: "The gateway's JSON answer.")
        var response: String

        func run() async throws {
            do {
                let leafKey = try P256.KeyAgreement.PrivateKey(pemRepresentation: try String(contentsOfFile: key, encoding: .utf8))
                let answer = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: response))) as? [String: Any] ?? [:]
                guard let encrypted = (answer["encrypted_pass_data"] as? String).flatMap({ Data(base64Encoded: $0) }),
                      let ephemeral = (answer["ephemeral_public_key"] as? String).flatMap({ Data(base64Encoded: $0) })
                else { Serve.fail("\(response) is not a gateway Apple Pay answer") }
                let plaintext = try ECCV2.decrypt(.init(encryptedPassData: encrypted, ephemeralPublicKey: ephemeral), with: leafKey)
                let pass = try JSONDecoder().decode(PassPlaintext.self, from: plaintext)
                let masked = String(repeating: "•", count: max(0, pass.primaryAccountNumber.count - 4)) + pass.primaryAccountNumber.suffix(4)
                let shown: [String: String] = [
                    "primaryAccountNumber": masked, "name": pass.name, "expiration": pass.expiration,
                    "nonce": pass.nonce, "nonceSignature": pass.nonceSignature,
                ]
                print(String(decoding: try JSONSerialization.data(withJSONObject: shown, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self))
            } catch let error as ECCV2.Failure {
                Serve.fail("cannot decrypt: \(error)")
            } catch {
                Serve.fail("cannot decrypt: \(error)")
            }
        }
    }
}
