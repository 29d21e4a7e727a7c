import Foundation
import Gateway
import HTTPTypes
import OpenAPIRuntime
import ProvisioningAPI
import ProvisioningCore

/// Checks each request against what the OpenAPI document says its operation accepts, before the
/// generated code decodes it and the handler runs: the document's `pattern`s, lengths, enums,
/// `oneOf`s and `additionalProperties: false` are the server's rules, not a description of them.
/// A request that breaks them is `invalid_request` (400) listing every field and its rule, never a
/// value it sent.
struct RequestContractMiddleware: ServerMiddleware {
    /// At most this many problems are listed in one answer's detail.
    static let listedProblems = 5

    let contract: RequestContract

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        // `Accept` is not negotiated: every answer is JSON (or problem+json), and the generated
        // code checks `Accept` only when it serializes the answer, after the handler has acted (a
        // token suspended, a card provisioned, a card stored, then 400). RFC 9110 (12.5.1) lets a
        // server disregard an `Accept` it cannot satisfy, so it is taken out before anything runs.
        var request = request
        // Only when there is one: a write to the fields copies them.
        if request.headerFields.contains(.accept) { request.headerFields[.accept] = nil }
        guard let operation = contract.operations[operationID] else { return try await next(request, body, metadata) }
        var bytes: Data?
        var body = body
        if operation.hasBody, let arriving = body {
            // The listener's body limit has already bounded what arrives here.
            let collected = try await Data(collecting: arriving, upTo: .max)
            // One lookup: its lines, of which there must be one (RFC 9110, 8.3). Two, even alike,
            // had been read joined as one `application/json, application/json` and refused as not
            // JSON, which misled.
            let contentTypes = request.headerFields[values: .contentType]
            if !collected.isEmpty, contentTypes.count > 1 {
                throw GatewayError(.invalidRequest, "Content-Type is given more than once: send it once")
            }
            let contentType = contentTypes.first
            let isJSON = contentType.map(Self.isJSON) ?? false
            if !collected.isEmpty, let refusal = Self.mediaTypeRefusal(contentType, isJSON: isJSON) { throw refusal }
            if !collected.isEmpty, let refusal = Self.contentCodingRefusal(request.headerFields[values: .contentEncoding]) { throw refusal }
            // An empty body of another type is no body: the contract says whether one is required.
            if isJSON { bytes = collected }
            body = HTTPBody(collected)
        } else if !operation.hasBody, let arriving = body, arriving.length != .known(0) {
            // A body sent to an operation that takes none (a suspend with `{"reason": ...}`, a
            // reload naming a file) was dropped unread, and the caller believed it had said
            // something: refused, as an unknown field in a body is. The listener's limit bounds it.
            let collected = try await Data(collecting: arriving, upTo: .max)
            if !Self.saysNothing(collected) {
                throw GatewayError(.invalidRequest, "this operation takes no body: send the request without one")
            }
            body = HTTPBody()
        }
        let pathParameters = metadata.pathParameters.mapValues { value in
            value.utf8.contains(UInt8(ascii: "%")) ? String(value).removingPercentEncoding ?? String(value) : String(value)
        }
        let query = request.path.map(Self.query) ?? (items: [], problem: nil)
        let problems = contract.problems(
            operationID: operationID, pathParameters: pathParameters, query: query.items, queryProblem: query.problem,
            header: { name in HTTPField.Name(name).map { request.headerFields[values: $0] } ?? [] }, body: bytes)
        if !problems.isEmpty {
            let listed = problems.prefix(Self.listedProblems).joined(separator: "; ")
            let more = problems.count > Self.listedProblems ? "; and \(problems.count - Self.listedProblems) more" : ""
            throw GatewayError(.invalidRequest, listed + more)
        }
        return try await next(request, body, metadata)
    }

    /// A request target's query as the generated code reads it (OpenAPIRuntime's `URIParser` for a
    /// form-style query): split on `&` and the first `=`, `+` a space, then percent-decoded, and
    /// empty when that fails. So what the contract checks is what the handler gets (URLComponents
    /// kept `+`, and re-encoded a whole query once one character in it needed it).
    static func queryItems(_ target: String) -> [(name: String, value: String)] { query(target).items }

    /// The query's items, and what makes it no form-style query, or nil: a part without `=` (an
    /// empty one between two `&` included; a trailing `&` is harmless), which the generated code's
    /// parser throws on when the part comes before the parameter it looks for (so the caller's
    /// typo was a 500), or an escape that is not percent-encoded UTF-8 (read as an empty value,
    /// whose rule then named the wrong fault). The contract refuses either on an operation that
    /// takes a query; one that takes none never parses it.
    static func query(_ target: String) -> (items: [(name: String, value: String)], problem: String?) {
        guard let mark = target.firstIndex(of: "?") else { return ([], nil) }
        var query = target[target.index(after: mark)...]
        if let fragment = query.firstIndex(of: "#") { query = query[..<fragment] }
        var problem: String?
        func decoded(_ text: Substring) -> String {
            let spaced = text.replacingOccurrences(of: "+", with: " ")
            guard let value = spaced.removingPercentEncoding else {
                problem = problem ?? "the query: a % escape that is not percent-encoded UTF-8"
                return ""
            }
            return value
        }
        var parts = query.split(separator: "&", omittingEmptySubsequences: false)
        if parts.last?.isEmpty == true { parts.removeLast() }
        let items = parts.map { pair in
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if halves.count < 2 { problem = problem ?? "the query: every part must be name=value, the parts joined by a single &" }
            return (name: decoded(halves[0]), value: halves.count > 1 ? decoded(halves[1]) : "")
        }
        return (items, problem)
    }

    /// A body that says nothing, which common clients send on a POST that takes none (Angular's
    /// `post(url, {})`, `requests.post(json={})`, SDKs that always send JSON): empty, blank, `{}`
    /// or `null`, spaces aside.
    static func saysNothing(_ body: Data) -> Bool {
        let text = body.filter { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        return text.isEmpty || text.elementsEqual("{}".utf8) || text.elementsEqual("null".utf8)
    }

    /// What every operation with a body takes, as `Accept` says on a 415.
    static let acceptedMediaType = "application/json"

    /// Why a body sent to an operation that takes JSON is `unsupported_media_type` (415), or nil:
    /// its `Content-Type` is missing or not `application/json` (the only type the document gives
    /// a body; the generated code skipped any other and answered "the body is required" to a
    /// body it had not read), or JSON in another charset than UTF-8 (RFC 8259, 8.1: JSON between
    /// systems is UTF-8; `charset=utf-16` was read as UTF-8). The detail names no value the
    /// request sent.
    static func mediaTypeRefusal(_ contentType: String?, isJSON known: Bool? = nil) -> GatewayError? {
        guard let contentType else {
            return GatewayError(.unsupportedMediaType, "the body has no Content-Type: send Content-Type: application/json")
        }
        guard known ?? isJSON(contentType) else {
            return GatewayError(.unsupportedMediaType, "the body must be JSON: send Content-Type: application/json")
        }
        guard charsetIsUTF8(contentType) else {
            return GatewayError(.unsupportedMediaType, "the body must be UTF-8 JSON: send Content-Type: application/json, without a charset or with charset=utf-8")
        }
        return nil
    }

    /// Why a body in a content coding (`Content-Encoding` other than `identity`: gzip, br, ...) is
    /// `unsupported_media_type` (415, RFC 9110, 8.4), or nil: the gateway decodes none, and read
    /// such a body as it came (a body marked `br` as plain JSON; the input probe). The answer says
    /// `Accept-Encoding: identity` (RFC 7694). The detail names no value the request sent.
    static func contentCodingRefusal(_ values: [String]) -> GatewayError? {
        let codings = values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard codings.contains(where: { $0.lowercased() != "identity" }) else { return nil }
        return GatewayError(.unsupportedMediaType, "the body must not be in a content coding: send it without Content-Encoding (or with identity)")
    }

    /// Whether a media type's `charset` parameter, if it has one, names UTF-8 (case aside, quoted
    /// or not: RFC 9110, 5.6.6 and 8.3.2).
    static func charsetIsUTF8(_ contentType: String) -> Bool {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset" else { continue }
            guard pair.count == 2 else { return false }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            guard ["utf-8", "utf8"].contains(value.lowercased()) else { return false }
        }
        return true
    }

    /// `application/json`, parameters (`; charset=utf-8`), spaces and case aside.
    static func isJSON(_ contentType: String) -> Bool {
        let essence = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let trimmed = essence.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
        return trimmed.count == 16 && trimmed.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }.elementsEqual("application/json".utf8)
    }
}

/// The served document, read and compiled once per process (every gateway a process builds
/// serves the same one): its bytes for `GET /openapi.yaml`, its request rules for this
/// middleware and its paths' methods for the 405 answers.
enum ServedContract {
    private static let bytes: Result<Data, any Error> = Result { try OpenAPISpec.yaml() }
    private static let compiled: Result<RequestContract, any Error> = Result { try RequestContract(spec: bytes.get()) }
    static func document() throws -> Data { try bytes.get() }
    static func contract() throws -> RequestContract { try compiled.get() }
}
