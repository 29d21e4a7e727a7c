import Foundation
import Gateway
import GatewayStore
import HTTPTypes
import Hummingbird
import Logging
import OpenAPIHummingbird
import ProvisioningAPI
import ProvisioningCore
import ServiceLifecycle
import UnixSignals

/// What a composition adds to the production gateway. The sandbox (module `SandboxGateway`) uses it
/// for its simulators, demo cards and fault routes; production passes nothing.
public struct GatewayExtensions: Sendable {
    /// Run beside the gateway: started before the server, stopped after it.
    public var services: [any Service]
    /// After migrations, before the upstreams are built: e.g. seeding the store.
    public var prepareStore: (@Sendable (any GatewayStore) async throws -> Void)?
    /// Where `sandbox://` endpoints and `sandbox` credentials point, once known (simulators pick
    /// their ports when they start). Without it such endpoints are configuration errors.
    public var sandboxEndpoints: (@Sendable () async throws -> SandboxEndpoints)?
    /// The fault-injection routes; 404 without it.
    public var faults: (any FaultInjection)?

    public init(
        services: [any Service] = [], prepareStore: (@Sendable (any GatewayStore) async throws -> Void)? = nil,
        sandboxEndpoints: (@Sendable () async throws -> SandboxEndpoints)? = nil, faults: (any FaultInjection)? = nil
    ) {
        self.services = services
        self.prepareStore = prepareStore
        self.sandboxEndpoints = sandboxEndpoints
        self.faults = faults
    }
}

