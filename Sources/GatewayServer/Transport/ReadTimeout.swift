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
/// byte, so the handshake and the first request share one `read_timeout_ms`. On expiry the front
/// handler, which speaks bytes (possibly TLS records), not HTTP, asks `HTTPEdgeHandler` (after the
/// HTTP codec) with a `RequestReadTimedOut` event to answer: a request whose head came and whose
/// body did not arrive whole, with every earlier answer written, is told 408 `request_timeout`
/// (problem+json, `Connection: close`; a client uploading slowly learns why, where it had met a
/// connection closed without a word), and the connection ends as a refusal does (its output closed,
/// then the whole of it after `HTTPEdgeHandler.lingerTime`). Anything else (a head still arriving,
/// a TLS handshake, an answer being written) is closed at once, without an answer: a client that
/// slow with its head is not waiting for one.
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
                let timedOut = RequestReadTimedOut()
                context.fireUserInboundEventTriggered(timedOut)
                if timedOut.answered {
                    // `HTTPEdgeHandler` closes it once its 408 is written and the linger passed;
                    // this bounds an answer whose write never completes.
                    context.eventLoop.assumeIsolated().scheduleTask(in: HTTPEdgeHandler.lingerTime + timeout) {
                        context.close(promise: nil)
                    }
                } else {
                    context.close(promise: nil)
                }
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

/// Sent from `ReadTimeoutHandler` towards `HTTPEdgeHandler` when a request did not arrive within
/// `server.read_timeout_ms`; `answered` says whether a 408 is being written (the connection is then
/// the edge handler's to close). An object, so that the answer comes back to the sender: user
/// events pass through TLS and the HTTP codec synchronously, on the connection's event loop.
final class RequestReadTimedOut {
    var answered = false
}

@available(*, unavailable)
extension RequestReadTimedOut: Sendable {}

/// What the body of a request answered 408 ends with (`HTTPEdgeHandler` fires it as the answer
/// is written), for `BodyLimitMiddleware` to tell from a body cut short.
struct RequestBodyTimedOut: Error {}

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
