import CoreMetrics
import Foundation
import Prometheus
import ProvisioningCore

/// The gateway's own metrics, in one Prometheus registry per gateway (not the process-global
/// `MetricsSystem`, so several gateways in one process, as in tests, keep their counts apart).
/// Labels hold issuer names and endpoint URLs, never card data.
public final class GatewayMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Upstream latency buckets from 10 ms to the 60 s ceiling of a deadline.
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10), .seconds(20), .seconds(60),
        ]
        self.factory = factory
    }

    /// One call to an upstream endpoint and how it ended (`succeeded` or the unified error code).
    public func attempt(issuer: IssuerID, endpoint: String, outcome: String, latency: Duration) {
        Counter(label: "gateway_upstream_attempts_total",
                dimensions: [("issuer", issuer.rawValue), ("endpoint", endpoint), ("outcome", outcome)], factory: factory).increment()
        CoreMetrics.Timer(label: "gateway_upstream_latency_seconds", dimensions: [("issuer", issuer.rawValue)], factory: factory)
            .recordNanoseconds(latency.wholeNanoseconds)
    }

    /// An attempt after the first at the same issuer.
    public func retry(issuer: IssuerID, reason: String) {
        Counter(label: "gateway_upstream_retries_total", dimensions: [("issuer", issuer.rawValue), ("reason", reason)], factory: factory)
            .increment()
    }

    public func breakerTransition(issuer: IssuerID, endpoint: String, _ transition: CircuitBreaker.Transition) {
        Counter(label: "gateway_circuit_breaker_transitions_total",
                dimensions: [("issuer", issuer.rawValue), ("endpoint", endpoint), ("from", transition.from), ("to", transition.to)],
                factory: factory).increment()
    }

    /// A request answered with `local` after its issuer failed.
    public func fallback(issuer: IssuerID, to fallback: IssuerID) {
        Counter(label: "gateway_fallbacks_total", dimensions: [("issuer", issuer.rawValue), ("fallback", fallback.rawValue)],
                factory: factory).increment()
    }

    /// 1 while ops keep an issuer paused, 0 otherwise.
    public func issuerPaused(_ issuer: IssuerID, _ paused: Bool) {
        Gauge(label: "gateway_issuer_paused", dimensions: [("issuer", issuer.rawValue)], factory: factory).record(paused ? 1 : 0)
    }

    /// One unified API request's result (`succeeded` or its error code), per operation.
    public func request(operation: String, outcome: String) {
        Counter(label: "gateway_requests_total", dimensions: [("operation", operation), ("outcome", outcome)], factory: factory).increment()
    }

    /// A token activation's answer from the issuer (`approved`, `declined`, `failed`).
    public func activation(issuer: IssuerID, result: String) {
        Counter(label: "gateway_token_activations_total", dimensions: [("issuer", issuer.rawValue), ("result", result)], factory: factory)
            .increment()
    }

    /// The Prometheus text exposition of everything recorded so far.
    public func exposition() -> String { registry.emitToString() }
}
