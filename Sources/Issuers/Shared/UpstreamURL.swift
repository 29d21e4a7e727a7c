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
            path += "/" + (segment.addingPercentEncoding(withAllowedCharacters: allowed) ?? segment)
        }
        components.percentEncodedPath = path
        if !query.isEmpty {
            let queryAllowed = Self.queryValueAllowed
            components.percentEncodedQuery = query.map { name, value in
                name + "=" + (value.addingPercentEncoding(withAllowedCharacters: queryAllowed) ?? value)
            }.joined(separator: "&")
        }
        return components.url!
    }

    /// Built once: a `CharacterSet` copied and edited on every call was most of this function's
    /// cost on each upstream request.
    private static let segmentAllowed: CharacterSet = {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/;?#")
        return allowed
    }()

    private static let queryValueAllowed: CharacterSet = {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+?#")
        return allowed
    }()
}
