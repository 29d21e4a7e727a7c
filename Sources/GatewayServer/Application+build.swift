import Foundation
import Gateway
import Hummingbird
import Logging
import OpenAPIHummingbird
import ProvisioningAPI
import ProvisioningCore

/// The one place the HTTP application is assembled; the CLI and the tests both call it.
public func buildApplication(
    config: GatewayConfig,
    store: any GatewayStore,
    upstreams: UpstreamDirectory,
    environment: [String: String] = ProcessInfo.processInfo.environment,
    logger: Logger,
    sandbox: SandboxUpstreams? = nil,
    health: UpstreamHealth? = nil,
    clock: some Clock<Duration> = ContinuousClock(),
    onAuthFailure: @escaping @Sendable (_ source: String, _ reason: String) async -> Void = { _, _ in },
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) throws -> some ApplicationProtocol {
    // The one clock behind every decision time makes: deadlines, backoff, Retry-After, breaker
    // windows, idempotency waits, rate limits.
    let clock = GatewayClock(clock)
    let metrics = GatewayMetrics()
    let health = health ?? UpstreamHealth(metrics: metrics, clock: clock)
    for upstream in upstreams.issuers.values {
        for (index, endpoint) in upstream.endpoints.enumerated() {
            health.register(issuer: upstream.issuer, index: index, url: endpoint.endpoint, policy: upstream.breaker)
        }
    }
    // Failed authentications are security events (source address and reason, never the key).
    let securityAudit = SecurityAudit(store: store, logger: logger)
    let reportAuthFailure: @Sendable (String, String) async -> Void = { source, reason in
        await securityAudit.note(SecurityEvent(at: Date(), kind: .authFailed, actor: "anonymous", source: source, detail: ["reason": reason]))
        await onAuthFailure(source, reason)
    }
    let router = Router(context: GatewayRequestContext.self)
    router.add(middleware: RequestIDMiddleware(logger: logger))
    router.add(middleware: ProblemMiddleware(logger: logger))
    router.add(middleware: ClientAuthMiddleware(
        authenticator: ClientAuthenticator(clients: config.clients),
        clientLimits: RateLimiter(clock: clock, defaultLimit: .clientDefault,
                                  limits: Dictionary(uniqueKeysWithValues: config.clients.compactMap { client in
                                      client.rateLimit.map { (ClientID(client.id), $0) }
                                  })),
        failureLimits: RateLimiter(clock: clock, defaultLimit: config.server.authFailureLimit),
        metricsPublic: config.server.metricsPublic,
        onAuthFailure: reportAuthFailure))
    router.add(middleware: BodyLimitMiddleware(maxBytes: config.server.maxBodyBytes))

    let spec = try OpenAPISpec.yaml()
    router.get("/openapi.yaml") { _, _ in
        Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: ByteBuffer(bytes: spec)))
    }

    let deadline = Duration.milliseconds(config.server.deadlineMS)
    let local = try LocalIssuer.build(config: config, store: store, environment: environment)
    let service = ProvisioningService(
        store: store, upstreams: upstreams, local: local.connector, routing: config.routing.table, deadline: deadline,
        validatedIssuers: Set(config.issuers.filter(\.value.validateChain).map { IssuerID($0.key) }),
        chainValidator: local.validator, health: health, metrics: metrics,
        activationIssuer: config.routing.activations.issuer.map { IssuerID($0) },
        issuerPrograms: config.issuers.reduce(into: [:]) { programs, entry in
            if let allowed = entry.value.programs { programs[IssuerID(entry.key)] = Set(allowed.map { ProgramID($0) }) }
        },
        clock: clock, logger: logger)
    let handler = APIHandler(
        service: service, store: store, registration: CardRegistration(config: config),
        audit: securityAudit,
        // A duplicate waits as long as the longest deadline any route has, so a claim still being
        // served is never taken for an abandoned one.
        idempotency: IdempotencyGuard(store: store, ttl: .seconds(config.store.idempotencyTTLSeconds),
                                      waitLimit: config.routing.rules.compactMap(\.deadlineMS).map { Duration.milliseconds($0) }
                                          .reduce(deadline, max),
                                      sealer: ResponseSealer(keyring: local.vault.keyring), clock: clock),
        upstreams: upstreams, health: health, metrics: metrics, sandbox: config.sandbox.enabled ? sandbox : nil,
        configuredIssuers: config.issuers)
    try handler.registerHandlers(on: router)

    // The server's own start/stop chatter stays below the gateway's banner and request logs.
    var serverLogger = logger
    serverLogger.logLevel = max(logger.logLevel, .notice)
    return Application(
        router: router,
        // HTTPS when `server.tls` is set, and the listener's limits (Transport/GatewayListener.swift).
        server: try GatewayListener.server(config: config),
        configuration: .init(address: .hostname(config.server.host, port: config.server.port), serverName: "provisioning-gateway"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
        logger: serverLogger)
}
