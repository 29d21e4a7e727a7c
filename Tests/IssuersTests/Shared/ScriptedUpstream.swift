import Foundation
import GatewayTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// A loopback HTTP/1.1 server on SwiftNIO whose every answer a test scripts (by the request's
/// path when `byPath` names it, else in order; a plain 200 once the script runs out), and which counts the connections it accepted, how many were open
/// at once, and the requests it read: what a test of the upstream client's connection handling
/// needs to see from the issuer's side.
final class ScriptedUpstream: Sendable {
    enum Reply: Sendable {
        /// An answer; `close` sends `Connection: close` and closes after it; `closeAfter` sends a
        /// keep-alive answer and then closes anyway, as an issuer's idle timeout does.
        case answer(status: HTTPResponseStatus = .ok, body: String = #"{"ok":true}"#, close: Bool = false,
                    closeAfter: Bool = false, delay: TimeAmount = .zero)
        /// Reads the request and closes the connection without a byte of answer.
        case closeWithoutAnswer
        /// Reads the request and never answers.
        case hang
        /// Writes these bytes as the answer, whatever they are, and closes.
        case raw(String)
    }

    struct Seen: Sendable {
        let connection: Int
        let head: HTTPRequestHead
        let body: String
    }

    struct Counts: Sendable {
        var accepted = 0
        var open = 0
        var mostOpen = 0
        var seen: [Seen] = []
        var script: [Reply] = []
        var byPath: [String: Reply] = [:]
    }

    let counts: NIOLockedValueBox<Counts>
    private let channel: any Channel
    let port: Int
    let https: Bool

    var url: URL { URL(string: "\(https ? "https" : "http")://127.0.0.1:\(port)")! }
    var accepted: Int { counts.withLockedValue(\.accepted) }
    var open: Int { counts.withLockedValue(\.open) }
    var mostOpen: Int { counts.withLockedValue(\.mostOpen) }
    var seen: [Seen] { counts.withLockedValue(\.seen) }

    private init(channel: any Channel, counts: NIOLockedValueBox<Counts>, https: Bool) {
        self.channel = channel
        self.counts = counts
        self.https = https
        self.port = channel.localAddress?.port ?? 0
    }

    /// `tls`: serve HTTPS with it (the connection counted from the TCP accept, so a count of 1
    /// means one handshake).
    static func start(_ script: [Reply] = [], byPath: [String: Reply] = [:], tls: TLSConfiguration? = nil) async throws -> ScriptedUpstream {
        let counts = NIOLockedValueBox(Counts(script: script, byPath: byPath))
        let sslContext = try tls.map { try NIOSSLContext(configuration: $0) }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let number = counts.withLockedValue { counts in
                    counts.accepted += 1
                    counts.open += 1
                    counts.mostOpen = max(counts.mostOpen, counts.open)
                    return counts.accepted
                }
                channel.closeFuture.whenComplete { _ in counts.withLockedValue { $0.open -= 1 } }
                return channel.eventLoop.makeCompletedFuture {
                    if let sslContext { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext)) }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(connection: number, counts: counts))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return ScriptedUpstream(channel: channel, counts: counts, https: tls != nil)
    }

    func stop() async {
        try? await channel.close()
    }

    /// Runs `body` with a started server and stops it afterwards, whatever happens.
    static func with<T: Sendable>(
        _ script: [Reply] = [], byPath: [String: Reply] = [:], tls: TLSConfiguration? = nil,
        _ body: (ScriptedUpstream) async throws -> T
    ) async throws -> T {
        let server = try await start(script, byPath: byPath, tls: tls)
        return try await withCleanup({ try await body(server) }, cleanup: { await server.stop() })
    }

    private final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let connection: Int
        let counts: NIOLockedValueBox<Counts>
        var head: HTTPRequestHead?
        var body = ""

        init(connection: Int, counts: NIOLockedValueBox<Counts>) {
            self.connection = connection
            self.counts = counts
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = ""
            case .body(let buffer):
                body += String(buffer: buffer)
            case .end:
                guard let head else { return }
                let reply = counts.withLockedValue { counts -> Reply in
                    counts.seen.append(Seen(connection: connection, head: head, body: body))
                    if let reply = counts.byPath[head.uri] { return reply }
                    return counts.script.isEmpty ? .answer() : counts.script.removeFirst()
                }
                play(reply, context: context)
            }
        }

        private func play(_ reply: Reply, context: ChannelHandlerContext) {
            switch reply {
            case .hang:
                break
            case .closeWithoutAnswer:
                context.close(promise: nil)
            case .raw(let text):
                // Written below the response encoder, so the bytes go out as they are.
                guard let encoder = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self) else {
                    context.close(promise: nil)
                    return
                }
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                encoder.writeAndFlush(NIOAny(ByteBuffer(string: text))).whenComplete { _ in bound.value.close(promise: nil) }
            case .answer(let status, let text, let close, let closeAfter, let delay):
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                let respond = { [self] in
                    let context = bound.value
                    var headers = HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", "\(text.utf8.count)")])
                    if close { headers.add(name: "Connection", value: "close") }
                    context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
                    context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
                    let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
                    if close || closeAfter { written.whenComplete { _ in bound.value.close(promise: nil) } }
                }
                if delay == .zero {
                    respond()
                } else {
                    context.eventLoop.assumeIsolated().scheduleTask(in: delay, respond)
                }
            }
        }
    }
}
