import Foundation

extension URL {
    /// The base URL with path segments appended, each percent-encoded so an id can never add a
    /// path level or a query of its own, and an optional query.
    func appending(segments: [String], query: [(String, String)] = []) -> URL {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/;?#")
        var components = URLComponents(url: self, resolvingAgainstBaseURL: false)!
        var path = components.percentEncodedPath
        if path.hasSuffix("/") { path.removeLast() }
        for segment in segments {
            path += "/" + (segment.addingPercentEncoding(withAllowedCharacters: allowed) ?? segment)
        }
        components.percentEncodedPath = path
        if !query.isEmpty {
            var queryAllowed = CharacterSet.urlQueryAllowed
            queryAllowed.remove(charactersIn: "&=+?#")
            components.percentEncodedQuery = query.map { name, value in
                name + "=" + (value.addingPercentEncoding(withAllowedCharacters: queryAllowed) ?? value)
            }.joined(separator: "&")
        }
        return components.url!
    }
}
