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
        // Only JSON bodies are the contract's; the generated code refuses another content type.
        if operation.hasBody, let body, request.headerFields[.contentType].map(Self.isJSON) ?? false {
            // The listener's body limit has already bounded what arrives here.
            let collected = try await Data(collecting: body, upTo: .max)
            bytes = collected
        }
        if let bytes { body = HTTPBody(bytes) }
        let pathParameters = metadata.pathParameters.mapValues { value in
            value.utf8.contains(UInt8(ascii: "%")) ? String(value).removingPercentEncoding ?? String(value) : String(value)
        }
        let query = request.path.map(Self.queryItems) ?? []
        let problems = contract.problems(
            operationID: operationID, pathParameters: pathParameters, query: query,
            header: { name in HTTPField.Name(name).flatMap { request.headerFields[$0] } }, body: bytes)
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
    static func queryItems(_ target: String) -> [(name: String, value: String)] {
        guard let mark = target.firstIndex(of: "?") else { return [] }
        var query = target[target.index(after: mark)...]
        if let fragment = query.firstIndex(of: "#") { query = query[..<fragment] }
        func decoded(_ text: Substring) -> String {
            text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
        }
        return query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (name: decoded(parts[0]), value: parts.count > 1 ? decoded(parts[1]) : "")
        }
    }

    /// `application/json` or any `+json` type, parameters (`; charset=utf-8`) and case aside.
    static func isJSON(_ contentType: String) -> Bool {
        let essence = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let trimmed = essence.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
        let type = trimmed.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
        return type.elementsEqual("application/json".utf8) || (type.count >= 5 && type.suffix(5).elementsEqual("+json".utf8))
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
