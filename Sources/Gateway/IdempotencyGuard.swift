import Foundation
import Logging
import ProvisioningCore

/// Makes a POST with an `Idempotency-Key` run at most once: the first request with a key runs,
/// a repeat with the same body gets the stored answer, a repeat with another body is refused, and
/// a concurrent repeat (on this instance or another sharing the store) waits for the first.
public struct IdempotencyGuard: Sendable {
    public static let maxKeyLength = 255
    let store: any GatewayStore
    let ttl: Duration
    /// How long a concurrent duplicate waits for the first request before giving up; also, with
    /// the margin, how long this request's own claim, unfinished, counts as in progress (no request
    /// runs longer than its deadline): the claim keeps that time, so a later request under another
    /// deadline judges it by this one. An abandoned claim is never run again: its request may
    /// have reached the issuer.
    let waitLimit: Duration
    /// A waiting duplicate asks the store again after `pollInterval`, then after twice as long
    /// each time, up to `maxPollInterval`: each ask is a claim, a write, so a burst of duplicates
    /// polling every 20 ms for a slow issuer's seconds made thousands of synced commits for one
    /// request (50 duplicates over 4.5 s: about 9,500), work every tenant sharing the store paid for.
    let pollInterval: Duration
    let maxPollInterval: Duration
    /// Stored answers hold activation data and encrypted pass data: they are sealed at rest.
    let sealer: ResponseSealer
    /// The wait limit and the polls are measured on it.
    let clock: GatewayClock
    /// The wall time claims are stamped with, kept in the store: their expiry, and their age when
    /// another request finds one unfinished.
    let wallTime: @Sendable () -> Date
    /// Where `LateAudit` says what became of events the store did not confirm in time.
    let logger: Logger
    /// The late writes a stop waits for (`LateAudit`).
    let lateWrites: LateWrites

    public init(store: any GatewayStore, ttl: Duration, waitLimit: Duration, sealer: ResponseSealer,
                pollInterval: Duration = .milliseconds(20), maxPollInterval: Duration = .milliseconds(320),
                clock: GatewayClock = .continuous, wallTime: (@Sendable () -> Date)? = nil,
                logger: Logger = Logger(label: "provisioning-gateway"), lateWrites: LateWrites = LateWrites()) {
        self.lateWrites = lateWrites
        self.store = store
        self.ttl = ttl
        self.waitLimit = waitLimit
        self.sealer = sealer
        self.pollInterval = pollInterval
        self.maxPollInterval = max(maxPollInterval, pollInterval)
        self.clock = clock
        // The clock's wall time unless a test sets another.
        self.wallTime = wallTime ?? { clock.date }
        self.logger = logger
    }

    /// How much longer than the wait limit an unfinished claim must be before it counts as
    /// abandoned: room for a request's last writes after its deadline, and for instances sharing
    /// a store whose clocks differ a little. Until then a repeat is answered as in progress.
    static let abandonMargin = GatewayConfig.idempotencyAbandonMargin

    static let stillRunning = GatewayError(.idempotencyKeyInProgress, "a request with this Idempotency-Key is still running; retry later")
    static let outcomeUnknown = GatewayError(
        .idempotencyOutcomeUnknown,
        "the request with this Idempotency-Key ended without an answer and may have reached the issuer; it is not run again: check the card's wallet tokens, then use a new key")

    /// Frees a claim whose request ended knowing the issuer did nothing; a release the store
    /// fails is made again in the background (`LateAudit.keep(.release, ...)`), or the key would read
    /// as in progress and then as an outcome unknown though nothing was sent (the crash audit).
    private func release(client: ClientID, key: String, claimedAt: Date, provisioningID: ProvisioningID) async {
        do {
            try await store.releaseIdempotencyKey(client: client, key: key, claimedAt: claimedAt, provisioningID: provisioningID)
        } catch {
            LateAudit.keep(.release, client: client, key: key, claimedAt: claimedAt, provisioningID: provisioningID, store: store,
                           clock: clock, logger: logger, writes: lateWrites)
        }
    }

    /// Writes held audit events without an answer; the store's error when one could not be written.
    private func writeAlone(_ held: [AuditEvent]) async -> (any Error)? {
        do {
            for event in held { try await store.appendAudit(event) }
            return nil
        } catch {
            return error
        }
    }

