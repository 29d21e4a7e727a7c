import Foundation
import Gateway
import Logging
import ProvisioningCore
import ServiceLifecycle
import Synchronization

/// The process's background parts as `Service`s, so they start, fail and stop with the server in
/// one `ServiceGroup` (see `GatewayProcess`).

/// Keeps the store's own background work (PostgreSQL's connection pool) alive; the SQLite store has
/// none and simply waits for shutdown.
///
/// PostgreSQL's pool runs in a task of its own, not the group's: at the shutdown timeout the group
/// cancels every service at once, and the requests it cut off then still write what they did
/// (their attempts' audit events, their keys' claims). Cancelled with the rest, the pool closed its
/// connections under those writes, and the events of issuer calls that were made were lost (the
/// send-twice audit). The pool is stopped only once every service that uses the store has
/// returned (`users`), which a graceful shutdown already ensures (services stop in the reverse of
/// their start order) and a cancelled one now waits for, within the group's cancellation bound.
struct StoreService: Service, CustomStringConvertible {
    let store: (any Service)?
    let name: String
    let users: StoreUsers
    /// The late writes the requests cut off at the timeout may still start once every other
    /// service has returned (`LateWritesService` drained those before them).
    let lateWrites: LateWrites
    let clock: GatewayClock
    let logger: Logger
    var description: String { "store (\(name))" }

    func run() async throws {
        // Detached: a child task, or one that inherits this service's task locals, would be told of
        // this service's graceful shutdown (PostgresClient cancels its pool on it), which the group
        // also gives at the timeout, while the cut-off requests still write.
        let pool = store.map { store in Task.detached { try await store.run() } }
        await shutdownOrCancellation()
        // Either way the services cut off at the timeout may still be writing, in the request and
        // in the background.
        await users.allEnded()
        await LateWritesService.drain(lateWrites, clock: clock, logger: logger)
        pool?.cancel()
        try await pool?.value
    }
}

/// Returns at the graceful shutdown, or when the task is cancelled (the shutdown timeout passed):
/// for a service whose work at the end must be done either way.
private func shutdownOrCancellation() async {
    do {
        try await gracefulShutdown()
    } catch {
        // Cancelled.
    }
}

/// The services that use the store, counted down as each one's `run` returns (`StoreUser`); also
/// every service but the tracer's exporter, which outlives them (`TracingService`).
final class StoreUsers: Sendable {
    private let state: Mutex<(running: Int, waiters: [CheckedContinuation<Void, Never>])>

    init(count: Int) { state = Mutex((count, [])) }

    func ended() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running <= 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once every user has ended; not cut short by cancellation.
    func allEnded() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard state.running > 0 else { return true }
                state.waiters.append(waiter)
                return false
            }
            if now { waiter.resume() }
        }
    }
}

/// The tracer's exporter (swift-otel's batch span processor and OTLP exporter), which stops last
/// so that the last spans are exported. It runs in a group of its own, in a detached task: in the
/// process's group, the stop's timeout cancelled it with everything else, its last export was
/// cancelled with it, and the spans of the requests cut off then (those that say why the stop ran
/// late) were lost. It is asked to stop once every other service has returned (`others`), and
/// has `flushBound` on `clock` for its last export before it is cancelled. An exporter that ends
/// on its own before the stop still ends this service with its error, as any service's would.
struct TracingService: Service, CustomStringConvertible {
    let exporter: any Service
    let others: StoreUsers
    let clock: GatewayClock
    let logger: Logger
    var description: String { "tracing exporter" }

    /// How long the exporter's last export may take once every other service has returned.
    static let flushBound: Duration = .seconds(5)

