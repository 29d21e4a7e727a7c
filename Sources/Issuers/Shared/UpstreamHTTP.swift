import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSSL
import ProvisioningCore

/// One issuer's HTTP client: pooled HTTP/1.1 connections on SwiftNIO (`UpstreamConnectionPool`),
/// the issuer's connect and per-try timeouts, and every transport failure turned into a unified
/// `GatewayError` that says whether the request may have been sent. Never logs a body.
public final class UpstreamHTTP: Sendable {
    public struct Response: Sendable {
        public let status: Int
        public let headers: HTTPHeaders
        public let body: Data
        /// The values of the headers the request carried (the issuer's credentials among them,
        /// and a scheme's token alone: `Bearer <token>`, Basic's user and password): an error
        /// code that repeats one is never shown (`UpstreamStatus.shownCode`).
        public var withheld: [String] = []

        public init(status: Int, headers: HTTPHeaders, body: Data, withheld: [String] = []) {
            self.status = status
            self.headers = headers
            self.body = body
            self.withheld = withheld
        }
    }

    /// What of `headers` an answer must never repeat: each value, and the token of a scheme.
    static func withheld(_ headers: [(String, String)]) -> [String] {
        var values: [String] = []
        for (_, value) in headers {
            values.append(value)
            let parts = value.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            values.append(String(parts[1]))
            if parts[0].lowercased() == "basic", let decoded = Data(base64Encoded: String(parts[1])).map({ String(decoding: $0, as: UTF8.self) }) {
                values += decoded.split(separator: ":", maxSplits: 1).map(String.init)
            }
        }
        return values.filter { $0.utf8.count >= 6 }
    }

    /// Larger answers are not payloads a phone could use.
    public static let maxResponseBytes = 1 << 20

    let issuer: IssuerID
    /// The connect and per-try timeouts it was built with (`issuers.<name>.timeouts`).
    public let timeouts: TimeoutConfig
    /// The pool's bound per host and idle timeout (`issuers.<name>.connections`).
    public let poolConfig: ConnectionPoolConfig
    private let pool: UpstreamConnectionPool
    private let logger: Logger

    /// `tls`: the issuer's private CA and/or client certificate; the system's roots and no client
    /// certificate when nil. No redirect is followed and a refused connection is not tried again
    /// here: the gateway's own retry policy, circuit breakers and endpoint failover decide what
    /// happens next. At most `pool.maxPerHost` connections per host (a call beyond waits for one,
    /// within its timeout); an idle one older than `pool.idleTimeoutMS` on `clock` is closed
    /// instead of used.
    public init(
        issuer: IssuerID, timeouts: TimeoutConfig, tls: UpstreamTLS? = nil, logger: Logger,
        pool: ConnectionPoolConfig = ConnectionPoolConfig(), clock: GatewayClock = .continuous
    ) {
        self.issuer = issuer
        self.timeouts = timeouts
        self.poolConfig = pool
        self.pool = UpstreamConnectionPool(
            group: MultiThreadedEventLoopGroup.singleton, connectTimeout: .milliseconds(Int64(timeouts.connectMS)),
            tls: tls?.configuration, maxConnectionsPerHost: pool.maxPerHost, idleTimeout: .milliseconds(pool.idleTimeoutMS), clock: clock)
        self.logger = logger
    }

    /// What the pool holds now: `open` counts connections being made, in use and idle; a
    /// connection the issuer closed leaves the counts once its event loop has read the close.
    public struct ConnectionCounts: Sendable, Equatable {
        public var open = 0
        public var idle = 0
        public var waiting = 0

        public init(open: Int = 0, idle: Int = 0, waiting: Int = 0) {
            self.open = open
            self.idle = idle
            self.waiting = waiting
        }
    }

    public var connections: ConnectionCounts { pool.counts }
    /// Connections counted against the clients that hold them (`UpstreamConnectionPool.leasesHeld`).
    var leasesHeld: Int { pool.leasesHeld }

    public func shutdown() async throws {
        await pool.shutdown()
    }

