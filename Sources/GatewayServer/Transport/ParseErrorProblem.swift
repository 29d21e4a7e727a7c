import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import ProvisioningCore

/// A request the HTTP/1.1 decoder cannot parse (a control character in a header, a request line
/// that is not HTTP's, a bad `Content-Length`, a head over the decoder's limits) never reaches a
/// route: Hummingbird answers it itself with a bare `400` (`Content-Length: 0`) and closes the
/// connection. This handler, one of Hummingbird's `additionalChannelHandlers`, turns that bare
/// answer into the gateway's own: `application/problem+json`, code `invalid_request`, saying which
/// rule of HTTP the request broke, never what it held.
///
/// It sees the parser's error on its way to Hummingbird's loop, and rewrites the one answer that
/// loop writes for it: a `400` with `Content-Length: 0` and `Connection: close`, written after the
/// error was seen. A 400 written by a route always has a problem body, so it is never touched;
/// an error in the middle of a body reaches the route, which answers it itself
/// (`BadInputTests.aMalformedChunkedBodyIsInvalidNotTooLarge`).
final class ParseErrorProblemHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The parser's error, once one passed.
    private var parseError: HTTPParserError?
    /// The problem body to write before the rewritten answer's `.end`.
    private var pendingBody: ByteBuffer?

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? HTTPParserError { parseError = error }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where parseError != nil && head.status == .badRequest && head.headerFields[.contentLength] == "0":
            let problem = ProblemResponse.rendered(Self.error(for: parseError!))
            var fields = head.headerFields
            fields[.contentType] = "application/problem+json"
            fields[.contentLength] = "\(problem.readableBytes)"
            fields[.connection] = "close"
            pendingBody = problem
            context.write(wrapOutboundOut(.head(HTTPResponse(status: head.status, headerFields: fields))), promise: promise)
        case .end(let trailers) where pendingBody != nil:
            let body = pendingBody!
            pendingBody = nil
            context.write(wrapOutboundOut(.body(body)), promise: nil)
            context.write(wrapOutboundOut(.end(trailers)), promise: promise)
        default:
            context.write(data, promise: promise)
        }
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
        return GatewayError(.invalidRequest, "the request could not be read as HTTP/1.1: \(what); the connection is closed")
    }
}

@available(*, unavailable)
extension ParseErrorProblemHandler: Sendable {}
