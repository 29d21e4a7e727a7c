import Foundation
import Gateway
import GatewayTestSupport
import GatewayServer
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import ProvisioningCore
import ServiceLifecycle
import Synchronization
import Testing

/// The listener's abuse limits, against the real gateway on an ephemeral loopback port, through
/// raw TCP connections: a slow-drip client, an idle one, a flood. Timeouts are milliseconds long;
/// every wait below is an upper bound on waiting, never the thing asserted.
// Three minutes: a test's time includes its wait for one of the gateway slots
// (`GatewaySlots`), which a loaded test run's other gateways hold; one minute had been exceeded
// by that wait alone in a CI run. The limit is there to end a hang, not to time a test.
@Suite(.timeLimit(.minutes(3))) struct ListenerLimitsTests {
    static let healthz = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    static let ok = "HTTP/1.1 200"

    @Test func aSlowDripRequestIsCutOffOnceTheReadTimeoutPasses() async throws {
        let config = try LiveListener.config { $0.readTimeoutMS = 300 }
        try await LiveListener.run(config) { port in
            let head = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: one-byte-at-a-time\r\n\r\n".utf8)
            let drip = try await RawConnection.open(port: port)
            defer { drip.close() }
            var sent = 0
            for byte in head {
                guard drip.isOpen, (try? await drip.send(bytes: [byte])) != nil else { break }
                sent += 1
                if sent == 2 {
                    // Meanwhile a normal request on another connection is served.
                    let other = try await RawConnection.open(port: port)
                    defer { other.close() }
                    try await other.send(Self.healthz)
                    #expect(await other.eventually { $0.count(Self.ok) == 1 })
                }
                try await Task.sleep(for: .milliseconds(60))
            }
            #expect(await drip.eventually { !$0.isOpen }, "the slow-drip connection was not closed")
            #expect(sent < head.count, "the whole head arrived (\(sent) bytes, one every 60 ms) before the server cut the connection")
            #expect(drip.count("HTTP/1.1") == 0)
        }
    }

    /// A request whose head came and whose body did not arrive whole within the read timeout is
    /// told so: 408 `request_timeout` (problem+json, retryable, `Connection: close`), nothing of it
    /// run, and the connection closed. Likewise a chunked body that declares a chunk far past the
    /// body limit and stops, and a late request on a kept-alive connection. (Each had been closed
    /// without a word at the read timeout; a head still arriving still is, above.)
    @Test(arguments: [
        (body: "Content-Length: 100\r\n\r\n{\"issuer\":\"tmp\"", keptAlive: false),
        (body: "Transfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n{\"issuer\":\"tmp\"", keptAlive: false),
        (body: "Content-Length: 100\r\n\r\n{\"issuer\"", keptAlive: true),
    ])
    func aBodyThatDoesNotArriveInTimeIsAnswered408(body: String, keptAlive: Bool) async throws {
        let config = try LiveListener.config { $0.readTimeoutMS = 300 }
        let captured = CapturedLog()
        var logger = Logger(label: "gateway-tests") { captured.handler(label: $0) }
        logger.logLevel = .info
        try await LiveListener.run(config, logger: logger) { port in
            let connection = keptAlive ? try await Self.keptAlive(port: port) : try await RawConnection.open(port: port)
            defer { connection.close() }
            let answered = connection.count("HTTP/1.1")
            try await connection.send("PUT /v1/cards/card_slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(GatewayHarness.demoKey)\r\n"
                + "Content-Type: application/json\r\n" + body)
            #expect(await connection.eventually { !$0.isOpen }, "the connection was not closed")
            let text = connection.text
            let answer = text.range(of: "HTTP/1.1", options: .backwards).map { String(text[$0.lowerBound...]) } ?? text
            #expect(connection.count("HTTP/1.1") == answered + 1, "\(connection.text)")
            #expect(answer.hasPrefix("HTTP/1.1 408 "), "\(answer)")
            #expect(answer.lowercased().contains("connection: close"), "\(answer)")
            #expect(answer.lowercased().contains("content-type: application/problem+json"), "\(answer)")
            #expect(answer.contains(#""code":"request_timeout""#) && answer.contains(#""retryable":true"#), "\(answer)")
            // Nothing of it ran: no card was registered.
            let check = try await RawConnection.open(port: port)
            defer { check.close() }
            try await check.send("GET /v1/cards/card_slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(GatewayHarness.demoKey)\r\n\r\n")
            #expect(await check.eventually { $0.count("HTTP/1.1 404") == 1 }, "\(check.text)")
        }
        // The request's own line says what the client was told, not a body cut short (400).
        let line = captured.lines.first { $0.contains(" gateway-tests: request ") && $0.contains("method=PUT") }
        #expect(line?.contains("status=408") == true && line?.contains("code=request_timeout") == true, "\(captured.text)")
    }

    /// A connection on which one request was answered (kept alive); the caller closes it.
    static func keptAlive(port: Int) async throws -> RawConnection {
        let connection = try await RawConnection.open(port: port)
        try await connection.send(healthz)
        #expect(await connection.eventually { $0.count(ok) == 1 })
        return connection
    }

    @Test func aKeepAliveConnectionIdleBetweenRequestsOutlivesTheReadTimeout() async throws {
        let config = try LiveListener.config {
            $0.readTimeoutMS = 300
            $0.idleTimeoutMS = 10_000
        }
        try await LiveListener.run(config) { port in
            let connection = try await Self.keptAlive(port: port)
            defer { connection.close() }
            // Three read timeouts of silence between requests: the read timeout counts from a
            // request's first byte, so it is not running now.
            try await Task.sleep(for: .milliseconds(900))
            #expect(connection.isOpen, "a keep-alive connection was closed between requests")
            try await connection.send(Self.healthz)
            #expect(await connection.eventually { $0.count(Self.ok) == 2 }, "the second request on the connection was not answered")
        }
    }

    /// The read timeout is each request's own, on a kept-alive connection too: a request that
    /// starts late in the span the request before it had still has its whole read timeout (a
    /// timer left over from that request must not cut it), and a slow drip after a first request
    /// is still cut off.
    @Test func aLaterRequestOnTheConnectionHasItsOwnWholeReadTimeout() async throws {
        let config = try LiveListener.config {
            $0.readTimeoutMS = 1_500
            $0.idleTimeoutMS = 10_000
        }
        try await LiveListener.run(config) { port in
            let connection = try await Self.keptAlive(port: port)
            defer { connection.close() }
            // The first request's read timeout would end 1.5 s after its first byte. The second
            // request starts 1 s after the first and takes 0.6 s to arrive (more on a loaded
            // machine, which only moves it further past the first's span): past that span, well
            // within its own.
            try await Task.sleep(for: .milliseconds(1_000))
            let head = Array(Self.healthz.utf8)
            let chunk = (head.count + 5) / 6
            for start in stride(from: 0, to: head.count, by: chunk) {
                if start > 0 { try await Task.sleep(for: .milliseconds(120)) }
                try await connection.send(bytes: Array(head[start..<min(start + chunk, head.count)]))
            }
            #expect(await connection.eventually { $0.count(Self.ok) == 2 }, "a request within its own read timeout was not answered")
            #expect(connection.isOpen, "a request within its own read timeout was cut off by the timer of the request before")

            // Then a slow drip on the same connection, one byte every 60 ms (the whole head would
            // take 6 s), is still cut off.
            var sent = 0
            let drip = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: one-byte-at-a-time-after-a-first-request\r\n\r\n".utf8)
            for byte in drip {
                guard connection.isOpen, (try? await connection.send(bytes: [byte])) != nil else { break }
                sent += 1
                try await Task.sleep(for: .milliseconds(60))
            }
            #expect(await connection.eventually { !$0.isOpen }, "a slow drip after a first request was not cut off")
            #expect(sent < drip.count, "the whole dripped head arrived (\(sent) bytes, one every 60 ms) before the server cut the connection")
            #expect(connection.count("HTTP/1.1") == 2)
        }
    }

    /// A client that pipelines requests and reads none of the answers stalls its connection's
    /// writes; once they have stayed stalled for `write_timeout_ms` the connection is closed and
    /// its slot freed (with one slot, the next client is served). Without it the slot was held
    /// for as long as the client liked: neither the idle nor the read timeout runs while a
    /// request's answer is being written.
    @Test func aClientThatReadsNoAnswersIsCutOffOnceTheWriteTimeoutPasses() async throws {
        let config = try LiveListener.config {
            $0.maxConnections = 1
            $0.writeTimeoutMS = 300
            $0.idleTimeoutMS = 60_000
            $0.readTimeoutMS = 60_000
        }
        try await LiveListener.run(config) { port in
            let stalled = try await RawConnection.open(port: port, reading: false)
            defer { stalled.close() }
            // 120 KB answers, 400 of them: far more than the kernel's buffers on both sides hold.
            let spec = "GET /openapi.yaml HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            try await stalled.send(String(repeating: spec, count: 400))
            // The slot is the stalled connection's until the write timeout frees it; then another
            // client is served. Asked every 100 ms, each attempt on a fresh connection.
            let served = await RawConnection.eventually(upTo: .seconds(10)) {
                guard let other = try? await RawConnection.open(port: port) else { return false }
                defer { other.close() }
                guard (try? await other.send(Self.healthz)) != nil else { return false }
                return await other.eventually(upTo: .milliseconds(100)) { $0.count(Self.ok) == 1 }
            }
            #expect(served, "the connection that read no answers still held the only slot")
        }
    }

    @Test func idleConnectionsAreClosed() async throws {
        // Long enough that opening a connection and sending on it never races the timeout on a
        // loaded machine; the waits below are bounds, not measurements.
        let config = try LiveListener.config { $0.idleTimeoutMS = 1_000 }
        try await LiveListener.run(config) { port in
            // Nothing ever sent.
            let silent = try await RawConnection.open(port: port)
            defer { silent.close() }
            // One request answered, then silence.
            let served = try await RawConnection.open(port: port)
            defer { served.close() }
            try await served.send(Self.healthz)
            #expect(await served.eventually { $0.count(Self.ok) == 1 })

            #expect(await silent.eventually(upTo: .seconds(10)) { !$0.isOpen }, "a connection that never sent a byte stayed open")
            #expect(await served.eventually(upTo: .seconds(10)) { !$0.isOpen }, "a connection idle after its response stayed open")
        }
    }

    @Test func connectionsOverTheCapAreClosedAtOnceAndServedAgainOnceOthersClose() async throws {
        let config = try LiveListener.config { $0.maxConnections = 8 }
        try await LiveListener.run(config) { port in
            // Eight keep-alive connections, each known to the server (it answered on it).
            var held: [RawConnection] = []
            defer { held.forEach { $0.close() } }
            for _ in 0..<8 {
                let connection = try await RawConnection.open(port: port)
                held.append(connection)
                try await connection.send(Self.healthz)
                #expect(await connection.eventually { $0.count(Self.ok) == 1 })
            }

            var refused: [RawConnection] = []
            defer { refused.forEach { $0.close() } }
            for _ in 0..<3 {
                let connection = try await RawConnection.open(port: port)
                refused.append(connection)
                try? await connection.send(Self.healthz)
            }
            for connection in refused {
                #expect(await connection.eventually { !$0.isOpen }, "a connection over max_connections was kept")
                #expect(connection.count("HTTP/1.1") == 0, "a connection over max_connections was answered")
            }
            let stillOpen = held.filter(\.isOpen).count
            #expect(stillOpen == 8, "refusing newcomers closed connections within the cap")

            for connection in held.prefix(3) { connection.close() }
            // The server frees a slot when it sees the close; a newcomer may race ahead of that
            // and be refused, so each try is a fresh connection.
            let servedAgain = await RawConnection.eventually {
                guard let connection = try? await RawConnection.open(port: port) else { return false }
                defer { connection.close() }
                try? await connection.send(Self.healthz)
                return await connection.eventually(upTo: .milliseconds(500)) { $0.count(Self.ok) == 1 }
            }
            #expect(servedAgain, "/healthz was not served after connections within the cap closed")
        }
    }
}