    func run() async throws {
        let group = ServiceGroup(configuration: .init(services: [.init(service: exporter)], logger: logger))
        let ended = Ending()
        let running = Task.detached {
            do {
                try await group.run()
                ended.finish(.success(()))
            } catch {
                ended.finish(.failure(error))
            }
        }
        // The stop begins (gracefully, or cancelled at its timeout), or the exporter ends first.
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await shutdownOrCancellation() }
            tasks.addTask { await ended.wait() }
            await tasks.next()
            tasks.cancelAll()
        }
        if let result = ended.result { return try result.get() }
        await others.allEnded()
        await group.triggerGracefulShutdown()
        // In a task of its own: this one may be cancelled (the stop's timeout), and the bound's
        // sleep would then end at once.
        let flushed = await Task {
            await withTaskGroup(of: Bool.self) { tasks in
                tasks.addTask { await ended.wait(); return true }
                tasks.addTask { try? await clock.sleep(for: Self.flushBound); return false }
                let first = await tasks.next() ?? false
                tasks.cancelAll()
                return first
            }
        }.value
        if !flushed {
            logger.warning("the tracer's last export did not end in time: the last spans may be lost",
                           metadata: ["waited_ms": "\(Self.flushBound.wholeMilliseconds)"])
            running.cancel()
        }
    }

    /// The exporter's group's outcome, once it has ended; waited for by any number of tasks.
    final class Ending: Sendable {
        private let state = Mutex<(result: Result<Void, any Error>?, waiters: [Int: CheckedContinuation<Void, Never>], next: Int)>((nil, [:], 0))

        var result: Result<Void, any Error>? { state.withLock { $0.result } }

        func finish(_ result: Result<Void, any Error>) {
            let waiters = state.withLock { state in
                state.result = result
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume() }
        }

        /// Returns once the group has ended, or at once when the task is cancelled.
        func wait() async {
            let id = state.withLock { state in
                state.next += 1
                return state.next
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { state -> Bool in
                        if state.result != nil || Task.isCancelled { return true }
                        state.waiters[id] = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
            }
        }
    }
}

/// A service that uses the store: says so to `users` when its `run` returns, however it returns.
struct StoreUser: Service, CustomStringConvertible {
    let base: any Service
    let users: StoreUsers
    var description: String { "\(base)" }

    func run() async throws {
        defer { users.ended() }
        try await base.run()
    }
}

/// Owns the upstream HTTP clients: they are shut down once the server has stopped sending requests
/// (services stop in the reverse of their start order, and this one starts before the server).
struct UpstreamClientsService: Service, CustomStringConvertible {
    let live: LiveConfiguration
    var description: String { "upstream HTTP clients" }

    func run() async throws {
        // Cancelled too: the clients are shut down all the same.
        await shutdownOrCancellation()
        await live.shutdown()
    }
}

/// Waits for the late store writes (`LateAudit`: audit events and key releases the request's own
/// try could not make) once the requests have ended: it starts before the server, so it stops
/// after it, and before the store, which outlives it (`StoreUser`). Each write left makes its
/// remaining tries at once; a graceful stop had lost them, as a crash does.
struct LateWritesService: Service, CustomStringConvertible {
    let writes: LateWrites
    let clock: GatewayClock
    let logger: Logger
    var description: String { "late store writes" }

    func run() async throws {
        // Cancelled too (the shutdown timeout passed): the requests cut off then may still start
        // late writes, which the store service drains again once they have all returned.
        await shutdownOrCancellation()
        await Self.drain(writes, clock: clock, logger: logger)
    }

    /// Drains `writes` within `LateWrites.drainBound`, saying what it waits for and what it left.
    static func drain(_ writes: LateWrites, clock: GatewayClock, logger: Logger) async {
        let pending = writes.count
        guard pending > 0 else { return }
        logger.notice("writing what the store could not take in time before stopping", metadata: ["writes": "\(pending)"])
        let left = await writes.drain(within: LateWrites.drainBound, on: clock)
        if left > 0 {
            logger.critical("stopping with late store writes unfinished: audit events or key releases they held are lost",
                            metadata: ["writes": "\(left)", "waited_ms": "\(LateWrites.drainBound.wholeMilliseconds)"])
        }
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
