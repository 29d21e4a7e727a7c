import Foundation
import GatewayTestSupport
import Gateway
import Issuers
import Logging
import ProvisioningCore
import Testing
import WalletCrypto

@Suite struct ConfigLoaderTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let minimal = """
        clients:
          - id: acme
            api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d
            programs: [acme]
        issuers:
          bridge:
            kind: bridge
            endpoints:
              - url: https://api.bridge.xyz/v0
            credentials:
              api_key: env:BRIDGE_API_KEY
        vault:
          key: env:VAULT_KEY
        """

    func problems(_ yaml: String) -> [String] {
        do {
            _ = try ConfigLoader.parse(yaml: yaml, source: "test.yaml")
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    /// Previous keys (a rotation) are checked as keys are: hex, never another client's or the
    /// client's own key again, at most four.
    /// A sandbox keeps its state apart from the production store's default file, so a command
    /// run without `--config` (which reads the sandbox file) never opens that file (the CLI
    /// audit: a production card sealed under the sandbox's published vault key); a path the file
    /// gives is kept, and a file without the sandbox keeps the default.
    @Test func aSandboxNeverOpensTheProductionStoresDefaultFile() throws {
        let sandbox = try ConfigLoader.load(path: Self.packageRoot.appendingPathComponent("Config/gateway.yaml").path)
        #expect(sandbox.sandbox.enabled && sandbox.store.sqlite.path == ".gateway/sandbox.sqlite")
        #expect(try ConfigLoader.parse(yaml: Self.minimal, source: "t.yaml").store.sqlite.path == ".gateway/gateway.sqlite")
        let text = try String(contentsOf: Self.packageRoot.appendingPathComponent("Config/gateway.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "anchors: [sandbox/", with: "anchors: [\(Self.packageRoot.path)/Config/sandbox/")
        let named = try ConfigLoader.parse(yaml: text + "\nstore:\n  sqlite:\n    path: /var/lib/sandbox/state.sqlite\n", source: "t.yaml")
        #expect(named.store.sqlite.path == "/var/lib/sandbox/state.sqlite")
    }

    @Test func previousKeysAreCheckedAsKeysAre() {
        let own = "1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d"
        let other = String(repeating: "ab", count: 32)
        let rotating = { (previous: String) in
            Self.minimal.replacingOccurrences(of: "    programs: [acme]", with: "    previous_api_keys_sha256: \(previous)\n    programs: [acme]")
        }
        #expect(problems(rotating("[\(other)]")) == [])
        #expect(problems(rotating("[not-hex]")) == ["clients[0].previous_api_keys_sha256[0]: must be 64 hex characters (the SHA-256 of the key, not the key)"])
        #expect(problems(rotating("[\(own)]")) == ["clients[0].previous_api_keys_sha256[0]: this client's key twice"])
        #expect(problems(rotating("[\(other), \(other.uppercased())]")) == ["clients[0].previous_api_keys_sha256[1]: this client's key twice"])
        let fiveKeys = (1...5).map { String(repeating: "0\($0)", count: 32) }.joined(separator: ", ")
        #expect(problems(rotating("[\(fiveKeys)]")) == ["clients[0].previous_api_keys_sha256: at most 4 (keys being rotated out; remove each once unused)"])
        let second = rotating("[\(other)]") + "\n" + ""
        #expect(problems(second.replacingOccurrences(of: "clients:\n", with: "clients:\n  - { id: globex, api_key_sha256: \(other), programs: [acme] }\n"))
            == ["clients[1].previous_api_keys_sha256[0]: the same key as client 'globex': every client needs its own key"])
    }

    /// A file past 4 MiB is refused before it is read (18 MB of unknown keys took 16 s and 725 MB).
    @Test func aFilePastFourMebibytesIsRefusedUnread() throws {
        let path = TestDirectories.root.appendingPathComponent("large-\(UUID().uuidString).yaml").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let padding = String(repeating: "# padding\n", count: ConfigLoader.maxFileBytes / 10 + 1)
        try (Self.minimal + "\n" + padding).write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: ConfigError.self) { try ConfigLoader.read(path: path) }
        do { _ = try ConfigLoader.read(path: path) } catch {
            #expect(error.problems.map(\.description).first?.contains("at most 4194304 bytes (4 MiB)") == true, "\(error)")
        }
        #expect(problems(Self.minimal + "\n" + String(repeating: "# padding\n", count: 1000)) == [], "comments under the limit are fine")
        // Measured before reading, through a symbolic link too (a ConfigMap's files are links).
        let link = path + ".link.yaml"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        defer { try? FileManager.default.removeItem(atPath: link) }
        #expect(throws: ConfigError.self) { try ConfigLoader.bytes(path: link) }
        #expect(throws: ConfigError.self) { try ConfigLoader.bytes(path: path) }
        // A device is refused unread (it had been read until memory ran out).
        do { _ = try ConfigLoader.read(path: "/dev/zero") } catch {
            #expect(error.problems.map(\.description) == ["not a file (a device or a directory)"], "\(error)")
        }
    }

    /// A card number pasted into a name (a client, a program, an issuer a rule names) or any value
    /// a problem repeats is refused and never printed back (CLI audit H2).
    @Test func aCardNumberInANameIsAProblemThatDoesNotRepeatIt() {
        let number = "4111111111111111"
        for yaml in [Self.minimal.replacingOccurrences(of: "programs: [acme]", with: "programs: [\(number)]"),
                     Self.minimal.replacingOccurrences(of: "- id: acme", with: "- id: \(number)"),
                     Self.minimal + "\nrouting:\n  rules:\n    - { match: { program: acme }, issuer: \"\(number)\" }\n",
                     Self.minimal + "\ntelemetry:\n  service_name: \"\(number)\"\n",
                     Self.minimal.replacingOccurrences(of: "  bridge:\n    kind: bridge", with: "  \"\(number)\":\n    kind: bridge"),
                     Self.minimal + "\nrouting:\n  rules:\n    - { match: { program: \"\(number)\" }, issuer: bridge }\n"] {
            let found = problems(yaml)
            #expect(!found.isEmpty, "\(yaml)")
            #expect(!found.joined().contains(number) && !found.joined().contains("41111111"), "\(found)")
        }
    }

    /// A secret pasted where a name or a code goes (a rule's issuer, a retry decision's code,
    /// the listener's host) is a problem that does not repeat it (leak audit: the reload's 422,
    /// `config check` and the log had printed `sk_live_...` back); the rest of the reason stays.
    @Test func aSecretInAValueIsAProblemThatDoesNotRepeatIt() {
        let secret = "sk_live_51HxQaBcDeFgHiJkLmN0pQ"
        for yaml in [Self.minimal + "\nrouting:\n  rules:\n    - { match: { program: acme }, issuer: \"\(secret)\" }\n",
                     Self.minimal + "\nretry:\n  decisions:\n    - { code: \"\(secret)\", retry: true }\n",
                     Self.minimal + "\nserver:\n  host: \"\(secret)\"\n"] {
            let found = problems(yaml)
            #expect(!found.isEmpty, "\(yaml)")
            #expect(!found.joined().contains("sk_live") && !found.joined().contains("51HxQ"), "\(found)")
        }
        #expect(problems(Self.minimal + "\nrouting:\n  rules:\n    - { match: { program: acme }, issuer: \"\(secret)\" }\n")
            .contains { $0.contains("(not shown)") })
    }

    /// `programs:` with its list commented out is YAML's null, which decoded as no key at all:
    /// every program, the widest an issuer account can be. It is a problem; left out, it is not.
    @Test func anIssuersProgramsWithNoValueIsAProblem() {
        let empty = Self.minimal.replacingOccurrences(of: "    kind: bridge\n", with: "    kind: bridge\n    programs:\n    #  - acme\n")
        #expect(problems(empty) == ["issuers.bridge.programs: has no value, which would mean every program: name the programs, or leave the key out"])
        #expect(problems(empty.replacingOccurrences(of: "programs:\n", with: "programs: ~\n")).count == 1)
        #expect(problems(empty.replacingOccurrences(of: "programs:\n", with: "programs: [acme]\n")) == [])
        #expect(problems(Self.minimal) == [])
    }

    /// A secret written as a key (no space after the colon in a flow mapping) is refused without
    /// being repeated.
    @Test func aSecretWrittenAsAKeyIsNotRepeated() {
        let yaml = Self.minimal.replacingOccurrences(of: "api_key: env:BRIDGE_API_KEY", with: "{ api_key:sk_live_51HxSECRETvalue }")
            .replacingOccurrences(of: "    credentials:\n      { api", with: "    credentials: { api")
        let found = problems(yaml)
        #expect(!found.isEmpty)
        #expect(!found.joined().contains("SECRET"), "\(found)")
    }

    /// A mapping's key that reads as a number (a card number pasted as an issuer's name) is a
    /// key, not a list index: its place is named and the key masked (the whole path was masked as
    /// one `issuers[4111...]`), and a list's index still reads as one.
    @Test func aNumericKeyIsAKeyOfItsMappingAndMasked() {
        #expect(problems("issuers:\n  4111111111111111: 1\n") == ["issuers.(a key that is no name, not shown): expected a mapping"])
        #expect(problems("issuers:\n  bridge: 1\n") == ["issuers.bridge: expected a mapping"])
        #expect(problems("routing:\n  rules: [1]\n") == ["routing.rules[0]: expected a mapping"])
        #expect(problems("issuers:\n  \"007\": 1\n") == ["issuers.007: expected a mapping"])
        // A secret mis-indented into a key reads as a name's characters, and is not shown either.
        #expect(problems("issuers:\n  sk_live_51HxYzAbCdEfGhIj: true\n") == ["issuers.(a key that is no name, not shown): expected a mapping"])
        #expect(problems("issuers:\n  bridge: true\n  Ab3dEf7hIj9kLm2nOp4q: 1\n")
                    == ["issuers.bridge: expected a mapping", "issuers.(a key that is no name, not shown): expected a mapping"])
    }

    /// An issuer's name is one the API can name (a card's `issuer`, `/v1/admin/issuers/{name}`):
    /// `bridge eu` had passed the check and served routing rules, while no card could be
    /// registered with it and ops could not pause it (the input audit).
    @Test(arguments: ["bridge eu", "bridge/eu", "brîdge", String(repeating: "b", count: 65)])
    func anIssuersNameIsOneTheAPITakes(name: String) {
        let yaml = Self.minimal.replacingOccurrences(of: "  bridge:\n    kind: bridge", with: "  \"\(name)\":\n    kind: bridge")
        #expect(problems(yaml).contains { $0.hasSuffix("an issuer's name is 1 to 64 of A-Z a-z 0-9 _ - . (the API's cards and admin routes name it)") },
                "\(problems(yaml))")
    }

    @Test(arguments: ["bridge", "bridge-eu.2", String(repeating: "b", count: 64)])
    func anIssuersNameTheAPITakesIsKept(name: String) {
        let yaml = Self.minimal.replacingOccurrences(of: "  bridge:\n    kind: bridge", with: "  \"\(name)\":\n    kind: bridge")
        #expect(!problems(yaml).contains { $0.contains("an issuer's name") }, "\(problems(yaml))")
    }

    /// A wrong word is reported once, as what it is: its placeholder is not then reported again
    /// by the meaning checks ("apple_pay is listed twice").
    @Test func aWrongWordIsReportedOnceAsItself() {
        let yaml = Self.minimal.replacingOccurrences(of: "    kind: bridge\n", with: "    kind: bridge\n    wallets: [apple_pay, nope]\n")
        #expect(problems(yaml) == ["issuers.bridge.wallets[1]: must be one of: apple_pay, google_pay, samsung_pay"])
    }

    /// Every value of the wrong type is listed in one check, where the first stopped it (an
    /// operator fixed one, ran it again, met the next); wrong words found on the way too.
    @Test func everyValueOfTheWrongTypeIsListedAtOnce() {
        let yaml = "server:\n  port: abc\n  deadline_ms: [1]\nissuers:\n  bridge: 2\nrouting:\n  rules: [1, 2]\nlog: { format: 3 }\n"
        #expect(problems(yaml) == [
            "server.port: expected an integer",
            "server.deadline_ms: expected a single value, not a list or a mapping",
            "issuers.bridge: expected a mapping",
            "routing.rules[0]: expected a mapping",
            "routing.rules[1]: expected a mapping",
            "log.format: must be one of: text, json",
        ])
        // A list element taken out moves the later ones down; their places are still the file's.
        #expect(problems("routing:\n  rules: [1, {match: {program: 5}}, 3]\n")
            == ["routing.rules[0]: expected a mapping", "routing.rules[1].issuer: required"])
        // A required value missing ends the list there: nothing decodes past it.
        #expect(problems("server: { port: abc }\nissuers: { bridge: { endpoints: [] } }\nlog: { format: [1] }\n")
            == ["server.port: expected an integer", "issuers.bridge.kind: required"])
    }

    @Test func theSandboxConfigLoads() throws {
        let config = try ConfigLoader.load(path: Self.packageRoot.appendingPathComponent("Config/gateway.yaml").path)
        #expect(config.sandbox.enabled)
        #expect(Set(config.issuers.keys) == ["bridge", "tmp", "crossmint", "marqeta", "lithic"])
        #expect(Set(config.sandbox.cards.map(\.cardID)) == ["card_bridge_demo", "card_tmp_demo", "card_crossmint_demo", "card_marqeta_demo",
                                                            "card_lithic_demo", "card_local_demo"])
        #expect(config.local.enabled && config.trust.anchors == ["sandbox/device-root.pem"])
        #expect(config.server.port == 8080)
        #expect(config.server.maxBodyBytes == 65_536)
    }

    static let marqeta = """
        clients:
          - id: acme
            api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d
            programs: [acme]
        issuers:
          mq:
            kind: marqeta
            endpoints:
              - url: https://sandbox-api.marqeta.com/v3
            credentials:
              application_token: env:MARQETA_APPLICATION_TOKEN
              access_token: env:MARQETA_ACCESS_TOKEN
            wire:
              provisioning_app_version: "4.2.0"
          li:
            kind: lithic
            endpoints:
              - url: https://sandbox.lithic.com
            credentials:
              api_key: env:LITHIC_API_KEY
        vault:
          key: env:VAULT_KEY
        """

    @Test func marqetaAndLithicIssuersLoadAndMarqetaNeedsItsAppVersion() throws {
        let config = try ConfigLoader.parse(yaml: Self.marqeta, source: "test.yaml")
        #expect(config.issuers["mq"]?.wire.provisioningAppVersion == "4.2.0")
        #expect(config.issuers["li"]?.kind == "lithic")
        let missing = Self.marqeta.replacingOccurrences(of: "    wire:\n      provisioning_app_version: \"4.2.0\"\n", with: "")
        #expect(missing != Self.marqeta)
        #expect(problems(missing).contains { $0.hasPrefix("issuers.mq.wire.provisioning_app_version: required for a marqeta issuer") },
                "\(problems(missing))")
        let noToken = Self.marqeta.replacingOccurrences(of: "      access_token: env:MARQETA_ACCESS_TOKEN\n", with: "")
        #expect(problems(noToken).contains { $0.hasPrefix("issuers.mq.credentials.access_token: required") }, "\(problems(noToken))")
        let misplaced = Self.marqeta.replacingOccurrences(of: "      api_key: env:LITHIC_API_KEY\n",
                                                          with: "      api_key: env:LITHIC_API_KEY\n    wire: { provisioning_app_version: \"1\" }\n")
        #expect(problems(misplaced).contains { $0.hasPrefix("issuers.li.wire.provisioning_app_version:") }, "\(problems(misplaced))")
    }

    @Test func aMinimalProductionFileLoadsWithDefaults() throws {
        let config = try ConfigLoader.parse(yaml: Self.minimal, source: "test.yaml")
        #expect(config.server.deadlineMS == 15_000)
        #expect(config.issuers["bridge"]?.timeouts.connectMS == 2_000)
        #expect(config.issuers["bridge"]?.wire.encoding == nil)
        #expect(config.issuers["bridge"]?.validateChain == false)
        // Production trust by default: the bundled Apple Root CA - G3 only.
        #expect(config.trust.anchors == ["apple"])
        let validator = try TrustAnchors.validator(config.trust, relativeTo: URL(fileURLWithPath: "/"), sandboxEnabled: false)
        #expect(validator.trustAnchors == [try ApplePayChainValidator.appleRootCAG3()])
        #expect(!config.local.enabled)
    }

    @Test func theLogFormatIsTextUnlessTheFileSaysJSON() throws {
        #expect(try ConfigLoader.parse(yaml: Self.minimal, source: "test.yaml").log.format == .text)
        #expect(try ConfigLoader.parse(yaml: Self.minimal + "\nlog: { format: json }\n", source: "test.yaml").log.format == .json)
        #expect(problems(Self.minimal + "\nlog: { format: xml }\n") == ["log.format: must be one of: text, json"])
    }

    @Test func aBadURLNamesItsKeyPath() {
        let yaml = Self.minimal.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "not a url")
        #expect(problems(yaml) == ["issuers.bridge.endpoints[0].url: not a URL"])
    }

    @Test func anInlineSecretIsRefused() {
        let yaml = Self.minimal.replacingOccurrences(of: "env:BRIDGE_API_KEY", with: "sk_live_123")
        #expect(problems(yaml) == ["issuers.bridge.credentials.api_key: must be env:NAME (secrets are never written in the config file)"])
    }

    @Test func aMissingKeyIsNamed() {
        let yaml = Self.minimal.replacingOccurrences(of: "    kind: bridge\n", with: "")
        #expect(problems(yaml) == ["issuers.bridge.kind: required"])
    }

    @Test func aWrongTypeIsNamed() {
        #expect(problems("server:\n  port: eighty\n") == ["server.port: expected an integer"])
    }

    /// What each kind allows comes from its definition (Issuers/<Kind>/): its credential names,
    /// its wire options, whether it activates tokens, its cards' reference fields.
    @Test func kindSpecificRulesComeFromTheKindsDefinition() {
        let tmpWithBridgeOptions = Self.minimal.replacingOccurrences(of: "kind: bridge", with: "kind: tmp")
            .replacingOccurrences(of: "api_key: env:BRIDGE_API_KEY", with: "api_key: env:BRIDGE_API_KEY\n    wire: { encoding: base64 }")
        #expect(problems(tmpWithBridgeOptions) == [
            "issuers.bridge.credentials.token: required for a tmp issuer (env:NAME)",
            "issuers.bridge.credentials.api_key: not a credential of a tmp issuer (it takes: token)",
            "issuers.bridge.wire.encoding: tmp issuers take no encoding option (only bridge does)",
        ])
        let bridgeActivating = Self.minimal + "\nrouting:\n  activations: { issuer: bridge }\n"
        #expect(problems(bridgeActivating) == ["routing.activations.issuer: bridge is a bridge issuer: only tmp issuers activate tokens"])
    }

    @Test func anUnknownIssuerKindIsNamed() {
        let problems = problems(Self.minimal.replacingOccurrences(of: "kind: bridge", with: "kind: stripe"))
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("issuers.bridge.kind:") == true)
    }

    @Test func sandboxReferencesNeedTheSandbox() {
        let yaml = Self.minimal.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "sandbox://bridge")
        #expect(problems(yaml) == ["issuers.bridge.endpoints[0].url: sandbox:// endpoints need sandbox.enabled: true"])
    }

    @Test func aBadClientHashAndEveryOtherProblemAreReportedTogether() {
        let yaml = Self.minimal
            .replacingOccurrences(of: "1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d", with: "sk_sandbox_demo")
            .replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "ftp://example.com")
        #expect(problems(yaml) == [
            "clients[0].api_key_sha256: must be 64 hex characters (the SHA-256 of the key, not the key)",
            "issuers.bridge.endpoints[0].url: scheme must be https (http only on loopback), or sandbox",
        ])
    }

    /// The minimal file on the sandbox's Bridge, with one sandbox card `c1` of program `acme` at
    /// `bridge` whose remaining lines are `rest` (each indented as the card's keys are).
    static func sandboxCard(_ rest: String) -> String {
        minimal.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "sandbox://bridge") + """

            sandbox:
              enabled: true
              cards:
                - card_id: c1
                  program: acme
                  issuer: bridge

            """ + rest.split(separator: "\n").map { "      " + $0 }.joined(separator: "\n") + "\n"
    }

    @Test func aSandboxCardNeedsItsIssuersReferenceFields() {
        #expect(problems(Self.sandboxCard("issuer_reference: { customer_id: cust_1 }"))
                == ["sandbox.cards[0].issuer_reference.card_account_id: required for a bridge card"])
    }

    /// A sandbox card's id follows the registry's rule: a card number there had started the
    /// gateway, which printed it in its banner and listed it (leak audit).
    @Test func aSandboxCardsIDIsACardID() {
        let reference = "issuer_reference: { customer_id: cust_1, card_account_id: ca_1 }"
        let refused = problems(Self.sandboxCard(reference).replacingOccurrences(of: "card_id: c1", with: "card_id: \"4111111111111111\""))
        #expect(refused == ["sandbox.cards[0].card_id: 1 to 128 characters of A-Z, a-z, 0-9, _ - . :, not dots alone, and never a card number"])
        #expect(problems(Self.sandboxCard(reference).replacingOccurrences(of: "card_id: c1", with: "card_id: \"a/b\"")).count == 1)
        #expect(problems(Self.sandboxCard(reference)) == [])
    }

    /// A sandbox card's data is checked by the vault's own rule, Luhn included, so `config check`
    /// says what start-up would otherwise stop on.
    @Test func aSandboxCardsNumberIsCheckedAsTheVaultChecksIt() {
        let yaml = Self.sandboxCard("""
            issuer_reference: { customer_id: cust_1, card_account_id: ca_1 }
            card: { number: "4111111111111112", name: Jane, expiry: "01/30" }
            """)
        #expect(problems(yaml) == ["sandbox.cards[0].card: number: its check digit (Luhn) does not hold: a digit is wrong"])
    }

    @Test func routingRulesNameKnownIssuersAndCoverCardsWithoutOne() throws {
        let sandboxCard = """

            sandbox:
              enabled: true
              cards:
                - card_id: routed_1
                  program: acme
                  issuer_reference: { customer_id: c, card_account_id: a }
            """
        let base = Self.minimal.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "sandbox://bridge")
        #expect(problems(base + sandboxCard) == ["sandbox.cards[0].issuer: required: no routing rule matches this card"])
        let routed = base + "\nrouting:\n  rules:\n    - match: { card_id_prefix: routed_ }\n      issuer: bridge\n" + sandboxCard
        let config = try ConfigLoader.parse(yaml: routed, source: "test.yaml")
        #expect(config.routing.table.issuer(for: config.sandbox.cards[0].record, wallet: .applePay) == "bridge")
        let unknown = Self.minimal + "\nrouting:\n  rules:\n    - match: { program: acme, wallet: apple_pay }\n      issuer: stripe\n"
        #expect(problems(unknown) == ["routing.rules[0].issuer: unknown issuer 'stripe'"])
    }

    @Test func aFallbackNeedsTheLocalIssuerAndLocalNeedsItsKeys() {
        let yaml = Self.minimal + "\nrouting:\n  rules:\n    - match: { program: acme }\n      issuer: bridge\n      fallback: local\n"
        #expect(problems(yaml) == ["routing.rules[0].fallback: needs local.enabled: true"])
        #expect(problems(Self.minimal + "\nlocal:\n  enabled: true\n") == [
            "local.activation_key: required when local.enabled (env:NAME)",
        ])
        let inline = Self.minimal.replacingOccurrences(of: "env:VAULT_KEY", with: "c2VjcmV0")
        #expect(problems(inline) == ["vault.key: must be env:NAME (secrets are never written in the config file)"])
        #expect(problems(Self.minimal.replacingOccurrences(of: "vault:\n  key: env:VAULT_KEY", with: "")) == [
            "vault.key: required (env:NAME): it seals vaulted card data and stored Idempotency-Key answers",
        ])
    }

    @Test func aMisspeltKeyIsReportedNotIgnored() {
        let yaml = Self.minimal.replacingOccurrences(of: "    credentials:", with: "    credentails:")
            + "\nserver:\n  prot: 9000\nsandbox:\n  cards:\n    - { card_id: c, program: p, issuer: bridge, issuer_reference: {}, crad: {} }\n"
        let found = problems(yaml)
        #expect(found.contains("issuers.bridge.credentails: unknown key (expected one of: kind, endpoints, credentials, timeouts, connections, wire, validate_chain, retry, circuit_breaker, programs, tls, wallets, paused)"))
        #expect(found.contains { $0.hasPrefix("server.prot: unknown key") })
        #expect(found.contains { $0.hasPrefix("sandbox.cards[0].crad: unknown key") })
    }

    /// Issuer names and issuer-reference field names are the file's own: the unknown-key check
    /// leaves those maps alone, and what the file names is what the config holds.
    @Test func freeFormMapsTakeAnyNames() throws {
        let issuer = "bridge_eu_\(Int.random(in: 1...999))"
        let yaml = Self.minimal.replacingOccurrences(of: "  bridge:", with: "  \(issuer):") + """

            sandbox:
              cards:
                - { card_id: c1, program: acme, issuer: \(issuer), issuer_reference: { customer_id: cu_1, card_account_id: ca_1 } }
            """
        let config = try ConfigLoader.parse(yaml: yaml, source: "t.yaml")
        #expect(Array(config.issuers.keys) == [issuer])
        #expect(config.issuers[issuer]?.kind == .bridge)
        #expect(config.sandbox.cards.first?.issuerReference == ["customer_id": "cu_1", "card_account_id": "ca_1"])
    }

    @Test func notYAMLAtAll() {
        let problems = problems("clients: [unclosed")
        #expect(problems.count == 1)
        #expect(problems.first?.contains("not valid YAML") == true)
    }

    /// A secret pasted where `env:NAME` belongs, in a line YAML cannot read, or a value no
    /// enumeration has: the problem names the line and column or the key, never the file's text.
    @Test(arguments: [
        "issuers:\n  bridge:\n    credentials:\n      api_key: sk_live_PASTED: SECRET_VALUE_1\n",
        "issuers:\n  bridge:\n    credentials: { api_key: \"sk_live_PASTED SECRET_VALUE_1 }\n",
        "issuers:\n  bridge:\n    kind: bridge\n    endpoints: [{ url: \"https://x.example\" }]\n    credentials: { api_key: \"env:X\" }\n    wire: { encoding: SECRET_VALUE_1 }\n",
        "clients:\n  - id: a\n    SECRET_VALUE_1: 1\n    SECRET_VALUE_1: 2\n",
    ])
    func aProblemNeverQuotesTheFilesText(yaml: String) {
        let found = problems(yaml)
        #expect(!found.isEmpty)
        #expect(!found.contains { $0.contains("SECRET_VALUE_1") || $0.contains("sk_live") }, "\(found)")
    }

    @Test func aLineYAMLCannotReadIsNamedByItsPosition() {
        let found = problems("issuers:\n  bridge:\n    credentials:\n      api_key: sk_live_PASTED: SECRET_VALUE_1\n")
        #expect(found.contains { $0.contains("line 4") }, "\(found)")
        let word = problems("issuers:\n  bridge:\n    kind: bridge\n    endpoints: [{ url: \"https://x.example\" }]\n"
                            + "    credentials: { api_key: \"env:X\" }\n    wire: { encoding: SECRET_VALUE_1 }\n")
        #expect(word.contains { $0.contains("issuers.bridge.wire.encoding") && $0.contains("not one of the accepted values") }, "\(word)")
    }

    @Test func resilienceSettingsAreCheckedWithTheirKeyPaths() {
        let found = problems("""
            clients:
              - { id: ops, api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d, admin: true }
            issuers:
              tmp:
                kind: tmp
                endpoints: [ { url: https://tmp.example/v1 }, { url: https://tmp-dr.example/v1 } ]
                credentials: { token: env:TMP_TOKEN }
                retry:
                  max_attempts: 0
                  base_backoff_ms: 500
                  max_backoff_ms: 100
                  decisions:
                    - { on: timeout, action: retry }
                    - { on: "404", action: retry }
                    - { on: sometimes, action: fail }
                    - { on: "503", action: hope }
                    - { on: "500", action: fail, code: nope }
                circuit_breaker: { failure_threshold: 0, open_ms: 0, half_open_probes: 0 }
            routing:
              rules:
                - { match: { program: acme }, issuer: tmp, deadline_ms: 90000 }
                - { match: { program: acme }, issuer: tmp, deadline_ms: 200 }
            """)
        let expected = [
            "issuers.tmp.retry.max_attempts: must be 1 to 10",
            "issuers.tmp.retry.max_backoff_ms: must be at least base_backoff_ms (500)",
            "issuers.tmp.retry.decisions[0].action: tmp has no idempotency key: a request that may have reached it is never sent again",
            "issuers.tmp.retry.decisions[1].action: a 4xx is never sent again (only 429 is)",
            "issuers.tmp.retry.decisions[2].on: must be connect_failed, timeout, reset, malformed, an HTTP status, 4xx or 5xx",
            "issuers.tmp.retry.decisions[3].action: must be retry, failover or fail",
            "issuers.tmp.retry.decisions[4].code: unknown error code 'nope'",
            "issuers.tmp.circuit_breaker.failure_threshold: must be 1 to 1000",
            "issuers.tmp.circuit_breaker.open_ms: must be 1 to 3600000 (an hour)",
            "issuers.tmp.circuit_breaker.half_open_probes: must be 1 to 100",
            "routing.rules[0].deadline_ms: must be 100 to 60000 (Apple gives the app about 20 s)",
            "routing.rules[1].deadline_ms: must be more than issuers.tmp.retry.min_attempt_ms (250): no attempt could start",
            "routing.rules[1].match: never matches: routing.rules[0] comes first and matches every card this rule would",
        ]
        for problem in expected { #expect(found.contains(problem), "missing: \(problem)\nfound: \(found)") }
        // An admin client needs no programs.
        #expect(!found.contains { $0.hasPrefix("clients[0].programs") })
    }

    /// Durations and sizes have upper bounds: `open_ms: 9223372036854775807` shut an endpoint
    /// that failed once until a restart, and a huge body limit let any connection make the
    /// gateway hold that much.
    @Test func durationsAndTheBodyLimitHaveUpperBounds() {
        let found = problems(Self.minimal.replacingOccurrences(of: "    kind: bridge\n", with: """
                kind: bridge
                timeouts: { connect_ms: 60001, request_ms: 9223372036854775807 }
                retry: { base_backoff_ms: 60001, max_backoff_ms: 9223372036854775807 }
                circuit_breaker: { open_ms: 9223372036854775807, failure_threshold: 9223372036854775807, half_open_probes: 1000000 }

            """) + "\nserver:\n  max_body_bytes: 16777217\n"
            + "store:\n  idempotency_ttl_seconds: 9223372036854775807\n  postgres: { url: env:PG_URL, connect_timeout_ms: 9223372036854775807 }\n")
        for problem in ["issuers.bridge.timeouts.connect_ms: must be 1 to 60000", "issuers.bridge.timeouts.request_ms: must be 1 to 60000",
                        "issuers.bridge.retry.base_backoff_ms: must be 1 to 60000", "issuers.bridge.retry.max_backoff_ms: must be at most 60000",
                        "issuers.bridge.circuit_breaker.open_ms: must be 1 to 3600000 (an hour)",
                        // A breaker that could never open, or never close again.
                        "issuers.bridge.circuit_breaker.failure_threshold: must be 1 to 1000",
                        "issuers.bridge.circuit_breaker.half_open_probes: must be 1 to 100",
                        "server.max_body_bytes: must be 1024 to 16777216 (16 MiB)",
                        // A key's expiry the store's millisecond columns cannot hold had trapped on the first keyed request.
                        "store.idempotency_ttl_seconds: must be 60 to 2592000 (30 days)",
                        // A start-up that would wait for ever on a database that accepts and never answers.
                        "store.postgres.connect_timeout_ms: must be 1 to 60000"] {
            #expect(found.contains(problem), "missing: \(problem)\nfound: \(found)")
        }
    }

    /// A misspelt credential is no credential: `token` (TMP's) on a Bridge issuer was ignored.
    @Test func aCredentialTheKindDoesNotTakeIsAProblem() {
        let yaml = Self.minimal.replacingOccurrences(of: "      api_key: env:BRIDGE_API_KEY", with: "      api_key: env:BRIDGE_API_KEY\n      token: env:UNSET")
        #expect(problems(yaml) == ["issuers.bridge.credentials.token: not a credential of a bridge issuer (it takes: api_key)"])
    }

    @Test func aSandboxFaultNamesAConfiguredSimulator() {
        let found = problems(Self.minimal + """

            sandbox:
              enabled: true
              faults:
                - { issuer: bridge, mode: unavailable }
                - { issuer: nobody, mode: flaky, count: 0 }
            """)
        #expect(found.contains("sandbox.faults[0].endpoint: only sandbox:// endpoints take faults"))
        #expect(found.contains("sandbox.faults[1].issuer: unknown issuer 'nobody' (faults go to simulated issuers)"))
        #expect(found.contains { $0.hasPrefix("sandbox.faults[1].mode: must be one of: unavailable, throttled") })
        #expect(found.contains("sandbox.faults[1].count: must be 1 to 10000"))
    }

    @Test func aMissingEnvironmentVariableNamesItsKeyPath() async throws {
        let config = try ConfigLoader.parse(yaml: Self.minimal, source: "test.yaml")
        do throws(ConfigError) {
            let upstreams = try await UpstreamDirectory.build(config: config, environment: [:], logger: Logger(label: "test"))
            await upstreams.shutdown()
            Issue.record("built without the API key")
        } catch {
            #expect(error.problems.map(\.description) == ["issuers.bridge.credentials.api_key: environment variable BRIDGE_API_KEY is not set"])
        }
    }

    @Test func theEnvironmentSuppliesTheSecret() async throws {
        let config = try ConfigLoader.parse(yaml: Self.minimal, source: "test.yaml")
        let upstreams = try await UpstreamDirectory.build(
            config: config, environment: ["BRIDGE_API_KEY": "sk_live_x"], logger: Logger(label: "test"))
        #expect(upstreams.issuers["bridge"]?.endpoints.first is BridgeConnector)
        await upstreams.shutdown()
    }
}

