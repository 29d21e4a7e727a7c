import Gateway
import Hummingbird

/// Authenticates `/v1` calls and makes the client known to the handlers.
struct ClientAuthMiddleware<Context: RequestContext>: RouterMiddleware {
    let authenticator: ClientAuthenticator

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.uri.path.hasPrefix("/v1/") else { return try await next(request, context) }
        let client = try authenticator.authenticate(authorization: request.headers[.authorization])
        return try await RequestScope.$client.withValue(client) { try await next(request, context) }
    }
}
