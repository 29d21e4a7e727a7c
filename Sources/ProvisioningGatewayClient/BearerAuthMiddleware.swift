import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Sends the client's API key as `Authorization: Bearer <key>` on every request (the spec's
/// `apiKey` scheme). Requests the gateway serves without a key (`/healthz`, `/readyz`, the sandbox's
/// `/metrics`) ignore it. The key is never logged or put in an error.
public struct BearerAuthMiddleware: ClientMiddleware {
    private let value: String

    public init(apiKey: String) {
        value = "Bearer \(apiKey)"
    }

    public func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = value
        return try await next(request, body, baseURL)
    }
}
