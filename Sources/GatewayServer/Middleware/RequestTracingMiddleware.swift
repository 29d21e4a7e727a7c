import Gateway
import HTTPTypes
import Hummingbird
import Logging
import Tracing

/// One server span per request, a child of the caller's W3C trace context (`traceparent`,
/// `tracestate`) when it sends one, else the root of a new trace. The upstream attempts' spans are
/// its children: it is the task's `InstrumentationContext` while the request runs.
///
/// The span is named `<METHOD> <route template>` (`POST /v1/cards/{card_id}/wallet-provisioning/apple-pay`),
/// as the request metrics label it, never the raw path (it holds card ids); its attributes are
/// `http.request.method`, `http.route`, `http.response.status_code` and `gateway.request_id`.
///
/// The request's log lines (`RequestScope.logger` and Hummingbird's context logger) get the span's
/// `trace_id` and `span_id`, so a log line can be found from a trace and back.
struct RequestTracingMiddleware<Context: RequestContext>: RouterMiddleware {
    let tracer: any Tracer

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var parent = InstrumentationContext.current ?? .topLevel
        let sent = TraceHeaders(from: TraceHeaders.names.compactMap { name in
            HTTPField.Name(name).flatMap { request.headers[$0] }.map { (name, $0) }
        })
        tracer.extract(sent, into: &parent, using: TraceHeaders.Extractor())

        let route = RequestMetricsMiddleware<Context>.route(context.endpointPath)
        let method = RequestMetricsMiddleware<Context>.method(request.method)
        let span = tracer.startSpan("\(method) \(route)", context: parent, ofKind: .server)
        // Attributes only on a span that keeps them: one not sampled (every span without a
        // collector, unless the caller's trace is sampled) records nothing.
        if span.isRecording {
            span.attributes["http.request.method"] = method
            span.attributes["http.route"] = route
            span.attributes["gateway.request_id"] = RequestScope.requestID
        }

        var context = context
        var logger = RequestScope.logger
        if let identity = TraceIdentity(span.context, tracer: tracer) {
            for (key, value) in [("trace_id", identity.traceID), ("span_id", identity.spanID)] {
                context.logger[metadataKey: key] = "\(value)"
                logger?[metadataKey: key] = "\(value)"
            }
        }
        do {
            let response = try await InstrumentationContext.$current.withValue(span.context) {
                try await RequestScope.$logger.withValue(logger) { try await next(request, context) }
            }
            end(span, status: response.status)
            return response
        } catch {
            end(span, status: (error as? any HTTPResponseError)?.status ?? .internalServerError)
            throw error
        }
    }

    private func end(_ span: any Span, status: HTTPResponse.Status) {
        guard span.isRecording else {
            span.end()
            return
        }
        span.attributes["http.response.status_code"] = status.code
        // As OpenTelemetry's HTTP conventions say for a server: only a 5xx is the span's error.
        if status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
        span.end()
    }
}
