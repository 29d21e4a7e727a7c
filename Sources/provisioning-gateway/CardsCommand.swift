import ArgumentParser
import Foundation
import Gateway
import GatewayStore
import Logging
import ProvisioningCore

struct Cards: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the card registry.",
        subcommands: [Import.self, Delete.self])

    /// The loaded config and a migrated store for `body`; every failure is a message and exit 2.
    static func withStore<T: Sendable>(
        config path: String, _ body: @escaping @Sendable (GatewayConfig, any GatewayStore) async throws -> T
    ) async -> T {
        let gatewayConfig: GatewayConfig
        do {
            gatewayConfig = try ConfigLoader.load(path: path)
        } catch {
            Serve.fail("\(error)")
        }
        do {
            return try await StoreBootstrap.withStore(gatewayConfig.store, baseDirectory: gatewayConfig.baseDirectory, environment: ProcessInfo.processInfo.environment,
                                                      logger: Logger(label: "provisioning-gateway")) { opened in
                try await body(gatewayConfig, opened.store)
            }
        } catch let error as GatewayError {
            Serve.fail(error.detail)
        } catch {
            Serve.fail("the store is not usable: \(error)")
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import cards from a CSV file in one transaction: all rows or none.",
            discussion: """
                Columns: card_id, program, issuer, then the issuer reference fields (customer_id and \
                card_account_id for Bridge; issuer_card_id for TMP and Crossmint). Existing cards are \
                replaced, so running the same file twice changes nothing. Every bad row is reported \
                with its line number, and then nothing is imported. This is one of the two ways \
                (with admin clients of the API) to register cards with issuer local.
                """)

        @Option(name: .long, help: "The YAML configuration file (for the store and the issuers).")
        var config: String = "Config/gateway.yaml"

        @Argument(help: "The CSV file.")
        var file: String

        func run() async throws {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { Serve.fail("cannot read \(file)") }
            let file = self.file
            let result = await Cards.withStore(config: config) { gatewayConfig, store in
                let importer = CardImport(registration: CardRegistration(config: gatewayConfig))
                do {
                    let name = String(URL(fileURLWithPath: file).lastPathComponent.prefix(128))
                    return try await importer.run(text, into: store) { count in
                        SecurityEvent(at: Date(), kind: .cardsImported, actor: CommandLineActor.name, detail: ["count": "\(count)", "file": name])
                    }
                } catch CardRegistryError.issuerReferenceInUse {
                    return .rejected([CardImport.Problem(
                        line: 1, reason: "an issuer reference in the file is already used by another card (or twice in the file)")])
                }
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

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a card from the registry, with its vault entry.")

        @Option(name: .long, help: "The YAML configuration file (for the store).")
        var config: String = "Config/gateway.yaml"

        @Option(name: .customLong("card-id"), help: "The gateway's card id.")
        var cardID: String

        func run() async throws {
            let id = cardID
            guard InputRules.isCardID(id) else { Serve.fail(InputRules.cardIDRule) }
            let deleted = await Cards.withStore(config: config) { _, store in
                try await store.deleteCard(CardID(id), owners: nil,
                                           event: SecurityEvent(at: Date(), kind: .cardDeleted, actor: CommandLineActor.name, cardID: CardID(id))) != nil
            }
            print(deleted ? "deleted card \(id) and its vault entry" : "no card \(id)")
        }
    }
}
