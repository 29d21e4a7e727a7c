import Hummingbird
import ProvisioningCore

/// Reads at most `maxBytes` of a body, whether it announces its length or streams it chunked.
struct BodyLimitMiddleware<Context: RequestContext>: RouterMiddleware {
    /// `server.max_body_bytes` of the request's config generation.
    let limit: @Sendable () -> Int

    init(maxBytes: @escaping @Sendable () -> Int) {
        limit = maxBytes
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let maxBytes = limit()
        if let length = request.headers[.contentLength].flatMap(Int.init), length > maxBytes {
            throw GatewayError(.requestTooLarge, "the body is \(length) bytes; the gateway accepts at most \(maxBytes)")
        }
        var request = request
        do {
            _ = try await request.collectBody(upTo: maxBytes)
        } catch {
            throw GatewayError(.requestTooLarge, "the body is over \(maxBytes) bytes")
        }
        return try await next(request, context)
    }
}
