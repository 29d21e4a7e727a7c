import ArgumentParser
import Foundation
import GatewayServer
import Logging
import ProvisioningCore
import SandboxGateway

@main
struct ProvisioningGatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "provisioning-gateway",
        abstract: "One push-provisioning API in front of Bridge, TMP, Crossmint, Marqeta and Lithic.",
        subcommands: [Serve.self, ConfigTools.self, RouteTools.self, Cards.self, Vault.self, SandboxTools.self],
        defaultSubcommand: Serve.self)
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the gateway (the sandbox of Config/gateway.yaml by default).")

    @Option(name: .long, help: "The YAML configuration file.")
    var config: String = "Config/gateway.yaml"

    @Option(name: .long, help: "Listen on this port instead of the file's server.port (0 picks a free one).")
    var port: Int?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    @Option(name: .long, help: "text (readable lines) or json (one JSON object per line); overrides the file's log.format.")
    var logFormat: LogFormat?

    func run() async throws {
        var gatewayConfig: GatewayConfig
        do {
            gatewayConfig = try GatewayConfigFile.load(path: config)
        } catch {
            Self.fail("\(error)")
        }
        // After the file is read, which may choose the format; a file that cannot be read fails
        // with a plain message above.
        GatewayLogging.bootstrap(level: logLevel, format: logFormat ?? gatewayConfig.log.format)
        let logger = Logger(label: "provisioning-gateway")
        if let port { gatewayConfig.server.port = port }
        if let warning = OpenFileLimit.raise(for: gatewayConfig.server.maxConnections).warning {
            logger.warning("\(warning)")
        }
        let allocator = ProcessAllocator.report()
        logger.log(level: allocator.isWarning ? .warning : .info, "allocator: \(allocator.text)")

        let host = gatewayConfig.server.host
        let scheme = gatewayConfig.server.tls == nil ? "http" : "https"
        let sandbox = gatewayConfig.sandbox.enabled
        let demoCard = gatewayConfig.sandbox.cards.first?.cardID ?? "CARD_ID"
        let environment = ProcessInfo.processInfo.environment
        let banner: @Sendable (Int) async -> Void = { port in
            let base = "\(scheme)://\(host):\(port)"
            print("provisioning-gateway listening on \(base)\(sandbox ? " (sandbox: Bridge, TMP, Crossmint, Marqeta and Lithic simulators on loopback)" : "")")
            print("  API spec:  curl -s \(base)/openapi.yaml")
            if sandbox {
                print("  try:       curl -s -X POST \(base)/v1/cards/\(demoCard)/wallet-provisioning/apple-pay \\")
                print("               -H 'Authorization: Bearer sk_sandbox_demo' -H 'Content-Type: application/json' \\")
                print("               --data @Config/sandbox/apple-pay-request.json")
            }
            fflush(nil)
        }
        // SIGHUP and POST /v1/admin/config/reload read the same file again, with the same --port.
        let portOverride = port
        let source = ConfigSource(path: config) { config in
            if let portOverride { config.server.port = portOverride }
        }
        do {
            // The sandbox composition adds the simulators, demo cards and fault routes; production
            // is the gateway alone.
            let process = sandbox
                ? try SandboxGateway(config: gatewayConfig, configSource: source, environment: environment, logger: logger,
                                     onServerRunning: banner).process
                : try buildGateway(config: gatewayConfig, configSource: source, environment: environment, logger: logger,
                                   onServerRunning: banner)
            try await process.serviceGroup(stopOnSignals: true).run()
            logger.notice("provisioning-gateway stopped")
        } catch let error as ConfigError {
            Self.fail("\(error)")
        } catch let error as StoreError {
            Self.fail("the store is not usable: \(error)")
        } catch {
            Self.fail("the gateway stopped: \(error)")
        }
    }

    /// A clear message and a non-zero exit, never a stack dump.
    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("provisioning-gateway: \(message)\n".utf8))
        Foundation.exit(2)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension LogFormat: ExpressibleByArgument {}
