import ByteText
import Foundation

extension GatewayConfig {
    /// The longest `store.idempotency_ttl_seconds`: 30 days, a policy (a client retries within
    /// hours, and every key's answer is kept that long). Without a bound, 2^63 s had passed the
    /// check and trapped on the first keyed request (the store's millisecond columns).
    public static let maxIdempotencyTTLSeconds = 2_592_000

    /// Every meaning problem in the file, each with its key path. Empty means valid.
    /// `profiles`: the issuer kinds this build knows (`IssuerCatalog.profiles`); kind-specific
    /// rules (credentials, wire options, reference fields, resend safety) come from them.
    /// A claim that expired could be taken over while its request still runs (and a retry would
    /// reach the issuer a second time): `store.idempotency_ttl_seconds` must outlive the longest
    /// deadline and the margin after which an unfinished claim counts as abandoned. Nil when it
    /// does. A reload checks it again with the running store settings, which it cannot change.
    public func idempotencyLifetimeProblem(running: Bool = false) -> ConfigProblem? {
        let claimLife = longestDeadlineMS / 1000 + Int(Self.idempotencyAbandonMargin.components.seconds)
        guard store.idempotencyTTLSeconds <= claimLife else { return nil }
        let subject = running
            ? "the running value, \(store.idempotencyTTLSeconds) (store settings change only at a restart), must be more than \(claimLife)"
            : "must be more than \(claimLife)"
        return ConfigProblem("store.idempotency_ttl_seconds", "\(subject): the longest deadline (\(longestDeadlineMS) ms) and "
            + "\(Self.idempotencyAbandonMargin.components.seconds) s, so a key never expires while its request may run")
    }

    public func validate(profiles: IssuerProfiles) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if !(1...65_535).contains(server.port) && server.port != 0 {
            problems.append(.init("server.port", "must be 0 to 65535"))
        }
        // Every body is collected before it is read (an unauthenticated one too, to be refused):
        // the bound keeps what one connection can make the gateway hold small.
        if !(1_024...16_777_216).contains(server.maxBodyBytes) { problems.append(.init("server.max_body_bytes", "must be 1024 to 16777216 (16 MiB)")) }
        if !(100...60_000).contains(server.deadlineMS) {
            problems.append(.init("server.deadline_ms", "must be 100 to 60000 (Apple gives the app about 20 s)"))
        }
        if let tls = server.tls {
            if tls.certificate.isEmpty { problems.append(.init("server.tls.certificate", "must name a PEM file")) }
            if tls.privateKey.isEmpty { problems.append(.init("server.tls.private_key", "must name a PEM file")) }
        } else if !NetworkHost.isLoopback(server.host) && !server.allowPlaintext {
            problems.append(.init("server.tls", "required: \(server.host) is not a loopback address, so card data would cross the network "
                + "in clear (set server.allow_plaintext: true only when a TLS-terminating proxy is in front)"))
        }
        for (key, value) in [("idle_timeout_ms", server.idleTimeoutMS), ("read_timeout_ms", server.readTimeoutMS),
                             ("write_timeout_ms", server.writeTimeoutMS)]
        where !(10...3_600_000).contains(value) {
            problems.append(.init("server.\(key)", "must be 10 to 3600000"))
        }
        if !(1...1_000_000).contains(server.maxConnections) { problems.append(.init("server.max_connections", "must be 1 to 1000000")) }
        problems += server.authFailureLimit.problems(path: "server.auth_failure_limit")
        if !(0...600_000).contains(server.shutdownDelayMS) { problems.append(.init("server.shutdown_delay_ms", "must be 0 to 600000")) }
        if let timeout = server.shutdownTimeoutMS, !(1...600_000).contains(timeout) {
            problems.append(.init("server.shutdown_timeout_ms", "must be 1 to 600000"))
        }

