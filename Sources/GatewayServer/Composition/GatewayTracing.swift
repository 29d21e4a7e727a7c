import Logging
import OTel
import ProvisioningCore
import ServiceLifecycle
import Tracing

/// The gateway's tracer, and the service that must run for it (started before the server, stopped
/// after it, so the last spans are flushed).
///
/// From the config (`telemetry`) it is swift-otel's tracer, always: it makes real span contexts
/// (W3C trace and span ids, parent-based sampling) and its propagator reads and writes
/// `traceparent` and `tracestate`, so a caller's trace is continued and reaches the upstreams
/// whether or not anything is exported. With `telemetry.otlp.endpoint` the spans are batched and
/// exported over OTLP/HTTP with protobuf bodies (swift-otel's `OTLPHTTP` trait only; no gRPC
/// dependency) to `<endpoint>/v1/traces`; without it swift-otel's no-op exporter drops them, and
/// new traces are not sampled (nothing is recorded), while a caller's sampled flag is followed.
/// swift-otel applies the standard `OTEL_*` environment variables over this configuration.
///
/// The tracer is passed to the request middleware and the resilience runtime, never bootstrapped
/// as the process-global one: tests hand `buildGateway` their own (an in-memory tracer), and
/// AsyncHTTPClient, which would use a global tracer, adds no spans or headers of its own.
public struct GatewayTracing: Sendable {
    public let tracer: any Tracer
    /// Nil when the tracer needs nothing run (a test's in-memory tracer).
    let service: (any Service)?

    public init(tracer: any Tracer, service: (any Service)? = nil) {
        self.tracer = tracer
        self.service = service
    }

    /// The tracer `telemetry` asks for; its diagnostics (export failures) go to `logger`.
    public static func configured(_ telemetry: TelemetryConfig, logger: Logger) throws -> GatewayTracing {
        var configuration = OTel.Configuration.default
        configuration.serviceName = telemetry.serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.propagators = [.traceContext]
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.enabled = true
        if let endpoint = telemetry.otlp.endpoint {
            configuration.traces.exporter = .otlp
            configuration.traces.otlpExporter.protocol = .httpProtobuf
            configuration.traces.otlpExporter.endpoint = tracesURL(endpoint)
        } else {
            configuration.traces.exporter = .none
            // Nothing would receive a recorded span: new traces are not sampled (their
            // `traceparent` says so, flag 00, so an issuer is not asked to keep a trace nobody
            // collects), and a span that records nothing costs a request no attributes, no batch
            // processor and no export queue. A caller's sampled flag is still followed, and the
            // trace and span ids still reach the logs and the upstreams. `OTEL_TRACES_SAMPLER`
            // still overrides this.
            configuration.traces.sampler = .parentBasedAlwaysOff
        }
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        return GatewayTracing(tracer: backend.factory, service: backend.service)
    }

    /// OTLP/HTTP's traces path under the collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` is read.
    static func tracesURL(_ endpoint: String) -> String {
        (endpoint.hasSuffix("/") ? endpoint : endpoint + "/") + "v1/traces"
    }
}
