import NIOCore
import Synchronization

/// `server.max_connections`: how many connections the listener holds open at once. One over the
/// cap is closed as soon as it is accepted, so a flood of connections costs the gateway a file
/// descriptor for a moment each, and a client (or load balancer) learns at once to go elsewhere
/// rather than waiting in a queue. Closing a connection frees its slot.
///
/// Not Hummingbird's `MaximumAvailableConnections`: that one stops accepting at the cap, which
/// leaves newcomers waiting in the kernel's backlog without an answer and, once the backlog is
/// full, makes every new connection hang in SYN retries.
final class ConnectionLimit: Sendable {
    let maximum: Int
    private let open = Atomic<Int>(0)

    init(maximum: Int) {
        self.maximum = maximum
    }

    /// Takes a slot, or says there is none. Connections are accepted on several event loops at
    /// once, so the check and the increment are one atomic step.
    func admit() -> Bool {
        var seen = open.load(ordering: .relaxed)
        while seen < maximum {
            let (exchanged, original) = open.compareExchange(expected: seen, desired: seen + 1, ordering: .relaxed)
            if exchanged { return true }
            seen = original
        }
        return false
    }

    func release() {
        open.subtract(1, ordering: .relaxed)
    }
}

/// At the front of the pipeline of a connection over the cap: closes it as soon as it is active.
/// The rest of the pipeline is still built (Hummingbird expects every accepted connection to
/// produce one), but never sees a byte. Failing the connection's setup instead would reach the
/// listener's own accept loop as an error and stop it.
final class RefuseConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { context.close(promise: nil) }
    }

    func channelActive(context: ChannelHandlerContext) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

@available(*, unavailable)
extension RefuseConnectionHandler: Sendable {}
