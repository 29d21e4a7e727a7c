import Foundation

extension GatewayConfig {
    /// Every meaning problem in the file, each with its key path. Empty means valid.
    public func validate() -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if !(1...65_535).contains(server.port) && server.port != 0 {
            problems.append(.init("server.port", "must be 0 to 65535"))
        }
        if server.maxBodyBytes < 1_024 { problems.append(.init("server.max_body_bytes", "must be at least 1024")) }
        if !(100...60_000).contains(server.deadlineMS) {
            problems.append(.init("server.deadline_ms", "must be 100 to 60000 (Apple gives the app about 20 s)"))
        }

        var seenClients = Set<String>()
        for (index, client) in clients.enumerated() {
            let path = "clients[\(index)]"
            if client.id.isEmpty { problems.append(.init("\(path).id", "must not be empty")) }
            if !seenClients.insert(client.id).inserted { problems.append(.init("\(path).id", "duplicate client id '\(client.id)'")) }
            if client.apiKeySHA256.count != 64 || Data(hex: client.apiKeySHA256) == nil {
                problems.append(.init("\(path).api_key_sha256", "must be 64 hex characters (the SHA-256 of the key, not the key)"))
            }
            if client.programs.isEmpty && !client.admin {
                problems.append(.init("\(path).programs", "must name at least one program (or the client is admin: true)"))
            }
        }

        for name in issuers.keys.sorted() {
            let issuer = issuers[name]!
            let path = "issuers.\(name)"
            if name == "local" { problems.append(.init(path, "'local' is reserved for the gateway's own encryptor")) }
            if issuer.endpoints.isEmpty { problems.append(.init("\(path).endpoints", "must list at least one endpoint")) }
            for (index, endpoint) in issuer.endpoints.enumerated() {
                problems += validateEndpoint(endpoint.url, kind: issuer.kind, path: "\(path).endpoints[\(index)].url")
            }
            for credential in issuer.kind.requiredCredentials where issuer.credentials[credential] == nil {
                problems.append(.init("\(path).credentials.\(credential)", "required for a \(issuer.kind.rawValue) issuer (env:NAME)"))
            }
            for credential in issuer.credentials.keys.sorted() {
                let value = issuer.credentials[credential]!
                let keyPath = "\(path).credentials.\(credential)"
                switch SecretReference(parsing: value) {
                case nil:
                    problems.append(.init(keyPath, "must be env:NAME (secrets are never written in the config file)"))
                case .sandbox? where !sandbox.enabled:
                    problems.append(.init(keyPath, "'sandbox' credentials need sandbox.enabled: true"))
                default: break
                }
            }
            if issuer.timeouts.connectMS <= 0 { problems.append(.init("\(path).timeouts.connect_ms", "must be positive")) }
            if issuer.timeouts.requestMS <= 0 { problems.append(.init("\(path).timeouts.request_ms", "must be positive")) }
            if issuer.wire.encoding != nil, issuer.kind != .bridge {
                problems.append(.init("\(path).wire.encoding", "only Bridge issuers take an encoding option"))
            }
            if let encoding = issuer.wire.encoding, encoding == .base64URL {
                problems.append(.init("\(path).wire.encoding", "must be hex or base64"))
            }
            let retry = issuer.retry
            if !(1...10).contains(retry.maxAttempts) { problems.append(.init("\(path).retry.max_attempts", "must be 1 to 10")) }
            if retry.baseBackoffMS < 1 { problems.append(.init("\(path).retry.base_backoff_ms", "must be positive")) }
            if retry.maxBackoffMS < retry.baseBackoffMS {
                problems.append(.init("\(path).retry.max_backoff_ms", "must be at least base_backoff_ms (\(retry.baseBackoffMS))"))
            }
            if retry.minAttemptMS < 0 { problems.append(.init("\(path).retry.min_attempt_ms", "must not be negative")) }
            if retry.minAttemptMS >= server.deadlineMS {
                problems.append(.init("\(path).retry.min_attempt_ms", "must be less than server.deadline_ms (\(server.deadlineMS)): no attempt could start"))
            }
            for (row, decision) in retry.decisions.enumerated() {
                let rowPath = "\(path).retry.decisions[\(row)]"
                if RetryRule.Match(parsing: decision.on) == nil {
                    problems.append(.init("\(rowPath).on", "must be connect_failed, timeout, reset, malformed, an HTTP status, 4xx or 5xx"))
                }
                if RetryAction(rawValue: decision.action) == nil { problems.append(.init("\(rowPath).action", "must be retry, failover or fail")) }
                if let refusal = decision.refusal(kind: issuer.kind) { problems.append(.init("\(rowPath).action", refusal)) }
                if let code = decision.code, GatewayError.Code(rawValue: code) == nil {
                    problems.append(.init("\(rowPath).code", "unknown error code '\(code)'"))
                }
            }
            let breaker = issuer.circuitBreaker
            if breaker.failureThreshold < 1 { problems.append(.init("\(path).circuit_breaker.failure_threshold", "must be at least 1")) }
            if breaker.openMS < 1 { problems.append(.init("\(path).circuit_breaker.open_ms", "must be positive")) }
            if breaker.halfOpenProbes < 1 { problems.append(.init("\(path).circuit_breaker.half_open_probes", "must be at least 1")) }
            if let auth = issuer.wire.auth {
                if issuer.kind != .tmp {
                    problems.append(.init("\(path).wire.auth", "only TMP issuers take an auth option"))
                } else if auth != "bearer", !(auth.hasPrefix("header:") && auth.count > 7) {
                    problems.append(.init("\(path).wire.auth", "must be 'bearer' or 'header:<Header-Name>'"))
                }
            }
        }

