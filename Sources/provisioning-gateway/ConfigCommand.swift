import ArgumentParser
import GatewayServer

struct ConfigTools: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config", abstract: "Check a configuration file.", subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate a file offline as start-up would, without opening the store or listening.",
            discussion: """
                Checks the file (every problem with its key path, routing rules that name unknown \
                issuers or can never match), the environment's env: variables, and the trust anchor \
                and TLS files it names. Prints a summary and exits 0, or lists every problem and exits 2.
                """)

        @Option(name: .long, help: "The YAML configuration file.")
        var config: String = "Config/gateway.yaml"

        func run() async throws {
            report(ConfigCheck.run(path: config))
        }
    }
}