    /// Sends one request; the time it may take is the issuer's per-try timeout cut to the deadline
    /// (read on the context's clock). Its log lines carry the request's metadata; the context's
    /// attempt trace adds its `traceparent`/`tracestate` headers and learns the answer's status.
    /// No span of its own (it would record the full URL, which may name an issuer's card
    /// reference): the resilience runtime's attempt span is the client span.
    /// The request goes to `segments` below `base` (each percent-encoded), with `query` if any.
    public func send(
        method: HTTPMethod, base: UpstreamBase, segments: [String], query: [(String, String)] = [], headers: [(String, String)],
        body: Data?, context: ProvisioningContext
    ) async throws(GatewayError) -> Response {
        try await send(method: method, base: base, requestTarget: base.requestTarget(segments, query: query), headers: headers, body: body,
                       context: context)
    }

    /// The request goes to `url` as it is written (tools and tests; connectors keep an `UpstreamBase`).
    public func send(
        method: HTTPMethod, url: URL, headers: [(String, String)], body: Data?, context: ProvisioningContext
    ) async throws(GatewayError) -> Response {
        return try await send(method: method, base: UpstreamBase(url), requestTarget: Self.target(url)?.1 ?? "/", headers: headers, body: body,
                              context: context)
    }

    private func send(
        method: HTTPMethod, base: UpstreamBase, requestTarget: String, headers: [(String, String)], body: Data?, context: ProvisioningContext
    ) async throws(GatewayError) -> Response {
        let remaining = context.remaining
        guard remaining > .zero else {
            throw GatewayError(.deadlineExceeded, "the deadline passed before \(issuer) could be called")
        }
        let timeout = min(remaining, .milliseconds(timeouts.requestMS))

        let clock = context.clock
        let started = clock.now
        do {
            guard let target = base.target else { throw UpstreamTransportError.unsupportedURL }
            var head = HTTPRequestHead(version: .http1_1, method: method, uri: requestTarget)
            head.headers.reserveCapacity(headers.count + 6)
            head.headers.add(name: "Host", value: base.hostHeader)
            for (name, value) in headers { head.headers.add(name: name, value: value) }
            // On every attempt: the caller's trace continues at the upstream (W3C trace context).
            for (name, value) in context.attemptTrace?.headers ?? [] { head.headers.replaceOrAdd(name: name, value: value) }
            var buffer: ByteBuffer?
            if let body {
                head.headers.add(name: "Content-Type", value: "application/json")
                head.headers.add(name: "Content-Length", value: String(body.count))
                buffer = ByteBuffer(bytes: body)
            } else if method == .POST || method == .PUT || method == .PATCH {
                head.headers.add(name: "Content-Length", value: "0")
            }
            head.headers.add(name: "Accept", value: "application/json")

            var response = try await pool.execute(target, head: head, body: buffer,
                                                  timeout: .nanoseconds(Int64(timeout.wholeNanoseconds)), party: context.party)
            // Only a refusal's code is ever shown, so only a refusal needs what it must not repeat.
            if !(200..<300).contains(response.status) { response.withheld = Self.withheld(headers) }
            context.attemptTrace?.answered(status: response.status)
            logger.info("upstream answered", metadata: Self.metadata(context, [
                "issuer": "\(issuer)", "status": "\(response.status)",
                "latency_ms": "\(started.duration(to: clock.now).wholeMilliseconds)",
            ]))
            return response
        } catch {
            let mapped = Self.map(Task.isCancelled ? CancellationError() : error, issuer: issuer, timedOutAfter: timeout)
            logger.warning("upstream call failed", metadata: Self.metadata(context, [
                "issuer": "\(issuer)", "code": "\(mapped.code.rawValue)",
                "latency_ms": "\(started.duration(to: clock.now).wholeMilliseconds)",
            ]))
            throw mapped
        }
    }

