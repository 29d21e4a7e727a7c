import ArgumentParser
import Foundation
import Gateway
import GatewayStore
import Logging
import ProvisioningCore

struct Vault: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the card vault the local issuer encrypts from (sealed with the active key of vault.key / vault.keys).",
        subcommands: [Put.self, Delete.self, Rotate.self])

    struct ConfigOption: ParsableArguments {
        @Option(name: .long, help: "The YAML configuration file (for the store and the vault keys).")
        var config: String = "Config/gateway.yaml"
    }

    struct Options: ParsableArguments {
        @OptionGroup var file: ConfigOption

        @Option(name: .customLong("card-id"), help: "The gateway's card id (registered first: an entry belongs to a card).")
        var cardID: String
    }

    /// The vault and its store, for `body`; every failure is a clear message and exit 2.
    static func withVault<T: Sendable>(
        _ options: ConfigOption, _ body: @escaping @Sendable (CardVault, any GatewayStore) async throws -> T
    ) async -> T {
        let gatewayConfig: GatewayConfig
        do {
            gatewayConfig = try ConfigLoader.load(path: options.config)
        } catch {
            Serve.fail("\(error)")
        }
        let environment = ProcessInfo.processInfo.environment
        do {
            let keyring = try VaultKeyring.resolve(gatewayConfig.vault, environment: environment)
            return try await StoreBootstrap.withStore(gatewayConfig.store, baseDirectory: gatewayConfig.baseDirectory, environment: environment,
                                                      logger: Logger(label: "provisioning-gateway")) { opened in
                try await body(CardVault(store: opened.store, keyring: keyring), opened.store)
            }
        } catch let error as GatewayError {
            Serve.fail(error.detail)
        } catch {
            Serve.fail("\(error)")
        }
    }

    /// The registered card, or a clear failure: the vault holds data only for registry cards.
    static func registeredCard(_ id: String, in store: any GatewayStore) async throws -> CardRecord {
        guard InputRules.isCardID(id) else { throw GatewayError(.invalidRequest, InputRules.cardIDRule) }
        guard let card = try await store.card(CardID(id)) else {
            throw GatewayError(.cardNotFound, "card \(id) is not in the registry: register it first (PUT /v1/cards/\(id) or cards import)")
        }
        return card
    }

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Seal a registered card's number, expiry and name into the vault.")
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
            let id = options.cardID
            await Vault.withVault(options.file) { vault, store in
                let card = try await Vault.registeredCard(id, in: store)
                try await vault.put(card, data, event: SecurityEvent(
                    at: Date(), kind: .vaultPut, actor: CommandLineActor.name, cardID: card.id, detail: ["program": card.program.rawValue]))
            }
            print("sealed card data for \(id) (number ending \(data.number.suffix(4)))")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a card's data from the vault.")
        @OptionGroup var options: Options

        func run() async throws {
            let id = options.cardID
            guard InputRules.isCardID(id) else { Serve.fail(InputRules.cardIDRule) }
            let deleted = await Vault.withVault(options.file) { vault, _ in
                try await vault.delete(CardID(id), event: SecurityEvent(at: Date(), kind: .vaultDeleted, actor: CommandLineActor.name, cardID: CardID(id)))
            }
            print(deleted ? "deleted the vault entry for \(id)" : "no vault entry for \(id)")
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-seal every vault entry under the active key.",
            discussion: """
                Rotation: add the new key to vault.keys with active: true and keep the old one listed \
                (not active); restart or reload the gateway; run this; once it reports no unreadable \
                entries, remove the old key. Entries of cards that no longer exist are deleted.
                """)
        @OptionGroup var options: ConfigOption

        func run() async throws {
            let report = await Vault.withVault(options) { vault, store in
                let report = try await vault.rotate()
                try await store.appendSecurityEvent(SecurityEvent(
                    at: Date(), kind: .vaultRotated, actor: CommandLineActor.name,
                    detail: ["resealed": "\(report.resealed)", "current": "\(report.current)", "unreadable": "\(report.unreadable.count)",
                             "orphans_deleted": "\(report.orphansDeleted.count)"]))
                return report
            }
            print("re-sealed \(report.resealed), already current \(report.current), orphans deleted \(report.orphansDeleted.count), "
                + "unreadable \(report.unreadable.count)")
            if !report.unreadable.isEmpty {
                Serve.fail("no listed key opens the entries of: \(report.unreadable.map(\.rawValue).joined(separator: ", "))")
            }
        }
    }
}

/// Who ran a command, for the security audit: `cli:<login>`.
enum CommandLineActor {
    static var name: String {
        let user = ProcessInfo.processInfo.environment["USER"] ?? ProcessInfo.processInfo.environment["LOGNAME"] ?? "\(getuid())"
        return "cli:" + String(user.prefix(32).map { $0.isASCII && ($0.isLetter || $0.isNumber || "_-.".contains($0)) ? $0 : "?" })
    }
}
