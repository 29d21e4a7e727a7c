import Foundation
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
        if case .head(let head) = unwrapInboundIn(data) {
            if let broken = Self.brokenRule(head) {
                refused = true
                edge.refuseHead(because: broken)
                context.fireErrorCaught(HTTPParserError.invalidHeaderToken)
                return
            }
            // RFC 9112, 9.3: an HTTP/1.0 connection persists only when the request asks for it.
            if !head.isKeepAlive { edge.closeAfterAnswerToNextRequest() }
        }
        context.fireChannelRead(data)
    }

    /// The rule of RFC 9112 that `head` breaks, in fixed words, or nil: its Host (3.2), and its
    /// Transfer-Encoding (6.1). Only `chunked`, alone, is a coding the gateway reads: any other
    /// (`gzip, chunked`) would be taken for chunked with the coding before it ignored, a body read
    /// as another reader in front would not read it (the way requests are smuggled past a proxy).
    /// An HTTP/1.0 request with Transfer-Encoding "MUST" be treated as faulty framing (6.1).
    static func brokenRule(_ head: HTTPRequestHead) -> String? {
        let codings = head.headers["Transfer-Encoding"]
        if !codings.isEmpty {
            if (head.version.major, head.version.minor) < (1, 1) { return "an HTTP/1.0 request must not have a Transfer-Encoding header" }
            let named = codings.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if named != ["chunked"] { return "its Transfer-Encoding is not chunked alone (no other coding is accepted)" }
        }
        let hosts = head.headers["Host"]
        if hosts.count > 1 { return "it has more than one Host header" }
        guard let host = hosts.first else {
            return (head.version.major, head.version.minor) >= (1, 1) ? "an HTTP/1.1 request must have a Host header" : nil
        }
        return isValidHost(host) ? nil : "its Host header is not a host and port"
    }

    /// RFC 3986's `host [ ":" port ]`: an IP literal in brackets, or a registered name or IPv4
    /// address (unreserved, percent and sub-delimiter characters, no `:`), then at most one `:`
    /// and a port of at most 5 digits. Empty is allowed (a target without an authority).
    static func isValidHost(_ host: String) -> Bool {
        let bytes = Array(host.utf8)
        guard bytes.count <= maxLength else { return false }
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
        var index = 0
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1,
                  bytes[1..<close].allSatisfy({ isAlphanumeric($0) || ":.%-_~".utf8.contains($0) }) else { return false }
            index = close + 1
        } else {
            while index < bytes.count, bytes[index] != UInt8(ascii: ":") {
                guard isAlphanumeric(bytes[index]) || "-._~!$&'()*+,;=%".utf8.contains(bytes[index]) else { return false }
                index += 1
            }
        }
        guard index < bytes.count else { return true }
        let port = bytes[(index + 1)...]
        return bytes[index] == UInt8(ascii: ":") && port.count <= 5 && port.allSatisfy { (0x30...0x39).contains($0) }
    }
}

@available(*, unavailable)
extension HostHeaderCheck: Sendable {}
