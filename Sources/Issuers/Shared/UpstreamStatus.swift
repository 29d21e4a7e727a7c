import Foundation
import ProvisioningCore

/// The default reading of an upstream's HTTP status, shared by every connector; each connector
/// adds its own error body's vocabulary to the detail. A 401/403 means the gateway's credentials
/// are wrong, which is not the caller's fault, so it is kept apart from a rejected request.
enum UpstreamStatus {
    static func error(issuer: IssuerID, response: UpstreamHTTP.Response, upstreamCode: String?) -> GatewayError {
        let error = error(issuer: issuer, status: response.status, upstreamCode: upstreamCode, withheld: response.withheld)
        guard let retryAfter = retryAfter(response.headers.first(name: "Retry-After"), answeredAt: response.headers.first(name: "Date"))
        else { return error }
        return GatewayError(error.code, error.detail, upstreamStatus: error.upstreamStatus, retryAfter: retryAfter)
    }

    /// The longest wait an issuer's `Retry-After` is read as. Past it the request is over anyway
    /// (no deadline is that long), and the caller is told no more than this: an issuer's number
    /// is not passed on unbounded (one of 2^63 seconds once overflowed the gateway's arithmetic).
    static let longestRetryAfter: Duration = .seconds(3_600)

    /// `Retry-After` as delay-seconds or an HTTP date (RFC 9110, 10.2.3), at most
    /// `longestRetryAfter`; nil when absent or unreadable. A date is read against the answer's
    /// own `Date` header when it has one (the issuer's clock against the issuer's clock), else
    /// against `now`.
    static func retryAfter(_ value: String?, answeredAt: String? = nil, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        let longest = longestRetryAfter
        if value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            // Any run of digits is a number of seconds, however long.
            guard let seconds = Int(value), seconds <= longest.components.seconds else { return longest }
            return .seconds(seconds)
        }
        guard let date = httpDate(value) else { return nil }
        let reference = answeredAt.flatMap(httpDate) ?? now
        let seconds = date.timeIntervalSince(reference)
        guard seconds > 0 else { return .zero }
        guard seconds < Double(longest.components.seconds) else { return longest }
        return .milliseconds(Int(seconds * 1000))
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form RFC 9110 says senders use.
    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.date(from: text.trimmingCharacters(in: .whitespaces))
    }

    /// What of an issuer's own error code the gateway repeats in an error's detail, which reaches
    /// the caller and the logs. A code is a name from the issuer's vocabulary (with Bridge's, the
    /// fields at fault: `bad_customer_request, field first_name,ssn`), so only text that reads as
    /// one is shown: at most 100 ASCII letters, digits, spaces and `_-.,`, and no 8 digits in
    /// one run, however spaced, dashed, dotted or underscored (a card or account number an issuer echoed,
    /// `4111 1111 1111 1111` included). Anything else is left out whole, never trimmed into
    /// something that reads well: an issuer may put a card number, a credential it was sent, or
    /// terminal escapes in it.
    /// Nor is a code that may be a credential (`InputRules.looksLikeCredential`), or that repeats
    /// any of `withheld`, the values the request's headers carried: an issuer that echoes the
    /// gateway's own key in its error would otherwise hand it to the tenant and the log.
    static func shownCode(_ code: String?, withheld: [String] = []) -> String? {
        code.flatMap {
            InputRules.readsAsCode($0, punctuation: " -.,_") && !InputRules.looksLikeCredential($0)
                && !withheld.contains(where: $0.contains) ? $0 : nil
        }
    }

    static func error(issuer: IssuerID, status: Int, upstreamCode: String?, withheld: [String] = []) -> GatewayError {
        let said = shownCode(upstreamCode, withheld: withheld).map { " (\($0))" } ?? ""
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
