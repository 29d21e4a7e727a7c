import Foundation
import Issuers
import Logging
import ProvisioningCore
import Tracing

/// What one call to one upstream endpoint did, for the audit trail.
public struct AttemptReport: Sendable {
    public let issuer: IssuerID
    public let endpoint: String
    /// Nil on success; otherwise the failure under the code the issuer's retry table gives it.
    public let error: GatewayError?
    public let latency: Duration
    /// The HTTP status the upstream answered with, when it answered (nil for the local issuer).
    public var upstreamStatus: Int? = nil
}

/// Runs one request against one issuer under its retry policy, decision table and per-endpoint
/// circuit breakers, within the request's deadline:
///
/// 0. A paused issuer (`UpstreamHealth.isPaused`) gets no attempt: `upstream_unavailable` at once.
///    A pause that comes while a request waits to retry stops it there, with the last failure.
/// 1. Before each attempt: if less than `minAttemptTime` is left, stop (`deadline_exceeded`, or
///    the last `upstream_timeout`). No attempt starts that could not finish.
/// 2. The endpoint is the preferred one if its breaker allows, else the next in failover order;
///    if every breaker is open, stop with `upstream_unavailable` (a route's local fallback may
///    still serve).
/// 3. After a failure the decision table gives the code and the action: `fail` stops, `retry`
///    stays on the endpoint after a full-jitter backoff (at least the upstream's Retry-After),
///    `failover` moves to the next endpoint at once. A wait that would not leave time for an
///    attempt is not started.
///
/// The connector keeps the same `ProvisioningContext` (and so the same idempotency key) for every
/// attempt; each attempt gets it with its own `attemptTrace`. Time (what is left, latencies, waits)
/// is read from the context's clock.
///
/// Every attempt is a client span (`AttemptSpan`), a child of the request's span (the task's
/// `InstrumentationContext`), whose trace context goes to the upstream in the attempt's headers.
public struct ResilientCaller: Sendable {
    let health: UpstreamHealth
    let metrics: GatewayMetrics?
    /// Draws the jitter, uniform in 0...1; injectable for tests.
    let unit: @Sendable () -> Double
    let tracer: any Tracer

    public init(
        health: UpstreamHealth, metrics: GatewayMetrics?, tracer: any Tracer = NoOpTracer(),
        unit: @escaping @Sendable () -> Double = { Double.random(in: 0...1) }
    ) {
        self.health = health
        self.metrics = metrics
        self.tracer = tracer
        self.unit = unit
    }

