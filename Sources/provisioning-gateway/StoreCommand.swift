import ArgumentParser
import GatewayServer

struct StoreTools: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Look after the gateway's store.", subcommands: [Check.self])

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
}
