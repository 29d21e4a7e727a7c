import ArgumentParser
import Foundation
import Gateway
import GatewayStore
import Logging
import ProvisioningCore

struct Cards: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the card registry.",
        subcommands: [Import.self])

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import cards from a CSV file in one transaction: all rows or none.",
            discussion: """
                Columns: card_id, program, issuer, then the issuer reference fields (customer_id and \
                card_account_id for Bridge; issuer_card_id for TMP and Crossmint). Existing cards are \
                replaced, so running the same file twice changes nothing. Every bad row is reported \
                with its line number, and then nothing is imported.
                """)

        @Option(name: .long, help: "The YAML configuration file (for the store and the issuers).")
        var config: String = "Config/gateway.yaml"

        @Argument(help: "The CSV file.")
        var file: String

        func run() async throws {
            let gatewayConfig: GatewayConfig
            do {
                gatewayConfig = try ConfigLoader.load(path: config)
            } catch {
                Serve.fail("\(error)")
            }
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { Serve.fail("cannot read \(file)") }
            let importer = CardImport(registration: CardRegistration(issuers: gatewayConfig.issuers, localEnabled: gatewayConfig.local.enabled))
            let logger = Logger(label: "provisioning-gateway")
            let result: CardImport.Result
            do {
                result = try await StoreBootstrap.withStore(gatewayConfig.store, baseDirectory: gatewayConfig.baseDirectory,
                                                            environment: ProcessInfo.processInfo.environment,
                                                            logger: logger) { opened in
                    try await importer.run(text, into: opened.store)
                }
            } catch {
                Serve.fail("the store is not usable: \(error)")
            }
            switch result {
            case .imported(let count):
                print("imported \(count) card\(count == 1 ? "" : "s") from \(file)")
            case .rejected(let problems):
                for problem in problems { FileHandle.standardError.write(Data("\(file): \(problem)\n".utf8)) }
                Serve.fail("nothing imported: \(problems.count) problem\(problems.count == 1 ? "" : "s") in \(file)")
            }
        }
    }
}