        var seenClients = Set<String>()
        // A key identifies one client: a hash pasted twice would let one client's key act as
        // another (the last one listed), perhaps an admin. Compared as bytes, so case does not hide it.
        var seenAPIKeys: [Data: String] = [:]
        for (index, client) in clients.enumerated() {
            for (field, hex) in client.apiKeyHashes {
                guard let key = Data(hex: hex) else { continue }
                if let first = seenAPIKeys[key] {
                    problems.append(.init("clients[\(index)].\(field)", first == client.id
                        ? "this client's key twice"
                        : "the same key as client '\(first)': every client needs its own key"))
                } else {
                    seenAPIKeys[key] = client.id
                }
            }
        }
        for (index, client) in clients.enumerated() {
            let path = "clients[\(index)]"
            if !InputRules.isName(client.id, maxLength: 64) {
                problems.append(.init("\(path).id", "must be 1 to 64 of A-Z a-z 0-9 _ - ."))
            }
            if !seenClients.insert(client.id).inserted { problems.append(.init("\(path).id", "duplicate client id '\(client.id)'")) }
            for (field, hex) in client.apiKeyHashes where hex.count != 64 || Data(hex: hex) == nil {
                problems.append(.init("\(path).\(field)", "must be 64 hex characters (the SHA-256 of the key, not the key)"))
            }
            if client.previousAPIKeysSHA256.count > 4 {
                problems.append(.init("\(path).previous_api_keys_sha256", "at most 4 (keys being rotated out; remove each once unused)"))
            }
            if client.programs.isEmpty && !client.admin {
                problems.append(.init("\(path).programs", "must name at least one program (or the client is admin: true)"))
            }
            if client.admin && !client.programs.isEmpty {
                problems.append(.init("\(path).programs", "an admin client manages and holds no programs (give provisioning its own client)"))
            }
            if client.admin && client.activationsWithoutCard {
                problems.append(.init("\(path).activations_without_card", "admin clients do not activate tokens"))
            }
            for (index, program) in client.programs.enumerated() where !InputRules.isName(program, maxLength: 64) {
                problems.append(.init("\(path).programs[\(index)]", "must be 1 to 64 of A-Z a-z 0-9 _ - ."))
            }
            if let limit = client.rateLimit { problems += limit.problems(path: "\(path).rate_limit") }
            if let limit = client.maxInFlight, !ClientConfig.maxInFlightRange.contains(limit) {
                problems.append(.init("\(path).max_in_flight", "must be \(ClientConfig.maxInFlightRange.lowerBound) to \(ClientConfig.maxInFlightRange.upperBound)"))
            }
        }

