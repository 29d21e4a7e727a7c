import Foundation
import HTTPTypes
import Hummingbird

/// Gives every request an id (the caller's `X-Request-Id` when it sends a sane one), echoed in the
/// response and in problem bodies so a fintech's support ticket can name the request.
struct RequestIDMiddleware<Context: RequestContext>: RouterMiddleware {
    static var headerName: HTTPField.Name { HTTPField.Name("X-Request-Id")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let sent = request.headers[Self.headerName]
        let id = sent.flatMap { $0.count <= 64 && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" } ? $0 : nil }
            ?? "req_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        var response = try await RequestScope.$requestID.withValue(id) { try await next(request, context) }
        response.headers[Self.headerName] = id
        return response
    }
}
