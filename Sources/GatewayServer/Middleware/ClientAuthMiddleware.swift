import Gateway
import Hummingbird
import ProvisioningCore

/// Authenticates `/v1` calls (and `/metrics` unless it is public), makes the client known to the
/// handlers, and applies the rate limits:
///
/// - every authenticated request takes a token from its client's bucket (`clients[].rate_limit`);
///   none left is 429 `rate_limited` with `Retry-After`;
/// - every failed authentication (missing or wrong key) takes a token from its source address's
///   bucket (`server.auth_failure_limit`) and is reported to `onAuthFailure`; while that bucket is
///   empty, a request without a valid key is answered 429 at once, neither reported nor logged.
///
/// A throttled source may still authenticate with a valid key (`throttledSourceMayAuthenticate`),
/// so one misconfigured client, or an attacker, behind the same NAT or TLS-terminating proxy does
/// not lock every client there out. The price: checking the key (one SHA-256 of a header capped at
/// `maxThrottledAuthorizationBytes`, the same work as an unthrottled request) is still done, and the
/// throttle does not hide which guess was right; it bounds the 401s, the audit-log writes and the
/// work behind them, not guessing itself, which the keys' own entropy has to make hopeless.
struct ClientAuthMiddleware<Context: RemoteAddressRequestContext, C: Clock>: RouterMiddleware where C.Duration == Duration {
    typealias AuthFailureHook = @Sendable (_ source: String, _ reason: String) async -> Void

    let authenticator: ClientAuthenticator
    /// Keyed by client id: at most one bucket per configured client.
    let clientLimits: RateLimiter<ClientID, C>
    /// Keyed by `SourceAddress.key`; holds buckets only for sources that failed to authenticate.
    let failureLimits: RateLimiter<String, C>
    /// `server.metrics_public`: `/metrics` without a key. Otherwise it takes an admin client's key.
    let metricsPublic: Bool
    let throttledSourceMayAuthenticate: Bool
    /// Called for each failed authentication that is not throttled, with the source address and
    /// `missing_key` or `invalid_key`; never with the key or anything derived from it.
    let onAuthFailure: AuthFailureHook

    static var maxThrottledAuthorizationBytes: Int { 512 }

    init(
        authenticator: ClientAuthenticator, clientLimits: RateLimiter<ClientID, C>, failureLimits: RateLimiter<String, C>,
        metricsPublic: Bool, throttledSourceMayAuthenticate: Bool = true,
        onAuthFailure: @escaping AuthFailureHook = { _, _ in }
    ) {
        self.authenticator = authenticator
        self.clientLimits = clientLimits
        self.failureLimits = failureLimits
        self.metricsPublic = metricsPublic
        self.throttledSourceMayAuthenticate = throttledSourceMayAuthenticate
        self.onAuthFailure = onAuthFailure
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // Components as the router matches them (empty ones dropped, no percent-decoding), so
        // `//metrics` or `/metrics/` cannot reach the handler around the check.
        let path = request.uri.path.split(separator: "/", omittingEmptySubsequences: true)
        let isAPI = path.first == "v1"
        let isMetrics = path.count == 1 && path[0] == "metrics"
        guard isAPI || (isMetrics && !metricsPublic) else { return try await next(request, context) }

        let source = SourceAddress(context.remoteAddress)
        let client = try await authenticate(request.headers[.authorization], source: source)
        if case .refused(let wait) = clientLimits.take(client.id) {
            throw GatewayError(.rateLimited, "this client is over its rate limit; send again after Retry-After", retryAfter: wait)
        }
        if isMetrics && !client.admin {
            throw GatewayError(.forbidden, "GET /metrics needs an admin client's key")
        }
        return try await RequestScope.$client.withValue(client) {
            try await RequestScope.$source.withValue(source.description) { try await next(request, context) }
        }
    }

    private func authenticate(_ authorization: String?, source: SourceAddress) async throws(GatewayError) -> Client {
        if case .refused(let wait) = failureLimits.peek(source.key) {
            if throttledSourceMayAuthenticate, let authorization, authorization.utf8.count <= Self.maxThrottledAuthorizationBytes,
               let client = try? authenticator.authenticate(authorization: authorization) {
                return client
            }
            throw Self.throttled(wait)
        }
        do {
            return try authenticator.authenticate(authorization: authorization)
        } catch {
            // Another request from the source may have emptied the bucket since the peek.
            if case .refused(let wait) = failureLimits.take(source.key) { throw Self.throttled(wait) }
            await onAuthFailure(source.description, authorization == nil ? "missing_key" : "invalid_key")
            throw error
        }
    }

    private static func throttled(_ wait: Duration) -> GatewayError {
        GatewayError(.rateLimited, "too many requests without a valid API key from this address; send again after Retry-After",
                     retryAfter: wait)
    }
}
