import Gateway
import HTTPTypes
import Hummingbird

/// Counts every request and its duration by route template, method and status class, outermost so
/// it sees what the client sees (auth refusals, rate limits, problems, 404s).
///
/// The route is the template the router matched (`/v1/cards/{card_id}/wallet-provisioning/apple-pay`),
/// resolved before any middleware runs; a path no route matches is `unmatched`, so neither card ids
/// nor a scanner's paths become label values. Methods outside the standard set are `other` for the
/// same reason. The duration ends when the handler returns its response (bodies here are small).
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: GatewayMetrics

    static var unmatched: String { "unmatched" }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // Wall time spent, not a decision: the real clock even when tests inject another.
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            record(request, context, status: response.status, since: start)
            return response
        } catch {
            record(request, context, status: (error as? any HTTPResponseError)?.status ?? .internalServerError, since: start)
            throw error
        }
    }

    private func record(_ request: Request, _ context: Context, status: HTTPResponse.Status, since start: ContinuousClock.Instant) {
        metrics.httpRequest(
            route: Self.route(context.endpointPath), method: Self.method(request.method), statusClass: Self.statusClass(status),
            duration: ContinuousClock.now - start)
    }

    /// Hummingbird names a request no route matched `NotFound`.
    static func route(_ endpointPath: String?) -> String {
        guard let endpointPath, endpointPath.hasPrefix("/") else { return unmatched }
        return endpointPath
    }

    static func method(_ method: HTTPRequest.Method) -> String {
        let known: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete, .options]
        return known.contains(method) ? method.rawValue : "other"
    }

    /// `2xx`, `4xx`, ...
    static func statusClass(_ status: HTTPResponse.Status) -> String {
        "\(min(max(status.code / 100, 1), 5))xx"
    }
}
