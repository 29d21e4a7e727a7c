import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSSL
import ProvisioningCore

/// One issuer's HTTP client: pooled connections, the issuer's connect timeout, and every transport
/// failure turned into a unified `GatewayError`. Never logs a body.
public final class UpstreamHTTP: Sendable {
    public struct Response: Sendable {
        public let status: Int
        public let headers: HTTPHeaders
        public let body: Data
    }

    /// Larger answers are not payloads a phone could use.
    public static let maxResponseBytes = 1 << 20

    let issuer: IssuerID
    let requestTimeout: Duration
    private let client: HTTPClient
    private let logger: Logger

    /// `tls`: the issuer's private CA and/or client certificate; AsyncHTTPClient's defaults (the
    /// system's roots, no client certificate) when nil.
    public init(issuer: IssuerID, timeouts: TimeoutConfig, tls: UpstreamTLS? = nil, logger: Logger) {
        self.issuer = issuer
        self.requestTimeout = .milliseconds(timeouts.requestMS)
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .milliseconds(Int64(timeouts.connectMS)))
        configuration.redirectConfiguration = .disallow
        // A refused connection fails at once: the gateway's own retry policy, circuit breakers
        // and endpoint failover decide what happens next, instead of AsyncHTTPClient retrying
        // the connection until the connect timeout.
        configuration.connectionPool.retryConnectionEstablishment = false
        if let tls { configuration.tlsConfiguration = tls.configuration }
        // No span of AsyncHTTPClient's own (it would record the full URL, which may name an
        // issuer's card reference): the resilience runtime's attempt span is the client span, and
        // its trace headers come in through the context.
        configuration.tracing.tracer = nil
        self.client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        self.logger = logger
    }

    public func shutdown() async throws {
        try await client.shutdown()
    }

    /// Sends one request; the time it may take is the issuer's per-try timeout cut to the deadline
    /// (read on the context's clock). Its log lines carry the request's metadata; the context's
    /// attempt trace adds its `traceparent`/`tracestate` headers and learns the answer's status.
    public func send(
        method: HTTPMethod, url: URL, headers: [(String, String)], body: Data?, context: ProvisioningContext
    ) async throws(GatewayError) -> Response {
        let remaining = context.remaining
        guard remaining > .zero else {
            throw GatewayError(.deadlineExceeded, "the deadline passed before \(issuer) could be called")
        }
        let timeout = min(remaining, requestTimeout)

        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        // On every attempt: the caller's trace continues at the upstream (W3C trace context).
        for (name, value) in context.attemptTrace?.headers ?? [] { request.headers.replaceOrAdd(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        request.headers.add(name: "Accept", value: "application/json")

        let clock = context.clock
        let started = clock.now
        do {
            let response = try await client.execute(request, timeout: .nanoseconds(Int64(timeout.wholeNanoseconds)))
            context.attemptTrace?.answered(status: Int(response.status.code))
            let buffer = try await response.body.collect(upTo: Self.maxResponseBytes)
            let status = Int(response.status.code)
            logger.info("upstream answered", metadata: Self.metadata(context, [
                "issuer": "\(issuer)", "status": "\(status)",
                "latency_ms": "\(started.duration(to: clock.now).wholeMilliseconds)",
            ]))
            return Response(status: status, headers: response.headers, body: Data(buffer: buffer))
        } catch {
            let mapped = Self.map(error, issuer: issuer, timedOutAfter: timeout)
            logger.warning("upstream call failed", metadata: Self.metadata(context, [
                "issuer": "\(issuer)", "code": "\(mapped.code.rawValue)",
                "latency_ms": "\(started.duration(to: clock.now).wholeMilliseconds)",
            ]))
            throw mapped
        }
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
        if error is CancellationError || (error as? HTTPClientError) == .cancelled {
            return GatewayError(.upstreamUnavailable, "the request to \(issuer) was cancelled")
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout:
                return GatewayError(.upstreamTimeout, "\(issuer) did not answer within \(timeout.wholeMilliseconds) ms", condition: .timedOut)
            case .connectTimeout:
                return GatewayError(.upstreamUnavailable, "could not connect to \(issuer) in time", condition: .connectFailed)
            case .remoteConnectionClosed:
                return GatewayError(.upstreamUnavailable, "\(issuer) closed the connection", condition: .connectionReset)
            default:
                return GatewayError(.upstreamUnavailable, "\(issuer) could not be reached (\(error))", condition: .connectionReset)
            }
        }
        // Connection refused, no route, unknown host: nothing was sent.
        if error is NIOConnectionError || (error as? IOError)?.errnoCode == ECONNREFUSED {
            return GatewayError(.upstreamUnavailable, "could not connect to \(issuer)", condition: .connectFailed)
        }
        if let error = error as? IOError, [ECONNRESET, EPIPE].contains(error.errnoCode) {
            return GatewayError(.upstreamUnavailable, "\(issuer) reset the connection", condition: .connectionReset)
        }
        if error is NIOTooManyBytesError {
            return GatewayError(.upstreamProtocolError, "\(issuer) answered with an oversized body", condition: .malformed)
        }
        // A failed TLS handshake (unknown CA, a refused client certificate): nothing was sent, and
        // ops need the reason, which names no secret.
        if error is NIOSSLError || error is BoringSSLError {
            return GatewayError(.upstreamUnavailable, "TLS with \(issuer) failed (\(String(describing: error).prefix(200)))",
                                condition: .connectFailed)
        }
        return GatewayError(.upstreamUnavailable, "\(issuer) could not be reached (\(type(of: error)))", condition: .connectionReset)
    }
}