    /// What a request under a key asked for, put on the trail when the key refuses it: the
    /// operation, and the card and token it named (ids the API already checked).
    public struct Asked: Sendable {
        public var operation: AuditOperation
        public var cardID: CardID?
        public var tokenID: String?
        public init(_ operation: AuditOperation, cardID: CardID?, tokenID: String? = nil) {
            self.operation = operation
            self.cardID = cardID
            self.tokenID = tokenID
        }
    }

    /// A repeat of the key refused (another request under it, or the first's outcome unknown) is
    /// on the trail of the provisioning the key ran as, before the refusal is answered: a
    /// `replayed` event with the refusal's code and what the repeat asked for (`asked`: its
    /// operation, card and token; without it, the trail's first event's), naming no issuer, as
    /// none was called (the key is the client's own, so the trail is too). Probing a key, or a
    /// client retrying a lost request with a changed body, shows there with what it changed (the
    /// token audit: a reuse for another token or action had been recorded as the first's). A
    /// trail without events (its request died before its first) gets none; a write that fails is
    /// the caller's answer.
    private func noteRefusedRepeat(_ provisioningID: ProvisioningID?, code: GatewayError.Code, asked: Asked?) async throws(GatewayError) {
        guard let provisioningID else { return }
        do {
            // The first event alone: the trail grows with every replay of the key.
            guard var event = try await store.auditEvents(provisioningID, limit: 1).first else { return }
            if let asked {
                event.operation = asked.operation
                event.cardID = asked.cardID ?? CardID("")
                event.tokenID = asked.tokenID
                event.deviceType = nil
                event.issuer = nil
                // No card was read for the repeat: it names no program, as it names no issuer.
                event.program = nil
            }
            event.at = wallTime()
            event.endpoint = nil
            event.attempt = 0
            event.outcome = .replayed
            event.errorCode = code
            event.upstreamStatus = nil
            event.latencyMS = 0
            try await store.appendAudit(event)
        } catch {
            throw GatewayError(.internal, "the refused repeat of an Idempotency-Key could not be put on its audit trail", cause: error)
        }
    }

    /// The event of a repeat whose stored answer could not be opened, under `provisioningID` (the
    /// repeat's own); a write that fails is the caller's answer. Without `asked` (no caller today)
    /// the operation is unknown and nothing is written.
    private func noteUnopenedReplay(_ provisioningID: ProvisioningID, client: ClientID, asked: Asked?) async throws(GatewayError) {
        guard let asked else { return }
        let event = AuditEvent(provisioningID: provisioningID, at: wallTime(), client: client, cardID: asked.cardID ?? CardID(""),
                               operation: asked.operation, tokenID: asked.tokenID, issuer: nil, endpoint: nil, attempt: 0,
                               outcome: .replayed, errorCode: .internal, upstreamStatus: nil, latencyMS: 0)
        do {
            try await store.appendAudit(event)
        } catch {
            throw GatewayError(.internal, "the repeat of an Idempotency-Key whose stored answer could not be opened could not be put on "
                               + "its audit trail", cause: error).with(provisioningID: provisioningID)
        }
    }

    /// What `run(client:key:requestHash:stored:_:)` gives back: the operation's own value when it
    /// ran now, the stored answer when an earlier request with the key ran it.
    public enum Answer<Fresh: Sendable>: Sendable {
        case fresh(Fresh)
        case replayed(StoredResponse)
    }

