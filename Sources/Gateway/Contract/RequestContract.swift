import Foundation
import ProvisioningCore
import Yams

/// What the OpenAPI document says each operation accepts (path and query parameters, header
/// parameters and the JSON body), compiled from the document itself. The server checks every
/// request against it before the handler runs, so the spec a client reads and the rules the
/// server applies are one text and cannot drift. A request that breaks it is `invalid_request`
/// (400) naming each field and its rule; what only the server's state can decide (a card that
/// does not exist, an issuer that is not configured) is another code.
///
/// One rule for the whole API: unknown fields in a JSON body are refused (every request schema
/// has `additionalProperties: false`); unknown headers are ignored, as proxies and SDKs add their
/// own. An operation that takes query parameters (a list and its filters) refuses any other, since
/// a misspelled filter (`?card=` for `?card_id=`) would silently widen the answer; one that takes
/// none ignores a query. `_`, a cache-buster, is ignored everywhere.
public struct RequestContract: Sendable {
    public struct Parameter: Sendable {
        public let name: String
        public let required: Bool
        let schema: JSONSchemaCheck
        /// `integer` parameters arrive as text and are checked as numbers.
        let isInteger: Bool
        /// `x-replaced-when-unusable`: any value is taken (the gateway replaces one it cannot use),
        /// two fields of it as well (`X-Request-Id`: a proxy that adds its own beside the caller's).
        var replacedWhenUnusable = false
    }

    public struct Operation: Sendable {
        public let id: String
        public let method: String
        public let path: String
        public let pathParameters: [Parameter]
        public let queryParameters: [Parameter]
        public let headerParameters: [Parameter]
        public let bodyRequired: Bool
        let body: JSONSchemaCheck?

        public var hasBody: Bool { body != nil }
    }

    public let operations: [String: Operation]

    /// Path template (`/v1/cards/{card_id}`) -> the methods it declares, upper-case, in
    /// `DeclaredOperations.methods` order: every other method there answers 405 with `Allow`.
    public var declaredMethods: [String: [String]] {
        Dictionary(grouping: operations.values, by: \.path).mapValues { declared in
            DeclaredOperations.methods.filter { method in declared.contains { $0.method == method } }
        }
    }

    public init(spec: Data) throws {
        guard let document = try Yams.load(yaml: String(decoding: spec, as: UTF8.self)) as? [String: Any],
              let paths = document["paths"] as? [String: Any] else {
            throw JSONSchemaCheck.SchemaError(description: "the document has no paths")
        }
        let components = document["components"] as? [String: Any] ?? [:]
        let sharedParameters = components["parameters"] as? [String: Any] ?? [:]
        func resolve(_ parameter: Any) throws -> [String: Any] {
            guard let parameter = parameter as? [String: Any] else { throw JSONSchemaCheck.SchemaError(description: "a parameter is not a mapping") }
            guard let ref = parameter["$ref"] as? String else { return parameter }
            let prefix = "#/components/parameters/"
            guard ref.hasPrefix(prefix), let target = sharedParameters[String(ref.dropFirst(prefix.count))] as? [String: Any] else {
                throw JSONSchemaCheck.SchemaError(description: "\(ref) does not resolve")
            }
            return target
        }
        var operations: [String: Operation] = [:]
        for (path, item) in paths {
            guard let item = item as? [String: Any] else { continue }
            let common = try (item["parameters"] as? [Any] ?? []).map(resolve)
            for method in DeclaredOperations.methods {
                guard let operation = item[method.lowercased()] as? [String: Any], let id = operation["operationId"] as? String else { continue }
                var byLocation: [String: [Parameter]] = [:]
                for parameter in try common + (operation["parameters"] as? [Any] ?? []).map(resolve) {
                    guard let name = parameter["name"] as? String, let location = parameter["in"] as? String,
                          let schema = parameter["schema"] else {
                        throw JSONSchemaCheck.SchemaError(description: "\(id): a parameter has no name, location or schema")
                    }
                    let check: JSONSchemaCheck
                    do { check = try JSONSchemaCheck(schema, components: components) } catch {
                        throw JSONSchemaCheck.SchemaError(description: "\(id) \(name): \(error.description)")
                    }
                    byLocation[location, default: []].append(Parameter(
                        name: name, required: (parameter["required"] as? Bool) ?? (location == "path"), schema: check,
                        isInteger: (schema as? [String: Any])?["type"] as? String == "integer",
                        replacedWhenUnusable: parameter["x-replaced-when-unusable"] as? Bool ?? false))
                }
                var body: JSONSchemaCheck?
                var bodyRequired = false
                if let requestBody = operation["requestBody"] as? [String: Any] {
                    bodyRequired = (requestBody["required"] as? Bool) ?? false
                    if let schema = ((requestBody["content"] as? [String: Any])?["application/json"] as? [String: Any])?["schema"] {
                        do { body = try JSONSchemaCheck(schema, components: components) } catch {
                            throw JSONSchemaCheck.SchemaError(description: "\(id) body: \(error.description)")
                        }
                    }
                }
                operations[id] = Operation(
                    id: id, method: method, path: path, pathParameters: byLocation["path"] ?? [],
                    queryParameters: byLocation["query"] ?? [], headerParameters: byLocation["header"] ?? [],
                    bodyRequired: bodyRequired, body: body)
            }
        }
        self.operations = operations
    }