/// The security settings, each refused with its key path.
@Suite struct SecurityConfigTests {
    func problems(_ yaml: String) -> [String] { ConfigLoaderTests().problems(yaml) }
    static let minimal = ConfigLoaderTests.minimal

    @Test func aListenerOffLoopbackNeedsTLSOrAnExplicitProxy() {
        let open = Self.minimal + "\nserver:\n  host: 0.0.0.0\n"
        #expect(problems(open).count == 1)
        #expect(problems(open).first?.hasPrefix("server.tls: required: 0.0.0.0 is not a loopback address") == true)
        #expect(problems(open + "  allow_plaintext: true\n") == [])
        #expect(problems(open + "  tls: { certificate: cert.pem, private_key: key.pem }\n") == [])
        for loopback in ["127.0.0.1", "localhost", "::1", "127.8.9.10"] {
            #expect(problems(Self.minimal + "\nserver:\n  host: \"\(loopback)\"\n") == [], "\(loopback)")
        }
    }

    @Test func limitsMustBeSane() {
        let found = problems(Self.minimal + """

            server:
              idle_timeout_ms: 0
              read_timeout_ms: -5
              write_timeout_ms: 9223372036854775807
              max_connections: 0
              auth_failure_limit: { requests_per_second: 0, burst: 0 }
            """)
        #expect(found == [
            "server.idle_timeout_ms: must be 10 to 3600000", "server.read_timeout_ms: must be 10 to 3600000",
            "server.write_timeout_ms: must be 10 to 3600000",
            "server.max_connections: must be 1 to 1000000",
            "server.auth_failure_limit.requests_per_second: must be 0.001 to 100000",
            "server.auth_failure_limit.burst: must be 1 to 100000",
        ])
        let client = Self.minimal.replacingOccurrences(of: "programs: [acme]", with: "programs: [acme]\n    rate_limit: { requests_per_second: -1, burst: 10 }")
        #expect(problems(client) == ["clients[0].rate_limit.requests_per_second: must be 0.001 to 100000"])
        for bad in ["0", "-1", "100001"] {
            let limited = Self.minimal.replacingOccurrences(of: "programs: [acme]", with: "programs: [acme]\n    max_in_flight: \(bad)")
            #expect(problems(limited) == ["clients[0].max_in_flight: must be 1 to 100000"], "max_in_flight: \(bad)")
        }
        for good in ["1", "100000"] {
            let limited = Self.minimal.replacingOccurrences(of: "programs: [acme]", with: "programs: [acme]\n    max_in_flight: \(good)")
            #expect(problems(limited).isEmpty, "max_in_flight: \(good)")
        }
    }

    /// An Idempotency-Key must outlive any request under it: its TTL is refused unless it exceeds
    /// the longest deadline (the server's or a rule's) and the 30-second abandon margin.
    @Test func anIdempotencyKeyOutlivesTheLongestDeadline() {
        let deadline = Int.random(in: 31...60)
        let yaml = Self.minimal + "\nserver:\n  deadline_ms: \(deadline * 1000)\nstore:\n  idempotency_ttl_seconds: "
        let limit = deadline + 30
        #expect(problems(yaml + "\(limit)") == [
            "store.idempotency_ttl_seconds: must be more than \(limit): the longest deadline (\(deadline * 1000) ms) and 30 s, "
                + "so a key never expires while its request may run",
        ])
        #expect(problems(yaml + "\(limit + 1)").isEmpty)
        #expect(problems(Self.minimal + "\nstore:\n  idempotency_ttl_seconds: 60").isEmpty, "the default deadline, 15 s, with 60 s")
        #expect(problems(Self.minimal + "\nstore:\n  idempotency_ttl_seconds: 2592000").isEmpty, "30 days, the longest")
    }

    /// A rate below one request per 1,000 s is refused: `1e-300` had passed and trapped the
    /// process on the first request (`interval * burst` overflowed).
    @Test func aRateLimitHasAFloor() {
        let client = Self.minimal.replacingOccurrences(of: "programs: [acme]", with: "programs: [acme]\n    rate_limit: { requests_per_second: 1e-300, burst: 10 }")
        #expect(problems(client) == ["clients[0].rate_limit.requests_per_second: must be 0.001 to 100000"])
        #expect(problems(Self.minimal + "\nserver:\n  auth_failure_limit: { requests_per_second: 0.0009, burst: 10 }\n")
            == ["server.auth_failure_limit.requests_per_second: must be 0.001 to 100000"])
        #expect(problems(Self.minimal + "\nserver:\n  auth_failure_limit: { requests_per_second: 0.001, burst: 100000 }\n").isEmpty)
    }

    /// A card whose record names its issuer keeps that issuer and takes the matching rule's
    /// deadline: the deadline must leave every issuer room for an attempt, not only the rule's.
    @Test func aRuleDeadlineLeavesEveryIssuerRoomForAnAttempt() {
        let yaml = Self.minimal + """

              tmp:
                kind: tmp
                endpoints: [ { url: https://tmp.example/v1 } ]
                credentials: { token: env:TMP_TOKEN }
                retry: { min_attempt_ms: 400 }
            routing:
              rules:
                - { match: { program: acme }, issuer: bridge, deadline_ms: 300 }
            """
        let issuers = yaml.replacingOccurrences(of: "vault:\n  key: env:VAULT_KEY\n", with: "")
            .replacingOccurrences(of: "routing:", with: "vault:\n  key: env:VAULT_KEY\nrouting:")
        #expect(problems(issuers) == [
            "routing.rules[0].deadline_ms: must be more than issuers.tmp.retry.min_attempt_ms (400): "
                + "a card of this rule registered with tmp takes this deadline, and no attempt could start",
        ])
        #expect(problems(issuers.replacingOccurrences(of: "deadline_ms: 300", with: "deadline_ms: 401")).isEmpty)
        // An issuer that serves none of the rule's program holds none of its cards.
        #expect(problems(issuers.replacingOccurrences(of: "retry: { min_attempt_ms: 400 }", with: "retry: { min_attempt_ms: 400 }\n    programs: [other]")).isEmpty)
    }

    @Test func adminClientsHoldNoProgramsAndDoNotActivate() {
        let admin = Self.minimal.replacingOccurrences(of: "programs: [acme]", with: "programs: [acme]\n    admin: true\n    activations_without_card: true")
        #expect(problems(admin) == [
            "clients[0].programs: an admin client manages and holds no programs (give provisioning its own client)",
            "clients[0].activations_without_card: admin clients do not activate tokens",
        ])
        let badID = Self.minimal.replacingOccurrences(of: "id: acme", with: "id: \"acme corp\\n\"")
        #expect(problems(badID) == ["clients[0].id: must be 1 to 64 of A-Z a-z 0-9 _ - ."])
    }

    @Test(arguments: [
        ("http://api.bridge.xyz/v0", "must be https:// (http:// only to a loopback address)"),
        ("https://user:pw@api.bridge.xyz/v0", "must not hold user info (credentials go in credentials: as env:NAME)"),
        ("https://api.bridge.xyz/v0/../admin", "must not hold . or .. path segments"),
        ("https://api.bridge.xyz/v0/%2e%2e/admin", "must not hold . or .. path segments"),
        ("https://api.bridge.xyz/v0?debug=1", "must not hold a query or fragment"),
        ("ftp://api.bridge.xyz/v0", "scheme must be https (http only on loopback), or sandbox"),
    ])
    func upstreamEndpointsAreHTTPSWithoutCredentialsOrDotSegments(url: String, reason: String) {
        #expect(problems(Self.minimal.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: url))
            == ["issuers.bridge.endpoints[0].url: \(reason)"])
    }

    @Test func plainHTTPIsFineOnLoopback() {
        #expect(problems(Self.minimal.replacingOccurrences(of: "https://api.bridge.xyz/v0", with: "http://127.0.0.1:9000/v0")) == [])
    }

    @Test func issuerProgramsAndTLSAreChecked() {
        let yaml = Self.minimal.replacingOccurrences(of: "      api_key: env:BRIDGE_API_KEY", with: """
                  api_key: env:BRIDGE_API_KEY
                programs: []
                tls: { client_certificate: client.pem }
            """) + "\nrouting:\n  rules:\n    - { match: { program: acme }, issuer: bridge }\n"
        #expect(problems(yaml) == [
            "issuers.bridge.programs: must name at least one program (or be left out)",
            "issuers.bridge.tls: client_certificate and client_key go together (mutual TLS)",
            "routing.rules[0].issuer: issuers.bridge.programs does not include program 'acme'",
        ])
    }

    @Test func walletsNarrowOnlyWhatTheKindServes() throws {
        func with(_ lines: String) -> String {
            Self.minimal.replacingOccurrences(of: "      api_key: env:BRIDGE_API_KEY", with: "      api_key: env:BRIDGE_API_KEY\n" + lines)
        }
        let narrowed = try ConfigLoader.parse(yaml: with("    wallets: [google_pay]\n    paused: true"), source: "t.yaml")
        #expect(narrowed.issuers["bridge"]?.wallets == [.googlePay])
        #expect(narrowed.issuers["bridge"]?.paused == true)
        let defaults = try ConfigLoader.parse(yaml: Self.minimal, source: "t.yaml")
        #expect(defaults.issuers["bridge"]?.wallets == nil && defaults.issuers["bridge"]?.paused == false)
        #expect(defaults.issuers["bridge"]?.walletsUsed(by: BridgeIssuer()) == [.applePay, .googlePay])

        #expect(problems(with("    wallets: []")) == [
            "issuers.bridge.wallets: must name at least one wallet (or be left out; paused: true stops every call)",
        ])
        #expect(problems(with("    wallets: [google_pay, paypal]")) == ["issuers.bridge.wallets[1]: must be one of: apple_pay, google_pay, samsung_pay"])
        #expect(problems(with("    wallets: [google_pay, samsung_pay]")) == ["issuers.bridge.wallets[1]: a bridge issuer provisions only for apple_pay, google_pay"])
        #expect(problems(with("    wallets: [apple_pay, apple_pay]")) == ["issuers.bridge.wallets[1]: apple_pay is listed twice"])
        let crossmint = with("    wallets: [google_pay]").replacingOccurrences(of: "kind: bridge", with: "kind: crossmint")
        #expect(problems(crossmint) == ["issuers.bridge.wallets[0]: a crossmint issuer provisions only for apple_pay"])
        // A rule for one wallet to an issuer not used for it could never serve a card.
        let rule = with("    wallets: [apple_pay]") + "\nrouting:\n  rules:\n    - { match: { wallet: google_pay }, issuer: bridge }\n"
        #expect(problems(rule) == ["routing.rules[0].issuer: issuers.bridge is not used for google_pay (its wallets)"])
    }

    @Test func theVaultKeyRingHasOneActiveKeyAndUniqueIDs() {
        let base = Self.minimal.replacingOccurrences(of: "vault:\n  key: env:VAULT_KEY", with: "")
        let none = base + "\nvault:\n  keys:\n    - { id: k1, key: env:K1 }\n    - { id: k1, key: env:K2 }\n"
        #expect(problems(none) == [
            "vault.keys[1].id: duplicate key id 'k1'",
            "vault.keys: exactly one key must be active: true (it seals; the others only open)",
        ])
        let good = base + "\nvault:\n  keys:\n    - { id: k1, key: env:K1 }\n    - { id: k2, key: env:K2, active: true }\n"
        #expect(problems(good) == [])
        // `key` is the active key `default`: another active key next to it is one too many.
        #expect(problems(Self.minimal + "\n  keys:\n    - { id: k2, key: env:K2, active: true }\n")
            == ["vault.keys: exactly one key must be active: true (it seals; the others only open)"])
    }

    @Test func oneUpstreamAccountIsOneIssuer() {
        let twice = Self.minimal.replacingOccurrences(of: "issuers:\n", with: """
            issuers:
              bridge_b:
                kind: bridge
                endpoints: [ { url: https://api.bridge.xyz/v0 } ]
                credentials: { api_key: env:BRIDGE_API_KEY }

            """)
        #expect(problems(twice) == [
            "issuers.bridge_b: the same account as issuers.bridge (same endpoint and credentials): one upstream account is one issuer, limit it with programs: instead",
        ])
        // Another account (its own key) at the same endpoint is another issuer.
        let ownKey = twice.replacingOccurrences(of: "{ api_key: env:BRIDGE_API_KEY }", with: "{ api_key: env:BRIDGE_B_KEY }")
        #expect(problems(ownKey) == [])
        // The endpoint compared as the upstream it names, not as written (the isolation audit).
        for spelling in ["https://API.bridge.xyz:443/v0/", "HTTPS://api.bridge.xyz./v0"] {
            #expect(problems(twice.replacingOccurrences(of: "url: https://api.bridge.xyz/v0 }", with: "url: \"\(spelling)\" }")) == [
                "issuers.bridge_b: the same account as issuers.bridge (same endpoint and credentials): one upstream account is one issuer, limit it with programs: instead",
            ], "\(spelling)")
        }
        for another in ["https://api.bridge.xyz/v1", "https://api.bridge.xyz/v0%2F", "https://api.bridge.xyz:8443/v0"] {
            #expect(problems(twice.replacingOccurrences(of: "url: https://api.bridge.xyz/v0 }", with: "url: \"\(another)\" }")) == [], "\(another)")
        }
        // Two variables holding one key are one account too: start-up compares their values,
        // never showing them.
        let config = try? ConfigLoader.parse(yaml: ownKey, source: "t.yaml")
        let same = UpstreamDirectory.sameAccountProblems(config: config!, environment: ["BRIDGE_API_KEY": "sk_same", "BRIDGE_B_KEY": " sk_same\n"])
        #expect(same.map(\.description) == ["issuers.bridge_b.credentials: the same account as issuers.bridge (same endpoint, and its variables "
            + "hold the same credentials): one upstream account is one issuer, limit it with programs: instead"])
        #expect(UpstreamDirectory.sameAccountProblems(config: config!, environment: ["BRIDGE_API_KEY": "sk_a", "BRIDGE_B_KEY": "sk_b"]).isEmpty)
    }

    @Test func theSandboxListensOnLoopbackOnly() {
        let yaml = Self.minimal + "\nserver:\n  host: 0.0.0.0\n  allow_plaintext: true\nsandbox:\n  enabled: true\n"
        #expect(problems(yaml) == ["sandbox.enabled: the sandbox's demo keys are public: it listens on loopback only (server.host)"])
    }

    /// One client activating without a card (its `programs`), its activations routed to one TMP
    /// account, `issuers.bridge`, serving `account` (every program when nil).
    static func activationsWithoutACard(client programs: String, account: String?) -> String {
        minimal
            .replacingOccurrences(of: "programs: [acme]", with: "programs: \(programs)\n    activations_without_card: true")
            .replacingOccurrences(of: "kind: bridge", with: "kind: tmp")
            .replacingOccurrences(of: "api_key: env:BRIDGE_API_KEY", with: "token: env:TMP_TOKEN" + (account.map { "\n    programs: \($0)" } ?? ""))
            + "\nrouting:\n  activations: { issuer: bridge }\n"
    }

    @Test func activationsWithoutACardGoOnlyToAnAccountServingTheClientsPrograms() {
        let yaml = Self.activationsWithoutACard(client: "[acme, beta]", account: "[acme]")
        #expect(problems(yaml) == ["clients[0].activations_without_card: routing.activations.issuer bridge does not serve program(s) beta of this client"])
    }

    @Test func twoClientsNeverShareAKey() {
        let hash = "1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d"
        let yaml = Self.minimal.replacingOccurrences(of: "issuers:", with: """
              - id: ops
                api_key_sha256: \(hash.uppercased())
                admin: true
            issuers:
            """)
        #expect(problems(yaml) == ["clients[1].api_key_sha256: the same key as client 'acme': every client needs its own key"])
    }

    /// A token reference alone cannot be tied to a program: the account activations without a
    /// card go to must be limited to programs, all of them the client's.
    @Test func activationsWithoutACardNeverGoToAnAccountOtherProgramsUse() {
        let unlimited = Self.activationsWithoutACard(client: "[acme]", account: nil)
        #expect(problems(unlimited) == ["clients[0].activations_without_card: routing.activations.issuer bridge serves every program: list its "
            + "account's programs (issuers.bridge.programs), all of them this client's, so a token reference can only be one of its own"])
        let shared = Self.activationsWithoutACard(client: "[acme]", account: "[acme, beta]")
        #expect(problems(shared) == ["clients[0].activations_without_card: routing.activations.issuer bridge also serves program(s) beta "
            + "of other clients: a token reference alone could be theirs"])
        #expect(problems(Self.activationsWithoutACard(client: "[acme]", account: "[acme]")) == [])
    }

    @Test func postgresSSLModesAreNamed() {
        let yaml = Self.minimal + "\nstore:\n  postgres:\n    url: postgres://gw@db.example.com/gw?sslmode=prefer\n"
        #expect(problems(yaml) == ["store.postgres.url: sslmode must be disable, require or verify-full"])
    }

    /// A public `/metrics` names every client: with several tenants that is worth a warning (at
    /// `config check` and at start-up, which print `advisories`); with one, as in the sandbox that
    /// ships, or behind an admin key, it is not. The warning names no client.
    @Test func aPublicMetricsEndpointBesideSeveralTenantsIsWarnedOf() throws {
        let shared = try SandboxTestConfig.config()
        #expect(shared.server.metricsPublic)
        let warning = try #require(shared.advisories.first { $0.hasPrefix("server.metrics_public") }, "\(shared.advisories)")
        #expect(warning.contains("2 clients that are not admin ones"), "\(warning)")
        #expect(!warning.contains("demo") && !warning.contains("other"), "\(warning)")
        var alone = shared
        alone.clients.removeAll { $0.id == "other" }
        #expect(!alone.advisories.contains { $0.hasPrefix("server.metrics_public") }, "\(alone.advisories)")
        var keyed = shared
        keyed.server.metricsPublic = false
        #expect(!keyed.advisories.contains { $0.hasPrefix("server.metrics_public") }, "\(keyed.advisories)")
    }
}
