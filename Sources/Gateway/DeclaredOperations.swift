import Foundation
import Yams

/// The methods each path of the OpenAPI document declares, so the server can answer any other
/// method on a known path with 405 and `Allow` (RFC 9110, 15.5.6) instead of 404: the spec is the
/// list, so the two cannot drift.
public enum DeclaredOperations {
    /// The HTTP methods an OpenAPI path item may declare, and QUERY (RFC 9110's registry has it;
    /// OpenAPI 3.0 cannot declare it, so it always answers 405 on a known path).
    public static let methods = ["GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE", "QUERY"]

    /// Path template (`/v1/cards/{card_id}`) -> its declared methods, upper-case, in `methods` order.
    public static func read(spec: Data) throws -> [String: [String]] {
        guard let document = try Yams.load(yaml: String(decoding: spec, as: UTF8.self)) as? [String: Any],
              let paths = document["paths"] as? [String: Any] else { return [:] }
        var declared: [String: [String]] = [:]
        for (path, item) in paths {
            guard let item = item as? [String: Any] else { continue }
            declared[path] = methods.filter { item[$0.lowercased()] != nil }
        }
        return declared
    }
}
