import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import ProvisioningCore

/// The listener's transport: HTTP/1.1, over TLS when `server.tls` is set, with the abuse limits
/// of `server`. The defaults (in `ServerConfig`) and why:
///
/// - `idle_timeout_ms` 30 s: a client's connection pool reuses a connection within seconds while
///   it has traffic, so 30 s keeps pools warm across short pauses, while an abandoned or half-open
///   connection gives its slot back within half a minute. Behind a proxy that reuses connections
///   to the gateway, the proxy's own idle timeout should be shorter than this (AWS ALB's default
///   is 60 s: raise this above it there), or it may send a request on a connection the gateway is
///   just closing.
/// - `read_timeout_ms` 10 s: a whole request is at most `max_body_bytes` (64 KiB) plus headers,
///   which even a slow link delivers in a few seconds, and the callers are servers. A slow-drip
///   client holds a slot for 10 s at most, and the 15 s provisioning deadline starts only once a
///   request has arrived, inside Apple's ~20 s.
/// - `write_timeout_ms` 10 s: a client that takes none of its answers' bytes for that long, its
///   connection's writes stalled, is not going to; a slow reader that takes some within each
///   period keeps its connection, however long its answers take.
/// - `max_connections` 4096: far above what provisioning needs (tens of requests a second, each
///   done within the deadline, is a few hundred connections at most) and within the open-file
///   budget of a container (Docker's default is 1,048,576). A host whose soft `ulimit -n` is 1024
///   fails accepts before this cap is reached: raise the limit above it.
enum GatewayListener {
    /// The server Hummingbird runs for this config; throws a `ConfigError` naming
    /// `server.tls.certificate` or `server.tls.private_key` when a PEM file is unusable.
    /// `maxBodyBytes`: the serving configuration's `server.max_body_bytes`, which decides whether
    /// an `Expect: 100-continue` is told to go on (`HTTPEdgeHandler`).
    static func server(config: GatewayConfig, maxBodyBytes: @escaping @Sendable () -> Int) throws(ConfigError) -> HTTPServerBuilder {
        let tls = try ListenerTLS.configuration(for: config)
        let server = config.server
        let http = HTTP1Channel.Configuration(
            additionalChannelHandlers: [RequestArrivalObserver(), HTTPEdgeHandler(maxBodyBytes: maxBodyBytes)],
            idleTimeout: .milliseconds(Int64(server.idleTimeoutMS)))
        let limits = ListenerLimits(
            connections: ConnectionLimit(maximum: server.maxConnections),
            readTimeout: .milliseconds(Int64(server.readTimeoutMS)),
            writeTimeout: .milliseconds(Int64(server.writeTimeoutMS)))
        return HTTPServerBuilder { responder in
            let base = HTTP1Channel(responder: responder, configuration: http)
            if let tls {
                return LimitedChannel(base: try TLSChannel(base, tlsConfiguration: tls), limits: limits)
            }
            return LimitedChannel(base: base, limits: limits)
        }
    }
}

struct ListenerLimits: Sendable {
    let connections: ConnectionLimit
    let readTimeout: TimeAmount
    let writeTimeout: TimeAmount
}

/// Wraps Hummingbird's child channel (HTTP/1, or TLS around it) to put one handler in front of
/// everything it sets up, next to the socket: `ReadTimeoutHandler` and `WriteStallHandler` for a connection within
/// `max_connections`, `RefuseConnectionHandler` for one over it. Hummingbird's own
/// `additionalChannelHandlers` come after the HTTP decoder and never see raw bytes, and this is
/// the one place a handler can go in before TLS.
struct LimitedChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let limits: ListenerLimits

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let connections = limits.connections
        let admitted = connections.admit()
        if admitted {
            channel.closeFuture.whenComplete { _ in connections.release() }
        } else {
            logger.debug("connection refused: server.max_connections reached", metadata: ["max_connections": "\(connections.maximum)"])
        }
        let readTimeout = limits.readTimeout, writeTimeout = limits.writeTimeout
        return channel.eventLoop.makeCompletedFuture {
            if admitted {
                try channel.pipeline.syncOperations.addHandler(ReadTimeoutHandler(timeout: readTimeout), position: .first)
                try channel.pipeline.syncOperations.addHandler(WriteStallHandler(timeout: writeTimeout), position: .first)
            } else {
                try channel.pipeline.syncOperations.addHandler(RefuseConnectionHandler(), position: .first)
            }
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
            try HostHeaderCheck.install(in: channel.pipeline.syncOperations)
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
