import Foundation

/// A config value that is one of a few words (`retry`, `failover`, `fail`), parsed once when the
/// file is read. A wrong word is a problem naming its key path and the words allowed; while the
/// config loader reads the rest of the file (to report every problem at once) `placeholder`
/// stands in for it, and the load fails, so nothing else ever sees a placeholder. Decoded
/// without the loader's `ConfigDecodingProblems`, a wrong word throws.
public protocol ConfigWord: RawRepresentable<String>, CaseIterable, Codable, Sendable {
    static var placeholder: Self { get }
    /// "must be ..." as the problem says it.
    static var allowed: String { get }
}

extension ConfigWord {
    public static var allowed: String { "must be one of: " + allCases.map(\.rawValue).joined(separator: ", ") }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        if let word = Self(rawValue: text) {
            self = word
        } else {
            try ConfigDecodingProblems.note(ConfigProblem(ConfigProblem.keyPath(decoder.codingPath), Self.allowed), in: decoder)
            self = .placeholder
        }
    }
}

/// Problems found while decoding that do not stop the decoding, so one run of the loader reports
/// every one. Pass an instance in the decoder's `userInfo` under `key`.
public final class ConfigDecodingProblems: @unchecked Sendable {
    public static let key = CodingUserInfoKey(rawValue: "ConfigDecodingProblems")!
    private let lock = NSLock()
    private var found: [ConfigProblem] = []

    public init() {}

    public var problems: [ConfigProblem] { lock.withLock { found } }

    /// Records `problem` when the decoder collects problems; throws it as a decoding error otherwise.
    public static func note(_ problem: ConfigProblem, in decoder: any Decoder) throws {
        guard let collector = decoder.userInfo[key] as? ConfigDecodingProblems else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: problem.reason))
        }
        collector.lock.withLock { collector.found.append(problem) }
    }
}

extension ConfigProblem {
    /// `issuers.bridge.endpoints[0].url`
    /// A list's index (its key reads "Index 3" in Yams and Foundation alike), or nil for a
    /// mapping's key, even one that reads as a number (`issuers: { 4111...: ... }`, `007`, `+1`:
    /// a dictionary's coding key has the number too).
    public static func listIndex(_ key: any CodingKey) -> Int? {
        key.intValue.flatMap { key.stringValue == "Index \($0)" ? $0 : nil }
    }

    public static func keyPath(_ path: [any CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = listIndex(key) {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }
}

/// `issuers.<name>.wallets[]` and `routing.rules[].match.wallet`.
extension Wallet: ConfigWord {
    public static var placeholder: Wallet { .applePay }
}

extension RetryAction: ConfigWord {
    public static var placeholder: RetryAction { .fail }
    public static var allowed: String { "must be retry, failover or fail" }
}

/// `sandbox.faults[].mode`: what the simulator does to the next requests.
public enum SandboxFaultMode: String, ConfigWord {
    case unavailable, throttled, timeout, reset, slow, garbage, rejected, accepted
    public static var placeholder: SandboxFaultMode { .unavailable }
}

/// `log.format` (and `serve --log-format`): readable lines or one JSON object per line.
public enum LogFormat: String, ConfigWord {
    case text, json
    public static var placeholder: LogFormat { .text }
}

/// TMP's `wire.auth`: `bearer` (Authorization: Bearer, the default) or `header:<Name>` (the
/// token alone in that header). The seeds do not say how TMP authenticates; the config chooses.
public enum TMPAuth: Sendable, Equatable, Codable {
    case bearer
    case header(String)

    public init?(parsing text: String) {
        if text == "bearer" {
            self = .bearer
        } else if text.hasPrefix("header:"), Self.isHeaderName(String(text.dropFirst(7))) {
            self = .header(String(text.dropFirst(7)))
        } else {
            return nil
        }
    }

    /// Headers the connector or HTTP itself writes: the token never goes in one of them. Every
    /// upstream call (`UpstreamHTTP`) writes `Host`, `Content-Type` and `Content-Length`, and
    /// `traceparent` and `tracestate` over any of the connector's own (W3C trace context), which
    /// would have replaced the token or sent it as a trace header (the session's review).
    static let reservedHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "content-type", "accept", "upgrade", "te", "trailer",
        "keep-alive", "expect", "proxy-authorization", "proxy-connection", "traceparent", "tracestate",
    ]

    /// A header name HTTP takes (RFC 9110's token: letters, digits and ! # $ % & ' * + - . ^ _ ` | ~,
    /// here at most 64 of them) that is none of `reservedHeaders`. Anything else had passed the
    /// config check and failed every call to TMP in SwiftNIO's header validation before a byte was
    /// sent, which the trail blamed on TMP as an answer that was not HTTP (the input audit).
    static func isHeaderName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                                      || "!#$%&'*+-.^_`|~".utf8.contains($0) }
            && !reservedHeaders.contains(name.lowercased())
    }

    public var text: String {
        switch self {
        case .bearer: "bearer"
        case .header(let name): "header:\(name)"
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        if let auth = TMPAuth(parsing: text) {
            self = auth
        } else {
            try ConfigDecodingProblems.note(
                ConfigProblem(ConfigProblem.keyPath(decoder.codingPath), "must be 'bearer' or 'header:<Header-Name>' (a header name HTTP takes, at most 64 characters, not one HTTP or the connector writes: Host, Content-Length, Content-Type, Accept, Connection, traceparent, ...)"), in: decoder)
            self = .bearer
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
