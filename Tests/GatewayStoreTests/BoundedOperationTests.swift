@testable import GatewayStore
import ProvisioningCore
import Synchronization
import Testing

/// `PostgresGatewayStore.within`, the one race behind a request's store operations and the
/// start-up connection: an outcome or the timeout's error, whichever comes first, and what
/// happens to the work the caller stopped waiting for. No database is needed; the outcomes are
/// asserted, never how long they took.
@Suite struct BoundedOperationTests {
    static let expired = StoreError(store: "test", reason: "no answer in time")

    @Test func anAnswerBeforeTheTimeoutIsTheAnswer() async throws {
        let value = try await PostgresGatewayStore.within(.seconds(30), shielded: false, expired: Self.expired) { 42 }
        #expect(value == 42)
        await #expect(throws: StoreError.self) {
            try await PostgresGatewayStore.within(.seconds(30), shielded: false, expired: Self.expired) { () async throws -> Int in
                throw StoreError(store: "test", reason: "the body's own error")
            }
        }
    }

    /// Past the timeout the caller gets `expired`; unshielded work is cancelled, shielded work
    /// runs to its end (a write that records what happened still lands).
    @Test(arguments: [false, true])
    func pastTheTimeoutTheCallerIsAnsweredAndOnlyUnshieldedWorkIsCancelled(shielded: Bool) async throws {
        let work = HeldWork()
        do {
            _ = try await PostgresGatewayStore.within(.milliseconds(20), shielded: shielded, expired: Self.expired) { await work.run() }
            Issue.record("no timeout")
        } catch let error as StoreError {
            #expect(error.reason == Self.expired.reason)
        }
        if shielded { work.release.continuation.yield() }
        #expect(await work.endedAs() == (shielded ? "finished" : "cancelled"))
    }

    /// The caller's own cancellation cancels unshielded work at once, and never shielded work.
    @Test(arguments: [false, true])
    func theCallersCancellationReachesOnlyUnshieldedWork(shielded: Bool) async throws {
        let work = HeldWork()
        let caller = Task {
            try await PostgresGatewayStore.within(.seconds(60), shielded: shielded, expired: Self.expired) { await work.run() }
        }
        for await _ in work.started.stream {}
        caller.cancel()
        // Shielded, it is still running: released by the test, it finishes.
        if shielded { work.release.continuation.yield() }
        #expect(await work.endedAs() == (shielded ? "finished" : "cancelled"))
        _ = try? await caller.value
    }
}

/// Work that waits for the test's release or for its cancellation, and says which ended it.
final class HeldWork: Sendable {
    let started = AsyncStream<Void>.makeStream()
    let release = AsyncStream<Void>.makeStream()
    let done = AsyncStream<Void>.makeStream()
    let ended = Mutex<String?>(nil)

    func run() async -> Int {
        started.continuation.finish()
        await withTaskCancellationHandler {
            for await _ in release.stream { break }
        } onCancel: {
            release.continuation.finish()
        }
        ended.withLock { $0 = Task.isCancelled ? "cancelled" : "finished" }
        done.continuation.finish()
        return 1
    }

    /// How the work ended, once it has.
    func endedAs() async -> String? {
        for await _ in done.stream {}
        return ended.withLock { $0 }
    }
}
