import Foundation
import Hummingbird
import ProvisioningAPI
import ProvisioningCore

/// Renders a `GatewayError` as RFC 9457 `application/problem+json`, using the spec's own schema.
enum ProblemResponse {
    static func make(_ error: GatewayError) -> Response {
        RequestScope.access?.note(code: error.code)
        var headers: HTTPFields = [.contentType: "application/problem+json"]
        // An issuer's Retry-After that did not fit in the deadline is passed on to the caller.
        if error.isRetryableByTheCaller, let retryAfter = error.retryAfter {
            let (seconds, fraction) = retryAfter.components
            headers[.retryAfter] = "\(max(1, fraction > 0 && seconds < .max ? seconds + 1 : seconds))"
        }
        if let allowed = error.allowedMethods { headers[.allow] = allowed.joined(separator: ", ") }
        // RFC 9110, 11.6.1: a 401 names the scheme the credentials go in (RFC 6750's Bearer).
        if error.code == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        // RFC 9110, 15.5.16: what the operation would have taken.
        if error.code == .unsupportedMediaType {
            headers[.accept] = RequestContractMiddleware.acceptedMediaType
            // RFC 7694, 3: the one content coding a request body may be in.
            headers[.acceptEncoding] = "identity"
        }
        return Response(
            status: .init(code: error.httpStatus),
            headers: headers,
            body: .init(byteBuffer: rendered(error)))
    }

    /// The problem document alone, as its body's bytes.
    static func rendered(_ error: GatewayError) -> ByteBuffer {
        let problem = Components.Schemas.Problem(
            _type: "urn:provisioning-gateway:problem:\(error.code.rawValue)",
            title: error.code.title,
            status: error.httpStatus,
            detail: error.detail,
            code: Components.Schemas.ErrorCode(rawValue: error.code.rawValue) ?? ._internal,
            retryable: error.isRetryableByTheCaller,
            provisioningId: error.provisioningID?.rawValue,
            requestId: RequestScope.requestID.isEmpty ? nil : RequestScope.requestID)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return ByteBuffer(bytes: (try? encoder.encode(problem)) ?? Data())
    }
}
