import Foundation
import Logging
import ProvisioningCore
import Synchronization

/// Store writes that record what already happened, tried again on their own after the request's
/// own try failed: the request has answered its failure without waiting again, and the write is
/// made in the background, a few times, until the store takes it.
///
/// - Audit events (`keepTrying`): whatever the failure, a store that did not confirm in time
///   (`StoreError.unanswered`) or one that refused (a PostgreSQL server that restarted under the
///   COMMIT, its connection cut). The issuer may have acted, and the event is all the trail will
///   ever say of it (the crash audit: a PostgreSQL restart during the answer's commit lost the
///   `succeeded` events of requests the issuer had completed, while the gateway ran on). The write
///   that failed may have landed, or may land yet: an event written twice is recorded once (the
///   store's audit-once rule), so trying again costs nothing.
/// - An Idempotency-Key's release (`keep(.release, ...)`; an abandon likewise), for a request that ended knowing the issuer
///   did nothing: a release the store refused had left the key claimed, read as in progress and
///   then as `idempotency_outcome_unknown`, though nothing was sent. A release touches only the
///   claim made at its time, so a late one never frees another request's claim.
///
/// Each outcome is logged. The writes are `writes`'s: a graceful stop (`LateWrites.drain`, which
/// the process runs once its requests have ended and before the store closes) makes every try
/// left at once, without its wait, and returns when each write has ended; only a crash, or a store
/// that refuses every try, loses one.
public enum LateAudit {
    /// Tries now, then after 1, 2, 4 and 8 seconds on `clock`.
    public static func keepTrying(_ events: [AuditEvent], store: any GatewayStore, clock: GatewayClock, logger: Logger,
                                  writes: LateWrites) {
        guard !events.isEmpty else { return }
        let ids = Set(events.map(\.provisioningID.rawValue)).sorted().joined(separator: ",")
        retrying(clock: clock, logger: logger, writes: writes, metadata: ["provisioning_id": "\(ids)", "events": "\(events.count)"],
                 written: "audit events written after the store failed or answered late",
                 lost: "audit events could not be written after the store failed or answered late") {
            for event in events { try await store.appendAudit(event) }
        }
    }

    /// What is left to write for an Idempotency-Key's claim once its request has ended.
    public enum ClaimChange: Sendable {
        /// The request ended knowing the issuer did nothing: the key is freed for a retry.
        case release
        /// The request ended with the issuer's outcome unknown: the key is never run again. One
        /// that never lands leaves the claim to turn abandoned by its age.
        case abandon
    }

    /// Makes `change` to the claim `claimedAt` of `client`'s `key`, now, then after 1, 2, 4 and 8
    /// seconds. A release or an abandon touches only the claim made at its time.
    public static func keep(_ change: ClaimChange, client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID,
                            store: any GatewayStore, clock: GatewayClock, logger: Logger, writes: LateWrites) {
        let (written, lost): (Logger.Message, Logger.Message) = switch change {
        case .release:
            ("Idempotency-Key released after the store failed the release",
             "Idempotency-Key could not be released: it reads as in progress, then as idempotency_outcome_unknown")
        case .abandon:
            ("Idempotency-Key marked abandoned after the store answered late",
             "Idempotency-Key could not be marked abandoned: it reads as in progress until its age makes it abandoned")
        }
        // Never the key itself in a log line: the client's provisioning names the claim.
        retrying(clock: clock, logger: logger, writes: writes, metadata: ["client": "\(client)", "provisioning_id": "\(provisioningID.rawValue)"],
                 written: written, lost: lost) {
            switch change {
            case .release:
                try await store.releaseIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: provisioningID)
            case .abandon:
                try await store.abandonIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: provisioningID)
            }
        }
    }

    private static func retrying(clock: GatewayClock, logger: Logger, writes: LateWrites, metadata: Logger.Metadata,
                                 written: Logger.Message, lost: Logger.Message, _ write: @escaping @Sendable () async throws -> Void) {
        writes.start {
            var wait = Duration.seconds(1)
            for attempt in 1...5 {
                do {
                    try await write()
                    logger.notice(written, metadata: metadata)
                    return
                } catch {
                    guard attempt < 5 else {
                        var metadata = metadata
                        metadata["cause"] = "\(GatewayError.describe(error))"
                        logger.critical(lost, metadata: metadata)
                        return
                    }
                }
                await writes.pause(for: wait, on: clock)
                wait *= 2
            }
        }
    }
}

