/// A configuration problem at one key path. Start-up prints every one and stops.
public struct ConfigProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String
    /// A reason that repeats a value of the file holding a card number (`unknown issuer
    /// '4111...'`, a host, a file name) has its long digit runs masked: a card number pasted into
    /// the wrong field is never printed back (the CLI audit saw several), and so is a word that
    /// may be a credential (`InputRules.looksLikeCredential`: `routing.rules[].issuer: sk_live_...`).
    public init(_ path: String, _ reason: String) {
        self.path = Self.shown(path)
        let masked = InputRules.holdsCardNumber(reason) ? InputRules.withoutLongDigitRuns(reason) : reason
        // UUIDs aside: file paths hold them (a mounted secret's directory, a temporary one).
        self.reason = InputRules.withoutCredentials(masked, uuids: false)
    }

    /// A key path as problems show it: a key of the file that is no setting's name (letters,
    /// digits, `_ -`, an `[index]`; at most 100 characters, no run of 8 digits) is not repeated.
    /// A secret written as a key (`{ api_key:sk_live_... }`, no space after the colon), a card
    /// number, terminal escapes or the lines of a file that is no config at all would otherwise
    /// reach the terminal, the reload's answer and the log. Nor is a key that reads as a
    /// credential (`InputRules.looksLikeCredential`: `sk_live_51Hx...` under `issuers:`, a secret
    /// mis-indented into a key), though its characters are a name's (the input audit).
    static func shown(_ path: String) -> String {
        path.split(separator: ".", omittingEmptySubsequences: false).map { segment in
            segment.isEmpty || InputRules.readsAsCode(String(segment), punctuation: "_-[]")
                && !InputRules.looksLikeCredential(String(segment), uuids: false) ? String(segment) : "(a key that is no name, not shown)"
        }.joined(separator: ".")
    }

    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }

    /// Whether a key that is no setting reads as a setting's name mistyped or misplaced (`prot`,
    /// `weight`, `sandbox_enabled`), so that repeating it helps: lower-case letters, `_` and `-`,
    /// at most two digits and 40 characters. Anything else (`sk_live_51HxQ...`, a token, a card
    /// number) may be a secret pasted where a key goes, and is not repeated.
    public static func readsAsSettingWord(_ key: String) -> Bool {
        key.utf8.count <= 40 && key.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F || $0 == 0x2D }
            && key.utf8.filter { (0x30...0x39).contains($0) }.count <= 2
    }
}

public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public let source: String
    public let problems: [ConfigProblem]
    public init(source: String, problems: [ConfigProblem]) {
        self.source = source
        self.problems = problems
    }
    public var description: String {
        "invalid configuration \(source):\n" + problems.map { "  \($0)" }.joined(separator: "\n")
    }
}
