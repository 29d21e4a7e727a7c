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
        guard let mode = SandboxFaultMode(rawValue: body.mode.rawValue) else { throw GatewayError(.invalidRequest, "mode: \(SandboxFaultMode.allowed)") }
        let config = SandboxFaultConfig(issuer: body.issuer, mode: mode, count: body.count ?? 1, endpoint: body.endpoint ?? 0,
                                        delayMS: body.delayMs, retryAfterSeconds: body.retryAfterSeconds)
        if let problem = config.problems(path: "", issuers: issuers).first {
            throw GatewayError(.invalidRequest, "\(problem.path.drop { $0 == "." }): \(problem.reason)")
        }
        guard let faults = sandbox.faults(issuer: config.issuer, endpoint: config.endpoint), let mode = FaultMode(rawValue: config.mode.rawValue) else {
            throw GatewayError(.invalidRequest, "issuer \(config.issuer) has no simulator at endpoint \(config.endpoint)")
        }
        await faults.add(Fault(mode: mode, count: config.count, delay: config.delayMS.map { .milliseconds($0) },
                               retryAfterSeconds: config.retryAfterSeconds))
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
