import Foundation
import Synchronization
import Testing

/// A published machine-readable contract, as copied verbatim into `Fixtures/upstream-specs` from
/// the team's `shared/upstream-specs` (so the contract tests run in CI's clean clone too),
/// read as published (a UTF-8 byte order mark included), and a small JSON Schema check of what the
/// contract tests need: required properties, types, enums, string lengths, and no property the
/// schema does not declare. `$ref`s to `#/definitions/...` are followed.
struct PublishedSpec: @unchecked Sendable {
    let document: [String: Any]

    static let directory = Fixtures.packageRoot.appendingPathComponent("Tests/IssuersTests/Fixtures/upstream-specs")

    static func exists(_ name: String) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path)
    }

    /// Read once per process and shared (the document is only read): each contract test had parsed
    /// the whole document (Marqeta's is 800 kB) on a thread of Swift's cooperative pool, and a
    /// dozen at once held both of its threads (gdb found both parsing while the pool watchdog
    /// reported a task waiting), so other tests' timeouts could fire.
    static func load(_ name: String) throws -> PublishedSpec {
        try loaded.withLock { loaded in
            if let spec = loaded[name] { return spec }
            var data = try Data(contentsOf: directory.appendingPathComponent(name))
            if data.starts(with: [0xEF, 0xBB, 0xBF]) { data.removeFirst(3) }
            let spec = PublishedSpec(document: try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any]))
            loaded[name] = spec
            return spec
        }
    }

    private static let loaded = Mutex<[String: PublishedSpec]>([:])

    var basePath: String { document["basePath"] as? String ?? "" }

    /// The operation object of `method` at `path`, or nil when the document has none.
    func operation(_ method: String, _ path: String) -> [String: Any]? {
        ((document["paths"] as? [String: Any])?[path] as? [String: Any])?[method.lowercased()] as? [String: Any]
    }

    /// Swagger 2: the body parameter's schema `$ref` of an operation.
    func bodySchemaReference(_ method: String, _ path: String) -> String? {
        let parameters = operation(method, path)?["parameters"] as? [[String: Any]] ?? []
        return (parameters.first { $0["in"] as? String == "body" }?["schema"] as? [String: Any])?["$ref"] as? String
    }

    /// The `$ref` of a response's schema for `status`.
    func responseSchemaReference(_ method: String, _ path: String, status: String) -> String? {
        (((operation(method, path)?["responses"] as? [String: Any])?[status] as? [String: Any])?["schema"] as? [String: Any])?["$ref"] as? String
    }

    /// OpenAPI 3: the JSON request body's schema `$ref` of an operation.
    func requestBodySchemaReference(_ method: String, _ path: String) -> String? {
        let content = (operation(method, path)?["requestBody"] as? [String: Any])?["content"] as? [String: Any]
        return ((content?["application/json"] as? [String: Any])?["schema"] as? [String: Any])?["$ref"] as? String
    }

    /// OpenAPI 3: the operation's parameters, `$ref`s to `#/components/parameters/...` resolved.
    func parameters(_ method: String, _ path: String) -> [[String: Any]] {
        (operation(method, path)?["parameters"] as? [[String: Any]] ?? []).compactMap { parameter in
            guard let reference = parameter["$ref"] as? String, reference.hasPrefix("#/components/parameters/") else { return parameter }
            let components = document["components"] as? [String: Any]
            return (components?["parameters"] as? [String: Any])?[String(reference.dropFirst("#/components/parameters/".count))] as? [String: Any]
        }
    }

    /// `#/definitions/...` (Swagger 2) or `#/components/schemas/...` (OpenAPI 3).
    func schema(_ reference: String) -> [String: Any]? {
        if reference.hasPrefix("#/definitions/") {
            return (document["definitions"] as? [String: Any])?[String(reference.dropFirst("#/definitions/".count))] as? [String: Any]
        }
        if reference.hasPrefix("#/components/schemas/") {
            let schemas = (document["components"] as? [String: Any])?["schemas"] as? [String: Any]
            return schemas?[String(reference.dropFirst("#/components/schemas/".count))] as? [String: Any]
        }
        return nil
    }

    /// Every way `value` breaks `schema`, as `path: reason`; empty means it conforms.
    func violations(of value: Any, against schema: [String: Any], path: String = "$") -> [String] {
        if let reference = schema["$ref"] as? String {
            guard let resolved = self.schema(reference) else { return ["\(path): unresolvable \(reference)"] }
            return violations(of: value, against: resolved, path: path)
        }
        var problems: [String] = []
        for part in schema["allOf"] as? [[String: Any]] ?? [] { problems += violations(of: value, against: part, path: path) }
        // A schema with properties but no `type` (Bridge's inputs) describes an object all the same.
        let type = schema["type"] as? String ?? (schema["properties"] != nil || schema["required"] != nil ? "object" : nil)
        switch type {
        case "object"?:
            guard let object = value as? [String: Any] else { return ["\(path): not an object"] }
            let properties = schema["properties"] as? [String: Any] ?? [:]
            for name in schema["required"] as? [String] ?? [] where object[name] == nil {
                problems.append("\(path).\(name): required")
            }
            for (name, item) in object {
                guard let property = properties[name] as? [String: Any] else {
                    problems.append("\(path).\(name): not a property of the schema")
                    continue
                }
                problems += violations(of: item, against: property, path: "\(path).\(name)")
            }
        case "array"?:
            guard let array = value as? [Any] else { return ["\(path): not an array"] }
            if let items = schema["items"] as? [String: Any] {
                for (index, item) in array.enumerated() { problems += violations(of: item, against: items, path: "\(path)[\(index)]") }
            }
        case "string"?:
            guard let string = value as? String else { return ["\(path): not a string"] }
            if let minimum = schema["minLength"] as? Int, string.count < minimum { problems.append("\(path): shorter than \(minimum)") }
            if let maximum = schema["maxLength"] as? Int, string.count > maximum { problems.append("\(path): longer than \(maximum)") }
            if let allowed = schema["enum"] as? [String], !allowed.contains(string) { problems.append("\(path): \(string) is not in the enum") }
        case "integer"?:
            if !(value is Int) { problems.append("\(path): not an integer") }
        case "boolean"?:
            if !(value is Bool) { problems.append("\(path): not a boolean") }
        default:
            break
        }
        return problems
    }
}
