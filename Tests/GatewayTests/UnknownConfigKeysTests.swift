import Foundation
@testable import Gateway
import ProvisioningCore
import Testing

/// The unknown-key check reads what each mapping accepts from the config types themselves.
@Suite struct UnknownConfigKeysTests {
    func problems(_ yaml: String) -> [String] { ConfigLoaderTests().problems(yaml) }

    static let everyKey = """
        server:
          host: 127.0.0.1
          port: 8080
          max_body_bytes: 65536
          deadline_ms: 15000
          tls: { certificate: cert.pem, private_key: key.pem }
          allow_plaintext: false
          metrics_public: false
          idle_timeout_ms: 30000
          read_timeout_ms: 10000
          max_connections: 100
          auth_failure_limit: { requests_per_second: 1, burst: 10 }
        clients:
          - id: acme
            api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d
            programs: [acme]
            admin: false
            activations_without_card: true
            rate_limit: { requests_per_second: 5, burst: 10 }
        issuers:
          bridge:
            kind: bridge
            endpoints: [ { url: https://api.bridge.xyz/v0 } ]
            credentials: { api_key: env:BRIDGE_API_KEY }
            timeouts: { connect_ms: 1000, request_ms: 4000 }
            wire: { encoding: base64 }
            validate_chain: true
            retry:
              max_attempts: 3
              base_backoff_ms: 100
              max_backoff_ms: 1000
              min_attempt_ms: 250
              decisions: [ { on: "500", action: fail, code: upstream_unavailable } ]
            circuit_breaker: { failure_threshold: 5, open_ms: 30000, half_open_probes: 1 }
            programs: [acme]
            tls: { ca_file: ca.pem, client_certificate: client.pem, client_key: client.key }
            wallets: [apple_pay, google_pay]
            paused: false
          tmp:
            kind: tmp
            endpoints: [ { url: https://tmp.example/v1 } ]
            credentials: { token: env:TMP_TOKEN }
            wire: { auth: "header:X-Api-Key" }
            programs: [acme]
        routing:
          rules:
            - { match: { program: acme, card_id_prefix: c_, wallet: apple_pay }, issuer: bridge, fallback: local, deadline_ms: 10000 }
          activations: { issuer: tmp }
        store:
          sqlite: { path: gw.sqlite }
          postgres: { url: env:DATABASE_URL, connect_timeout_ms: 2000, ca_file: db-ca.pem }
          idempotency_ttl_seconds: 3600
        local: { enabled: true, activation_key: env:ACTIVATION_KEY }
        vault:
          keys:
            - { id: k1, key: env:VAULT_KEY_1, active: true }
            - { id: k0, key: env:VAULT_KEY_0 }
        trust: { anchors: [apple] }
        log: { format: json, access: true }
        telemetry:
          service_name: provisioning-gateway-eu
          otlp: { endpoint: "http://otel-collector:4318" }
        """

    @Test func aFileUsingEveryKeyHasNoUnknownKey() {
        #expect(problems(Self.everyKey) == [])
    }

