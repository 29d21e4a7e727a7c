import Gateway
import Hummingbird
import NIOCore
import ProvisioningCore

/// Authenticates `/v1` calls (and `/metrics` unless it is public), makes the client known to the
/// handlers, and applies the rate limits:
///
/// - every authenticated request takes a token from its client's bucket (`clients[].rate_limit`);
///   none left is 429 `rate_limited` with `Retry-After`;
/// - it then counts as one of its client's requests in flight until its answer is made; a client
///   with `clients[].max_in_flight` already in flight is answered 429 `rate_limited` at once, so
///   a slow issuer or a client holding its bodies back cannot pile up one tenant's requests;
/// - every failed authentication (missing or wrong key) takes a token from its source address's
///   bucket (`server.auth_failure_limit`) and is reported to `onAuthFailure`; while that bucket is
///   empty, a request without a valid key is answered 429 at once, neither reported nor logged.
///
/// The authenticated path touches only the client's bucket: the source's address is formatted and
/// its bucket looked at only when authentication fails.
struct ClientAuthMiddleware<Context: RemoteAddressRequestContext, C: Clock>: RouterMiddleware where C.Duration == Duration {
    typealias AuthFailureHook = @Sendable (_ source: String, _ reason: String) async -> Void

    /// The request's config generation's clients.
    let authenticator: @Sendable () -> ClientAuthenticator
    /// Keyed by client id: at most one bucket per configured client.
    let clientLimits: RateLimiter<ClientID, C>
    /// Each client's requests in flight, against its `max_in_flight`.
    let inFlight: InFlightLimiter<ClientID>
    /// Keyed by `SourceAddress.key`; holds buckets only for sources that failed to authenticate.
    let failureLimits: RateLimiter<String, C>
    /// `server.metrics_public`: `/metrics` without a key. Otherwise it takes an admin client's key.
    let metricsPublic: Bool
    /// Called for each failed authentication that is not throttled, with the source address and
    /// `missing_key` or `invalid_key`; never with the key or anything derived from it.
    let onAuthFailure: AuthFailureHook
    /// Counts the 429s (`gateway_rate_limited_total`).
    let metrics: GatewayMetrics?

    init(
        authenticator: @escaping @Sendable () -> ClientAuthenticator, clientLimits: RateLimiter<ClientID, C>,
        inFlight: InFlightLimiter<ClientID> = InFlightLimiter(), failureLimits: RateLimiter<String, C>,
        metricsPublic: Bool, metrics: GatewayMetrics? = nil,
        onAuthFailure: @escaping AuthFailureHook = { _, _ in }
    ) {
        self.metrics = metrics
        self.authenticator = authenticator
        self.clientLimits = clientLimits
        self.inFlight = inFlight
        self.failureLimits = failureLimits
        self.metricsPublic = metricsPublic
        self.onAuthFailure = onAuthFailure
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // Components as the router matches them (empty ones dropped, no percent-decoding), so
        // `//metrics` or `/metrics/` cannot reach the handler around the check.
        var components = request.uri.path.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: true).makeIterator()
        let first = components.next()
        let isAPI = first == "v1"
        let isMetrics = first == "metrics" && components.next() == nil
        guard isAPI || (isMetrics && !metricsPublic) else { return try await next(request, context) }

        // Two Authorization lines (an SDK and a proxy each adding one) are a malformed request, not
        // a wrong key: read joined, they hashed as an unknown key, counted as a failed login and
        // used up the address's failure budget. No key is checked.
        if request.headers[values: .authorization].count > 1 {
            throw GatewayError(.invalidRequest, "Authorization is given more than once: send one 'Authorization: Bearer <key>'")
        }
        let (client, keyDigest) = try await authenticate(request.headers[.authorization], remoteAddress: context.remoteAddress)
        RequestScope.access?.note(client: client.id)
        if case .refused(let wait) = clientLimits.take(client.id) {
            metrics?.rateLimited(client: client.id.rawValue)
            throw GatewayError(.rateLimited, "this client is over its rate limit; send again after Retry-After", retryAfter: wait)
        }
        if isMetrics && !client.admin {
            throw GatewayError(.forbidden, "GET /metrics needs an admin client's key")
        }
        guard inFlight.enter(client.id, limit: client.maxInFlight) else {
            metrics?.rateLimited(client: client.id.rawValue)
            throw GatewayError(.rateLimited, "this client has \(client.maxInFlight) requests in flight, its max_in_flight; send again once one is answered",
                               retryAfter: .seconds(1))
        }
        defer { inFlight.leave(client.id) }
        return try await RequestScope.$caller.withValue(Caller(client: client, keyDigest: keyDigest, remoteAddress: context.remoteAddress)) {
            try await next(request, context)
        }
    }

    /// A valid key is accepted from any source, so one bad client (or an attacker) behind the same
    /// NAT or proxy does not lock the others out. A failure takes a token from its source's bucket;
    /// none left answers 429 at once, neither reported nor logged. This bounds the 401s, the audit
    /// writes and the work behind them, not guessing itself, which the keys' entropy makes hopeless.
    private func authenticate(_ authorization: String?, remoteAddress: SocketAddress?) async throws(GatewayError) -> (client: Client, keyDigest: [UInt8]) {
        do {
            return try authenticator().authenticateKey(authorization: authorization)
        } catch {
            let source = SourceAddress(remoteAddress)
            if case .refused(let wait) = failureLimits.take(source.key) {
                metrics?.rateLimited(client: "unauthenticated")
                throw Self.throttled(wait)
            }
            await onAuthFailure(source.description, authorization == nil ? "missing_key" : "invalid_key")
            throw error
        }
    }

    private static func throttled(_ wait: Duration) -> GatewayError {
        GatewayError(.rateLimited, "too many requests without a valid API key from this address; send again after Retry-After",
                     retryAfter: wait)
    }
}