    /// What is wrong with a request to `operationID`, each `field: rule`; empty when it holds.
    /// `query` is the decoded query items in order, and `queryProblem` what makes the query no
    /// form-style query (refused only by an operation that takes one: no other parses it);
    /// `header` reads a header's fields by name (none, one, or each of several); `body` is the JSON
    /// body's bytes (nil or empty when there is none).
    public func problems(
        operationID: String, pathParameters: [String: String], query: [(name: String, value: String)], queryProblem: String? = nil,
        header: (String) -> [String], body: Data?
    ) -> [String] {
        guard let operation = operations[operationID] else { return [] }
        var problems: [String] = []
        if let queryProblem, !operation.queryParameters.isEmpty { problems.append(queryProblem) }
        func check(_ parameter: Parameter, _ text: String?) {
            guard let text else {
                if parameter.required { problems.append("\(parameter.name): required") }
                return
            }
            if parameter.isInteger {
                guard let number = Int64(text) else {
                    problems.append("\(parameter.name): must be an integer")
                    return
                }
                parameter.schema.check(.integer(number), at: parameter.name, into: &problems)
            } else {
                parameter.schema.check(.string(text), at: parameter.name, into: &problems)
            }
        }
        for parameter in operation.pathParameters { check(parameter, pathParameters[parameter.name]) }
        if !operation.queryParameters.isEmpty {
            let known = operation.queryParameters.map(\.name)
            var refused: Set<String> = []
            // `_` is the cache-buster proxies and HTTP libraries add (`?_=1700000000`).
            for item in query where item.name != "_" && !known.contains(item.name) && refused.count < 5 && refused.insert(item.name).inserted {
                // The name is repeated only when it reads as one (never a long digit run, which
                // may be a card number given by mistake, nor what may be a key pasted there).
                let shown = InputRules.isName(item.name) && !InputRules.hasLongDigitRun(item.name)
                    && !InputRules.looksLikeCredential(item.name, uuids: false) ? "\(item.name)" : "a query parameter"
                problems.append("\(shown): not a parameter of this operation, which takes \(known.joined(separator: ", "))")
            }
        }
        for parameter in operation.queryParameters {
            let values = query.filter { $0.name == parameter.name }
            if values.count > 1 {
                problems.append("\(parameter.name): given more than once")
                continue
            }
            check(parameter, values.first?.value)
        }
        for parameter in operation.headerParameters {
            let values = header(parameter.name)
            // Two fields of one header parameter (two `Idempotency-Key`s) are not one value joined
            // by ", ": which one the caller meant cannot be told, as for a query parameter. Unless
            // the gateway replaces what it cannot use (the spec says so of `X-Request-Id`, whose
            // second line a proxy may add: it had been refused, `/readyz` included).
            if values.count > 1 && parameter.replacedWhenUnusable { continue }
            guard values.count <= 1 else {
                problems.append("\(parameter.name): given more than once")
                continue
            }
            check(parameter, values.first)
        }
        if let schema = operation.body {
            if let body, !body.isEmpty {
                if let encoding = Self.notPlainUTF8(body) {
                    // RFC 8259: JSON between systems is UTF-8, without a byte order mark. Foundation
                    // would read UTF-16 and UTF-32 too, but nothing else on the way (a proxy's check,
                    // the duplicate-name count) reads them alike.
                    problems.append("the body must be UTF-8 JSON: \(encoding)")
                } else {
                    let shape = DuplicateMembers.shape(of: body)
                    if shape.deepest > Self.maxBodyDepth {
                        // Refused before any parser runs: a parser's work on a deeply nested text
                        // grows faster than its size (a 60 KB body of 500-deep arrays once held a
                        // core for half a minute), and no request of this API nests past a few levels.
                        problems.append("the body nests arrays and objects more than \(Self.maxBodyDepth) levels deep")
                    } else if let value = try? SharedJSON.decoder.decode(JSONValue.self, from: body) {
                        schema.check(value, into: &problems)
                        if let place = DuplicateMembers.duplicate(in: body, parsed: value, shape: shape) {
                            problems.append("\(place): a member name is given more than once")
                        }
                    } else {
                        problems.append("the body is not valid JSON")
                    }
                }
            } else if operation.bodyRequired {
                problems.append("the body is required")
            }
        }
        return problems
    }

