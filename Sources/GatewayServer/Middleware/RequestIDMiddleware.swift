import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ProvisioningCore

/// Gives every request an id (the caller's `X-Request-Id` when it sends a sane one), echoed in the
/// response and in problem bodies so a fintech's support ticket can name the request, and logged
/// as `request_id` on every line of the request: the gateway's lines (through `RequestScope.logger`)
/// and Hummingbird's (its context logger, whose own `hb.request.id` it replaces).
struct RequestIDMiddleware<Context: RequestContext>: RouterMiddleware {
    static var headerName: HTTPField.Name { HTTPField.Name("X-Request-Id")! }
    static var metadataKey: String { "request_id" }
    /// The gateway's logger, which the request's logger extends.
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let sent = request.headers[Self.headerName]
        let id = sent.flatMap { Self.isUsable($0) ? $0 : nil }
            ?? "req_" + RandomID.hex128()
        var context = context
        context.logger[metadataKey: "hb.request.id"] = nil
        context.logger[metadataKey: Self.metadataKey] = "\(id)"
        var requestLogger = logger
        requestLogger[metadataKey: Self.metadataKey] = "\(id)"
        var response = try await RequestScope.$requestID.withValue(id) {
            try await RequestScope.$logger.withValue(requestLogger) { try await next(request, context) }
        }
        response.headers[Self.headerName] = id
        return response
    }

    /// 1 to 64 ASCII letters, digits, `-` and `_` (the spec's `RequestId` parameter): safe in a log
    /// line and a support ticket; nothing that reads as a card number, which every log line,
    /// answer and span of the request would repeat; and not in the shape of the gateway's own ids
    /// (`req_` and 32 lowercase hex digits), which name one request each: a caller could otherwise
    /// send another request's id, another tenant's included, and its lines would read as that
    /// request's in the log. Anything else is replaced, never refused.
    static func isUsable(_ id: String) -> Bool {
        let bytes = id.utf8
        return (1...64).contains(bytes.count) && bytes.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
        } && !isGatewayShaped(bytes) && !InputRules.holdsCardNumber(id)
    }

    /// `req_` and 32 lowercase hex digits: what the gateway gives a request without a usable id.
    static func isGatewayShaped(_ bytes: String.UTF8View) -> Bool {
        bytes.count == 36 && bytes.starts(with: "req_".utf8)
            && bytes.dropFirst(4).allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}
