import Dispatch
@testable import GatewayStore
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
            while writer.queuedCount < others { await Task.yield() }
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
        await withTaskGroup(of: Void.self) { group in
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
                while writer.queuedCount < item { await Task.yield() }
            }
            for _ in 0..<3 { held.open() }
        }
        #expect(held.batches.withLock { $0 } == [[0], [1, 2], [3, 4]])
        #expect(outcomes.value.withLock { $0 } == [0: true, 1: false, 2: false, 3: true, 4: true])
        #expect(held.committed.withLock { $0 } == [0, 3, 4])
        // The writer is free again: a later write opens a batch of its own.
        held.open()
        try await writer.write(5)
        #expect(held.batches.withLock { $0.last } == [5])
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
            while held.batches.withLock({ $0.count }) < 1 { await Task.yield() }
            for item in 1...others { group.addTask(operation: Self.caller(item, writer, held, returned)) }
            while writer.queuedCount < others { await Task.yield() }
            #expect(returned.value.withLock { $0.isEmpty })
            gate.signal()
            gate.signal()
            try await group.waitForAll()
        }
        #expect(returned.value.withLock { Set($0.keys) } == Set(0...others))
        #expect(held.batches.withLock { $0.count } == 2)
        #expect(Set(held.batches.withLock { $0.last } ?? []) == Set(1...others), "\(others) callers queued")
        #expect(writer.batchesCommitted == 2)
        gate.signal()
        try await writer.write(others + 1)
        #expect(held.batches.withLock { $0.last } == [others + 1])
        #expect(writer.batchesCommitted == 3)
    }
}
