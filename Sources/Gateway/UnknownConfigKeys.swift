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
        case (.scalar(let scalar), .number) where scalar.style == .plain && readsInAnotherBase(scalar.string):
            // YAML 1.1, which Yams reads, takes `015000` as octal (6656), `0x10` as 16 and `1:00`
            // as base 60: a deadline or a port written so was another number without a word. Only
            // where the setting is a number: text (`programs: [007]`, an IPv6 host) reads as written.
            let line = scalar.mark.map { " on line \($0.line)" } ?? ""
            problems.append(.init(path.isEmpty ? "*" : path,
                                  "'\(scalar.string)'\(line) reads as a number in another base (YAML 1.1: a leading 0 is octal, 0x hexadecimal, "
                                    + "1:00 base 60): write the number in decimal"))
        default:
            break
        }
    }

    /// A plain scalar YAML 1.1 reads as an integer or float in a base other than 10: a leading
    /// `0` before more digits (octal), `0x`/`0o`/`0b`, or `:`-separated digit groups (base 60).
    /// At most 20 characters: no setting's number is longer, and a longer run of digits is text
    /// (a key's SHA-256 in hex may be digits only, `0` first).
    static func readsInAnotherBase(_ text: String) -> Bool {
        guard text.utf8.count <= 20 else { return false }
        var digits = Substring(text)
        if digits.first == "-" || digits.first == "+" { digits = digits.dropFirst() }
        let bytes = Array(digits.utf8)
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "0") || bytes.contains(UInt8(ascii: ":")) else { return false }
        func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        if bytes[0] == UInt8(ascii: "0") {
            switch bytes[1] {
            case UInt8(ascii: "x"), UInt8(ascii: "o"), UInt8(ascii: "b"): return bytes.count > 2
            case let next where isDigit(next) || next == UInt8(ascii: "_"): return bytes.allSatisfy { isDigit($0) || $0 == UInt8(ascii: "_") }
            default: break
            }
        }
        // Base 60: digit groups joined by `:` (a time-like `1:00`, `1:00:00`), optionally with a fraction.
        let groups = digits.split(separator: ":", omittingEmptySubsequences: false)
        guard groups.count >= 2 else { return false }
        return groups.allSatisfy { group in
            !group.isEmpty && group.utf8.allSatisfy { isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") }
        }
    }
}