    /// Where to connect and what to ask for: `http` or `https`, a host, the port (80 or 443 when
    /// none is given), and the path and query as they are written (percent-encoded).
    static func target(_ url: URL) -> (UpstreamConnectionPool.Target, String)? {
        let scheme = url.scheme?.lowercased()
        guard scheme == "http" || scheme == "https", var host = url.host(percentEncoded: false), !host.isEmpty else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let https = scheme == "https"
        var path = url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        if let query = url.query(percentEncoded: true) { path += "?" + query }
        return (.init(https: https, host: host, port: url.port ?? (https ? 443 : 80)), path)
    }

    static func hostHeader(_ target: UpstreamConnectionPool.Target) -> String {
        // Bytes, not `String.contains(_:)`: Foundation's substring search (through CoreFoundation
        // on Linux) cost more than the rest of the request head.
        let host = target.host.utf8.contains(UInt8(ascii: ":")) ? "[\(target.host)]" : target.host
        return target.port == (target.https ? 443 : 80) ? host : "\(host):\(target.port)"
    }

    /// A line's metadata: the request's, its provisioning id, then the line's own. Built only for
    /// a line the log level lets through (`Logger`'s metadata argument is an autoclosure).
    private static func metadata(_ context: ProvisioningContext, _ own: Logger.Metadata) -> Logger.Metadata {
        var metadata = Logger.Metadata()
        for (key, value) in context.logMetadata { metadata[key] = "\(value)" }
        metadata["provisioning_id"] = "\(context.provisioningID)"
        metadata.merge(own) { _, line in line }
        return metadata
    }

    static func map(_ error: any Error, issuer: IssuerID, timedOutAfter timeout: Duration) -> GatewayError {
        // The caller went away: nothing to say about the upstream (no condition, so no breaker
        // counts it and no retry follows).
        if error is CancellationError {
            return GatewayError(.upstreamUnavailable, "the request to \(issuer) was cancelled")
        }
        guard let error = error as? UpstreamTransportError else {
            return afterSending(error, issuer: issuer)
        }
        switch error {
        case .connect(let cause):
            return connectFailure(cause, issuer: issuer)
        case .waitedTooLong:
            // Every connection to the host stayed busy until this try's time was up: the request
            // never left, which is what a connection never made means to the retry table and to an
            // Idempotency-Key (released, not kept: nothing can have reached the issuer).
            // It is the gateway's own pool's saturation, not the endpoint's: no breaker counts it.
            return GatewayError(
                .upstreamUnavailable,
                "no connection to \(issuer) came free within \(timeout.wholeMilliseconds) ms (all of issuers.\(issuer).connections.max_per_host were busy); nothing was sent",
                condition: .connectFailed).waitedForAConnection()
        case .timedOut:
            return GatewayError(.upstreamTimeout, "\(issuer) did not answer within \(timeout.wholeMilliseconds) ms", condition: .timedOut)
        case .timedOutAfterQueueing:
            // Sent, perhaps: the retry table and an Idempotency-Key read it as any timeout. But the
            // issuer had less than half the try, so no breaker counts it.
            return GatewayError(
                .upstreamTimeout,
                "\(issuer) did not answer within \(timeout.wholeMilliseconds) ms, most of which went waiting for a connection "
                    + "(all of issuers.\(issuer).connections.max_per_host were busy)",
                condition: .timedOut).waitedForAConnection()
        case .closedBeforeAnswer:
            return GatewayError(.upstreamUnavailable, "\(issuer) closed the connection", condition: .connectionReset)
        case .answerTooLarge:
            return GatewayError(.upstreamProtocolError, "\(issuer) answered with an oversized body", condition: .malformed)
        case .switchedProtocols:
            return GatewayError(.upstreamProtocolError, "\(issuer) answered 101 Switching Protocols, which no issuer's API does",
                                condition: .malformed)
        case .unsupportedURL:
            return GatewayError(.upstreamUnavailable, "\(issuer)'s URL is not http or https with a host", condition: .connectFailed)
        case .handshakeTooLong:
            return connectFailure(error, issuer: issuer)
        case .shutDown:
            return GatewayError(.upstreamUnavailable, "the gateway is shutting down its connections to \(issuer)")
        }
    }