/// The composition root: one function builds the whole gateway (store, upstream clients, purge job,
/// HTTP server, drain) for `serve` and for every end-to-end test. Nothing runs until the returned
/// process runs; migrations run before the server listens.
///
/// - Parameters:
///   - store: a store the caller opened (tests); the config's store otherwise.
///   - clock: the one clock that decides time-based behaviour (rate limits, drain, purge).
///   - wallClock: the wall time beside it (idempotency expiry and abandon times, the purge's
///     cut-off, certificate validity, event timestamps); the system's when nil.
///   - configSource: the file a reload reads (SIGHUP, `POST /v1/admin/config/reload`); without it
///     a reload is refused.
///   - tracing: the tracer of the request and upstream-attempt spans (tests pass an in-memory
///     one); what `telemetry` configures otherwise (`GatewayTracing.configured`).
public func buildGateway(
    config: GatewayConfig,
    configSource: ConfigSource? = nil,
    environment: [String: String] = ProcessInfo.processInfo.environment,
    logger: Logger,
    store givenStore: (any GatewayStore)? = nil,
    extensions: GatewayExtensions = GatewayExtensions(),
    health givenHealth: UpstreamHealth? = nil,
    clock: some Clock<Duration> = ContinuousClock(),
    wallClock: (@Sendable () -> Date)? = nil,
    tracing givenTracing: GatewayTracing? = nil,
    onAuthFailure: @escaping @Sendable (_ source: String, _ reason: String) async -> Void = { _, _ in },
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) throws -> GatewayProcess {
    // Every secret the environment must hold, and every file the config names, is checked before
    // anything opens or listens (the same checks as `config check`).
    let problems = StartupChecks.environmentProblems(config: config, environment: environment)
        + StartupChecks.fileProblems(config: config, environment: environment, store: givenStore == nil)
    guard problems.isEmpty else { throw ConfigError(source: "environment and files", problems: problems) }

    let storeService: (client: (any Service)?, name: String)
    let store: any GatewayStore
    var serveLock: SQLiteServeLock?
    if let givenStore {
        store = givenStore
        storeService = (nil, "given")
    } else {
        // One `serve` per SQLite file, refused before the database is opened (or migrated).
        if config.store.postgres == nil { serveLock = try SQLiteServeLock(databasePath: config.store.sqlite.path) }
        let opened = try StoreBootstrap.open(config.store, baseDirectory: config.baseDirectory, environment: environment, logger: logger)
        store = opened.store
        storeService = (opened.service, opened.name)
    }

    // The one clock behind every decision time makes: deadlines, backoff, Retry-After, breaker
    // windows, idempotency waits, rate limits, the drain delay, the purge interval.
    let clock = GatewayClock(clock, wall: wallClock)
    let metrics = GatewayMetrics()
    let health = givenHealth ?? UpstreamHealth(metrics: metrics, clock: clock, wallClock: { clock.date })
    // The pause state starts from the file; a config reload applies its file the same way.
    health.applyPauses(config: Dictionary(uniqueKeysWithValues: config.issuers.map { (IssuerID($0.key), $0.value.paused) }))
    let readiness = Readiness()
    // The generation of the configuration serving requests; a reload swaps it (ConfigReload.swift).
    let live = LiveConfiguration()
    let tracing = try givenTracing ?? GatewayTracing.configured(config.telemetry, logger: logger)

    // Failed authentications are security events (source address and reason, never the key).
    let securityAudit = SecurityAudit(store: store, logger: logger)
    let authFailureEvents = AuthFailureEvents(audit: securityAudit, clock: clock, logger: logger)
    let reportAuthFailure: @Sendable (String, String) async -> Void = { source, reason in
        await authFailureEvents.note(source: source, reason: reason)
        await onAuthFailure(source, reason)
    }
    let local = try LocalIssuer.build(config: config, store: store, environment: environment)
    let lateWrites = LateWrites()
    let clientLimits = RateLimiter<ClientID, GatewayClock>(clock: clock, defaultLimit: .clientDefault, limits: RateLimits.clients(config))
    let failureLimits = RateLimiter<String, GatewayClock>(clock: clock, defaultLimit: config.server.authFailureLimit)
    let clientsInFlight = InFlightLimiter<ClientID>()
    let reloader = ConfigReloader(
        source: configSource, live: live,
        parts: GenerationParts(store: store, local: local, health: health, metrics: metrics,
                               sealer: ResponseSealer(keyring: local.vault.keyring), clock: clock, tracer: tracing.tracer, logger: logger,
                               transitions: TokenTransitionsUnderWay(),
                               callerNow: { [live] client throws(GatewayError) in try APIHandler.callerNow(client, live: live) },
                               lateWrites: lateWrites),
        environment: environment, audit: securityAudit, clientLimits: clientLimits, failureLimits: failureLimits)

    let router = Router(context: GatewayRequestContext.self)
    router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
    router.add(middleware: RequestIDMiddleware(logger: logger))
    router.add(middleware: RequestTracingMiddleware(tracer: tracing.tracer))
    // Only where its lines are written: below `info` (the benchmarks' `warning`) it would cost its
    // clock reads and task local on every request for nothing.
    if config.log.access && logger.logLevel <= .info { router.add(middleware: AccessLogMiddleware(logger: logger)) }
    // The spec's paths and their methods: a method a path does not declare is 405 with `Allow`.
    let declaredMethods = try ServedContract.contract().declaredMethods
    router.add(middleware: ProblemMiddleware(logger: logger, declaredMethods: declaredMethods))
    // From here on a request runs on the config generation serving when it arrived.
    router.add(middleware: ConfigGenerationMiddleware(live: live))
    router.add(middleware: ClientAuthMiddleware(
        authenticator: { RequestScope.generation?.authenticator ?? ClientAuthenticator(clients: []) },
        clientLimits: clientLimits, inFlight: clientsInFlight, failureLimits: failureLimits,
        metricsPublic: config.server.metricsPublic, metrics: metrics,
        onAuthFailure: reportAuthFailure))
    router.add(middleware: BodyLimitMiddleware(maxBytes: { RequestScope.generation?.config.server.maxBodyBytes ?? config.server.maxBodyBytes }))

    let handler = APIHandler(
        live: live, reloader: reloader, store: store, audit: securityAudit, health: health, metrics: metrics, readiness: readiness,
        clientsInFlight: clientsInFlight, faults: extensions.faults)
    // The OpenAPI document's request rules run before the generated decoding and every handler.
    try handler.registerHandlers(on: router, middlewares: [RequestContractMiddleware(contract: ServedContract.contract())])
    // A known path with a method the spec does not declare answers 405 with `Allow`, not 404.
    for (path, declared) in declaredMethods {
        let routerPath = RouterPath(path.replacingOccurrences(of: "{", with: ":").replacingOccurrences(of: "}", with: ""))
        for method in DeclaredOperations.methods where !declared.contains(method) {
            router.on(routerPath, method: HTTPRequest.Method(method)!) { _, _ -> Response in
                var error = GatewayError(.methodNotAllowed, "\(method) is not allowed on \(path); it has \(declared.joined(separator: ", "))")
                error.allowedMethods = declared
                throw error
            }
        }
    }

    // The server's own start/stop chatter stays below the gateway's banner and request logs.
    var serverLogger = logger
    serverLogger.logLevel = max(logger.logLevel, .notice)
    var app = Application(
        router: router,
        // HTTPS when `server.tls` is set, and the listener's limits (Transport/GatewayListener.swift).
        server: try GatewayListener.server(config: config, maxBodyBytes: { live.current?.config.server.maxBodyBytes ?? config.server.maxBodyBytes }),
        configuration: .init(address: .hostname(config.server.host, port: config.server.port), serverName: "provisioning-gateway"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
        logger: serverLogger)
    // Before the listener opens: the schema, the composition's own preparation, then the upstreams
    // (whose sandbox endpoints are known only once the simulators listen).
    app.beforeServerStarts {
        do {
            try await store.migrate()
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(store: storeService.name, reason: "migration failed (\(error))")
        }
        // A vault key that opens none of the entries sealed under its id (another key put in the
        // variable) stops start-up, before anything is sealed with it (the sandbox's demo cards):
        // it had started, and every local provisioning then answered 500 (vault audit).
        if let problem = try await local.vault.keyProblem() {
            throw ConfigError(source: "vault", problems: [ConfigProblem("vault", problem)])
        }
        if let prepare = extensions.prepareStore { try await prepare(store) }
        // Entries sealed by an earlier version are bound to less than their card at its issuer;
        // they still open, and `vault rotate` re-seals them (after the sandbox re-sealed its own).
        let older = try await local.vault.olderFormCount()
        if older > 0 {
            logger.warning("vault entries sealed by an earlier version, bound to less than their card at its issuer: run `provisioning-gateway vault rotate` to re-seal them",
                           metadata: ["older_entries_among_first_50": "\(older)"])
        }
        let endpoints = try await extensions.sandboxEndpoints?() ?? SandboxEndpoints()
        try await reloader.start(config: config, sandbox: endpoints)
    }

    // Start order; a graceful shutdown stops them in reverse: drain (readiness 503, then the
    // delay), the server (listener closed, requests in flight finish), the composition's services,
    // the late store writes (tried at once), the purge job, the upstream clients, the store, and
    // last the tracer's exporter (flushing the spans of the last requests).
    let users: [any Service] = [
        UpstreamClientsService(live: live),
        PurgeJob(store: store, clock: clock, interval: PurgeJob.interval, logger: logger),
        LateWritesService(writes: lateWrites, clock: clock, logger: logger),
    ] + extensions.services + [
        app,
        DrainService(readiness: readiness, delay: .milliseconds(config.server.shutdownDelayMS), clock: clock, logger: logger),
    ]
    // Every service started after the store uses it: the store's pool outlives them all.
    let storeUsers = StoreUsers(count: users.count)
    let traced: [any Service] = [StoreService(store: storeService.client, name: storeService.name, users: storeUsers,
                                              lateWrites: lateWrites, clock: clock, logger: logger)]
        + users.map { StoreUser(base: $0, users: storeUsers) }
    // The tracer's exporter outlives every other service, the store included (`TracingService`).
    let services: [any Service]
    if let exporter = tracing.service {
        let others = StoreUsers(count: traced.count)
        services = [TracingService(exporter: exporter, others: others, clock: clock, logger: logger)]
            + traced.map { StoreUser(base: $0, users: others) }
    } else {
        services = traced
    }
    return GatewayProcess(
        store: store, serveLock: serveLock, live: live, reloader: reloader, health: health, readiness: readiness,
        services: services.map { LoggedService(base: $0, logger: logger) },
        shutdownTimeout: .milliseconds(config.server.shutdownDelayMS) + config.shutdownTimeout,
        logger: logger)
}

/// A built gateway: its services, and what tests look at while it runs.
public struct GatewayProcess: Sendable {
    public let store: any GatewayStore
    /// Held for as long as the process value lives (a SQLite store the gateway opened itself).
    let serveLock: SQLiteServeLock?
    let live: LiveConfiguration
    let reloader: ConfigReloader
    /// The upstreams of the configuration serving now (empty until the gateway has started).
    public var upstreams: UpstreamDirectory { live.current?.upstreams ?? UpstreamDirectory() }
    public let health: UpstreamHealth
    public let readiness: Readiness
    let services: [LoggedService]
    /// The drain delay plus `server.shutdown_timeout_ms`: after it, what still runs is cancelled.
    public let shutdownTimeout: Duration
    let logger: Logger

    /// How long the group waits for what it cancelled at the shutdown timeout (`serviceGroup`):
    /// 30 s for the cut-off requests' writes and the late writes' drains (`LateWrites.drainBound`,
    /// 15 s of it), then the tracer's last export (`TracingService.flushBound`).
    public static let cancellationBound: Duration = .seconds(30) + TracingService.flushBound

    /// The one service group: a service that fails or stops on its own shuts the group down
    /// gracefully (requests in flight still finish) with its cause logged. With `stopOnSignals`
    /// (`serve`), SIGTERM and SIGINT start a graceful shutdown, and SIGHUP reloads the config file
    /// when the gateway has one.
    public func serviceGroup(stopOnSignals: Bool = false) -> ServiceGroup {
        let signals: [UnixSignal] = stopOnSignals ? [.sigterm, .sigint] : []
        var services = services
        if stopOnSignals && reloader.source != nil {
            // Before the store and the server: SIGHUP is trapped before the gateway listens.
            let readiness = readiness
            services.insert(LoggedService(base: ReloadOnSignal(reloader: reloader, draining: { readiness.isDraining }, logger: logger),
                                          logger: logger), at: 0)
        }
        var configuration = ServiceGroupConfiguration(
            services: services.map {
                .init(service: $0, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)
            },
            gracefulShutdownSignals: signals, logger: logger)
        configuration.maximumGracefulShutdownDuration = shutdownTimeout
        // Requests cut off at the timeout still write what they did (their attempts' audit events,
        // their keys' claims), and each write may wait the store's busy timeout (SQLite's 5 s, while
        // another writer, a `cards import` say, holds the lock) or PostgreSQL's operation timeout;
        // a request makes two or three such writes one after another. A bound of 5 s had stopped
        // the process (ServiceLifecycle's fatalError, exit 132) while they waited, and the events
        // of issuer successes were lost (lifecycle audit). What has not stopped after this is not
        // going to: ServiceLifecycle then ends the process.
        configuration.maximumCancellationDuration = Self.cancellationBound
        return ServiceGroup(configuration: configuration)
    }
}
