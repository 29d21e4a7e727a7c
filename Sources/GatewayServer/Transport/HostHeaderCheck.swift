import NIOCore
import NIOHTTP1

/// RFC 9112, 3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1
/// request message that lacks a Host header field and to any request message that contains more
/// than one Host header field line or a Host header field with an invalid field value."
///
/// It sits right after SwiftNIO's HTTP decoder, where a parser error comes from, because only
/// there is the request's HTTP version still known (the conversion to `HTTPRequest` keeps the
/// first `Host` as the authority and drops the version): an HTTP/1.0 request may come without
/// `Host` (HAProxy's `option httpchk` sends none), an HTTP/1.1 request may not. Two `Host`s are
/// how a request is read as two by two readers (a proxy routing on the last, an application on
/// the first). A refused request is treated as bytes that are not HTTP: `HTTPEdgeHandler` is told
/// the rule it broke, an `HTTPParserError` goes on, and the gateway answers it as it answers
/// every such request (400 `invalid_request`, problem+json, after every earlier answer, the
/// connection closed). Nothing after it on the connection is read as a request.
final class HostHeaderCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    /// A host name (255) and a port, with room to spare: a longer value is no host.
    static let maxLength = 300

    private let edge: HTTPEdgeHandler
    private var refused = false

    init(edge: HTTPEdgeHandler) {
        self.edge = edge
    }

    /// Puts the check in `channel`'s pipeline right after its HTTP/1 decoder. On the channel's
    /// event loop, once Hummingbird's HTTP/1 handlers (the decoder, `HTTPEdgeHandler`) are in.
    static func install(in pipeline: ChannelPipeline.SynchronousOperations) throws {
        let edge = try pipeline.handler(type: HTTPEdgeHandler.self)
        let decoder = try pipeline.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self)
        try pipeline.addHandler(HostHeaderCheck(edge: edge), position: .after(decoder.handler))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        if case .head(let head) = unwrapInboundIn(data), let broken = Self.brokenRule(head) {
            refused = true
            edge.refuseHead(because: broken)
            context.fireErrorCaught(HTTPParserError.invalidHeaderToken)
            return
        }
        context.fireChannelRead(data)
    }

    /// The rule of RFC 9112, 3.2 that `head` breaks, in fixed words, or nil.
    static func brokenRule(_ head: HTTPRequestHead) -> String? {
        let hosts = head.headers["Host"]
        if hosts.count > 1 { return "it has more than one Host header" }
        guard let host = hosts.first else {
            return (head.version.major, head.version.minor) >= (1, 1) ? "an HTTP/1.1 request must have a Host header" : nil
        }
        return isValidHost(host) ? nil : "its Host header is not a host and port"
    }

    /// RFC 3986's `host [ ":" port ]` by its characters: a registered name's unreserved, percent
    /// and sub-delimiter characters, an IP literal's brackets and colons. Empty is allowed (a target
    /// without an authority).
    static func isValidHost(_ host: String) -> Bool {
        host.utf8.count <= maxLength && host.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                "-._~!$&'()*+,;=%:[]".utf8.contains(byte)
            }
        }
    }
}

@available(*, unavailable)
extension HostHeaderCheck: Sendable {}
