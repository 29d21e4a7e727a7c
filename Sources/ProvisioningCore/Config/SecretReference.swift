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
}
