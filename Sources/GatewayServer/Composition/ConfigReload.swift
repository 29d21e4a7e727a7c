import Crypto
import Foundation
import Gateway
import Logging
import ProvisioningCore
import ServiceLifecycle
import UnixSignals

/// Where a reload reads the configuration: the file `serve` started from, with the command line's
/// overrides (`--port`) applied to every read so they are not taken for changes.
public struct ConfigSource: Sendable {
    public let path: String
    public let overrides: @Sendable (inout GatewayConfig) -> Void

    public init(path: String, overrides: @escaping @Sendable (inout GatewayConfig) -> Void = { _ in }) {
        self.path = path
        self.overrides = overrides
    }
}

/// The settings a running gateway cannot change: the listener, the store, the local encryptor's
/// keys and trust anchors, the sandbox, logging, telemetry. A reload keeps their running values and names the
/// ones the file changed (`restart_required`); everything else (clients and their rate limits,
/// issuers, routing, `server.deadline_ms`, `server.max_body_bytes`, `server.auth_failure_limit`)
/// takes effect.
enum RestartOnlySettings {
    /// Copies the running values into `next`; returns the key paths whose values differed.
    static func pin(_ next: inout GatewayConfig, to running: GatewayConfig, startedShutdownTimeout: Duration) -> [String] {
        var differing: [String] = []
        func keep<T: Encodable>(_ path: String, _ field: WritableKeyPath<GatewayConfig, T>) {
            if !same(next[keyPath: field], running[keyPath: field]) { differing.append(path) }
            next[keyPath: field] = running[keyPath: field]
        }
        keep("server.host", \.server.host)
        keep("server.port", \.server.port)
        keep("server.tls", \.server.tls)
        keep("server.allow_plaintext", \.server.allowPlaintext)
        keep("server.metrics_public", \.server.metricsPublic)
        keep("server.idle_timeout_ms", \.server.idleTimeoutMS)
        keep("server.read_timeout_ms", \.server.readTimeoutMS)
        keep("server.write_timeout_ms", \.server.writeTimeoutMS)
        keep("server.max_connections", \.server.maxConnections)
        keep("server.shutdown_delay_ms", \.server.shutdownDelayMS)
        keep("server.shutdown_timeout_ms", \.server.shutdownTimeoutMS)
        // Its default follows the longest deadline, but the bound running was fixed at start-up:
        // longer deadlines get the longer bound they need only after a restart (a shorter one is
        // already covered), however many reloads ago they came.
        if !differing.contains("server.shutdown_timeout_ms"), next.shutdownTimeout > startedShutdownTimeout {
            differing.append("server.shutdown_timeout_ms")
        }
        keep("store", \.store)
        keep("local", \.local)
        keep("vault", \.vault)
        keep("trust", \.trust)
        keep("sandbox", \.sandbox)
        keep("log", \.log)
        keep("telemetry", \.telemetry)
        return differing
    }

    /// The live settings that differ between two effective configurations, issuer by issuer.
    static func changes(from old: GatewayConfig, to new: GatewayConfig) -> [String] {
        var changed: [String] = []
        if !same(old.clients, new.clients) { changed.append("clients") }
        for name in Set(old.issuers.keys).union(new.issuers.keys).sorted() where !same(old.issuers[name], new.issuers[name]) {
            changed.append("issuers.\(name)")
        }
        if !same(old.routing, new.routing) { changed.append("routing") }
        if old.server.deadlineMS != new.server.deadlineMS { changed.append("server.deadline_ms") }
        if old.server.maxBodyBytes != new.server.maxBodyBytes { changed.append("server.max_body_bytes") }
        if old.server.authFailureLimit != new.server.authFailureLimit { changed.append("server.auth_failure_limit") }
        return changed
    }

    private static func same<T: Encodable>(_ a: T, _ b: T) -> Bool {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode([a])) == (try? encoder.encode([b]))
    }
}

