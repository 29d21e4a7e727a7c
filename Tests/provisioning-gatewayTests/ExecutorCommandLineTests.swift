import AsyncHTTPClient
import Foundation
import GatewayTestSupport
import NIOCore
import NIOFoundationCompat
import Testing

/// `serve --executor event-loops`: the real executable, its tasks on SwiftNIO's event loops
/// (which it checks at start-up, before it listens), serving concurrent provisionings through
/// every sandbox issuer, and stopping cleanly on SIGTERM.
@Suite struct ExecutorCommandLineTests {
    static let cards = ["card_bridge_demo": "bridge", "card_tmp_demo": "tmp", "card_crossmint_demo": "crossmint",
                        "card_marqeta_demo": "marqeta", "card_lithic_demo": "lithic"]

    struct Answer: Sendable {
        let card: String
        let status: Int
        let issuer: String?
        let provisioningID: String?
        let hasPassData: Bool
    }

    /// Runs the sandbox executable (its store in a directory of its own) with `arguments` after
    /// `--config` and `--port 0`; `body` gets it once it printed its first line.
    static func withSandbox<T: Sendable>(
        _ arguments: [String], _ body: @escaping @Sendable (Command.Running) async throws -> T
    ) async throws -> (value: T, status: Int32) {
        let directory = TestDirectories.root.appendingPathComponent("executor-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = try ListenerCommandLineTests.sandboxConfig(directory: directory)
        defer { try? FileManager.default.removeItem(at: config) }
        return try await Command.withRunning(
            try CommandLineTests.executable().path, ["--config", config.path, "--port", "0"] + arguments,
            workingDirectory: CommandLineTests.packageRoot.path, body)
    }

    static func base(_ running: Command.Running) throws -> String {
        try #require(running.firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
    }

    @Test func onTheEventLoopsConcurrentProvisioningsAreServedAndSigtermStopsCleanly() async throws {
        let body = try Data(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json"))
        let perCard = Int.random(in: 3...6)

        let (seen, status) = try await Self.withSandbox(["--executor", "event-loops"]) { running in
            let base = try Self.base(running)
            // Every card's provisionings at once: group commits, upstream calls on several
            // connections, and the local encryptor, all from tasks on the event loops.
            let answers = try await withThrowingTaskGroup(of: Answer.self) { group in
                for card in Self.cards.keys {
                    for _ in 0..<perCard {
                        group.addTask {
                            let answer = try await GracefulShutdownTests.send(
                                .POST, "\(base)/v1/cards/\(card)/wallet-provisioning/apple-pay", body: body)
                            return Answer(card: card, status: answer.status, issuer: answer.json["issuer"] as? String,
                                          provisioningID: answer.json["provisioning_id"] as? String,
                                          hasPassData: (answer.json["encrypted_pass_data"] as? String)?.isEmpty == false)
                        }
                    }
                }
                var answers: [Answer] = []
                for try await answer in group { answers.append(answer) }
                return answers
            }
            return (firstLine: running.firstLine, answers: answers)
        }
        #expect(seen.firstLine.contains("tasks on the event loops"), "\(seen.firstLine)")
        #expect(seen.answers.count == Self.cards.count * perCard)
        for answer in seen.answers {
            #expect(answer.status == 200, "\(answer.card): HTTP \(answer.status)")
            #expect(answer.issuer == Self.cards[answer.card], "\(answer.card) answered by \(answer.issuer ?? "nobody")")
            #expect(answer.hasPassData, "\(answer.card): no encrypted pass data")
        }
        #expect(Set(seen.answers.compactMap(\.provisioningID)).count == seen.answers.count, "every provisioning has an id of its own")
        #expect(status == 0)
    }

    /// Without the flag, and with `--executor task-pool`, there is no takeover: the banner says
    /// nothing of event loops and the gateway serves (the tasks' placement itself is only checked
    /// from inside, by `serve`, for the event loops).
    @Test(arguments: [[], ["--executor", "task-pool"]])
    func theDefaultAndTaskPoolLeaveTheEventLoopsAlone(_ arguments: [String]) async throws {
        let body = try Data(contentsOf: CommandLineTests.packageRoot.appendingPathComponent("Config/sandbox/apple-pay-request.json"))
        let (seen, status) = try await Self.withSandbox(arguments) { running in
            let answer = try await GracefulShutdownTests.send(
                .POST, "\(try Self.base(running))/v1/cards/card_bridge_demo/wallet-provisioning/apple-pay", body: body)
            return (firstLine: running.firstLine, status: answer.status)
        }
        #expect(seen.firstLine.hasPrefix("provisioning-gateway listening on http://127.0.0.1:"))
        #expect(!seen.firstLine.contains("event loops"))
        #expect(seen.status == 200)
        #expect(status == 0)
    }

    @Test func anUnknownExecutorIsRefusedNamingTheChoices() async throws {
        let run = try await CommandLineTests.run(["--executor", "threads", "--port", "0"])
        #expect(run.status != 0)
        #expect(run.stderr.contains("'task-pool'") && run.stderr.contains("'event-loops'"), "\(run.stderr)")
        #expect(!run.stdout.contains("listening on"))
    }
}
