import Foundation

extension URL {
    /// The base URL with path segments appended, each percent-encoded so an id can never add a
    /// path level or a query of its own, and an optional query.
    func appending(segments: [String], query: [(String, String)] = []) -> URL {
        let allowed = Self.segmentAllowed
        var components = URLComponents(url: self, resolvingAgainstBaseURL: false)!
        var path = components.percentEncodedPath
        if path.hasSuffix("/") { path.removeLast() }
        for segment in segments {
            path += "/" + Self.encoded(segment, allowed: allowed)
        }
        components.percentEncodedPath = path
        if !query.isEmpty {
            let queryAllowed = Self.queryValueAllowed
            components.percentEncodedQuery = query.map { name, value in
                name + "=" + Self.encoded(value, allowed: queryAllowed)
            }.joined(separator: "&")
        }
        return components.url!
    }

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

    static let queryValueAllowed: CharacterSet = {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+?#")
        return allowed
    }()
}
