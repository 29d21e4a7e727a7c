import Hummingbird
import NIOCore
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
        } catch is NIOTooManyBytesError {
            throw GatewayError(.requestTooLarge, "the body is over \(maxBytes) bytes")
        } catch {
            // A body that cannot be read to its end: chunked framing that is not HTTP's (a chunk
            // size that is not hexadecimal, a chunk longer than it said), or a connection closed
            // before the end. The caller's mistake, not a size.
            throw GatewayError(.invalidRequest, "the body could not be read: its framing is malformed or it ended early")
        }
        return try await next(request, context)
    }
}
