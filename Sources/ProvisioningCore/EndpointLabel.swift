import Foundation

/// How an upstream endpoint is named in metrics labels, health reports and audit events:
/// `scheme://host[:port]/path`. User info, query and fragment never appear: they can hold
/// credentials, and labels are exported to whoever scrapes `/metrics`.
public enum EndpointLabel {
    public static func render(_ url: URL) -> String {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return fallback(url.absoluteString) }
        return render(components) ?? fallback(url.absoluteString)
    }

    /// A configured endpoint string. A name that is not a URL with a host (`local`) is kept as it
    /// is, less anything that looks like user info, a query or a fragment.
    public static func render(_ endpoint: String) -> String {
        guard let components = URLComponents(string: endpoint), let rendered = render(components) else { return fallback(endpoint) }
        return rendered
    }

    static func render(_ components: URLComponents) -> String? {
        guard let scheme = components.scheme?.lowercased(), let host = components.percentEncodedHost, !host.isEmpty else { return nil }
        var label = "\(scheme)://"
        // An IPv6 literal keeps (or gets) its brackets.
        label += host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        if let port = components.port { label += ":\(port)" }
        label += components.percentEncodedPath
        return label
    }

    static func fallback(_ text: String) -> String {
        var text = Substring(text)
        if let end = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = text[..<end] }
        if let at = text.lastIndex(of: "@") {
            // Whatever came before the last "@" (after a scheme, if any) is taken for user info.
            let scheme = text.range(of: "://").map { text[..<$0.upperBound] } ?? ""
            text = scheme + text[text.index(after: at)...]
        }
        return String(text)
    }
}
