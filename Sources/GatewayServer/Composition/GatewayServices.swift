import Foundation
import Gateway
import Logging
import ProvisioningCore
import ServiceLifecycle

/// The process's background parts as `Service`s, so they start, fail and stop with the server in
/// one `ServiceGroup` (see `GatewayProcess`).

/// Keeps the store's own background work (PostgreSQL's connection pool) alive; the SQLite store has
/// none and simply waits for shutdown.
struct StoreService: Service, CustomStringConvertible {
    let store: (any Service)?
    let name: String
    var description: String { "store (\(name))" }

    func run() async throws {
        if let store {
            try await store.run()
        } else {
            try await gracefulShutdown()
        }
    }
}

/// Owns the upstream HTTP clients: they are shut down once the server has stopped sending requests
/// (services stop in the reverse of their start order, and this one starts before the server).
struct UpstreamClientsService: Service, CustomStringConvertible {
    let live: LiveConfiguration
    var description: String { "upstream HTTP clients" }

    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled: the clients are shut down all the same.
        }
        await live.shutdown()
    }
}

/// Deletes expired idempotency records every `interval`; a failing purge is logged with its cause
/// and tried again at the next interval (stale records are harmless until then).
struct PurgeJob: Service, CustomStringConvertible {
    static let interval: Duration = .seconds(600)
    let store: any GatewayStore
    /// Its interval on the monotonic side; what has expired by its wall time.
    let clock: GatewayClock
    let interval: Duration
    let logger: Logger
    var description: String { "idempotency purge" }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                while true {
                    try await clock.sleep(for: interval)
                    do {
                        let purged = try await store.purgeExpired(now: clock.date)
                        if purged > 0 { logger.info("expired idempotency records purged", metadata: ["count": "\(purged)"]) }
                    } catch {
                        logger.warning("purging expired idempotency records failed", metadata: ["cause": "\(error)"])
                    }
                }
            }
        } catch is CancellationError {
            return
        }
    }
}

/// The first service to hear of a graceful shutdown (it is the last in the group): `/readyz`
/// turns 503 at once, and requests are still served for `delay` (a load balancer's time to notice)
/// before the server closes its listener.
struct DrainService: Service, CustomStringConvertible {
    let readiness: Readiness
    let delay: Duration
    let clock: any Clock<Duration>
    let logger: Logger
    var description: String { "drain" }

    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            return  // cancelled: nothing to drain
        }
        readiness.beginDraining()
        logger.notice("shutting down: /readyz answers 503", metadata: ["shutdown_delay_ms": "\(delay.wholeMilliseconds)"])
        if delay > .zero { try await clock.sleep(for: delay) }
    }
}

/// Logs why a service stopped when it was not asked to: the group then shuts down (gracefully, so
/// requests in flight finish) and the cause is in the log, not only in the process's exit.
struct LoggedService: Service, CustomStringConvertible {
    let base: any Service
    let logger: Logger
    var description: String { "\(base)" }

    func run() async throws {
        do {
            try await base.run()
            if !Task.isShuttingDownGracefully && !Task.isCancelled {
                logger.error("a gateway service stopped on its own; shutting down", metadata: ["service": "\(base)"])
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            logger.error("a gateway service failed; shutting down", metadata: ["service": "\(base)", "cause": "\(error)"])
            throw error
        }
    }
}
