import ProvisioningCore
import Yams

/// Keys in the file that the config types do not read, each with its key path, so a misspelt key
/// is reported instead of silently ignored. What a mapping accepts is what the decoded config
/// encodes back to (`ConfigKeyShape`): the types' own coding keys, and for free-form maps
/// (credentials, issuer_reference, issuer names) the file's own names (credential names are then
/// checked against the issuer's kind, in `ConfigValidation`).
enum UnknownConfigKeys {
    static func find(in yaml: String, decoded config: GatewayConfig) -> [ConfigProblem] {
        guard let node = try? Yams.compose(yaml: yaml), let shape = try? ConfigKeyShape(of: config) else { return [] }
        var problems: [ConfigProblem] = []
        walk(node, shape, path: "", into: &problems)
        // `programs:` with its list commented out reads as no key at all, which is every program:
        // a tenant-isolation setting must not widen by a missing line.
        if case .mapping(let issuers)? = node["issuers"] {
            for (name, issuer) in issuers {
                if let programs = issuer["programs"], programs.null != nil {
                    problems.append(.init("issuers.\(name.string ?? "").programs",
                                          "has no value, which would mean every program: name the programs, or leave the key out"))
                }
            }
        }
        return problems
    }

    private static func walk(_ node: Node, _ shape: ConfigKeyShape, path: String, into problems: inout [ConfigProblem]) {
        switch (node, shape) {
        case (.mapping(let mapping), .mapping(let keys, let values)):
            for (keyNode, value) in mapping {
                guard let key = keyNode.string else {
                    // A key that is a mapping or a list (`{api_key: ...}: 3`, `? [a, b]`) is no
                    // setting's name; it had been passed over without a word (reload audit).
                    let line = keyNode.mark.map { " on line \($0.line)" } ?? ""
                    problems.append(.init(path.isEmpty ? "*" : "\(path).*",
                                          "a key\(line) that is not text (a mapping or a list used as a key), not repeated: no setting is named so"))
                    continue
                }
                let childPath = path.isEmpty ? key : "\(path).\(key)"
                guard let child = values[key] else {
                    let expected = "expected one of: \(keys.joined(separator: ", "))"
                    if ConfigProblem.readsAsSettingWord(key) {
                        problems.append(.init(childPath, "unknown key (\(expected))"))
                    } else {
                        // Placed by its line: `*` is no name, so the problem shows it masked.
                        let line = keyNode.mark.map { " on line \($0.line)" } ?? ""
                        problems.append(.init(path.isEmpty ? "*" : "\(path).*",
                                              "an unknown key\(line), not repeated: it reads as no setting's name, and may be a secret pasted there (\(expected))"))
                    }
                    continue
                }
                walk(value, child, path: childPath, into: &problems)
            }
        case (.sequence(let sequence), .list(let items)):
            for (index, (item, itemShape)) in zip(sequence, items).enumerated() {
                walk(item, itemShape, path: "\(path)[\(index)]", into: &problems)
            }
        default:
            break
        }
    }
}