/// Who asked for a reload, as the audit event names it.
enum ReloadTrigger: Sendable {
    /// An admin client through `POST /v1/admin/config/reload`, from `source`.
    case admin(Client, source: String)
    /// A signal to the process (`SIGHUP`).
    case signal(String)

    var actor: String {
        switch self {
        case .admin(let client, _): client.id.rawValue
        case .signal(let name): "signal:\(name)"
        }
    }

    var source: String? {
        if case .admin(_, let source) = self { return source }
        return nil
    }
}

/// What a reload did.
struct ReloadOutcome: Sendable {
    /// The generation serving after it: the new one, or the unchanged one after a failure.
    var generation: Int
    var fileSHA256: String?
    /// Empty when the file was applied.
    var problems: [ConfigProblem] = []
    /// Live settings that changed (`clients`, `issuers.<name>`, `routing`, ...).
    var changed: [String] = []
    /// Settings the file changed that take a restart; their running values were kept.
    var restartRequired: [String] = []
    /// What a failure was, for the admin route's answer: the file's problems (`config_invalid`),
    /// a gateway started without a file (`operation_not_supported`), or the audit event of a good
    /// file that could not be written (`internal`: the store's failure, not the file's).
    var failure: GatewayError.Code = .configInvalid
    var applied: Bool { problems.isEmpty }
}