        for name in issuers.keys.sorted() {
            if InputRules.isCardNumber(name) {
                problems.append(.init("issuers.\(name)", "an issuer's name is never a card number"))
            } else if !InputRules.isName(name) {
                // The API names issuers by this rule (a card's `issuer`, `/v1/admin/issuers/{name}`):
                // an issuer named otherwise served routing rules, but no card could be registered
                // with it and ops could not pause it (the input audit).
                problems.append(.init("issuers.\(name)", "an issuer's name is 1 to 64 of A-Z a-z 0-9 _ - . (the API's cards and admin routes name it)"))
            }
            let issuer = issuers[name]!
            let path = "issuers.\(name)"
            guard let profile = profiles[issuer.kind] else {
                problems.append(.init("\(path).kind", "must be one of: \(profiles.keys.map(\.rawValue).sorted().joined(separator: ", "))"))
                continue
            }
            if name == "local" { problems.append(.init(path, "'local' is reserved for the gateway's own encryptor")) }
            if issuer.endpoints.isEmpty { problems.append(.init("\(path).endpoints", "must list at least one endpoint")) }
            for (index, endpoint) in issuer.endpoints.enumerated() {
                problems += validateEndpoint(endpoint.url, kind: issuer.kind, path: "\(path).endpoints[\(index)].url")
            }
            if let programs = issuer.programs {
                if programs.isEmpty { problems.append(.init("\(path).programs", "must name at least one program (or be left out)")) }
                for (index, program) in programs.enumerated() where !InputRules.isName(program, maxLength: 64) {
                    problems.append(.init("\(path).programs[\(index)]", "must be 1 to 64 of A-Z a-z 0-9 _ - ."))
                }
            }
            if let tls = issuer.tls {
                if (tls.clientCertificate == nil) != (tls.clientKey == nil) {
                    problems.append(.init("\(path).tls", "client_certificate and client_key go together (mutual TLS)"))
                }
                if tls.caFile == nil && tls.clientCertificate == nil {
                    problems.append(.init("\(path).tls", "must name ca_file, or client_certificate and client_key"))
                }
            }
            for credential in profile.credentialNames where issuer.credentials[credential] == nil {
                problems.append(.init("\(path).credentials.\(credential)", "required for a \(issuer.kind) issuer (env:NAME)"))
            }
            for credential in issuer.credentials.keys.sorted() {
                let value = issuer.credentials[credential]!
                let keyPath = "\(path).credentials.\(credential)"
                // A misspelt credential (`token` on a Bridge issuer) is no credential at all; one
                // that reads as no name may be the secret itself, pasted as a key, and is not repeated.
                guard profile.credentialNames.contains(credential) else {
                    let takes = "it takes: \(profile.credentialNames.joined(separator: ", "))"
                    problems.append(ConfigProblem.readsAsSettingWord(credential)
                        ? .init(keyPath, "not a credential of a \(issuer.kind) issuer (\(takes))")
                        : .init("\(path).credentials.*", "a key that is not a credential of a \(issuer.kind) issuer, not repeated: it reads "
                                + "as no setting's name, and may be a secret pasted there (\(takes))"))
                    continue
                }
                switch SecretReference(parsing: value) {
                case nil:
                    problems.append(.init(keyPath, "must be env:NAME (secrets are never written in the config file)"))
                case .sandbox? where !sandbox.enabled:
                    problems.append(.init(keyPath, "'sandbox' credentials need sandbox.enabled: true"))
                default: break
                }
            }
            // Upper bounds: a value past any deadline only makes a typo look like a setting.
            if !(1...60_000).contains(issuer.timeouts.connectMS) { problems.append(.init("\(path).timeouts.connect_ms", "must be 1 to 60000")) }
            if !(1...60_000).contains(issuer.timeouts.requestMS) { problems.append(.init("\(path).timeouts.request_ms", "must be 1 to 60000")) }
            let pool = issuer.connections
            for (key, value, range, unit) in [("max_per_host", pool.maxPerHost, ConnectionPoolConfig.maxPerHostRange, ""),
                                              ("idle_timeout_ms", pool.idleTimeoutMS, ConnectionPoolConfig.idleTimeoutMSRange, " (ms)")]
            where !range.contains(value) {
                problems.append(.init("\(path).connections.\(key)", "must be \(range.lowerBound) to \(range.upperBound)\(unit)"))
            }
            problems += profile.wireProblems(issuer.wire, path: "\(path).wire")
            problems += issuer.capabilityProblems(profile: profile, path: path)
            let retry = issuer.retry
            if !(1...10).contains(retry.maxAttempts) { problems.append(.init("\(path).retry.max_attempts", "must be 1 to 10")) }
            if !(1...60_000).contains(retry.baseBackoffMS) { problems.append(.init("\(path).retry.base_backoff_ms", "must be 1 to 60000")) }
            if retry.maxBackoffMS > 60_000 {
                problems.append(.init("\(path).retry.max_backoff_ms", "must be at most 60000"))
            } else if retry.maxBackoffMS < retry.baseBackoffMS {
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
                if let refusal = decision.refusal(for: profile) { problems.append(.init("\(rowPath).action", refusal)) }
                if let code = decision.code, GatewayError.Code(rawValue: code) == nil {
                    problems.append(.init("\(rowPath).code", "unknown error code '\(code)'"))
                }
            }
            let breaker = issuer.circuitBreaker
            if !(1...1_000).contains(breaker.failureThreshold) {
                problems.append(.init("\(path).circuit_breaker.failure_threshold", "must be 1 to 1000"))
            }
            // An hour at most: past it an endpoint that failed once would stay shut until a restart.
            if !(1...3_600_000).contains(breaker.openMS) { problems.append(.init("\(path).circuit_breaker.open_ms", "must be 1 to 3600000 (an hour)")) }
            if !(1...100).contains(breaker.halfOpenProbes) {
                problems.append(.init("\(path).circuit_breaker.half_open_probes", "must be 1 to 100"))
            }
        }

