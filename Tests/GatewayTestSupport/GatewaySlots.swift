import Synchronization

/// How many in-process sandbox gateways the test process runs at once. Swift Testing starts every
/// async test together; on two cores a hundred live gateways (each with five simulators, its
/// timers and its store) starved one another, and the time-bound fault tests failed with their
/// requests cut off. A test waits here for a slot before it builds its gateway, so the time it
/// measures starts once it runs.
public final class GatewaySlots: Sendable {
    /// Shared by every test target (they run in one process).
    public static let shared = GatewaySlots(limit: 6)

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    public init(limit: Int) {
        state = Mutex(State(free: limit))
    }

    /// Whether the current task already holds a slot: a test that runs a second gateway inside
    /// its first (two instances on one store) takes no second slot, so slots cannot deadlock.
    @TaskLocal private static var holding = false

    /// Runs `body` holding one slot; waits first while every slot is taken.
    public func withSlot<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        if Self.holding { return try await body() }
        await acquire()
        defer { release() }
        return try await Self.$holding.withValue(true) { try await body() }
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
