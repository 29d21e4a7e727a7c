// The floor under the gateway's CPU per provisioning (issue #14): the same forwarding the
// benchmark asks of the gateway (a POST of the sandbox device's body in, one POST to the
// upstream, its JSON answer back) with nothing else: no contract check, no JSON, no store, no
// audit trail, no tracing, no metrics. `scripts/bench-gateway.sh` runs it beside nginx and the
// gateway in one run, so the README can say how much of a provisioning's CPU is the stack's own.
//
//   proxy-floor nio <port> <upstream-port>          SwiftNIO alone: an HTTP/1.1 server whose every
//       connection forwards over a connection of its own to the upstream, on the same event loop
//       (no task, no thread hand-off): the least a Swift proxy on NIO can cost.
//   proxy-floor hummingbird <port> <upstream-port>  A Hummingbird 2 route (async handler, the
//       body collected) calling the upstream with AsyncHTTPClient, as the gateway's connectors did
//       until they moved to `UpstreamHTTP` on SwiftNIO.
//   proxy-floor hummingbird-upstream <port> <upstream-port>  The gateway's stack: the same route
//       calling the upstream through the connectors' own `UpstreamHTTP` (Issuers), with a
//       provisioning context and nothing else of the gateway's.
//
// Both listen on 127.0.0.1 and send to http://127.0.0.1:<upstream-port>/v0/x. A benchmark tool,
// not a product: no configuration, no TLS, no limits beyond a 1 MiB body.
import AsyncHTTPClient
import Foundation
import Hummingbird
import Issuers
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import ProvisioningCore

let maxBody = 1 << 20

/// One server connection's forwarding: the request collected, sent over this connection's own
/// upstream connection (made on first use, on the same event loop), the answer written back.
/// Everything runs on the server channel's event loop, so no state is shared across threads. One
/// request at a time per connection, as wrk sends them: a pipelined request is refused (closed).
/// An upstream connection that closes is made again for the next request, and a request it was
/// serving is answered 502, so a caller never waits for an answer that cannot come.
final class ForwardingHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let upstream: SocketAddress
    private var context: ChannelHandlerContext?
    private var upstreamChannel: Channel?
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    private var keepAlive = true
    /// A request was sent (or is waiting for its upstream connection) and is not answered yet.
    private var inFlight = false

    init(upstream: SocketAddress) { self.upstream = upstream }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        upstreamChannel?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            keepAlive = head.isKeepAlive
            body.clear()
        case .body(var chunk):
            guard body.readableBytes + chunk.readableBytes <= maxBody else { context.close(promise: nil); return }
            body.writeBuffer(&chunk)
        case .end:
            guard !inFlight else { context.close(promise: nil); return }
            inFlight = true
            forward(context: context)
        }
    }

    /// The upstream connection closed: the next request makes another; one in flight gets a 502.
    func upstreamClosed() {
        upstreamChannel = nil
        if inFlight { answer(status: .badGateway, body: ByteBuffer()) }
    }

    private func forward(context: ChannelHandlerContext) {
        if let upstreamChannel {
            send(on: upstreamChannel)
            return
        }
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(AnswerHandler(owner: bound.value))
                }
            }
            .connect(to: upstream)
            .assumeIsolated()
            .whenComplete { result in
                let handler = bound.value
                switch result {
                case .success(let channel):
                    // The caller went away while this connection was being made.
                    guard handler.context != nil else { channel.close(promise: nil); return }
                    handler.upstreamChannel = channel
                    handler.send(on: channel)
                case .failure:
                    handler.answer(status: .badGateway, body: ByteBuffer())
                }
            }
    }

    private func send(on channel: Channel) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "127.0.0.1")
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Accept", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        let operations = channel.pipeline.syncOperations
        operations.write(NIOAny(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v0/x", headers: headers))),
                         promise: nil)
        operations.write(NIOAny(HTTPClientRequestPart.body(.byteBuffer(body))), promise: nil)
        operations.writeAndFlush(NIOAny(HTTPClientRequestPart.end(nil)), promise: nil)
    }

    /// The upstream's whole answer, written back to the caller.
    func answer(status: HTTPResponseStatus, body: ByteBuffer) {
        guard let context, inFlight else { return }
        inFlight = false
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let keepAlive = self.keepAlive
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}

