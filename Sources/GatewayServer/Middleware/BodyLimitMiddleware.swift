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
        if let declared = request.headers[.contentLength] {
            switch Int(declared) {
            case let length? where length > maxBytes:
                throw GatewayError(.requestTooLarge, "the body is \(length) bytes; the gateway accepts at most \(maxBytes)")
            case nil where !declared.isEmpty && declared.utf8.allSatisfy({ (0x30...0x39).contains($0) }):
                // Digits past Int's range (2^63 and up, which HTTP's parser takes up to 2^64 - 1)
                // are a length too large, said at once: not a body waited for until the read timeout.
                throw GatewayError(.requestTooLarge, "the body's Content-Length is larger than any the gateway accepts (at most \(maxBytes) bytes)")
            default:
                break
            }
        }
        var request = request
        do {
            _ = try await request.collectBody(upTo: maxBytes)
        } catch is NIOTooManyBytesError {
            throw GatewayError(.requestTooLarge, "the body is over \(maxBytes) bytes")
        } catch is RequestBodyTimedOut {
            // Answered 408 already (`HTTPEdgeHandler`, which drops the answer this makes); this
            // is what the request's log line says.
            throw GatewayError(.requestTimeout, "the body did not arrive whole within server.read_timeout_ms")
        } catch {
            // A body that cannot be read to its end: chunked framing that is not HTTP's (a chunk
            // size that is not hexadecimal, a chunk longer than it said), or a connection closed
            // before the end. The caller's mistake, not a size.
            throw GatewayError(.invalidRequest, "the body could not be read: its framing is malformed or it ended early")
        }
        return try await next(request, context)
    }
}
