import Foundation
import GatewayServer
import ProvisioningAPI
import ProvisioningCore
import Sandbox

/// `/v1/sandbox/faults`: queue, list and clear the simulators' faults, each caller at the simulators
/// its `FaultScope` reaches.
struct SandboxFaultRoutes: FaultInjection {
    let sandbox: SandboxUpstreams
    let issuers: [String: IssuerConfig]

    /// The simulators (by their `sandbox://` URL) a scope reaches: none that an issuer outside it
    /// sends requests to, since two issuers may name one simulator and a fault plays on whichever
    /// request comes next.
    func simulators(in scope: FaultScope) -> [String] {
        sandbox.instances.keys.filter(scope.reaches)
    }

    func add(_ body: Components.Schemas.SandboxFault, scope: FaultScope) async throws(GatewayError) -> Components.Schemas.SandboxFaults {
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
        guard let url = sandbox.endpointURL(issuer: config.issuer, endpoint: config.endpoint), let faults = sandbox.instances[url]?.faults,
              let mode = FaultMode(rawValue: config.mode.rawValue) else {
            throw GatewayError(.notFound, "issuer \(config.issuer) has no simulator at endpoint \(config.endpoint)")
        }
        // Said as what the issuer's account needs, not as what else it serves (as for activations).
        guard scope.reaches(url) else {
            throw GatewayError(.forbidden, "faults at issuer \(config.issuer) need an admin key, or its account (and its simulator) "
                + "limited to this client's programs (issuers.\(config.issuer).programs)")
        }
        let queued = await faults.add(Fault(mode: mode, count: config.count, delay: config.delayMS.map { .milliseconds($0) },
                                            retryAfterSeconds: config.retryAfterSeconds))
        guard queued else {
            throw GatewayError(.invalidRequest, "the simulator of \(config.issuer) at endpoint \(config.endpoint) already holds "
                + "\(SimulatorFaults.maxQueued) faults: let them play or clear them (DELETE /v1/sandbox/faults); one fault can play for up to 10000 requests (count)")
        }
        return await pending(scope: scope)
    }

    func pending(scope: FaultScope) async -> Components.Schemas.SandboxFaults {
        var faults: [Components.Schemas.SandboxFaults.FaultsPayloadPayload] = []
        for url in simulators(in: scope).sorted() {
            for fault in await sandbox.instances[url]!.faults.pending {
                faults.append(.init(simulator: url, mode: fault.mode.rawValue, remaining: fault.count,
                                    delayMs: fault.delay.map { Int($0.wholeMilliseconds) }, retryAfterSeconds: fault.retryAfterSeconds))
            }
        }
        return .init(faults: faults)
    }

    func clear(scope: FaultScope) async {
        for url in simulators(in: scope) { await sandbox.instances[url]!.faults.clear() }
    }
}
