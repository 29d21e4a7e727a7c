import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import ProvisioningCore

/// What HTTP/1.1 itself decides before any route runs, answered as the gateway answers everything
/// else. One of Hummingbird's `additionalChannelHandlers`, it does two things:
///
/// - **A request the decoder cannot parse** (a control character in a header, a request line
///   that is not HTTP's, a bad `Content-Length`, a head over the decoder's limits) never reaches a
///   route: Hummingbird answers it itself with a bare `400` (`Content-Length: 0`) and closes the
///   connection. This turns that bare answer into the gateway's own: `application/problem+json`,
///   code `invalid_request`, saying which rule of HTTP the request broke, never what it held. It
///   sees the parser's error on its way to Hummingbird's loop, and rewrites the one answer that loop
///   writes for it: a `400` with `Content-Length: 0`, written after the error was seen and after
///   every request read before it was answered. A 400
///   written by a route always has a problem body, so it is never touched; an error in the middle
///   of a body reaches the route, which answers it itself
///   (`BadInputTests.aMalformedChunkedBodyIsInvalidNotTooLarge`).
/// - **A `CONNECT` request** asks for a tunnel, which the gateway never opens. The route answers it
///   (no such resource), but SwiftNIO's codec writes an answer to `CONNECT` without a body or its
///   length, and reads nothing more from the connection (what follows a `CONNECT` is a tunnel's
///   bytes, not requests): a client would wait for the rest of that answer, and for answers to
///   requests it sent after it, until the idle timeout. So the answer to a `CONNECT` says
///   `Connection: close`, and the connection is closed once it is written.
/// - **`Expect: 100-continue`** (what curl and many HTTP clients send before a larger body) is
///   answered with `100 Continue` as soon as the head is read, so the client sends its body at
///   once instead of waiting a second or more for an answer that would never come; only when every
///   earlier request's answer is written whole (a pipelined request's `100` must not land inside
///   the answer before it), else the client sends its body after its own wait. Not for a head the
///   gateway refuses before reading its body, whose refusal is then the answer (RFC 9110, 10.1.1):
///   one without `Authorization` (401; the public probes take no body) or whose `Content-Length`
///   is past `server.max_body_bytes` (413). A `100` there had the client send a body only to
///   have it dropped. A request the gateway refuses before reading its body is answered and
///   closed (below).
/// - **A refusal written while its request's body is still arriving** (401 before the body was
///   read, 413 part-way through it) says `Connection: close`; once it is written the connection's
///   output is closed, what still arrives is read and dropped for `lingerTime` (so the client's
///   kernel is not sent a reset that could discard the answer before it is read: RFC 9112, 9.6),
///   then the connection is closed. Otherwise the rest of the body would still be read and handed
///   on until it ended or the read timeout passed: a client without a key could stream gigabytes
///   of chunk extensions, which no body limit counts, into a connection that had already been
///   answered.
/// - **A body that does not arrive in time** (`server.read_timeout_ms`, which `ReadTimeoutHandler`
///   keeps before TLS and tells this handler of with `RequestReadTimedOut`): the request still
///   arriving is answered 408 `request_timeout`, when every earlier answer is written whole and none
///   is under way, and the connection ends as after a refusal (above); the route waiting for the
///   body hears `RequestBodyTimedOut`, so its log line says 408 too, and its own answer is dropped.
final class HTTPEdgeHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Request heads read so far, and final answer heads written.
    private var requests = 0
    private var answers = 0
    /// The number of the `CONNECT` request (1 for the connection's first), once one came: the
    /// decoder reads no request after it.
    private var connectRequest: Int?
    /// The number of a request whose answer ends the connection (an HTTP/1.0 request that did not
    /// ask to keep it): its answer says `Connection: close`, and the connection is closed once
    /// the answer is written.
    private var closingRequest: Int?
    /// Whether the latest request's body is still arriving (its head read, its end not yet).
    private var requestOpen = false
    /// Whether a final answer's head is written and its end not yet.
    private var answerInProgress = false
    /// How the connection ends once the answer being written is: at once (the answer to that
    /// `CONNECT`), or after a linger (a refusal while the body is still arriving).
    private enum Ending { case now, afterAnswer, lingering }
    private var endingAfterAnswer: Ending?
    /// From a refusal's head on, what arrives is dropped until the connection closes.
    private var lingering = false
    /// Whether a 408 answered a request whose body did not arrive in time (`RequestReadTimedOut`):
    /// nothing is written after it.
    private var answeredTimeout = false
    /// How long a refused connection still reads (and drops) before it is closed.
    static let lingerTime: TimeAmount = .seconds(1)

    /// Ends a refused connection once its answer is written: its output at once, the whole of it
    /// after `lingerTime`, whether or not the output could be closed first.
    static func closeAfterLinger(_ channel: any Channel) {
        channel.close(mode: .output, promise: nil)
        channel.eventLoop.scheduleTask(in: lingerTime) { channel.close(promise: nil) }
    }

    /// The serving configuration's `server.max_body_bytes`.
    private let maxBodyBytes: @Sendable () -> Int

    init(maxBodyBytes: @escaping @Sendable () -> Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    /// Whether a head asking `Expect: 100-continue` is told to go on: not when the gateway will
    /// refuse it before reading its body, without a key or with a body declared too large.
    func continues(_ head: HTTPRequest) -> Bool {
        guard head.headerFields[.authorization] != nil else { return false }
        if let declared = head.headerFields[.contentLength] {
            guard let length = Int(declared), length <= maxBodyBytes() else { return false }
        }
        return true
    }

    /// What the bytes that were not a request are told, once the parser's error passed (or
    /// `HostHeaderCheck` refused a head, which it passes on as one).
    private var refusal: GatewayError?
    /// The problem body to write before the rewritten answer's `.end`.
    private var pendingBody: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !lingering else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            requests += 1
            requestOpen = true
            if head.method == .connect, connectRequest == nil { connectRequest = requests }
            if let expect = head.headerFields[.expect], expect.lowercased() == "100-continue", answers + 1 == requests, !answerInProgress,
               continues(head) {
                // Informational: not counted as the request's answer.
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
        case .end:
            requestOpen = false
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Whatever arrives after a refusal is dropped, unparsable bytes included: no answer is
        // written onto the closed output.
        if lingering, error is HTTPParserError { return }
        if let error = error as? HTTPParserError, refusal == nil { refusal = Self.error(for: error) }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !answeredTimeout else {
            // The route's own answer to the request already told 408: dropped, so the client
            // reads one answer.
            promise?.succeed()
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status.kind != .informational:
            answerInProgress = true
        case .end:
            answerInProgress = false
        default:
            break
        }
        switch unwrapOutboundIn(data) {
        case .head(var head) where head.status.kind != .informational && connectRequest == answers + 1:
            answers += 1
            endingAfterAnswer = .now
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .head(var head) where head.status.kind != .informational && closingRequest == answers + 1:
            answers += 1
            closingRequest = nil
            endingAfterAnswer = .afterAnswer
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .body where endingAfterAnswer == .now:
            // The codec frames an answer to CONNECT without a body; it is not written at all.
            promise?.succeed()
        case .end where endingAfterAnswer != nil:
            let ending = endingAfterAnswer!
            endingAfterAnswer = nil
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.cascade(to: promise)
            let channel = context.channel
            written.futureResult.whenComplete { _ in
                switch ending {
                case .now, .afterAnswer:
                    channel.close(promise: nil)
                case .lingering:
                    Self.closeAfterLinger(channel)
                }
            }
            context.write(data, promise: written)
            context.flush()
        case .head(let head) where refusal != nil && answers == requests && head.status == .badRequest
            && head.headerFields[.contentLength] == "0":
            // Every request read so far has its answer: this one is for the bytes that were not a request.
            let problem = ProblemResponse.rendered(refusal!)
            var fields = head.headerFields
            fields[.contentType] = "application/problem+json"
            fields[.contentLength] = "\(problem.readableBytes)"
            fields[.connection] = "close"
            pendingBody = problem
            answers += 1
            context.write(wrapOutboundOut(.head(HTTPResponse(status: head.status, headerFields: fields))), promise: promise)
        case .head(var head) where head.status.kind == .clientError && requestOpen && answers + 1 == requests:
            // The answer to the request still arriving, refusing it: nothing more that arrives is
            // handed on (neither the rest of its body nor a request pipelined behind it, which
            // would run with its answer lost).
            answers += 1
            endingAfterAnswer = .lingering
            lingering = true
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end(let trailers) where pendingBody != nil:
            let body = pendingBody!
            pendingBody = nil
            context.write(wrapOutboundOut(.body(body)), promise: nil)
            context.write(wrapOutboundOut(.end(trailers)), promise: promise)
        case .head(let head):
            if head.status.kind != .informational { answers += 1 }
            context.write(data, promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let timedOut = event as? RequestReadTimedOut else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        // Only the request whose head came and whose body is still arriving, with every answer
        // before it written whole: a 408 anywhere else could land inside another answer.
        guard requestOpen, answers + 1 == requests, !answerInProgress, !lingering, endingAfterAnswer == nil else { return }
        timedOut.answered = true
        answers += 1
        lingering = true
        answeredTimeout = true
        let problem = ProblemResponse.rendered(GatewayError(.requestTimeout,
            "the request's body did not arrive whole within server.read_timeout_ms; nothing of it ran; the connection is closed"))
        let head = HTTPResponse(status: .requestTimeout, headerFields: [
            .contentType: "application/problem+json", .contentLength: "\(problem.readableBytes)", .connection: "close",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(problem)), promise: nil)
        let channel = context.channel
        // As a refusal while the body arrives: what still comes is dropped (`lingering`).
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in Self.closeAfterLinger(channel) }
        // Then the route waiting for the body hears why it ends (`BodyLimitMiddleware`), so that
        // the request's log line says 408 as the client was told, not a body cut short.
        context.fireErrorCaught(RequestBodyTimedOut())
    }

    /// `HostHeaderCheck` read a request that does not keep the connection (HTTP/1.0 without
    /// `Connection: keep-alive`): the answer to it, the next request this handler reads, closes it.
    func closeAfterAnswerToNextRequest() {
        closingRequest = requests + 1
    }

    /// `HostHeaderCheck` refused a request's head (it passes an `HTTPParserError` on next): the
    /// answer names `rule` instead of the parser's.
    func refuseHead(because rule: String) {
        if refusal == nil { refusal = Self.unreadable(rule) }
    }

    static func unreadable(_ what: String) -> GatewayError {
        GatewayError(.invalidRequest, "the request could not be read as HTTP/1.1: \(what); the connection is closed")
    }

    /// What the caller is told: which rule its request broke, in fixed words (the parser's own
    /// descriptions, never the bytes it read).
    static func error(for parseError: HTTPParserError) -> GatewayError {
        let what: String = switch parseError {
        case .headerOverflow: "its head is larger than the gateway accepts (80 KiB of header fields, 1,000 fields)"
        case .invalidHeaderToken, .invalidCharactersUsed: "a header name or value holds a character HTTP does not allow there"
        case .invalidMethod: "its method is not an HTTP method"
        case .invalidURL: "its request target is not a valid URL path"
        case .invalidVersion: "its HTTP version is not HTTP/1.x"
        case .invalidContentLength, .unexpectedContentLength: "its Content-Length is not valid (not a number, given twice, or beside Transfer-Encoding)"
        case .invalidChunkSize: "its chunked body's framing is not valid"
        case .lfExpected, .invalidConstant, .strictModeAssertion: "its request line or a header line is not HTTP/1.1's form"
        default: "it is not a valid HTTP/1.1 request (\(parseError.debugDescription))"
        }
        return unreadable(what)
    }
}

@available(*, unavailable)
extension HTTPEdgeHandler: Sendable {}