    /// Nothing was sent: connection refused, no route, unknown host, the connect timeout, or a
    /// failed TLS handshake (unknown CA, a refused certificate), whose reason ops need and which
    /// names no secret.
    private static func connectFailure(_ cause: any Error, issuer: IssuerID) -> GatewayError {
        if let failure = tlsFailure(cause, issuer: issuer, condition: .connectFailed) { return failure }
        switch cause {
        case ChannelError.connectTimeout, UpstreamTransportError.waitedTooLong:
            return GatewayError(.upstreamUnavailable, "could not connect to \(issuer) in time", condition: .connectFailed)
        case UpstreamTransportError.handshakeTooLong:
            return GatewayError(.upstreamUnavailable, "the TLS handshake with \(issuer) did not finish in time; nothing was sent",
                                condition: .connectFailed)
        default:
            return GatewayError(.upstreamUnavailable, "could not connect to \(issuer)", condition: .connectFailed)
        }
    }

    /// A TLS failure, with its reason (which ops need and which names no secret), or nil.
    private static func tlsFailure(_ error: any Error, issuer: IssuerID, condition: UpstreamCondition) -> GatewayError? {
        guard let reason = tlsReason(error) else { return nil }
        return GatewayError(.upstreamUnavailable, "TLS with \(issuer) failed (\(reason))", condition: condition)
    }

    /// What a TLS error says, in words safe to show a caller: the error's case and BoringSSL's
    /// reason codes (`CERTIFICATE_VERIFY_FAILED`), never its whole printout, which carried the
    /// library's source paths and internals to every tenant (the upstream audit). A certificate
    /// for another host is said as one: it had been "could not connect".
    static func tlsReason(_ error: any Error) -> String? {
        if let error = error as? NIOSSLExtraError {
            return error == .failedToValidateHostname ? "the certificate does not name the issuer's host" : caseName(error)
        }
        guard error is NIOSSLError || error is BoringSSLError else { return nil }
        let text = String(describing: error)
        var codes: [String] = []
        var rest = text[...]
        while let marker = rest.range(of: "OPENSSL_internal:") {
            let code = rest[marker.upperBound...].prefix { $0.isASCII && ($0.isUppercase || $0.isNumber || $0 == "_") }
            if !code.isEmpty, !codes.contains(String(code)), codes.count < 4 { codes.append(String(code)) }
            rest = rest[marker.upperBound...]
        }
        let name = caseName(error)
        return codes.isEmpty ? name : "\(name): \(codes.joined(separator: ", "))"
    }

    /// An error's case name alone (`handshakeFailed`), without its associated values.
    private static func caseName(_ error: any Error) -> String {
        let head = String(describing: error).prefix { $0 != "(" && $0 != ":" && $0 != " " }
        let plain = (head.split(separator: ".").last ?? "").prefix { $0.isASCII && ($0.isLetter || $0.isNumber) }
        return plain.isEmpty ? "\(type(of: error))" : String(plain)
    }

    /// The request may have been sent: a reset, a TLS failure after the handshake (TLS 1.3 servers
    /// refuse a client certificate only then), an answer that is not HTTP.
    private static func afterSending(_ error: any Error, issuer: IssuerID) -> GatewayError {
        if let error = error as? IOError, [ECONNRESET, EPIPE].contains(error.errnoCode) {
            return GatewayError(.upstreamUnavailable, "\(issuer) reset the connection", condition: .connectionReset)
        }
        if let failure = tlsFailure(error, issuer: issuer, condition: .connectionReset) { return failure }
        // The issuer was reached and answered, with something that is not HTTP (a bad status
        // line, a header that never ends, conflicting framing): its answer is broken, which is a
        // protocol error, not a connection that failed.
        if error is HTTPParserError {
            return GatewayError(.upstreamProtocolError, "\(issuer) answered with a response that is not valid HTTP/1.1", condition: .malformed)
        }
        return GatewayError(.upstreamUnavailable, "\(issuer) could not be reached (\(type(of: error)))", condition: .connectionReset)
    }
}
