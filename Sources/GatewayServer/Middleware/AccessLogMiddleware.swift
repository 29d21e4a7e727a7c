import Gateway
import Hummingbird
import Logging
import ProvisioningCore
import Synchronization

/// One `request` line per request, whatever became of it: 401s, 429s, 400s before a route, 404s,
/// `/healthz` and `/metrics` included (`log.access`, on by default, at `info`). The line has the
/// method, the route template (`/v1/cards/{card_id}/wallet-provisioning/apple-pay`, or
/// `unmatched`: never the raw path, which holds card ids and whatever a scanner sends), the status,
/// the problem's `code` when the answer is one, the `client` once authenticated, and `latency_ms`;
/// the request's logger adds `request_id`, `trace_id` and `span_id`.
///
/// It sits inside the tracing middleware (so the line has the trace) and outside the problem
/// middleware (so it sees the answer the caller gets). What is learnt deeper in (the client, the
/// problem's code) comes back through `RequestScope.access`.
struct AccessLogMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Used when no request logger is in scope.
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // Wall time spent, not a decision: the real clock even when tests inject another.
        let start = ContinuousClock.now
        let note = AccessNote()
        do {
            let response = try await RequestScope.$access.withValue(note) { try await next(request, context) }
            log(request, context, status: response.status.code, note: note, since: start)
            return response
        } catch {
            // The problem middleware answers every error below it; this is a last resort.
            log(request, context, status: (error as? any HTTPResponseError)?.status.code ?? 500, note: note, since: start)
            throw error
        }
    }

    private func log(_ request: Request, _ context: Context, status: Int, note: AccessNote, since start: ContinuousClock.Instant) {
        let logger = RequestScope.logger ?? logger
        guard logger.logLevel <= .info else { return }
        let (client, code) = note.facts
        var metadata: Logger.Metadata = [
            "method": "\(RequestMetricsMiddleware<Context>.method(request.method))",
            "route": "\(RequestMetricsMiddleware<Context>.route(context.endpointPath))",
            "status": "\(status)",
            "latency_ms": "\((ContinuousClock.now - start).wholeMilliseconds)",
        ]
        if let client { metadata["client"] = "\(client)" }
        if let code { metadata["code"] = "\(code.rawValue)" }
        logger.info("request", metadata: metadata)
    }
}

/// What the access line learns from deeper in the request: the authenticated client and the
/// problem's code.
final class AccessNote: Sendable {
    private let state = Mutex<(client: ClientID?, code: GatewayError.Code?)>((nil, nil))

    var facts: (client: ClientID?, code: GatewayError.Code?) { state.withLock { $0 } }

    func note(client: ClientID) { state.withLock { $0.client = client } }
    func note(code: GatewayError.Code) { state.withLock { $0.code = code } }
}
