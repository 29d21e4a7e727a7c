import ProvisioningCore

/// The default reading of an upstream's HTTP status, shared by every connector; each connector
/// adds its own error body's vocabulary to the detail. A 401/403 means the gateway's credentials
/// are wrong, which is not the caller's fault, so it is kept apart from a rejected request.
enum UpstreamStatus {
    static func error(issuer: IssuerID, status: Int, upstreamCode: String?) -> GatewayError {
        let said = upstreamCode.map { " (\($0))" } ?? ""
        switch status {
        case 401, 403:
            return GatewayError(.upstreamAuthFailed, "\(issuer) refused the gateway's credentials: HTTP \(status)\(said)",
                                upstreamStatus: status)
        case 408, 504:
            return GatewayError(.upstreamTimeout, "\(issuer) timed out: HTTP \(status)\(said)", upstreamStatus: status)
        case 429:
            return GatewayError(.upstreamUnavailable, "\(issuer) is throttling: HTTP 429\(said)", upstreamStatus: status)
        case 400..<500:
            return GatewayError(.upstreamRejected, "\(issuer) rejected the request: HTTP \(status)\(said)", upstreamStatus: status)
        case 500..<600:
            return GatewayError(.upstreamUnavailable, "\(issuer) failed: HTTP \(status)\(said)", upstreamStatus: status)
        default:
            return GatewayError(.upstreamProtocolError, "\(issuer) answered with unexpected HTTP \(status)", upstreamStatus: status)
        }
    }
}
