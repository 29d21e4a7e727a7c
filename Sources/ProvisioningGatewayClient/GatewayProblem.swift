import Foundation

/// A gateway answer that is not a success: the RFC 9457 problem every operation answers with
/// (`application/problem+json`), as a Swift error. Branch on `code` (stable, see the spec's
/// `ErrorCode` and the README's error table) and `retryable`, never on `detail`.
public struct GatewayProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status (e.g. 404, 429, 503).
    public let status: Int
    /// The stable problem code, e.g. `card_not_found`, `rate_limited`, `idempotency_key_reused`.
    public let code: String
    /// True when the same request may succeed if sent again later (after `retryAfter` when given).
    public let retryable: Bool
    /// A human-readable explanation (for logs and support, not for branching).
    public let detail: String?
    /// The provisioning's id in the audit trail (`GET /v1/provisionings/{id}`), when one was recorded.
    public let provisioningID: String?
    /// The gateway's id of the request, to quote to its operators.
    public let requestID: String?
    /// Seconds to wait before sending again, from `Retry-After` where the spec declares that header
    /// (a 429, and an issuer's wait passed on with a 503: `UpstreamRetryAfter`); the generated
    /// client reads no undeclared header.
    public let retryAfter: Int?

    public init(status: Int, code: String, retryable: Bool, detail: String? = nil, provisioningID: String? = nil,
                requestID: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.retryable = retryable
        self.detail = detail
        self.provisioningID = provisioningID
        self.requestID = requestID
        self.retryAfter = retryAfter
    }

    /// The generated problem body; `status` is the HTTP status of the answer that carried it.
    public init(_ problem: Components.Schemas.Problem, status: Int, retryAfter: Int? = nil) {
        self.init(status: status, code: problem.code.rawValue, retryable: problem.retryable, detail: problem.detail,
                  provisioningID: problem.provisioningId, requestID: problem.requestId, retryAfter: retryAfter)
    }

    public var description: String {
        var text = "HTTP \(status) \(code)\(retryable ? " (retryable)" : "")"
        if let detail { text += ": \(detail)" }
        if let retryAfter { text += " [retry after \(retryAfter) s]" }
        if let provisioningID { text += " [provisioning \(provisioningID)]" }
        if let requestID { text += " [request \(requestID)]" }
        return text
    }
}