        // Two issuer names for one upstream account would let the same upstream card be registered
        // twice (uniqueness is per issuer name), once under each name. Endpoints are compared as
        // the upstream sees them (`issuersSharingAnEndpoint`); start-up compares the credentials' values too.
        for (name, other) in Self.issuersSharingAnEndpoint(issuers) where issuers[name]!.credentials == issuers[other]!.credentials {
            problems.append(.init("issuers.\(other)", "the same account as issuers.\(name) (same endpoint and credentials): "
                + "one upstream account is one issuer, limit it with programs: instead"))
        }
        if sandbox.enabled && !NetworkHost.isLoopback(server.host) {
            problems.append(.init("sandbox.enabled", "the sandbox's demo keys are public: it listens on loopback only (server.host)"))
        }
        // An activation without a card carries only a token reference, which the gateway cannot tie
        // to a program: the account it goes to must serve this client's programs and no one else's,
        // or one tenant could activate another's tokens.
        if let issuer = routing.activations.issuer, let account = issuers[issuer] {
            for (index, client) in clients.enumerated() where client.activationsWithoutCard {
                let path = "clients[\(index)].activations_without_card"
                guard let allowed = account.programs else {
                    problems.append(.init(path, "routing.activations.issuer \(issuer) serves every program: list its account's programs "
                        + "(issuers.\(issuer).programs), all of them this client's, so a token reference can only be one of its own"))
                    continue
                }
                let outside = client.programs.filter { !allowed.contains($0) }
                if !outside.isEmpty {
                    problems.append(.init(path,
                        "routing.activations.issuer \(issuer) does not serve program(s) \(outside.joined(separator: ", ")) of this client"))
                }
                let others = allowed.filter { !client.programs.contains($0) }
                if !others.isEmpty {
                    problems.append(.init(path, "routing.activations.issuer \(issuer) also serves program(s) \(others.joined(separator: ", ")) "
                        + "of other clients: a token reference alone could be theirs"))
                }
            }
        }

        problems += walletRuleProblems(profiles: profiles)
        let knownIssuers = Set(issuers.keys).union(local.enabled ? ["local"] : [])
        let shadowing = routing.table.shadowingRules()
        for (index, rule) in routing.rules.enumerated() {
            if let program = rule.match.program, InputRules.isCardNumber(program) {
                problems.append(.init("routing.rules[\(index)].match.program", "never a card number"))
            }
            if let earlier = shadowing[index] {
                problems.append(.init("routing.rules[\(index)].match",
                                      "never matches: routing.rules[\(earlier)] comes first and matches every card this rule would"))
            }
            if !knownIssuers.contains(rule.issuer) {
                problems.append(.init("routing.rules[\(index)].issuer", "unknown issuer '\(rule.issuer)'"))
            }
            if let program = rule.match.program, let issuer = issuers[rule.issuer], !issuer.serves(program: program) {
                problems.append(.init("routing.rules[\(index)].issuer",
                                      "issuers.\(rule.issuer).programs does not include program '\(program)'"))
            }
            if let deadline = rule.deadlineMS, !(100...60_000).contains(deadline) {
                problems.append(.init("routing.rules[\(index)].deadline_ms", "must be 100 to 60000 (Apple gives the app about 20 s)"))
            } else if let deadline = rule.deadlineMS, let minimum = issuers[rule.issuer]?.retry.minAttemptMS, deadline <= minimum {
                problems.append(.init("routing.rules[\(index)].deadline_ms",
                                      "must be more than issuers.\(rule.issuer).retry.min_attempt_ms (\(minimum)): no attempt could start"))
            } else if let deadline = rule.deadlineMS,
                      let (name, other) = issuers.filter({ entry in
                          deadline <= entry.value.retry.minAttemptMS && (rule.match.program.map { entry.value.serves(program: $0) } ?? true)
                      }).min(by: { $0.key < $1.key }) {
                // A card whose record names its issuer keeps that issuer and still takes the rule's
                // deadline: every issuer a card of the rule may name (one that serves its program)
                // must be able to start an attempt in it.
                problems.append(.init("routing.rules[\(index)].deadline_ms",
                                      "must be more than issuers.\(name).retry.min_attempt_ms (\(other.retry.minAttemptMS)): "
                                        + "a card of this rule registered with \(name) takes this deadline, and no attempt could start"))
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
                if let profile = profiles[config.kind], !profile.activatesTokens {
                    let activating = profiles.values.filter(\.activatesTokens).map(\.kind.rawValue).sorted().joined(separator: ", ")
                    problems.append(.init("routing.activations.issuer", "\(issuer) is a \(config.kind) issuer: only \(activating) issuers activate tokens"))
                }
            } else {
                problems.append(.init("routing.activations.issuer", "unknown issuer '\(issuer)'"))
            }
        }
        if vault.keyring.isEmpty {
            problems.append(.init("vault.key", "required (env:NAME): it seals vaulted card data and stored Idempotency-Key answers"))
        }
        if local.enabled, local.activationKey == nil {
            problems.append(.init("local.activation_key", "required when local.enabled (env:NAME)"))
        }
        var seenKeys = Set<String>()
        for (index, key) in vault.keys.enumerated() {
            let path = "vault.keys[\(index)]"
            if !InputRules.isName(key.id, maxLength: 32) { problems.append(.init("\(path).id", "must be 1 to 32 of A-Z a-z 0-9 _ - .")) }
            if !seenKeys.insert(key.id).inserted || (vault.key != nil && key.id == VaultKeyConfig.defaultID) {
                problems.append(.init("\(path).id", "duplicate key id '\(key.id)'"))
            }
            switch SecretReference(parsing: key.key) {
            case nil: problems.append(.init("\(path).key", "must be env:NAME (secrets are never written in the config file)"))
            case .sandbox? where !sandbox.enabled: problems.append(.init("\(path).key", "'sandbox' needs sandbox.enabled: true"))
            default: break
            }
        }
        if !vault.keyring.isEmpty, vault.keyring.filter(\.active).count != 1 {
            problems.append(.init("vault.keys", "exactly one key must be active: true (it seals; the others only open)"))
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
        if !(60...Self.maxIdempotencyTTLSeconds).contains(store.idempotencyTTLSeconds) {
            problems.append(.init("store.idempotency_ttl_seconds", "must be 60 to \(Self.maxIdempotencyTTLSeconds) (30 days)"))
        }
        if store.idempotencyTTLSeconds >= 60, let problem = idempotencyLifetimeProblem() { problems.append(problem) }
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
            if !(1...60_000).contains(postgres.connectTimeoutMS) {
                problems.append(.init("store.postgres.connect_timeout_ms", "must be 1 to 60000"))
            }
            // The claim and the card read come before a request's deadline starts: two such waits
            // must fit in the 30 s by which a claim outlives its deadline.
            if !(1...10_000).contains(postgres.operationTimeoutMS) {
                problems.append(.init("store.postgres.operation_timeout_ms", "must be 1 to 10000"))
            }
            if let mode = URLComponents(string: postgres.url)?.queryItems?.first(where: { $0.name == "sslmode" })?.value,
               !["disable", "require", "verify-full"].contains(mode) {
                problems.append(.init("store.postgres.url", "sslmode must be disable, require or verify-full"))
            }
        }

