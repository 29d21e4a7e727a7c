import Crypto
import Foundation
import Gateway
import GatewayStore
import GatewayTestSupport
import ProvisioningCore
import Synchronization
import Testing

/// A duplicate's wait for a request still running, on a test clock, against a real SQLite store
/// where "another request" holds the key.
@Suite(.timeLimit(.minutes(1))) struct IdempotencyGuardTests {
    static let client: ClientID = "demo"
    static let key = "key-1"

    static func store() async throws -> SQLiteGatewayStore {
        let path = TestDirectories.root.appendingPathComponent("idempotency-\(UUID().uuidString)/gateway.sqlite").path
        let store = try await SQLiteGatewayStore.open(path: path)
        try await store.migrate()
        return store
    }

    /// The key held by a request that is still running; the time it was claimed at.
    @discardableResult
    static func holdKey(_ store: SQLiteGatewayStore) async throws -> Date {
        let now = Date()
        let claim = try await store.claimIdempotencyKey(client: client, key: key, requestHash: "hash", now: now,
                                                        expiresAt: now.addingTimeInterval(3600), abandonAt: now.addingTimeInterval(3600))
        #expect(claim == .acquired)
        return now
    }

    static func guardOn(_ store: SQLiteGatewayStore, clock: TestClock) -> IdempotencyGuard {
        IdempotencyGuard(store: store, ttl: .seconds(3600), waitLimit: .seconds(10),
                         sealer: ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256))), pollInterval: .seconds(1),
                         clock: GatewayClock(clock))
    }

    static func duplicate(_ guard: IdempotencyGuard) async -> GatewayError? {
        do throws(GatewayError) {
            _ = try await `guard`.run(client: client, key: key, requestHash: "hash", stored: { $0 }) { (_: ProvisioningID) async throws(GatewayError) -> StoredResponse in
                Issue.record("the duplicate ran the operation")
                return StoredResponse(status: 200, body: Data())
            }
            return nil
        } catch {
            return error
        }
    }

    @Test func aDuplicatePollsEveryIntervalAndGivesUpAtTheWaitLimit() async throws {
        let store = try await Self.store()
        try await Self.holdKey(store)
        let clock = TestClock()
        let waiting = Task { await Self.duplicate(Self.guardOn(store, clock: clock)) }
        for poll in 1...10 {
            try #require(await clock.waitForSleepers())
            #expect(clock.requestedSleeps.count == poll)
            clock.advance(by: .seconds(1))
        }
        let error = await waiting.value
        #expect(error?.code == .idempotencyKeyInProgress)
        #expect(clock.requestedSleeps == Array(repeating: .seconds(1), count: 10), "one poll a second for 10 s, then no more")
    }

    /// A duplicate asks again after twice as long each time, up to the longest interval: 50
    /// duplicates polling every 20 ms made about 9,500 synced claims for one slow request.
    @Test func aDuplicatePollsLessOftenTheLongerItWaits() async throws {
        let store = try await Self.store()
        try await Self.holdKey(store)
        let clock = TestClock()
        let duplicate = IdempotencyGuard(store: store, ttl: .seconds(3600), waitLimit: .seconds(2),
                                         sealer: ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256))),
                                         pollInterval: .milliseconds(20), maxPollInterval: .milliseconds(320), clock: GatewayClock(clock))
        let waiting = Task { await Self.duplicate(duplicate) }
        var slept: Duration = .zero
        while slept < .seconds(2) {
            try #require(await clock.waitForSleepers())
            let next = try #require(clock.requestedSleeps.last)
            clock.advance(by: next)
            slept += next
        }
        #expect(await waiting.value?.code == .idempotencyKeyInProgress)
        // 20 + 40 + 80 + 160 + 5 x 320 = 1,900 ms; the last sleep ends at the 2 s limit, not past it.
        let expected: [Duration] = [.milliseconds(20), .milliseconds(40), .milliseconds(80), .milliseconds(160)]
            + Array(repeating: .milliseconds(320), count: 5) + [.milliseconds(100)]
        #expect(clock.requestedSleeps == expected, "\(clock.requestedSleeps)")
    }

    @Test func aDuplicateWaitingForTheFirstAnswerGetsIt() async throws {
        let store = try await Self.store()
        let claimedAt = try await Self.holdKey(store)
        let clock = TestClock()
        let sealer = ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256)))
        let duplicate = IdempotencyGuard(store: store, ttl: .seconds(3600), waitLimit: .seconds(10), sealer: sealer,
                                         pollInterval: .seconds(1), clock: GatewayClock(clock))
        let waiting = Task { () -> String? in
            do throws(GatewayError) {
                let outcome = try await duplicate.run(client: Self.client, key: Self.key, requestHash: "hash", stored: { $0 }) {
                    (_: ProvisioningID) async throws(GatewayError) -> StoredResponse in StoredResponse(status: 500, body: Data())
                }
                guard case .replayed(let stored) = outcome else { return nil }
                return String(decoding: stored.body, as: UTF8.self)
            } catch {
                return "\(error)"
            }
        }
        try #require(await clock.waitForSleepers())
        let body = try sealer.seal(Data("first answer".utf8), client: Self.client, key: Self.key)
        try await store.completeIdempotencyKey(client: Self.client, key: Self.key, claimedAt: claimedAt, response: StoredResponse(status: 200, body: body))
        clock.advance(by: .seconds(1))
        #expect(await waiting.value == "first answer")
        #expect(clock.requestedSleeps == [.seconds(1)])
    }

    /// A caller that goes away stops waiting at once: no further poll of the store, no spinning
    /// until the wait limit.
    @Test func aCancelledDuplicateStopsWaitingAtOnce() async throws {
        let store = try await Self.store()
        try await Self.holdKey(store)
        let clock = TestClock()
        let waiting = Task { await Self.duplicate(Self.guardOn(store, clock: clock)) }
        try #require(await clock.waitForSleepers())
        clock.advance(by: .seconds(1))
        try #require(await clock.waitForSleepers())
        let pollsBefore = clock.requestedSleeps.count
        #expect(pollsBefore == 2)

        let cancelled = ContinuousClock.now
        waiting.cancel()
        let watchdog = Task {
            // An unbounded spin never returns by itself: after 5 s of real time, move the clock past
            // the wait limit so the loop ends and the test can report it.
            try await Task.sleep(for: .seconds(5))
            clock.advance(by: .seconds(60))
        }
        let error = await waiting.value
        watchdog.cancel()
        #expect(cancelled.duration(to: .now) < .seconds(5), "the cancelled duplicate kept waiting")
        #expect(error?.code == .idempotencyKeyInProgress)
        #expect(clock.requestedSleeps.count == pollsBefore, "the store was polled \(clock.requestedSleeps.count - pollsBefore) times after cancellation")
        #expect(clock.now == TestClock.Instant(offset: .seconds(1)), "it returned without the clock moving on")
    }

    /// The answer kept for replays is made only when a key was sent: without one the operation's
    /// own value comes back and nothing is encoded or stored. With one, the stored form (which may
    /// leave fields out) is what a repeat gets, while the first caller gets the full value.
    @Test func theStoredFormIsMadeOnlyForAKeyAndIsWhatARepeatGets() async throws {
        let store = try await Self.store()
        let idempotency = Self.guardOn(store, clock: TestClock())
        let made = Mutex(0)
        let toStored: (String) -> StoredResponse = { value in
            made.withLock { $0 += 1 }
            return StoredResponse(status: 200, body: Data("stored:\(value.prefix(4))".utf8))
        }

        let unkeyed = try await idempotency.run(client: Self.client, key: nil, requestHash: "hash", stored: toStored) {
            (_: ProvisioningID) async throws(GatewayError) -> String in "full answer"
        }
        guard case .fresh(let value) = unkeyed else { Issue.record("without a key the operation runs: \(unkeyed)"); return }
        #expect(value == "full answer")
        #expect(made.withLock { $0 } == 0, "no stored form without a key")

        let first = try await idempotency.run(client: Self.client, key: Self.key, requestHash: "hash", stored: toStored) {
            (_: ProvisioningID) async throws(GatewayError) -> String in "full answer"
        }
        guard case .fresh(let firstValue) = first else { Issue.record("the first keyed request runs: \(first)"); return }
        #expect(firstValue == "full answer")
        #expect(made.withLock { $0 } == 1)

        let repeated = try await idempotency.run(client: Self.client, key: Self.key, requestHash: "hash", stored: toStored) {
            (_: ProvisioningID) async throws(GatewayError) -> String in
            Issue.record("the repeat ran the operation")
            return "again"
        }
        guard case .replayed(let stored) = repeated else { Issue.record("the repeat is replayed: \(repeated)"); return }
        #expect(String(decoding: stored.body, as: UTF8.self) == "stored:full", "the repeat gets the stored form, opened")
        #expect(made.withLock { $0 } == 1, "a replay makes no new stored form")
    }

    /// Wall time a test moves by hand, for the claims' stamps.
    final class WallTime: Sendable {
        private let value = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { value.withLock { $0 } }
        func advance(seconds: Double) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    /// Runs once with `key`, the operation failing with `code` (after an attempt at an issuer when
    /// `attempted`); says whether the operation ran.
    static func runFailing(_ idempotency: IdempotencyGuard, hash: String, code: GatewayError.Code?,
                           attempted: Bool = true, outcomeUnknown: Bool = false) async -> (ran: Bool, error: GatewayError?) {
        let ran = Mutex(false)
        do throws(GatewayError) {
            _ = try await idempotency.run(client: client, key: key, requestHash: hash, stored: { $0 }) {
                (_: ProvisioningID) async throws(GatewayError) -> StoredResponse in
                ran.withLock { $0 = true }
                if let code { throw GatewayError(code, "failed on purpose").afterAttempt(attempted).outcomeUnknown(outcomeUnknown) }
                return StoredResponse(status: 200, body: Data("ok".utf8))
            }
            return (ran.withLock { $0 }, nil)
        } catch {
            return (ran.withLock { $0 }, error)
        }
    }

    /// A failure the gateway answered for (here the issuer unavailable), and an internal one
    /// before any attempt at an issuer (a store failure reading the card), free the key: the retry
    /// with the same key runs.
    @Test(arguments: [(GatewayError.Code.upstreamUnavailable, true), (.internal, false)])
    func aFailureWithItsOwnAnswerOrBeforeAnyAttemptReleasesTheKey(code: GatewayError.Code, attempted: Bool) async throws {
        let store = try await Self.store()
        let wall = WallTime()
        let idempotency = IdempotencyGuard(store: store, ttl: .seconds(3600), waitLimit: .seconds(10),
                                           sealer: ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256))),
                                           clock: GatewayClock(TestClock()), wallTime: { wall.now })
        let first = await Self.runFailing(idempotency, hash: "hash", code: code, attempted: attempted)
        #expect(first.ran && first.error?.code == code)
        let retry = await Self.runFailing(idempotency, hash: "hash", code: nil)
        #expect(retry.ran && retry.error == nil)
    }

    /// A failure whose attempt left the issuer's outcome unknown (a timeout, a lost connection, a
    /// 5xx) may have provisioned: the key is never run again, and its claim is abandoned at once,
    /// so the retry and a duplicate that was waiting meanwhile both hear
    /// `idempotency_outcome_unknown` without waiting; another body under the key is still a reuse.
    @Test(arguments: [GatewayError.Code.upstreamTimeout, .upstreamUnavailable, .deadlineExceeded])
    func aFailureThatLeavesTheIssuersOutcomeUnknownIsNeverRunAgain(code: GatewayError.Code) async throws {
        let store = try await Self.store()
        let clock = TestClock()
        let idempotency = IdempotencyGuard(store: store, ttl: .seconds(3600), waitLimit: .seconds(10),
                                           sealer: ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256))),
                                           pollInterval: .seconds(1), clock: GatewayClock(clock))
        let started = Mutex(false)
        let ranAs = Mutex<ProvisioningID?>(nil)
        let release = AsyncStream<Void>.makeStream()
        let first = Task { () -> GatewayError? in
            do throws(GatewayError) {
                _ = try await idempotency.run(client: Self.client, key: Self.key, requestHash: "hash", stored: { $0 }) {
                    (provisioningID: ProvisioningID) async throws(GatewayError) -> StoredResponse in
                    ranAs.withLock { $0 = provisioningID }
                    started.withLock { $0 = true }
                    for await _ in release.stream { break }
                    throw GatewayError(code, "no answer from the issuer").afterAttempt(true).outcomeUnknown()
                }
                return nil
            } catch {
                return error
            }
        }
        while !started.withLock({ $0 }) { await Task.yield() }
        // A duplicate arrives while the first is out, and waits.
        let waiting = Task { await Self.runFailing(idempotency, hash: "hash", code: nil) }
        try #require(await clock.waitForSleepers())
        release.continuation.yield()
        #expect(await first.value?.code == code)
        let sleeps = clock.requestedSleeps.count
        clock.advance(by: .seconds(1))
        let duplicate = await waiting.value
        #expect(!duplicate.ran && duplicate.error?.code == .idempotencyOutcomeUnknown)
        #expect(clock.requestedSleeps.count == sleeps, "the duplicate stopped waiting at its next look")
        // Each names the provisioning the first ran as, so the caller can read its trail.
        let firstID = try #require(ranAs.withLock { $0 })
        #expect(duplicate.error?.provisioningID == firstID)
        for _ in 1...2 {
            let retry = await Self.runFailing(idempotency, hash: "hash", code: nil)
            #expect(!retry.ran && retry.error?.code == .idempotencyOutcomeUnknown && retry.error?.provisioningID == firstID)
        }
        #expect(await Self.runFailing(idempotency, hash: "other", code: nil).error?.code == .idempotencyKeyReused)
    }

    /// An internal failure after an attempt may come after the issuer acted (its answer could not
    /// be recorded), and a request whose instance died may have reached it: neither key is ever
    /// run again. Once the
    /// claim is older than the wait limit, a retry answers `idempotency_outcome_unknown` at once,
    /// without running the operation.
    @Test func anInternalFailureOrADeadRequestIsNeverRunAgain() async throws {
        let store = try await Self.store()
        let wall = WallTime()
        let clock = TestClock()
        let idempotency = IdempotencyGuard(store: store, ttl: .seconds(3600), waitLimit: .seconds(10),
                                           sealer: ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256))),
                                           pollInterval: .seconds(1), clock: GatewayClock(clock), wallTime: { wall.now })
        let first = await Self.runFailing(idempotency, hash: "hash", code: .internal)
        #expect(first.ran && first.error?.code == .internal)

        // Still young: a retry waits for it (it is in progress as far as anyone can tell).
        let waiting = Task { await Self.runFailing(idempotency, hash: "hash", code: nil) }
        try #require(await clock.waitForSleepers())
        wall.advance(seconds: 5)
        for _ in 1...10 {
            clock.advance(by: .seconds(1))
            _ = await clock.waitForSleepers()
        }
        let young = await waiting.value
        #expect(!young.ran && young.error?.code == .idempotencyKeyInProgress)

        // Still within the margin past the wait limit: in progress, as far as anyone can tell.
        wall.advance(seconds: 10)
        let margin = Task { await Self.runFailing(idempotency, hash: "hash", code: nil) }
        try #require(await clock.waitForSleepers())
        for _ in 1...10 {
            clock.advance(by: .seconds(1))
            _ = await clock.waitForSleepers()
        }
        #expect(await margin.value.error?.code == .idempotencyKeyInProgress)

        // Older than any request can run (the wait limit and the margin): never run again,
        // answered at once.
        wall.advance(seconds: 30)
        let sleeps = clock.requestedSleeps.count
        for _ in 1...2 {
            let retry = await Self.runFailing(idempotency, hash: "hash", code: nil)
            #expect(!retry.ran)
            #expect(retry.error?.code == .idempotencyOutcomeUnknown)
            #expect(retry.error?.code.isRetryable == false)
        }
        #expect(clock.requestedSleeps.count == sleeps, "an abandoned claim is not waited for")
        // Another request under the same key is still a reuse.
        #expect(await Self.runFailing(idempotency, hash: "other", code: nil).error?.code == .idempotencyKeyReused)
    }

    /// A claim made under a long deadline stays in progress for its own deadline and margin, even
    /// when the request asking runs under a shorter one (a reload lowered `deadline_ms`): a
    /// duplicate is told to retry later, not that the outcome is unknown and a new key is needed,
    /// which would provision twice if the first request then succeeded.
    @Test func aClaimMadeUnderALongerDeadlineStaysInProgressForAShorterOne() async throws {
        let store = try await Self.store()
        let wall = WallTime()
        let clock = TestClock()
        let sealer = ResponseSealer(keyring: VaultKeyring(SymmetricKey(size: .bits256)))
        func guardWaiting(_ waitLimit: Duration) -> IdempotencyGuard {
            IdempotencyGuard(store: store, ttl: .seconds(3600), waitLimit: waitLimit, sealer: sealer, pollInterval: .seconds(1),
                             clock: GatewayClock(clock), wallTime: { wall.now })
        }
        // Before the reload: 60 s. Its request's claim stays unfinished (here: its answer could not
        // be recorded, so the claim is kept, as a request still running keeps it).
        let first = await Self.runFailing(guardWaiting(.seconds(60)), hash: "hash", code: .internal)
        #expect(first.ran && first.error?.code == .internal)

        // After it: 10 s. 45 s on, past 10 s and the margin but within 60 s and the margin.
        wall.advance(seconds: 45)
        let waiting = Task { await Self.runFailing(guardWaiting(.seconds(10)), hash: "hash", code: nil) }
        try #require(await clock.waitForSleepers(), "the duplicate waits for the request still running")
        for _ in 1...10 {
            clock.advance(by: .seconds(1))
            _ = await clock.waitForSleepers()
        }
        let duplicate = await waiting.value
        #expect(!duplicate.ran)
        #expect(duplicate.error?.code == .idempotencyKeyInProgress)

        // Past its own deadline and margin (60 + 30 s): its request is dead, never run again.
        wall.advance(seconds: 46)
        let late = await Self.runFailing(guardWaiting(.seconds(10)), hash: "hash", code: nil)
        #expect(!late.ran && late.error?.code == .idempotencyOutcomeUnknown)
    }

    /// The key's rule is the spec's (visible ASCII without `%`, 1 to 255), checked before the store
    /// or the operation is reached.
    @Test(arguments: ["", "a\u{01}b", "a\u{7F}", "a%20b", "a b", "é", String(repeating: "k", count: 256)])
    func aKeyOutsideTheSpecsRuleIsRefused(key: String) async throws {
        let store = try await Self.store()
        let idempotency = Self.guardOn(store, clock: TestClock())
        do throws(GatewayError) {
            _ = try await idempotency.run(client: Self.client, key: key, requestHash: "hash", stored: { $0 }) {
                (_: ProvisioningID) async throws(GatewayError) -> StoredResponse in
                Issue.record("the operation ran for key \(key.debugDescription)")
                return StoredResponse(status: 200, body: Data())
            }
            Issue.record("accepted \(key.debugDescription)")
        } catch {
            #expect(error.code == .invalidRequest)
        }
    }

    @Test func everyCharacterTheSpecAllowsMakesAKey() async throws {
        let store = try await Self.store()
        let allowed = (0x21...0x7E).filter { $0 != 0x25 }.map { Character(Unicode.Scalar(UInt8($0))) }
        let key = String((0..<IdempotencyGuard.maxKeyLength).map { allowed[$0 % allowed.count] })
        let ran = Mutex(false)
        _ = try await Self.guardOn(store, clock: TestClock()).run(client: Self.client, key: key, requestHash: "hash", stored: { $0 }) {
            (_: ProvisioningID) async throws(GatewayError) -> StoredResponse in
            ran.withLock { $0 = true }
            return StoredResponse(status: 200, body: Data())
        }
        #expect(ran.withLock { $0 })
    }

    /// A repeat whose stored answer cannot be opened (its sealing key removed from the keyring,
    /// or an instance with another keyring) is answered 500 and put on the trail first, under its
    /// own provisioning id: what it asked for, `replayed` with `internal`, no issuer. It had left
    /// no event (the durability audit).
    @Test func aRepeatWhoseStoredAnswerCannotBeOpenedIsOnTheTrail() async throws {
        let store = try await Self.store()
        let clock = TestClock()
        let asked = IdempotencyGuard.Asked(.googlePay, cardID: "card_1")
        let first = Self.guardOn(store, clock: clock)
        let answer = StoredResponse(status: 200, body: Data(#"{"ok":true}"#.utf8))
        let ran = try await first.run(client: Self.client, key: Self.key, requestHash: "hash", asked: asked, stored: { $0 }) {
            (_: ProvisioningID) async throws(GatewayError) -> StoredResponse in answer
        }
        guard case .fresh = ran else { Issue.record("the first request did not run"); return }

        // Another instance, whose keyring holds none of the keys that sealed it.
        let other = Self.guardOn(store, clock: clock)
        var refused: GatewayError?
        do throws(GatewayError) {
            _ = try await other.run(client: Self.client, key: Self.key, requestHash: "hash", asked: asked, stored: { $0 }) {
                (_: ProvisioningID) async throws(GatewayError) -> StoredResponse in
                Issue.record("the repeat ran the operation")
                return answer
            }
        } catch {
            refused = error
        }
        let failure = try #require(refused)
        #expect(failure.code == .internal && failure.detail.contains("could not be opened"), "\(failure)")
        let id = try #require(failure.provisioningID, "the answer names the provisioning its event is under")
        let trail = try await store.auditEvents(id)
        #expect(trail.count == 1, "\(trail)")
        #expect(trail.first?.outcome == .replayed && trail.first?.errorCode == .internal && trail.first?.attempt == 0)
        #expect(trail.first?.operation == .googlePay && trail.first?.cardID == "card_1" && trail.first?.issuer == nil)
        #expect(trail.first?.client == Self.client)
    }
}
