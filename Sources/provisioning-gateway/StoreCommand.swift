import ArgumentParser
import Foundation
import GatewayServer

struct StoreTools: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Look after the gateway's store.", subcommands: [Check.self, Archive.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read the whole store for damage, without migrating or changing it.",
            discussion: """
                SQLite: PRAGMA integrity_check over every page and index (slow on a large file; it runs \
                beside a serving gateway). PostgreSQL: indexes the server marked invalid on the gateway's \
                tables. Prints the schema and exits 0, or lists every problem and exits 2.
                """)

        @Option(name: .long, help: "The YAML configuration file (for the store).")
        var config: String = "Config/gateway.yaml"

        func run() async throws {
            report(await OperatorTools.checkStore(config: config))
        }
    }

    struct Archive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move audit and security events recorded before a time out of the store, into a new file of JSON lines.",
            discussion: """
                A page at a time: each page's lines are written and synced to the file before the page is deleted, \
                with an events_archived security event (the file, the page's ids, the file's SHA-256 so far) in the \
                deletion's transaction. --before must be at least 30 days ago. The file must not exist; it is made \
                0600. Runs beside a serving gateway. Exits 0 with what it moved and the file's SHA-256, or 2 saying \
                where it stopped (nothing is lost: a row is in the store, the file or both).
                """)

        @Option(name: .long, help: "The YAML configuration file (for the store).")
        var config: String = "Config/gateway.yaml"

        @Option(name: .long, help: "Events recorded before this: a day (2025-11-01, midnight UTC) or an ISO 8601 time with its offset.")
        var before: String

        @Option(name: .long, help: "The new file to write (never an existing one).")
        var to: String

        func validate() throws {
            guard EventArchive.parseTime(before) != nil else {
                throw ValidationError("--before must be a day (2025-11-01) or an ISO 8601 time with its offset (2025-11-01T12:00:00Z)")
            }
        }

        func run() async throws {
            guard let time = EventArchive.parseTime(before) else { return }
            report(await OperatorTools.archiveEvents(config: config, before: time, to: to, actor: CommandLineActor.name))
        }
    }
}
