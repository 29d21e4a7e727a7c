import ProvisioningCore
import Synchronization
import Tracing

/// One upstream attempt as a client span named `upstream attempt`, a child of the task's current
/// context (the request's span). Its attributes are the attempt's bookkeeping only:
///
/// - `gateway.issuer`, `gateway.endpoint` (the endpoint's metrics label: no user info, query or
///   credentials), `gateway.attempt` (1, 2, ... at this issuer);
/// - `gateway.outcome`: `succeeded` or the gateway error code the attempt ended with;
/// - `http.response.status_code` when the upstream answered.
///
/// Never card data, certificates, nonces, payloads, keys or card ids: neither the name nor any
/// attribute is built from the request or the answer.
struct AttemptSpan: Sendable {
    private let span: any Span
    /// Sent with the attempt's HTTP request: the span's W3C trace context.
    let upstreamTrace: UpstreamAttemptTrace
    private let answered: AnsweredStatus
    /// The HTTP status the upstream last answered this attempt with (nil: no answer), for its
    /// audit event: a success is the issuer's own status (Marqeta's 201), not a made-up 200.
    var answeredStatus: Int? { answered.status }

    static let name = "upstream attempt"

    init(tracer: any Tracer, issuer: IssuerID, endpoint: String, attempt: Int) {
        let span = tracer.startSpan(Self.name, context: InstrumentationContext.current ?? .topLevel, ofKind: .client)
        // A span that records nothing (not sampled: every span without a collector) keeps no
        // attributes, so none are made: each is a boxed value in a dictionary built and dropped.
        if span.isRecording {
            span.attributes["gateway.issuer"] = issuer.rawValue
            span.attributes["gateway.endpoint"] = endpoint
            span.attributes["gateway.attempt"] = attempt
        }
        var headers = TraceHeaders()
        tracer.inject(span.context, into: &headers, using: TraceHeaders.Injector())
        self.span = span
        let answered = AnsweredStatus()
        self.answered = answered
        self.upstreamTrace = UpstreamAttemptTrace(headers: headers.fields) { status in
            answered.note(status)
            guard span.isRecording else { return }
            span.attributes["http.response.status_code"] = status
        }
    }

    /// `failure` nil: the attempt succeeded.
    func end(outcome failure: GatewayError?) {
        guard span.isRecording else {
            span.end()
            return
        }
        if let failure {
            span.attributes["gateway.outcome"] = failure.code.rawValue
            // The code only: an error's detail may name a card.
            span.setStatus(SpanStatus(code: .error, message: failure.code.rawValue))
        } else {
            span.attributes["gateway.outcome"] = "succeeded"
        }
        span.end()
    }
}

/// The last HTTP status one attempt's upstream answered with.
private final class AnsweredStatus: Sendable {
    private let value = Atomic<Int>(0)
    func note(_ status: Int) { value.store(status, ordering: .relaxed) }
    var status: Int? {
        let status = value.load(ordering: .relaxed)
        return status == 0 ? nil : status
    }
}
