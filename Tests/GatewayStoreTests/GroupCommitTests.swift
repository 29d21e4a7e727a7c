import Dispatch
import Foundation
@testable import GatewayStore
import GatewayTestSupport
import Synchronization
import Testing

/// Group commit keeps "written before the answer": no caller returns before the transaction holding
/// its item committed, callers that queue during a commit share the next one, and a failed commit
/// fails exactly its own batch's callers.
@Suite(.timeLimit(.minutes(1))) struct GroupCommitTests {
    /// A commit function that announces each batch and holds it until the test opens the gate.
    final class HeldCommit: Sendable {
        let batches = Mutex<[[Int]]>([])
        let committed = Mutex<Set<Int>>([])
        let failing = Mutex<Set<Int>>([])
        private let gate: AsyncStream<Void>
        private let opener: AsyncStream<Void>.Continuation
        let entered: AsyncStream<Void>
        private let enter: AsyncStream<Void>.Continuation

        init() {
            (gate, opener) = AsyncStream.makeStream()
            (entered, enter) = AsyncStream.makeStream()
        }

        func open() { opener.yield() }

        func commit(_ items: [Int]) async throws {
            batches.withLock { $0.append(items) }
            enter.yield()
            var waiting = gate.makeAsyncIterator()
            _ = await waiting.next()
            if !failing.withLock({ $0.isDisjoint(with: items) }) { throw Refused() }
            committed.withLock { $0.formUnion(items) }
        }
    }

    struct Refused: Error {}

    final class Outcomes: Sendable {
        let value = Mutex<[Int: Bool]>([:])
    }

    /// A caller writing `item`: once its write returns, its item must be committed; it is then
    /// noted as returned.
    static func caller(
        _ item: Int, _ writer: GroupCommit<Int>, _ held: HeldCommit, _ returned: Outcomes
    ) -> @Sendable () async throws -> Void {
        {
            try await writer.write(item)
            #expect(held.committed.withLock { $0.contains(item) }, "item \(item) returned before its commit")
            returned.value.withLock { $0[item] = true }
        }
    }

    @Test func callersQueuedDuringACommitShareTheNextOne() async throws {
        let held = HeldCommit()
        let writer = GroupCommit<Int> { try await held.commit($0) }
        let others = Int.random(in: 5...20)
        let returned = Outcomes()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask(operation: Self.caller(0, writer, held, returned))
            // The first commit is running (and held): everyone else queues behind it.
            var entered = held.entered.makeAsyncIterator()
            _ = await entered.next()
            for item in 1...others { group.addTask(operation: Self.caller(item, writer, held, returned)) }
            while writer.queuedCount < others { try Task.checkCancellation(); await Task.yield() }
            held.open()
            // The second batch is held: none of its callers may have returned.
            _ = await entered.next()
            for _ in 0..<100 { await Task.yield() }
            #expect(returned.value.withLock { $0.keys.allSatisfy { $0 == 0 } })
            #expect(held.committed.withLock { $0 } == [0])
            held.open()
            try await group.waitForAll()
        }
        #expect(returned.value.withLock { Set($0.keys) } == Set(0...others))
        let batches = held.batches.withLock { $0 }
        #expect(batches.count == 2)
        #expect(batches.first == [0])
        #expect(Set(batches.last ?? []) == Set(1...others))
    }

    @Test func aFailedCommitFailsItsOwnBatchOnly() async throws {
        let held = HeldCommit()
        held.failing.withLock { $0 = [2] }
        let writer = GroupCommit<Int>(maxBatch: 2) { try await held.commit($0) }
        let outcomes = Outcomes()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let ok = (try? await writer.write(0)) != nil
                outcomes.value.withLock { $0[0] = ok }
            }
            var entered = held.entered.makeAsyncIterator()
            _ = await entered.next()
            // Queued in this order: 1 and 2 share a batch (maxBatch 2), 3 and 4 the next.
            for item in 1...4 {
                group.addTask {
                    let ok = (try? await writer.write(item)) != nil
                    outcomes.value.withLock { $0[item] = ok }
                }
                while writer.queuedCount < item { try Task.checkCancellation(); await Task.yield() }
            }
            for _ in 0..<3 { held.open() }
        }
        #expect(held.batches.withLock { $0 } == [[0], [1, 2], [3, 4]])
        #expect(outcomes.value.withLock { $0 } == [0: true, 1: false, 2: false, 3: true, 4: true])
        #expect(held.committed.withLock { $0 } == [0, 3, 4])
        // The rolled-back batch counts in neither figure.
        #expect((writer.batchesCommitted, writer.itemsCommitted) == (2, 3))
        // The writer is free again: a later write opens a batch of its own.
        held.open()
        try await writer.write(5)
        #expect(held.batches.withLock { $0.last } == [5])
        #expect((writer.batchesCommitted, writer.itemsCommitted) == (3, 4))
    }

    /// The store's form: the commit runs on a queue of its own and calls back there (as GRDB's
    /// `asyncWrite` does), and that completion starts the next batch, with no caller's task in
    /// between. Callers queued during a commit share the next one, each returns after its own
    /// commit, and the writer is free again afterwards.
    @Test func aCommitCallingBackOnItsOwnQueueStartsTheNextBatch() async throws {
        let queue = DispatchQueue(label: "group-commit-test")
        let gate = DispatchSemaphore(value: 0)
        let held = HeldCommit()
        let writer = GroupCommit<Int>(maxBatch: 64) { items, done in
            queue.async {
                held.batches.withLock { $0.append(items) }
                gate.wait()
                held.committed.withLock { $0.formUnion(items) }
                done(.success(()))
            }
        }
        let others = Int.random(in: 5...20)
        let returned = Outcomes()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask(operation: Self.caller(0, writer, held, returned))
            while held.batches.withLock({ $0.count }) < 1 { try Task.checkCancellation(); await Task.yield() }
            for item in 1...others { group.addTask(operation: Self.caller(item, writer, held, returned)) }
            while writer.queuedCount < others { try Task.checkCancellation(); await Task.yield() }
            #expect(returned.value.withLock { $0.isEmpty })
            gate.signal()
            gate.signal()
            try await group.waitForAll()
        }
        #expect(returned.value.withLock { Set($0.keys) } == Set(0...others))
        #expect(held.batches.withLock { $0.count } == 2)
        #expect(Set(held.batches.withLock { $0.last } ?? []) == Set(1...others), "\(others) callers queued")
        #expect(writer.batchesCommitted == 2)
        #expect(writer.itemsCommitted == others + 1)
        gate.signal()
        try await writer.write(others + 1)
        #expect(held.batches.withLock { $0.last } == [others + 1])
        #expect(writer.batchesCommitted == 3)
        #expect(writer.itemsCommitted == others + 2)
    }
}