    /// Runs `operation` at most once per key. `stored` makes the answer kept for replays; it runs
    /// only when a key was sent, so a request without one never encodes an answer nobody keeps.
    /// `operation` runs as the provisioning id it is given, which the key's claim keeps: a claim
    /// found abandoned later names it (`idempotency_outcome_unknown` with `provisioning_id`).
    public func run<Fresh: Sendable>(
        client: ClientID, key: String?, requestHash makeRequestHash: @autoclosure () -> String, asked: Asked? = nil,
        stored toStored: (Fresh) -> StoredResponse,
        _ operation: (ProvisioningID) async throws(GatewayError) -> Fresh
    ) async throws(GatewayError) -> Answer<Fresh> {
        // Without a key nothing is stored: the hash is not even computed.
        guard let key else { return .fresh(try await operation(ProvisioningID.generate(at: wallTime()))) }
        // The spec's rule (`^[\x21-\x24\x26-\x7E]{1,255}$`: visible ASCII without `%`), kept here
        // too so the guard does not rely on the contract check having run first.
        guard !key.isEmpty, key.utf8.count <= Self.maxKeyLength,
              key.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "%") }) else {
            throw GatewayError(.invalidRequest, "Idempotency-Key: 1 to \(Self.maxKeyLength) visible ASCII characters other than %")
        }
        // A key is stored as it is sent, for its lifetime: never a card number (a UUID never reads as one).
        guard !InputRules.holdsCardNumber(key) else {
            throw GatewayError(.invalidRequest, "Idempotency-Key: never a card number (a UUID is the usual key)")
        }
        let requestHash = makeRequestHash()
        let giveUp = clock.now.advanced(by: waitLimit)
        var interval = pollInterval
        while true {
            let now = wallTime()
            let provisioningID = ProvisioningID.generate(at: now)
            let claim: IdempotencyClaim
            do {
                claim = try await store.claimIdempotencyKey(
                    client: client, key: key, requestHash: requestHash, provisioningID: provisioningID, now: now,
                    expiresAt: now.addingTimeInterval(Double(ttl.wholeMilliseconds) / 1000),
                    abandonAt: now.addingTimeInterval(Double((waitLimit + Self.abandonMargin).wholeMilliseconds) / 1000))
            } catch {
                // The claim may have landed with its acknowledgement lost (a connection cut during
                // the COMMIT). Nothing was sent to the issuer, so this request's own claim, if it is
                // there, is freed for a retry (a release touches only the claim made at `now`); left
                // in place it would read as in progress, then as an outcome unknown.
                await release(client: client, key: key, claimedAt: now, provisioningID: provisioningID)
                throw GatewayError(.internal, "the store could not record the Idempotency-Key", cause: error)
            }
            switch claim {
            case .acquired:
                // The successful attempt's audit event is held and committed with the answer.
                let deferred = DeferredAudit()
                let outcome = await DeferredAudit.$current.withValue(deferred) { () async -> Result<Fresh, GatewayError> in
                    do throws(GatewayError) {
                        return .success(try await operation(provisioningID))
                    } catch {
                        return .failure(error)
                    }
                }
                let fresh: Fresh
                switch outcome {
                case .success(let value):
                    fresh = value
                case .failure(var error):
                    // Nothing fails after its success was held today; were it to, that event is
                    // still written before the failure is answered.
                    let events = deferred.take()
                    if let auditFailure = await writeAlone(events) {
                        error = GatewayError(.internal, "the audit trail could not be written", cause: auditFailure).afterAttempt(true)
                        LateAudit.keepTrying(events, store: store, clock: clock, logger: logger, writes: lateWrites)
                    }
                    // A failure that says what happened (the issuer refused, said it did not handle
                    // the request, or was never reached; the caller erred) frees the key for a
                    // retry, and so does an internal one before any attempt at an issuer. A
                    // failure after which the issuer may have acted keeps the claim, and the key
                    // is never run again: an internal one after an attempt (the issuer's answer
                    // could not be recorded), and one whose attempt ended without saying (a
                    // timeout, a lost connection, a 5xx: a retry would provision twice). The
                    // latter is marked abandoned at once, so a retry, and a duplicate waiting now,
                    // hear `idempotency_outcome_unknown` instead of waiting it out; should that
                    // write fail, the claim still turns abandoned when it is old enough.
                    if error.issuerOutcomeUnknown, error.storeUnanswered {
                        // The store did not answer this request's audit write in time: the abandon
                        // is made in the background, not waited for a second time (the send-twice
                        // audit: the answer came up to twice the store's timeout late). Until it
                        // lands, a retry waits as for a request in progress.
                        LateAudit.keep(.abandon, client: client, key: key, claimedAt: now, provisioningID: provisioningID, store: store,
                                       clock: clock, logger: logger, writes: lateWrites)
                    } else if error.issuerOutcomeUnknown {
                        try? await store.abandonIdempotencyKey(client: client, key: key, claimedAt: now, provisioningID: provisioningID)
                    } else if error.code != .internal || !error.afterIssuerAttempt {
                        await release(client: client, key: key, claimedAt: now, provisioningID: provisioningID)
                    }
                    deferred.settle(error)
                    throw error
                }
                let held = deferred.take()
                do {
                    let response = toStored(fresh)
                    let sealed = StoredResponse(status: response.status, body: try sealer.seal(response.body, client: client, key: key))
                    try await store.completeIdempotencyKey(client: client, key: key, claimedAt: now, response: sealed, audit: held)
                } catch {
                    // The answer cannot be kept, and it is not sent; the claim stays unfinished, so
                    // the key is never run again. Its events are still written on their own,
                    // unless the store did not answer in time: the write still running may yet
                    // keep the answer and its events, and a second write would wait as long
                    // again, past the request's deadline (the two-instance audit answered 4 s late).
                    // Either way, a write that fails is made again in the background: the issuer
                    // acted, and the events are all the trail will say of it.
                    var failure = GatewayError(.internal, "the store could not keep the answer for the Idempotency-Key", cause: error)
                    if StoreError.isUnanswered(error) {
                        failure = GatewayError(.internal, "the store did not confirm the answer for the Idempotency-Key in time; it may "
                            + "still be kept: a retry with the key replays it if it was, and answers idempotency_outcome_unknown if not",
                            cause: error)
                        // Should that write fail after all, its events are still written (the review).
                        LateAudit.keepTrying(held, store: store, clock: clock, logger: logger, writes: lateWrites)
                    } else if let auditFailure = await writeAlone(held) {
                        failure = GatewayError(.internal, "neither the answer for the Idempotency-Key nor its audit trail could be written",
                                               cause: auditFailure)
                        LateAudit.keepTrying(held, store: store, clock: clock, logger: logger, writes: lateWrites)
                    }
                    // The caller can name the provisioning whose issuer acted (its events, where
                    // they were written, are under that id).
                    if let provisioningID = held.first?.provisioningID { failure = failure.with(provisioningID: provisioningID) }
                    failure = failure.afterAttempt(true)
                    deferred.settle(failure)
                    throw failure
                }
                deferred.settle(nil)
                return .fresh(fresh)
            case .replay(let stored):
                let opened: Data
                do {
                    opened = try sealer.open(stored.body, client: client, key: key)
                } catch {
                    // Its sealing key removed, or instances with different keyrings: the repeat is
                    // answered 500, and is on the trail before it is, under its own provisioning
                    // id (the stored answer, which names the key's, cannot be read): a `replayed`
                    // event with the code, naming no issuer (the durability audit: it had none).
                    let failure = GatewayError(.internal, "the stored answer for this Idempotency-Key could not be opened", cause: error)
                    try await noteUnopenedReplay(provisioningID, client: client, asked: asked)
                    throw failure.with(provisioningID: provisioningID)
                }
                return .replayed(StoredResponse(status: stored.status, body: opened))
            case .mismatch(let provisioningID):
                try await noteRefusedRepeat(provisioningID, code: .idempotencyKeyReused, asked: asked)
                throw GatewayError(.idempotencyKeyReused, "this Idempotency-Key was used with a different request")
            case .abandoned(let provisioningID):
                try await noteRefusedRepeat(provisioningID, code: .idempotencyOutcomeUnknown, asked: asked)
                // The retry is pointed at the provisioning whose outcome is unknown: its audit
                // trail (`GET /v1/provisionings/{id}`) says which issuer was called and how it ended.
                throw provisioningID.map { Self.outcomeUnknown.with(provisioningID: $0) } ?? Self.outcomeUnknown
            case .inProgress:
                guard clock.now < giveUp else {
                    throw Self.stillRunning
                }
                // A caller that went away stops waiting at once, and the store is not asked again.
                do {
                    // Never past the wait limit: the last ask is at it, not up to an interval after.
                    try await clock.sleep(for: min(interval, clock.now.duration(to: giveUp)))
                } catch {
                    throw Self.stillRunning
                }
                interval = min(interval * 2, maxPollInterval)
            }
        }
    }
}
