import NIOCore

/// `server.write_timeout_ms`: how long an answer may wait for a client that does not read it.
/// A client that pipelines requests and never reads the answers stops the connection's writes:
/// the kernel's send buffer fills, then the channel's own queue passes its high-water mark and the
/// channel turns unwritable, and the request's task waits there. Neither the idle timeout (a
/// request is in progress) nor the read timeout (the request has arrived) ends that, so such a
/// client held its connection slot, and megabytes of buffers with it, for as long as it liked (the
/// resource audit held 19 of 20 slots for minutes without a key).
///
/// The timer runs from the moment the channel turns unwritable and is cancelled when it is
/// writable again. On expiry, still unwritable, the connection is closed only if the client took
/// nothing meanwhile (no byte went to the socket: the bytes written through this handler less
/// those the channel still holds unsent did not grow). A slow client that is still reading gets
/// another period, however long its answers take (the review saw one reading 60 KB/s cut off
/// mid-answer by a timer that measured unwritability alone). It sits at the front of the
/// pipeline, next to the socket, where writability and the unsent bytes are the socket's own
/// (under TLS too).
final class WriteStallHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    /// Every byte written towards the socket through this handler.
    private var written = 0

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        written += unwrapOutboundIn(data).readableBytes
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            disarm()
        } else if deadline == nil {
            arm(context, sent: sent(context))
        }
        context.fireChannelWritabilityChanged()
    }

    private func arm(_ context: ChannelHandlerContext, sent before: Int) {
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            deadline = nil
            guard !context.channel.isWritable else { return }
            let now = sent(context)
            if now > before {
                arm(context, sent: now)  // the client took some: another period
            } else {
                context.close(promise: nil)
            }
        }
    }

    /// The bytes that have gone to the socket: written, less what the channel holds unsent (its
    /// own queue; the kernel's is the socket's).
    private func sent(_ context: ChannelHandlerContext) -> Int {
        written - ((try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0)
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
