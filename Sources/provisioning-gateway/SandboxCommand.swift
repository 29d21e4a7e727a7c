import ArgumentParser
import Foundation
import SandboxGateway

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
            do {
                let files = try SandboxDeviceTools.writeDevice(to: out, rootCertificate: rootCertificate, rootKey: rootKey)
                print("wrote a sandbox device to \(out): \(files.joined(separator: ", "))")
            } catch {
                Serve.fail("\(error)")
            }
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
                print(try SandboxDeviceTools.decrypt(keyFile: key, responseFile: response))
            } catch {
                Serve.fail("\(error)")
            }
        }
    }
}
