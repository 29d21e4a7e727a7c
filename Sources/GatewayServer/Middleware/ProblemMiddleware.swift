import Foundation
import Gateway
import Hummingbird
import Logging
import OpenAPIRuntime
import ProvisioningCore

/// Turns every error thrown below it into problem+json with a stable code, so a caller never
/// sees a bare 500 or a stack trace for its own mistake. An internal error is logged with its cause
/// (the request's logger, so the line has its `request_id`); the cause never reaches the body.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Used when no request logger is in scope.
    let logger: Logger
    /// The spec's paths (templates such as `/v1/cards/{card_id}`) and the methods each declares:
    /// a method no route has (the router's 404: `PROPFIND`, `PURGE`, ...) on one of them is 405
    /// with `Allow`, as the methods `DeclaredOperations` names are, since the path exists.
    var declaredMethods: [String: [String]] = [:]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let refusal = Self.targetRefusal(request.uri.string) { return ProblemResponse.make(refusal) }
        do {
            return try await next(request, context)
        } catch {
            var gatewayError = Self.gatewayError(from: error)
            if let http = error as? HTTPError, http.status == .notFound, let declared = Self.declared(request.uri.path, in: declaredMethods) {
                gatewayError = GatewayError(.methodNotAllowed, "this method is not allowed on \(declared.path); it has \(declared.methods.joined(separator: ", "))")
                gatewayError.allowedMethods = declared.methods
            }
            if gatewayError.code == .internal {
                (RequestScope.logger ?? logger).error("request failed", metadata: [
                    "code": "\(gatewayError.code.rawValue)", "detail": "\(gatewayError.detail)",
                    // The route's template, as the access log says it, never the path itself: an
                    // id there may be anything a caller typed, a card number included.
                    "cause": "\(gatewayError.cause ?? "none")", "route": "\(RequestMetricsMiddleware<Context>.route(context.endpointPath))",
                ])
            }
            return ProblemResponse.make(gatewayError)
        }
    }

    /// Why a request target is refused before anything reads it, or nil: a percent-encoded byte
    /// order mark (`%EF%BB%BF`), which Foundation's percent-decoding drops when it leads a value,
    /// so `/v1/cards/%EF%BB%BFcard_1` had reached (and deleted) `card_1`, and a query name with one
    /// was read as the name without it (the input probe): no id, name or value holds one, and a
    /// proxy's rule written for the path would not see the request as the gateway does.
    static func targetRefusal(_ target: String) -> GatewayError? {
        // On every request: one pass over the target's bytes, letter case aside, nothing copied.
        let utf8 = target.utf8
        var index = utf8.startIndex
        while let percent = utf8[index...].firstIndex(of: UInt8(ascii: "%")) {
            if utf8[percent...].prefix(percentEncodedByteOrderMark.count).elementsEqual(percentEncodedByteOrderMark, by: { $0 | 0x20 == $1 | 0x20 }) {
                return GatewayError(.invalidRequest, "the request target holds a byte order mark (%EF%BB%BF), which no id, name or value holds")
            }
            index = utf8.index(after: percent)
        }
        return nil
    }

    /// The spec's path template `path` falls under, with its methods, if any: literal segments
    /// equal, a `{name}` segment any one.
    static func declared(_ path: String, in declaredMethods: [String: [String]]) -> (path: String, methods: [String])? {
        // Empty segments are skipped, as the router skips them (`/v1//cards/` is `/v1/cards`).
        let segments = path.split(separator: "/")
        for (template, methods) in declaredMethods {
            let parts = template.split(separator: "/")
            guard parts.count == segments.count else { continue }
            if zip(parts, segments).allSatisfy({ part, segment in part.hasPrefix("{") && part.hasSuffix("}") || part == segment }) {
                return (template, methods)
            }
        }
        return nil
    }

    static func gatewayError(from error: any Error) -> GatewayError {
        switch error {
        case let error as GatewayError:
            return error
        case let error as ServerError:
            if let underlying = error.underlyingError as? GatewayError { return underlying }
            if let decoding = error.underlyingError as? DecodingError { return invalidBody(decoding) }
            // A handler's own failure (a store error it did not map) is the gateway's, not the request's.
            if error.httpStatus == .internalServerError {
                return GatewayError(.internal, "the gateway failed", cause: error.underlyingError)
            }
            // Everything else the generated code refuses is the shape of the request itself
            // (content type, missing body, path or query values).
            // (bounded and printable: it may quote a header the caller sent)
            return GatewayError(.invalidRequest, String(LineSafeLogHandler<StreamLogHandler>.escape(
                InputRules.withoutLongDigitRuns(error.causeDescription)).prefix(200)))
        case let error as DecodingError:
            return invalidBody(error)
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge: return GatewayError(.requestTooLarge, "the body is larger than the gateway accepts")
            case .notFound: return GatewayError(.notFound, "no such endpoint")
            case .methodNotAllowed: return GatewayError(.invalidRequest, "method not allowed on this endpoint")
            case .unauthorized: return GatewayError(.unauthorized, error.body ?? "unauthorized")
            default:
                return error.status.code < 500
                    ? GatewayError(.invalidRequest, error.body ?? error.status.reasonPhrase)
                    : GatewayError(.internal, "the gateway failed", cause: error)
            }
        default:
            return GatewayError(.internal, "the gateway failed", cause: error)
        }
    }

    /// Names the JSON path that is wrong, never the value sent.
    static func invalidBody(_ error: DecodingError) -> GatewayError {
        func path(_ keys: [any CodingKey]) -> String {
            let text = keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return text.hasPrefix(".") ? String(text.dropFirst()) : text
        }
        switch error {
        case .keyNotFound(let key, let context):
            return GatewayError(.invalidRequest, "\(path(context.codingPath + [key])): required")
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return GatewayError(.invalidRequest, "\(path(context.codingPath)): wrong type")
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? GatewayError(.invalidRequest, "the body is not valid JSON")
                : GatewayError(.invalidRequest, "\(path(context.codingPath)): not an accepted value")
        @unknown default:
            return GatewayError(.invalidRequest, "the body is not valid JSON")
        }
    }
}

/// `%EF%BB%BF`, as `ProblemMiddleware.targetRefusal` looks for it.
private let percentEncodedByteOrderMark = Array("%EF%BB%BF".utf8)
