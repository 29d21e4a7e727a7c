import Foundation
import Gateway
import Logging
import ProvisioningCore
import Synchronization
import Tracing

/// Everything a request reads from the configuration, built from one file: who the clients are,
/// the issuers with their connectors, the routing, the deadlines and body limit. A config reload
/// builds a new generation and swaps it in whole; a request takes the generation serving when it
/// arrives and keeps it to its end (`LiveConfiguration.enter`), so no request sees half of a
/// reload.
final class ConfigGeneration: Sendable {
    /// 1 for the file read at start-up, one more per applied reload.
    let number: Int
    /// The effective configuration: the file's, with the settings that cannot change live pinned
    /// to the running values (`RestartOnlySettings`).
    let config: GatewayConfig
    /// SHA-256 of the file's bytes, hex; nil for the start-up configuration handed in by the caller.
    let fileSHA256: String?
    let authenticator: ClientAuthenticator
    let upstreams: UpstreamDirectory
    let service: ProvisioningService
    let registration: CardRegistration
    let routes: RouteExplainer
    let idempotency: IdempotencyGuard

    init(number: Int, config: GatewayConfig, fileSHA256: String?, upstreams: UpstreamDirectory, parts: GenerationParts) {
        self.number = number
        self.config = config
        self.fileSHA256 = fileSHA256
        self.upstreams = upstreams
        authenticator = ClientAuthenticator(clients: config.clients)
        service = ProvisioningService(
            store: parts.store, upstreams: upstreams, local: parts.local.connector, routing: config.routing.table,
            deadline: .milliseconds(config.server.deadlineMS),
            validatedIssuers: Set(config.issuers.filter(\.value.validateChain).map { IssuerID($0.key) }),
            chainValidator: parts.local.validator, health: parts.health, metrics: parts.metrics,
            activationIssuer: config.routing.activations.issuer.map { IssuerID($0) },
            issuerPrograms: config.issuerPrograms,
            everyClientProgram: config.clientPrograms,
            clock: parts.clock, tracer: parts.tracer, logger: parts.logger, transitions: parts.transitions,
            callerNow: parts.callerNow, lateWrites: parts.lateWrites)
        registration = CardRegistration(config: config)
        routes = RouteExplainer(config: config)
        // A duplicate waits as long as the longest deadline any route has, so a claim still being
        // served is never taken for an abandoned one.
        idempotency = IdempotencyGuard(store: parts.store, ttl: .seconds(config.store.idempotencyTTLSeconds),
                                       waitLimit: .milliseconds(config.longestDeadlineMS), sealer: parts.sealer, clock: parts.clock,
                                       logger: parts.logger, lateWrites: parts.lateWrites)
    }

    /// The breakers this generation's endpoints need, for `UpstreamHealth.reconcile`.
    var endpointSpecs: [UpstreamHealth.EndpointSpec] {
        upstreams.issuers.values.flatMap { upstream in
            upstream.endpoints.enumerated().map { index, endpoint in
                UpstreamHealth.EndpointSpec(issuer: upstream.issuer, index: index, url: endpoint.endpoint, policy: upstream.breaker)
            }
        }
    }
}

/// What every generation shares: built once at start-up from settings that cannot change live.
struct GenerationParts: Sendable {
    let store: any GatewayStore
    let local: LocalIssuer
    let health: UpstreamHealth
    let metrics: GatewayMetrics
    let sealer: ResponseSealer
    let clock: GatewayClock
    /// The request and upstream-attempt spans' tracer (`telemetry`, which takes a restart).
    let tracer: any Tracer
    let logger: Logger
    /// Token transitions under way, shared by every generation (a reload does not let a second
    /// transition of a token past the first).
    let transitions: TokenTransitionsUnderWay
    /// The caller as the serving generation says (`APIHandler.callerNow`), asked by the service.
    let callerNow: CallerNow
    /// The late store writes of every generation, which a stop waits for (`LateWritesService`).
    let lateWrites: LateWrites
}

/// The generation serving requests, and the retired ones that still have requests in flight. A
/// retired generation's HTTP clients that no other generation reuses are shut down when its last
/// request ends (or when the gateway stops).
final class LiveConfiguration: Sendable {
    private struct State {
        var current: ConfigGeneration?
        /// Requests in flight per generation number.
        var inFlight: [Int: Int] = [:]
        /// Replaced generations whose requests have not all finished.
        var retired: [Int: ConfigGeneration] = [:]
        /// Where `sandbox://` endpoints point, known once the simulators listen.
        var sandbox = SandboxEndpoints()
    }
    private let state = Mutex(State())

    /// The generation serving new requests; nil until the gateway has started.
    var current: ConfigGeneration? { state.withLock { $0.current } }
    var sandbox: SandboxEndpoints { state.withLock { $0.sandbox } }
    /// Requests being served now, on every generation (`gateway_requests_in_flight`).
    var requestsInFlight: Int { state.withLock { $0.inFlight.values.reduce(0, +) } }

    /// The generation a request runs on, counted until `leave`.
    func enter() -> ConfigGeneration? {
        state.withLock { state in
            guard let current = state.current else { return nil }
            state.inFlight[current.number, default: 0] += 1
            return current
        }
    }

    func leave(_ generation: ConfigGeneration) {
        let drained = state.withLock { state -> (ConfigGeneration, [UpstreamDirectory])? in
            let left = (state.inFlight[generation.number] ?? 1) - 1
            state.inFlight[generation.number] = left > 0 ? left : nil
            guard left <= 0, state.retired.removeValue(forKey: generation.number) != nil else { return nil }
            return (generation, Self.directories(state))
        }
        if let (generation, serving) = drained {
            Task { await generation.upstreams.shutdown(keeping: serving) }
        }
    }

    /// Serves `generation` from now on. The one it replaces is retired: its clients are shut down
    /// now if no request runs on it, else when its last request leaves.
    func install(_ generation: ConfigGeneration, sandbox: SandboxEndpoints? = nil) async {
        let drained = state.withLock { state -> (ConfigGeneration, [UpstreamDirectory])? in
            let previous = state.current
            state.current = generation
            if let sandbox { state.sandbox = sandbox }
            guard let previous else { return nil }
            if state.inFlight[previous.number, default: 0] > 0 {
                state.retired[previous.number] = previous
                return nil
            }
            return (previous, Self.directories(state))
        }
        if let (previous, serving) = drained { await previous.upstreams.shutdown(keeping: serving) }
    }

    /// Every generation's clients (the gateway is stopping and no request runs any more).
    func shutdown() async {
        let all = state.withLock { state in
            defer { state.retired = [:] }
            return Self.directories(state)
        }
        for directory in all { await directory.shutdown() }
    }

    private static func directories(_ state: State) -> [UpstreamDirectory] {
        (state.current.map { [$0] } ?? []).map(\.upstreams) + state.retired.values.map(\.upstreams)
    }
}
