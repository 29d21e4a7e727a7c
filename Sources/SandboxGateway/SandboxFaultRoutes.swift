import Foundation
import GatewayServer
import ProvisioningAPI
import ProvisioningCore
import Sandbox

/// `/v1/sandbox/faults`: queue, list and clear the simulators' faults.
struct SandboxFaultRoutes: FaultInjection {
    let sandbox: SandboxUpstreams
    let issuers: [String: IssuerConfig]

    func add(_ body: Components.Schemas.SandboxFault) async throws(GatewayError) -> Components.Schemas.SandboxFaults {
        let config = switch body {
        case .SandboxFaultPlain(let fault):
            SandboxFaultConfig(issuer: fault.issuer, mode: SandboxFaultMode(rawValue: fault.mode.rawValue) ?? .unavailable,
                               count: fault.count ?? 1, endpoint: fault.endpoint ?? 0)
        case .SandboxFaultSlow(let fault):
            SandboxFaultConfig(issuer: fault.issuer, mode: .slow, count: fault.count ?? 1, endpoint: fault.endpoint ?? 0, delayMS: fault.delayMs)
        case .SandboxFaultTimeout(let fault):
            SandboxFaultConfig(issuer: fault.issuer, mode: .timeout, count: fault.count ?? 1, endpoint: fault.endpoint ?? 0, delayMS: fault.delayMs)
        case .SandboxFaultThrottled(let fault):
            SandboxFaultConfig(issuer: fault.issuer, mode: .throttled, count: fault.count ?? 1, endpoint: fault.endpoint ?? 0,
                               retryAfterSeconds: fault.retryAfterSeconds)
        }
        // The shape is the OpenAPI document's (checked before this runs); what is left is whether
        // the issuer and its endpoint exist here.
        if let problem = config.problems(path: "", issuers: issuers).first {
            let field = problem.path.drop { $0 == "." }
            throw GatewayError(field == "issuer" || field == "endpoint" ? .notFound : .invalidRequest, "\(field): \(problem.reason)")
        }
        guard let faults = sandbox.faults(issuer: config.issuer, endpoint: config.endpoint), let mode = FaultMode(rawValue: config.mode.rawValue) else {
            throw GatewayError(.notFound, "issuer \(config.issuer) has no simulator at endpoint \(config.endpoint)")
        }
        let queued = await faults.add(Fault(mode: mode, count: config.count, delay: config.delayMS.map { .milliseconds($0) },
                                            retryAfterSeconds: config.retryAfterSeconds))
        guard queued else {
            throw GatewayError(.invalidRequest, "the simulator of \(config.issuer) at endpoint \(config.endpoint) already holds "
                + "\(SimulatorFaults.maxQueued) faults: let them play or clear them (DELETE /v1/sandbox/faults); one fault can play for up to 10000 requests (count)")
        }
        return await pending()
    }

    func pending() async -> Components.Schemas.SandboxFaults {
        var faults: [Components.Schemas.SandboxFaults.FaultsPayloadPayload] = []
        for url in sandbox.instances.keys.sorted() {
            for fault in await sandbox.instances[url]!.faults.pending {
                faults.append(.init(simulator: url, mode: fault.mode.rawValue, remaining: fault.count,
                                    delayMs: fault.delay.map { Int($0.wholeMilliseconds) }, retryAfterSeconds: fault.retryAfterSeconds))
            }
        }
        return .init(faults: faults)
    }

    func clear() async { await sandbox.clearFaults() }
}