/// Re-reads the config file and swaps a valid one in (SIGHUP and `POST /v1/admin/config/reload`).
/// Reloads run one at a time. A file with any problem (its own, a missing `env:` variable, an
/// unreadable file it names, an upstream that cannot be built) changes nothing; either way the
/// reload is logged, counted (`gateway_config_reloads_total{result}`) and audited with the file's
/// SHA-256. The audit event of an applied reload is written before the swap: a change that cannot
/// be audited is not made.
actor ConfigReloader {
    let source: ConfigSource?
    let live: LiveConfiguration
    let parts: GenerationParts
    let environment: [String: String]
    let audit: SecurityAudit
    /// The clients' and the failed-authentication buckets, whose limits a reload updates in place.
    let clientLimits: RateLimiter<ClientID, GatewayClock>
    let failureLimits: RateLimiter<String, GatewayClock>
    /// The graceful shutdown's bound for requests in flight, fixed when the process started.
    private var startedShutdownTimeout: Duration?

    init(source: ConfigSource?, live: LiveConfiguration, parts: GenerationParts, environment: [String: String], audit: SecurityAudit,
         clientLimits: RateLimiter<ClientID, GatewayClock>, failureLimits: RateLimiter<String, GatewayClock>) {
        self.source = source
        self.live = live
        self.parts = parts
        self.environment = environment
        self.audit = audit
        self.clientLimits = clientLimits
        self.failureLimits = failureLimits
    }

    var logger: Logger { parts.logger }

    /// The start-up generation, once the upstreams can be built (the simulators listen).
    func start(config: GatewayConfig, sandbox: SandboxEndpoints) async throws(ConfigError) {
        startedShutdownTimeout = config.shutdownTimeout
        let upstreams = try await UpstreamDirectory.build(
            config: config, environment: environment, sandbox: sandbox, logger: logger, clock: parts.clock)
        let generation = ConfigGeneration(number: 1, config: config, fileSHA256: nil, upstreams: upstreams, parts: parts)
        parts.health.reconcile(generation.endpointSpecs)
        await live.install(generation, sandbox: sandbox)
        parts.metrics.configGeneration(1)
        parts.metrics.configReloadSeries()
    }

    /// The reload before this one, which this one waits for: an actor lets a second call in
    /// while the first awaits, and two reloads prepared from one running generation both claimed
    /// its next number, and the second undid the first's change (the config audit ran 20 at once).
    private var previous: Task<Void, Never>?

    func reload(_ trigger: ReloadTrigger) async -> ReloadOutcome {
        let before = previous
        let turn = Task { () async -> ReloadOutcome in
            await before?.value
            return await self.reloadNow(trigger)
        }
        previous = Task { _ = await turn.value }
        return await turn.value
    }

    private func reloadNow(_ trigger: ReloadTrigger) async -> ReloadOutcome {
        guard let running = live.current else {
            return ReloadOutcome(generation: 0, problems: [.init("", "the gateway has not started yet")])
        }
        guard let source else {
            return ReloadOutcome(generation: running.number, problems: [.init("", "this gateway was not started from a config file")],
                                 failure: .operationNotSupported)
        }
        var outcome = ReloadOutcome(generation: running.number)
        do throws(ConfigError) {
            let next = try await prepare(source: source, running: running, outcome: &outcome)
            // Recorded before the swap: a change nobody could audit is never made.
            do throws(GatewayError) {
                try await audit.record(event(.configReloaded, trigger, outcome, generation: next.number))
            } catch {
                await next.upstreams.shutdown(keeping: [running.upstreams])
                outcome.failure = .internal
                throw ConfigError(source: source.path, problems: [.init("", "the audit event could not be written; nothing was changed")])
            }
            parts.health.reconcile(next.endpointSpecs)
            parts.health.applyPauses(config: Dictionary(uniqueKeysWithValues: next.config.issuers.map { (IssuerID($0.key), $0.value.paused) }))
            clientLimits.update(defaultLimit: .clientDefault, limits: RateLimits.clients(next.config))
            failureLimits.update(defaultLimit: next.config.server.authFailureLimit, limits: [:])
            await live.install(next)
            outcome.generation = next.number
            parts.metrics.configReload(succeeded: true, generation: next.number)
            logger.notice("configuration reloaded", metadata: [
                "generation": "\(next.number)", "trigger": "\(trigger.actor)", "file_sha256": "\(outcome.fileSHA256 ?? "")",
                "changed": "\(outcome.changed.joined(separator: ","))",
            ])
            if !outcome.restartRequired.isEmpty {
                logger.warning("the reloaded file changes settings that take a restart; their running values were kept",
                               metadata: ["restart_required": "\(outcome.restartRequired.joined(separator: ","))"])
            }
        } catch {
            outcome.problems = error.problems.isEmpty ? [.init("", "the file is not valid")] : error.problems
            outcome.changed = []
            outcome.restartRequired = []
            parts.metrics.configReload(succeeded: false, generation: running.number)
            logger.error("configuration reload failed; the running configuration is unchanged", metadata: [
                "trigger": "\(trigger.actor)", "file_sha256": "\(outcome.fileSHA256 ?? "")",
                "problems": "\(outcome.problems.map(\.description).joined(separator: "; "))",
            ])
            await audit.note(event(.configReloadFailed, trigger, outcome, generation: running.number))
        }
        return outcome
    }

    /// Reads, checks and builds the next generation without touching the running one.
    private func prepare(source: ConfigSource, running: ConfigGeneration, outcome: inout ReloadOutcome) async throws(ConfigError) -> ConfigGeneration {
        let bytes = try ConfigLoader.bytes(path: source.path)
        outcome.fileSHA256 = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        guard let text = String(data: bytes, encoding: .utf8) else {
            throw ConfigError(source: source.path, problems: [.init("", "the file is not UTF-8 text")])
        }
        var (config, problems) = try ConfigLoader.read(text: text, path: source.path)
        source.overrides(&config)
        // The file is checked as written, as start-up and `config check` would check it: a setting
        // that takes a restart and names a missing variable or file (the vault key, a trust
        // anchor, the PostgreSQL URL) is a problem now, not at the next restart (the config audit
        // saw three such files applied, each then stopping the next start-up).
        let asWritten = config
        // The store's too (a PostgreSQL URL from an unset variable, a missing CA file), without
        // opening it: a reload had applied a file that the next start-up refused (reload audit).
        // A key path the file's own checks already name is not reported twice (as `config check`).
        let reported = Set(problems.map(\.path))
        problems += (StartupChecks.environmentProblems(config: asWritten, environment: environment)
            + StartupChecks.fileProblems(config: asWritten, environment: environment))
            .filter { $0.path.isEmpty || !reported.contains($0.path) }
        outcome.restartRequired = RestartOnlySettings.pin(&config, to: running.config,
                                                          startedShutdownTimeout: startedShutdownTimeout ?? running.config.shutdownTimeout)
        // The file was checked as written; what runs is the file with the running restart-only
        // settings, checked again as a whole: the deadlines it brings must fit the Idempotency-Key
        // lifetime that keeps running, and a rule may not fall back to a local issuer the running
        // process does not have (the reload audit's `fallback: local` with `local.enabled` off
        // was applied, and the fallback then never ran).
        if let problem = config.idempotencyLifetimeProblem(running: true), !problems.contains(where: { $0.path == problem.path }) {
            problems.append(problem)
        }
        for problem in ConfigLoader.meaningProblems(config) where !problems.contains(where: { $0.path == problem.path }) {
            problems.append(ConfigProblem(problem.path, problem.reason + " (with the running values of the settings that take a restart)"))
        }
        guard problems.isEmpty else { throw ConfigError(source: source.path, problems: problems) }
        outcome.changed = RestartOnlySettings.changes(from: running.config, to: config)
        let upstreams = try await UpstreamDirectory.build(
            config: config, environment: environment, sandbox: live.sandbox, logger: logger, reusing: running.upstreams,
            clock: parts.clock)
        return ConfigGeneration(number: running.number + 1, config: config, fileSHA256: outcome.fileSHA256, upstreams: upstreams, parts: parts)
    }

    private func event(_ kind: SecurityEvent.Kind, _ trigger: ReloadTrigger, _ outcome: ReloadOutcome, generation: Int) -> SecurityEvent {
        var detail = ["trigger": trigger.actor, "generation": "\(generation)"]
        if let hash = outcome.fileSHA256 { detail["file_sha256"] = hash }
        if let path = source?.path { detail["path"] = path }
        if !outcome.changed.isEmpty { detail["changed"] = outcome.changed.joined(separator: ",") }
        if !outcome.restartRequired.isEmpty { detail["restart_required"] = outcome.restartRequired.joined(separator: ",") }
        if !outcome.problems.isEmpty { detail["problems"] = "\(outcome.problems.count)" }
        detail["instance"] = GatewayInstance.name
        return SecurityEvent(at: parts.clock.date, kind: kind, actor: trigger.actor, source: trigger.source, detail: detail)
    }

}

/// The clients' own rate limits, by client id.
enum RateLimits {
    static func clients(_ config: GatewayConfig) -> [ClientID: RateLimitConfig] {
        Dictionary(config.clients.compactMap { client in client.rateLimit.map { (ClientID(client.id), $0) } }, uniquingKeysWith: { first, _ in first })
    }
}

/// `serve`'s SIGHUP: each signal reloads the config file, as `POST /v1/admin/config/reload` does.
/// It starts before the server, so a SIGHUP once the gateway listens never takes the default
/// action (ending the process).
struct ReloadOnSignal: Service, CustomStringConvertible {
    let reloader: ConfigReloader
    /// Whether a graceful shutdown has begun. This service is the group's first, so it hears of
    /// the shutdown last, after the upstream clients and the store have stopped: a SIGHUP meanwhile
    /// had built new upstream clients nothing would shut down and written its event to a stopped
    /// store (the lifecycle audit's 126 reloads during one shutdown).
    let draining: @Sendable () -> Bool
    let logger: Logger
    var description: String { "config reload on SIGHUP" }

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            guard !draining() else {
                logger.notice("SIGHUP ignored: the gateway is shutting down")
                continue
            }
            _ = await reloader.reload(.signal("SIGHUP"))
        }
    }
}