    /// How deep a request body's arrays and objects may nest. The API's own requests nest a few
    /// levels; this leaves room for any later one.
    public static let maxBodyDepth = 32

    /// What a body that is not plain UTF-8 JSON starts with, said as its problem: a byte order
    /// mark, or the NUL bytes UTF-16 and UTF-32 put beside the first character of a JSON text
    /// (always ASCII) within its first four bytes. Nil for anything else.
    static func notPlainUTF8(_ body: Data) -> String? {
        let start = body.prefix(4)
        if start.starts(with: [0xEF, 0xBB, 0xBF]) || start.starts(with: [0xFE, 0xFF]) || start.starts(with: [0xFF, 0xFE]) {
            return "it starts with a byte order mark"
        }
        guard start.count >= 2 && start.contains(0) else { return nil }
        return "it has a NUL byte in its first four (UTF-16 or UTF-32 text has)"
    }

    /// What is wrong with an already parsed JSON body for `operationID` (`problems` parses, then
    /// does this); empty when it holds or the operation takes no body.
    public func bodyProblems(operationID: String, body value: JSONValue) -> [String] {
        var problems: [String] = []
        operations[operationID]?.body?.check(value, into: &problems)
        return problems
    }

    /// Every `example` the document gives (request bodies, JSON answers, component schemas),
    /// checked against the schema beside it: `(where, problems)` for each example, so a test can
    /// see that examples exist and that none breaks its own schema.
    public static func examples(spec: Data) throws -> [(at: String, problems: [String])] {
        guard let document = try Yams.load(yaml: String(decoding: spec, as: UTF8.self)) as? [String: Any] else { return [] }
        let components = document["components"] as? [String: Any] ?? [:]
        var results: [(at: String, problems: [String])] = []
        func check(_ media: Any?, at location: String) throws {
            guard let media = media as? [String: Any], let schema = media["schema"], let example = media["example"] else { return }
            guard let value = JSONValue(spec: example) else {
                results.append((location, ["the example is not JSON"]))
                return
            }
            results.append((location, try JSONSchemaCheck(schema, components: components).problems(value, at: "")))
        }
        for (path, item) in document["paths"] as? [String: Any] ?? [:] {
            for method in DeclaredOperations.methods {
                guard let operation = (item as? [String: Any])?[method.lowercased()] as? [String: Any] else { continue }
                let id = operation["operationId"] as? String ?? "\(method) \(path)"
                try check(((operation["requestBody"] as? [String: Any])?["content"] as? [String: Any])?["application/json"], at: "\(id) request")
                for (status, response) in operation["responses"] as? [String: Any] ?? [:] {
                    try check(((response as? [String: Any])?["content"] as? [String: Any])?["application/json"], at: "\(id) \(status)")
                }
            }
        }
        for (name, schema) in components["schemas"] as? [String: Any] ?? [:] {
            guard let example = (schema as? [String: Any])?["example"] else { continue }
            try check(["schema": ["$ref": "#/components/schemas/\(name)"], "example": example], at: name)
        }
        return results.sorted { $0.at < $1.at }
    }

    /// Checks one value against a schema of the document's `components.schemas` (tests, examples).
    public static func problems(spec: Data, schema name: String, value: JSONValue) throws -> [String] {
        guard let document = try Yams.load(yaml: String(decoding: spec, as: UTF8.self)) as? [String: Any] else { return ["not a document"] }
        let components = document["components"] as? [String: Any] ?? [:]
        let check = try JSONSchemaCheck(["$ref": "#/components/schemas/\(name)"], components: components)
        return check.problems(value, at: "")
    }
}