    @Test func theSandboxFilesCardsAndFaultsHaveNoUnknownKey() {
        #expect(problems(ConfigLoaderTests.minimal.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "sandbox://bridge") + """

            sandbox:
              enabled: true
              cards:
                - card_id: c1
                  program: acme
                  issuer: bridge
                  issuer_reference: { customer_id: cu_1, card_account_id: ca_1 }
                  card: { number: "4111111111111111", name: A Person, expiry: 12/30 }
              faults:
                - { issuer: bridge, mode: slow, count: 2, endpoint: 0, delay_ms: 10, retry_after_seconds: 1 }
            """) == [])
    }

    @Test func unknownKeysAreReportedAtEveryDepthWithTheirPaths() {
        let yaml = Self.everyKey
            .replacingOccurrences(of: "  port: 8080", with: "  port: 8080\n  prot: 1")
            .replacingOccurrences(of: "wire: { encoding: base64 }", with: "wire: { encodng: base64 }")
            .replacingOccurrences(of: "rate_limit: { requests_per_second: 5, burst: 10 }", with: "rate_limit: { requests_per_second: 5, burst: 10, brust: 1 }")
            .replacingOccurrences(of: "[ { url: https://api.bridge.xyz/v0 } ]", with: "[ { url: https://api.bridge.xyz/v0, weight: 2 } ]")
            .replacingOccurrences(of: "action: fail, code: upstream_unavailable", with: "action: fail, code: upstream_unavailable, why: x")
            .replacingOccurrences(of: "half_open_probes: 1 }", with: "half_open_probes: 1, open_msec: 1 }")
            .replacingOccurrences(of: "card_id_prefix: c_,", with: "card_id_prefix: c_, cardid: x,")
            .replacingOccurrences(of: "- { id: k0, key: env:VAULT_KEY_0 }", with: "- { id: k0, key: env:VAULT_KEY_0, activ: true }")
            + "\nsandbox_enabled: true\n"
        #expect(problems(yaml) == [
            "server.prot: unknown key (expected one of: host, port, max_body_bytes, deadline_ms, tls, allow_plaintext, metrics_public, "
                + "idle_timeout_ms, read_timeout_ms, write_timeout_ms, max_connections, auth_failure_limit, shutdown_delay_ms, shutdown_timeout_ms)",
            "clients[0].rate_limit.brust: unknown key (expected one of: requests_per_second, burst)",
            "issuers.bridge.endpoints[0].weight: unknown key (expected one of: url)",
            "issuers.bridge.wire.encodng: unknown key (expected one of: encoding, auth, provisioning_app_version)",
            "issuers.bridge.retry.decisions[0].why: unknown key (expected one of: on, action, code)",
            "issuers.bridge.circuit_breaker.open_msec: unknown key (expected one of: failure_threshold, open_ms, half_open_probes)",
            "routing.rules[0].match.cardid: unknown key (expected one of: program, card_id_prefix, wallet)",
            "vault.keys[1].activ: unknown key (expected one of: id, key, active)",
            "sandbox_enabled: unknown key (expected one of: server, clients, issuers, routing, store, local, vault, trust, sandbox, log, telemetry)",
        ])
    }

    /// An unknown key that reads as no setting's name (a secret pasted where a key goes: `{
    /// api_key:sk_live_... }` without the space is one key) is placed by its line, never repeated.
    /// A key that is a mapping or a list is no setting's name: reported by its line, not passed
    /// over (the reload audit's `{api_key: sk_live_...}: 3` read as a valid file).
    @Test func aKeyThatIsNotTextIsReportedNotRepeated() {
        for key in ["{api_key: sk_live_XYZSECRET}: 3", "? [sk_live_LISTSECRET]\n  : 1"] {
            let yaml = Self.everyKey.replacingOccurrences(of: "  port: 8080", with: "  port: 8080\n  \(key)")
            let found = problems(yaml)
            #expect(found.count == 1, "\(key): \(found)")
            #expect(found.first?.contains("a key on line 4 that is not text") == true, "\(found)")
            #expect(!found.joined().contains("SECRET"), "\(found)")
        }
    }

    @Test func anUnknownKeyThatMayBeASecretIsPlacedByItsLineNotRepeated() {
        let secrets = ["sk_live_51HxQzLmN0pQrStUv", "sk_live_KEY", "AKIAIOSFODNN7EXAMPLE", "ghp_abc123def456", "api_key:sk_test_abc"]
        for secret in secrets {
            let yaml = Self.everyKey.replacingOccurrences(of: "  port: 8080", with: "  port: 8080\n  \(secret): 1")
            let found = problems(yaml)
            #expect(found.count == 1 && !found.joined().contains(secret), "\(found)")
            let line = yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains(secret) }.map { $0 + 1 }
            #expect(found.first?.hasPrefix("server.(a key that is no name, not shown): an unknown key on line \(line ?? 0), not repeated") == true,
                    "\(found)")
        }
        #expect(ConfigProblem.readsAsSettingWord("sandbox_enabled") && ConfigProblem.readsAsSettingWord("open_msec"))
        #expect(ConfigProblem.readsAsSettingWord("tls13") && !ConfigProblem.readsAsSettingWord("key123"))
        // Nor among an issuer's credentials, whose names are the file's own.
        let credential = Self.everyKey.replacingOccurrences(of: "api_key: env:BRIDGE_API_KEY", with: "api_key: env:BRIDGE_API_KEY, sk_live_SECRETASKEY000: 1")
        #expect(credential != Self.everyKey)
        let found = problems(credential)
        #expect(found == ["issuers.bridge.credentials.(a key that is no name, not shown): a key that is not a credential of a bridge issuer, "
                          + "not repeated: it reads as no setting's name, and may be a secret pasted there (it takes: api_key)"], "\(found)")
        let misspelt = problems(Self.everyKey.replacingOccurrences(of: "api_key: env:BRIDGE_API_KEY", with: "api_key: env:BRIDGE_API_KEY, token: env:X"))
        #expect(misspelt == ["issuers.bridge.credentials.token: not a credential of a bridge issuer (it takes: api_key)"], "\(misspelt)")
    }

    @Test func aWrongWordNamesItsPathAndTheWordsAllowed() {
        let yaml = Self.everyKey.replacingOccurrences(of: "auth: \"header:X-Api-Key\"", with: "auth: basic")
            .replacingOccurrences(of: "action: fail,", with: "action: later,")
        #expect(problems(yaml) == [
            "issuers.bridge.retry.decisions[0].action: must be retry, failover or fail",
            "issuers.tmp.wire.auth: must be 'bearer' or 'header:<Header-Name>' (a header name HTTP takes, at most 64 characters, not one HTTP or the connector writes: Host, Content-Length, Content-Type, Accept, Connection, traceparent, ...)",
        ])
    }

    /// A TMP token header is a name HTTP takes, and not one HTTP or the connector writes: `header:`
    /// with a space, a colon, nothing, or `Content-Length` had passed the check, and every call to
    /// TMP then failed in SwiftNIO's header validation, blamed on TMP (the input audit).
    @Test(arguments: ["header:", "header:Api Key", "header:X-Api-Key:", "header:Content-Length", "header:host", "header:traceparent", "header:X-Tøken",
                      "header:" + String(repeating: "A", count: 65)])
    func aTMPTokenHeaderMustBeAHeaderNameOfItsOwn(auth: String) {
        let yaml = Self.everyKey.replacingOccurrences(of: "auth: \"header:X-Api-Key\"", with: "auth: \"\(auth)\"")
        #expect(problems(yaml).contains { $0.hasPrefix("issuers.tmp.wire.auth: must be 'bearer' or 'header:<Header-Name>'") }, "\(auth)")
    }

    @Test(arguments: ["header:X-Api-Key", "header:Authorization", "header:x_token.v2", "header:" + String(repeating: "A", count: 64)])
    func aTMPTokenHeaderNameHTTPTakesIsKept(auth: String) throws {
        let yaml = Self.everyKey.replacingOccurrences(of: "auth: \"header:X-Api-Key\"", with: "auth: \"\(auth)\"")
        #expect(problems(yaml).isEmpty, "\(problems(yaml))")
        #expect(try ConfigLoader.parse(yaml: yaml, source: "t.yaml").issuers["tmp"]?.wire.auth == .header(String(auth.dropFirst(7))))
    }

    @Test func theTypedWordsAreWhatTheFileSaid() throws {
        let config = try ConfigLoader.parse(yaml: Self.everyKey, source: "t.yaml")
        #expect(config.issuers["tmp"]?.wire.auth == .header("X-Api-Key"))
        #expect(config.issuers["bridge"]?.retry.decisions.first?.action == .fail)
        #expect(config.issuers["bridge"]?.credentials["api_key"] == "env:BRIDGE_API_KEY")
    }

    /// YAML 1.1 (which Yams reads) takes `015000` as octal, `0x10` as hexadecimal and `1:00:00`
    /// as base 60: `deadline_ms: 015000` had run with a 6,656 ms deadline, without a word.
    @Test func aNumberInAnotherBaseIsNamedWithItsLine() {
        let yaml = ConfigLoaderTests.minimal + """

            server:
              deadline_ms: 015000
              port: 0x1F90
            routing:
              rules:
                - { match: { program: acme }, issuer: bridge, deadline_ms: 1:00 }
            """
        let found = problems(yaml)
        let base = "reads as a number in another base (YAML 1.1: a leading 0 is octal, 0x hexadecimal, 1:00 base 60): "
            + "write the number in decimal"
        #expect(found.contains("server.deadline_ms: '015000' on line 15 \(base)"), "\(found)")
        #expect(found.contains("server.port: '0x1F90' on line 16 \(base)"), "\(found)")
        #expect(found.contains("routing.rules[0].deadline_ms: '1:00' on line 19 \(base)"), "\(found)")
        // Decimal numbers, fractions, URLs with ports and plain zero read as written, and so does
        // text where the setting is text, whatever it looks like (a program `007`, a card id
        // prefix `04`, an IPv6 host): YAML reads those as the strings they are.
        let plain = ConfigLoaderTests.minimal.replacingOccurrences(of: "programs: [acme]", with: "programs: [acme, 007]\n    rate_limit: { requests_per_second: 0.5, burst: 10 }")
            + "\nserver:\n  host: 0:0:0:0:0:0:0:1\n  allow_plaintext: true\n  deadline_ms: 15000\n  shutdown_delay_ms: 0\ntelemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n"
            + "routing:\n  rules:\n    - { match: { program: acme, card_id_prefix: 04 }, issuer: bridge }\n"
        #expect(problems(plain) == [], "\(problems(plain))")
        for text in ["015000", "0x10", "0o17", "0b101", "1:00", "1:00:00", "-0755", "190:20:30.15"] {
            #expect(UnknownConfigKeys.readsInAnotherBase(text), "\(text)")
        }
        for text in ["0", "15000", "0.5", "-1", "http://127.0.0.1:4318", "::1", "a:1", "1e-3", "10.0.0.1", String(repeating: "01", count: 32)] {
            #expect(!UnknownConfigKeys.readsInAnotherBase(text), "\(text)")
        }
    }
}
