import ArgumentParser
import Foundation
import GatewayServer
import ProvisioningCore

struct Cards: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the card registry.",
        subcommands: [Import.self, Delete.self])

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import cards from a CSV file: every row checked, then written in batches.",
            discussion: """
                Columns: card_id, program, issuer, then the issuer reference fields (customer_id and \
                card_account_id for Bridge; issuer_card_id for TMP, Crossmint, Marqeta and Lithic). Existing cards are \
                replaced, so running the same file twice changes nothing. Every bad row is reported \
                with its line number, and then nothing is imported. The rows are written in batches \
                (--batch-rows, each one transaction with its own security event, a short pause between \
                two), so that a serving gateway's writes never wait for the whole file; a file of at \
                most one batch is all rows or none, and an import stopped part-way is finished by \
                running it again. This is one of the two ways (with admin clients of the API) to \
                register cards with issuer local.
                """)

        @Option(name: .long, help: "The YAML configuration file (for the store and the issuers).")
        var config: String = "Config/gateway.yaml"

        @Option(name: .customLong("batch-rows"),
                help: "Cards per transaction (0: the whole file in one, which holds SQLite's write lock, and a serving gateway's writes, for as long).")
        var batchRows: Int = OperatorTools.importBatchRows

        @Argument(help: "The CSV file.")
        var file: String

        func validate() throws {
            guard batchRows >= 0 else { throw ValidationError("--batch-rows must be 0 or more") }
        }

        /// The largest CSV read (read whole, then imported in batches): 256 MiB holds about two
        /// million cards; split a larger export. A device (`/dev/zero`) is refused unread and a
        /// runaway export once past the bound (`BoundedFile`): both had been read until memory ran
        /// out (input audit).
        static let maxFileBytes = 256 << 20

        func run() async throws {
            let bytes: Data
            do throws(BoundedFile.Failure) {
                bytes = try BoundedFile.read(file, maxBytes: Self.maxFileBytes)
            } catch {
                switch error {
                case .unreadable(let reason): Serve.fail("cannot read \(file) (\(reason))")
                case .notAFile: Serve.fail("\(file) is not a file (a device or a directory): give the CSV file itself")
                case .tooLarge: Serve.fail("\(file) is larger than cards import reads (at most \(Self.maxFileBytes) bytes, 256 MiB): split the file")
                }
            }
            guard let text = String(data: bytes, encoding: .utf8) else { Serve.fail("\(file) is not UTF-8 text") }
            report(await OperatorTools.importCards(config: config, csv: text, fileName: file, actor: CommandLineActor.name, batchRows: batchRows))
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a card from the registry, with its vault entry.")

        @Option(name: .long, help: "The YAML configuration file (for the store).")
        var config: String = "Config/gateway.yaml"

        @Option(name: .customLong("card-id"), help: "The gateway's card id.")
        var cardID: String

        func run() async throws {
            report(await OperatorTools.deleteCard(config: config, cardID: cardID, actor: CommandLineActor.name))
        }
    }
}

/// Prints what an operator command produced; a failure is its message and exit 2.
func report(_ outcome: ToolOutcome) {
    for line in outcome.output { print(line) }
    for line in outcome.diagnostics { FileHandle.standardError.write(Data("\(line)\n".utf8)) }
    if let failure = outcome.failure { Serve.fail(failure) }
}

/// Who ran a command, for the security audit: `cli:<login>`.
enum CommandLineActor {
    /// The security events' actor: the account the process runs as, by its real user id (the
    /// system's name for it, and the id), never `$USER` or `$LOGNAME`, which anyone sets. Under
    /// sudo it is the account sudo ran it as, and sudo's own log says who asked.
    static var name: String {
        let uid = getuid()
        var login = ""
        if let entry = getpwuid(uid), let name = entry.pointee.pw_name { login = String(cString: name) }
        return "cli:" + String(login.prefix(32).map { $0.isASCII && ($0.isLetter || $0.isNumber || "_-.".contains($0)) ? $0 : "?" }) + "(\(uid))"
    }
}
