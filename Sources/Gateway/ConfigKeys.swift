import ProvisioningCore
import Yams

/// The keys each part of the configuration may hold, so a misspelt key is reported with its path
/// instead of being silently ignored. `*` stands for a name the file chooses (an issuer's), `[]` for
/// a list's items; maps not listed here (credentials, issuer_reference) hold free-form names.
enum ConfigKeys {
    static let known: [String: [String]] = [
        "": ["server", "clients", "issuers", "routing", "store", "local", "vault", "trust", "sandbox"],
        "server": ["host", "port", "max_body_bytes", "deadline_ms", "tls", "allow_plaintext", "metrics_public", "idle_timeout_ms",
                   "read_timeout_ms", "max_connections", "auth_failure_limit", "shutdown_delay_ms", "shutdown_timeout_ms"],
        "server.tls": ["certificate", "private_key"],
        "server.auth_failure_limit": ["requests_per_second", "burst"],
        "clients[]": ["id", "api_key_sha256", "programs", "admin", "activations_without_card", "rate_limit"],
        "clients[].rate_limit": ["requests_per_second", "burst"],
        "issuers.*": ["kind", "endpoints", "credentials", "timeouts", "wire", "validate_chain", "retry", "circuit_breaker", "programs", "tls"],
        "issuers.*.tls": ["ca_file", "client_certificate", "client_key"],
        "issuers.*.retry": ["max_attempts", "base_backoff_ms", "max_backoff_ms", "min_attempt_ms", "decisions"],
        "issuers.*.retry.decisions[]": ["on", "action", "code"],
        "issuers.*.circuit_breaker": ["failure_threshold", "open_ms", "half_open_probes"],
        "issuers.*.endpoints[]": ["url"],
        "issuers.*.timeouts": ["connect_ms", "request_ms"],
        "issuers.*.wire": ["encoding", "auth"],
        "routing": ["rules", "activations"],
        "routing.activations": ["issuer"],
        "routing.rules[]": ["match", "issuer", "fallback", "deadline_ms"],
        "routing.rules[].match": ["program", "card_id_prefix", "wallet"],
        "store": ["sqlite", "postgres", "idempotency_ttl_seconds"],
        "store.sqlite": ["path"],
        "store.postgres": ["url", "connect_timeout_ms", "ca_file"],
        "local": ["enabled", "activation_key"],
        "vault": ["key", "keys"],
        "vault.keys[]": ["id", "key", "active"],
        "trust": ["anchors"],
        "sandbox": ["enabled", "cards", "faults"],
        "sandbox.faults[]": ["issuer", "mode", "count", "endpoint", "delay_ms", "retry_after_seconds"],
        "sandbox.cards[]": ["card_id", "program", "issuer", "issuer_reference", "card"],
        "sandbox.cards[].card": ["number", "name", "expiry"],
    ]

    static func unknownKeys(in yaml: String) -> [ConfigProblem] {
        guard let node = try? Yams.compose(yaml: yaml) else { return [] }
        var problems: [ConfigProblem] = []
        walk(node, pattern: "", path: "", into: &problems)
        return problems
    }

    private static func walk(_ node: Node, pattern: String, path: String, into problems: inout [ConfigProblem]) {
        switch node {
        case .mapping(let mapping):
            let allowed = known[pattern]
            for (keyNode, value) in mapping {
                guard let key = keyNode.string else { continue }
                let childPath = path.isEmpty ? key : "\(path).\(key)"
                if let allowed, !allowed.contains(key) {
                    problems.append(.init(childPath, "unknown key (expected one of: \(allowed.joined(separator: ", ")))"))
                    continue
                }
                // Issuer names are the file's own: their contents follow the `issuers.*` pattern.
                let childPattern = pattern == "issuers" ? "issuers.*" : (pattern.isEmpty ? key : "\(pattern).\(key)")
                walk(value, pattern: childPattern, path: childPath, into: &problems)
            }
        case .sequence(let sequence):
            for (index, item) in sequence.enumerated() {
                walk(item, pattern: "\(pattern)[]", path: "\(path)[\(index)]", into: &problems)
            }
        default:
            break
        }
    }
}
