import ArgumentParser
import Foundation
import GatewayServer

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

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Seal a registered card's number, expiry and name into the vault.")
        @OptionGroup var options: Options
        @Option(name: .long, help: "MM/YY")
        var expiry: String
        @Option(name: .long, help: "The cardholder name.")
        var name: String

        /// The card number is read from standard input only: never an argument, where `ps`, shell
        /// history and the system's audit log keep it (`--number` was taken until the CLI audit).
        func run() async throws {
            var number = ""
            if isatty(STDIN_FILENO) == 1 {
                // Typed at a terminal: not echoed, as a password prompt.
                number = Self.readUnechoed(prompt: "card number (not shown): ") ?? ""
            } else {
                // One number: a second line would otherwise be dropped without a word. Read up to a
                // bound: a stream without a line break (`yes | tr -d '\n'`) had been read until
                // memory ran out.
                let input = (try? FileHandle.standardInput.read(upToCount: Self.maxInputBytes + 1)) ?? nil ?? Data()
                guard input.count <= Self.maxInputBytes else {
                    Serve.fail("standard input holds more than \(Self.maxInputBytes) bytes: give one card number")
                }
                let lines = String(decoding: input, as: UTF8.self).split(whereSeparator: \.isNewline)
                    .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                guard lines.count <= 1 else { Serve.fail("standard input holds more than one line: give one card number") }
                number = lines.first ?? ""
            }
            report(await OperatorTools.putVaultEntry(
                config: options.file.config, cardID: options.cardID, number: number, expiry: expiry, name: name, actor: CommandLineActor.name))
        }

        /// The most `vault put` reads of a piped standard input: a card number and its line break, with room.
        static let maxInputBytes = 1024

        /// One line from the terminal with its echo off (termios), restored afterwards.
        static func readUnechoed(prompt: String) -> String? {
            FileHandle.standardError.write(Data(prompt.utf8))
            var saved = termios()
            let haveTerminal = tcgetattr(STDIN_FILENO, &saved) == 0
            if haveTerminal {
                var silent = saved
                silent.c_lflag &= ~tcflag_t(ECHO)
                _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
            }
            defer {
                if haveTerminal { _ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) }
                FileHandle.standardError.write(Data("\n".utf8))
            }
            return readLine(strippingNewline: true)
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a card's data from the vault.")
        @OptionGroup var options: Options

        func run() async throws {
            report(await OperatorTools.deleteVaultEntry(config: options.file.config, cardID: options.cardID, actor: CommandLineActor.name))
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
            report(await OperatorTools.rotateVault(config: options.config, actor: CommandLineActor.name))
        }
    }
}
