import ArgumentParser
import Foundation
import Gateway
import GatewayStore
import Logging
import ProvisioningCore

struct Vault: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the card vault the local issuer encrypts from (sealed with vault.key).",
        subcommands: [Put.self, Delete.self])

    struct Options: ParsableArguments {
        @Option(name: .long, help: "The YAML configuration file (for the store and vault.key).")
        var config: String = "Config/gateway.yaml"

        @Option(name: .customLong("card-id"), help: "The gateway's card id.")
        var cardID: String
    }

    static func withVault<T: Sendable>(_ options: Options, _ body: @escaping @Sendable (CardVault) async throws -> T) async -> T {
        let gatewayConfig: GatewayConfig
        do {
            gatewayConfig = try ConfigLoader.load(path: options.config)
        } catch {
            Serve.fail("\(error)")
        }
        guard let reference = gatewayConfig.vault.key else { Serve.fail("vault.key is not set in \(options.config)") }
        let environment = ProcessInfo.processInfo.environment
        do {
            let key = try CardVault.key(reference: reference, environment: environment, path: "vault.key")
            return try await StoreBootstrap.withStore(gatewayConfig.store, baseDirectory: gatewayConfig.baseDirectory, environment: environment,
                                                      logger: Logger(label: "provisioning-gateway")) { opened in
                try await body(CardVault(store: opened.store, key: key))
            }
        } catch let error as GatewayError {
            Serve.fail(error.detail)
        } catch {
            Serve.fail("\(error)")
        }
    }

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Seal a card's number, expiry and name into the vault.")
        @OptionGroup var options: Options
        @Option(name: .long, help: "The card number (digits). Read from standard input when omitted.")
        var number: String?
        @Option(name: .long, help: "MM/YY")
        var expiry: String
        @Option(name: .long, help: "The cardholder name.")
        var name: String

        func run() async throws {
            let number = self.number ?? readLine(strippingNewline: true) ?? ""
            let data: CardData
            do {
                data = try CardData(number: number, name: name, expiry: expiry)
            } catch {
                Serve.fail(error.detail)
            }
            let cardID = CardID(options.cardID)
            await Vault.withVault(options) { vault in try await vault.put(cardID, data) }
            print("sealed card data for \(cardID) (number ending \(data.number.suffix(4)))")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a card's data from the vault.")
        @OptionGroup var options: Options

        func run() async throws {
            let cardID = CardID(options.cardID)
            let deleted = await Vault.withVault(options) { vault in try await vault.delete(cardID) }
            print(deleted ? "deleted the vault entry for \(cardID)" : "no vault entry for \(cardID)")
        }
    }
}
