import Foundation

/// An issuer's base URL, taken apart once when its connector is built: where to connect, the Host
/// header, and the percent-encoded path every request's path starts with. A request's target is
/// that path and its own percent-encoded segments joined as text, so no URL is built and parsed
/// again on each request (URLComponents, then URL, then its parts: 2 µs in a warm loop, about
/// 1.5 % of a provisioning's samples in the server's profile).
public struct UpstreamBase: Sendable, Equatable {
    /// nil when the URL is not http or https with a host: every request then fails as
    /// `upstream_unavailable` ("not http or https with a host") without being sent.
    let target: UpstreamConnectionPool.Target?
    /// The Host header for `target`.
    let hostHeader: String
    /// Percent-encoded, without a trailing "/"; "" for the root.
    let path: String
    /// The base URL's own query, percent-encoded, kept when a request adds none.
    let query: String?

    public init(_ url: URL) {
        let parsed = UpstreamHTTP.target(url)
        target = parsed?.0
        hostHeader = parsed.map { UpstreamHTTP.hostHeader($0.0) } ?? ""
        var path = url.path(percentEncoded: true)
        if path.hasSuffix("/") { path.removeLast() }
        self.path = path
        query = url.query(percentEncoded: true)
    }

    /// The request target below the base: each segment percent-encoded, so an id can never add a
    /// path level or a query of its own, then `query` (each value encoded) or the base's own query.
    func requestTarget(_ segments: [String], query: [(String, String)] = []) -> String {
        var target = path
        for segment in segments {
            target += "/"
            target += URL.encoded(segment, allowed: URL.segmentAllowed)
        }
        if target.isEmpty { target = "/" }
        if !query.isEmpty {
            target += "?"
            for (index, (name, value)) in query.enumerated() {
                if index > 0 { target += "&" }
                target += name + "=" + URL.encoded(value, allowed: URL.queryValueAllowed)
            }
        } else if let own = self.query {
            target += "?" + own
        }
        return target
    }
}

extension URL {
    /// RFC 3986's unreserved characters need no encoding in a path segment or a query value, and
    /// ids almost always consist of nothing else: those are used as they are, without a trip
    /// through Foundation's percent-encoding (CoreFoundation on Linux). Anything else is encoded by
    /// Foundation with `allowed`, which includes every unreserved character, so the result is the same.
    static func encoded(_ text: String, allowed: CharacterSet) -> String {
        if !text.isEmpty, text.utf8.allSatisfy(isUnreserved) { return text }
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// Built once: a `CharacterSet` copied and edited on every call was most of this function's
    /// cost on each upstream request.
    static let segmentAllowed: CharacterSet = {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/;?#")
        return allowed
    }()

    /// `;` too: some servers still split a query on it (the HTML 4 rule), and a value must never
    /// add a parameter.
    static let queryValueAllowed: CharacterSet = {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+?#;")
        return allowed
    }()
}
