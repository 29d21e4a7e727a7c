import Foundation

/// Where a credential comes from. Secrets never sit in the config file: only `env:NAME`, or
/// `sandbox` for a key the in-process simulators make up at start-up.
public enum SecretReference: Sendable, Equatable {
    case environment(String)
    case sandbox

    public init?(parsing text: String) {
        if text == "sandbox" {
            self = .sandbox
        } else if text.hasPrefix("env:") {
            let name = String(text.dropFirst(4))
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { return nil }
            self = .environment(name)
        } else {
            return nil
        }
    }

    /// A resolved reference: the environment variable's value, or `sandbox`, whose value the
    /// caller's sandbox context supplies (simulator keys, demo vault keys).
    public enum Resolved: Sendable {
        case value(Sensitive<String>)
        case sandbox
    }

    /// The one place `env:NAME` is looked up: `text` is what the config holds at `path`. A missing
    /// reference, one that does not parse, or an unset or empty variable is a problem naming `path`
    /// (and the variable, never its value).
    public static func resolve(_ text: String?, at path: String, in environment: [String: String]) throws(ConfigProblem) -> Resolved {
        guard let text else { throw ConfigProblem(path, "required") }
        switch SecretReference(parsing: text) {
        case .sandbox?:
            return .sandbox
        case .environment(let name)?:
            let named = shown(name)
            guard let raw = environment[name], !raw.isEmpty else { throw ConfigProblem(path, "environment variable \(named) is not set") }
            // A secret mounted from a file usually ends with a line break, which no credential
            // holds and which no HTTP header may carry: it would fail every call as the issuer's
            // "malformed answer". Spaces and line breaks around the value are dropped; a control
            // character left inside it is a problem (never shown).
            let value = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !value.isEmpty else { throw ConfigProblem(path, "environment variable \(named) holds only spaces or line breaks") }
            guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ConfigProblem(path, "environment variable \(named) holds a control character (a line break inside it?)")
            }
            return .value(Sensitive(value))
        case nil:
            throw ConfigProblem(path, "must be env:NAME or sandbox")
        }
    }

    /// A variable's name as problems repeat it: as it is when it reads as one (capitals, digits
    /// and `_`, no long number), else a placeholder: a secret pasted after `env:` (`env:sk_live_...`)
    /// would otherwise reach the terminal, the reload's answer and the log.
    private static func shown(_ name: String) -> String {
        let readsAsName = name.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "_") }
            && InputRules.readsAsCode(name, punctuation: "_")
        return readsAsName ? name : "(a name with lower-case letters or a long number, not shown: env:NAME takes the variable's name)"
    }
}
