import Foundation
@testable import Gateway
import GatewayTestSupport
import ProvisioningCore
import Synchronization
import Testing

/// `LateWrites`, the late store writes a stop waits for: its wait is bounded on the injected
/// clock, so a write that never ends (a store that hangs under it) cannot hold a stop up.
@Suite struct LateAuditTests {
    /// How long a test waits, in real time, for a drain to sleep on the test clock (and for a
    /// drain or a write to end): a drain's wait
    /// is two task hops away (its own task, then its group's child), and with the disk loaded each
    /// hop waited seconds behind a full cooperative pool (10 s, the clock's default, was exceeded).
    /// It returns as soon as the drain sleeps.
    static let sleeperLimit: Duration = .seconds(30)

    /// A write that does not end: the drain returns once its bound has passed on the clock, not
    /// before, and says that one write was left; the write itself goes on.
    @Test(.timeLimit(.minutes(1)))
    func aDrainReturnsAtItsBoundLeavingAWriteThatDoesNotEnd() async throws {
        let time = TestClock()
        let writes = LateWrites()
        let (hang, release) = AsyncStream<Void>.makeStream()
        writes.start { for await _ in hang {} }
        #expect(writes.count == 1)

        let drained = Mutex<Int?>(nil)
        let drain = Task {
            let left = await writes.drain(within: LateWrites.drainBound, on: GatewayClock(time))
            drained.withLock { $0 = left }
        }
        try #require(await time.waitForSleepers(1, limit: Self.sleeperLimit), "the drain waits on the clock")
        #expect(time.requestedSleeps == [LateWrites.drainBound])
        time.advance(by: LateWrites.drainBound - .milliseconds(1))
        // Not yet: a sleeper of the clock still waits (the drain's), and nothing was returned.
        #expect(time.sleeperCount == 1)
        #expect(drained.withLock { $0 } == nil)
        time.advance(by: .milliseconds(1))
        await drain.value
        #expect(drained.withLock { $0 } == 1)

        // The write goes on after the drain, and ends as it would have.
        release.finish()
        #expect(await eventually(upTo: Self.sleeperLimit, every: .milliseconds(5)) { writes.count == 0 })
    }

    /// A drain made from a cancelled task (a service the stop cancelled once its timeout passed,
    /// as the store service is) still waits for the writes, up to its bound on the clock and no
    /// less: a cancelled drain had returned at once, and the process exited under a late write.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aCancelledDrainStillWaitsForTheWritesUpToItsBound(writeEnds: Bool) async throws {
        let time = TestClock()
        let writes = LateWrites()
        let (hang, release) = AsyncStream<Void>.makeStream()
        writes.start { for await _ in hang {} }

        let drained = Mutex<Int?>(nil)
        let drain = Task {
            // Cancelled before the drain begins, as the store service's task is by then.
            withUnsafeCurrentTask { $0?.cancel() }
            let left = await writes.drain(within: LateWrites.drainBound, on: GatewayClock(time))
            drained.withLock { $0 = left }
        }
        try #require(await time.waitForSleepers(1, limit: Self.sleeperLimit), "the cancelled drain waits on the clock")
        // It has not returned: a cancelled drain returned before its clock was asked for anything.
        try await Task.sleep(for: .milliseconds(50))
        #expect(drained.withLock { $0 } == nil, "the cancelled drain returned with a write still running")
        if writeEnds {
            release.finish()
        } else {
            time.advance(by: LateWrites.drainBound - .milliseconds(1))
            #expect(time.sleeperCount == 1)
            #expect(drained.withLock { $0 } == nil)
            time.advance(by: .milliseconds(1))
        }
        await drain.value
        #expect(drained.withLock { $0 } == (writeEnds ? 0 : 1))
        release.finish()
    }

    /// A stop drains twice (the late-writes service, then the store service): the second drain
    /// waits only what is left of the first's bound, and one begun after it returns at once, so
    /// the two never wait more than one bound in all (with the cut-off requests' own writes they
    /// must fit in the group's cancellation bound; two whole bounds had used it up).
    @Test(.timeLimit(.minutes(1)))
    func drainsShareOneBoundFromTheFirst() async throws {
        let time = TestClock()
        let clock = GatewayClock(time)
        let writes = LateWrites()
        let (hang, release) = AsyncStream<Void>.makeStream()
        writes.start { for await _ in hang {} }
        defer { release.finish() }

        let left = Locked<[Int]>([])
        let first = Task {
            let n = await writes.drain(within: LateWrites.drainBound, on: clock)
            left.withLock { $0.append(n) }
        }
        try #require(await time.waitForSleepers(1, limit: Self.sleeperLimit))
        time.advance(by: .seconds(5))
        let second = Task {
            let n = await writes.drain(within: LateWrites.drainBound, on: clock)
            left.withLock { $0.append(n) }
        }
        try #require(await time.waitForSleepers(2, limit: Self.sleeperLimit))
        #expect(time.requestedSleeps == [LateWrites.drainBound, LateWrites.drainBound - .seconds(5)])
        time.advance(by: LateWrites.drainBound - .seconds(5))
        // Both return now (waited for in real time, boundedly: a drain that waits longer would
        // otherwise hold the test until its time limit, which cannot cancel it).
        _ = await eventually(upTo: Self.sleeperLimit, every: .milliseconds(5)) { left.withLock { $0.count } >= 2 }
        #expect(left.withLock { $0 } == [1, 1], "a drain outlived the first drain's bound")
        let third = Task {
            let n = await writes.drain(within: LateWrites.drainBound, on: clock)
            left.withLock { $0.append(n) }
        }
        _ = await eventually(upTo: Self.sleeperLimit, every: .milliseconds(5)) { left.withLock { $0.count } >= 3 }
        #expect(left.withLock { $0 } == [1, 1, 1], "a drain begun after the bound waited")
        #expect(time.requestedSleeps.count == 2, "a drain after the bound waited again")
        // Whatever still waits (only when a drain above failed) is let go, so the test ends.
        time.advance(by: LateWrites.drainBound * 2)
        for task in [first, second, third] { await task.value }
    }

    /// With nothing left to write, the drain returns at once, whatever the clock does.
    @Test(.timeLimit(.minutes(1)))
    func aDrainWithNothingToWriteReturnsAtOnce() async {
        let time = TestClock()
        let writes = LateWrites()
        writes.start {}
        _ = await eventually(upTo: Self.sleeperLimit, every: .milliseconds(5)) { writes.count == 0 }
        #expect(await writes.drain(within: LateWrites.drainBound, on: GatewayClock(time)) == 0)
        #expect(time.now.offset == .zero)
    }
}