        let knownIssuers = Set(issuers.keys).union(local.enabled ? ["local"] : [])
        for (index, rule) in routing.rules.enumerated() {
            if !knownIssuers.contains(rule.issuer) {
                problems.append(.init("routing.rules[\(index)].issuer", "unknown issuer '\(rule.issuer)'"))
            }
            if let deadline = rule.deadlineMS, !(100...60_000).contains(deadline) {
                problems.append(.init("routing.rules[\(index)].deadline_ms", "must be 100 to 60000 (Apple gives the app about 20 s)"))
            } else if let deadline = rule.deadlineMS, let minimum = issuers[rule.issuer]?.retry.minAttemptMS, deadline <= minimum {
                problems.append(.init("routing.rules[\(index)].deadline_ms",
                                      "must be more than issuers.\(rule.issuer).retry.min_attempt_ms (\(minimum)): no attempt could start"))
            }
            if let fallback = rule.fallback {
                if fallback != "local" {
                    problems.append(.init("routing.rules[\(index)].fallback", "only 'local' can be a fallback"))
                } else if !local.enabled {
                    problems.append(.init("routing.rules[\(index)].fallback", "needs local.enabled: true"))
                }
            }
        }
        if let issuer = routing.activations.issuer {
            if let config = issuers[issuer] {
                if config.kind != .tmp { problems.append(.init("routing.activations.issuer", "\(issuer) is a \(config.kind.rawValue) issuer: only TMP activates tokens")) }
            } else {
                problems.append(.init("routing.activations.issuer", "unknown issuer '\(issuer)'"))
            }
        }
        if local.enabled {
            if vault.key == nil { problems.append(.init("vault.key", "required when local.enabled (env:NAME)")) }
            if local.activationKey == nil { problems.append(.init("local.activation_key", "required when local.enabled (env:NAME)")) }
        }
        for (name, value) in [("vault.key", vault.key), ("local.activation_key", local.activationKey)] {
            guard let value else { continue }
            switch SecretReference(parsing: value) {
            case nil: problems.append(.init(name, "must be env:NAME (secrets are never written in the config file)"))
            case .sandbox? where !sandbox.enabled: problems.append(.init(name, "'sandbox' needs sandbox.enabled: true"))
            default: break
            }
        }
        if trust.anchors.isEmpty { problems.append(.init("trust.anchors", "must name at least one anchor ('apple' or a file)")) }