/// Starts the production gateway (`buildGateway`, its service group) on an ephemeral loopback port
/// with no issuers (these tests only need `/healthz`), and stops it gracefully when `body` returns.
enum LiveListener {
    /// The sandbox config with `edit` applied to `server`.
    static func config(_ edit: (inout ServerConfig) -> Void = { _ in }) throws -> GatewayConfig {
        var config = try GatewayHarness.sandboxConfig()
        edit(&config.server)
        return config
    }

    /// The composition root with a fresh store and no issuers.
    static func build(_ config: GatewayConfig, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in })
        async throws -> GatewayProcess
    {
        var config = config
        config.issuers = [:]
        return try buildGateway(
            config: config, environment: [:], logger: GatewayHarness.logger, store: try await GatewayHarness.temporaryStore(),
            onServerRunning: onServerRunning)
    }

    static func run(_ config: GatewayConfig, logger: Logger = GatewayHarness.logger, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
        var config = config
        config.issuers = [:]
        let store = try await GatewayHarness.temporaryStore()
        try await GatewayHarness.serve({ onServerRunning in
            try buildGateway(config: config, environment: [:], logger: logger, store: store, onServerRunning: onServerRunning)
        }, body)
    }
}

/// A plain TCP connection to the listener: bytes out, bytes collected in, no HTTP client in the
/// way (one would reconnect, retry, or finish a request the test means to leave unfinished).
final class RawConnection: Sendable {
    let channel: any Channel
    let received: Received

