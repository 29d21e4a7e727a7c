import Synchronization

/// Whether the gateway takes new traffic: `/readyz` answers 503 from the moment a graceful
/// shutdown begins, so a load balancer stops sending requests while the ones in flight finish.
public final class Readiness: Sendable {
    private let draining = Atomic<Bool>(false)

    public init() {}

    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    func beginDraining() { draining.store(true, ordering: .releasing) }
}
