import ArgumentParser
import AsyncHTTPClient
import Foundation
import OpenAPIRuntime
import ProvisioningGatewayClient

/// Drives a running sandbox gateway with Apple Pay provisionings while queuing random faults at
/// its simulators, then prints the success rate, latency percentiles and upstream attempts per
/// request (read back from the audit trail). `scripts/soak.sh` starts a gateway and runs this.
/// It speaks to the gateway through the generated client (`ProvisioningGatewayClient`): the faults
/// are `addSandboxFault` calls, the audit trail `getProvisioning`.
/// Exits 1 when something went wrong beyond the faults: an internal error, an answer that is
/// neither a payload nor a problem with a provisioning id, or an answer whose outcome is not the
/// last event of its audit trail.
@main
struct GatewaySoak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway-soak", abstract: "Soak a sandbox gateway under random upstream faults.")

    @Option(help: "The gateway's base URL.") var url = "http://127.0.0.1:8080"
    @Option(help: "Provisionings to send.") var requests = 2_000
    @Option(help: "Requests in flight at once.") var concurrency = 16
    @Option(help: "Share of requests preceded by a random fault (0...1).") var faultRate = 0.25
    @Option(help: "The client API key.") var key = "sk_sandbox_demo"
    @Option(help: "The request body (a sandbox device's request).") var body = "Config/sandbox/apple-pay-request.json"
    @Option(help: "Cards to provision, comma-separated.") var cards = "card_bridge_demo,card_tmp_demo,card_crossmint_demo"

    static let faults: [(issuers: [String], fault: @Sendable (String) -> Components.Schemas.SandboxFault)] = [
        (["bridge", "tmp", "crossmint"], { .SandboxFaultPlain(.init(issuer: $0, mode: .unavailable, count: 2)) }),
        (["bridge", "tmp", "crossmint"], { .SandboxFaultThrottled(.init(issuer: $0, mode: .throttled, count: 1, retryAfterSeconds: 0)) }),
        (["bridge", "tmp", "crossmint"], { .SandboxFaultTimeout(.init(issuer: $0, mode: .timeout, count: 1, delayMs: 2000)) }),
        (["bridge", "tmp", "crossmint"], { .SandboxFaultPlain(.init(issuer: $0, mode: .reset, count: 1)) }),
        (["bridge", "tmp", "crossmint"], { .SandboxFaultSlow(.init(issuer: $0, mode: .slow, count: 3, delayMs: 200)) }),
        (["bridge", "crossmint"], { .SandboxFaultPlain(.init(issuer: $0, mode: .garbage, count: 1)) }),
    ]

    struct Result: Sendable {
        let status: Int
        let code: String?
        let retryable: Bool
        let provisioningID: String?
        let latency: Duration
    }

    func run() async throws {
        let payload = try JSONDecoder().decode(ProvisioningGateway.ApplePayRequest.self, from: Data(contentsOf: URL(fileURLWithPath: body)))
        let cardList = cards.split(separator: ",").map(String.init)
        guard let baseURL = URL(string: url) else { throw ValidationError("--url \(url) is not a URL") }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let gateway = ProvisioningGateway(baseURL: baseURL, apiKey: key, httpClient: client)
        _ = try await gateway.raw.clearSandboxFaults()

        let started = ContinuousClock.now
        let results = try await withThrowingTaskGroup(of: [Result].self) { group in
            let perWorker = (requests + concurrency - 1) / concurrency
            for worker in 0..<concurrency {
                group.addTask {
                    var results: [Result] = []
                    for index in 0..<perWorker where worker * perWorker + index < requests {
                        if Double.random(in: 0..<1) < faultRate, let (issuers, fault) = Self.faults.randomElement() {
                            _ = try? await gateway.raw.addSandboxFault(body: .json(fault(issuers.randomElement()!)))
                        }
                        let card = cardList[(worker + index) % cardList.count]
                        results.append(try await provision(gateway, card: card, payload))
                    }
                    return results
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let wall = started.duration(to: .now)
        _ = try await gateway.raw.clearSandboxFaults()

        var attempts: [Int] = []
        var errors: [String] = []
        for result in results {
            if result.code == "internal" { errors.append("an internal error") }
            guard let id = result.provisioningID else {
                if result.code != "rate_limited" { errors.append("HTTP \(result.status) \(result.code ?? "-") without a provisioning id") }
                continue
            }
            let events = try await auditEvents(gateway, id)
            attempts.append(events.filter { $0.attempt > 0 && $0.issuer != "local" }.count)
            let recorded = result.status == 200
                ? events.last?.outcome == .succeeded
                : events.last?.errorCode == result.code
            if !recorded { errors.append("\(id): the answer is not the audit trail's last outcome") }
        }
        try await client.shutdown()

        let latencies = results.map { Double($0.latency.components.seconds) * 1000 + Double($0.latency.components.attoseconds) / 1e15 }.sorted()
        func percentile(_ p: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        let succeeded = results.filter { $0.status == 200 }.count
        let retryable = results.filter { $0.status != 200 && $0.retryable }.count
        var codes: [String: Int] = [:]
        for result in results where result.status != 200 { codes[result.code ?? "HTTP \(result.status)", default: 0] += 1 }

        print("requests            \(results.count) in \(String(format: "%.1f", Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18)) s, concurrency \(concurrency), fault rate \(faultRate)")
        print("success rate        \(String(format: "%.2f", 100 * Double(succeeded) / Double(max(results.count, 1)))) %  (\(succeeded) ok, \(retryable) retryable problems, \(results.count - succeeded - retryable) other)")
        print("latency p50 / p99   \(String(format: "%.0f", percentile(0.5))) ms / \(String(format: "%.0f", percentile(0.99))) ms  (max \(String(format: "%.0f", latencies.last ?? 0)) ms)")
        print("attempts / request  \(String(format: "%.2f", Double(attempts.reduce(0, +)) / Double(max(attempts.count, 1))))")
        if !codes.isEmpty { print("problems            " + codes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")) }
        if !errors.isEmpty {
            print("errors              \(errors.count): " + Set(errors).sorted().prefix(5).joined(separator: "; "))
            throw ExitCode.failure
        }
    }

    /// The provisioning's audit events; none when the gateway has no trail for it. Reading them is
    /// the demo client's requests too: a 429 is waited out (its `Retry-After`), not taken for "none".
    func auditEvents(_ gateway: ProvisioningGateway, _ id: String) async throws -> [Components.Schemas.AuditEvent] {
        while true {
            do {
                return try await gateway.provisioning(id).events
            } catch let problem as GatewayProblem where problem.code == "rate_limited" {
                try await Task.sleep(for: .seconds(problem.retryAfter ?? 1))
            } catch is GatewayProblem {
                return []
            }
        }
    }

    /// One Apple Pay provisioning: its payload's provisioning id, or its problem's status, code and
    /// id. An answer that is neither (the generated client could not read it) keeps its status only.
    func provision(_ gateway: ProvisioningGateway, card: String, _ payload: ProvisioningGateway.ApplePayRequest) async throws -> Result {
        let begin = ContinuousClock.now
        do {
            let answer = try await gateway.provisionApplePay(card: card, payload)
            return Result(status: 200, code: nil, retryable: false, provisioningID: answer.provisioningId, latency: begin.duration(to: .now))
        } catch let problem as GatewayProblem {
            return Result(status: problem.status, code: problem.code, retryable: problem.retryable, provisioningID: problem.provisioningID,
                          latency: begin.duration(to: .now))
        } catch let error as ClientError where error.response != nil {
            return Result(status: error.response.map { $0.status.code } ?? 0, code: nil, retryable: false, provisioningID: nil,
                          latency: begin.duration(to: .now))
        }
    }
}