    private init(channel: any Channel, received: Received) {
        self.channel = channel
        self.received = received
    }

    /// `reading: false`: the connection never reads what the server sends (a client that stalls
    /// the server's writes).
    /// `receiveBufferBytes`: each read takes at most this many bytes.
    /// `tls`: the bytes go through TLS made with this context (the request is still written by hand).
    static func open(port: Int, reading: Bool = true, receiveBufferBytes: Int? = nil, tls: NIOSSLContext? = nil) async throws -> RawConnection {
        let received = Received()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.autoRead, value: reading)
        if let receiveBufferBytes {
            bootstrap = bootstrap.channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: receiveBufferBytes))
                .channelOption(.maxMessagesPerRead, value: 1)
        }
        let channel = try await bootstrap
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: nil)) }
                    try channel.pipeline.syncOperations.addHandler(Collector(received))
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        return RawConnection(channel: channel, received: received)
    }

    /// False once either side has closed it (the server's close reaches here as EOF or a reset).
    var isOpen: Bool { channel.isActive }

    var text: String { String(decoding: received.bytes.withLock { $0 }, as: UTF8.self) }

    /// How often `needle` occurs in everything received so far.
    func count(_ needle: String) -> Int { text.components(separatedBy: needle).count - 1 }

    func send(_ text: String) async throws { try await send(bytes: Array(text.utf8)) }

    func send(bytes: [UInt8]) async throws { try await channel.writeAndFlush(ByteBuffer(bytes: bytes)) }

    func close() { channel.close(promise: nil) }

    /// Whether `condition` holds within `limit`, checked every 10 ms.
    func eventually(upTo limit: Duration = .seconds(10), _ condition: @Sendable (RawConnection) -> Bool) async -> Bool {
        await Self.eventually(upTo: limit) { condition(self) }
    }

    /// Whether `condition` holds within `limit`: a bound on waiting, not a measurement.
    static func eventually(upTo limit: Duration = .seconds(10), _ condition: () async -> Bool) async -> Bool {
        await GatewayTestSupport.eventually(upTo: limit, condition)
    }

    final class Received: Sendable {
        let bytes = Mutex<[UInt8]>([])
    }

    final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let received: Received
        init(_ received: Received) { self.received = received }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            received.bytes.withLock { $0.append(contentsOf: buffer.readableBytesView) }
        }
        /// A reset from the server is a close like any other here.
        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
