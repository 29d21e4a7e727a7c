/// A configuration problem at one key path. Start-up prints every one and stops.
public struct ConfigProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public init(_ path: String, _ reason: String) {
        self.path = path
        self.reason = reason
    }
    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }
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