/// The late writes under way (`LateAudit`), so that a stop waits for them. Each runs in a
/// detached task (a request's cancellation, or a service's shutdown, must not cut its store
/// write); `drain` wakes every one waiting for its next try and returns once all have ended,
/// those started while it runs included, or once its bound has passed. Without that bound it
/// would still end: five tries each, every one bounded by the store's operation timeout, and no
/// wait between them once the drain began.
public final class LateWrites: Sendable {
    private struct State {
        var running: Set<Int> = []
        var nextID = 0
        var draining = false
        /// Writes waiting for their next try, woken by the drain.
        var pausing: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Drains waiting for the last write to end.
        var ending: [Int: CheckedContinuation<Void, Never>] = [:]
        /// When the first drain's bound ends: every later drain ends by it too.
        var drainDeadline: GatewayClock.Instant?
    }

    private let state = Mutex(State())

    public init() {}

    /// Writes started and not yet ended.
    public var count: Int { state.withLock { $0.running.count } }

    private func newID(_ state: inout State) -> Int {
        state.nextID += 1
        return state.nextID
    }

    func start(_ work: @escaping @Sendable () async -> Void) {
        let id = state.withLock { state in
            let id = newID(&state)
            state.running.insert(id)
            return id
        }
        Task.detached { [self] in
            await work()
            let ending = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.running.remove(id)
                guard state.running.isEmpty else { return [] }
                defer { state.ending = [:] }
                return Array(state.ending.values)
            }
            for waiter in ending { waiter.resume() }
        }
    }

    /// Waits `duration` on `clock`, or until the drain begins (at once if it has).
    func pause(for duration: Duration, on clock: GatewayClock) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(for: duration) }
            group.addTask { await self.wait(\.pausing, until: { $0.draining }) }
            await group.next()
            // The other child ends on cancellation: a clock sleep throws, the wait resumes.
            group.cancelAll()
        }
    }

    /// Suspends, registered in `list`, until `done` holds (checked first), the waiter is resumed
    /// from the list, or the task is cancelled.
    private func wait(_ list: WritableKeyPath<State, [Int: CheckedContinuation<Void, Never>]> & Sendable,
                      until done: @escaping @Sendable (State) -> Bool) async {
        let id = state.withLock { newID(&$0) }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if done(state) || Task.isCancelled { return true }
                    state[keyPath: list][id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0[keyPath: list].removeValue(forKey: id) }?.resume()
        }
    }

    /// Wakes every write waiting for its next try and returns once every write has ended (those
    /// started meanwhile included), or once `bound` has passed on `clock`, leaving the writes
    /// still running to go on (a process that exits then loses them). Returns how many were.
    /// The caller's cancellation does not shorten it: only `bound` does. `bound` is counted from
    /// the first drain: a stop drains twice (the late-writes service, then the store service for
    /// the writes of requests cut off meanwhile), and the two waits together must stay inside the
    /// group's cancellation bound, with the cut-off requests' own writes.
    @discardableResult
    public func drain(within bound: Duration, on clock: GatewayClock) async -> Int {
        let now = clock.now
        let (woken, deadline) = state.withLock { state -> ([CheckedContinuation<Void, Never>], GatewayClock.Instant) in
            state.draining = true
            let deadline = state.drainDeadline ?? now.advanced(by: bound)
            state.drainDeadline = deadline
            defer { state.pausing = [:] }
            return (Array(state.pausing.values), deadline)
        }
        for continuation in woken { continuation.resume() }
        let left = now.duration(to: deadline)
        guard left > .zero else { return count }
        // In a task of its own, which the caller's cancellation does not reach: the stop cancels
        // every service once its timeout has passed, and that is when the requests it cut off
        // start their late writes. Cancelled, the wait and the bound's sleep had both ended at
        // once, and the process exited under a write still being tried (a cut-off request's
        // attempt event lost while another writer held the store's lock).
        await Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.wait(\.ending, until: { $0.running.isEmpty }) }
                group.addTask { try? await clock.sleep(for: left) }
                await group.next()
                group.cancelAll()
            }
        }.value
        return count
    }

    /// How long a stop waits for the late writes: their whole schedule of tries.
    public static let drainBound: Duration = .seconds(15)
}
