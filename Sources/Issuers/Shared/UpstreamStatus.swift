import Foundation
import ProvisioningCore

/// The default reading of an upstream's HTTP status, shared by every connector; each connector
/// adds its own error body's vocabulary to the detail. A 401/403 means the gateway's credentials
/// are wrong, which is not the caller's fault, so it is kept apart from a rejected request.
enum UpstreamStatus {
    static func error(issuer: IssuerID, response: UpstreamHTTP.Response, upstreamCode: String?) -> GatewayError {
        let error = error(issuer: issuer, status: response.status, upstreamCode: upstreamCode)
        guard let retryAfter = retryAfter(response.headers.first(name: "Retry-After")) else { return error }
        return GatewayError(error.code, error.detail, upstreamStatus: error.upstreamStatus, retryAfter: retryAfter)
    }

    /// `Retry-After` as delay-seconds or an HTTP date (RFC 9110, 10.2.3); nil when absent or unreadable.
    static func retryAfter(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return .milliseconds(max(0, Int(date.timeIntervalSince(now) * 1000)))
    }

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
