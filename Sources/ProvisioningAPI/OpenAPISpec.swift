import Foundation

/// The spec the server code is generated from, served verbatim at `GET /openapi.yaml`.
public enum OpenAPISpec {
    public static func yaml() throws -> Data {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else {
            throw CocoaError(.fileNoSuchFile)
        }
        return try Data(contentsOf: url)
    }
}
