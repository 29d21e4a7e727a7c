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
        guard let text = String(data: try bytes(path: path), encoding: .utf8) else {
            throw ConfigError(source: path, problems: [.init("", "the file is not UTF-8 text")])
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

    /// The largest config file read: 4 MiB holds tens of thousands of routing rules. A file past
    /// it is no config (a log, a dump, a generated file gone wrong), and reading it would cost
    /// seconds and hundreds of megabytes (18 MB of unknown keys took 16 s and 725 MB; CLI audit).
    public static let maxFileBytes = 4 << 20

    /// The config file's bytes, at most `maxFileBytes` of them (`BoundedFile`): a file past it is
    /// refused before it is read (a symbolic link, as a Kubernetes ConfigMap mounts each file, is
    /// measured by what it points at), a pipe (`--config <(...)`) once past it, a device unread.
    public static func bytes(path: String) throws(ConfigError) -> Data {
        do throws(BoundedFile.Failure) {
            return try BoundedFile.read(path, maxBytes: maxFileBytes)
        } catch {
            switch error {
            case .tooLarge(let size): throw tooLarge(size, source: path)
            case .notAFile: throw ConfigError(source: path, problems: [.init("", "not a file (a device or a directory)")])
            case .unreadable(let reason): throw ConfigError(source: path, problems: [.init("", "cannot read the file (\(reason))")])
            }
        }
    }

    static func tooLarge(_ size: Int, source: String) -> ConfigError {
        ConfigError(source: source, problems: [.init("", "the file is \(size) bytes; a config is at most \(maxFileBytes) bytes (4 MiB)")])
    }

    static func decode(yaml: String, source: String) throws(ConfigError) -> (config: GatewayConfig, problems: [ConfigProblem]) {
        guard yaml.utf8.count <= maxFileBytes else { throw tooLarge(yaml.utf8.count, source: source) }
        let config: GatewayConfig
        // Wrong words (`action: hope`) are collected, not thrown, so every problem is reported at once.
        let wordProblems = ConfigDecodingProblems()
        do {
            config = try YAMLDecoder().decode(GatewayConfig.self, from: yaml, userInfo: [ConfigDecodingProblems.key: wordProblems])
        } catch let error as DecodingError {
            throw ConfigError(source: source, problems: typeProblems(yaml: yaml, first: error))
        } catch {
            throw ConfigError(source: source, problems: [.init("", yamlReason(error))])
        }
        // A wrong word decodes as its type's placeholder, which the meaning checks must not then
        // report again as if the file said it (`wallets: [apple_pay, nope]` is not "apple_pay is
        // listed twice").
        let words = wordProblems.problems
        let wordPlaces = Set(words.map(\.path))
        let meaning = config.validate(profiles: IssuerCatalog.profiles).filter { !wordPlaces.contains($0.path) }
        let problems = words + UnknownConfigKeys.find(in: yaml, decoded: config) + meaning
        // A sandbox never opens the production store's default file: every command reads the
        // sandbox file when `--config` is forgotten, and it had sealed a production card under the
        // sandbox's published vault key in the production store, which then would not start (the
        // CLI audit).
        var effective = config
        if effective.sandbox.enabled, effective.store.postgres == nil, effective.store.sqlite.path == StoreConfig.Defaults.SQLitePath.value {
            effective.store.sqlite.path = StoreConfig.sandboxSQLitePath
        }
        return (effective, problems)
    }

    /// What a decoded config means, checked against every issuer kind's profile: what `read`
    /// checks after decoding, for a config built otherwise (a reload's file with the running
    /// values of the settings that take a restart).
    public static func meaningProblems(_ config: GatewayConfig) -> [ConfigProblem] {
        config.validate(profiles: IssuerCatalog.profiles)
    }

    /// How many type problems one check lists at most.
    static let maxTypeProblems = 20

    /// Every value of the wrong type, not just the first the decoder met: the value at fault is
    /// taken out of the file's tree and the rest decoded again, until the file decodes (its wrong
    /// words are listed too), the decoder misses a required value (taken out, or never there), or
    /// the list is long enough. What the file means is checked once these are fixed.
    static func typeProblems(yaml: String, first: DecodingError) -> [ConfigProblem] {
        var problems = [problem(from: first)]
        guard let parser = try? Parser(yaml: yaml, resolver: Resolver.basic.appending(.merge), encoding: .default),
              var node = try? parser.singleRoot() else { return problems }
        // A list element taken out moves the later ones down: each list's taken-out indices (by
        // the list's place in the file) turn a later error's index back into the file's.
        var removed: [String: [Int]] = [:]
        func original(_ path: [any CodingKey]) -> [any CodingKey] {
            var mapped: [any CodingKey] = []
            for key in path {
                if let index = ConfigProblem.listIndex(key) {
                    var at = index
                    for taken in (removed[keyPath(mapped)] ?? []).sorted() where taken <= at { at += 1 }
                    mapped.append(ListIndex(at))
                } else {
                    mapped.append(key)
                }
            }
            return mapped
        }
        var reported: Set<String> = [keyPath(Self.path(of: first))]
        var error = first
        return withExtendedLifetime(parser) {
            var rounds = 0
            while problems.count < maxTypeProblems, rounds < 4 * maxTypeProblems {
                rounds += 1
                let path = Self.path(of: error)
                if case .keyNotFound = error { break }
                guard !path.isEmpty, let pruned = removing(path[...], from: node) else { break }
                let inFile = original(path)
                if let last = inFile.last as? ListIndex { removed[keyPath(Array(inFile.dropLast())), default: []].append(last.index) }
                node = pruned
                let words = ConfigDecodingProblems()
                do {
                    _ = try YAMLDecoder().decode(GatewayConfig.self, from: node, userInfo: [ConfigDecodingProblems.key: words])
                    problems += words.problems.filter { !reported.contains($0.path) }
                    break
                } catch let next as DecodingError {
                    // Each round takes a value out, so the rounds end.
                    let place = original(Self.path(of: next))
                    if reported.insert(keyPath(place)).inserted { problems.append(problem(from: next, at: place)) }
                    error = next
                } catch {
                    break
                }
            }
            return problems
        }
    }

    /// A list's index as the decoders spell it.
    private struct ListIndex: CodingKey {
        let index: Int
        init(_ index: Int) { self.index = index }
        var stringValue: String { "Index \(index)" }
        var intValue: Int? { index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.index = intValue }
    }

    /// Where a decoding error is.
    private static func path(of error: DecodingError) -> [any CodingKey] {
        switch error {
        case .keyNotFound(let key, let context): context.codingPath + [key]
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): context.codingPath
        @unknown default: []
        }
    }

    /// `node` without the value at `path` (a mapping's key, or a list's element); nil when the
    /// path does not lead anywhere in it.
    private static func removing(_ path: ArraySlice<any CodingKey>, from node: Node) -> Node? {
        guard let key = path.first else { return nil }
        let rest = path.dropFirst()
        switch node {
        case .mapping(var mapping):
            guard let child = mapping[key.stringValue] else { return nil }
            if rest.isEmpty {
                mapping[key.stringValue] = nil
            } else {
                guard let pruned = removing(rest, from: child) else { return nil }
                mapping[key.stringValue] = pruned
            }
            return .mapping(mapping)
        case .sequence(var sequence):
            guard let index = key.intValue, sequence.indices.contains(index) else { return nil }
            if rest.isEmpty {
                sequence.remove(at: index)
            } else {
                guard let pruned = removing(rest, from: sequence[index]) else { return nil }
                sequence[index] = pruned
            }
            return .sequence(sequence)
        default:
            return nil
        }
    }

    /// The problem `error` is, at its own place or at `place` (the file's, when values were taken out).
    static func problem(from error: DecodingError, at place: [any CodingKey]? = nil) -> ConfigProblem {
        let at = keyPath(place ?? path(of: error))
        switch error {
        case .keyNotFound:
            return .init(at, "required")
        case .typeMismatch(let type, _):
            return .init(at, "expected \(describe(type))")
        case .valueNotFound(let type, _):
            return .init(at, "expected \(describe(type)), found nothing")
        case .dataCorrupted(let context):
            // Yams puts the parser's own error underneath; Foundation's own reason for a value no
            // case of an enumeration has quotes the value, so it is said without it.
            let reason = context.underlyingError.map(yamlReason)
                ?? (context.debugDescription.hasPrefix("Cannot initialize") ? "not one of the accepted values" : context.debugDescription)
            return .init(at, reason)
        @unknown default:
            return .init("", "\(error)")
        }
    }

    /// What a YAML error says, by line and column and the parser's own words, never the file's
    /// text: Yams' description quotes the line at fault, and an operator who pasted a secret
    /// where `env:NAME` belongs would see it in `config check`, the reload API's answer and the logs.
    static func yamlReason(_ error: any Error) -> String {
        guard let yaml = error as? YamlError else { return "not valid YAML" }
        switch yaml {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _), let .composer(context, problem, mark, _):
            let said = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ": ")
            return "not valid YAML at line \(mark.line), column \(mark.column): \(said)"
        case let .reader(problem, _, _, _):
            return "not valid YAML: \(problem)"
        case let .duplicatedKeysInMapping(duplicates, context):
            return "not valid YAML: \(duplicates.count) key(s) given twice in the mapping at line \(context.mark.line)"
        default:
            return "not valid YAML"
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
        case is Node.Scalar.Type: "a single value, not a list or a mapping"
        default: ["Dictionary", "Config", "Mapping"].contains { "\(type)".contains($0) } ? "a mapping" : "\(type)"
        }
    }
}