    public func call<T: Sendable>(
        _ upstream: UpstreamIssuer, context: ProvisioningContext, logger: Logger,
        onAttempt: (AttemptReport) async throws(GatewayError) -> Void,
        _ operation: (any IssuerConnector, ProvisioningContext) async throws(GatewayError) -> T
    ) async throws(GatewayError) -> T {
        let policy = upstream.retry
        let count = upstream.endpoints.count
        var preferred = 0
        var attempts = 0
        var lastError: GatewayError?
        /// The endpoint that just failed, when the action was to fail over without waiting.
        var failedOverFrom: Int?
        let clock = context.clock
        // Ops paused it: no call at all, and a route's local fallback may still serve.
        guard !health.isPaused(upstream.issuer) else {
            throw GatewayError(.upstreamUnavailable, "issuer \(upstream.issuer) is paused by ops: no calls are made until it is resumed")
        }

        while true {
            if Task.isCancelled, let lastError { throw lastError }
            let remaining = context.remaining
            guard remaining >= policy.minAttemptTime else {
                throw Self.expired(upstream.issuer, lastError: lastError)
            }
            guard let index = choose(upstream, from: preferred) else {
                // The breakers may have opened on this request's own failures: the last one is
                // named, so the caller sees what the issuer did, not only that it is now shut off.
                let after = lastError.map { " after \($0.code.rawValue) (\($0.detail))" } ?? ""
                throw GatewayError(.upstreamUnavailable, "every \(upstream.issuer) endpoint's circuit breaker is open\(after)")
            }
            // Failing over found no other endpoint open: back off before the same one again.
            if failedOverFrom == index, let lastError {
                do throws(GatewayError) {
                    try await Self.pause(policy.backoff(afterAttempt: attempts, unit: unit), policy: policy, context: context,
                                         issuer: upstream.issuer, after: lastError, logger: logger)
                } catch {
                    health.release(issuer: upstream.issuer, index: index, url: upstream.endpoints[index].endpoint)
                    throw error
                }
            }
            failedOverFrom = nil
            // Paused while this request waited to retry (an incident, or the issuer taken out of
            // the config while paused): no further attempt. The caller gets the issuer's last
            // failure, as when the attempts run out.
            if let lastError, health.isPaused(upstream.issuer) {
                health.release(issuer: upstream.issuer, index: index, url: upstream.endpoints[index].endpoint)
                logger.info("no further attempt: the issuer was paused by ops", metadata: [
                    "issuer": "\(upstream.issuer)", "after": "\(lastError.code.rawValue)", "attempts": "\(attempts)",
                ])
                throw lastError
            }
            attempts += 1
            if attempts > 1 { metrics?.retry(issuer: upstream.issuer, reason: lastError?.condition?.description ?? "other") }
            let connector = upstream.endpoints[index]
            let span = AttemptSpan(tracer: tracer, issuer: upstream.issuer, endpoint: connector.endpoint, attempt: attempts)
            let started = clock.now
            let outcome: Result<T, GatewayError>
            do throws(GatewayError) {
                outcome = .success(try await operation(connector, context.attempt(span.upstreamTrace)))
            } catch {
                outcome = .failure(error)
            }
            let latency = started.duration(to: clock.now)

            let error: GatewayError
            switch outcome {
            case .success(let value):
                span.end(outcome: nil)
                health.record(issuer: upstream.issuer, index: index, url: upstream.endpoints[index].endpoint, error: nil)
                metrics?.attempt(issuer: upstream.issuer, endpoint: connector.endpoint, outcome: "succeeded", latency: latency)
                try await onAttempt(AttemptReport(issuer: upstream.issuer, endpoint: connector.endpoint, error: nil, latency: latency,
                                                  upstreamStatus: span.answeredStatus))
                return value
            case .failure(let failure):
                error = failure
            }

            // A failure before anything was sent (the deadline passed, an id longer than the
            // upstream accepts, a card the connector cannot address) is not an attempt: the
            // request ends as it is, and its own audit event says why. A call cancelled while it
            // was out (a shutdown past its timeout) is one, though the endpoint is not to blame
            // (no breaker counts it): the request may have reached the issuer, so its audit
            // trail names the attempt and its endpoint. So is a refusal after the upstream answered
            // within the attempt (a transition whose token the listing did not hold, or held in a
            // final state): the listing was a call, and its answer is on the trail (token audit).
            guard let condition = error.condition else {
                span.end(outcome: error)
                health.release(issuer: upstream.issuer, index: index, url: upstream.endpoints[index].endpoint)
                if Task.isCancelled || span.answeredStatus != nil {
                    try await onAttempt(AttemptReport(issuer: upstream.issuer, endpoint: connector.endpoint, error: error, latency: latency,
                                                      upstreamStatus: span.answeredStatus))
                }
                throw error
            }
            let rule = upstream.decisions.decide(condition)
            let failure = rule.map { error.recoded($0.code) } ?? error
            span.end(outcome: failure)
            health.record(issuer: upstream.issuer, index: index, url: upstream.endpoints[index].endpoint, error: failure)
            metrics?.attempt(issuer: upstream.issuer, endpoint: connector.endpoint, outcome: failure.code.rawValue, latency: latency)
            try await onAttempt(AttemptReport(issuer: upstream.issuer, endpoint: connector.endpoint, error: failure, latency: latency))
            lastError = failure

            var wait: Duration
            switch rule?.action ?? .fail {
            case .fail:
                throw failure
            case .retry:
                preferred = index
                wait = policy.backoff(afterAttempt: attempts, unit: unit)
            case .failover where count > 1:
                preferred = (index + 1) % count
                failedOverFrom = index
                wait = .zero
            case .failover:
                preferred = index
                wait = policy.backoff(afterAttempt: attempts, unit: unit)
            }
            guard attempts < policy.maxAttempts else { throw failure }
            if let retryAfter = failure.retryAfter {
                // The upstream asked for more time than is left: its own answer (with its
                // Retry-After, passed on to the caller) is the honest one.
                guard clock.now.advanced(by: retryAfter + policy.minAttemptTime) <= context.deadline else { throw failure }
                wait = max(wait, retryAfter)
            }
            try await Self.pause(wait, policy: policy, context: context, issuer: upstream.issuer, after: failure, logger: logger)
        }
    }

    /// Sleeps `wait` before the next attempt. A wait after which no attempt could finish is not
    /// started (`expired`); a caller that goes away ends the request with the last failure.
    private static func pause(
        _ wait: Duration, policy: RetryPolicy, context: ProvisioningContext, issuer: IssuerID, after failure: GatewayError,
        logger: Logger
    ) async throws(GatewayError) {
        guard context.clock.now.advanced(by: wait + policy.minAttemptTime) <= context.deadline else {
            throw expired(issuer, lastError: failure)
        }
        guard wait > .zero else { return }
        logger.debug("waiting before the next attempt", metadata: [
            "issuer": "\(issuer)", "after": "\(failure.code.rawValue)", "wait_ms": "\(wait.wholeMilliseconds)",
        ])
        do {
            try await context.clock.sleep(for: wait)
        } catch {
            throw failure
        }
    }

    /// The first endpoint from `preferred` on, in failover order (wrapping), whose breaker allows a call.
    private func choose(_ upstream: UpstreamIssuer, from preferred: Int) -> Int? {
        let count = upstream.endpoints.count
        for offset in 0..<count {
            let index = (preferred + offset) % count
            if health.acquire(issuer: upstream.issuer, index: index, url: upstream.endpoints[index].endpoint) == .allowed { return index }
        }
        return nil
    }

    /// The answer when time runs out: the last try's own timeout if that is what happened,
    /// otherwise `deadline_exceeded` saying what the last try got.
    static func expired(_ issuer: IssuerID, lastError: GatewayError?) -> GatewayError {
        if let lastError, lastError.code == .upstreamTimeout { return lastError }
        let after = lastError.map { " after \($0.code.rawValue) (\($0.detail))" } ?? ""
        return GatewayError(.deadlineExceeded, "the deadline left no time for another \(issuer) attempt\(after)",
                            upstreamStatus: lastError?.upstreamStatus, condition: nil)
    }
}