        problems += telemetry.problems(path: "telemetry")

        for (index, fault) in sandbox.faults.enumerated() {
            problems += fault.problems(path: "sandbox.faults[\(index)]", issuers: issuers)
        }
        if !sandbox.faults.isEmpty && !sandbox.enabled { problems.append(.init("sandbox.faults", "need sandbox.enabled: true")) }
        let perSimulator = Dictionary(grouping: sandbox.faults) { "\($0.issuer) endpoint \($0.endpoint)" }
        for (simulator, faults) in perSimulator.sorted(by: { $0.key < $1.key }) where faults.count > SandboxFaultConfig.maxQueued {
            problems.append(.init("sandbox.faults", "\(faults.count) faults for \(simulator): a simulator holds at most \(SandboxFaultConfig.maxQueued)"))
        }

        let table = routing.table
        var seenCards = Set<String>()
        for (index, card) in sandbox.cards.enumerated() {
            let path = "sandbox.cards[\(index)]"
            // The registry's own rule for card ids (1 to 128 id characters, never a card number):
            // a sandbox card is registered at start-up, printed in the banner and listed.
            if !InputRules.isCardID(card.cardID) {
                problems.append(.init("\(path).card_id", String(InputRules.cardIDRule.dropFirst("card_id: ".count))))
            }
            if let data = card.card {
                // The vault's own rule (digits, the Luhn check digit, MM/YY, the name), which start-up
                // applies when it seals the card.
                do {
                    _ = try CardData(number: data.number, name: data.name, expiry: data.expiry)
                } catch {
                    problems.append(.init("\(path).card", error.detail))
                }
            }
            if !seenCards.insert(card.cardID).inserted {
                problems.append(.init("\(path).card_id", "duplicate card id '\(InputRules.short(card.cardID))'"))
            }
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
            for field in profiles[issuer.kind]?.referenceFields ?? [] where (card.issuerReference[field] ?? "").isEmpty {
                problems.append(.init("\(path).issuer_reference.\(field)", "required for a \(issuer.kind) card"))
            }
            if !issuer.serves(program: card.program) {
                problems.append(.init("\(path).program", "issuers.\(issuerName).programs does not include '\(card.program)'"))
            }
        }
        return problems
    }

    private func validateEndpoint(_ text: String, kind: IssuerKind, path: String) -> [ConfigProblem] {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            return [.init(path, "not a URL")]
        }
        if url.user != nil || url.password != nil {
            return [.init(path, "must not hold user info (credentials go in credentials: as env:NAME)")]
        }
        let segments = url.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false).map { $0.lowercased() }
        if segments.contains(where: { [".", "..", "%2e", "%2e%2e", ".%2e", "%2e."].contains($0) }) {
            return [.init(path, "must not hold . or .. path segments")]
        }
        if url.query != nil || url.fragment != nil { return [.init(path, "must not hold a query or fragment")] }
        switch scheme {
        case "https":
            return []
        case "http":
            return NetworkHost.isLoopback(host) ? [] : [.init(path, "must be https:// (http:// only to a loopback address)")]
        case "sandbox":
            if !sandbox.enabled { return [.init(path, "sandbox:// endpoints need sandbox.enabled: true")] }
            if url.host != kind.rawValue { return [.init(path, "must be sandbox://\(kind.rawValue) for a \(kind.rawValue) issuer")] }
            return []
        default:
            return [.init(path, "scheme must be https (http only on loopback), or sandbox")]
        }
    }
}

