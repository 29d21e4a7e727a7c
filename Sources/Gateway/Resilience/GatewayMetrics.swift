import CoreMetrics
import Foundation
import Issuers
import Prometheus
import ProvisioningCore
import Synchronization

/// The gateway's own metrics, in one Prometheus registry per gateway (not the process-global
/// `MetricsSystem`, so several gateways in one process, as in tests, keep their counts apart).
/// Labels hold issuer names and endpoint URLs, never card data.
public final class GatewayMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// The handles every request touches, made once per label set: a request then costs a
    /// dictionary look-up, not the factory's registration path (its lock, its label checks).
    private let counters = Mutex<[HandleKey: CoreMetrics.Counter]>([:])
    private let timers = Mutex<[HandleKey: CoreMetrics.Timer]>([:])
    /// The clients the last scrape's `gateway_client_requests_in_flight` named.
    private let clientsShownInFlight = Mutex<Set<String>>([])

    private struct HandleKey: Hashable {
        let label: String
        let values: [String]
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Counter {
        Self.cached(counters, HandleKey(label: label, values: dimensions.map(\.1))) {
            CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
        }
    }

    private func timer(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Timer {
        Self.cached(timers, HandleKey(label: label, values: dimensions.map(\.1))) {
            CoreMetrics.Timer(label: label, dimensions: dimensions, factory: factory)
        }
    }

    private static func cached<Handle>(_ cache: borrowing Mutex<[HandleKey: Handle]>, _ key: HandleKey, make: () -> Handle) -> Handle {
        cache.withLock { handles in
            if let handle = handles[key] { return handle }
            let handle = make()
            handles[key] = handle
            return handle
        }
    }

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Latency buckets from 10 ms to the 60 s ceiling of a deadline, with 12 s and 15 s (80 % and
        // all of the default deadline) so that a p99 near the deadline is read from buckets that
        // bound it, not interpolated between 10 s and 20 s (the ops audit: 2 % of requests at
        // 10.5 s read as a p99 of 15 s and paged).
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10), .seconds(12), .seconds(15), .seconds(20), .seconds(60),
        ]
        self.factory = factory
    }

    /// One call to an upstream endpoint and how it ended (`succeeded` or the unified error code).
    public func attempt(issuer: IssuerID, endpoint: String, outcome: String, latency: Duration) {
        counter("gateway_upstream_attempts_total", [("issuer", issuer.rawValue), ("endpoint", endpoint), ("outcome", outcome)]).increment()
        timer("gateway_upstream_latency_seconds", [("issuer", issuer.rawValue)]).recordNanoseconds(latency.wholeNanoseconds)
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
        breakerState(issuer: issuer, endpoint: endpoint, transition.to)
    }

    /// An endpoint's breaker state as a number a graph and an alert can use: 0 closed, 1 half open
    /// (probing), 2 open. Set for every endpoint at start-up and on every transition.
    public func breakerState(issuer: IssuerID, endpoint: String, _ state: String) {
        let value: Double = switch state {
        case "open": 2
        case "half_open": 1
        default: 0
        }
        CoreMetrics.Gauge(label: "gateway_circuit_breaker_state", dimensions: [("issuer", issuer.rawValue), ("endpoint", endpoint)], factory: factory)
            .record(value)
    }

    /// Requests being served, read at each scrape (the scrape itself included): a figure that
    /// climbs while throughput does not is requests waiting on a slow issuer or store, or
    /// clients holding their bodies back.
    public func requestsInFlight(_ count: Int) {
        CoreMetrics.Gauge(label: "gateway_requests_in_flight", factory: factory).record(Double(count))
    }

    /// Each client's requests in flight, read at each scrape (`clients[].max_in_flight` bounds it).
    /// A client the previous scrape showed and this one does not (a reload removed it) leaves
    /// the exposition.
    public func clientRequestsInFlight(_ counts: [String: Int]) {
        let gone = clientsShownInFlight.withLock { shown in
            defer { shown = Set(counts.keys) }
            return shown.subtracting(counts.keys)
        }
        for client in gone {
            CoreMetrics.Gauge(label: "gateway_client_requests_in_flight", dimensions: [("client", client)], factory: factory).destroy()
        }
        for (client, count) in counts {
            CoreMetrics.Gauge(label: "gateway_client_requests_in_flight", dimensions: [("client", client)], factory: factory).record(Double(count))
        }
    }

    /// An endpoint a config reload removed (or moved): its breaker series leaves the exposition.
    public func forgetBreakerState(issuer: IssuerID, endpoint: String) {
        CoreMetrics.Gauge(label: "gateway_circuit_breaker_state", dimensions: [("issuer", issuer.rawValue), ("endpoint", endpoint)], factory: factory)
            .destroy()
    }

    /// A request refused with 429: by an authenticated client's id, or `unauthenticated` for a
    /// source address throttled after failed authentications.
    public func rateLimited(client: String) {
        Counter(label: "gateway_rate_limited_total", dimensions: [("client", client)], factory: factory).increment()
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

    /// An issuer a config reload removed: its pause series leaves the exposition.
    public func forgetIssuerPaused(_ issuer: IssuerID) {
        Gauge(label: "gateway_issuer_paused", dimensions: [("issuer", issuer.rawValue)], factory: factory).destroy()
    }

    /// One unified API request's result (`succeeded` or its error code), per operation.
    public func request(operation: String, outcome: String) {
        counter("gateway_requests_total", [("operation", operation), ("outcome", outcome)]).increment()
    }

    /// A token activation's answer from the issuer (`approved`, `declined`, `failed`).
    public func activation(issuer: IssuerID, result: String) {
        Counter(label: "gateway_token_activations_total", dimensions: [("issuer", issuer.rawValue), ("result", result)], factory: factory)
            .increment()
    }

    /// One HTTP request the gateway answered, by route template (`/v1/cards/{card_id}/...`, or
    /// `unmatched`; never a raw path, which would hold card ids), method and status class (`2xx`).
    public func httpRequest(route: String, method: String, statusClass: String, duration: Duration) {
        let dimensions = [("route", route), ("method", method), ("status", statusClass)]
        counter("gateway_http_requests_total", dimensions).increment()
        timer("gateway_http_request_duration_seconds", dimensions).recordNanoseconds(duration.wholeNanoseconds)
    }

    /// A config reload (SIGHUP or `POST /v1/admin/config/reload`): `success` or `failure`; after a
    /// success, the generation now serving (1 is the file read at start-up).
    public func configReload(succeeded: Bool, generation: Int) {
        Counter(label: "gateway_config_reloads_total", dimensions: [("result", succeeded ? "success" : "failure")], factory: factory)
            .increment()
        configReloadFailing(!succeeded)
        configGeneration(generation)
    }

    /// 1 from a refused reload until one is applied, 0 otherwise: the file on disk is one the next
    /// start-up would refuse, for as long as it stays so (an alert on the failure counter's
    /// increase cleared itself after its window while the file was still broken).
    public func configReloadFailing(_ failing: Bool) {
        Gauge(label: "gateway_config_reload_failing", factory: factory).record(failing ? 1 : 0)
    }

    /// Both reload series at zero from start-up, so a dashboard and an alert see them before the
    /// first reload.
    public func configReloadSeries() {
        for result in ["success", "failure"] {
            _ = Counter(label: "gateway_config_reloads_total", dimensions: [("result", result)], factory: factory)
        }
        configReloadFailing(false)
    }

    /// The config generation serving requests: 1 at start-up, one more per applied reload.
    public func configGeneration(_ generation: Int) {
        Gauge(label: "gateway_config_generation", factory: factory).record(generation)
    }

    /// Every issuer's connection pool, read when `/metrics` is scraped: connections open (being
    /// made, in use or idle), idle ones, and calls waiting for a connection (all of the issuer's
    /// connections in use: `issuers.<name>.connections.max_per_host`). An issuer a config reload
    /// removed leaves the exposition, instead of showing its last counts for ever.
    public func upstreamConnections(_ pools: [IssuerID: UpstreamHTTP.ConnectionCounts]) {
        let gone = pooledIssuers.withLock { known in
            defer { known = Set(pools.keys) }
            return known.subtracting(pools.keys)
        }
        for issuer in gone {
            for (gauge, _) in poolGauges(issuer) { gauge.destroy() }
        }
        for (issuer, counts) in pools {
            for (gauge, count) in poolGauges(issuer) { gauge.record(counts[keyPath: count]) }
        }
    }

    /// The issuers whose pool gauges are in the exposition.
    private let pooledIssuers = Mutex<Set<IssuerID>>([])

    /// An issuer's three pool gauges, each with the count it shows.
    private func poolGauges(_ issuer: IssuerID) -> [(CoreMetrics.Gauge, KeyPath<UpstreamHTTP.ConnectionCounts, Int>)] {
        func connections(_ state: String) -> CoreMetrics.Gauge {
            CoreMetrics.Gauge(label: "gateway_upstream_connections", dimensions: [("issuer", issuer.rawValue), ("state", state)], factory: factory)
        }
        let waiters = CoreMetrics.Gauge(label: "gateway_upstream_connection_waiters", dimensions: [("issuer", issuer.rawValue)], factory: factory)
        return [(connections("open"), \.open), (connections("idle"), \.idle), (waiters, \.waiting)]
    }

    /// The figures last exported by `storeCommits`, so each scrape adds only what is new.
    private let exportedCommits = Mutex(StoreCommitCounts(commits: 0, writes: 0))

    /// The store's commits, read when `/metrics` is scraped: `gateway_store_commits_total` (synced
    /// transactions of the request path) and `gateway_store_committed_writes_total` (the writes
    /// they held); their rates' ratio is how many requests' writes shared one sync. Nothing for a
    /// store that does not group its writes (PostgreSQL).
    public func storeCommits(_ counts: StoreCommitCounts?) {
        guard let counts else { return }
        let commits = Counter(label: "gateway_store_commits_total", factory: factory)
        let writes = Counter(label: "gateway_store_committed_writes_total", factory: factory)
        // Under the lock: two scrapes at once add each commit once.
        exportedCommits.withLock { exported in
            commits.increment(by: max(0, counts.commits - exported.commits))
            writes.increment(by: max(0, counts.writes - exported.writes))
            exported = StoreCommitCounts(commits: max(exported.commits, counts.commits), writes: max(exported.writes, counts.writes))
        }
    }

    /// The Prometheus text exposition of everything recorded so far.
    public func exposition() -> String { registry.emitToString() }
}
