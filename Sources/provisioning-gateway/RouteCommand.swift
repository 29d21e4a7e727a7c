import ArgumentParser
import GatewayServer

struct RouteTools: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "route", abstract: "Explain routing decisions.", subcommands: [Explain.self])

    struct Explain: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Which issuer a provisioning for a card and wallet would go to, and why (JSON).",
            discussion: """
                Offline: the card comes from the configured store's registry, the rules, endpoints, \
                fallback and deadline from the file. Breaker states live in the running gateway only: \
                ask it with GET /v1/admin/routes/explain (an admin key) for those.
                """)

        @Option(name: .long, help: "The YAML configuration file (for the store and the routing).")
        var config: String = "Config/gateway.yaml"

        @Option(name: .customLong("card-id"), help: "The gateway's card id.")
        var cardID: String

        @Option(name: .long, help: "apple_pay, google_pay or samsung_pay.")
        var wallet: String

        func run() async throws {
            report(await RouteExplain.run(config: config, cardID: cardID, wallet: wallet, actor: CommandLineActor.name))
        }
    }
}
