import NIOCore

/// `server.write_timeout_ms`: how long an answer may wait for a client that does not read it.
/// A client that pipelines requests and never reads the answers stops the connection's writes:
/// the kernel's send buffer fills, then the channel's own queue passes its high-water mark and the
/// channel turns unwritable, and the request's task waits there. Neither the idle timeout (a
/// request is in progress) nor the read timeout (the request has arrived) ends that, so such a
/// client held its connection slot, and megabytes of buffers with it, for as long as it liked (the
/// resource audit held 19 of 20 slots for minutes without a key).
///
/// The timer runs from the moment the channel turns unwritable; it is cancelled when the client
/// reads enough for the channel to be writable again, and on expiry, still unwritable, the
/// connection is closed (no answer can be written to a client that reads none). It sits at the
/// front of the pipeline, next to the socket, where writability is the socket's own (under TLS
/// too).
final class WriteStallHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            disarm()
        } else if deadline == nil {
            deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
                deadline = nil
                if !context.channel.isWritable { context.close(promise: nil) }
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}

@available(*, unavailable)
extension WriteStallHandler: Sendable {}
