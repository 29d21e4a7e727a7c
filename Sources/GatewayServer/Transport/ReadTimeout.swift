import NIOCore
import NIOHTTPTypes

/// `server.read_timeout_ms`: how long one request (head and body) may take to arrive, counted
/// from its first byte. A slow-drip ("slowloris") client that sends a byte every so often never
/// trips the idle timeout, which only counts silence; without this it could hold a connection,
/// and with enough of them every connection slot, for as long as it likes.
///
/// Two handlers share the work, because no one place in the pipeline sees both things needed:
/// - `ReadTimeoutHandler` sits at the front of the pipeline, next to the socket (before TLS and
///   the HTTP decoder), so it sees the first raw byte of a request, even one byte of a head that
///   the decoder is still waiting to complete, or of a TLS handshake.
/// - `RequestArrivalObserver` sits after the HTTP decoder (one of Hummingbird's
///   `additionalChannelHandlers`), sees a request's `.end`, and tells the front handler with an
///   outbound user event, which travels towards the socket through TLS and the HTTP codecs, all
///   of which pass such events on.
///
/// Between requests (a keep-alive connection with nothing in flight) no timer runs: that silence
/// is the idle timeout's business. Over TLS the clock starts with the client's first handshake
/// byte, so the handshake and the first request share one `read_timeout_ms`. On expiry the connection is closed; no 408 is written, since
/// the front handler speaks bytes (possibly TLS records), not HTTP, and a client that slow is not
/// waiting for an answer.
final class ReadTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let timeout: TimeAmount
    /// Armed from a request's first byte until its `.end` has been decoded.
    private var deadline: Scheduled<Void>?
    /// Whether the pipeline has asked the socket for more bytes since the last read finished.
    /// When it has not, the gateway itself is holding the bytes back (Hummingbird's async channel
    /// stops reading while a handler has not consumed what it was given, e.g. a pipelined request
    /// queued behind a slow one), so a late request is not the client's fault.
    private var readRequested = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Armed before the bytes are passed on: if they complete a request, the `.end` comes back
        // while they are being decoded, before this returns, and disarms it again.
        if deadline == nil { arm(context) }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readRequested = false
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        readRequested = true
        context.read()
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard event is RequestArrived else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        disarm()
        promise?.succeed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    private func arm(_ context: ChannelHandlerContext) {
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            deadline = nil
            if readRequested {
                context.close(promise: nil)
            } else {
                arm(context)
            }
        }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}

/// Sent from `RequestArrivalObserver` to `ReadTimeoutHandler`: a whole request has been read.
struct RequestArrived {}

/// Sees decoded request parts and reports each request's `.end` to `ReadTimeoutHandler`.
final class RequestArrivalObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) {
            context.triggerUserOutboundEvent(RequestArrived(), promise: nil)
        }
        context.fireChannelRead(data)
    }
}

@available(*, unavailable)
extension ReadTimeoutHandler: Sendable {}

@available(*, unavailable)
extension RequestArrivalObserver: Sendable {}