/// The upstream connection's answers, handed to the server connection that owns it (same loop).
final class AnswerHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let owner: ForwardingHandler
    private var status: HTTPResponseStatus = .ok
    private var body = ByteBuffer()

    init(owner: ForwardingHandler) { self.owner = owner }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = head.status
            body.clear()
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            owner.answer(status: status, body: body)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        owner.upstreamClosed()
        context.fireChannelInactive()
    }
}

func runNIO(port: Int, upstreamPort: Int) async throws {
    let upstream = try SocketAddress(ipAddress: "127.0.0.1", port: upstreamPort)
    let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.backlog, value: 256)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                try channel.pipeline.syncOperations.addHandler(ForwardingHandler(upstream: upstream))
            }
        }
        .bind(host: "127.0.0.1", port: port)
        .get()
    print("proxy-floor nio listening on 127.0.0.1:\(port)")
    try await server.closeFuture.get()
}

func runHummingbird(port: Int, upstreamPort: Int) async throws {
    var logger = Logger(label: "proxy-floor")
    logger.logLevel = .warning
    let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup)
    let url = "http://127.0.0.1:\(upstreamPort)/v0/x"
    let router = Router()
    router.post("/v1/cards/:card_id/wallet-provisioning/apple-pay") { request, _ -> Response in
        let body = try await request.body.collect(upTo: maxBody)
        var forward = HTTPClientRequest(url: url)
        forward.method = .POST
        forward.headers.add(name: "Content-Type", value: "application/json")
        forward.headers.add(name: "Accept", value: "application/json")
        forward.body = .bytes(body)
        let answer = try await client.execute(forward, timeout: .seconds(10))
        let bytes = try await answer.body.collect(upTo: maxBody)
        return Response(status: .init(code: Int(answer.status.code)), headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: bytes))
    }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
    print("proxy-floor hummingbird listening on 127.0.0.1:\(port)")
    try await app.runService()
}

func runHummingbirdUpstream(port: Int, upstreamPort: Int) async throws {
    var logger = Logger(label: "proxy-floor")
    logger.logLevel = .warning
    let http = UpstreamHTTP(issuer: "floor", timeouts: TimeoutConfig(), logger: logger)
    let base = UpstreamBase(URL(string: "http://127.0.0.1:\(upstreamPort)/v0")!)
    let router = Router()
    router.post("/v1/cards/:card_id/wallet-provisioning/apple-pay") { request, _ -> Response in
        let body = try await request.body.collect(upTo: maxBody)
        let clock = GatewayClock.continuous
        let context = ProvisioningContext(provisioningID: "prv_floor", deadline: clock.now.advanced(by: .seconds(10)), clock: clock)
        let answer = try await http.send(method: .POST, base: base, segments: ["x"], headers: [], body: Data(buffer: body), context: context)
        return Response(status: .init(code: answer.status), headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
    print("proxy-floor hummingbird-upstream listening on 127.0.0.1:\(port)")
    try await app.runService()
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let port = Int(arguments[2]), let upstreamPort = Int(arguments[3]),
      ["nio", "hummingbird", "hummingbird-upstream"].contains(arguments[1]) else {
    print("usage: proxy-floor nio|hummingbird|hummingbird-upstream <port> <upstream-port>")
    exit(2)
}
switch arguments[1] {
case "nio": try await runNIO(port: port, upstreamPort: upstreamPort)
case "hummingbird": try await runHummingbird(port: port, upstreamPort: upstreamPort)
default: try await runHummingbirdUpstream(port: port, upstreamPort: upstreamPort)
}