extension TelemetryConfig {
    func problems(path: String) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if serviceName.trimmingCharacters(in: .whitespaces).isEmpty { problems.append(.init("\(path).service_name", "must not be empty")) }
        if InputRules.holdsCardNumber(serviceName) { problems.append(.init("\(path).service_name", "never a card number (it names every span)")) }
        if let endpoint = otlp.endpoint, let problem = Self.endpointProblem(endpoint) {
            problems.append(.init("\(path).otlp.endpoint", problem))
        }
        return problems
    }

    /// Spans hold no card data or secrets, so plain http (a collector beside the gateway) is
    /// allowed; credentials in the URL are not, nor anything but a base URL.
    static func endpointProblem(_ text: String) -> String? {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = url.host, !host.isEmpty
        else {
            return "not an http:// or https:// URL (e.g. http://otel-collector:4318)"
        }
        if url.user != nil || url.password != nil { return "must not hold user info" }
        if url.query != nil || url.fragment != nil { return "must not hold a query or fragment" }
        return nil
    }
}

extension RateLimitConfig {
    func problems(path: String) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        // At least one request per 1,000 s: a token's interval times the burst must stay a
        // duration the clock can hold (a smaller rate had trapped on the first request).
        if !(requestsPerSecond >= 0.001 && requestsPerSecond <= 100_000) {
            problems.append(.init("\(path).requests_per_second", "must be 0.001 to 100000"))
        }
        if !(1...100_000).contains(burst) { problems.append(.init("\(path).burst", "must be 1 to 100000")) }
        return problems
    }
}

extension GatewayConfig {
    /// Pairs of issuers (in name order) of one kind with an endpoint in common, compared as the
    /// same upstream: scheme and host in lower case, the scheme's default port dropped, the path
    /// without one trailing `/` (`https://API.bridge.xyz.:443/v0/` is `https://api.bridge.xyz/v0`).
    /// Compared as written, those spellings had passed as two accounts (the isolation audit).
    public static func issuersSharingAnEndpoint(_ issuers: [String: IssuerConfig]) -> [(String, String)] {
        let names = issuers.keys.sorted()
        var pairs: [(String, String)] = []
        for (index, name) in names.enumerated() {
            for other in names[(index + 1)...] {
                let (a, b) = (issuers[name]!, issuers[other]!)
                guard a.kind == b.kind,
                      !Set(a.endpoints.map { endpointIdentity($0.url) }).isDisjoint(with: b.endpoints.map { endpointIdentity($0.url) })
                else { continue }
                pairs.append((name, other))
            }
        }
        return pairs
    }

    /// An endpoint URL as the upstream it names: see `issuersSharingAnEndpoint`.
    public static func endpointIdentity(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        components.scheme = components.scheme?.lowercased()
        // A host's letter case and a final dot (the root of DNS) name the same host.
        if var host = components.percentEncodedHost?.lowercased() {
            if host.count > 1 && host.hasSuffix(".") { host.removeLast() }
            components.percentEncodedHost = host
        }
        if (components.scheme == "https" && components.port == 443) || (components.scheme == "http" && components.port == 80) {
            components.port = nil
        }
        // One trailing `/`, as the connectors drop it (`UpstreamBase`): the path as sent, encoded
        // as written (`/v0%2F` is not `/v0`).
        var path = components.percentEncodedPath
        if path.hasSuffix("/") { path.removeLast() }
        components.percentEncodedPath = path
        return components.string ?? url
    }
}