/// A caller that finds the writer idle commits its own item on its own thread (`committingHere`),
/// with no hand-off to the writer's queue; callers arriving meanwhile queue and are committed
/// together by the queue once it is over; a store that declines sends the item to the queue.
/// A held commit here holds a thread of the cooperative pool (as a real one does for its
/// transaction), so these run one at a time and every hold is bounded.
@Suite(.serialized, .timeLimit(.minutes(1))) struct GroupCommitHereTests {
    /// A caller whose commit here is held (`holdHere`) blocks its thread on a semaphore: it runs
    /// on a thread of its own, never on one of the cooperative pool's (two, on two cores).
    static let heldCallers = DedicatedThreadExecutor()

    typealias Outcomes = GroupCommitTests.Outcomes

    /// Both commit paths, each noting its batches; a commit here holds its thread until the test
    /// signals `gate` (or fails the items in `failing`); `decline` makes it decline.
    final class TwoPaths: Sendable {
        let here = Mutex<[[Int]]>([])
        let queued = Mutex<[[Int]]>([])
        let committed = Mutex<Set<Int>>([])
        let failing = Mutex<Set<Int>>([])
        let decline = Mutex(false)
        let holdHere = Mutex(false)
        let gate = DispatchSemaphore(value: 0)
        /// For each held commit here, whether it blocked the dedicated thread (never one of the
        /// cooperative pool's).
        let heldOn = Mutex<[Bool]>([])
        private let queue = DispatchQueue(label: "group-commit-here-test")

        func writer() -> GroupCommit<Int> {
            GroupCommit<Int>(maxBatch: 64, committingHere: { item in
                if self.decline.withLock({ $0 }) { return nil }
                self.here.withLock { $0.append([item]) }
                if self.holdHere.withLock({ $0 }) {
                    self.heldOn.withLock { $0.append(GroupCommitHereTests.heldCallers.isCurrent) }
                    // Bounded, but past anything a loaded machine takes: a hold that timed out let
                    // the writer go idle under the test, and its wait for the queue then never
                    // ended (a CI run hung there; the waits now also end with the time limit).
                    _ = self.gate.wait(timeout: .now() + 45)
                }
                if self.failing.withLock({ $0.contains(item) }) { return .failure(GroupCommitTests.Refused()) }
                self.committed.withLock { _ = $0.insert(item) }
                return .success(())
            }) { items, done in
                self.queue.async {
                    self.queued.withLock { $0.append(items) }
                    self.committed.withLock { $0.formUnion(items) }
                    done(.success(()))
                }
            }
        }

        func caller(_ item: Int, _ writer: GroupCommit<Int>, _ returned: Outcomes) -> @Sendable () async throws -> Void {
            {
                try await writer.write(item)
                #expect(self.committed.withLock { $0.contains(item) }, "item \(item) returned before its commit")
                returned.value.withLock { $0[item] = true }
            }
        }
    }

    @Test func theCallerThatFindsTheWriterIdleCommitsHereAndTheQueueTakesTheRest() async throws {
        let paths = TwoPaths()
        paths.holdHere.withLock { $0 = true }
        let writer = paths.writer()
        let others = Int.random(in: 3...12)
        let returned = Outcomes()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask(executorPreference: Self.heldCallers, operation: paths.caller(0, writer, returned))
            // Item 0 is being committed on its caller's thread (held there).
            while paths.here.withLock({ $0.isEmpty }) { try Task.checkCancellation(); await Task.yield() }
            for item in 1...others { group.addTask(operation: paths.caller(item, writer, returned)) }
            while writer.queuedCount < others { try Task.checkCancellation(); await Task.yield() }
            #expect(returned.value.withLock { $0.isEmpty })
            #expect(paths.queued.withLock { $0.isEmpty }, "nothing reaches the queue while a commit runs here")
            paths.gate.signal()
            try await group.waitForAll()
        }
        #expect(returned.value.withLock { Set($0.keys) } == Set(0...others))
        #expect(paths.heldOn.withLock { $0 } == [true])
        #expect(paths.here.withLock { $0 } == [[0]])
        // What queued during the commit here is one batch, committed by the queue.
        #expect(paths.queued.withLock { $0.map(Set.init) } == [Set(1...others)])
        #expect(writer.batchesCommitted == 2)
        #expect(writer.batchesCommittedHere == 1)
        // The writer is idle again, but its last commit held several callers' items: the next
        // caller joins the queue (a batch of one here, as nobody else comes) rather than commit
        // on its own thread, and the caller after that one, whose last commit held one item,
        // commits here again.
        paths.holdHere.withLock { $0 = false }
        try await writer.write(others + 1)
        #expect(paths.queued.withLock { $0.last } == [others + 1])
        #expect(paths.here.withLock { $0 } == [[0]])
        #expect(writer.batchesCommittedHere == 1)
        try await writer.write(others + 2)
        #expect(paths.here.withLock { $0.last } == [others + 2])
        #expect(writer.batchesCommittedHere == 2)
        #expect(writer.commitsDeclinedHere == 0)
    }

    @Test func aCallerCommitsHereOnlyWhileTheLastCommitHeldOneItem() async throws {
        let paths = TwoPaths()
        let writer = paths.writer()
        // Alone, one after another: every caller commits on its own thread.
        let alone = Int.random(in: 2...6)
        for item in 0..<alone { try await writer.write(item) }
        #expect(paths.here.withLock { $0 } == (0..<alone).map { [$0] })
        #expect(paths.queued.withLock { $0.isEmpty })
        // Company: while one caller's commit here is held, `others` queue and are committed
        // together by the queue.
        paths.holdHere.withLock { $0 = true }
        let others = Int.random(in: 2...9)
        let returned = Outcomes()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask(executorPreference: Self.heldCallers, operation: paths.caller(100, writer, returned))
            while paths.here.withLock({ $0.count }) == alone { try Task.checkCancellation(); await Task.yield() }
            for item in 101...(100 + others) { group.addTask(operation: paths.caller(item, writer, returned)) }
            while writer.queuedCount < others { try Task.checkCancellation(); await Task.yield() }
            paths.gate.signal()
            try await group.waitForAll()
        }
        paths.holdHere.withLock { $0 = false }
        #expect(paths.heldOn.withLock { $0 } == [true])
        #expect(paths.queued.withLock { $0.map(Set.init) } == [Set(101...(100 + others))])
        // The last commit held `others` items: the next caller goes to the queue, though the
        // writer is idle; its commit held one, so the caller after it commits here.
        try await writer.write(200)
        #expect(paths.queued.withLock { $0.last } == [200])
        try await writer.write(201)
        #expect(paths.here.withLock { $0.last } == [201])
        #expect(writer.batchesCommittedHere == alone + 2)
        #expect(writer.batchesCommitted == alone + 4)
        // Every item in exactly one commit, whichever path took it.
        #expect(writer.itemsCommitted == alone + 1 + others + 2)
        #expect(writer.commitsDeclinedHere == 0)
    }

    @Test func aFailedCommitHereFailsItsCallerOnlyAndFreesTheWriter() async throws {
        let paths = TwoPaths()
        paths.failing.withLock { $0 = [0] }
        paths.holdHere.withLock { $0 = true }
        let writer = paths.writer()
        let outcomes = Outcomes()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask(executorPreference: Self.heldCallers) {
                let ok = (try? await writer.write(0)) != nil
                outcomes.value.withLock { $0[0] = ok }
            }
            while paths.here.withLock({ $0.isEmpty }) { try Task.checkCancellation(); await Task.yield() }
            group.addTask {
                let ok = (try? await writer.write(1)) != nil
                outcomes.value.withLock { $0[1] = ok }
            }
            while writer.queuedCount < 1 { try Task.checkCancellation(); await Task.yield() }
            paths.gate.signal()
        }
        #expect(outcomes.value.withLock { $0 } == [0: false, 1: true])
        #expect(paths.heldOn.withLock { $0 } == [true])
        #expect(paths.committed.withLock { $0 } == [1])
        #expect(writer.batchesCommitted == 1)
        #expect(writer.batchesCommittedHere == 0)
        paths.holdHere.withLock { $0 = false }
        try await writer.write(2)
        #expect(writer.batchesCommittedHere == 1)
    }

    @Test func aDeclinedCommitGoesToTheQueueAsABatchOfOne() async throws {
        let paths = TwoPaths()
        paths.decline.withLock { $0 = true }
        let writer = paths.writer()
        try await writer.write(7)
        #expect(paths.here.withLock { $0.isEmpty })
        #expect(paths.queued.withLock { $0 } == [[7]])
        #expect(writer.commitsDeclinedHere == 1)
        #expect(writer.batchesCommitted == 1)
        #expect(writer.batchesCommittedHere == 0)
        // The writer was released after the queue's commit: the next idle caller commits here.
        paths.decline.withLock { $0 = false }
        try await writer.write(8)
        #expect(paths.here.withLock { $0 } == [[8]])
        #expect(writer.batchesCommittedHere == 1)
    }
}
