import Foundation
import Issuers
import ProvisioningCore
import Yams

/// Reads the YAML file and checks it; every problem comes back with its key path.
public enum ConfigLoader {
    public static func load(path: String) throws(ConfigError) -> GatewayConfig {
        let (config, problems) = try read(path: path)
        guard problems.isEmpty else { throw ConfigError(source: path, problems: problems) }
        return config
    }

    /// The decoded file and its meaning problems (empty when valid), for `config check`, which goes
    /// on to check the environment and the files the config names; throws when the file cannot be
    /// read or decoded at all.
    public static func read(path: String) throws(ConfigError) -> (config: GatewayConfig, problems: [ConfigProblem]) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigError(source: path, problems: [.init("", "cannot read the file")])
        }
        return try read(text: text, path: path)
    }

    /// `read(path:)` for text already read from `path` (a reload hashes the very bytes it checks).
    public static func read(text: String, path: String) throws(ConfigError) -> (config: GatewayConfig, problems: [ConfigProblem]) {
        let decoded = try decode(yaml: text, source: path)
        var config = decoded.config
        config.baseDirectory = URL(fileURLWithPath: path).deletingLastPathComponent()
        return (config, decoded.problems)
    }

    public static func parse(yaml: String, source: String) throws(ConfigError) -> GatewayConfig {
        let (config, problems) = try decode(yaml: yaml, source: source)
        guard problems.isEmpty else { throw ConfigError(source: source, problems: problems) }
        return config
    }

    static func decode(yaml: String, source: String) throws(ConfigError) -> (config: GatewayConfig, problems: [ConfigProblem]) {
        let config: GatewayConfig
        // Wrong words (`action: hope`) are collected, not thrown, so every problem is reported at once.
        let wordProblems = ConfigDecodingProblems()
        do {
            config = try YAMLDecoder().decode(GatewayConfig.self, from: yaml, userInfo: [ConfigDecodingProblems.key: wordProblems])
        } catch let error as DecodingError {
            throw ConfigError(source: source, problems: [problem(from: error)])
        } catch {
            throw ConfigError(source: source, problems: [.init("", "not valid YAML: \(error)")])
        }
        return (config, wordProblems.problems + UnknownConfigKeys.find(in: yaml, decoded: config) + config.validate(profiles: IssuerCatalog.profiles))
    }

    static func problem(from error: DecodingError) -> ConfigProblem {
        switch error {
        case .keyNotFound(let key, let context):
            return .init(keyPath(context.codingPath + [key]), "required")
        case .typeMismatch(let type, let context):
            return .init(keyPath(context.codingPath), "expected \(describe(type))")
        case .valueNotFound(let type, let context):
            return .init(keyPath(context.codingPath), "expected \(describe(type)), found nothing")
        case .dataCorrupted(let context):
            // Yams puts the parser's own message (with line and column) underneath.
            let reason = context.underlyingError.map { "not valid YAML: \($0)" } ?? context.debugDescription
            return .init(keyPath(context.codingPath), reason)
        @unknown default:
            return .init("", "\(error)")
        }
    }

    /// `issuers.bridge.endpoints[0].url`
    static func keyPath(_ path: [any CodingKey]) -> String { ConfigProblem.keyPath(path) }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type: "an integer"
        case is Bool.Type: "true or false"
        case is [Any].Type: "a list"
        default: "\(type)".contains("Dictionary") || "\(type)".contains("Config") ? "a mapping" : "\(type)"
        }
    }
}