        if store.sqlite.path.isEmpty { problems.append(.init("store.sqlite.path", "must not be empty")) }
        if store.idempotencyTTLSeconds < 60 { problems.append(.init("store.idempotency_ttl_seconds", "must be at least 60")) }
        if let postgres = store.postgres {
            if postgres.url.hasPrefix("env:") {
                if SecretReference(parsing: postgres.url) == nil { problems.append(.init("store.postgres.url", "not a valid env:NAME reference")) }
            } else if let url = URLComponents(string: postgres.url), ["postgres", "postgresql"].contains(url.scheme ?? ""), url.host != nil {
                if url.password != nil {
                    problems.append(.init("store.postgres.url", "holds a password: use env:NAME (secrets are never written in the config file)"))
                }
            } else {
                problems.append(.init("store.postgres.url", "must be env:NAME or postgres://user@host:port/database"))
            }
            if postgres.connectTimeoutMS <= 0 { problems.append(.init("store.postgres.connect_timeout_ms", "must be positive")) }
        }

        for (index, fault) in sandbox.faults.enumerated() {
            problems += fault.problems(path: "sandbox.faults[\(index)]", issuers: issuers)
        }
        if !sandbox.faults.isEmpty && !sandbox.enabled { problems.append(.init("sandbox.faults", "need sandbox.enabled: true")) }

        let table = routing.table
        var seenCards = Set<String>()
        for (index, card) in sandbox.cards.enumerated() {
            let path = "sandbox.cards[\(index)]"
            if card.cardID.isEmpty { problems.append(.init("\(path).card_id", "must not be empty")) }
            if let data = card.card {
                if data.number.count < 12 || data.number.count > 19 || !data.number.allSatisfy(\.isNumber) {
                    problems.append(.init("\(path).card.number", "must be 12 to 19 digits"))
                }
                if data.expiryParts == nil { problems.append(.init("\(path).card.expiry", "must be MM/YY")) }
            }
            if !seenCards.insert(card.cardID).inserted { problems.append(.init("\(path).card_id", "duplicate card id '\(card.cardID)'")) }
            guard let issuerName = table.issuer(for: card.record, wallet: .applePay)?.rawValue else {
                problems.append(.init("\(path).issuer", "required: no routing rule matches this card"))
                continue
            }
            if issuerName == "local" {
                if !local.enabled { problems.append(.init("\(path).issuer", "'local' needs local.enabled: true")) }
                if card.card == nil { problems.append(.init("\(path).card", "a local card needs its card data")) }
                continue
            }
            guard let issuer = issuers[issuerName] else {
                if card.issuer != nil { problems.append(.init("\(path).issuer", "unknown issuer '\(issuerName)'")) }
                continue
            }
            for field in issuer.kind.requiredReferenceFields where (card.issuerReference[field] ?? "").isEmpty {
                problems.append(.init("\(path).issuer_reference.\(field)", "required for a \(issuer.kind.rawValue) card"))
            }
        }
        return problems
    }

    private func validateEndpoint(_ text: String, kind: IssuerKind, path: String) -> [ConfigProblem] {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), url.host != nil else {
            return [.init(path, "not a URL")]
        }
        switch scheme {
        case "http", "https":
            return []
        case "sandbox":
            if !sandbox.enabled { return [.init(path, "sandbox:// endpoints need sandbox.enabled: true")] }
            if url.host != kind.rawValue { return [.init(path, "must be sandbox://\(kind.rawValue) for a \(kind.rawValue) issuer")] }
            return []
        default:
            return [.init(path, "scheme must be https, http or sandbox")]
        }
    }
}
