import Foundation
import GatewayStore
import GRDB
import GatewayTestSupport
import ProvisioningCore
import Testing

/// `config check` and `route explain`, run as the real executable.
@Suite struct OpsCommandLineTests {
    /// `sandbox device` writes the leaf's private key for its owner alone (it was 0644): it opens
    /// every pass the gateway encrypts for that device.
    @Test func theSandboxDevicesKeyIsItsOwnersAlone() async throws {
        let directory = TestDirectories.root.appendingPathComponent("device-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let made = try await CommandLineTests.run(["sandbox", "device", "--out", directory.path])
        #expect(made.status == 0, "\(made.stderr)")
        let key = directory.appendingPathComponent("leaf-key.pem").path
        #expect(try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int == 0o600)
    }

    /// `sandbox decrypt` reads the key and the answer through the bounded read every whole-file
    /// read uses: a device is refused unread (it had read `/dev/zero` until memory ran out).
    @Test func theSandboxToolsReadBoundedFiles() async throws {
        let directory = TestDirectories.root.appendingPathComponent("device-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try await CommandLineTests.run(["sandbox", "device", "--out", directory.path]).status == 0)
        let key = directory.appendingPathComponent("leaf-key.pem").path
        let run = try await CommandLineTests.run(["sandbox", "decrypt", "--key", key, "--response", "/dev/zero"])
        #expect(run.status != 0 && run.stderr.contains("/dev/zero: not a file (a device or a directory)"), "\(run.stderr)")
    }

    @Test func theSandboxFileChecksWithASummary() async throws {
        let run = try await CommandLineTests.run(["config", "check", "--config", "Config/gateway.yaml"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("configuration Config/gateway.yaml is valid"), "\(run.stdout)")
        #expect(run.stdout.contains("bridge (bridge, 1 endpoint)"), "\(run.stdout)")
        #expect(run.stdout.contains("clients: "), "\(run.stdout)")
        #expect(run.stdout.contains("routing rules: 0"), "\(run.stdout)")
        // Neither the store nor a listener was opened.
        #expect(!run.stdout.contains("listening on"))
        // Secrets (and key hashes) never appear.
        #expect(!run.stdout.contains("b9634daeab30e55282cf9bcc0fce703135ff46e4f8bcdc798370b8efeafb9757"))
    }

    @Test func everyKindOfProblemIsListedWithItsKeyPath() async throws {
        let file = try CommandLineTests.writeConfig("""
            server:
              prot: 8080
              tls: { certificate: nowhere/cert.pem, private_key: nowhere/key.pem }
            clients:
              - { id: acme, api_key_sha256: 1a2ac1341df9c063a0e169f53446988d5374273383dbaa08b678dbb584cea68d, programs: [acme] }
            issuers:
              bridge:
                kind: bridge
                endpoints: [ { url: "::nope" } ]
                credentials: { api_key: "env:GATEWAY_TEST_BRIDGE_KEY_UNSET" }
                tls: { ca_file: nowhere/upstream-ca.pem }
              tmp:
                kind: tmp
                endpoints: [ { url: "https://tmp.example.com/v1" } ]
                credentials: { token: "env:GATEWAY_TEST_TMP_TOKEN_UNSET" }
            routing:
              rules:
                - { match: { program: acme }, issuer: tmp }
                - { match: { program: acme, card_id_prefix: c_ }, issuer: bridge }
                - { match: { wallet: google_pay }, issuer: stripe }
            vault: { key: "env:GATEWAY_TEST_VAULT_KEY_UNSET" }
            trust: { anchors: [apple, nowhere/anchor.pem] }
            store:
              postgres: { url: "postgres://gateway@db.example.com:5432/gateway", ca_file: nowhere/db-ca.pem }
            """)
        defer { try? FileManager.default.removeItem(at: file) }
        // Start-up lists the same problems: it had named the file's own alone, and the
        // environment's and files' only once those were fixed.
        for command in [["config", "check"], ["serve"]] {
            let run = try await CommandLineTests.run(command + ["--config", file.path])
            #expect(run.status == 2, "\(command)")
            let directory = file.deletingLastPathComponent().path
            for problem in [
                "server.prot: unknown key",
                "issuers.bridge.endpoints[0].url: not a URL",
                "routing.rules[1].match: never matches: routing.rules[0] comes first and matches every card this rule would",
                "routing.rules[2].issuer: unknown issuer 'stripe'",
                "issuers.tmp.credentials.token: environment variable GATEWAY_TEST_TMP_TOKEN_UNSET is not set",
                "vault.key: environment variable GATEWAY_TEST_VAULT_KEY_UNSET is not set",
                "trust.anchors[1]: cannot load a certificate from 'nowhere/anchor.pem'",
                "server.tls.certificate: cannot read \(directory)/nowhere/cert.pem",
                "server.tls.private_key: cannot read \(directory)/nowhere/key.pem",
                "issuers.bridge.tls.ca_file: cannot read \(directory)/nowhere/upstream-ca.pem",
                "store.postgres.ca_file: cannot read \(directory)/nowhere/db-ca.pem",
            ] {
                #expect(run.stderr.contains(problem), "missing: \(problem)\n\(run.stderr)")
            }
            #expect(run.stderr.contains("invalid configuration \(file.path)"), "\(run.stderr)")
            #expect(run.stdout.isEmpty)
        }
    }

    /// The activation data's key may not be a vault key: `config check` says so as `serve` does
    /// (it had said valid for a file `serve` refused; the CLI audit), and takes a key of its own.
    @Test func anActivationKeyThatIsAVaultKeyIsAProblemForConfigCheckToo() async throws {
        let vaultKey = (0..<32).map { String(format: "%02x", $0 + 0x40) }.joined()
        let file = try CommandLineTests.writeConfig(CommandLineTests.productionYAML + "\nlocal: { enabled: true, activation_key: env:GATEWAY_TEST_ACTIVATION_KEY }\n")
        defer { try? FileManager.default.removeItem(at: file) }
        for (activation, refused) in [(vaultKey, true), ((0..<32).map { String(format: "%02x", 0xff - $0) }.joined(), false)] {
            let environment = ["GATEWAY_TEST_BRIDGE_KEY_UNSET": "key", "GATEWAY_TEST_VAULT_KEY_UNSET": vaultKey, "GATEWAY_TEST_ACTIVATION_KEY": activation]
            let run = try await CommandLineTests.run(["config", "check", "--config", file.path], environment: environment)
            #expect((run.status == 2) == refused, "\(run.stdout)\(run.stderr)")
            #expect(run.stderr.contains("local.activation_key: holds the same key as a vault key") == refused, "\(run.stderr)")
        }
    }

    /// A shutdown timeout shorter than the longest deadline + 5 s is valid but may cut requests off
    /// at a shutdown: `config check` warns naming both values, and a timeout at that bound does not.
    @Test func aShutdownTimeoutShorterThanTheLongestDeadlineIsWarnedOf() async throws {
        let environment = ["GATEWAY_TEST_BRIDGE_KEY_UNSET": "key", "GATEWAY_TEST_VAULT_KEY_UNSET": (0..<32).map { String(format: "%02x", $0 + 0x40) }.joined()]
        let rule = "\nrouting: { rules: [ { match: { program: acme }, issuer: bridge, deadline_ms: 20000 } ] }\n"
        // The default's 5 s past the deadline are what let a request's last writes land: under them is warned of too.
        for (timeout, warned) in [(9_000, true), (24_999, true), (25_000, false)] {
            let file = try CommandLineTests.writeConfig(CommandLineTests.productionYAML + rule + "server: { shutdown_timeout_ms: \(timeout) }\n")
            defer { try? FileManager.default.removeItem(at: file) }
            let run = try await CommandLineTests.run(["config", "check", "--config", file.path], environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
            let warning = "warning: server.shutdown_timeout_ms (\(timeout)) is shorter than the longest deadline + 5 s (25000 ms)"
            #expect(run.stderr.contains(warning) == warned, "\(run.stderr)")
        }
    }

    /// The PostgreSQL URL's own `env:` variable is a secret like the others: named before anything connects.
    @Test func anUnsetPostgresURLVariableIsNamed() async throws {
        let file = try CommandLineTests.writeConfig(CommandLineTests.productionYAML + "\nstore: { postgres: { url: env:GATEWAY_TEST_PG_URL_UNSET } }\n")
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await CommandLineTests.run(["config", "check", "--config", file.path])
        #expect(run.status == 2)
        #expect(run.stderr.contains("store.postgres.url: environment variable GATEWAY_TEST_PG_URL_UNSET is not set"), "\(run.stderr)")
    }

    @Test func missingEnvironmentVariablesAreNamedAndPresentOnesPass() async throws {
        let file = try CommandLineTests.writeConfig(CommandLineTests.productionYAML)
        defer { try? FileManager.default.removeItem(at: file) }
        let missing = try await CommandLineTests.run(["config", "check", "--config", file.path])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("issuers.bridge.credentials.api_key: environment variable GATEWAY_TEST_BRIDGE_KEY_UNSET is not set"))
        #expect(missing.stderr.contains("vault.key: environment variable GATEWAY_TEST_VAULT_KEY_UNSET is not set"))

        let secret = "bridge-secret-never-printed"
        let present = try await CommandLineTests.run(["config", "check", "--config", file.path], environment: [
            "GATEWAY_TEST_BRIDGE_KEY_UNSET": secret,
            "GATEWAY_TEST_VAULT_KEY_UNSET": (0..<32).map { String(format: "%02x", $0 + 0x40) }.joined(),
        ])
        #expect(present.status == 0, "\(present.stderr)")
        #expect(present.stdout.contains("issuers: bridge (bridge, 1 endpoint)"), "\(present.stdout)")
        #expect(!present.stdout.contains(secret) && !present.stderr.contains(secret))
    }

    @Test func routeExplainReadsTheRegistryOffline() async throws {
        let (file, database) = try StoreCommandLineTests.sandboxConfig()
        let directory = file.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: directory) }
        let yaml = try String(contentsOf: file, encoding: .utf8).replacingOccurrences(of: "  rules: []\n", with: """
              rules:
                - { match: { wallet: google_pay }, issuer: tmp }
                - { match: { program: demo }, issuer: bridge, deadline_ms: 9000 }

            """)
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        let csv = directory.appendingPathComponent("cards.csv")
        try "card_id,program,issuer,customer_id,card_account_id,issuer_card_id\nexplained_1,demo,tmp,,,tmp_explained_1\n"
            .write(to: csv, atomically: true, encoding: .utf8)
        let imported = try await CommandLineTests.run(["cards", "import", "--config", file.path, csv.path])
        #expect(imported.status == 0, "\(imported.stderr)")

        let run = try await CommandLineTests.run(["route", "explain", "--config", file.path, "--card-id", "explained_1", "--wallet", "apple_pay"])
        #expect(run.status == 0, "\(run.stderr)")
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout)")
        // The card names its issuer; the first matching rule still gives the deadline.
        #expect(answer["issuer"] as? String == "tmp")
        #expect(answer["decided_by"] as? String == "card")
        #expect(answer["rule"] == nil)
        #expect(answer["deadline_ms"] as? Int == 9000)
        let checked = try #require(answer["rules_checked"] as? [[String: Any]])
        #expect(checked.count == 2)
        #expect(checked[0]["mismatches"] as? [String] == ["wallet is apple_pay, the rule wants google_pay"])
        let endpoints = try #require(answer["endpoints"] as? [[String: Any]])
        #expect(!endpoints.isEmpty && endpoints.allSatisfy { $0["breaker"] == nil })

        let unknown = try await CommandLineTests.run(["route", "explain", "--config", file.path, "--card-id", "nobody", "--wallet", "apple_pay"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("card nobody is not in the registry"), "\(unknown.stderr)")

        // Both reads are security events by the command line's user, the unknown card's too.
        let store = try await SQLiteGatewayStore.open(path: database)
        let reads = try await store.securityEvents(SecurityEventQuery(kind: .adminRead))
        #expect(reads.map { $0.cardID?.rawValue } == ["explained_1", "nobody"])
        #expect(reads.allSatisfy { $0.actor.hasPrefix("cli:") && $0.detail["path"] == "route explain" })
    }

    /// `route explain` only reads: a store path that names no file is said so (it had been
    /// created and migrated), and a store whose schema is not this version's is not migrated.
    @Test func routeExplainNeitherCreatesNorMigratesAStore() async throws {
        let (file, database) = try StoreCommandLineTests.sandboxConfig()
        let directory = file.deletingLastPathComponent()
        defer { try? FileManager.default.removeItem(at: directory) }
        try? FileManager.default.removeItem(atPath: database)
        let missing = try await CommandLineTests.run(["route", "explain", "--config", file.path, "--card-id", "c1", "--wallet", "apple_pay"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("no SQLite store at"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: database))
        // An empty SQLite database: no schema at all, and none is made.
        FileManager.default.createFile(atPath: database, contents: Data())
        let old = try await CommandLineTests.run(["route", "explain", "--config", file.path, "--card-id", "c1", "--wallet", "samsung_pay"])
        #expect(old.status == 2)
        #expect(old.stderr.contains("the file holds no tables: not a store the gateway made"), "\(old.stderr)")
        #expect(try await SQLiteGatewayStore(path: database).schemaVersions() == [])

        // A store an older gateway migrated (this version's last migration not applied) is read by
        // no one and left where it was, where a migrating opening would have applied the last.
        try FileManager.default.removeItem(atPath: database)
        try await SQLiteGatewayStore(path: database).migrate()
        let schema = StoreBootstrap.currentSchema
        try await TestSQLite.queue(database).write { db in
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = ?", arguments: [schema.last ?? ""])
        }
        let older = try await CommandLineTests.run(["route", "explain", "--config", file.path, "--card-id", "c1", "--wallet", "apple_pay"])
        #expect(older.status == 2)
        #expect(older.stderr.contains("its schema (\(schema.dropLast().last ?? "")) is not this version's (\(schema.last ?? ""))"), "\(older.stderr)")
        #expect(try await SQLiteGatewayStore(path: database).schemaVersions().last == schema.dropLast().last)

        // A store a newer gateway migrated (a version this one does not know) is read by no one,
        // and nothing is written to it: no admin_read event (the CLI audit saw both).
        try FileManager.default.removeItem(atPath: database)
        try await SQLiteGatewayStore(path: database).migrate()
        try await TestSQLite.queue(database).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('999_from_the_future')")
        }
        let newer = try await CommandLineTests.run(["route", "explain", "--config", file.path, "--card-id", "c1", "--wallet", "apple_pay"])
        #expect(newer.status == 2 && newer.stderr.contains("999_from_the_future"), "\(newer.stdout)\(newer.stderr)")
        #expect(try await SQLiteGatewayStore(path: database).securityEvents(SecurityEventQuery()).isEmpty)
        let checked = try await CommandLineTests.run(["store", "check", "--config", file.path])
        #expect(checked.status == 2 && checked.stderr.contains("newer gateway"), "\(checked.stdout)\(checked.stderr)")
    }
}
