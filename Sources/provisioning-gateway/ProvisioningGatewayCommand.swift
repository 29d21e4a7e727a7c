import ArgumentParser
import Foundation
import GatewayServer
import Logging
import NIOCore
import NIOPosix
import ProvisioningCore
import SandboxGateway

/// Parses the command line first, so that `serve --executor event-loops` can hand Swift
/// Concurrency's global executor to SwiftNIO's event loops before any task is started, which
/// NIO's takeover requires; then runs the command as `AsyncParsableCommand.main` would.
@main
enum Entry {
    static func main() async {
        if let problem = OperatorTools.commandLineProblem(Array(CommandLine.arguments.dropFirst())) {
            FileHandle.standardError.write(Data("provisioning-gateway: \(problem)\n".utf8))
            exit(2)
        }
        do {
            var command = try ProvisioningGatewayCommand.parseAsRoot()
            if command is Serve {
                // A SIGHUP before the reload service traps it (start-up: the store's migrations,
                // the first configuration) took the default action and ended the gateway (the
                // crash audit: a `systemctl reload` right after a start). Ignored until then: the
                // file is being read anyway. Dispatch's signal source, installed later, still
                // hears it (`ReloadOnSignal`).
                signal(SIGHUP, SIG_IGN)
            }
            if let serve = command as? Serve, serve.executor == .eventLoops {
                guard TaskPlacement.runTasksOnEventLoops() else {
                    Serve.fail("--executor event-loops: SwiftNIO could not take over Swift Concurrency's global executor")
                }
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            ProvisioningGatewayCommand.exit(withError: error)
        }
    }
}

struct ProvisioningGatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "provisioning-gateway",
        abstract: "One push-provisioning API in front of Bridge, TMP, Crossmint, Marqeta and Lithic.",
        subcommands: [Serve.self, ConfigTools.self, RouteTools.self, Cards.self, Vault.self, StoreTools.self, SandboxTools.self],
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

    @Option(name: .long, help: """
        Where the gateway's tasks run: task-pool (Swift's cooperative thread pool) or event-loops \
        (SwiftNIO's event loops, which also do the network I/O: fewer thread hand-offs and a little \
        less CPU, a longer tail latency under load; README, "Performance").
        """)
    var executor: TaskPlacement = .taskPool

    func validate() throws {
        // The file's server.port is checked with the file; a port given here replaces it after.
        if let port, !(0...65_535).contains(port) {
            throw ValidationError("--port must be 0 to 65535 (0 picks a free one), not \(port)")
        }
    }

    func run() async throws {
        var gatewayConfig: GatewayConfig
        do {
            gatewayConfig = try GatewayConfigFile.load(path: config)
        } catch {
            // One run names every problem, the environment's and the files' too, as `config
            // check` does (start-up had named the file's alone, and the rest only once those were
            // fixed).
            let check = ConfigCheck.run(path: config)
            if check.failure != nil { report(check) }
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
        for warning in gatewayConfig.advisories + KeyFilePermissions.warnings(config: gatewayConfig) { logger.warning("\(warning)") }
        let allocator = ProcessAllocator.report()
        logger.log(level: allocator.isWarning ? .warning : .info, "allocator: \(allocator.text)")
        if executor == .eventLoops {
            // Entry.main installed the takeover; a task started now must run on an event loop.
            guard await TaskPlacement.aTaskRunsOnAnEventLoop() else {
                Self.fail("--executor event-loops: a task did not run on an event loop after SwiftNIO's takeover")
            }
        }
        logger.info("executor: \(executor.description)")

        let host = gatewayConfig.server.host
        let scheme = gatewayConfig.server.tls == nil ? "http" : "https"
        let sandbox = gatewayConfig.sandbox.enabled
        let demoCard = SandboxSeed.demoCard(config: gatewayConfig) ?? "CARD_ID"
        let onEventLoops = executor == .eventLoops
        let environment = ProcessInfo.processInfo.environment
        let banner: @Sendable (Int) async -> Void = { port in
            let base = "\(scheme)://\(host):\(port)"
            let notes = [sandbox ? "sandbox: Bridge, TMP, Crossmint, Marqeta and Lithic simulators on loopback" : nil,
                         onEventLoops ? "tasks on the event loops" : nil].compactMap { $0 }
            print("provisioning-gateway listening on \(base)\(notes.isEmpty ? "" : " (\(notes.joined(separator: "; ")))")")
            print("  API spec:  curl -s \(base)/openapi.yaml")
            if sandbox {
                print("  try:       curl -s -X POST \(base)/v1/cards/\(demoCard)/wallet-provisioning/apple-pay \\")
                print("               -H 'Authorization: Bearer \(SandboxSeed.demoKey)' -H 'Content-Type: application/json' \\")
                print("               --data @Config/sandbox/apple-pay-request.json")
            }
            fflush(nil)
        }
        // SIGHUP and POST /v1/admin/config/reload read the same file again, with the same --port.
        let portOverride = port
        let source = ConfigSource(path: config) { config in
            if let portOverride { config.server.port = portOverride }
        }
        var built: GatewayProcess?
        do {
            // The sandbox composition adds the simulators, demo cards and fault routes; production
            // is the gateway alone.
            let process = sandbox
                ? try SandboxGateway(config: gatewayConfig, configSource: source, environment: environment, logger: logger,
                                     onServerRunning: banner).process
                : try buildGateway(config: gatewayConfig, configSource: source, environment: environment, logger: logger,
                                   onServerRunning: banner)
            built = process
            // The process value holds the SQLite store's serve lock: kept until the group has run.
            defer { withExtendedLifetime(process) {} }
            try await process.serviceGroup(stopOnSignals: true).run()
            logger.notice("provisioning-gateway stopped")
        } catch let error as ConfigError {
            Self.fail("\(error)")
        } catch let error as StoreError {
            Self.fail("the store is not usable: \(error)")
        } catch is CancellationError where built?.readiness.isDraining == true {
            // A shutdown had begun and its bound passed: what still ran was cancelled. A stop as
            // documented, said plainly, not a failure (a cancellation before any shutdown is one).
            logger.warning(
                "provisioning-gateway stopped: the graceful shutdown took longer than server.shutdown_delay_ms + server.shutdown_timeout_ms and what still ran was cancelled")
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

/// Where Swift Concurrency runs the gateway's tasks (`serve --executor`).
///
/// - `taskPool`: Swift's cooperative pool, one thread per core beside SwiftNIO's event loops (one
///   per core). A request's task hops between the two: from the event loop that read it to the
///   pool, to the upstream connection's event loop and back, and to the event loop that writes
///   the answer; each hop wakes a thread.
/// - `eventLoops`: SwiftNIO's takeover of the global executor
///   (`NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`):
///   tasks run on the event loops themselves, and a task resumed by an event loop stays on it.
///   Measured beside the pool (README, "Performance"): 30-42 % fewer context switches and
///   10-16 % fewer system calls per provisioning, 3-8 % less CPU at one connection and none at
///   16, and a longer p99 at 16 connections, since a task that blocks its thread (a store read,
///   a commit on the request's thread) now holds up that event loop's I/O too, and a loop's
///   queued tasks cannot move to an idle thread. It must be installed before any task starts,
///   once per process, which is why `Entry.main` parses the command line first.
enum TaskPlacement: String, ExpressibleByArgument, CaseIterable, CustomStringConvertible {
    case taskPool = "task-pool"
    case eventLoops = "event-loops"

    var description: String {
        switch self {
        case .taskPool: "tasks on Swift's cooperative pool"
        case .eventLoops: "tasks on SwiftNIO's event loops"
        }
    }

    /// Hands the global executor to `MultiThreadedEventLoopGroup.singleton` (the group the
    /// listener and the upstream connections use). Only from `Entry.main`, before any task.
    static func runTasksOnEventLoops() -> Bool {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
    }

    /// Whether a task started now runs on one of SwiftNIO's event loops.
    static func aTaskRunsOnAnEventLoop() async -> Bool {
        await Task.detached { MultiThreadedEventLoopGroup.currentEventLoop != nil }.value
    }
}
